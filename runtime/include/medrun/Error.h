//===- Error.h - the runtime's error type ----------------------------------------===//
//
// Every user-facing failure (bad file, wrong shape, unknown key) is a medrun::Error whose
// message names the file, tensor or key and what was expected. Tools catch it at the top,
// print it and exit non-zero.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_ERROR_H
#define MEDRUN_ERROR_H

#include <sstream>
#include <stdexcept>
#include <string>

namespace medrun {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Builds a message from streamable parts: `throw Error(str("tensor ", name, ": ..."))`.
template <typename... Parts> std::string str(const Parts &...parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

} // namespace medrun

#endif // MEDRUN_ERROR_H
