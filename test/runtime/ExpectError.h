//===- ExpectError.h - asserting that a statement throws medrun::Error naming things --===//
#ifndef MEDRUN_TEST_EXPECTERROR_H
#define MEDRUN_TEST_EXPECTERROR_H

#include "medrun/Error.h"

#include "gtest/gtest.h"

#include <functional>
#include <string>

namespace medrun::test {

/// The message of the medrun::Error `fn` throws; a test failure if it throws none.
inline std::string errorOf(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a medrun::Error";
  return "";
}

} // namespace medrun::test

/// `stmt` throws a medrun::Error whose message holds every one of the given parts.
#define EXPECT_ERROR(stmt, ...)                                                                \
  do {                                                                                         \
    std::string msg_ = ::medrun::test::errorOf([&] { stmt; });                                 \
    for (const char *part_ : {__VA_ARGS__})                                                    \
      EXPECT_NE(msg_.find(part_), std::string::npos)                                           \
          << "message '" << msg_ << "' lacks '" << part_ << "'";                             \
  } while (0)

#endif // MEDRUN_TEST_EXPECTERROR_H
