//===- ParserGuard.h - input the MLIR 19 parser cannot take safely --------------===//
#ifndef MED_IR_PARSERGUARD_H
#define MED_IR_PARSERGUARD_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mlir::med {

/// Syntax that crashes Debian's MLIR 19 parser or printer instead of being diagnosed, found
/// before parsing: today a dense i1 array whose elements are not `true`/`false`
/// (`array<i1: 0, 1>` — llvm/llvm-project#173373, fixed after MLIR 19). Returns the offset
/// of the offending text and what to write instead, or nothing.
struct UnsafeSyntax {
  size_t offset;
  std::string message;
};
std::optional<UnsafeSyntax> findUnsafeSyntax(llvm::StringRef source);

} // namespace mlir::med

#endif // MED_IR_PARSERGUARD_H
