//===- InitMed.cpp - the passes every med tool registers ------------------------===//
#include "med/InitMed.h"
#include "med/Transforms/Passes.h"

#include "mlir/Transforms/Passes.h"

void mlir::med::registerAllMedPasses() {
  registerMedPasses();
  registerMedPipelines();
  registerInlinerPass();
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();
}
