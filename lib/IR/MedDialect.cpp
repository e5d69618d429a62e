//===- MedDialect.cpp - the med dialect ----------------------------------------===//
#include "med/IR/MedDialect.h"
#include "med/IR/MedOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::med;

#include "med/IR/MedOpsDialect.cpp.inc"
#include "med/IR/MedEnums.cpp.inc"
#include "med/IR/MedInterfaces.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "med/IR/MedOpsAttributes.cpp.inc"

namespace {
// All med ops are pure functions of their operands, so any of them may be inlined.
struct MedInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final { return true; }
};
} // namespace

void MedDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "med/IR/MedOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "med/IR/MedOpsAttributes.cpp.inc"
      >();
  addInterfaces<MedInlinerInterface>();
}
