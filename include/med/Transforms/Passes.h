//===- Passes.h - passes of the med compiler -----------------------------------===//
#ifndef MED_TRANSFORMS_PASSES_H
#define MED_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::med {

#define GEN_PASS_DECL
#include "med/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "med/Transforms/Passes.h.inc"

} // namespace mlir::med

#endif // MED_TRANSFORMS_PASSES_H
