//===- InitDialects.cpp - the dialects med programs use -------------------------===//
#include "med/InitMed.h"
#include "med/IR/MedDialect.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

void mlir::med::registerMedDialects(DialectRegistry &registry) {
  registry.insert<MedDialect, func::FuncDialect>();
  func::registerInlinerExtension(registry);
}
