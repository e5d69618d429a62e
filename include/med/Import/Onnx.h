//===- Onnx.h - ONNX models into the med dialect -----------------------*- C++ -*-===//
//
// The ONNX front end (docs/import.md): an exported model (binary ModelProto, or its protobuf
// text form for hand-written tests) becomes a module of the shape scripts/gen_mednext.py
// writes: one `med.parameter` per trainable initializer, named by it (torch.onnx.export names
// them by the PyTorch state_dict keys), and one public network function whose batch and
// spatial sizes are left open for med-specialize. Everything after (autodiff, losses,
// optimizer, fusion) is shared with the generated models.
//
//===----------------------------------------------------------------------------------===//
#ifndef MED_IMPORT_ONNX_H
#define MED_IMPORT_ONNX_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::med {

struct OnnxImportOptions {
  // The network function's name; empty: from the file name (`models/unet.onnx` -> @unet).
  std::string functionName;
  // Parse `bytes` as protobuf text (a `.txtpb` or `.textproto` file) instead of binary.
  bool textFormat = false;
};

// True for the file names the importer reads (.onnx, .txtpb, .textproto).
bool isOnnxModelPath(llvm::StringRef path);

// Imports `bytes` (the file `path`, for messages and the default function name). Errors name
// the node, its op type and the input concerned; they never crash, whatever the bytes.
llvm::Expected<OwningOpRef<ModuleOp>> importOnnx(llvm::StringRef bytes, llvm::StringRef path,
                                                 MLIRContext &ctx,
                                                 const OnnxImportOptions &options = {});

// The recipe's `model.dropout` (docs/training.md): every med.dropout of `module` drops with
// rate `p` (in [0, 1)); 0 removes them, and the key argument no call passes any more. An
// error when `p` > 0 and the module (the model file `path`) has no dropout: medc never
// trains without the dropout a recipe asks for (an eval-mode ONNX export has none).
llvm::Error applyDropoutRate(ModuleOp module, double p, llvm::StringRef path);

} // namespace mlir::med

#endif // MED_IMPORT_ONNX_H
