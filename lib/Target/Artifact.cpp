//===- Artifact.cpp - writing the artifact medrun executes ---------------------===//
//
// One JSON object per op: the op name, its operands grouped by ODS operand name, its
// results, every attribute with defaults filled in (so the runtime never needs to know
// ODS defaults), and its source location. The table in docs/artifact.md is the contract.
//
//===----------------------------------------------------------------------------------===//

#include "med/Target/Artifact.h"
#include "med/IR/MedOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::med;
namespace json = llvm::json;

namespace {

std::string dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isBF16())
    return "bf16";
  if (t.isF16())
    return "f16";
  if (t.isInteger(1))
    return "bool";
  if (auto i = dyn_cast<IntegerType>(t))
    return (i.isUnsigned() ? "u" : "i") + std::to_string(i.getWidth());
  return "";
}

/// A constant's values, a splat as its one value.
json::Array denseValues(DenseElementsAttr elements) {
  json::Array values;
  bool integer = elements.getElementType().isIntOrIndex();
  if (elements.isSplat() && integer)
    values.push_back(elements.getSplatValue<APInt>().getSExtValue());
  else if (elements.isSplat())
    values.push_back(elements.getSplatValue<APFloat>().convertToDouble());
  else if (integer)
    for (const APInt &v : elements.getValues<APInt>())
      values.push_back(v.getSExtValue());
  else
    for (const APFloat &v : elements.getValues<APFloat>())
      values.push_back(v.convertToDouble());
  return values;
}

std::string locationStr(Location loc) {
  std::string result;
  loc->walk([&](Location l) {
    if (auto file = dyn_cast<FileLineColLoc>(l)) {
      result = (file.getFilename().strref() + ":" + Twine(file.getLine()) + ":" +
                Twine(file.getColumn()))
                   .str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return result;
}

/// The fusion bodies of a module, each once (structurally equal bodies share an entry).
struct FusionTable {
  json::Array bodies;
  llvm::StringMap<int64_t> index; ///< by the body's JSON text

  int64_t add(json::Object body) {
    std::string key;
    llvm::raw_string_ostream(key) << json::Value(json::Object(body));
    auto [it, inserted] = index.try_emplace(key, static_cast<int64_t>(bodies.size()));
    if (inserted)
      bodies.push_back(std::move(body));
    return it->second;
  }
};

// Serializes the functions of one module; value ids are per function.
class PlanWriter {
public:
  /// `inBody`: writing a fusion body, whose ops carry no source location, so that bodies
  /// equal but for where they came from are one entry (the fusion op has the location).
  explicit PlanWriter(FusionTable &fusions, bool inBody = false)
      : fusions(fusions), inBody(inBody) {}

  FailureOr<json::Value> function(func::FuncOp f) {
    auto precision = f->getAttrOfType<StringAttr>("med.precision");
    if (precision && precision != "fp32" && !f->hasAttr("med.arg_storage"))
      return f.emitError("artifact: function @")
             << f.getSymName() << " is " << precision.getValue()
             << " but has no storage types (run med-assign-storage)";
    json::Array inputs, outputs, ops;
    if (failed(block(f.getBody().front(), f, inputs, outputs, ops)))
      return failure();
    json::Array names;
    auto given = f->getAttrOfType<ArrayAttr>("med.output_names");
    for (size_t i = 0; i < outputs.size(); ++i) {
      auto name = given && i < given.size() ? dyn_cast<StringAttr>(given[i]) : StringAttr();
      names.push_back(name ? name.str() : "out" + std::to_string(i));
    }
    json::Array inputNames;
    auto givenInputs = f->getAttrOfType<ArrayAttr>("med.input_names");
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto name = givenInputs && i < givenInputs.size() ? dyn_cast<StringAttr>(givenInputs[i])
                                                        : StringAttr();
      inputNames.push_back(name ? name.str() : "arg" + std::to_string(i));
    }
    json::Object plan{{"name", f.getSymName()},
                      {"values", std::move(values)},
                      {"inputs", std::move(inputs)},
                      {"input_names", std::move(inputNames)},
                      {"outputs", std::move(outputs)},
                      {"output_names", std::move(names)},
                      {"ops", std::move(ops)}};
    // The precision a training step was built for, and its first loss scale (fp16-mixed).
    if (auto precision = f->getAttrOfType<StringAttr>("med.precision"))
      plan["precision"] = precision.str();
    if (auto scale = f->getAttrOfType<FloatAttr>("med.init_loss_scale"))
      plan["init_loss_scale"] = scale.getValueAsDouble();
    return json::Value(std::move(plan));
  }

private:
  /// Defines the block's arguments as `inputs` and serializes its ops; the terminator's
  /// operands become `outputs`. Value ids start at 0.
  LogicalResult block(Block &b, Operation *owner, json::Array &inputs, json::Array &outputs,
                      json::Array &ops) {
    ids.clear();
    values = json::Array();
    for (BlockArgument arg : b.getArguments()) {
      FailureOr<int64_t> id = define(arg, owner);
      if (failed(id))
        return failure();
      inputs.push_back(*id);
    }
    for (Operation &op : b) {
      if (op.hasTrait<OpTrait::IsTerminator>()) {
        for (Value v : op.getOperands())
          outputs.push_back(ids.lookup(v));
        continue;
      }
      FailureOr<json::Value> entry = this->op(&op);
      if (failed(entry))
        return failure();
      ops.push_back(std::move(*entry));
    }
    return success();
  }

  /// A fusion's body as a function-shaped entry of the fusion table; returns its index.
  FailureOr<int64_t> fusionBody(FusionOp fusion) {
    PlanWriter inner(fusions, /*inBody=*/true);
    json::Array inputs, outputs, ops;
    if (failed(inner.block(fusion.getBody().front(), fusion, inputs, outputs, ops)))
      return failure();
    json::Object body{{"template", fusion.getTemplateName()},
                      {"values", std::move(inner.values)},
                      {"inputs", std::move(inputs)},
                      {"outputs", std::move(outputs)},
                      {"ops", std::move(ops)}};
    // The roles its matcher found (the verifier checked them), by op index as in `ops`.
    if (DictionaryAttr roles = fusion.getRolesAttr()) {
      json::Object byName;
      for (NamedAttribute role : roles)
        byName[role.getName().strref()] = cast<IntegerAttr>(role.getValue()).getInt();
      body["roles"] = std::move(byName);
    }
    return fusions.add(std::move(body));
  }

  FailureOr<int64_t> define(Value v, Operation *where) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || !type.hasStaticShape())
      return where->emitError("artifact: every value needs a static shape, got ")
             << v.getType() << " (compile with --batch/--patch)";
    std::string dtype = dtypeName(type.getElementType());
    if (dtype.empty())
      return where->emitError("artifact: unsupported element type ") << type.getElementType();
    int64_t id = static_cast<int64_t>(ids.size());
    ids[v] = id;
    json::Object value{{"dtype", dtype}, {"shape", json::Array(type.getShape())}};
    // med-assign-storage's decision (mixed precision; none inside a fusion body).
    if (!inBody) {
      auto decided = isa<BlockArgument>(v)
                         ? where->getAttrOfType<ArrayAttr>("med.arg_storage")
                         : v.getDefiningOp()->getAttrOfType<ArrayAttr>("med.storage");
      if (decided) {
        unsigned n = isa<BlockArgument>(v) ? cast<BlockArgument>(v).getArgNumber()
                                           : cast<OpResult>(v).getResultNumber();
        auto t = n < decided.size() ? dyn_cast<TypeAttr>(decided[n]) : TypeAttr();
        if (!t || dtypeName(t.getValue()).empty())
          return where->emitError("artifact: malformed storage decision of value #") << n;
        value["storage"] = dtypeName(t.getValue());
      }
    }
    values.push_back(std::move(value));
    return id;
  }

  json::Array group(ValueRange vs) {
    json::Array a;
    for (Value v : vs)
      a.push_back(ids.lookup(v));
    return a;
  }
  json::Array optional(Value v) { return v ? group(ValueRange(v)) : json::Array(); }

  FailureOr<json::Value> op(Operation *op) {
    json::Object operands, attrs;
    // clang-format off
    bool bodyFailed = false;
    bool known = llvm::TypeSwitch<Operation *, bool>(op)
      .Case<FusionOp>([&](FusionOp o) {
        operands = json::Object{{"inputs", group(o.getInputs())}};
        FailureOr<int64_t> body = fusionBody(o);
        bodyFailed = failed(body);
        attrs = json::Object{{"template", o.getTemplateName()},
                             {"body", bodyFailed ? -1 : *body}};
        return true; })
      // Every other op: its operand groups and attributes as ODS declares them.
#include "med/OpPlanWriter.inc"
      .Default([](Operation *) { return false; });
    // clang-format on
    if (!known)
      return op->emitError("artifact: no runtime plan for this op");
    if (bodyFailed)
      return failure();
    json::Array results;
    for (Value r : op->getResults()) {
      FailureOr<int64_t> id = define(r, op);
      if (failed(id))
        return failure();
      results.push_back(*id);
    }
    StringRef name = op->getName().getStringRef();
    name.consume_front("med.");
    json::Object entry{{"op", name},
                       {"operands", std::move(operands)},
                       {"results", std::move(results)},
                       {"attrs", std::move(attrs)}};
    if (!inBody)
      entry["loc"] = locationStr(op->getLoc());
    // Master-weight math of a training step: f32 whatever the activations' precision.
    if (op->hasAttr("med.fp32"))
      entry["fp32"] = true;
    // An instance norm (or what a pass made of one): medcheck's autocast reference reads it.
    if (op->hasAttr(kInstanceNormAttr))
      entry["instance_norm"] = true;
    return json::Value(std::move(entry));
  }

  FusionTable &fusions;
  bool inBody;
  llvm::DenseMap<Value, int64_t> ids;
  json::Array values;
};

json::Value parameterTable(ModuleOp module) {
  json::Array params;
  for (auto p : module.getOps<ParameterOp>()) {
    json::Object entry{{"name", p.getSymName()},
                       {"dtype", dtypeName(p.getTensorType().getElementType())},
                       {"shape", json::Array(p.getTensorType().getShape())},
                       {"init", stringifyInitKind(p.getInit())},
                       {"trainable", !p.getFrozen()}};
    if (auto fanIn = p.getFanIn())
      entry["fan_in"] = static_cast<int64_t>(*fanIn);
    if (auto source = p.getSource())
      entry["source"] = source->str();
    if (FloatAttr value = p.getValueAttr())
      entry["value"] = value.getValueAsDouble();
    params.push_back(std::move(entry));
  }
  return params;
}

/// Every med.flat_buffer: its size and where each member lies (format version 5).
json::Value flatBufferTable(ModuleOp module) {
  json::Array buffers;
  for (auto f : module.getOps<FlatBufferOp>()) {
    json::Array members;
    for (auto [m, offset] : llvm::zip(f.getMembers(), f.getOffsets()))
      members.push_back(json::Object{{"name", cast<FlatSymbolRefAttr>(m).getValue()},
                                     {"offset", offset}});
    buffers.push_back(json::Object{{"name", f.getSymName()},
                                   {"dtype", dtypeName(f.getTensorType().getElementType())},
                                   {"size", f.getTensorType().getNumElements()},
                                   {"alignment", int64_t(f.getAlignment())},
                                   {"members", std::move(members)}});
  }
  return buffers;
}

template <typename T> void appendLE(std::string &out, T value) {
  char bytes[sizeof(T)];
  llvm::support::endian::write<T, llvm::endianness::little>(bytes, value);
  out.append(bytes, sizeof(T));
}

} // namespace

FailureOr<json::Value> mlir::med::artifactDocument(ModuleOp module,
                                                   const ArtifactManifest &manifest) {
  json::Array functions;
  FusionTable fusions;
  PlanWriter writer(fusions);
  for (auto f : module.getOps<func::FuncOp>()) {
    if (!f.isPublic() || f.isExternal())
      continue;
    FailureOr<json::Value> plan = writer.function(f);
    if (failed(plan))
      return failure();
    functions.push_back(std::move(*plan));
  }
  if (functions.empty())
    return module.emitError("artifact: the module has no public function to compile");

  json::Object options;
  for (auto &[key, value] : manifest.options)
    options[key] = value;
  return json::Value(json::Object{{"format", "medc-artifact"},
                                  {"compiler", manifest.compiler},
                                  {"source", manifest.source},
                                  {"source_sha256", manifest.sourceSha256},
                                  {"options", std::move(options)},
                                  {"parameters", parameterTable(module)},
                                  {"flat_buffers", flatBufferTable(module)},
                                  {"functions", std::move(functions)},
                                  {"fusions", std::move(fusions.bodies)}});
}

size_t mlir::med::appendFusionCheckFunctions(json::Object &doc) {
  json::Array *functions = doc.getArray("functions");
  const json::Array *bodies = doc.getArray("fusions");
  if (!functions || !bodies)
    return 0;
  for (size_t k = 0; k < bodies->size(); ++k) {
    const json::Object &body = *(*bodies)[k].getAsObject();
    json::Array values, inputs, outputs, inputNames;
    int64_t id = 0;
    for (const char *part : {"inputs", "outputs"})
      for (const json::Value &v : *body.getArray(part)) {
        values.push_back((*body.getArray("values"))[*v.getAsInteger()]);
        (part == std::string("inputs") ? inputs : outputs).push_back(id++);
      }
    json::Object op{{"op", "fusion"},
                    {"operands", json::Object{{"inputs", json::Array(inputs)}}},
                    {"results", json::Array(outputs)},
                    {"attrs", json::Object{{"template", *body.getString("template")},
                                           {"body", static_cast<int64_t>(k)}}},
                    {"loc", ""}};
    functions->push_back(json::Object{{"name", "fusion_check_" + std::to_string(k)},
                                      {"values", std::move(values)},
                                      {"inputs", std::move(inputs)},
                                      {"outputs", std::move(outputs)},
                                      {"ops", json::Array{std::move(op)}}});
  }
  return bodies->size();
}

json::Value mlir::med::spellNonFinite(const json::Value &v) {
  if (const json::Object *o = v.getAsObject()) {
    json::Object out;
    for (const auto &[key, value] : *o)
      out[key] = spellNonFinite(value);
    return out;
  }
  if (const json::Array *a = v.getAsArray()) {
    json::Array out;
    for (const json::Value &e : *a)
      out.push_back(spellNonFinite(e));
    return out;
  }
  if (v.kind() == json::Value::Number && !v.getAsInteger() && !v.getAsUINT64()) {
    double d = *v.getAsNumber();
    if (!std::isfinite(d))
      return json::Object{{"nonfinite", std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf"}};
  }
  return v;
}

void mlir::med::writeArtifactContainer(const json::Value &doc, ArrayRef<ArtifactSection> sections,
                                       llvm::raw_ostream &os) {
  std::string text;
  llvm::raw_string_ostream(text) << spellNonFinite(doc);

  std::string bytes("MEDCART", 8); // includes the terminating NUL
  appendLE<uint32_t>(bytes, kArtifactFormatVersion);
  appendLE<uint32_t>(bytes, 0);
  appendLE<uint64_t>(bytes, text.size());
  bytes += text;
  // Version 3: a section count, then per section its name and its bytes, each with its size.
  appendLE<uint64_t>(bytes, sections.size());
  for (const ArtifactSection &s : sections) {
    appendLE<uint64_t>(bytes, s.name.size());
    bytes += s.name;
    appendLE<uint64_t>(bytes, s.data.size());
    bytes += s.data;
  }
  appendLE<uint32_t>(bytes, llvm::crc32(ArrayRef<uint8_t>(
                                reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size())));
  os << bytes;
}

LogicalResult mlir::med::writeArtifact(ModuleOp module, const ArtifactManifest &manifest,
                                       llvm::raw_ostream &os) {
  FailureOr<json::Value> doc = artifactDocument(module, manifest);
  if (failed(doc))
    return failure();
  writeArtifactContainer(*doc, {}, os);
  return success();
}
