//===- med-opt.cpp - mlir-opt for the med dialect --------------------------------===//
#include "med/InitMed.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::med::registerMedDialects(registry);
  mlir::med::registerAllMedPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "med-opt: parses, verifies, transforms and prints med programs\n", registry));
}
