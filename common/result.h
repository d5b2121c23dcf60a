#pragma once
// One error type for the daemon and the CLI: a Result<T> holds a value or an Error. Modules
// return these across their boundaries instead of throwing.

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

namespace akad {

struct Error {
  std::string message;
  int code = 0;  // protocol error code where one applies (see common/protocol.h), else 0
  // The errno of the failed system call this error reports (as crun's error object keeps it),
  // so that a caller can tell ENOENT from EACCES without parsing the message; 0 when the
  // error is not a system call's.
  int sysErrno = 0;
};

// "what was attempted: strerror(errno)" — the nsjail PLOG habit for messages that end in errno text.
inline Error errnoError(const std::string& what, int err = errno) {
  return Error{what + ": " + std::strerror(err), 0, err};
}

// The same for a std::error_code from the filesystem library: "what: message", with the
// errno kept when the code is one (system or generic category).
inline Error errorCodeError(const std::string& what, const std::error_code& ec) {
  const bool isErrno = ec.category() == std::system_category() || ec.category() == std::generic_category();
  return Error{what + ": " + ec.message(), 0, isErrno ? ec.value() : 0};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

using Status = Result<void>;

}  // namespace akad
