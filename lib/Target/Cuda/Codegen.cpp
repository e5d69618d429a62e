//===- Codegen.cpp - one CUDA kernel per op of the artifact plan -------------------===//
//
// Phase A of the CUDA backend: simple, correct kernels that reproduce the CPU reference
// kernels (runtime/src/cpu) formula for formula, in fp32, with every shape, stride and
// attribute baked in as a constant.
//
//  * Data movement and the direct convolutions run one thread per output element (the
//    convolutions sum their terms in the CPU kernels' order: input channel, then kd, kh,
//    kw). Unary and binary ops, gelu_grad and the group norm maps give each thread one
//    16-byte vector of consecutive elements (`vectorized`): more bytes in flight per
//    thread, 32-bit index math. Only the mapping of elements to threads differs; each
//    element is computed by the same code.
//  * Reductions (norm statistics, weight gradients, reduce, loss sums) run one block per
//    output; each thread sums a fixed strided subset and the block combines the partials
//    in a fixed tree over thread indices. No float atomics: results are the same bits on
//    every run.
//  * Ops that need several passes (norms and their gradients, losses) get several kernels
//    that pass statistics through scratch buffers.
//  * param, reshape and assign need no kernel: the plan binds the parameter's buffer,
//    aliases the reshaped value, and downloads an assigned value after the step.
//
// Identical kernels (same code, same constants) are emitted once and shared by every
// launch that needs them.
//
// A kernel that finds invalid data (a dice_ce target that is no class index, an AdamW step
// below 1) cannot throw; it writes its op's index + 1 into the function's status word
// (scratch 0), which the runtime checks after the step.
//
// This file runs over a function (mixed precision included) and dispatches each op to the
// emitter its kind is registered under; the emitters live in one file per op family
// (Codegen.h says which).
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

using namespace mlir::med;
using namespace mlir::med::cuda;

namespace mlir::med::cuda {

// ---- one function --------------------------------------------------------------------

llvm::Expected<json::Object> FunctionGen::run() {
  const json::Array *vals = fn.getArray("values");
  const json::Array *ops = fn.getArray("ops");
  if (!vals || !ops)
    return llvm::createStringError("malformed plan: a function has no values or ops");
  for (const json::Value &v : *vals) {
    ValueType t;
    const json::Object *o = v.getAsObject();
    // Stored as med-assign-storage decided (mixed precision), else as its type.
    if (auto d = o->getString("storage") ? o->getString("storage") : o->getString("dtype"))
      t.dtype = d->str();
    if (const json::Array *s = o->getArray("shape"))
      for (const json::Value &e : *s)
        t.shape.push_back(*e.getAsInteger());
    values.push_back(std::move(t));
  }
  scratchBytes.push_back(4); // scratch 0: the status word
  std::vector<Op> parsed;
  for (size_t i = 0; i < ops->size(); ++i) {
    const json::Object *o = (*ops)[i].getAsObject();
    Op op;
    op.index = i;
    op.kind = o->getString("op").value_or("").str();
    op.loc = o->getString("loc").value_or("").str();
    if (const json::Object *g = o->getObject("operands"))
      for (auto &[name, ids] : *g) {
        std::vector<int> list;
        for (const json::Value &id : *ids.getAsArray())
          list.push_back(static_cast<int>(*id.getAsInteger()));
        op.operands[name.str()] = list;
      }
    for (const json::Value &id : *o->getArray("results"))
      op.results.push_back(static_cast<int>(*id.getAsInteger()));
    static const json::Object empty;
    op.attrs = o->getObject("attrs") ? o->getObject("attrs") : &empty;
    op.fp32 = o->getBoolean("fp32").value_or(false);
    parsed.push_back(std::move(op));
  }
  const std::string precision = fn.getString("precision").value_or("").str();
  if (precision == "bf16-mixed" || precision == "fp16-mixed")
    mixedType = precision == "bf16-mixed" ? "bf16" : "f16";
  findInPlaceUpdates(parsed);
  for (const Op &op : parsed) {
    roundOnRead.clear();
    if (mixedType == "bf16" && computesLow(op))
      for (auto &[name, ids] : op.operands)
        if (!readsWide(op, name))
          for (int id : ids)
            if (type(id).dtype == "f32")
              roundOnRead.insert(id);
    for (int id : op.results)
      producers[id] = static_cast<int64_t>(op.index);
    try {
      lower(op);
    } catch (const CodegenError &e) {
      return llvm::createStringError(
          llvm::formatv("'med.{0}'{1}: CUDA code generation: {2}", op.kind,
                        op.loc.empty() ? "" : " at " + op.loc, e.message)
              .str());
    }
  }
  json::Array scratch;
  for (int64_t b : scratchBytes)
    scratch.push_back(b);
  json::Object plan{{"scratch", std::move(scratch)}, {"steps", std::move(steps)}};
  return plan;
}

void FunctionGen::findInPlaceUpdates(const std::vector<Op> &ops) {
  std::map<int, size_t> producer;
  std::map<int, std::vector<size_t>> users;
  std::map<std::string, std::vector<int>> reads; // state name -> values of its param ops
  for (const Op &op : ops) {
    for (int id : op.results)
      producer[id] = op.index;
    for (auto &[name, ids] : op.operands)
      for (int id : ids)
        users[id].push_back(op.index);
    if (op.kind == "param")
      reads[strAttr(op, "name")].push_back(result(op));
  }
  if (const json::Array *out = fn.getArray("outputs"))
    for (const json::Value &v : *out)
      users[static_cast<int>(*v.getAsInteger())].push_back(ops.size()); // read after the end
  for (const Op &op : ops) {
    if (op.kind != "assign")
      continue;
    const int v = one(op, "value");
    const std::string name = strAttr(op, "name");
    auto p = producer.find(v);
    if (p == producer.end() || users[v].size() != 1 || type(v).dtype != "f32")
      continue;
    const Op &f = ops[p->second];
    if (f.kind != "fusion")
      continue;
    // The fusion reads the tensor it updates, and no op reads that tensor after it.
    bool readsIt = false, readAfter = false;
    for (int x : reads[name]) {
      const std::vector<int> &in = f.operands.at("inputs");
      readsIt = readsIt || (std::count(in.begin(), in.end(), x) && type(x).dtype == "f32" &&
                            type(x).shape == type(v).shape);
      for (size_t u : users[x])
        readAfter = readAfter || u > f.index;
    }
    if (readsIt && !readAfter)
      inPlace[v] = name;
  }
}

// ---- dispatch ------------------------------------------------------------------------

namespace {
/// Every op kind with a CUDA lowering, from the op families' tables.
const Emitters &emitters() {
  static const Emitters table = [] {
    Emitters e;
    FunctionGen::registerConv(e);
    FunctionGen::registerNorm(e);
    FunctionGen::registerElementwise(e);
    FunctionGen::registerDataMovement(e);
    FunctionGen::registerReduce(e);
    FunctionGen::registerLoss(e);
    FunctionGen::registerOptimizer(e);
    FunctionGen::registerFusion(e);
    return e;
  }();
  return table;
}

/// Every fusion template, from the template files under Fusion/.
const FusionTemplates &fusionTemplates() {
  static const FusionTemplates table = [] {
    FusionTemplates t;
    FunctionGen::registerElementwiseFusion(t);
    return t;
  }();
  return table;
}
} // namespace

void FunctionGen::registerFusion(Emitters &e) {
  e["fusion"] = [](FunctionGen &g, const Op &op) { g.fusion(op); };
}

void FunctionGen::lower(const Op &op) {
  auto it = emitters().find(op.kind);
  if (it == emitters().end())
    error("no CUDA kernel for this op");
  it->second(*this, op);
}

void FunctionGen::fusion(const Op &op) {
  const json::Object *body = nullptr;
  if (std::optional<int64_t> index = attr(op, "body").getAsInteger())
    if (fusions && *index >= 0 && static_cast<size_t>(*index) < fusions->size())
      body = (*fusions)[*index].getAsObject();
  if (!body)
    error("the fusion's body is missing from the plan");
  const std::string name = body->getString("template").value_or("").str();
  auto it = fusionTemplates().find(name);
  if (it == fusionTemplates().end())
    error("no CUDA template '" + name + "'");
  it->second(*this, op, *body);
}

} // namespace mlir::med::cuda

llvm::Expected<CudaProgram> mlir::med::generateCuda(json::Object &doc, size_t modules) {
  json::Array *functions = doc.getArray("functions");
  if (!functions)
    return llvm::createStringError("malformed plan: no functions");
  Source src;
  CudaProgram program;
  for (json::Value &f : *functions) {
    json::Object *fn = f.getAsObject();
    FunctionGen gen(src, *fn, doc.getArray("fusions"));
    llvm::Expected<json::Object> plan = gen.run();
    if (!plan)
      return llvm::createStringError(llvm::formatv("function '{0}': {1}",
                                                   fn->getString("name").value_or(""),
                                                   llvm::toString(plan.takeError()))
                                         .str());
    (*fn)["cuda_plan"] = std::move(*plan);
    program.launches += gen.launches;
  }
  program.source = src.text();
  program.modules = src.modules(modules);
  program.kernels = src.kernels();
  return program;
}
