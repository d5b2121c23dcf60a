#pragma once
// A thin RAII layer over the SQLite C API: a connection, prepared statements, and errors that
// name the SQL that failed. No exceptions; every call returns Result/Status.

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace akad::sqlite {

class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement(Statement&& o) noexcept;
  Statement& operator=(Statement&& o) noexcept;
  ~Statement();

  // Bind parameters by 1-based index.
  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, const std::string& text) { return bind(index, std::string_view(text)); }
  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, const std::optional<std::string>& text);
  Statement& bind(int index, const std::optional<std::int64_t>& value);
  Statement& bindNull(int index);

  // Advances one row: true with a row available, false when done.
  Result<bool> step();
  // Runs a statement that returns no rows.
  Status run();
  // Makes the statement ready to run again with new bindings.
  void reset();

  std::string text(int column) const;
  std::optional<std::string> optionalText(int column) const;
  std::int64_t integer(int column) const;
  std::optional<std::int64_t> optionalInteger(int column) const;

 private:
  Error error(const char* what) const;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  Status bindStatus_;
};

class Database {
 public:
  static Result<Database> open(const std::filesystem::path& path);
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  Database(Database&& o) noexcept;
  Database& operator=(Database&& o) noexcept;
  ~Database();

  Result<Statement> prepare(std::string_view sql);
  // Runs one or more statements with no parameters and no rows (schema, pragmas).
  Status exec(std::string_view sql);
  std::int64_t lastInsertRowid() const;
  const std::filesystem::path& path() const { return path_; }

 private:
  Database(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit() succeeded.
class Transaction {
 public:
  static Result<Transaction> begin(Database& db);
  Transaction(Transaction&& o) noexcept : db_(std::exchange(o.db_, nullptr)) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  Status commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;
};

}  // namespace akad::sqlite
