// Errors as values for the pipeline layer (which has no CAF): Status and Expected<T>.
// The actor layers convert a Status into a caf::error at their boundary (messages/errors.hpp).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace conveyor {

enum class ErrorCode : unsigned char {
  ok = 0,
  invalid_argument,    // a user-supplied argument is malformed (like Python's ValueError)
  not_found,           // a named thing (dataset id, function, file, job) does not exist
  already_exists,      // e.g. a requested dataset id that names another definition
  out_of_range,        // an index past the end
  data_loss,           // corrupt or truncated data (TFRecord CRC, codec buffers, journals)
  unavailable,         // not ready yet, retry later (e.g. a split that has not arrived)
  failed_precondition, // the operation is not valid in the current state
  unimplemented,       // "not supported yet"
  internal,            // a bug
  io_error,            // the OS refused a file or socket operation
  version_mismatch,    // a peer or a file speaks another format/protocol version
  deadline_exceeded,   // a bounded wait ran out
  cancelled,           // the operation was stopped on purpose
  permission_denied,   // not admitted: a path outside --allow-path, a missing or wrong token
  resource_exhausted,  // a limit was reached (a job's memory budget, a message or graph size)
};

const char* to_string(ErrorCode code);

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status{}; }

  bool ok() const { return code_ == ErrorCode::ok; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid_argument: `batch_size` must be positive, got 0"
  std::string to_string() const;

  // Prefixes the message with context, e.g. status.with_context("while reading a.tfrecord").
  Status with_context(const std::string& context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

private:
  ErrorCode code_ = ErrorCode::ok;
  std::string message_;
};

inline Status invalid_argument(std::string m) {
  return {ErrorCode::invalid_argument, std::move(m)};
}
inline Status not_found(std::string m) { return {ErrorCode::not_found, std::move(m)}; }
inline Status data_loss(std::string m) { return {ErrorCode::data_loss, std::move(m)}; }
inline Status unavailable(std::string m) { return {ErrorCode::unavailable, std::move(m)}; }
inline Status unimplemented(std::string m) { return {ErrorCode::unimplemented, std::move(m)}; }
inline Status internal_error(std::string m) { return {ErrorCode::internal, std::move(m)}; }
inline Status io_error(std::string m) { return {ErrorCode::io_error, std::move(m)}; }
inline Status failed_precondition(std::string m) {
  return {ErrorCode::failed_precondition, std::move(m)};
}
inline Status out_of_range(std::string m) { return {ErrorCode::out_of_range, std::move(m)}; }
inline Status permission_denied(std::string m) {
  return {ErrorCode::permission_denied, std::move(m)};
}
inline Status resource_exhausted(std::string m) {
  return {ErrorCode::resource_exhausted, std::move(m)};
}

// A value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Expected {
public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; Status::OK() when a value is present.
  Status status() const { return ok() ? Status::OK() : std::get<1>(v_); }

private:
  std::variant<T, Status> v_;
};

} // namespace conveyor

// Early return of a non-OK Status from a function returning Status or Expected<T>.
#define CONVEYOR_RETURN_IF_ERROR(expr)                                                             \
  do {                                                                                             \
    ::conveyor::Status _st = (expr);                                                               \
    if (!_st.ok())                                                                                 \
      return _st;                                                                                  \
  } while (false)
