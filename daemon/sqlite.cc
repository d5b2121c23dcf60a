#include "daemon/sqlite.h"

#include <utility>

#include "common/log.h"

namespace akad::sqlite {

Statement::Statement(Statement&& o) noexcept
    : db_(std::exchange(o.db_, nullptr)), stmt_(std::exchange(o.stmt_, nullptr)),
      bindStatus_(std::move(o.bindStatus_)) {}

Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    db_ = std::exchange(o.db_, nullptr);
    stmt_ = std::exchange(o.stmt_, nullptr);
    bindStatus_ = std::move(o.bindStatus_);
  }
  return *this;
}

Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Error Statement::error(const char* what) const {
  const char* sql = stmt_ != nullptr ? sqlite3_sql(stmt_) : "";
  return Error{std::string("sqlite ") + what + " failed: " + sqlite3_errmsg(db_) + " (in: " +
                   (sql != nullptr ? sql : "") + ")",
               0};
}

Statement& Statement::bind(int index, std::string_view text) {
  if (bindStatus_ && sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()),
                                       SQLITE_TRANSIENT) != SQLITE_OK) {
    bindStatus_ = error("bind");
  }
  return *this;
}

Statement& Statement::bind(int index, std::int64_t value) {
  if (bindStatus_ && sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) bindStatus_ = error("bind");
  return *this;
}

Statement& Statement::bind(int index, const std::optional<std::string>& text) {
  return text ? bind(index, std::string_view(*text)) : bindNull(index);
}

Statement& Statement::bind(int index, const std::optional<std::int64_t>& value) {
  return value ? bind(index, *value) : bindNull(index);
}

Statement& Statement::bindNull(int index) {
  if (bindStatus_ && sqlite3_bind_null(stmt_, index) != SQLITE_OK) bindStatus_ = error("bind");
  return *this;
}

Result<bool> Statement::step() {
  if (!bindStatus_) return bindStatus_.error();
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return error("step");
}

Status Statement::run() {
  auto r = step();
  if (!r) return r.error();
  return {};
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bindStatus_ = Status();
}

std::string Statement::text(int column) const {
  const unsigned char* t = sqlite3_column_text(stmt_, column);
  if (t == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(t),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::optional<std::string> Statement::optionalText(int column) const {
  if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) return std::nullopt;
  return text(column);
}

std::int64_t Statement::integer(int column) const { return sqlite3_column_int64(stmt_, column); }

std::optional<std::int64_t> Statement::optionalInteger(int column) const {
  if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) return std::nullopt;
  return integer(column);
}

Result<Database> Database::open(const std::filesystem::path& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = "cannot open database " + path.string() + ": " +
                      (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return Error{msg, 0};
  }
  // Another process (an admin's sqlite3 shell) may hold a lock briefly; wait instead of failing.
  sqlite3_busy_timeout(db, 5000);
  return Database(db, path);
}

Database::Database(Database&& o) noexcept
    : db_(std::exchange(o.db_, nullptr)), path_(std::move(o.path_)) {}

Database& Database::operator=(Database&& o) noexcept {
  if (this != &o) {
    if (db_ != nullptr) sqlite3_close(db_);
    db_ = std::exchange(o.db_, nullptr);
    path_ = std::move(o.path_);
  }
  return *this;
}

Database::~Database() {
  if (db_ != nullptr && sqlite3_close(db_) != SQLITE_OK) {
    log::error("closing database ", path_.string(), ": ", sqlite3_errmsg(db_));
  }
}

Result<Statement> Database::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) != SQLITE_OK) {
    return Error{"sqlite prepare failed: " + std::string(sqlite3_errmsg(db_)) + " (in: " +
                     std::string(sql) + ")",
                 0};
  }
  return Statement(db_, stmt);
}

Status Database::exec(std::string_view sql) {
  char* err = nullptr;
  std::string s(sql);
  if (sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = "sqlite failed on " + path_.string() + ": " + (err != nullptr ? err : "?") +
                      " (in: " + s.substr(0, 200) + ")";
    sqlite3_free(err);
    return Error{msg, 0};
  }
  return {};
}

std::int64_t Database::lastInsertRowid() const { return sqlite3_last_insert_rowid(db_); }

Result<Transaction> Transaction::begin(Database& db) {
  // IMMEDIATE takes the write lock now, so a busy database fails here rather than at COMMIT.
  if (auto s = db.exec("BEGIN IMMEDIATE"); !s) return s.error();
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (db_ != nullptr) {
    if (auto s = db_->exec("ROLLBACK"); !s) log::error("rollback: ", s.error().message);
  }
}

Status Transaction::commit() {
  if (db_ == nullptr) return Error{"transaction already finished", 0};
  auto s = db_->exec("COMMIT");
  if (s) db_ = nullptr;
  return s;
}

}  // namespace akad::sqlite
