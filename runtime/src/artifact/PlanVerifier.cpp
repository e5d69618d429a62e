//===- PlanVerifier.cpp - re-checking a loaded plan before anything runs --------===//
//
// Three layers, in order: sizes (every value's element and byte count fits, with checked
// arithmetic, before anything is allocated), ops (each op's operand groups, attributes and
// result types, by the dialect's own shape rules in med/ShapeRules.h: this file only adapts
// the plan's JSON form to them) and the CUDA launch plan (what each step touches).
//
//===----------------------------------------------------------------------------------===//
#include "PlanVerifier.h"

#include "med/ShapeRules.h"
#include "medrun/Error.h"
#include "medrun/LaunchContract.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

namespace medrun {

namespace {

namespace shape = med::shape;

/// Elements of `shape` times `elementBytes`, or -1 when that exceeds kMaxTensorBytes.
int64_t boundedBytes(const Shape &shape, size_t elementBytes) {
  int64_t n = static_cast<int64_t>(elementBytes);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > kMaxTensorBytes)
      return -1;
  return n;
}

/// "5 dimensions of 2x3x... (N bytes)", or why the sizes are out of bounds; empty when fine.
std::string sizeProblem(DType dtype, const Shape &shape) {
  if (shape.size() > kMaxRank)
    return str("rank ", shape.size(), " exceeds the limit of ", kMaxRank);
  if (boundedBytes(shape, dtypeSize(dtype)) < 0)
    return str("shape ", shapeStr(shape), " of ", dtypeName(dtype), " exceeds the limit of ",
               kMaxTensorBytes, " bytes per tensor");
  return {};
}

//===----------------------------------------------------------------------------------===//
// The ops: signatures (operand groups) and the adapters to the shape rules
//===----------------------------------------------------------------------------------===//

/// The plan's view of one op, in the rules' types.
struct OpView {
  const Function &fn;
  const OpInfo &op;

  shape::TensorType type(int id) const {
    const ValueInfo &v = fn.values[id];
    return {v.shape, dtypeName(v.dtype)};
  }
  shape::TensorType in(const std::string &name) const { return type(op.single(name)); }
  std::optional<shape::TensorType> optional(const std::string &name) const {
    std::optional<int> id = op.optional(name);
    return id ? std::optional(type(*id)) : std::nullopt;
  }
  shape::Types all(const std::string &name) const {
    shape::Types out;
    for (int id : op.operand(name))
      out.push_back(type(id));
    return out;
  }
  /// An optional list attribute, if the plan has it.
  std::optional<shape::Dims> optionalInts(const std::string &name) const {
    return op.attrs.count(name) ? std::optional(op.intsAttr(name)) : std::nullopt;
  }
  /// A string attribute that must be one of `allowed`.
  const std::string &oneOf(const std::string &name, std::initializer_list<const char *> allowed) const {
    const std::string &v = op.strAttr(name);
    std::string list;
    for (const char *a : allowed) {
      if (v == a)
        return v;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    throw Error(str("'", name, "' is '", v, "', expected one of ", list));
  }
};

template <typename T> const T *ptr(const std::optional<T> &t) { return t ? &*t : nullptr; }

using Rule = std::function<shape::Error(const OpView &, shape::Types &)>;

/// The shape rule of each op, by plan name; the operand groups and attribute types come from
/// the op table (med/OpTable.h). param, constant, assign and fusion have rules of their own
/// (Verifier::op).
const std::map<std::string, Rule> &shapeRules() {
  static const std::map<std::string, Rule> specs = [] {
    std::map<std::string, Rule> m;
    // The rules ODS names (`shapeRule`), generated from the dialect.
#include "med/PlanShapeRules.inc"
    // The rules written by hand: all_reduce checks its bucket index, label_regions reads its
    // regions' labels one after the other with their lengths.
    m["all_reduce"] = [](const OpView &v, shape::Types &out) {
      if (v.op.intAttr("bucket") < 0)
        return shape::Error("'bucket' must be non-negative, got " +
                            std::to_string(v.op.intAttr("bucket")));
      return shape::allReduce(v.all("inputs"), v.op.intsAttr("offsets"), v.op.intAttr("size"), out);
    };
    m["label_regions"] = [](const OpView &v, shape::Types &out) {
      shape::Dims labels = v.op.intsAttr("regions"), sizes = v.op.intsAttr("region_sizes");
      std::vector<shape::Dims> regions;
      size_t at = 0;
      for (int64_t n : sizes) {
        if (n < 0 || static_cast<size_t>(n) > labels.size() - at)
          throw Error(str("'region_sizes' ", shape::listStr(sizes), " do not add up to the ",
                          labels.size(), " labels of 'regions'"));
        regions.emplace_back(labels.begin() + at, labels.begin() + at + n);
        at += n;
      }
      if (at != labels.size())
        throw Error(str("'region_sizes' ", shape::listStr(sizes), " do not add up to the ",
                        labels.size(), " labels of 'regions'"));
      return shape::labelRegions(v.in("input"), regions, out);
    };
    for (const char *own : {"fusion", "param", "constant", "assign"})
      m[own] = nullptr;
    return m;
  }();
  return specs;
}

std::string typeStr(const ValueInfo &v) {
  return shape::typeStr({v.shape, dtypeName(v.dtype)});
}

struct Verifier {
  const Artifact &a;

  [[noreturn]] void fail(const Function &fn, const std::string &msg) const {
    throw Error(str(a.path, ": invalid plan: ",
                    fn.fusionTemplate.empty() ? str("function '", fn.name, "'") : fn.name, ": ",
                    msg));
  }
  [[noreturn]] void fail(const Function &fn, size_t index, const OpInfo &op,
                         const std::string &msg) const {
    fail(fn, str("op ", index, " ", op.describe(), ": ", msg));
  }

  void parameters() const {
    for (const ParameterInfo &p : a.parameters)
      if (std::string problem = sizeProblem(p.dtype, p.shape); !problem.empty())
        throw Error(str(a.path, ": invalid plan: parameter '", p.name, "': ", problem));
  }

  void function(const Function &fn) const {
    for (size_t id = 0; id < fn.values.size(); ++id)
      if (std::string problem = sizeProblem(fn.values[id].dtype, fn.values[id].shape);
          !problem.empty())
        fail(fn, str("value ", id, ": ", problem));
    if (fn.fusionTemplate.empty() && launchChecks())
      storage(fn);
    std::set<int> inputs;
    for (int id : fn.inputs)
      if (!inputs.insert(id).second)
        fail(fn, str("value ", id, " is listed twice among the inputs"));
    for (size_t i = 0; i < fn.ops.size(); ++i) {
      const OpInfo &op = fn.ops[i];
      try {
        this->op(fn, op);
      } catch (const Error &e) {
        // OpInfo's accessors name the op themselves; the function and index are added here.
        std::string msg = e.what(), prefix = op.describe() + ": ";
        if (msg.compare(0, prefix.size(), prefix) == 0)
          msg = msg.substr(prefix.size());
        fail(fn, i, op, msg);
      }
    }
    if (fn.cuda)
      cudaPlan(fn, *fn.cuda);
  }

  /// The launch contracts and storage types are checked unless a test turns them off
  /// (MEDRUN_TEST_UNCHECKED_LAUNCHES=1, launch-mutations.test's control: it shows what the
  /// edits these checks refuse would do). Not for users: docs/reliability.md.
  static bool launchChecks() {
    static const bool on = [] {
      const char *e = std::getenv("MEDRUN_TEST_UNCHECKED_LAUNCHES");
      return !(e && *e && std::strcmp(e, "0") != 0);
    }();
    return on;
  }

  /// Each value is stored as med-assign-storage may store it: in its own type, or, in a
  /// mixed-precision function, an f32 value of rank > 0 (an activation) in the 16-bit type.
  void storage(const Function &fn) const {
    const bool mixed = fn.precision == "bf16-mixed" || fn.precision == "fp16-mixed";
    const DType low = fn.precision == "bf16-mixed" ? DType::BF16 : DType::F16;
    for (size_t id = 0; id < fn.values.size(); ++id) {
      const ValueInfo &v = fn.values[id];
      if (v.storage == v.dtype ||
          (mixed && v.dtype == DType::F32 && !v.shape.empty() && v.storage == low))
        continue;
      fail(fn, str("value ", id, " (", typeStr(v), "): 'storage' is ", dtypeName(v.storage), ", but ",
                   mixed ? str("a ", fn.precision, " function stores an f32 activation as f32 or ",
                               dtypeName(low), " and every other value in its own type")
                         : str("a function of precision ",
                               fn.precision.empty() ? "fp32 (none recorded)" : fn.precision,
                               " stores every value in its own type")));
    }
  }

  // Throws Error (without the op's name) for the first inconsistency of `op`.
  void op(const Function &fn, const OpInfo &op) const {
    const med::ops::OpSchema &schema = *op.schema; // the plan reader refuses unknown ops
    using med::ops::Arity;
    // Operand groups: exactly the op's, each with as many values as its arity allows.
    for (const med::ops::OperandSpec &o : schema.operands) {
      auto it = std::find_if(op.operands.begin(), op.operands.end(),
                             [&](auto &g) { return g.first == o.name; });
      if (it == op.operands.end())
        throw Error(str("the plan has no operand '", o.name, "'"));
      size_t n = it->second.size();
      if ((o.arity == Arity::One && n != 1) || (o.arity == Arity::Optional && n > 1))
        throw Error(str("operand '", o.name, "': expected ",
                        o.arity == Arity::One ? "one value" : "at most one value", ", the plan has ",
                        n));
      for (int id : it->second)
        if (!o.label && !isFloat(fn.values[id].dtype))
          throw Error(str("operand '", o.name, "' (value ", id, "): expected a float tensor, got ",
                          typeStr(fn.values[id])));
    }
    for (auto &group : op.operands)
      if (!schema.operand(group.first))
        throw Error(str("unexpected operand '", group.first, "'"));
    attributes(op);

    std::vector<ValueInfo> expected;
    if (op.kind == "param" || op.kind == "assign") {
      const std::string &name = op.strAttr("name");
      const ParameterInfo *p = a.parameter(name);
      const FlatBuffer *flat = p ? nullptr : a.flatBuffer(name);
      if (!p && !flat)
        throw Error(str("parameter '", name, "' is not declared in the artifact"));
      ValueInfo declared = p ? ValueInfo{p->dtype, p->shape} : ValueInfo{DType::F32, {flat->size}};
      if (op.kind == "assign") {
        const ValueInfo &v = fn.values[op.single("value")];
        if (v.dtype != declared.dtype || v.shape != declared.shape)
          throw Error(str("operand 'value': expected ", typeStr(declared), " (the type of parameter '",
                          name, "'), got ", typeStr(v)));
      } else {
        expected.push_back(declared);
      }
    } else if (op.kind == "fusion") {
      // Artifact::load attached the body and matched it to the inputs and results; the
      // body itself is verified as a function (verifyPlan).
      if (!op.body)
        throw Error("a fusion without a body");
      const std::string &name = op.strAttr("template");
      if (name != op.body->fusionTemplate)
        throw Error(str("template '", name, "', but its body is for template '",
                        op.body->fusionTemplate, "'"));
      for (int id : op.body->outputs)
        expected.push_back(op.body->values[id]);
    } else if (op.kind == "constant") {
      if (op.results.size() != 1)
        throw Error(str("expected 1 result, the plan has ", op.results.size()));
      const ValueInfo &v = fn.values[op.results[0]];
      size_t count = op.floatsAttr("value").size();
      if (count != 1 && static_cast<int64_t>(count) != numElements(v.shape))
        throw Error(str("'value' has ", count, " numbers, the result ", typeStr(v), " has ",
                        numElements(v.shape), " elements"));
      expected.push_back(v);
    } else {
      shape::Types inferred;
      auto rule = shapeRules().find(op.kind);
      if (rule == shapeRules().end() || !rule->second)
        throw Error("no shape rule for this op");
      shape::Error problem = rule->second(OpView{fn, op}, inferred);
      if (!problem.empty())
        throw Error(problem);
      for (const shape::TensorType &t : inferred) {
        ValueInfo v;
        v.dtype = parseDType(t.element, "element type");
        v.shape = t.shape;
        expected.push_back(v);
      }
    }
    if (op.results.size() != expected.size())
      throw Error(str("expected ", expected.size(), " result", expected.size() == 1 ? "" : "s",
                      " (inferred from the operands), the plan has ", op.results.size()));
    for (size_t i = 0; i < expected.size(); ++i) {
      const ValueInfo &v = fn.values[op.results[i]];
      if (v.dtype != expected[i].dtype || v.shape != expected[i].shape)
        throw Error(str("result ", i, " (value ", op.results[i], "): expected ",
                        typeStr(expected[i]), " (inferred from the operands), got ", typeStr(v)));
    }
  }

  /// Each attribute the table declares is present (unless optional) with its type.
  static void attributes(const OpInfo &op) {
    using med::ops::AttrType;
    for (const med::ops::AttrSpec &a : op.schema->attrs) {
      auto it = op.attrs.find(a.name);
      if (it == op.attrs.end()) {
        if (a.optional)
          continue;
        throw Error(str("the plan has no attribute '", a.name, "'"));
      }
      const AttrValue &v = it->second;
      bool ok = true;
      const char *expected = "";
      switch (a.type) {
      case AttrType::Int: ok = std::holds_alternative<int64_t>(v), expected = "an integer"; break;
      case AttrType::Float:
        ok = std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v);
        expected = "a number";
        break;
      case AttrType::Bool: ok = std::holds_alternative<bool>(v), expected = "true or false"; break;
      case AttrType::String:
        ok = std::holds_alternative<std::string>(v), expected = "a string";
        if (ok && !a.values.empty() &&
            std::none_of(a.values.begin(), a.values.end(),
                         [&](const char *e) { return std::get<std::string>(v) == e; })) {
          std::string list;
          for (const char *e : a.values)
            list += (list.empty() ? "" : ", ") + std::string(e);
          throw Error(str("'", a.name, "' is '", std::get<std::string>(v), "', expected one of ",
                          list));
        }
        break;
      case AttrType::Ints: // an empty list reads as either kind
        ok = std::holds_alternative<std::vector<int64_t>>(v) ||
             (std::holds_alternative<std::vector<double>>(v) && std::get<std::vector<double>>(v).empty());
        expected = "a list of integers";
        break;
      case AttrType::Floats:
        ok = std::holds_alternative<std::vector<double>>(v) ||
             std::holds_alternative<std::vector<int64_t>>(v);
        expected = "a list of numbers";
        break;
      case AttrType::Other: break;
      }
      if (!ok)
        throw Error(str("attribute '", a.name, "': expected ", expected));
    }
  }

  void cudaPlan(const Function &fn, const CudaPlan &plan) const {
    const size_t values = fn.values.size();
    for (size_t k = 0; k < plan.scratch.size(); ++k)
      if (plan.scratch[k] > kMaxTensorBytes)
        fail(fn, str("cuda_plan: scratch buffer ", k, " has ", plan.scratch[k],
                     " bytes, more than the limit of ", kMaxTensorBytes));
    std::set<int> placed;
    LaunchState launchState;
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const CudaStep &step = plan.steps[s];
      const OpInfo &op = fn.ops[step.op];
      auto bad = [&](const std::string &msg) {
        fail(fn, step.op, op, str("cuda_plan step ", s, ": ", msg));
      };
      auto isOperand = [&](int id) {
        for (auto &[name, ids] : op.operands)
          if (std::count(ids.begin(), ids.end(), id))
            return true;
        return false;
      };
      auto isResult = [&](int id) {
        return std::count(op.results.begin(), op.results.end(), id) > 0;
      };
      switch (step.kind) {
      case CudaStep::Kind::Launch: {
        auto module = a.cuda ? a.cuda->kernelModule.find(step.kernel)
                             : std::map<std::string, size_t>::const_iterator();
        if (a.cuda && module == a.cuda->kernelModule.end())
          bad(str("'kernel': kernel '", step.kernel, "' is in no module"));
        for (const std::string &k : step.variants)
          if (a.cuda && !a.cuda->kernelModule.count(k))
            bad(str("'variants': kernel '", k, "' is in no module"));
        if (launchChecks())
          launch(fn, plan, step, launchState, bad);
        if (step.shared > kMaxSharedBytes)
          bad(str("'shared' is ", step.shared, " bytes, more than the ", kMaxSharedBytes,
                  " a block can have"));
        // A launch touches its op's operands and results and scratch buffers, nothing else.
        for (int id : step.args)
          if (static_cast<size_t>(id) < values && !isOperand(id) && !isResult(id))
            bad(str("argument value ", id, " is neither an operand nor a result of the op"));
        if (a.cuda) {
          std::vector<std::string> kernels{step.kernel};
          kernels.insert(kernels.end(), step.variants.begin(), step.variants.end());
          for (const std::string &k : kernels) {
            auto m = a.cuda->kernelModule.find(k);
            if (m == a.cuda->kernelModule.end())
              bad(str("kernel variant '", k, "' is in no module"));
            int params = kernelParameters(a.cuda->modules[m->second].source, k);
            if (params >= 0 && static_cast<size_t>(params) != step.args.size() + step.scalars.size())
              bad(str("kernel '", k, "' takes ", params, " parameters, the launch passes ",
                      step.args.size(), " pointers and ", step.scalars.size(), " scalars"));
          }
          if (!a.cuda->modules[module->second].arch.empty())
            bad(str("kernel '", step.kernel, "' is in the ", a.cuda->modules[module->second].arch,
                    " module: a launch's own kernel must run on every GPU the artifact serves"));
          for (const std::string &k : step.variants)
            if (a.cuda->modules[a.cuda->kernelModule.at(k)].arch.empty())
              bad(str("'variants': kernel '", k, "' is in no sm_90a module (a variant is a ",
                      "kernel of the sm_90a module)"));
        }
        break;
      }
      case CudaStep::Kind::Param:
      case CudaStep::Kind::Assign: {
        bool param = step.kind == CudaStep::Kind::Param;
        if (op.kind != (param ? "param" : "assign") || op.strAttr("name") != step.name ||
            !(param ? isResult(step.value) : isOperand(step.value)))
          bad(str("'", param ? "param" : "assign", "' step of parameter '", step.name, "', value ",
                  step.value, " does not match the op"));
        break;
      }
      case CudaStep::Kind::Place: {
        // A value laid out inside a result of this op (a gradient in the packed gradients):
        // same element type, inside it, and placed once.
        if (!isResult(step.from) || static_cast<size_t>(step.value) >= values)
          bad(str("place of value ", step.value, " into value ", step.from,
                  ": expected a value and a result of the op"));
        const ValueInfo &v = fn.values[step.value], &into = fn.values[step.from];
        if (v.dtype != into.dtype ||
            step.offset + boundedBytes(v.shape, dtypeSize(v.dtype)) >
                boundedBytes(into.shape, dtypeSize(into.dtype)))
          bad(str("place of value ", step.value, " (", typeStr(v), ") at byte ", step.offset,
                  " of value ", step.from, " (", typeStr(into), "): it does not fit"));
        if (!placed.insert(step.value).second)
          bad(str("value ", step.value, " is placed twice"));
        break;
      }
      case CudaStep::Kind::AllReduce:
        if (op.kind != "all_reduce" || step.args != op.operand("inputs"))
          bad("an 'all_reduce' step must belong to an all_reduce op and pass its inputs");
        break;
      case CudaStep::Kind::Alias: {
        const ValueInfo &from = fn.values[step.from], &to = fn.values[step.value];
        if (!isResult(step.value) || !isOperand(step.from))
          bad(str("alias of value ", step.from, " as value ", step.value,
                  ": expected an operand and a result of the op"));
        if (boundedBytes(from.shape, dtypeSize(from.dtype)) !=
            boundedBytes(to.shape, dtypeSize(to.dtype)))
          bad(str("alias of value ", step.from, " (", typeStr(from), ") as value ", step.value, " (",
                  typeStr(to), "): the sizes differ"));
        break;
      }
      }
    }
  }

  /// What the launch steps of one function have established so far: each op's signature,
  /// and where each op's scratch buffers lie (buffer k of the op's ordinal j: k - j, the
  /// same for all its launches) and which op owns each scratch buffer.
  struct LaunchState {
    std::map<int, std::string> signatures;
    std::map<int, int64_t> scratchShift;
    std::map<size_t, int> scratchOwner;
  };

  /// Checks launch step `step` against its kernel's (and each variant's) launch contracts:
  /// generated for this op (kind, attributes, stored types), its arguments the buffers the
  /// contract's roles name in this op, and the grid, block, shared memory and scratch sizes
  /// the kernel was generated for. `bad` reports a problem (naming the function, op, step).
  template <typename Bad>
  void launch(const Function &fn, const CudaPlan &plan, const CudaStep &step, LaunchState &st,
              const Bad &bad) const {
    const OpInfo &op = fn.ops[step.op];
    const size_t values = fn.values.size();
    auto sig = st.signatures.find(step.op);
    if (sig == st.signatures.end())
      sig = st.signatures.emplace(step.op, opSignature(fn, op)).first;
    // The buffer role `role` names for this op, or -1 (scratch: any scratch buffer but the
    // status word; its size and place are checked once the contract is chosen).
    auto matches = [&](const std::string &role, int id) {
      if (role == "status")
        return static_cast<size_t>(id) == values;
      if (role.rfind("scratch ", 0) == 0)
        return static_cast<size_t>(id) > values;
      if (static_cast<size_t>(id) >= values)
        return false;
      if (role.rfind("result ", 0) == 0) {
        size_t i = std::strtoul(role.c_str() + 7, nullptr, 10);
        return i < op.results.size() && op.results[i] == id;
      }
      if (role.rfind("operand ", 0) == 0) {
        size_t sp = role.rfind(' ');
        const std::string group = role.substr(8, sp - 8);
        size_t i = std::strtoul(role.c_str() + sp + 1, nullptr, 10);
        for (auto &[name, ids] : op.operands)
          if (name == group)
            return i < ids.size() && ids[i] == id;
      }
      return false;
    };
    auto argsMatch = [&](const LaunchContract &c) {
      if (c.args.size() != step.args.size())
        return false;
      for (size_t i = 0; i < c.args.size(); ++i)
        if (!matches(c.args[i], step.args[i]))
          return false;
      return true;
    };
    auto roleList = [](const std::vector<std::string> &roles) {
      std::string out;
      for (const std::string &r : roles)
        out += (out.empty() ? "" : ", ") + r;
      return "[" + out + "]";
    };

    std::vector<std::string> kernels{step.kernel};
    kernels.insert(kernels.end(), step.variants.begin(), step.variants.end());
    for (const std::string &kernel : kernels) {
      const char *field = kernel == step.kernel ? "'kernel'" : "'variants'";
      auto it = plan.kernels.find(kernel);
      if (it == plan.kernels.end())
        bad(str(field, ": kernel '", kernel, "' has no launch contract in this function's ",
                "cuda_plan.kernels: medc launches it for no op of the function"));
      std::vector<const LaunchContract *> left;
      for (const LaunchContract &c : it->second)
        if (c.op == op.kind && c.signature == sig->second)
          left.push_back(&c);
      if (left.empty()) {
        const LaunchContract &c = it->second.front();
        if (c.op != op.kind)
          bad(str(field, ": kernel '", kernel, "' was generated for a '", c.op, "' op, not for this '",
                  op.kind, "'"));
        bad(str(field, ": kernel '", kernel, "' was generated for another '", op.kind,
                "' (other attributes, shapes or stored types: signature ", c.signature,
                ", this op's ", sig->second, ")"));
      }
      // The block the kernel's own code is compiled for (`__launch_bounds__` in its module's
      // source): the contract must agree with the code, not only with the plan.
      if (a.cuda && a.cuda->kernelModule.count(kernel)) {
        int64_t bound = launchBounds(a.cuda->modules[a.cuda->kernelModule.at(kernel)].source, kernel);
        for (const LaunchContract *c : left)
          if (bound > 0 && (c->block[0] != bound || c->block[1] != 1 || c->block[2] != 1))
            bad(str("'block': kernel '", kernel, "' is compiled for blocks of ", bound,
                    " threads (its __launch_bounds__), its launch contract says ",
                    tripleStr(c->block)));
      }
      auto keep = [&](auto pred) {
        std::vector<const LaunchContract *> next;
        for (const LaunchContract *c : left)
          if (pred(*c))
            next.push_back(c);
        return next;
      };
      std::vector<const LaunchContract *> next = keep(argsMatch);
      if (next.empty())
        bad(str("'args' ", shape::listStr(Shape(step.args.begin(), step.args.end())),
                " are not the buffers kernel '", kernel, "' takes for this op: ",
                roleList(left.front()->args)));
      left = next;
      next = keep([&](const LaunchContract &c) { return c.grid == step.grid; });
      if (next.empty())
        bad(str("'grid' is ", tripleStr(step.grid), ", kernel '", kernel, "' was generated for grid ",
                tripleStr(left.front()->grid)));
      left = next;
      next = keep([&](const LaunchContract &c) { return c.block == step.block; });
      if (next.empty())
        bad(str("'block' is ", tripleStr(step.block), ", kernel '", kernel,
                "' was generated for block ", tripleStr(left.front()->block)));
      left = next;
      next = keep([&](const LaunchContract &c) { return c.shared == step.shared; });
      if (next.empty())
        bad(str("'shared' is ", step.shared, " bytes, kernel '", kernel, "' was generated for ",
                left.front()->shared));
      // The scratch buffers: the sizes the kernel needs, the op's own, in the order its
      // emitter allocated them.
      const LaunchContract &c = *next.front();
      for (size_t i = 0; i < c.args.size(); ++i) {
        if (c.args[i].rfind("scratch ", 0) != 0)
          continue;
        char *end = nullptr;
        int64_t j = std::strtoll(c.args[i].c_str() + 8, &end, 10);
        int64_t bytes = std::strtoll(end, nullptr, 10);
        size_t k = static_cast<size_t>(step.args[i]) - values;
        if (plan.scratch[k] != bytes)
          bad(str("'args': argument ", i, " is scratch buffer ", k, " of ", plan.scratch[k],
                  " bytes (cuda_plan.scratch[", k, "]), kernel '", kernel,
                  "' takes a scratch buffer of ", bytes, " bytes there"));
        auto owner = st.scratchOwner.emplace(k, step.op).first;
        if (owner->second != step.op)
          bad(str("'args': scratch buffer ", k, " (argument ", i, ") belongs to op ", owner->second));
        auto shift = st.scratchShift.emplace(step.op, static_cast<int64_t>(k) - j).first;
        if (shift->second != static_cast<int64_t>(k) - j)
          bad(str("'args': argument ", i, " is scratch buffer ", k, ", but the op's scratch buffer ",
                  j, " is buffer ", shift->second + j));
      }
    }
    // The status code, when the kernel takes the status word: the op's index + 1.
    bool status = std::count(step.args.begin(), step.args.end(), static_cast<int>(values)) > 0;
    std::vector<uint32_t> scalars;
    if (status)
      scalars.push_back(static_cast<uint32_t>(step.op + 1));
    if (step.scalars != scalars)
      bad(str("'scalars' must be ", status ? str("[", step.op + 1, "] (the op's status code)")
                                           : std::string("empty (no status word is passed)")));
  }

  /// Dynamic shared memory one block of sm_90 may have.
  static constexpr uint32_t kMaxSharedBytes = 227 * 1024;

  /// The position just past "name(" where the source defines kernel `name`, or npos.
  static size_t kernelStart(const std::string &source, const std::string &name) {
    if (name.empty())
      return std::string::npos;
    auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (size_t at = source.find(name); at != std::string::npos; at = source.find(name, at + 1)) {
      size_t end = at + name.size();
      if ((at == 0 || !ident(source[at - 1])) && end < source.size() && source[end] == '(' &&
          source.rfind("__global__", at) != std::string::npos)
        return end + 1;
    }
    return std::string::npos;
  }
  /// The threads per block of kernel `name`'s `__launch_bounds__` in the source, or -1.
  static int64_t launchBounds(const std::string &source, const std::string &name) {
    size_t at = kernelStart(source, name);
    if (at == std::string::npos)
      return -1;
    size_t global = source.rfind("__global__", at);
    size_t bounds = source.find("__launch_bounds__(", global);
    if (bounds == std::string::npos || bounds > at)
      return -1;
    return std::strtoll(source.c_str() + bounds + 18, nullptr, 10);
  }
  /// Parameters of kernel `name` in the source, or -1 if its parameter list is not plain.
  static int kernelParameters(const std::string &source, const std::string &name) {
    size_t at = kernelStart(source, name);
    if (at == std::string::npos)
      return -1;
    int depth = 0, commas = 0;
    bool any = false;
    for (size_t i = at; i < source.size(); ++i) {
      char c = source[i];
      if (c == '(' || c == '<')
        ++depth;
      else if ((c == ')' || c == '>') && depth > 0)
        --depth;
      else if (c == ')')
        return any ? commas + 1 : 0;
      else if (c == ',' && depth == 0)
        ++commas;
      else if (!std::isspace(static_cast<unsigned char>(c)))
        any = true;
    }
    return -1;
  }
};

} // namespace

bool hasShapeRule(med::ops::OpKind k) {
  return shapeRules().count(med::ops::schema(k).name) != 0;
}

void verifyPlan(const Artifact &artifact) {
  Verifier v{artifact};
  v.parameters();
  for (const auto &body : artifact.fusions) {
    // The CPU backend runs any body op by op; the CUDA plan names the template's kernels.
    const std::string &t = body->fusionTemplate;
    if (t != "elementwise" && t != "mlp" && t != "mlp_grad" && t != "reduce" &&
        t != "resample" && t != "stencil" && t != "stencil_grad")
      throw Error(str(artifact.path, ": invalid plan: ", body->name, ": unknown template '", t,
                      "' (expected elementwise, mlp, mlp_grad, reduce, resample, stencil or "
                      "stencil_grad)"));
    v.function(*body);
  }
  for (const Function &fn : artifact.functions)
    v.function(fn);
}

} // namespace medrun
