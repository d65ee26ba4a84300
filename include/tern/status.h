// tern/status.h — recoverable errors as values (public API; src/core/status.h includes it).
//
// Contract: library code reports failures a user can act on (bad file, bad
// flag, bad request) through Status / Result<T>; it never throws across a
// module boundary and never calls exit(). The ErrorKind is what the CLI and,
// later, the server map to exit codes and HTTP statuses in one place.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace tern {

enum class ErrorKind {
  Ok,
  InvalidArgument,  // the caller passed something unusable (flag, parameter)
  InvalidFile,      // a file exists but its content is malformed
  NotFound,         // a file, key or tensor is absent
  Unsupported,      // well-formed but not implemented (type, architecture)
  IoError,          // the OS refused (open, mmap, write)
  OutOfRange,       // a value or size outside what is allowed
  Unavailable,      // cannot serve now (shutting down, overloaded); retrying later may work
  Internal,
};

const char* error_kind_name(ErrorKind kind);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return kind_ == ErrorKind::Ok; }
  explicit operator bool() const { return is_ok(); }
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }

  // Prefixes context ("reading foo.gguf: ") so the final message names where.
  Status with_context(const std::string& context) const {
    if (is_ok()) return *this;
    return Status(kind_, context + ": " + message_);
  }

 private:
  ErrorKind kind_ = ErrorKind::Ok;
  std::string message_;
};

inline Status error(ErrorKind kind, std::string message) { return Status(kind, std::move(message)); }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).is_ok()); }  // NOLINT

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tern

// Propagate a failed Status/Result from the enclosing function.
namespace tern::detail {
inline const Status& as_status(const Status& s) { return s; }
template <typename T>
const Status& as_status(const Result<T>& r) { return r.status(); }
}  // namespace tern::detail

#define TERN_RETURN_IF_ERROR(expr)                                            \
  do {                                                                        \
    const auto& tern_status_ = (expr);                                        \
    if (!tern_status_.is_ok()) return ::tern::detail::as_status(tern_status_); \
  } while (0)
