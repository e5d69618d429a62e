//===- InitMed.cpp - dialects and passes every med tool registers ---------------===//
#include "med/InitMed.h"
#include "med/IR/MedDialect.h"
#include "med/Transforms/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"

void mlir::med::registerMedDialects(DialectRegistry &registry) {
  registry.insert<MedDialect, func::FuncDialect>();
  func::registerInlinerExtension(registry);
}

void mlir::med::registerAllMedPasses() {
  registerMedPasses();
  registerMedPipelines();
  registerInlinerPass();
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();
}
