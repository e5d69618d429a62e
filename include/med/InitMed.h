//===- InitMed.h - dialects and passes every med tool registers -----------------===//
#ifndef MED_INITMED_H
#define MED_INITMED_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::med {
/// The dialects (and their extensions) that med programs use.
void registerMedDialects(DialectRegistry &registry);
/// Every med- pass plus the upstream passes the pipelines use (inline, canonicalize, cse,
/// symbol-dce).
void registerAllMedPasses();
} // namespace mlir::med

#endif // MED_INITMED_H
