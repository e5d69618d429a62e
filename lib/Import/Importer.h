//===- Importer.h - state of one ONNX import ---------------------------*- C++ -*-===//
//
// One Importer per model. It walks the graph's nodes in order (ONNX requires topological
// order) and keeps, per tensor name, what it became: an SSA value of the network function, or
// a constant known at import time (shape arithmetic, pads, Resize scales, initializers not yet
// used as a parameter). Each op family converts its nodes in a file of its own (Conv.cpp,
// Normalization.cpp, Elementwise.cpp, Tensor.cpp, Constants.cpp); patterns that stand for one
// med op (GroupNorm's InstanceNormalization simulation, GELU's Erf arithmetic) are matched on
// the ONNX graph before the walk (Patterns.cpp) and converted at their last node.
//
//===----------------------------------------------------------------------------------===//
#ifndef MED_LIB_IMPORT_IMPORTER_H
#define MED_LIB_IMPORT_IMPORTER_H

#include "med/IR/MedOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlir::med::onnx_import {

// A tensor known at import time. Initializers stay undecoded (`proto`) until a fold needs
// their values, so that the weights of a large network are read once, not copied.
struct Constant {
  bool isFloat = true;
  std::vector<int64_t> dims;
  std::vector<double> floats; // isFloat, decoded
  std::vector<int64_t> ints;  // !isFloat
  // The initializer (or Identity of one) this is, or a view of (Unsqueeze/Reshape/Squeeze):
  // used as an operand of a network op it becomes the parameter of that name.
  std::string parameter;
  const onnx::TensorProto *proto = nullptr; // values not decoded yet
  int64_t numElements() const;
};

// What a tensor name stands for.
struct Entry {
  Value value;                     // an SSA value of the network function, or
  std::optional<Constant> constant; // a constant known at import time
  bool shapeOf = false;            // Shape of a run-time tensor (only patterns may use it)
  // shapeOf: the sizes it holds where known (open ones kDynamic), through Slice and Concat
  // with constants (interpolate(size=...)'s Resize sizes); empty when not known.
  std::vector<int64_t> shapeDims;
};

// A node and the inputs the message is about.
struct NodeError {
  std::string message;
};

// Set by a pattern: the node where the matched group ends, what it becomes.
struct PatternMatch {
  enum Kind { GroupNorm, Gelu } kind;
  std::string input;  // the activation
  std::string gamma;  // GroupNorm: the Mul operand (scale), empty if none
  std::string beta;   // GroupNorm: the Add operand (bias), empty if none
  int64_t groups = 0; // GroupNorm
  double epsilon = 1e-5;
};

class Importer {
public:
  Importer(MLIRContext &ctx, llvm::StringRef path) : ctx(ctx), builder(&ctx), path(path.str()) {}

  llvm::Expected<OwningOpRef<ModuleOp>> run(const onnx::ModelProto &model,
                                            llvm::StringRef functionName);

  // ---- Helpers the op families use. ----------------------------------------------------
  using Converter = llvm::Error (Importer::*)(const onnx::NodeProto &);

  // An error about `node` (and its input `input`, if given): names the file, the node, its op
  // type and the input.
  llvm::Error nodeError(const onnx::NodeProto &node, const llvm::Twine &message,
                        llvm::StringRef input = {}) const;
  // The node's i-th input as a network value (constants become med.constant, initializers
  // parameters); an error if missing or not a float tensor.
  llvm::Expected<Value> operand(const onnx::NodeProto &node, int i);
  // The node's i-th input, if present and non-empty.
  bool hasInput(const onnx::NodeProto &node, int i) const;
  // The node's i-th input as a constant known at import time (decoded), or an error.
  llvm::Expected<Constant> constantInput(const onnx::NodeProto &node, int i);
  const Entry *lookup(llvm::StringRef name) const;
  // Makes a parameter of the initializer (or Identity of one) `name`, reshaped to `dims`
  // when a view of it is used (an Unsqueezed norm weight), declared at its first use.
  llvm::Expected<Value> parameterValue(const onnx::NodeProto &node, const Constant &c,
                                       llvm::ArrayRef<int64_t> dims, llvm::StringRef input);
  // Creates an op, checks it with the dialect's verifier and reports a failure as an error
  // about `node`.
  template <typename OpT, typename... Args>
  llvm::Expected<OpT> create(const onnx::NodeProto &node, Args &&...args) {
    auto op = builder.create<OpT>(loc(node), std::forward<Args>(args)...);
    if (llvm::Error e = verifyCreated(node, op.getOperation()))
      return std::move(e);
    return op;
  }
  llvm::Error verifyCreated(const onnx::NodeProto &node, Operation *op);
  // Binds the node's output `i` to `v`.
  void define(const onnx::NodeProto &node, int i, Value v);
  void defineConstant(const onnx::NodeProto &node, int i, Constant c);
  Location loc(const onnx::NodeProto &node);

  // Attributes, with ONNX's defaults.
  const onnx::AttributeProto *attribute(const onnx::NodeProto &node, llvm::StringRef name) const;
  llvm::Expected<int64_t> intAttr(const onnx::NodeProto &node, llvm::StringRef name,
                                  int64_t fallback) const;
  llvm::Expected<double> floatAttr(const onnx::NodeProto &node, llvm::StringRef name,
                                   double fallback) const;
  llvm::Expected<std::string> stringAttr(const onnx::NodeProto &node, llvm::StringRef name,
                                         llvm::StringRef fallback) const;
  llvm::Expected<std::vector<int64_t>> intsAttr(const onnx::NodeProto &node,
                                                llvm::StringRef name,
                                                std::vector<int64_t> fallback) const;
  // Decodes a TensorProto (checked sizes) into a Constant.
  llvm::Expected<Constant> decode(const onnx::TensorProto &t, llvm::StringRef what) const;
  llvm::Error decodeValues(Constant &c, llvm::StringRef what) const;

  // ---- Op families (one file each). ----------------------------------------------------
  // Conv.cpp
  llvm::Error convertConv(const onnx::NodeProto &node);
  llvm::Error convertConvTranspose(const onnx::NodeProto &node);
  // Normalization.cpp
  llvm::Error convertInstanceNormalization(const onnx::NodeProto &node);
  llvm::Error convertGroupNorm(const onnx::NodeProto &node, const PatternMatch &m);
  llvm::Error convertBatchNormalization(const onnx::NodeProto &node);
  // Frozen state the network reads and assigns (running statistics), declared at first use.
  llvm::Expected<Value> stateValue(const onnx::NodeProto &node, llvm::StringRef name,
                                   llvm::ArrayRef<int64_t> dims, InitKind init);
  // Dropout.cpp
  llvm::Error convertDropout(const onnx::NodeProto &node);
  // The step's key the dropouts read: the network function's last argument, added at the
  // first use.
  Value stepKey();
  // Activation.cpp
  llvm::Error convertRelu(const onnx::NodeProto &node);
  llvm::Error convertLeakyRelu(const onnx::NodeProto &node);
  llvm::Error convertPRelu(const onnx::NodeProto &node);
  llvm::Error convertSoftmax(const onnx::NodeProto &node);
  // Elementwise.cpp
  llvm::Error convertBinary(const onnx::NodeProto &node);
  llvm::Error convertSigmoid(const onnx::NodeProto &node);
  llvm::Error convertGelu(const onnx::NodeProto &node, const PatternMatch &m);
  // Pool.cpp
  llvm::Error convertAveragePool(const onnx::NodeProto &node);
  llvm::Error convertMaxPool(const onnx::NodeProto &node);
  llvm::Expected<std::vector<int64_t>> poolWindow(const onnx::NodeProto &node,
                                                  llvm::StringRef medOp);
  // Resize.cpp
  llvm::Error convertResize(const onnx::NodeProto &node);
  // Tensor.cpp
  llvm::Error convertConcat(const onnx::NodeProto &node);
  llvm::Error convertPad(const onnx::NodeProto &node);
  llvm::Error convertSlice(const onnx::NodeProto &node);
  llvm::Error convertReshape(const onnx::NodeProto &node);
  llvm::Error convertTranspose(const onnx::NodeProto &node);
  llvm::Expected<std::vector<int64_t>> transposePerm(const onnx::NodeProto &node,
                                                     int64_t rank) const;
  llvm::Error convertIdentity(const onnx::NodeProto &node);
  // Constants.cpp: ops evaluated at import time when every input is a constant.
  llvm::Error convertConstant(const onnx::NodeProto &node);
  llvm::Error convertShape(const onnx::NodeProto &node);
  // Folds `node` if it is shape arithmetic on constants; false if it is not foldable.
  llvm::Expected<bool> fold(const onnx::NodeProto &node);
  // Slice / Concat of a run-time tensor's shape with constants: the sizes it selects.
  bool foldShapeOf(const onnx::NodeProto &node);
  // Patterns.cpp: finds the groups of nodes that stand for one med op.
  void matchPatterns(const onnx::GraphProto &graph);

  MLIRContext &ctx;
  OpBuilder builder;
  std::string path;
  ModuleOp module;
  func::FuncOp function;
  llvm::StringMap<Entry> values;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<Value> parameters;    // declared so far, by name
  OpBuilder::InsertPoint parameterPoint; // where the next med.parameter goes
  Value key;            // the step's key (stepKey), once a Dropout needs it
  int64_t dropouts = 0; // med.dropout ops made so far: the next one's stream
  int64_t opset = 0;
  // Pattern results: the node index where a group ends, and the nodes it absorbs.
  llvm::DenseMap<int, PatternMatch> patternRoots;
  std::vector<bool> absorbed;
  // Producer node index of each tensor name, and how many nodes read it.
  llvm::StringMap<int> producer;
  llvm::StringMap<int> readers;
  llvm::StringMap<bool> graphOutputs;
  // Each node's position in the graph, which names it in messages when it has no name.
  llvm::DenseMap<const onnx::NodeProto *, int> nodeIndex;
  const onnx::GraphProto *graph = nullptr;
};

// ONNX's data types by name, for messages.
std::string dataTypeName(int32_t type);

} // namespace mlir::med::onnx_import

#endif // MED_LIB_IMPORT_IMPORTER_H
