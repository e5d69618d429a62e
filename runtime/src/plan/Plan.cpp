//===- Plan.cpp - reading the functions of a plan -------------------------------===//
#include "PlanReader.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace medrun {

using json = nlohmann::json;

//===----------------------------------------------------------------------------------===//
// OpInfo accessors
//===----------------------------------------------------------------------------------===//

const OpInfo *Function::role(const std::string &name) const {
  auto it = roles.find(name);
  return it == roles.end() ? nullptr : &ops.at(it->second);
}

std::string OpInfo::describe() const {
  return str("'med.", kind, "'", location.empty() ? "" : " at " + location);
}

const std::vector<int> &OpInfo::operand(const std::string &name) const {
  for (auto &[key, ids] : operands)
    if (key == name)
      return ids;
  throw Error(str(describe(), ": the plan has no operand '", name, "'"));
}

int OpInfo::single(const std::string &name) const {
  const std::vector<int> &ids = operand(name);
  if (ids.size() != 1)
    throw Error(str(describe(), ": operand '", name, "' needs exactly one value, the plan has ",
                    ids.size()));
  return ids.front();
}

std::optional<int> OpInfo::optional(const std::string &name) const {
  const std::vector<int> &ids = operand(name);
  if (ids.size() > 1)
    throw Error(str(describe(), ": optional operand '", name, "' has ", ids.size(), " values"));
  return ids.empty() ? std::nullopt : std::optional<int>(ids.front());
}

namespace {
template <typename T> const T &attrAs(const OpInfo &op, const std::string &name, const char *what) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end())
    throw Error(str(op.describe(), ": the plan has no attribute '", name, "'"));
  if (const T *v = std::get_if<T>(&it->second))
    return *v;
  throw Error(str(op.describe(), ": attribute '", name, "' is not ", what));
}
} // namespace

int64_t OpInfo::intAttr(const std::string &n) const { return attrAs<int64_t>(*this, n, "an integer"); }
double OpInfo::floatAttr(const std::string &n) const {
  auto it = attrs.find(n);
  if (it != attrs.end())
    if (const int64_t *i = std::get_if<int64_t>(&it->second))
      return static_cast<double>(*i); // JSON writes 1.0 as 1
  return attrAs<double>(*this, n, "a number");
}
bool OpInfo::boolAttr(const std::string &n) const { return attrAs<bool>(*this, n, "a boolean"); }
const std::string &OpInfo::strAttr(const std::string &n) const {
  return attrAs<std::string>(*this, n, "a string");
}
std::vector<int64_t> OpInfo::intsAttr(const std::string &n) const {
  auto it = attrs.find(n);
  if (it != attrs.end())
    if (auto *d = std::get_if<std::vector<double>>(&it->second); d && d->empty())
      return {};
  return attrAs<std::vector<int64_t>>(*this, n, "a list of integers");
}
std::vector<double> OpInfo::floatsAttr(const std::string &n) const {
  auto it = attrs.find(n);
  if (it != attrs.end())
    if (auto *i = std::get_if<std::vector<int64_t>>(&it->second))
      return std::vector<double>(i->begin(), i->end());
  return attrAs<std::vector<double>>(*this, n, "a list of numbers");
}

//===----------------------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------------------===//

/// A number JSON cannot spell, as medc writes it: {"nonfinite": "inf" | "-inf" | "nan"}.
static std::optional<double> nonFinite(const json &v) {
  if (!v.is_object() || v.size() != 1 || !v.contains("nonfinite") || !v["nonfinite"].is_string())
    return std::nullopt;
  const std::string &s = v["nonfinite"].get_ref<const std::string &>();
  if (s == "inf")
    return std::numeric_limits<double>::infinity();
  if (s == "-inf")
    return -std::numeric_limits<double>::infinity();
  if (s == "nan")
    return std::numeric_limits<double>::quiet_NaN();
  return std::nullopt;
}

AttrValue PlanReader::attr(const json &v, const std::string &where) const {
  if (v.is_boolean())
    return v.get<bool>();
  if (std::optional<double> d = nonFinite(v))
    return *d;
  if (v.is_number_integer())
    return v.get<int64_t>();
  if (v.is_number())
    return v.get<double>();
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_array()) {
    bool allInts = std::all_of(v.begin(), v.end(), [](const json &e) { return e.is_number_integer(); });
    if (allInts && !v.empty())
      return ints(v, where);
    std::vector<double> out;
    for (const json &e : v) {
      if (std::optional<double> d = nonFinite(e)) {
        out.push_back(*d);
        continue;
      }
      if (!e.is_number())
        fail(where, "lists hold numbers only");
      out.push_back(e.get<double>());
    }
    return out;
  }
  fail(where, "unsupported attribute value");
}

Function PlanReader::function(const json &j, size_t index) const {
  Function f;
  std::string where = str("functions[", index, "]");
  f.name = string(j, "name", where);
  where = str("function '", f.name, "'");
  const json &values = field(j, "values", where);
  if (!values.is_array())
    fail(where, "'values' must be a list");
  for (size_t i = 0; i < values.size(); ++i) {
    const json &v = values[i];
    const std::string w = str(where, ".values[", i, "]");
    ValueInfo info{parseDType(string(v, "dtype", w), file), shape(v, where)};
    info.storage = info.dtype;
    if (v.contains("storage")) { // med-assign-storage's decision (mixed precision)
      info.storage = parseDType(string(v, "storage", w), file);
      if (!isFloat(info.dtype) ? info.storage != info.dtype : !isFloat(info.storage))
        fail(w, str("storage ", dtypeName(info.storage), " for a value of type ",
                    dtypeName(info.dtype)));
    }
    f.values.push_back(info);
  }
  auto ids = [&](const json &arr, const std::string &w) {
    std::vector<int> out;
    for (int64_t id : ints(arr, w)) {
      if (id < 0 || id >= static_cast<int64_t>(f.values.size()))
        fail(w, str("value id ", id, " out of range (", f.values.size(), " values)"));
      out.push_back(static_cast<int>(id));
    }
    return out;
  };
  f.inputs = ids(field(j, "inputs", where), where + ".inputs");
  f.outputs = ids(field(j, "outputs", where), where + ".outputs");
  // Optional name lists (older artifacts have none): one string per input / output.
  auto names = [&](const char *key, size_t count, const char *fallback) {
    std::vector<std::string> out;
    if (!j.contains(key)) {
      for (size_t i = 0; i < count; ++i)
        out.push_back(fallback + std::to_string(i));
      return out;
    }
    const json &list = j[key];
    if (!list.is_array() || list.size() != count)
      fail(where, str("'", key, "' must list one name per ", fallback == std::string("arg") ? "input" : "output"));
    for (const json &n : list) {
      if (!n.is_string())
        fail(where, str("'", key, "' must hold strings"));
      out.push_back(n.get<std::string>());
    }
    return out;
  };
  if (j.contains("precision")) {
    f.precision = string(j, "precision", where);
    if (f.precision != "fp32" && f.precision != "bf16-mixed" && f.precision != "fp16-mixed")
      fail(where, str("unknown precision '", f.precision,
                      "' (expected fp32, bf16-mixed or fp16-mixed)"));
  }
  // A mixed-precision function says how each value is stored (med-assign-storage).
  if (!f.precision.empty() && f.precision != "fp32")
    for (size_t i = 0; i < values.size(); ++i)
      if (!values[i].contains("storage"))
        fail(str(where, ".values[", i, "]"),
             str("a ", f.precision, " function needs the storage type of every value"));
  if (j.contains("init_loss_scale")) {
    const json &s = j["init_loss_scale"];
    if (!s.is_number() || !(s.get<double>() > 0))
      fail(where, "'init_loss_scale' must be a positive number");
    f.initLossScale = s.get<double>();
  }
  f.inputNames = names("input_names", f.inputs.size(), "arg");
  f.outputNames = names("output_names", f.outputs.size(), "out");
  const json &ops = field(j, "ops", where);
  if (!ops.is_array())
    fail(where, "'ops' must be a list");
  std::vector<bool> defined(f.values.size(), false);
  for (int id : f.inputs)
    defined[id] = true;
  for (size_t i = 0; i < ops.size(); ++i) {
    const json &o = ops[i];
    std::string w = str(where, ".ops[", i, "]");
    OpInfo op;
    op.kind = string(o, "op", w);
    op.schema = med::ops::findOp(op.kind);
    if (!op.schema)
      fail(w, str("unknown op kind '", op.kind, "'"));
    if (o.contains("loc") && o["loc"].is_string())
      op.location = o["loc"].get<std::string>();
    if (o.contains("fp32")) {
      if (!o["fp32"].is_boolean())
        fail(w, "'fp32' must be true or false");
      op.fp32 = o["fp32"].get<bool>();
    }
    if (o.contains("instance_norm")) {
      if (!o["instance_norm"].is_boolean())
        fail(w, "'instance_norm' must be true or false");
      op.instanceNorm = o["instance_norm"].get<bool>();
    }
    const json &operands = field(o, "operands", w);
    if (!operands.is_object())
      fail(w, "'operands' must be an object");
    for (auto it = operands.begin(); it != operands.end(); ++it) {
      std::vector<int> group = ids(it.value(), w + ".operands." + it.key());
      for (int id : group)
        if (!defined[id])
          fail(w, str("operand '", it.key(), "' uses value ", id, " before it is defined"));
      op.operands.emplace_back(it.key(), std::move(group));
    }
    op.results = ids(field(o, "results", w), w + ".results");
    for (int id : op.results) {
      if (defined[id])
        fail(w, str("value ", id, " is defined twice"));
      defined[id] = true;
    }
    const json &attrs = field(o, "attrs", w);
    if (!attrs.is_object())
      fail(w, "'attrs' must be an object");
    for (auto it = attrs.begin(); it != attrs.end(); ++it)
      op.attrs[it.key()] = attr(it.value(), w + ".attrs." + it.key());
    if (op.kind == "fusion")
      op.body = fusionBodyOf(op, f, w);
    f.ops.push_back(std::move(op));
  }
  for (int id : f.outputs)
    if (!defined[id])
      fail(where, str("output value ", id, " is never defined"));
  if (j.contains("cuda_plan"))
    f.cuda = cudaPlan(j["cuda_plan"], f, where + ".cuda_plan");
  return f;
}

std::shared_ptr<const Function> PlanReader::fusionBodyOf(const OpInfo &op, const Function &f,
                                                         const std::string &w) const {
  auto it = op.attrs.find("body");
  const int64_t *index = it == op.attrs.end() ? nullptr : std::get_if<int64_t>(&it->second);
  if (!index || *index < 0 || *index >= static_cast<int64_t>(fusions.size()))
    fail(w, str("a fusion needs 'body', the index of its body in 'fusions' (",
                fusions.size(), " bodies)"));
  std::shared_ptr<const Function> body = fusions[*index];
  auto same = [&](const std::vector<int> &outer, const std::vector<int> &inner,
                  const char *what) {
    if (outer.size() != inner.size())
      fail(w, str("the fusion has ", outer.size(), " ", what, ", ", body->name, " has ",
                  inner.size()));
    for (size_t i = 0; i < outer.size(); ++i) {
      const ValueInfo &a = f.values[outer[i]], &b = body->values[inner[i]];
      if (a.shape != b.shape || a.dtype != b.dtype)
        fail(w, str(what, " #", i, " is ", shapeStr(a.shape), " ", dtypeName(a.dtype), ", in ",
                    body->name, " ", shapeStr(b.shape), " ", dtypeName(b.dtype)));
    }
  };
  auto inputs = std::find_if(op.operands.begin(), op.operands.end(),
                             [](const auto &g) { return g.first == "inputs"; });
  if (inputs == op.operands.end())
    fail(w, "a fusion needs the operand group 'inputs'");
  same(inputs->second, body->inputs, "inputs");
  same(op.results, body->outputs, "results");
  return body;
}

CudaPlan PlanReader::cudaPlan(const json &j, const Function &f, const std::string &where,
                              bool needMemory) const {
  CudaPlan plan;
  for (int64_t b : ints(field(j, "scratch", where), where + ".scratch")) {
    if (b < 0)
      fail(where, "negative scratch size");
    plan.scratch.push_back(b);
  }
  if (plan.scratch.empty() || plan.scratch[0] < 4)
    fail(where, "scratch 0 must be the 4-byte status word");
  const int64_t buffers = static_cast<int64_t>(f.values.size() + plan.scratch.size());
  const json &steps = field(j, "steps", where);
  if (!steps.is_array())
    fail(where, "'steps' must be a list");
  auto valueId = [&](const json &s, const char *key, const std::string &w) {
    const json &v = field(s, key, w);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() >= static_cast<int64_t>(f.values.size()))
      fail(w, str("'", key, "' is not a value id"));
    return v.get<int>();
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    const json &s = steps[i];
    std::string w = str(where, ".steps[", i, "]");
    CudaStep step;
    std::string kind = string(s, "kind", w);
    const json &op = field(s, "op", w);
    if (!op.is_number_integer() || op.get<int64_t>() < 0 ||
        op.get<int64_t>() >= static_cast<int64_t>(f.ops.size()))
      fail(w, "'op' is not an op index");
    step.op = op.get<int>();
    if (kind == "launch") {
      step.kind = CudaStep::Kind::Launch;
      step.kernel = string(s, "kernel", w);
      auto dims = [&](const char *key) {
        std::vector<int64_t> d = ints(field(s, key, w), w + "." + key);
        if (d.size() != 3 || d[0] < 1 || d[1] < 1 || d[2] < 1 || d[0] > 0x7fffffff ||
            d[1] > 65535 || d[2] > 65535)
          fail(w, str("'", key, "' must be three positive sizes within the launch limits"));
        return std::array<uint32_t, 3>{static_cast<uint32_t>(d[0]), static_cast<uint32_t>(d[1]),
                                       static_cast<uint32_t>(d[2])};
      };
      step.grid = dims("grid");
      step.block = dims("block");
      if (uint64_t(step.block[0]) * step.block[1] * step.block[2] > 1024)
        fail(w, "a block has more than 1024 threads");
      const json &shared = field(s, "shared", w);
      if (!shared.is_number_integer() || shared.get<int64_t>() < 0 ||
          shared.get<int64_t>() > 0xffffffff)
        fail(w, "'shared' must be a byte count");
      step.shared = shared.get<uint32_t>();
      for (int64_t id : ints(field(s, "args", w), w + ".args")) {
        if (id < 0 || id >= buffers)
          fail(w, str("argument ", id, " is neither a value nor a scratch buffer"));
        step.args.push_back(static_cast<int>(id));
      }
      if (s.contains("variants")) {
        const json &v = s["variants"];
        if (!v.is_array())
          fail(w, "'variants' must be a list of kernel names");
        for (const json &k : v) {
          if (!k.is_string() || k.get<std::string>().empty())
            fail(w, "'variants' must be a list of kernel names");
          step.variants.push_back(k.get<std::string>());
        }
      }
      if (s.contains("scalars"))
        for (int64_t v : ints(s["scalars"], w + ".scalars")) {
          if (v < 0 || v > 0xffffffffLL)
            fail(w, str("scalar argument ", v, " is not a 32-bit unsigned value"));
          step.scalars.push_back(static_cast<uint32_t>(v));
        }
    } else if (kind == "param" || kind == "assign") {
      step.kind = kind == "param" ? CudaStep::Kind::Param : CudaStep::Kind::Assign;
      step.name = string(s, "name", w);
      step.value = valueId(s, "value", w);
      if (kind == "assign" && s.contains("in_place")) {
        if (!s["in_place"].is_boolean())
          fail(w, "'in_place' must be true or false");
        step.inPlace = s["in_place"].get<bool>();
      }
    } else if (kind == "alias") {
      step.kind = CudaStep::Kind::Alias;
      step.value = valueId(s, "value", w);
      step.from = valueId(s, "from", w);
    } else if (kind == "place") {
      step.kind = CudaStep::Kind::Place;
      step.value = valueId(s, "value", w);
      step.from = valueId(s, "into", w);
      const json &offset = field(s, "offset", w);
      if (!offset.is_number_integer() || offset.get<int64_t>() < 0 ||
          offset.get<int64_t>() % 16 != 0)
        fail(w, "'offset' must be a byte count that is a multiple of 16");
      step.offset = offset.get<size_t>();
    } else if (kind == "all_reduce") {
      step.kind = CudaStep::Kind::AllReduce;
      for (int64_t id : ints(field(s, "args", w), w + ".args")) {
        if (id < 0 || id >= static_cast<int64_t>(f.values.size()))
          fail(w, str("argument ", id, " is not a value"));
        step.args.push_back(static_cast<int>(id));
      }
    } else {
      fail(w, str("unknown step kind '", kind,
                  "' (expected launch, param, alias, place, assign or all_reduce)"));
    }
    plan.steps.push_back(std::move(step));
  }
  // Each kernel's launch contracts (plan v11), which the plan verifier checks the steps
  // against (medrun/LaunchContract.h); here only their form.
  if (j.contains("kernels")) {
    const std::string w = where + ".kernels";
    const json &kernels = j["kernels"];
    if (!kernels.is_object())
      fail(w, "'kernels' must map kernel names to their launch contracts");
    for (const auto &[name, list] : kernels.items()) {
      const std::string wk = str(w, ".", name);
      if (!list.is_array() || list.empty())
        fail(wk, "expected a non-empty list of launch contracts");
      for (const json &c : list) {
        LaunchContract contract;
        contract.op = string(c, "op", wk);
        contract.signature = string(c, "signature", wk);
        auto dims = [&](const char *key) {
          std::vector<int64_t> d = ints(field(c, key, wk), wk + "." + key);
          if (d.size() != 3 || std::any_of(d.begin(), d.end(),
                                           [](int64_t x) { return x < 1 || x > 0x7fffffff; }))
            fail(wk, str("'", key, "' must be three positive sizes"));
          return std::array<uint32_t, 3>{static_cast<uint32_t>(d[0]),
                                         static_cast<uint32_t>(d[1]),
                                         static_cast<uint32_t>(d[2])};
        };
        contract.grid = dims("grid");
        contract.block = dims("block");
        const json &shared = field(c, "shared", wk);
        if (!shared.is_number_integer() || shared.get<int64_t>() < 0 ||
            shared.get<int64_t>() > 0xffffffff)
          fail(wk, "'shared' must be a byte count");
        contract.shared = shared.get<uint32_t>();
        const json &args = field(c, "args", wk);
        if (!args.is_array())
          fail(wk, "'args' must be a list of argument roles");
        for (const json &a : args) {
          if (!a.is_string())
            fail(wk, "'args' must be a list of argument roles");
          contract.args.push_back(a.get<std::string>());
        }
        plan.kernels[name].push_back(std::move(contract));
      }
    }
  }
  // medc's memory plan (plan v8). Its offsets are checked against the buffers' lives when
  // the runtime places them (checkArena); here only their form.
  if (!j.contains("memory")) {
    if (needMemory)
      fail(where, "no 'memory' (the memory plan of plan format 8; recompile the model)");
    return plan;
  }
  const std::string w = where + ".memory";
  const json &memory = field(j, "memory", where);
  const json &bytes = field(memory, "arena", w);
  if (!bytes.is_number_integer() || bytes.get<int64_t>() < 0)
    fail(w, "'arena' must be a byte count");
  plan.arenaBytes = bytes.get<int64_t>();
  plan.offsets = ints(field(memory, "offsets", w), w + ".offsets");
  if (static_cast<int64_t>(plan.offsets.size()) != buffers)
    fail(w, str("'offsets' has ", plan.offsets.size(), " entries for ", buffers,
                " buffers (values, then scratch)"));
  for (int64_t o : plan.offsets)
    if (o < -1)
      fail(w, str("offset ", o, " is neither a byte offset nor -1"));
  return plan;
}

Plan PlanReader::plan(const json &doc) {
  // Fusion bodies first: ops of the functions refer to them. A body is shaped like a
  // function (values, inputs, outputs, ops) and names its template.
  if (doc.contains("fusions")) {
    const json &bodies = doc["fusions"];
    if (!bodies.is_array())
      fail("document", "'fusions' must be a list");
    for (size_t i = 0; i < bodies.size(); ++i) {
      json body = bodies[i];
      if (!body.is_object())
        fail(str("fusions[", i, "]"), "not an object");
      body["name"] = str("fusion body ", i);
      Function f = function(body, i);
      f.fusionTemplate = string(body, "template", f.name);
      if (body.contains("roles")) {
        const json &roles = body["roles"];
        if (!roles.is_object())
          fail(f.name, "'roles' must map role names to op indices");
        for (const auto &[role, index] : roles.items()) {
          if (!index.is_number_integer() || index.get<int64_t>() < 0 ||
              index.get<int64_t>() >= static_cast<int64_t>(f.ops.size()))
            fail(f.name, str("role '", role, "' must be the index of one of its ", f.ops.size(),
                             " ops"));
          f.roles[role] = index.get<int>();
        }
      }
      if (f.cuda)
        fail(f.name, "a fusion body has no CUDA plan of its own");
      fusions.push_back(std::make_shared<const Function>(std::move(f)));
    }
  }
  Plan p;
  p.fusions = fusions;
  const json &list = field(doc, "functions", "document");
  if (!list.is_array() || list.empty())
    fail("document", "'functions' must be a non-empty list");
  for (size_t i = 0; i < list.size(); ++i)
    p.functions.push_back(function(list[i], i));
  return p;
}

Plan readPlan(const std::string &text, const std::string &file) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  PlanReader r{file};
  if (doc.is_discarded() || !doc.is_object())
    r.fail("document", "not a JSON object");
  return r.plan(doc);
}

CudaPlan readCudaPlan(const std::string &text, const Function &fn, const std::string &file) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  PlanReader r{file};
  if (doc.is_discarded() || !doc.is_object())
    r.fail("cuda_plan", "not a JSON object");
  return r.cudaPlan(doc, fn, str("function '", fn.name, "'.cuda_plan"), /*needMemory=*/false);
}

} // namespace medrun

#include "medrun/ConvView.h"

namespace medrun {

std::optional<ConvView> convView(const Function &fn, const OpInfo &op) {
  ConvView v;
  if (op.kind == "conv3d" || op.kind == "conv3d_transpose" || op.kind == "conv3d_grad_weight") {
    v.kind = op.kind;
    v.stride = op.intsAttr("stride");
    v.padding = op.intsAttr("padding");
    v.dilation = op.intsAttr("dilation");
    v.outputPadding = op.kind == "conv3d_transpose" ? op.intsAttr("output_padding") : Shape{0, 0, 0};
    v.groups = op.intAttr("groups");
    return v;
  }
  if (op.kind != "shift_sum" && op.kind != "shift_sum_grad_weight")
    return std::nullopt;
  const bool grad = op.kind == "shift_sum_grad_weight";
  v.kind = grad ? "conv3d_grad_weight" : op.boolAttr("mirrored") ? "conv3d_transpose" : "conv3d";
  v.shiftSum = true;
  const Shape &x = fn.values.at(op.single("input")).shape;
  Shape kernel = grad ? op.intsAttr("kernel") : Shape{};
  if (!grad) {
    const Shape &w = fn.values.at(op.single("weight")).shape;
    if (w.size() == 5)
      kernel.assign(w.begin() + 2, w.end());
  }
  v.stride = v.dilation = {1, 1, 1};
  v.outputPadding = {0, 0, 0};
  for (int64_t k : kernel)
    v.padding.push_back(k / 2);
  v.groups = x.size() == 5 ? x[1] : 1;
  return v;
}

} // namespace medrun
