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

#include "med/Analysis/MemoryPlan.h"
#include "med/Target/Artifact.h"

using namespace mlir::med;
using namespace mlir::med::cuda;

namespace mlir::med::cuda {

// ---- one function --------------------------------------------------------------------

llvm::Expected<json::Object> FunctionGen::run() {
  values = fn.values;
  for (medrun::ValueInfo &v : values) // stored as med-assign-storage decided
    v.dtype = v.storage;
  if (fn.precision == "bf16-mixed" || fn.precision == "fp16-mixed")
    mixedType = fn.precision == "bf16-mixed" ? DType::BF16 : DType::F16;
  scratchBytes.push_back(4); // scratch 0: the status word
  const Op *current = nullptr; // the op being lowered, for messages
  try {
    findInPlaceUpdates(fn.ops);
    for (const Op &op : fn.ops) {
      current = &op;
      roundOnRead.clear();
      if (mixedType == DType::BF16 && computesLow(op))
        for (auto &[name, ids] : op.operands)
          if (!readsWide(op, name))
            for (int id : ids)
              if (type(id).dtype == DType::F32)
                roundOnRead.insert(id);
      for (int id : op.results)
        producers[id] = static_cast<int64_t>(indexOf(op));
      opScratchBase = scratchBytes.size();
      lower(op);
    }
  } catch (const CodegenError &e) {
    return llvm::createStringError(
        llvm::formatv("{0}CUDA code generation: {1}", current ? current->describe() + ": " : "",
                      e.message)
            .str());
  } catch (const medrun::Error &e) { // a malformed op: OpInfo's accessors name it
    return llvm::createStringError(llvm::formatv("CUDA code generation: {0}", e.what()).str());
  }
  json::Array scratch;
  for (int64_t b : scratchBytes)
    scratch.push_back(b);
  json::Object plan{{"scratch", std::move(scratch)}, {"steps", std::move(steps)}};
  json::Object kernels;
  for (const auto &[name, list] : contracts) {
    json::Array a;
    for (const medrun::LaunchContract &c : list) {
      json::Array roles;
      for (const std::string &r : c.args)
        roles.push_back(r);
      a.push_back(json::Object{{"op", c.op},
                               {"signature", c.signature},
                               {"grid", json::Array{c.grid[0], c.grid[1], c.grid[2]}},
                               {"block", json::Array{c.block[0], c.block[1], c.block[2]}},
                               {"shared", c.shared},
                               {"args", std::move(roles)}});
    }
    kernels[name] = std::move(a);
  }
  plan["kernels"] = std::move(kernels);
  return plan;
}

void FunctionGen::findInPlaceUpdates(const std::vector<Op> &ops) {
  std::map<int, size_t> producer;
  std::map<int, std::vector<size_t>> users;
  std::map<std::string, std::vector<int>> reads; // state name -> values of its param ops
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op &op = ops[i];
    for (int id : op.results)
      producer[id] = i;
    for (auto &[name, ids] : op.operands)
      for (int id : ids)
        users[id].push_back(i);
    if (op.kind == "param")
      reads[op.strAttr("name")].push_back(result(op));
  }
  for (int id : fn.outputs)
    users[id].push_back(ops.size()); // read after the end
  for (const Op &op : ops) {
    if (op.kind != "assign")
      continue;
    const int v = op.single("value");
    const std::string name = op.strAttr("name");
    auto p = producer.find(v);
    if (p == producer.end() || users[v].size() != 1 || type(v).dtype != DType::F32)
      continue;
    const size_t fi = p->second;
    const Op &f = ops[fi];
    if (f.kind != "fusion")
      continue;
    // The fusion reads the tensor it updates, and no op reads that tensor after it.
    bool readsIt = false, readAfter = false;
    for (int x : reads[name]) {
      const std::vector<int> &in = f.operand("inputs");
      readsIt = readsIt || (std::count(in.begin(), in.end(), x) && type(x).dtype == DType::F32 &&
                            type(x).shape == type(v).shape);
      for (size_t u : users[x])
        readAfter = readAfter || u > fi;
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
    FunctionGen::registerStencil(e);
    FunctionGen::registerNorm(e);
    FunctionGen::registerElementwise(e);
    FunctionGen::registerDataMovement(e);
    FunctionGen::registerReduce(e);
    FunctionGen::registerLoss(e);
    FunctionGen::registerOptimizer(e);
    FunctionGen::registerRandom(e);
    FunctionGen::registerIntensity(e);
    FunctionGen::registerLabels(e);
    FunctionGen::registerSpatial(e);
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
    FunctionGen::registerMlpFusion(t);
    FunctionGen::registerStencilFusion(t);
    FunctionGen::registerResampleFusion(t);
    FunctionGen::registerReduceFusion(t);
    return t;
  }();
  return table;
}
} // namespace

} // namespace mlir::med::cuda

bool mlir::med::haveCudaEmitter(llvm::StringRef kind) {
  const ::med::ops::OpSchema *op = ::med::ops::findOp(kind.str());
  return op && cuda::emitters().count(op->kind) != 0;
}

namespace mlir::med::cuda {

void FunctionGen::registerFusion(Emitters &e) {
  e[OpKind::Fusion] = [](FunctionGen &g, const Op &op) { g.fusion(op); };
}

void FunctionGen::lower(const Op &op) {
  auto it = emitters().find(op.op());
  if (it == emitters().end())
    error("no CUDA kernel for this op");
  it->second(*this, op);
}

void FunctionGen::fusion(const Op &op) {
  // The plan reader gives every fusion its body (OpInfo::body).
  auto it = fusionTemplates().find(op.body->fusionTemplate);
  if (it == fusionTemplates().end())
    error("no CUDA template '" + op.body->fusionTemplate + "'");
  it->second(*this, op, *op.body);
}

} // namespace mlir::med::cuda

namespace {
/// Places the function's buffers in its arena by their lives over the launch plan, for the
/// state resident as the runtime holds it in training, and records the offsets in the
/// plan (`memory`); the runtime checks them.
llvm::Error planMemory(medrun::Function &fn, json::Object &cudaPlan) {
  std::string text;
  llvm::raw_string_ostream(text) << json::Value(json::Object(cudaPlan));
  try {
    fn.cuda = medrun::readCudaPlan(text, fn, "medc's plan");
  } catch (const medrun::Error &e) {
    return llvm::createStringError(e.what());
  }
  const std::vector<medrun::BufferLife> lives = medrun::bufferLives(
      fn, [&](const medrun::CudaStep &s) { return medrun::residentAsPlanned(fn, s); });
  ArenaPlan arena = planArena(lives);
  json::Array offsets;
  for (int64_t o : arena.offset)
    offsets.push_back(o);
  cudaPlan["memory"] = json::Object{{"arena", static_cast<int64_t>(arena.bytes)},
                                    {"offsets", std::move(offsets)}};
  return llvm::Error::success();
}
} // namespace

llvm::Expected<CudaProgram> mlir::med::generateCuda(json::Object &doc, size_t modules,
                                                    int64_t scratchBytes,
                                                    int64_t mlpResidentBytes,
                                                    int64_t mlpResidentBlocks, bool wgmma,
                                                    int64_t smCount, int64_t mlpPipeline) {
  json::Array *functions = doc.getArray("functions");
  if (!functions)
    return llvm::createStringError("malformed plan: no functions");
  // The plan as the runtime reads it: its JSON text through the runtime's plan reader.
  std::string text;
  {
    llvm::raw_string_ostream os(text);
    json::OStream j(os);
    j.object([&] {
      if (const json::Value *fusions = doc.get("fusions"))
        j.attribute("fusions", spellNonFinite(*fusions));
      j.attribute("functions", spellNonFinite(*doc.get("functions")));
    });
  }
  medrun::Plan plan;
  try {
    plan = medrun::readPlan(text, "medc's plan");
  } catch (const medrun::Error &e) {
    return llvm::createStringError(e.what());
  }
  Source src;
  CudaProgram program;
  for (size_t i = 0; i < plan.functions.size(); ++i) {
    FunctionGen gen(src, plan.functions[i]);
    gen.scratchLimit = scratchBytes;
    gen.mlpResidentLimit = mlpResidentBytes;
    gen.mlpResidentBlocks = mlpResidentBlocks;
    gen.mlpPipeline = mlpPipeline;
    gen.wgmma = wgmma;
    gen.smCount = smCount;
    llvm::Expected<json::Object> cudaPlan = gen.run();
    if (!cudaPlan)
      return llvm::createStringError(llvm::formatv("function '{0}': {1}", plan.functions[i].name,
                                                   llvm::toString(cudaPlan.takeError()))
                                         .str());
    if (llvm::Error e = planMemory(plan.functions[i], *cudaPlan))
      return e;
    (*(*functions)[i].getAsObject())["cuda_plan"] = std::move(*cudaPlan);
    program.launches += gen.launches;
  }
  program.source = src.text();
  program.modules = src.modules(modules, &program.moduleArchs);
  program.kernels = src.kernels();
  return program;
}
