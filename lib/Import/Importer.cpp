//===- Importer.cpp - ONNX model -> med network function -------------------------===//
//
// Reads the ModelProto, checks what the rest of the import relies on (opset, initializer
// sizes, every input produced before it is read), declares the network function with batch
// and spatial sizes open, walks the nodes and returns the module. See Importer.h.
//
//===----------------------------------------------------------------------------------===//
#include "Importer.h"

#include "med/IR/MedDialect.h"
#include "med/IR/MedOps.h"
#include "med/Import/Onnx.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <cstdio>
#include <cstdlib>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

using namespace mlir;
using namespace mlir::med;
using namespace mlir::med::onnx_import;

namespace {

// Tensors larger than this are refused (no network input or weight comes near it; a fuzzed
// shape would otherwise ask for any amount of memory).
constexpr int64_t kMaxElements = int64_t(1) << 34;

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

// Op types converted by a family's converter (everything else is refused by name).
const llvm::StringMap<Importer::Converter> &converters() {
  static const llvm::StringMap<Importer::Converter> table = {
      {"Conv", &Importer::convertConv},
      {"ConvTranspose", &Importer::convertConvTranspose},
      {"InstanceNormalization", &Importer::convertInstanceNormalization},
      {"BatchNormalization", &Importer::convertBatchNormalization},
      {"Add", &Importer::convertBinary},
      {"Sub", &Importer::convertBinary},
      {"Mul", &Importer::convertBinary},
      {"Div", &Importer::convertBinary},
      {"Sigmoid", &Importer::convertSigmoid},
      {"Relu", &Importer::convertRelu},
      {"Dropout", &Importer::convertDropout},
      {"LeakyRelu", &Importer::convertLeakyRelu},
      {"PRelu", &Importer::convertPRelu},
      {"Softmax", &Importer::convertSoftmax},
      {"AveragePool", &Importer::convertAveragePool},
      {"MaxPool", &Importer::convertMaxPool},
      {"Resize", &Importer::convertResize},
      {"Concat", &Importer::convertConcat},
      {"Pad", &Importer::convertPad},
      {"Slice", &Importer::convertSlice},
      {"Reshape", &Importer::convertReshape},
      {"Transpose", &Importer::convertTranspose},
      {"Identity", &Importer::convertIdentity},
      {"Constant", &Importer::convertConstant},
      {"Shape", &Importer::convertShape},
  };
  return table;
}

// Why an op type is refused, where there is more to say than "not supported".
std::string unsupportedReason(llvm::StringRef opType) {
  static const llvm::StringMap<const char *> reasons = {
      {"Erf", "Erf is imported only inside GELU's exported arithmetic (x * 0.5 * (1 + "
              "Erf(x / sqrt 2)), which becomes med.gelu)"},
      {"GroupNormalization", "ONNX GroupNormalization is not supported yet (torch.onnx.export "
                             "writes GroupNorm as Reshape + InstanceNormalization, which is)"},
  };
  auto it = reasons.find(opType);
  return it != reasons.end() ? it->second : "no conversion to the med dialect";
}

std::string sanitizeSymbol(llvm::StringRef name) {
  std::string out;
  for (char c : name)
    out += llvm::isAlnum(c) || c == '_' ? c : '_';
  if (out.empty() || llvm::isDigit(out[0]))
    out = "net_" + out;
  return out;
}

} // namespace

std::string mlir::med::onnx_import::dataTypeName(int32_t type) {
  if (onnx::TensorProto_DataType_IsValid(type))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(type));
  return "data type " + std::to_string(type);
}

int64_t Constant::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

bool mlir::med::isOnnxModelPath(llvm::StringRef path) {
  return path.ends_with(".onnx") || path.ends_with(".txtpb") || path.ends_with(".textproto");
}

// ---- Errors and lookups. ------------------------------------------------------------------

llvm::Error Importer::nodeError(const onnx::NodeProto &node, const llvm::Twine &message,
                                llvm::StringRef input) const {
  auto index = nodeIndex.find(&node);
  std::string where =
      path + ": node " +
      (node.name().empty() && index != nodeIndex.end() ? "#" + std::to_string(index->second)
                                                       : "'" + node.name() + "'") +
      " (" + node.op_type() + ")";
  if (!input.empty())
    where += ", input '" + input.str() + "'";
  return error(where + ": " + message);
}

bool Importer::hasInput(const onnx::NodeProto &node, int i) const {
  return i < node.input_size() && !node.input(i).empty();
}

const Entry *Importer::lookup(llvm::StringRef name) const {
  auto it = values.find(name);
  return it == values.end() ? nullptr : &it->second;
}

Location Importer::loc(const onnx::NodeProto &node) {
  return NameLoc::get(StringAttr::get(&ctx, node.name() + " (" + node.op_type() + ")"),
                      FileLineColLoc::get(&ctx, path, 0, 0));
}

void Importer::define(const onnx::NodeProto &node, int i, Value v) {
  if (i < node.output_size() && !node.output(i).empty())
    values[node.output(i)] = Entry{v, std::nullopt, false};
}

void Importer::defineConstant(const onnx::NodeProto &node, int i, Constant c) {
  if (i < node.output_size() && !node.output(i).empty())
    values[node.output(i)] = Entry{Value(), std::move(c), false};
}

llvm::Error Importer::verifyCreated(const onnx::NodeProto &node, Operation *op) {
  std::string messages;
  {
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      if (!messages.empty())
        messages += "; ";
      messages += d.str();
      return success();
    });
    if (succeeded(mlir::verify(op)))
      return llvm::Error::success();
  }
  std::string operands;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    std::string type;
    llvm::raw_string_ostream os(type);
    v.getType().print(os);
    operands += (i ? ", " : "") + type;
  }
  std::string opName = op->getName().getStringRef().str();
  op->erase();
  return nodeError(node, messages + " (as " + opName + " of " + operands + ")",
                   node.input_size() ? llvm::StringRef(node.input(0)) : llvm::StringRef());
}

// ---- Attributes. -------------------------------------------------------------------------

const onnx::AttributeProto *Importer::attribute(const onnx::NodeProto &node,
                                                llvm::StringRef name) const {
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

llvm::Expected<int64_t> Importer::intAttr(const onnx::NodeProto &node, llvm::StringRef name,
                                          int64_t fallback) const {
  const onnx::AttributeProto *a = attribute(node, name);
  if (!a)
    return fallback;
  if (a->type() != onnx::AttributeProto::INT)
    return nodeError(node, "attribute '" + name + "' must be an integer");
  return a->i();
}

llvm::Expected<double> Importer::floatAttr(const onnx::NodeProto &node, llvm::StringRef name,
                                           double fallback) const {
  const onnx::AttributeProto *a = attribute(node, name);
  if (!a)
    return fallback;
  if (a->type() != onnx::AttributeProto::FLOAT)
    return nodeError(node, "attribute '" + name + "' must be a float");
  // ONNX floats are float32; the shortest decimal that round-trips (1e-5, not
  // 9.9999997e-6) is what the exporter was given.
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, double(a->f()));
    if (std::strtof(text, nullptr) == a->f())
      break;
  }
  return std::strtod(text, nullptr);
}

llvm::Expected<std::string> Importer::stringAttr(const onnx::NodeProto &node,
                                                 llvm::StringRef name,
                                                 llvm::StringRef fallback) const {
  const onnx::AttributeProto *a = attribute(node, name);
  if (!a)
    return fallback.str();
  if (a->type() != onnx::AttributeProto::STRING)
    return nodeError(node, "attribute '" + name + "' must be a string");
  return a->s();
}

llvm::Expected<std::vector<int64_t>> Importer::intsAttr(const onnx::NodeProto &node,
                                                        llvm::StringRef name,
                                                        std::vector<int64_t> fallback) const {
  const onnx::AttributeProto *a = attribute(node, name);
  if (!a)
    return fallback;
  if (a->type() != onnx::AttributeProto::INTS)
    return nodeError(node, "attribute '" + name + "' must be a list of integers");
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

// ---- Tensors. ----------------------------------------------------------------------------

llvm::Expected<Constant> Importer::decode(const onnx::TensorProto &t,
                                          llvm::StringRef what) const {
  Constant c;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && n > kMaxElements / d))
      return error(path + ": " + what + ": shape [" +
                   llvm::join(llvm::map_range(t.dims(), [](int64_t x) { return std::to_string(x); }), ", ") +
                   "] is negative or too large");
    n *= d;
    c.dims.push_back(d);
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return error(path + ": " + what + ": data stored outside the model file (external data) "
                 "is not supported; export with the weights inside the .onnx file");
  int64_t size = 0;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    c.isFloat = true, size = 4;
    break;
  case onnx::TensorProto::DOUBLE:
    c.isFloat = true, size = 8;
    break;
  case onnx::TensorProto::INT64:
    c.isFloat = false, size = 8;
    break;
  case onnx::TensorProto::INT32:
    c.isFloat = false, size = 4;
    break;
  case onnx::TensorProto::BOOL:
    c.isFloat = false, size = 1;
    break;
  default:
    return error(path + ": " + what + ": " + dataTypeName(t.data_type()) +
                 " tensors are not supported (float, double, int64, int32 and bool are)");
  }
  int64_t stored = t.has_raw_data() ? static_cast<int64_t>(t.raw_data().size()) / size
                   : t.data_type() == onnx::TensorProto::FLOAT ? t.float_data_size()
                   : t.data_type() == onnx::TensorProto::DOUBLE ? t.double_data_size()
                   : t.data_type() == onnx::TensorProto::INT64 ? t.int64_data_size()
                                                                : t.int32_data_size();
  if (t.has_raw_data() && static_cast<int64_t>(t.raw_data().size()) % size != 0)
    stored = -1;
  if (stored != n)
    return error(path + ": " + what + ": holds " +
                 (stored < 0 ? std::to_string(t.raw_data().size()) + " bytes"
                             : std::to_string(stored) + " values") +
                 ", but its shape [" +
                 llvm::join(llvm::map_range(c.dims, [](int64_t x) { return std::to_string(x); }), ", ") +
                 "] needs " + std::to_string(n) + " (" + dataTypeName(t.data_type()) +
                 "): the file is damaged");
  c.proto = &t;
  return c;
}

llvm::Error Importer::decodeValues(Constant &c, llvm::StringRef what) const {
  if (!c.proto)
    return llvm::Error::success();
  const onnx::TensorProto &t = *c.proto;
  int64_t n = c.numElements();
  if (n > (int64_t(1) << 24))
    return error(path + ": " + what + ": a constant of " + std::to_string(n) +
                 " elements in shape arithmetic is too large to evaluate at import time");
  const std::string &raw = t.raw_data();
  auto rawAt = [&](auto zero, int64_t i) {
    decltype(zero) v;
    std::memcpy(&v, raw.data() + i * sizeof(v), sizeof(v));
    return v;
  };
  c.floats.clear(), c.ints.clear();
  for (int64_t i = 0; i < n; ++i) {
    switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      c.floats.push_back(t.has_raw_data() ? rawAt(float(), i) : t.float_data(i));
      break;
    case onnx::TensorProto::DOUBLE:
      c.floats.push_back(t.has_raw_data() ? rawAt(double(), i) : t.double_data(i));
      break;
    case onnx::TensorProto::INT64:
      c.ints.push_back(t.has_raw_data() ? rawAt(int64_t(), i) : t.int64_data(i));
      break;
    case onnx::TensorProto::INT32:
      c.ints.push_back(t.has_raw_data() ? rawAt(int32_t(), i) : t.int32_data(i));
      break;
    default: // BOOL
      c.ints.push_back(t.has_raw_data() ? rawAt(uint8_t(), i) != 0 : t.int32_data(i) != 0);
    }
  }
  c.proto = nullptr;
  return llvm::Error::success();
}

llvm::Expected<Constant> Importer::constantInput(const onnx::NodeProto &node, int i) {
  if (!hasInput(node, i))
    return nodeError(node, "input " + llvm::Twine(i) + " is missing");
  const Entry *e = lookup(node.input(i));
  if (!e || !e->constant)
    return nodeError(node,
                     "must be known when the model is imported (a constant or shape "
                     "arithmetic on constants), not computed from the network's input: medc "
                     "cannot specialise it",
                     node.input(i));
  Constant c = *e->constant;
  if (llvm::Error err = decodeValues(c, "node '" + node.name() + "' input '" + node.input(i) + "'"))
    return std::move(err);
  return c;
}

llvm::Expected<Value> Importer::parameterValue(const onnx::NodeProto &node, const Constant &c,
                                               llvm::ArrayRef<int64_t> dims,
                                               llvm::StringRef input) {
  auto it = initializers.find(c.parameter);
  if (it == initializers.end())
    return nodeError(node, "not an initializer", input);
  if (it->second->data_type() != onnx::TensorProto::FLOAT)
    return nodeError(node, "a parameter must be float32, not " +
                               dataTypeName(it->second->data_type()),
                     input);
  SmallVector<int64_t> own(it->second->dims().begin(), it->second->dims().end());
  // A view (an Unsqueezed norm weight) keeps the state_dict's shape for the parameter when it
  // has the view's elements; the op then reads it through a reshape.
  auto type = RankedTensorType::get(own, builder.getF32Type());
  Value &param = parameters[c.parameter];
  if (!param) {
    OpBuilder::InsertionGuard guard(builder);
    builder.restoreInsertionPoint(parameterPoint);
    // How PyTorch initializes the layer it comes from: conv weights and biases
    // U(±1/sqrt(fan_in)) (fan_in from the weight, for the bias too), norm weights one,
    // norm biases zero, a PReLU slope 0.25. The ONNX file's values are the exporter's, not
    // a start for training.
    InitKind init = InitKind::uniform;
    IntegerAttr fanIn;
    FloatAttr value;
    const std::string &op = node.op_type();
    bool conv = op == "Conv" || op == "ConvTranspose";
    if (conv) {
      // fan_in: weight (Cout, Cin/g, k...) for Conv; (Cin, Cout/g, k...) for ConvTranspose,
      // where PyTorch's init reads dimension 1 as the fan-in too.
      auto w = node.input_size() > 1 ? initializers.find(node.input(1)) : initializers.end();
      if (w != initializers.end() && w->second->dims_size() >= 2) {
        int64_t fan = 1;
        for (int d = 1; d < w->second->dims_size(); ++d)
          fan *= w->second->dims(d);
        fanIn = builder.getI64IntegerAttr(std::max<int64_t>(fan, 1));
      }
    } else if (op == "PRelu") {
      init = InitKind::constant;
      value = builder.getF64FloatAttr(0.25);
    } else if (llvm::StringRef(c.parameter).ends_with(".weight") ||
               llvm::StringRef(c.parameter).ends_with("gamma")) {
      init = InitKind::ones;
    } else {
      init = InitKind::zeros;
    }
    if (init == InitKind::uniform && !fanIn) {
      int64_t fan = own.size() >= 2 ? type.getNumElements() / std::max<int64_t>(own[0], 1) : 1;
      fanIn = builder.getI64IntegerAttr(std::max<int64_t>(fan, 1));
    }
    auto decl = builder.create<ParameterOp>(
        FileLineColLoc::get(&ctx, path, 0, 0), builder.getStringAttr(c.parameter),
        TypeAttr::get(type), InitKindAttr::get(&ctx, init), fanIn, FlatSymbolRefAttr(),
        UnitAttr(), value);
    parameterPoint = builder.saveInsertionPoint();
    (void)decl;
  }
  if (!param) {
    param = builder.create<ParamOp>(FileLineColLoc::get(&ctx, path, 0, 0), type,
                                    FlatSymbolRefAttr::get(&ctx, c.parameter));
  }
  if (llvm::ArrayRef<int64_t>(own) == dims)
    return param;
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  if (n != type.getNumElements())
    return nodeError(node, "a view of parameter '" + c.parameter + "' has another size", input);
  auto reshaped = create<ReshapeOp>(node, param, builder.getDenseI64ArrayAttr(dims));
  if (!reshaped)
    return reshaped.takeError();
  return reshaped->getResult();
}

llvm::Expected<Value> Importer::operand(const onnx::NodeProto &node, int i) {
  if (!hasInput(node, i))
    return nodeError(node, "input " + llvm::Twine(i) + " is missing");
  const std::string &name = node.input(i);
  const Entry *e = lookup(name);
  if (!e)
    return nodeError(node, "no node produces this tensor before it is read", name);
  if (e->value)
    return e->value;
  if (e->shapeOf)
    return nodeError(node, "the shape of a tensor computed at run time is read as data; medc "
                           "cannot specialise it",
                     name);
  Constant c = *e->constant;
  if (!c.isFloat)
    return nodeError(node, "an integer tensor where a float tensor is expected", name);
  if (!c.parameter.empty())
    return parameterValue(node, c, c.dims, name);
  if (llvm::Error err = decodeValues(c, "node '" + node.name() + "' input '" + name + "'"))
    return std::move(err);
  auto type = RankedTensorType::get(c.dims, builder.getF32Type());
  std::vector<float> data(c.floats.begin(), c.floats.end());
  auto attr = DenseElementsAttr::get(type, llvm::ArrayRef<float>(data));
  auto op = create<ConstantOp>(node, attr);
  if (!op)
    return op.takeError();
  return op->getResult();
}

// ---- The walk. ---------------------------------------------------------------------------

llvm::Expected<OwningOpRef<ModuleOp>> Importer::run(const onnx::ModelProto &model,
                                                    llvm::StringRef functionName) {
  for (const onnx::OperatorSetIdProto &set : model.opset_import())
    if (set.domain().empty() || set.domain() == "ai.onnx")
      opset = set.version();
  if (!model.has_graph())
    return error(path + ": no graph (not an ONNX model, or an empty one)");
  if (opset == 0)
    return error(path + ": the model imports no ONNX operator set (opset_import is empty)");
  if (opset < 13 || opset > 18)
    return error(path + ": ONNX opset " + llvm::Twine(opset) +
                 " is not supported (13 to 18 are; torch.onnx.export(..., opset_version=17))");
  graph = &model.graph();

  OwningOpRef<ModuleOp> owned = ModuleOp::create(FileLineColLoc::get(&ctx, path, 0, 0));
  module = *owned;
  builder.setInsertionPointToStart(module.getBody());
  parameterPoint = builder.saveInsertionPoint();

  // Initializers: checked and known by name; decoded only where folded.
  for (const onnx::TensorProto &t : graph->initializer()) {
    if (t.name().empty())
      return error(path + ": an initializer has no name");
    if (initializers.count(t.name()))
      return error(path + ": initializer '" + t.name() + "' is defined twice");
    llvm::Expected<Constant> c = decode(t, "initializer '" + t.name() + "'");
    if (!c)
      return c.takeError();
    c->parameter = c->isFloat ? t.name() : std::string();
    initializers[t.name()] = &t;
    values[t.name()] = Entry{Value(), std::move(*c), false};
  }

  // The network's inputs (those that are not initializers): N x C x D x H x W, float32, with
  // C fixed; batch and spatial sizes stay open whatever the export fixed.
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const onnx::ValueInfoProto &in : graph->input()) {
    if (initializers.count(in.name()))
      continue; // keep_initializers_as_inputs=True lists them as inputs too
    std::string what = path + ": graph input '" + in.name() + "'";
    if (!in.type().has_tensor_type())
      return error(what + ": not a tensor");
    const onnx::TypeProto_Tensor &tt = in.type().tensor_type();
    if (tt.elem_type() != onnx::TensorProto::FLOAT)
      return error(what + ": " + dataTypeName(tt.elem_type()) + " (the network input must be float32)");
    if (!tt.has_shape() || tt.shape().dim_size() != 5)
      return error(what + ": rank " + llvm::Twine(tt.has_shape() ? tt.shape().dim_size() : -1) +
                   "; a 3D network takes N x C x D x H x W (rank 5)");
    const onnx::TensorShapeProto_Dimension &c = tt.shape().dim(1);
    if (!c.has_dim_value() || c.dim_value() <= 0)
      return error(what + ": the channel count (axis 1) is dynamic ('" + c.dim_param() +
                   "'); medc needs it fixed (export without a dynamic axis 1)");
    if (c.dim_value() > (int64_t(1) << 20))
      return error(what + ": " + llvm::Twine(c.dim_value()) + " channels is too many");
    int64_t d = ShapedType::kDynamic;
    argTypes.push_back(RankedTensorType::get({d, c.dim_value(), d, d, d}, builder.getF32Type()));
    argNames.push_back(in.name());
  }
  if (argTypes.empty())
    return error(path + ": the graph has no input besides its initializers");
  if (graph->output_size() == 0)
    return error(path + ": the graph has no output");

  std::string name = functionName.str();
  if (name.empty())
    name = sanitizeSymbol(llvm::sys::path::stem(llvm::sys::path::stem(path)));
  // The results' types are known after the walk; the function gets them at the end.
  function = builder.create<func::FuncOp>(FileLineColLoc::get(&ctx, path, 0, 0), name,
                                          builder.getFunctionType(argTypes, {}));
  parameterPoint = OpBuilder::InsertPoint(module.getBody(), Block::iterator(function));
  Block *body = function.addEntryBlock();
  builder.setInsertionPointToStart(body);
  for (auto [arg, argName] : llvm::zip(body->getArguments(), argNames))
    values[argName] = Entry{arg, std::nullopt, false};

  // Producers and readers, for the patterns; every input must exist when it is read.
  for (const onnx::ValueInfoProto &out : graph->output())
    graphOutputs[out.name()] = true;
  for (int n = 0; n < graph->node_size(); ++n)
    nodeIndex[&graph->node(n)] = n;
  for (int n = 0; n < graph->node_size(); ++n) {
    const onnx::NodeProto &node = graph->node(n);
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      return nodeError(node, "operators of domain '" + node.domain() +
                                 "' are not supported (only the default ONNX domain is)");
    for (const std::string &in : node.input())
      if (!in.empty()) {
        if (!values.count(in) && !producer.count(in))
          return nodeError(node, "no node, initializer or graph input produces this tensor "
                                 "before it is read (dangling input)",
                           in);
        ++readers[in];
      }
    for (const std::string &out : node.output())
      if (!out.empty()) {
        if (values.count(out) || producer.count(out))
          return nodeError(node, "output '" + out + "' is already defined");
        producer[out] = n;
      }
  }
  matchPatterns(*graph);

  for (int n = 0; n < graph->node_size(); ++n) {
    if (absorbed[n])
      continue;
    const onnx::NodeProto &node = graph->node(n);
    if (auto it = patternRoots.find(n); it != patternRoots.end()) {
      const PatternMatch &m = it->second;
      llvm::Error e = m.kind == PatternMatch::GroupNorm ? convertGroupNorm(node, m)
                                                       : convertGelu(node, m);
      if (e)
        return std::move(e);
      continue;
    }
    // Shape arithmetic on constants is evaluated here, whatever the op.
    llvm::Expected<bool> folded = fold(node);
    if (!folded)
      return folded.takeError();
    if (*folded)
      continue;
    auto it = converters().find(node.op_type());
    if (it == converters().end())
      return nodeError(node, "op type " + node.op_type() + " is not supported: " +
                                 unsupportedReason(node.op_type()),
                       node.input_size() ? llvm::StringRef(node.input(0)) : llvm::StringRef());
    if (llvm::Error e = (this->*(it->second))(node))
      return std::move(e);
  }

  SmallVector<Value> results;
  for (const onnx::ValueInfoProto &out : graph->output()) {
    const Entry *e = lookup(out.name());
    if (!e)
      return error(path + ": graph output '" + out.name() + "' is produced by no node");
    if (!e->value)
      return error(path + ": graph output '" + out.name() +
                   "' is a constant, not computed from the network's input");
    results.push_back(e->value);
  }
  builder.create<func::ReturnOp>(FileLineColLoc::get(&ctx, path, 0, 0), results);
  // The inputs, and the step's key last where a Dropout reads it.
  function.setFunctionType(
      builder.getFunctionType(body->getArgumentTypes(), ValueRange(results).getTypes()));
  if (failed(mlir::verify(module)))
    return error(path + ": the imported module does not verify (see the messages above)");
  return std::move(owned);
}

// ---- Entry point. ------------------------------------------------------------------------

namespace {
// Text-format parse errors, as one message.
class CollectErrors : public google::protobuf::io::ErrorCollector {
public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string &message) override {
    if (text.empty())
      text = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) +
             ": " + message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string &) override {}
  std::string text;
};
} // namespace

llvm::Expected<OwningOpRef<ModuleOp>>
mlir::med::importOnnx(llvm::StringRef bytes, llvm::StringRef path, MLIRContext &ctx,
                      const OnnxImportOptions &options) {
  ctx.loadDialect<MedDialect, func::FuncDialect>();
  onnx::ModelProto model;
  if (options.textFormat) {
    google::protobuf::TextFormat::Parser parser;
    CollectErrors errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(std::string(bytes), &model))
      return error(path + ": not an ONNX model in protobuf text form: " + errors.text);
  } else {
    if (bytes.size() > static_cast<size_t>(INT32_MAX))
      return error(path + ": larger than 2 GiB; protobuf cannot read it (weights in external "
                          "data are not supported)");
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                                              static_cast<int>(bytes.size()));
    if (!model.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
      return error(path + ": not an ONNX model: the protobuf does not parse (a truncated or "
                          "damaged file?)");
  }
  Importer importer(ctx, path);
  return importer.run(model, options.functionName);
}
