//===- Mlp.cpp - the `mlp` and `mlp_grad` fusion templates (tensor cores) ----------===//
//
// The kernels are CUDA C++ templates in kernels/mlp.cuh (its header comment: their design).
// Here: the choice of variant and its sizes (weights resident in shared memory or staged
// per tile; tiles in flight in the resident kernels' copy pipeline; the backward in one
// kernel, the expanded channels or the voxels split across warps, or in slabs, its stages
// and parts), the 16-bit
// weight copies, the body functor of each kernel (the expansion's bias, the activation and
// its gradient, the compression's bias and the epilogue, as the fusion's roles give them),
// the extern "C" kernels that instantiate the templates, and the launches.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"

namespace mlir::med::cuda {

namespace {
// The tile library (kernels/tile.cuh), which the templates' kernels are built from: their
// globals (guarded, so kernels of one module share it).
const std::string kTileLibrary = kernelLibrary("tile.cuh");
// The templates themselves (kernels/mlp.cuh).
const std::string kMlpLibrary = kernelLibrary("mlp.cuh");

constexpr int kWarps = 4, kTile = 16 * kWarps; // voxels per block and tile (mlp.cuh's kMlp...)
// Blocks the weight-gradient kernel aims at (several waves on 132 SMs at the three blocks
// per SM its registers allow): the parts of the voxel split follow from it.
constexpr int64_t kGradBlocks = 2048;
// Blocks per SM of the target GPU (FunctionGen::smCount) of the kernels that keep all
// weights in shared memory and loop over tiles, by measurement on the H200 (docs/perf.md):
// the forward eight (22 KiB of shared memory each at level 0), the backward three: at
// four its registers were capped at 128 and ptxas spilled the weight gradients'
// accumulators (336 bytes a thread, 1.96 GB of local memory traffic per call at level 0,
// Nsight Compute on an H100, docs/perf.md); at three it takes 162 and spills nothing.
// The backward's count is the compile target's, not the GPU
// it runs on: its partial sums are one per block, so one artifact gives the same bits on
// every GPU.
constexpr int kResidentPerSm = 8, kResidentGradPerSm = 3;
// Shared memory per SM on sm_90 (H100, H200): 228 KiB.
constexpr int64_t kSharedPerSm = int64_t{228} << 10;
int64_t pad16(int64_t v) { return (v + 15) / 16 * 16; }

/// MEDC_MLP_GRAD: which one-kernel backward medc emits where both fit — `chunks` (the
/// default), the expanded channels split across warps (kernels/mlp.cuh: mlpGradChunks), or
/// `stages`, the voxels split across warps with the weight gradients' products in stages
/// (mlpGradResident, mlpGradPipelined), kept for comparison: on an H100 the chunked one
/// took the all-fused BANIS+ step's `fusion:mlp_grad` from 85.5 to 61.6 ms (docs/perf.md).
bool mlpGradChunksChosen() {
  static const bool chunks = [] {
    const char *env = std::getenv("MEDC_MLP_GRAD");
    const std::string v = env ? env : "";
    if (v.empty() || v == "chunks")
      return true;
    if (v == "stages")
      return false;
    throw CodegenError{"MEDC_MLP_GRAD='" + v + "': expected 'chunks' (the default) or 'stages'"};
  }();
  return chunks;
}

/// The ops of an mlp / mlp_grad body in their roles, as its matcher recorded them
/// (med.fusion's `roles`; absent roles are null).
struct MlpBody {
  const Op *expand = nullptr, *act = nullptr, *compress = nullptr, *epilogue = nullptr;
  const Op *gradAct = nullptr, *gradInput = nullptr, *gradW2 = nullptr, *gradW1 = nullptr,
           *actGrad = nullptr, *gradB1 = nullptr;
};

MlpBody rolesOf(const medrun::Function &body) {
  MlpBody r;
  r.expand = body.role("expand");
  r.act = body.role("activation");
  r.compress = body.role("compress");
  r.epilogue = body.role("epilogue");
  r.gradAct = body.role("dg");
  r.gradW2 = body.role("dw2");
  r.actGrad = body.role("dh");
  r.gradW1 = body.role("dw1");
  r.gradInput = body.role("dx");
  r.gradB1 = body.role("db1");
  return r;
}

/// A kernel's body functor (kernels/mlp.cuh: Body), a global named after the kernel: the
/// operand pointers `members` (declared as their kernel parameters in `typedParams`), b1
/// added to h (`bias`), the activation `act` of v, its gradient `actGrad` of u = h and v = dg
/// (if not empty), and `more` member functions.
std::string bodyFunctor(const std::vector<std::string> &typedParams,
                        const std::vector<std::string> &members, bool bias,
                        const std::string &act, const std::string &actGrad,
                        const std::string &more) {
  std::string f = "struct KNAME_body {\n";
  for (const std::string &m : members)
    for (const std::string &p : typedParams)
      if (p.size() > m.size() && p.compare(p.size() - m.size() - 1, std::string::npos, " " + m) == 0)
        f += "  " + p + ";\n";
  f += std::string("  float hidden(float h, int e) const { return ") +
       (bias ? "h + (float)b1[e]" : "h") + "; }\n"
       "  static float act(float v) { return " + act + "; }\n";
  if (!actGrad.empty())
    f += "  static float actGrad(float u, float v) { return " + actGrad + "; }\n";
  return f + more + "};\n";
}

/// The wrapper kernel's functor object, from its parameters `members`.
std::string bodyInit(const std::vector<std::string> &members) {
  std::string init;
  for (const std::string &m : members)
    init += (init.empty() ? "" : ", ") + m;
  return "  const KNAME_body body{" + init + "};\n";
}

/// The template argument of a block MLP's sizes (kernels/mlp.cuh: MlpShape).
std::string mlpShape(int64_t N, int64_t C, int64_t S, int64_t E, int64_t Co) {
  return "MlpShape<" + num(N) + ", " + num(C) + ", " + num(S) + ", " + num(E) + ", " + num(Co) + ">";
}

} // namespace

/// The position of body value `id` among the body's inputs (the fusion's inputs).
static int bodyInput(const medrun::Function &body, int id) {
  for (size_t j = 0; j < body.inputs.size(); ++j)
    if (body.inputs[j] == id)
      return static_cast<int>(j);
  return -1;
}

void FunctionGen::mlpWeights(const Op &op, int w, int64_t rows, int64_t cols,
                             const std::string &t, int *plain, int *transposed) {
  // w: rows × cols (f32 as read). plain: rows16 × cols16, transposed: cols16 × rows16; the
  // copies not asked for (null) are not made (kernels/mlp.cuh: mlpPackWeight).
  const int64_t R = pad16(rows), Cc = pad16(cols);
  std::vector<std::string> params;
  std::vector<int> args;
  if (plain) {
    *plain = scratch(R * Cc * 2);
    params.push_back(out("wp", t));
    args.push_back(*plain);
  }
  if (transposed) {
    *transposed = scratch(R * Cc * 2);
    params.push_back(out("wt", t));
    args.push_back(*transposed);
  }
  params.push_back(in("w"));
  args.push_back(w);
  const std::string body = "  mlpPackWeight<" + num(rows) + ", " + num(cols) + ", " + num(R) +
                           ", " + num(Cc) + ", " + (plain ? "true" : "false") + ", " +
                           (transposed ? "true" : "false") + ">(" + (plain ? "wp" : "(" + t + "*)nullptr") +
                           ", " + (transposed ? "wt" : "(" + t + "*)nullptr") + ", w, i);\n";
  elementwise(op, "mlp_weights", params, args, R * Cc, body, kTileLibrary + kMlpLibrary);
}

void FunctionGen::mlpFusion(const Op &op, const medrun::Function &body) {
  const std::vector<int> &inputs = op.operand("inputs");
  MlpBody r = rolesOf(body);
  if (!r.expand || !r.act || !r.compress || op.results.size() != 1)
    error("the mlp body is not expand, activation, compress (and an epilogue)");
  auto outer = [&](int bodyId) {
    int j = bodyInput(body, bodyId);
    if (j < 0)
      error("an mlp operand is not a body input");
    return inputs.at(j);
  };
  const int x = outer(r.expand->single("input")), w1 = outer(r.expand->single("weight")),
            w2 = outer(r.compress->single("weight")), y = op.results[0];
  std::optional<int> b1, b2;
  if (auto b = r.expand->optional("bias"))
    b1 = outer(*b);
  if (auto b = r.compress->optional("bias"))
    b2 = outer(*b);
  mlpCheck(x, y);
  const std::string t = medrun::dtypeName(type(y).dtype);
  const auto &xs = shape(x), &w1s = shape(w1), &w2s = shape(w2);
  const int64_t N = xs[0], C = xs[1], S = product(xs, 2), E = w1s[0], Co = w2s[0];
  const int64_t Cp = pad16(C), Ep = pad16(E), Cop = pad16(Co), tiles = (S + kTile - 1) / kTile;
  int w1p, w2p;
  mlpWeights(op, w1, E, C, t, &w1p, nullptr);
  mlpWeights(op, w2, Co, E, t, &w2p, nullptr);
  // The body functor (kernels/mlp.cuh): b1 after the expansion, the activation, and the
  // output element from the compression's sum: + b2, then the epilogue, the op reading the
  // compression (m) and a body argument (r: the residual operand's element at o).
  std::vector<std::string> params{out("y"), in("x"), in("w1p", t), in("w2p", t)};
  std::vector<int> args{y, x, w1p, w2p};
  std::vector<std::string> members;
  if (b1) {
    params.push_back(in("b1"));
    args.push_back(*b1);
    members.push_back("b1");
  }
  if (b2) {
    params.push_back(in("b2"));
    args.push_back(*b2);
    members.push_back("b2");
  }
  std::vector<std::string> epilogueOperands;
  if (r.epilogue) {
    const int mId = r.compress->results.at(0);
    for (const char *name : scalarOperands(r.epilogue->kind)) {
      int id = r.epilogue->single(name);
      if (id == mId) {
        epilogueOperands.push_back("m");
      } else {
        params.push_back(in("res"));
        args.push_back(outer(id));
        members.push_back("res");
        if (shape(outer(id)) != shape(y))
          error("the epilogue's other operand must have the result's shape");
        epilogueOperands.push_back("(float)res[o]");
      }
    }
  }
  std::string result = "m";
  if (r.epilogue) {
    result = scalarExpr(r.epilogue->kind, epilogueOperands);
    if (result.empty())
      error("'med." + r.epilogue->kind + "' has no scalar form");
  }
  const std::string act = scalarExpr(r.act->kind, {"v"});
  if (act.empty())
    error("'med." + r.act->kind + "' has no scalar form");
  const std::vector<std::string> typedParams = typed(params, args);
  const std::string functor =
      bodyFunctor(typedParams, members, b1.has_value(), act, "",
                  "  float out(float acc, int co, i64 o) const {\n"
                  "    const float m = acc" + std::string(b2 ? " + (float)b2[co]" : "") + ";\n"
                  "    return " + result + ";\n"
                  "  }\n");
  // The wrapper's call: the template with its shape and the kernel's own functor.
  auto call = [&](const std::string &kernel, const std::string &more) {
    return bodyInit(members) + "  " + kernel + "<" + mlpShape(N, C, S, E, Co) + ", " + t + more +
           ">(body, y, x, w1p, w2p);\n";
  };
  const int64_t P1 = Cp + 8, PE = Ep + 8;
  const int64_t residentHalf = Ep * P1 + Cop * PE; // 16-bit elements of all the weights
  int64_t grid;
  std::string kw; // the sm_90a variant's call, where there is one
  int64_t chunkWidth = 16;
  // The most tiles in flight (mlpPipeline) whose buffers fit beside the weights
  // (kernels/mlp.cuh: mlpTileWords); 1: one tile at a time.
  int64_t inFlight = 0, sharedBytes = 0;
  for (int64_t ts = std::max<int64_t>(1, mlpPipeline); ts >= 1 && !inFlight; --ts) {
    const int64_t tileWords = ts == 1 ? std::max(Cp * kTile / 2, Cop * kTile)
                                      : ts * Cp * kTile / 2 + Cop * kTile;
    sharedBytes = 2 * residentHalf + 4 * tileWords;
    if (sharedBytes <= mlpResidentLimit)
      inFlight = ts;
  }
  const bool resident = inFlight > 0;
  if (resident) {
    // The weights fit in shared memory beside a tile: staged once per block, which then
    // takes tiles blockIdx.x, + gridDim.x, ... (no sums across tiles: any grid will do).
    // With a pipeline, one wave: as many blocks per SM as its shared memory holds
    // (kSharedPerSm, 1 KiB of it reserved per block), at most kResidentPerSm. (One tile at a
    // time keeps the grid measured before, the comparison's other side.)
    const int64_t perSm =
        inFlight == 1 ? kResidentPerSm
                      : std::max<int64_t>(1, std::min<int64_t>(kResidentPerSm,
                                                               kSharedPerSm / (sharedBytes + 1024)));
    grid = std::min(N * tiles, mlpResidentBlocks ? mlpResidentBlocks : perSm * smCount);
    if (wgmma) {
      // The expansion in chunks of up to 64 channels on the warpgroup's tensor cores.
      for (int64_t w = 64; w > 16; w -= 16)
        if (Ep % w == 0) {
          chunkWidth = w;
          break;
        }
      kw = call("mlpForwardWgmma", ", " + std::to_string(chunkWidth) + ", " + num(inFlight));
    }
  } else {
    // kMlpStage expanded channels' weights at a time, in the tile's place once xa is built.
    grid = N * tiles;
  }
  const std::string globals = kTileLibrary + kMlpLibrary + functor;
  launch(op, src.kernel("mlp", typedParams,
                        resident ? call("mlpForward", ", " + num(inFlight)) : call("mlpForwardStaged", ""),
                        kWarps * 32, globals),
         grid, kWarps * 32, args);
  if (!kw.empty() && grid > 0)
    variant(src.kernel("mlp_wgmma", typedParams, kw, kWarps * 32,
                       globals,
                       0, /*sm90a=*/true));
}

void FunctionGen::mlpGradFusion(const Op &op, const medrun::Function &body) {
  const std::vector<int> &inputs = op.operand("inputs");
  MlpBody r = rolesOf(body);
  if (!r.expand || !r.act || !r.gradAct || !r.gradW2 || !r.actGrad || !r.gradW1)
    error("the mlp_grad body is not the block MLP's gradient");
  auto outer = [&](int bodyId) {
    int j = bodyInput(body, bodyId);
    if (j < 0)
      error("an mlp_grad operand is not a body input");
    return inputs.at(j);
  };
  const int x = outer(r.expand->single("input")), w1 = outer(r.expand->single("weight")),
            dy = outer(r.gradAct->single("input")), w2 = outer(r.gradAct->single("weight"));
  std::optional<int> b1;
  if (auto b = r.expand->optional("bias"))
    b1 = outer(*b);
  // The fusion's result for the body value a role yields, if yielded.
  auto yielded = [&](const Op *role) -> std::optional<int> {
    if (!role)
      return std::nullopt;
    for (size_t j = 0; j < body.outputs.size(); ++j)
      if (body.outputs[j] == role->results.at(0))
        return op.results.at(j);
    return std::nullopt;
  };
  std::optional<int> dx = yielded(r.gradInput), dw1 = yielded(r.gradW1),
                     dw2 = yielded(r.gradW2), db1 = yielded(r.gradB1);
  if (!dw1 || !dw2)
    error("mlp_grad must yield both weight gradients");
  mlpCheck(x, dy);
  if (dx)
    mlpCheck(x, *dx);
  const std::string t = medrun::dtypeName(type(x).dtype);
  const auto &xs = shape(x), &w1s = shape(w1), &w2s = shape(w2);
  const int64_t N = xs[0], C = xs[1], S = product(xs, 2), E = w1s[0], Co = w2s[0];
  const int64_t Ep = pad16(E), Cop = pad16(Co), tiles = (S + kTile - 1) / kTile;
  int w1p, w1t, w2t;
  mlpWeights(op, w1, E, C, t, &w1p, &w1t);
  mlpWeights(op, w2, Co, E, t, nullptr, &w2t);
  const std::string act = scalarExpr(r.act->kind, {"v"});
  std::vector<std::string> gradOperands;
  for (const char *name : scalarOperands(r.actGrad->kind))
    gradOperands.push_back(r.actGrad->single(name) == r.expand->results.at(0) ? "u" : "v");
  const std::string actGrad = scalarExpr(r.actGrad->kind, gradOperands);
  if (act.empty() || actGrad.empty())
    error("the activation or its gradient has no scalar form");
  std::vector<std::string> params{in("x"), in("dy"), in("w1p", t), in("w1t", t), in("w2t", t)};
  std::vector<int> args{x, dy, w1p, w1t, w2t};
  std::vector<std::string> members;
  if (b1) {
    params.push_back(in("b1"));
    args.push_back(*b1);
    members.push_back("b1");
  }
  // The body functor (kernels/mlp.cuh): b1, the activation and its gradient.
  const std::string functor =
      bodyFunctor(typed(params, args), members, b1.has_value(), act, actGrad, "");
  const int64_t outs = Co * E + E * C + E; // dW2 [Co][E], dW1 [E][C], db1 [E]
  if (mlpGradChunksChosen() &&
      mlpGradChunks(op, x, dy, dx, *dw1, *dw2, db1, functor, members, params, args))
    return;
  if (mlpGradResident(op, x, dy, dx, *dw1, *dw2, db1, functor, members, params, args))
    return;

  // The backward in slabs of tiles: for each slab, one kernel gives dx (all chunks of a tile
  // in registers) and writes act(h) and dh of its tiles to scratch [tile][Ep][64] (16-bit);
  // two products over the slab's voxels then give partial sums of dW2 = dy·act(h)ᵀ and of
  // dW1 = dh·xᵀ, with db1 = Σ dh as one more column of dW1 (a row of ones after x's
  // channels). The slabs bound that scratch (scratchLimit, medc --cuda-scratch-mib: 512
  // MiB takes the largest MedNeXt-L block, 256 expanded channels at 2×128³, in 9); the
  // fixed-tree sums over all the partials finish the weight gradients.
  const int64_t tileCount = N * tiles;
  const int64_t slabTiles = std::max<int64_t>(
      1, std::min<int64_t>(tileCount, scratchLimit / (2 * Ep * kTile * 2)));
  const int64_t slabs = (tileCount + slabTiles - 1) / slabTiles;
  const int actBuf = scratch(slabTiles * Ep * kTile * 2), dhBuf = scratch(slabTiles * Ep * kTile * 2);
  // Outputs: dW2 [Co][E], dW1 [E][C], db1 [E]; parts per slab so that each product's grid
  // has about kGradBlocks blocks (a fixed count: the same sums on every GPU), each part at
  // least two tiles, the partial sums within 64 MiB.
  const int64_t gemmTiles = ((Cop + 63) / 64) * ((Ep + 63) / 64);
  const int64_t perSlab = std::max<int64_t>(
      1, std::min<int64_t>({(slabTiles + 1) / 2, (kGradBlocks + gemmTiles - 1) / gemmTiles,
                            (int64_t{64} << 20) / (outs * 4) / slabs}));
  const int64_t parts = slabs * perSlab;
  const int partsBuf = scratch(outs * parts * 4);

  std::vector<std::string> dxParams = params;
  std::vector<int> dxArgs = args;
  dxParams.insert(dxParams.begin(), {out("act", t), out("dh", t)});
  dxArgs.insert(dxArgs.begin(), {actBuf, dhBuf});
  if (dx) {
    dxParams.insert(dxParams.begin(), out("dx"));
    dxArgs.insert(dxArgs.begin(), *dx);
  }
  for (int64_t slab = 0; slab < slabs; ++slab) {
    const int64_t first = slab * slabTiles, count = std::min(slabTiles, tileCount - first);
    const std::string k = bodyInit(members) + "  mlpGradInput<" + mlpShape(N, C, S, E, Co) +
                          ", " + t + ", " + (dx ? "true" : "false") + ", " + num(first) +
                          ">(body, " + (dx ? "dx" : "(float*)nullptr") +
                          ", act, dh, x, dy, w1p, w1t, w2t);\n";
    launch(op, src.kernel("mlp_grad_input", typed(dxParams, dxArgs), k, kWarps * 32,
                          kTileLibrary + kMlpLibrary + functor),
           count, kWarps * 32, dxArgs);
    // dW2[co][e] = Σ_v dy[co][v]·act[e][v]; dW1[e][c] = Σ_v dh[e][v]·x[c][v], and db1[e]
    // as column C (x's row of ones).
    mlpGemm(op, {"dy", dy, Co, false, false}, {"act", actBuf, Ep, true, false}, Co, E, S, first, count, slab * perSlab, perSlab, parts, partsBuf,
            "(i64)m * " + num(E) + " + n", t);
    mlpGemm(op, {"dh", dhBuf, Ep, true, false}, {"x", x, C, false, true}, E, C + 1, S, first, count, slab * perSlab, perSlab, parts, partsBuf,
            "n < " + num(C) + " ? " + num(Co * E) + " + (i64)m * " + num(C) + " + n : " +
                num(Co * E + E * C) + " + (i64)m",
            t);
  }
  // The parts of each output in a fixed tree.
  sumParts(op, "mlp_grad_sum", "w", *dw2, partsBuf, 0, Co * E, parts);
  sumParts(op, "mlp_grad_sum", "w", *dw1, partsBuf, Co * E, E * C, parts);
  if (db1)
    sumParts(op, "mlp_grad_sum", "w", *db1, partsBuf, Co * E + E * C, E, parts);
}

/// The backward in one kernel with the expanded channels split across warps
/// (kernels/mlp.cuh: mlpGradChunks): one warp per 16 expanded channels, at most 16 of them,
/// C and Co at most 64 (a chunk's rows of the weight gradients in registers; the weights'
/// fragments too where C + Co ≤ 64, else in shared memory), its shared memory (tiles in
/// flight, W1ᵀ, the tile's dh, those weights) the launch's, within an SM's. Not with
/// --cuda-mlp-resident-kib 0 (no resident kernels). Each block's sums are one part. False
/// (nothing emitted) when it does not fit.
bool FunctionGen::mlpGradChunks(const Op &op, int x, int dy, std::optional<int> dx, int dw1,
                                int dw2, std::optional<int> db1, const std::string &functor,
                                const std::vector<std::string> &members,
                                std::vector<std::string> params, std::vector<int> args) {
  const std::string t = medrun::dtypeName(type(x).dtype);
  const auto &xs = shape(x);
  const int64_t N = xs[0], C = xs[1], S = product(xs, 2), E = shape(dw1)[0],
                Co = shape(dw2)[0];
  const int64_t Cp = pad16(C), Ep = pad16(E), Cop = pad16(Co), tiles = (S + kTile - 1) / kTile;
  const int64_t warps = Ep / 16, inFlight = std::max<int64_t>(2, mlpPipeline);
  const bool weightsShared = Cp + Cop > 64;
  const int64_t sharedBytes =
      2 * (inFlight * (Cp + Cop) * kTile + (Cp + kTile) * (Ep + 8) +
           (weightsShared ? Ep * (Cp + 8 + Cop + 8) : 0));
  if (mlpResidentLimit == 0 || warps > 16 || Cp > 64 || Cop > 64 ||
      sharedBytes + 1024 > kSharedPerSm)
    return false;
  // Voxels a step: 32 where the weights' fragments leave the registers for it.
  const int64_t step = weightsShared ? 16 : 32;
  // Blocks per SM the registers are bounded for: about 16 warps an SM (the level-0 block,
  // 6 warps: 165 registers at 2 blocks, no spills; at 3, ptxas spills: NVRTC 13.0, sm_90),
  // as shared memory allows.
  const int64_t perSm = std::max<int64_t>(
      1, std::min<int64_t>(16 / warps, kSharedPerSm / (sharedBytes + 1024)));
  const int64_t parts =
      std::min(N * tiles, mlpResidentBlocks ? mlpResidentBlocks : perSm * smCount);
  const std::string call = "mlpGradChunks<" + mlpShape(N, C, S, E, Co) + ", " + t + ", " +
                           (dx ? "true" : "false") + ", " + num(parts) + ", " + num(inFlight) +
                           ", " + num(step) + ", " + (weightsShared ? "true" : "false") + ", " +
                           num(sharedBytes) + ">";
  launchMlpGrad(op, "mlp_grad_chunks", call, warps * 32, perSm, parts, sharedBytes, dx, dw1,
                dw2, db1, functor, members, std::move(params), std::move(args));
  return true;
}

/// Launches a one-kernel backward (`call`: the template instance, which takes the body, the
/// parts, dx, x, dy and the weights' copies) as kernel `name`, each of its `parts` blocks
/// writing one part of dW2 [Co][E], dW1 [E][C] and db1 [E], and the fixed-tree sums of the
/// parts into the weight gradients.
void FunctionGen::launchMlpGrad(const Op &op, const std::string &name, const std::string &call,
                                int64_t threads, int64_t perSm, int64_t parts, int64_t shared,
                                std::optional<int> dx, int dw1, int dw2, std::optional<int> db1,
                                const std::string &functor,
                                const std::vector<std::string> &members,
                                std::vector<std::string> params, std::vector<int> args) {
  const int64_t E = shape(dw1)[0], C = shape(dw1)[1], Co = shape(dw2)[0];
  const int partsBuf = scratch((Co * E + E * C + E) * parts * 4);
  if (dx) {
    params.insert(params.begin(), out("dx"));
    args.insert(args.begin(), *dx);
  }
  params.insert(params.begin(), out("parts"));
  args.insert(args.begin(), partsBuf);
  const std::string k = bodyInit(members) + "  " + call + "(body, parts, " +
                        (dx ? "dx" : "(float*)nullptr") + ", x, dy, w1p, w1t, w2t);\n";
  launch(op, src.kernel(name, typed(params, args), k, static_cast<int>(threads),
                        kTileLibrary + kMlpLibrary + functor, static_cast<int>(perSm)),
         parts, static_cast<int>(threads), args, shared);
  sumParts(op, "mlp_grad_sum", "w", dw2, partsBuf, 0, Co * E, parts);
  sumParts(op, "mlp_grad_sum", "w", dw1, partsBuf, Co * E, E * C, parts);
  if (db1)
    sumParts(op, "mlp_grad_sum", "w", *db1, partsBuf, Co * E + E * C, E, parts);
}

/// The backward in one kernel (kernels/mlp.cuh: mlpGradResident) when all weights fit in
/// shared memory beside a tile and the weight gradients' accumulators fit in registers (the
/// high-resolution MedNeXt blocks): each block's sums are one part; the fixed-tree sums over
/// the kResidentGradPerSm × smCount parts finish them. False (nothing emitted) when it does
/// not fit.
bool FunctionGen::mlpGradResident(const Op &op, int x, int dy, std::optional<int> dx, int dw1,
                                  int dw2, std::optional<int> db1, const std::string &functor,
                                  const std::vector<std::string> &members,
                                  std::vector<std::string> params, std::vector<int> args) {
  const std::string t = medrun::dtypeName(type(x).dtype);
  const auto &xs = shape(x);
  const int64_t N = xs[0], C = xs[1], S = product(xs, 2), E = shape(dw1)[0],
                Co = shape(dw2)[0];
  const int64_t Cp = pad16(C), Ep = pad16(E), Cop = pad16(Co), tiles = (S + kTile - 1) / kTile;
  const int64_t TP = kTile + 8, P1 = Cp + 8, P3 = Cop + 8, PE = Ep + 8;
  const int64_t weightsHalf = Ep * P1 + Ep * P3 + Cp * PE; // W1, W2ᵀ, W1ᵀ (16-bit)
  // The most tiles in flight (mlpPipeline; kernels/mlp.cuh: mlpGradPipelined, or with one
  // tile mlpGradResident) and for them the fewest stages (of SE expanded channels,
  // MlpGradStages) whose shared memory fits, with at most 64 accumulator registers.
  int64_t inFlight = std::max<int64_t>(1, mlpPipeline), stages = 1;
  for (; inFlight >= 1; --inFlight) {
    for (stages = 1; stages <= Ep / 16; ++stages) {
      const int64_t SE = (Ep / 16 + stages - 1) / stages * 16;
      const int64_t F = Cop / 16 * (SE / 8) + SE / 16 * (Cp / 8) + SE / 16; // dW2, dW1, db1
      const int64_t slots = (F + kWarps - 1) / kWarps;
      const int64_t regionHalf =
          inFlight == 1 ? std::max((Cp + Cop) * TP + 2 * SE * TP, Cp * kTile * 2)
                        : inFlight * (Cp + Cop) * kTile + std::max(2 * SE * TP, Cp * kTile * 2);
      if (2 * (weightsHalf + regionHalf) <= mlpResidentLimit && stages * slots * 4 <= 64)
        break;
    }
    if (stages <= Ep / 16)
      break;
  }
  if (inFlight < 1)
    return false;
  const int64_t parts =
      std::min(N * tiles, mlpResidentBlocks ? mlpResidentBlocks : kResidentGradPerSm * smCount);
  const std::string call = std::string(inFlight == 1 ? "mlpGradResident<" : "mlpGradPipelined<") +
                           mlpShape(N, C, S, E, Co) + ", " + t + ", " + (dx ? "true" : "false") +
                           ", " + num(stages) + ", " + num(parts) +
                           (inFlight == 1 ? "" : ", " + num(inFlight)) + ">";
  launchMlpGrad(op, "mlp_grad_resident", call, kWarps * 32, kResidentGradPerSm, parts, 0, dx, dw1,
                dw2, db1, functor, members, std::move(params), std::move(args));
  return true;
}

void FunctionGen::mlpGemm(const Op &op, const MlpOperand &A, const MlpOperand &B, int64_t M,
                          int64_t Nc, int64_t S, int64_t first, int64_t count, int64_t partBase,
                          int64_t perSlab, int64_t parts, int partsBuf,
                          const std::string &outIndex, const std::string &t) {
  // kernels/mlp.cuh: mlpGradWeights; a block per 64×64 tile of the output and part.
  const int64_t mTiles = (M + 63) / 64, nTiles = (Nc + 63) / 64;
  std::vector<std::string> params{out("parts"), A.scratchTiles ? in(A.name, t) : in(A.name),
                                  B.scratchTiles ? in(B.name, t) : in(B.name)};
  std::vector<int> args{partsBuf, A.id, B.id};
  auto operand = [](const MlpOperand &o) {
    return "MlpOperand<" + num(o.rows) + ", " + (o.scratchTiles ? "true" : "false") + ", " +
           (o.ones ? "true" : "false") + ">";
  };
  // Where output element (m, n) goes among the parts' outputs.
  const std::string index =
      "struct KNAME_index {\n"
      "  static i64 at(int m, int n) { return " + outIndex + "; }\n"
      "};\n";
  const std::string k = "  mlpGradWeights<" + operand(A) + ", " + operand(B) + ", " + num(M) +
                        ", " + num(Nc) + ", " + num(S) + ", " + num(first) + ", " + num(count) +
                        ", " + num(partBase) + ", " + num(perSlab) + ", " + num(parts) +
                        ", KNAME_index>(parts, " + A.name + ", " + B.name + ");\n";
  launch(op, src.kernel("mlp_grad_weights", typed(params, args), k, kWarps * 32,
                        kTileLibrary + kMlpLibrary + index),
         mTiles * nTiles * perSlab, kWarps * 32, args);
}

void FunctionGen::mlpCheck(int x, int y) const {
  for (int id : {x, y})
    if (type(id).dtype != DType::BF16 && type(id).dtype != DType::F16)
      error("the mlp templates need activations stored in bf16 or f16 (tensor-core operands)");
  if (type(x).dtype != type(y).dtype)
    error("the mlp templates need one 16-bit storage type");
  if (shape(x).size() != 5 || shape(y).size() != 5)
    error("expected N×C×D×H×W activations");
  if (shape(x)[1] > 128 || shape(y)[1] > 128)
    error("the mlp templates take at most 128 input and output channels");
}

void FunctionGen::registerMlpFusion(FusionTemplates &t) {
  t["mlp"] = [](FunctionGen &g, const Op &op, const medrun::Function &body) {
    g.mlpFusion(op, body);
  };
  t["mlp_grad"] = [](FunctionGen &g, const Op &op, const medrun::Function &body) {
    g.mlpGradFusion(op, body);
  };
}

} // namespace mlir::med::cuda
