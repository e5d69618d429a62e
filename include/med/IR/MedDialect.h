//===- MedDialect.h - the med dialect ------------------------------------------===//
#ifndef MED_IR_MEDDIALECT_H
#define MED_IR_MEDDIALECT_H

#include "mlir/IR/Dialect.h"

#include "med/IR/MedOpsDialect.h.inc"

#endif // MED_IR_MEDDIALECT_H
