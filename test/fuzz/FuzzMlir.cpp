//===- FuzzMlir.cpp - parsing and verifying med programs under libFuzzer ---------===//
//
// What `medc` does first with a model file: parse it with the med dialect registered and run
// the verifier (the shape rules of every op). Diagnostics are the expected outcome of bad
// input and are dropped; a crash, a sanitizer report or a hang is a finding.
//
//===----------------------------------------------------------------------------------===//
#include "med/IR/ParserGuard.h"
#include "med/InitMed.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry();
    mlir::med::registerMedDialects(*r);
    return r;
  }();
  mlir::MLIRContext context(*registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  mlir::ScopedDiagnosticHandler drop(&context, [](mlir::Diagnostic &) { return mlir::success(); });
  std::string text(reinterpret_cast<const char *>(data), size);
  if (mlir::med::findUnsafeSyntax(text)) // refused before parsing, as medc does
    return 0;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, mlir::ParserConfig(&context));
  if (module)
    (void)mlir::verify(*module);
  return 0;
}
