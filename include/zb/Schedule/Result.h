//===- Result.h - Value-or-error return type for the schedule library -*- C++
//-*-===//
//
// The schedule library reports errors through return values (no exceptions):
// a function that can fail returns Result<T>, which holds either a T or a
// one-line error message.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_RESULT_H
#define ZB_SCHEDULE_RESULT_H

#include <cassert>
#include <string>
#include <utility>

namespace zb::schedule {

/// The error half of a Result: a one-line, lower-case message.
struct Failure {
  std::string message;
};

/// Holds either a value of type T or a Failure.
template <typename T> class Result {
public:
  Result(T value) : hasValue(true), value(std::move(value)) {}
  Result(Failure failure)
      : hasValue(false), message(std::move(failure.message)) {}

  explicit operator bool() const { return hasValue; }
  bool ok() const { return hasValue; }

  T &operator*() {
    assert(hasValue && "dereferencing a failed Result");
    return value;
  }
  const T &operator*() const {
    assert(hasValue && "dereferencing a failed Result");
    return value;
  }
  T *operator->() { return &**this; }
  const T *operator->() const { return &**this; }

  /// The error message; empty when the Result holds a value.
  const std::string &error() const { return message; }

private:
  bool hasValue;
  T value{};
  std::string message;
};

} // namespace zb::schedule

#endif // ZB_SCHEDULE_RESULT_H
