//===- FuzzOnnx.cpp - the ONNX importer under libFuzzer -------------------------===//
//
// What `medc import` and `medc compile model.onnx` do first: parse the ModelProto and turn it
// into the med dialect (lib/Import). Each input is read as binary protobuf and, when it is
// text, as protobuf text form too. An error message is the expected outcome of bad input; a
// crash, a sanitizer report, a leak or a hang is a finding.
//
//===----------------------------------------------------------------------------------===//
#include "med/Import/Onnx.h"
#include "med/InitMed.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/Error.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry();
    mlir::med::registerMedDialects(*r);
    return r;
  }();
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  for (bool text : {false, true}) {
    if (text && bytes.find('\0') != llvm::StringRef::npos)
      break;
    mlir::MLIRContext context(*registry, mlir::MLIRContext::Threading::DISABLED);
    mlir::ScopedDiagnosticHandler drop(&context, [](mlir::Diagnostic &) { return mlir::success(); });
    mlir::med::OnnxImportOptions options;
    options.textFormat = text;
    auto module = mlir::med::importOnnx(bytes, "fuzz.onnx", context, options);
    if (!module)
      llvm::consumeError(module.takeError());
  }
  return 0;
}
