//===- Mlp.cpp - the `mlp` and `mlp_grad` fusion templates (tensor cores) ----------===//
//
// The block MLP y = W2·act(W1·x + b1) + b2 (⊕ r) on mma.sync m16n8k16 tensor cores, 16-bit
// operands (the function's storage type) and f32 accumulators, with every 1×1×1
// convolution as a product over the channel axis. Each warp takes 16 voxels of one sample
// (the rows of the products), the expanded channels go by in chunks of 16, and the
// expansion lives in registers only: the accumulator fragments of W1·x are the operand
// fragments of W2·g (the back-to-back GEMM layout). The block's input and output tiles pass
// through shared memory so that global memory is read and written along the voxels.
//
// mlp_grad recomputes the expansion. Where a block MLP's weights fit in shared memory
// beside a tile (mlpResidentLimit), one kernel does the whole backward: dx, and the weight
// gradients as products over voxels of act(h) and dh passed through shared memory, summed
// in registers over the block's tiles (mlpGradResident). Otherwise one kernel per slab of
// tiles gives dx and writes act(h) and dh to scratch, and two products over the slab give
// partial sums of the weight gradients. Either way fixed-tree sums over the parts finish
// them. No float atomics: the same bits on every run.
//
// The resident forward also has an sm_90a variant (wgmma, warpgroup products with the
// weights as core matrices in shared memory), listed as a variant of its launch; the
// runtime runs the faster on sm_90 GPUs (docs/architecture.md).
//
// The weights go to 16-bit copies in the layouts the fragments read (scratch), first. The
// kernels keep them in shared memory, shared by the block's warps: all of them for the
// whole kernel where they fit, else kStage expanded channels at a time per tile.
// Channel counts are padded to 16 with zeros. The templates' matchers (lib/IR/MedFusion.cpp)
// bound the input and output channels to 128 (fragments and accumulators in registers).
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

constexpr int kWarps = 4, kTile = 16 * kWarps; // voxels per block and tile
// Expanded channels whose weights the forward and dx kernels stage in shared memory at a
// time; rows there are padded by 8 elements so that the eight rows a fragment load touches
// fall in distinct banks.
constexpr int64_t kStage = 32;
// Blocks the weight-gradient kernel aims at (several waves on 132 SMs at the three blocks
// per SM its registers allow): the parts of the voxel split follow from it.
constexpr int64_t kGradBlocks = 2048;
// Blocks per SM of the target GPU (FunctionGen::smCount) of the kernels that keep all
// weights in shared memory and loop over tiles, by measurement on the H200 (docs/perf.md):
// the forward eight (22 KiB of shared memory each at level 0), the backward four
// (registers capped for four). The backward's count is the compile target's, not the GPU
// it runs on: its partial sums are one per block, so one artifact gives the same bits on
// every GPU.
constexpr int kResidentPerSm = 8, kResidentGradPerSm = 4;
int64_t pad16(int64_t v) { return (v + 15) / 16 * 16; }


/// Code building the warp's operand fragments `name` [chans / 16][4] (rows: its voxels vr
/// and vr + 8; columns: channels) from shared `sh` [chans][pitch] (16-bit).
std::string fragments(const std::string &name, const std::string &sh, int64_t chans,
                      int64_t pitch) {
  const std::string KC = std::to_string(chans / 16);
  return "  unsigned " + name + "[" + KC + "][4];\n"
         "  loadColumnsA<" + KC + ", " + std::to_string(pitch) + ">(" + name + ", " + sh +
         ", vr, q);\n";
}

/// Code writing the warp's accumulator fragments acc[chans / 8][4] (rows: its voxels vr
/// and vr + 8; columns: channels) into shared f32 `sh` [chans][tile]: fragments()' inverse.
std::string storeFragments(const std::string &sh, int64_t chans) {
  return "  storeColumnsD<" + std::to_string(chans / 8) + ", " + std::to_string(kTile) + ">(" +
         sh + ", acc, vr, q);\n";
}

/// Code writing the tile's dx from the warps' fragments through shared `out` [Cp][tile] to
/// dx (N×C×S), along the voxels.
std::string dxStore(int64_t C, int64_t Cp, int64_t S) {
  const std::string T = std::to_string(kTile);
  return storeFragments("out", Cp) +
         "  __syncthreads();\n"
         "  for (int i = threadIdx.x; i < " + num(C * kTile) + "; i += blockDim.x) {\n"
         "    const int c = i / " + T + ", s = s0 + i % " + T + ";\n"
         "    if (s < " + num(S) + ") dx[(n * " + num(C) + " + c) * " + num(S) + " + s] = out[i];\n"
         "  }\n";
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

/// Device code for sm_90a's warpgroup products, as kernel globals (guarded: kernels of one
/// module share them): wgmmaMma<t, N> (kernels/mlp.cuh) for each width N (prelude.cuh: the
/// operands' layouts, and the CPU emulation these call on the host). The instruction takes
/// N / 2 accumulator registers, spelled out here for each width.
std::string wgmmaGlobals(const std::string &t, const std::set<int64_t> &widths) {
  std::string g;
  for (int64_t n : widths) {
    const std::string name = "wgmma_" + t + "_n" + std::to_string(n);
    std::string regs, cons;
    for (int64_t r = 0; r < n / 2; ++r) {
      regs += (r ? ", %" : "%") + std::to_string(r);
      cons += std::string(r ? ", " : "") + "\"+f\"(d[" + std::to_string(r / 4) + "][" + std::to_string(r % 4) + "])";
    }
    const int64_t a = n / 2;
    g += "#ifndef MED_" + name + "\n"
         "#define MED_" + name + "\n"
         "template <> void wgmmaMma<" + t + ", " + std::to_string(n) + ">(float (*d)[4], const unsigned a[4], const void *b, unsigned lbo, unsigned sbo) {\n"
         "#ifdef __CUDA_ARCH__\n"
         "  const u64 desc = wgmmaDescriptor(b, lbo, sbo);\n"
         "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(a + 5) + ", 0;\\n"
         "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16.f32." + t + "." + t + " {" + regs + "}, "
         "{%" + std::to_string(a) + ", %" + std::to_string(a + 1) + ", %" + std::to_string(a + 2) + ", %" + std::to_string(a + 3) + "}, "
         "%" + std::to_string(a + 4) + ", p, 1, 1, 0;\\n}\\n\"\n"
         "               : " + cons + "\n"
         "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc), \"r\"(1));\n"
         "#else\n"
         "  wgmmaEmu<" + t + ">(d, " + num(n) + ", a, b, lbo, sbo);\n"
         "#endif\n"
         "}\n"
         "#endif\n";
  }
  return g;
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
  // copies not asked for (null) are not made.
  const int64_t R = pad16(rows), Cc = pad16(cols);
  std::vector<std::string> params;
  std::vector<int> args;
  std::string body = "  const int r = i / " + num(Cc) + ", c = i % " + num(Cc) + ";\n"
                     "  " + t + " v;\n"
                     "  v = r < " + num(rows) + " && c < " + num(cols) + " ? (float)w[r * " + num(cols) + " + c] : 0.0f;\n";
  if (plain) {
    *plain = scratch(R * Cc * 2);
    params.push_back(out("wp", t));
    args.push_back(*plain);
    body += "  wp[i] = v;\n";
  }
  if (transposed) {
    *transposed = scratch(R * Cc * 2);
    params.push_back(out("wt", t));
    args.push_back(*transposed);
    body += "  wt[c * " + num(R) + " + r] = v;\n";
  }
  params.push_back(in("w"));
  args.push_back(w);
  elementwise(op, "mlp_weights", params, args, R * Cc, body);
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
  const int64_t P1 = Cp + 8, PE = Ep + 8, tileWords = std::max(Cp * kTile / 2, Cop * kTile);
  const int64_t residentHalf = Ep * P1 + Cop * PE; // 16-bit elements of all the weights
  int64_t grid;
  std::string kw; // the sm_90a variant's call, where there is one
  int64_t chunkWidth = 16;
  const bool resident = 2 * residentHalf + 4 * tileWords <= mlpResidentLimit;
  if (resident) {
    // The weights fit in shared memory beside a tile: staged once per block, which then
    // takes tiles blockIdx.x, + gridDim.x, ... (no sums across tiles: any grid will do).
    grid = std::min(N * tiles, mlpResidentBlocks ? mlpResidentBlocks : kResidentPerSm * smCount);
    if (wgmma) {
      // The expansion in chunks of up to 64 channels on the warpgroup's tensor cores.
      for (int64_t w = 64; w > 16; w -= 16)
        if (Ep % w == 0) {
          chunkWidth = w;
          break;
        }
      kw = call("mlpForwardWgmma", ", " + std::to_string(chunkWidth));
    }
  } else {
    // kStage expanded channels' weights at a time, in the tile's place once xa is built.
    grid = N * tiles;
  }
  const std::string globals = kTileLibrary + kMlpLibrary + functor;
  launch(op, src.kernel("mlp", typedParams, call(resident ? "mlpForward" : "mlpForwardStaged", ""),
                        kWarps * 32, globals),
         grid, kWarps * 32, args);
  if (!kw.empty() && grid > 0)
    variant(src.kernel("mlp_wgmma", typedParams, kw, kWarps * 32,
                       kTileLibrary + kMlpLibrary + wgmmaGlobals(t, {chunkWidth, Cop}) + functor,
                       0, /*sm90a=*/true));
}

/// Code copying rows [0, rows) × columns [0, cols) of `src` (row pitch srcPitch, from row
/// rowOffset and column colOffset; zeros beyond srcRows × srcCols) into shared `dst` (row
/// pitch `pitch`), 16-byte vectors of 8 elements: every count, pitch and offset is a
/// multiple of 8, so a vector lies wholly inside or outside.
std::string FunctionGen::mlpStage(const std::string &dst, int64_t pitch, const std::string &src,
                                  int64_t srcPitch, int64_t rows, int64_t cols,
                                  const std::string &rowOffset, const std::string &colOffset,
                                  int64_t srcRows, int64_t srcCols, const std::string &t) {
  return "    for (int i = threadIdx.x; i < " + num(rows * cols / 8) + "; i += blockDim.x) {\n"
         "      const int r = i / " + num(cols / 8) + ", c = (i % " + num(cols / 8) + ") * 8;\n"
         "      const int sr = " + rowOffset + " + r, sc = " + colOffset + " + c;\n"
         "      Vec<" + t + ", 8> v;\n"
         "      if (sr < " + num(srcRows) + " && sc < " + num(srcCols) + ") {\n"
         "        v = vload<8>(" + src + " + (i64)sr * " + num(srcPitch) + " + sc);\n"
         "      } else {\n"
         "        #pragma unroll\n"
         "        for (int k = 0; k < 8; ++k) v[k].bits = 0;\n"
         "      }\n"
         "      vstore<8>(" + dst + " + r * " + num(pitch) + " + c, v);\n"
         "    }\n";
}

/// Code declaring the warp's two 16×8 tiles `d` [2][4] and adding the products of its
/// operand fragments `a` [chans / 16][4] with eight rows each of a 16-bit matrix in shared
/// memory (row pitch `pitch`; `rows`: row g of the first eight): tile.cuh's mmaTilePair, the
/// one mma loop of the expansion (h = W1·x) and of the activation's gradient (dg = W2ᵀ·dy).
static std::string tilePair(const std::string &d, const std::string &a,
                            const std::string &rows, int64_t pitch, int64_t chans) {
  return "    float " + d + "[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};\n"
         "    mmaTilePair<" + std::to_string(chans / 16) + ", " + std::to_string(pitch) + ">(" +
         d + ", " + a + ", " + rows + ", q);\n";
}

/// Code computing, for expansion chunk `ec`, the warp's h = W1·x + b1 (two 16×8 tiles, in
/// h[2][4]) and the operand fragment ga of act(h) (the f32 activation kept in a[2][4]).
/// `w1rows`: the address of the chunk's W1 row g (16-bit, row pitch `pitch`, the columns
/// from 0).
std::string FunctionGen::mlpExpansion(const std::string &ec, const std::string &w1rows,
                                      int64_t pitch, int64_t Cp, int64_t E, bool bias,
                                      const std::string &act, const std::string &t) {
  return tilePair("h", "xa", w1rows, pitch, Cp) +
         "    float a[2][4];\n"
         "    #pragma unroll\n"
         "    for (int nt = 0; nt < 2; ++nt)\n"
         "      #pragma unroll\n"
         "      for (int j = 0; j < 4; ++j) {\n"
         "        const int e = " + ec + " * 16 + nt * 8 + 2 * q + (j & 1);\n"
         "        if (e < " + num(E) + ") {\n" +
         (bias ? "          h[nt][j] += (float)b1[e];\n" : "") +
         "          const float v = h[nt][j];\n"
         "          a[nt][j] = " + act + ";\n"
         "        } else {\n"
         "          a[nt][j] = 0.0f;\n"
         "        }\n"
         "      }\n"
         "    const unsigned ga[4] = {pack2<" + t + ">(a[0][0], a[0][1]), pack2<" + t + ">(a[0][2], a[0][3]),\n"
         "                            pack2<" + t + ">(a[1][0], a[1][1]), pack2<" + t + ">(a[1][2], a[1][3])};\n";
}

/// Code loading channels [0, P) × voxels [s0, s0 + 64) of sample n of `src` (N×C×S) into
/// shared `dst` [P][pitch], zeros beyond C and S: 16-byte vectors of 8 elements where S is a
/// multiple of 8 (a vector is then wholly inside or outside), else element by element.
std::string FunctionGen::mlpLoad(const std::string &dst, const std::string &src, int64_t C,
                                 int64_t P, int64_t S, const std::string &t, int64_t pitch) {
  const std::string T = std::to_string(kTile);
  if (S % 8 == 0)
    return "  for (int i = threadIdx.x; i < " + num(P * kTile / 8) + "; i += blockDim.x) {\n"
           "    const int c = i / " + std::to_string(kTile / 8) + ", s = s0 + (i % " + std::to_string(kTile / 8) + ") * 8;\n"
           "    Vec<" + t + ", 8> v;\n"
           "    if (c < " + num(C) + " && s < " + num(S) + ") {\n"
           "      v = vload<8>(" + src + " + (n * " + num(C) + " + c) * " + num(S) + " + s);\n"
           "    } else {\n"
           "      #pragma unroll\n"
           "      for (int k = 0; k < 8; ++k) v[k].bits = 0;\n"
           "    }\n"
           "    vstore<8>(" + dst + " + c * " + num(pitch) + " + s - s0, v);\n"
           "  }\n";
  return "  for (int i = threadIdx.x; i < " + num(P * kTile) + "; i += blockDim.x) {\n"
         "    const int c = i / " + T + ", s = s0 + i % " + T + ";\n"
         "    " + dst + "[c * " + num(pitch) + " + s - s0] = c < " + num(C) + " && s < " + num(S) + " ? (float)" + src + "[(n * " + num(C) + " + c) * " + num(S) + " + s] : 0.0f;\n"
         "  }\n";
}

/// Code loading a tile of 64 voxels of sample n from s0 — x into xs [Cp][tile] and dy into
/// dys [Cop][tile] (16-bit, zero-padded) — and building the warp's operand fragments of both
/// (rows: its 16 voxels; columns: channels) in xa and dya.
std::string FunctionGen::mlpTile(int64_t C, int64_t Co, int64_t S, const std::string &t,
                                 int64_t pitch) {
  const int64_t Cp = pad16(C), Cop = pad16(Co);
  return mlpLoad("xs", "x", C, Cp, S, t, pitch) + mlpLoad("dys", "dy", Co, Cop, S, t, pitch) +
         "  __syncthreads();\n"
         "  const int vr = warp * 16 + g;\n" +
         fragments("xa", "xs", Cp, pitch) + fragments("dya", "dys", Cop, pitch);
}

/// Code computing, after mlpExpansion for chunk `ec`, dg = W2ᵀ·dy (two 16×8 tiles) and
/// dh = act'(h, dg) in f32 (dh[2][4], zero beyond E), with its operand fragment dha.
/// `w2rows`: the address of the chunk's W2ᵀ row g (row pitch `pitch`).
std::string FunctionGen::mlpActGrad(const std::string &ec, const std::string &w2rows,
                                    int64_t pitch, int64_t Cop, int64_t E,
                                    const std::string &actGrad, const std::string &t) {
  return tilePair("dg", "dya", w2rows, pitch, Cop) +
         "    float dh[2][4];\n"
         "    #pragma unroll\n"
         "    for (int nt = 0; nt < 2; ++nt)\n"
         "      #pragma unroll\n"
         "      for (int j = 0; j < 4; ++j) {\n"
         "        const float u = h[nt][j], v = dg[nt][j];\n"
         "        dh[nt][j] = " + ec + " * 16 + nt * 8 + 2 * q + (j & 1) < " + num(E) + " ? " + actGrad + " : 0.0f;\n"
         "      }\n"
         "    const unsigned dha[4] = {pack2<" + t + ">(dh[0][0], dh[0][1]), pack2<" + t + ">(dh[0][2], dh[0][3]),\n"
         "                             pack2<" + t + ">(dh[1][0], dh[1][1]), pack2<" + t + ">(dh[1][2], dh[1][3])};\n";
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
  const int64_t Cp = pad16(C), Ep = pad16(E), Cop = pad16(Co), tiles = (S + kTile - 1) / kTile;
  const std::string T = std::to_string(kTile);
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
  if (b1) {
    params.push_back(in("b1"));
    args.push_back(*b1);
  }
  const std::string lanes =
      "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;\n";
  const int64_t outs = Co * E + E * C + E; // dW2 [Co][E], dW1 [E][C], db1 [E]
  if (mlpGradResident(op, x, dy, dx, *dw1, *dw2, db1, b1.has_value(), act, actGrad, params,
                      args))
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

  // The stage's weights (W1's rows, W2ᵀ's rows, W1ᵀ's columns) take the tiles' place once
  // the fragments are built.
  const int64_t P1 = Cp + 8, P2 = kStage + 8, P3 = Cop + 8, stages = (Ep + kStage - 1) / kStage;
  const int64_t weightsHalf = kStage * P1 + kStage * P3 + Cp * P2;
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
    std::string k =
        lanes +
        "  alignas(16) __shared__ float smem[" + num(std::max({(Cp + Cop) * kTile / 2, Cp * kTile, (weightsHalf + 1) / 2})) + "];\n"
        "  " + t + "* xs = (" + t + "*)smem;           // [Cp][tile]\n"
        "  " + t + "* dys = xs + " + num(Cp * kTile) + "; // [Cop][tile]\n"
        "  " + t + "* w1s = (" + t + "*)smem;          // [stage][Cp + 8]\n"
        "  " + t + "* w2ts = w1s + " + num(kStage * P1) + "; // [stage][Cop + 8]\n"
        "  " + t + "* w1ts = w2ts + " + num(kStage * P3) + "; // [Cp][stage + 8]\n"
        "  const i64 tile = " + num(first) + " + blockIdx.x; // of this slab\n"
        "  const i64 n = tile / " + num(tiles) + ";\n"
        "  const int s0 = (int)(tile % " + num(tiles) + ") * " + T + ";\n"
        "  " + t + "* actT = act + (i64)blockIdx.x * " + num(Ep * kTile) + "; // [Ep][tile]\n"
        "  " + t + "* dhT = dh + (i64)blockIdx.x * " + num(Ep * kTile) + ";\n" +
        mlpTile(C, Co, S, t, kTile) +
        "  float acc[" + num(Cp / 8) + "][4];\n"
        "  #pragma unroll\n"
        "  for (int j = 0; j < " + num(Cp / 8) + "; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;\n"
        "  for (int st = 0; st < " + num(stages) + "; ++st) {\n"
        "    __syncthreads(); // the tiles or the last stage's weights are read\n" +
        mlpStage("w1s", P1, "w1p", Cp, kStage, Cp, "st * " + num(kStage), "0", Ep, Cp, t) +
        mlpStage("w2ts", P3, "w2t", Cop, kStage, Cop, "st * " + num(kStage), "0", Ep, Cop, t) +
        mlpStage("w1ts", P2, "w1t", Ep, Cp, kStage, "0", "st * " + num(kStage), Cp, Ep, t) +
        "    __syncthreads();\n"
        "    #pragma unroll\n"
        "    for (int cl = 0; cl < " + num(kStage / 16) + "; ++cl) {\n"
        "    const int ec = st * " + num(kStage / 16) + " + cl;\n"
        "    if (ec >= " + num(Ep / 16) + ") break;\n" +
        mlpExpansion("ec", "w1s + (cl * 16 + g) * " + num(P1), P1, Cp, E, b1.has_value(), act, t) +
        mlpActGrad("ec", "w2ts + (cl * 16 + g) * " + num(P3), P3, Cop, E, actGrad, t) +
        "    // act(h) and dh of the chunk to scratch: rows e, columns the tile's voxels\n"
        "    #pragma unroll\n"
        "    for (int nt = 0; nt < 2; ++nt)\n"
        "      #pragma unroll\n"
        "      for (int j = 0; j < 4; ++j) {\n"
        "        const int e = ec * 16 + nt * 8 + 2 * q + (j & 1), v = vr + (j >> 1) * 8;\n"
        "        actT[e * " + T + " + v] = a[nt][j];\n"
        "        dhT[e * " + T + " + v] = dh[nt][j];\n"
        "      }\n"
        "    #pragma unroll\n"
        "    for (int ct = 0; ct < " + num(Cp / 8) + "; ++ct) {\n"
        "      const " + t + "* wb = w1ts + (ct * 8 + g) * " + num(P2) + " + cl * 16 + 2 * q;\n"
        "      const unsigned b[2] = {*(const unsigned*)wb, *(const unsigned*)(wb + 8)};\n"
        "      mma16816<" + t + ">(acc[ct], dha, b);\n"
        "    }\n"
        "    }\n"
        "  }\n";
    if (dx)
      k += "  __syncthreads(); // the weights are read: dx takes their place\n"
           "  float* out = smem; // [Cp][tile]\n" +
           dxStore(C, Cp, S);
    launch(op, src.kernel("mlp_grad_input", typed(dxParams, dxArgs), k, kWarps * 32, kTileLibrary), count,
           kWarps * 32, dxArgs);
    // dW2[co][e] = Σ_v dy[co][v]·act[e][v]; dW1[e][c] = Σ_v dh[e][v]·x[c][v], and db1[e]
    // as column C (x's row of ones).
    const std::string coE = num(Co * E);
    mlpGemm(op, {"dy", dy, Co, false, false}, {"act", actBuf, Ep, true, false}, Co, E, S, tiles,
            first, count, slab * perSlab, perSlab, parts, partsBuf,
            "(i64)m * " + num(E) + " + n", t);
    mlpGemm(op, {"dh", dhBuf, Ep, true, false}, {"x", x, C, false, true}, E, C + 1, S, tiles,
            first, count, slab * perSlab, perSlab, parts, partsBuf,
            "n < " + num(C) + " ? " + coE + " + (i64)m * " + num(C) + " + n : " +
                num(Co * E + E * C) + " + (i64)m",
            t);
  }
  // The parts of each output in a fixed tree.
  sumParts(op, "mlp_grad_sum", "w", *dw2, partsBuf, 0, Co * E, parts);
  sumParts(op, "mlp_grad_sum", "w", *dw1, partsBuf, Co * E, E * C, parts);
  if (db1)
    sumParts(op, "mlp_grad_sum", "w", *db1, partsBuf, Co * E + E * C, E, parts);
}

/// The backward in one kernel when all weights fit in shared memory beside a tile and the
/// weight gradients' accumulators fit in registers (the high-resolution MedNeXt blocks):
/// no scratch, and no expansion in device memory. A block stages the weights once and takes
/// tiles blockIdx.x, + gridDim.x, ...; per tile its warps recompute h and dg, give dh and
/// dx (as the slab kernel does), and pass act(h) and dh through shared memory, a stage of
/// SE expanded channels at a time, to the products over the tile's voxels that accumulate
/// dW2 = dy·act(h)ᵀ, dW1 = dh·xᵀ and db1 = dh·1 in registers (the stage's output fragments
/// dealt to the warps in turn). Each block writes its sums as one part; the fixed-tree sums
/// over the kResidentGradPerSm × smCount parts finish them. False (nothing emitted) when it does not fit.
bool FunctionGen::mlpGradResident(const Op &op, int x, int dy, std::optional<int> dx, int dw1,
                                  int dw2, std::optional<int> db1, bool bias,
                                  const std::string &act, const std::string &actGrad,
                                  std::vector<std::string> params, std::vector<int> args) {
  const std::string t = medrun::dtypeName(type(x).dtype);
  const auto &xs = shape(x);
  const int64_t N = xs[0], C = xs[1], S = product(xs, 2), E = shape(dw1)[0],
                Co = shape(dw2)[0];
  const int64_t Cp = pad16(C), Ep = pad16(E), Cop = pad16(Co), tiles = (S + kTile - 1) / kTile;
  const int64_t TP = kTile + 8, P1 = Cp + 8, P3 = Cop + 8, PE = Ep + 8;
  const int64_t weightsHalf = Ep * P1 + Ep * P3 + Cp * PE; // W1, W2ᵀ, W1ᵀ (16-bit)
  // The fewest stages whose shared memory fits, with at most 64 accumulator registers.
  int64_t stages = 1, SE = 0, F2 = 0, F1 = 0, F = 0, slots = 0, regionHalf = 0;
  for (; stages <= Ep / 16; ++stages) {
    SE = (Ep / 16 + stages - 1) / stages * 16;
    F2 = Cop / 16 * (SE / 8); // dW2 fragments of a stage: Co rows, SE columns
    F1 = SE / 16 * (Cp / 8);  // dW1: SE rows, C columns
    F = F2 + F1 + SE / 16;    // and db1: SE rows, one column
    slots = (F + kWarps - 1) / kWarps;
    regionHalf = std::max((Cp + Cop) * TP + 2 * SE * TP, Cp * kTile * 2);
    if (2 * (weightsHalf + regionHalf) <= mlpResidentLimit && stages * slots * 4 <= 64)
      break;
  }
  if (stages > Ep / 16)
    return false;
  const int64_t tileCount = N * tiles,
                parts = std::min(tileCount,
                                 mlpResidentBlocks ? mlpResidentBlocks : kResidentGradPerSm * smCount);
  const int64_t outs = Co * E + E * C + E;
  const int partsBuf = scratch(outs * parts * 4);
  if (dx) {
    params.insert(params.begin(), out("dx"));
    args.insert(args.begin(), *dx);
  }
  params.insert(params.begin(), out("parts"));
  args.insert(args.begin(), partsBuf);
  const std::string T = std::to_string(kTile), P = num(TP), G = num(parts);
  std::string k =
      "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;\n"
      "  alignas(16) __shared__ float smem[" + num((weightsHalf + regionHalf) / 2) + "];\n"
      "  " + t + "* w1s = (" + t + "*)smem;                 // [Ep][Cp + 8]: W1\n"
      "  " + t + "* w2ts = w1s + " + num(Ep * P1) + ";  // [Ep][Cop + 8]: W2ᵀ\n"
      "  " + t + "* w1ts = w2ts + " + num(Ep * P3) + "; // [Cp][Ep + 8]: W1ᵀ\n"
      "  " + t + "* xs = w1ts + " + num(Cp * PE) + ";   // [Cp][tile + 8]\n"
      "  " + t + "* dys = xs + " + num(Cp * TP) + ";    // [Cop][tile + 8]\n"
      "  " + t + "* actS = dys + " + num(Cop * TP) + "; // [SE][tile + 8]: act(h) of a stage\n"
      "  " + t + "* dhS = actS + " + num(SE * TP) + ";  // [SE][tile + 8]: dh of a stage\n"
      "  float* out = (float*)xs; // [Cp][tile]: dx, once the stages are done\n" +
      mlpStage("w1s", P1, "w1p", Cp, Ep, Cp, "0", "0", Ep, Cp, t) +
      mlpStage("w2ts", P3, "w2t", Cop, Ep, Cop, "0", "0", Ep, Cop, t) +
      mlpStage("w1ts", PE, "w1t", Ep, Cp, Ep, "0", "0", Cp, Ep, t) +
      "  float gacc[" + num(stages) + "][" + num(slots) + "][4];\n"
      "  #pragma unroll\n"
      "  for (int st = 0; st < " + num(stages) + "; ++st)\n"
      "    #pragma unroll\n"
      "    for (int sl = 0; sl < " + num(slots) + "; ++sl)\n"
      "      gacc[st][sl][0] = gacc[st][sl][1] = gacc[st][sl][2] = gacc[st][sl][3] = 0.0f;\n"
      "  for (i64 tile = blockIdx.x; tile < " + num(tileCount) + "; tile += gridDim.x) {\n"
      "  const i64 n = tile / " + num(tiles) + ";\n"
      "  const int s0 = (int)(tile % " + num(tiles) + ") * " + T + ";\n"
      "  __syncthreads(); // the weights are staged, the last tile's dx read\n" +
      mlpTile(C, Co, S, t, TP) +
      "  float acc[" + num(Cp / 8) + "][4];\n"
      "  #pragma unroll\n"
      "  for (int j = 0; j < " + num(Cp / 8) + "; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;\n"
      "  #pragma unroll\n"
      "  for (int st = 0; st < " + num(stages) + "; ++st) {\n"
      "    #pragma unroll 1 // (unrolled, the chunks' live values spill)\n"
      "    for (int cl = 0; cl < " + num(SE / 16) + "; ++cl) {\n"
      "    const int ec = st * " + num(SE / 16) + " + cl;\n"
      "    if (ec >= " + num(Ep / 16) + ") break;\n" +
      mlpExpansion("ec", "w1s + (ec * 16 + g) * " + num(P1), P1, Cp, E, bias, act, t) +
      mlpActGrad("ec", "w2ts + (ec * 16 + g) * " + num(P3), P3, Cop, E, actGrad, t) +
      "    #pragma unroll\n"
      "    for (int nt = 0; nt < 2; ++nt)\n"
      "      #pragma unroll\n"
      "      for (int j = 0; j < 4; ++j) {\n"
      "        const int e = cl * 16 + nt * 8 + 2 * q + (j & 1), v = vr + (j >> 1) * 8;\n"
      "        actS[e * " + P + " + v] = a[nt][j];\n"
      "        dhS[e * " + P + " + v] = dh[nt][j];\n"
      "      }\n" +
      (dx ? "    #pragma unroll\n"
            "    for (int ct = 0; ct < " + num(Cp / 8) + "; ++ct) {\n"
            "      const " + t + "* wb = w1ts + (ct * 8 + g) * " + num(PE) + " + ec * 16 + 2 * q;\n"
            "      const unsigned b[2] = {*(const unsigned*)wb, *(const unsigned*)(wb + 8)};\n"
            "      mma16816<" + t + ">(acc[ct], dha, b);\n"
            "    }\n"
          : std::string()) +
      "    }\n"
      "    __syncthreads(); // the stage's act(h) and dh are written\n"
      "    // The stage's products over the tile's voxels: fragment f of dW2 (A: dy's rows, B:\n"
      "    // act(h)'s), dW1 (dh's, x's) or db1 (dh's, a column of ones).\n"
      "    #pragma unroll\n"
      "    for (int sl = 0; sl < " + num(slots) + "; ++sl) {\n"
      "      // A warp without a fragment in this slot repeats the last one (its sums are not\n"
      "      // written): every warp runs the same products, as the CPU emulation's mma needs.\n"
      "      const int f = warp + " + std::to_string(kWarps) + " * sl < " + num(F) + " ? warp + " + std::to_string(kWarps) + " * sl : " + num(F - 1) + ";\n"
      "      const " + t + " *ar, *br = nullptr;\n"
      "      if (f < " + num(F2) + ") {\n"
      "        ar = dys + (f / " + num(SE / 8) + " * 16 + g) * " + P + ";\n"
      "        br = actS + (f % " + num(SE / 8) + " * 8 + g) * " + P + ";\n"
      "      } else if (f < " + num(F2 + F1) + ") {\n"
      "        ar = dhS + ((f - " + num(F2) + ") / " + num(Cp / 8) + " * 16 + g) * " + P + ";\n"
      "        br = xs + ((f - " + num(F2) + ") % " + num(Cp / 8) + " * 8 + g) * " + P + ";\n"
      "      } else {\n"
      "        ar = dhS + ((f - " + num(F2 + F1) + ") * 16 + g) * " + P + ";\n"
      "      }\n"
      "      const unsigned one = g == 0 ? pack2<" + t + ">(1.0f, 1.0f) : 0u;\n"
      "      #pragma unroll\n"
      "      for (int k0 = 0; k0 < " + T + "; k0 += 16) {\n"
      "        const " + t + "* r = ar + k0 + 2 * q;\n"
      "        const unsigned a[4] = {*(const unsigned*)r, *(const unsigned*)(r + " + num(8 * TP) + "),\n"
      "                               *(const unsigned*)(r + 8), *(const unsigned*)(r + " + num(8 * TP + 8) + ")};\n"
      "        const unsigned b[2] = {br ? *(const unsigned*)(br + k0 + 2 * q) : one,\n"
      "                               br ? *(const unsigned*)(br + k0 + 2 * q + 8) : one};\n"
      "        mma16816<" + t + ">(gacc[st][sl], a, b);\n"
      "      }\n"
      "    }\n"
      "    __syncthreads(); // the stage's act(h) and dh are read\n"
      "  }\n";
  if (dx)
    k += dxStore(C, Cp, S);
  k += "  }\n"
       "  // The block's sums, one part of each output (zeros for a block without a tile).\n"
       "  #pragma unroll\n"
       "  for (int st = 0; st < " + num(stages) + "; ++st)\n"
       "    #pragma unroll\n"
       "    for (int sl = 0; sl < " + num(slots) + "; ++sl) {\n"
       "      const int f = warp + " + std::to_string(kWarps) + " * sl;\n"
       "      #pragma unroll\n"
       "      for (int j = 0; j < 4; ++j) {\n"
       "        const int row = g + (j >> 1) * 8, col = 2 * q + (j & 1);\n"
       "        i64 o = -1;\n"
       "        if (f < " + num(F2) + ") {\n"
       "          const int co = f / " + num(SE / 8) + " * 16 + row, e = st * " + num(SE) + " + f % " + num(SE / 8) + " * 8 + col;\n"
       "          if (co < " + num(Co) + " && e < " + num(E) + ") o = (i64)co * " + num(E) + " + e;\n"
       "        } else if (f < " + num(F2 + F1) + ") {\n"
       "          const int e = st * " + num(SE) + " + (f - " + num(F2) + ") / " + num(Cp / 8) + " * 16 + row,\n"
       "                    c = (f - " + num(F2) + ") % " + num(Cp / 8) + " * 8 + col;\n"
       "          if (e < " + num(E) + " && c < " + num(C) + ") o = " + num(Co * E) + " + (i64)e * " + num(C) + " + c;\n"
       "        } else if (f < " + num(F) + ") {\n"
       "          const int e = st * " + num(SE) + " + (f - " + num(F2 + F1) + ") * 16 + row;\n"
       "          if (e < " + num(E) + " && col == 0) o = " + num(Co * E + E * C) + " + e;\n"
       "        }\n"
       "        if (o >= 0) parts[o * " + G + " + blockIdx.x] = gacc[st][sl][j];\n"
       "      }\n"
       "    }\n";
  launch(op, src.kernel("mlp_grad_resident", typed(params, args), k, kWarps * 32, kTileLibrary,
                                     kResidentGradPerSm), parts,
         kWarps * 32, args);
  sumParts(op, "mlp_grad_sum", "w", dw2, partsBuf, 0, Co * E, parts);
  sumParts(op, "mlp_grad_sum", "w", dw1, partsBuf, Co * E, E * C, parts);
  if (db1)
    sumParts(op, "mlp_grad_sum", "w", *db1, partsBuf, Co * E + E * C, E, parts);
  return true;
}

/// Code loading rows [r0, r0 + 64) of operand `o` at the block's tile into shared `dst`
/// [64][kTile + 8] (16-bit): an activation [N][rows][S] at sample n from voxel s0, or a
/// slab's scratch [tile][rows][64] at tile `local`; zeros beyond its rows and S, and with
/// `ones` a row of ones (within S) after its rows.
static std::string gemmLoad(const std::string &dst, const MlpOperand &o, int64_t S,
                            const std::string &t) {
  const std::string TP = num(kTile + 8);
  if (o.scratchTiles)
    return "    for (int i = threadIdx.x; i < " + num(kTile * kTile / 8) + "; i += blockDim.x) {\n"
           "      const int r = i / " + num(kTile / 8) + ", c = (i % " + num(kTile / 8) + ") * 8, row = r0 + r;\n"
           "      Vec<" + t + ", 8> v;\n"
           "      if (row < " + num(o.rows) + ") {\n"
           "        v = vload<8>(" + o.name + " + ((i64)local * " + num(o.rows) + " + row) * " + num(kTile) + " + c);\n"
           "      } else {\n"
           "        #pragma unroll\n"
           "        for (int k = 0; k < 8; ++k) v[k].bits = 0;\n"
           "      }\n"
           "      vstore<8>(" + dst + " + r * " + TP + " + c, v);\n"
           "    }\n";
  const std::string inside = "row < " + num(o.rows) + " && s < " + num(S);
  const std::string one = o.ones ? "row == " + num(o.rows) + " && s < " + num(S) + " ? 1.0f : " : "";
  if (S % 8 == 0) // 16-byte vectors: a vector lies wholly inside or outside S
    return "    for (int i = threadIdx.x; i < " + num(kTile * kTile / 8) + "; i += blockDim.x) {\n"
           "      const int r = i / " + num(kTile / 8) + ", c = (i % " + num(kTile / 8) + ") * 8, row = r0 + r, s = s0 + c;\n"
           "      Vec<" + t + ", 8> v;\n"
           "      if (" + inside + ") {\n"
           "        v = vload<8>(" + o.name + " + (n * " + num(o.rows) + " + row) * " + num(S) + " + s);\n"
           "      } else {\n"
           "        #pragma unroll\n"
           "        for (int k = 0; k < 8; ++k) v[k] = " + one + "0.0f;\n"
           "      }\n"
           "      vstore<8>(" + dst + " + r * " + TP + " + c, v);\n"
           "    }\n";
  return "    for (int i = threadIdx.x; i < " + num(kTile * kTile) + "; i += blockDim.x) {\n"
         "      const int r = i / " + num(kTile) + ", c = i % " + num(kTile) + ", row = r0 + r, s = s0 + c;\n"
         "      " + dst + "[r * " + TP + " + c] = " + inside + " ? (float)" + o.name + "[(n * " + num(o.rows) + " + row) * " + num(S) + " + s] : " + one + "0.0f;\n"
         "    }\n";
}

void FunctionGen::mlpGemm(const Op &op, const MlpOperand &A, const MlpOperand &B, int64_t M,
                          int64_t Nc, int64_t S, int64_t tiles, int64_t first, int64_t count,
                          int64_t partBase, int64_t perSlab, int64_t parts, int partsBuf,
                          const std::string &outIndex, const std::string &t) {
  // A block owns a 64×64 tile of the output and a part of the slab's tiles; warp w a 32×32
  // quarter (two 16-row by four 8-column fragments); a tile of 64 voxels is four k-steps.
  const int64_t mTiles = (M + 63) / 64, nTiles = (Nc + 63) / 64;
  const std::string TP = num(kTile + 8);
  std::vector<std::string> params{out("parts"), A.scratchTiles ? in(A.name, t) : in(A.name),
                                  B.scratchTiles ? in(B.name, t) : in(B.name)};
  std::vector<int> args{partsBuf, A.id, B.id};
  std::string k =
      "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;\n"
      "  alignas(16) __shared__ " + t + " as[" + num(64 * (kTile + 8)) + "], bs[" + num(64 * (kTile + 8)) + "];\n"
      "  const int mt = blockIdx.x % " + num(mTiles) + ", nt = (blockIdx.x / " + num(mTiles) + ") % " + num(nTiles) + ";\n"
      "  const int part = blockIdx.x / " + num(mTiles * nTiles) + ";\n"
      "  const int m0 = mt * 64 + (warp >> 1) * 32, n0 = nt * 64 + (warp & 1) * 32;\n"
      "  float acc[2][4][4];\n"
      "  #pragma unroll\n"
      "  for (int i = 0; i < 2; ++i)\n"
      "    #pragma unroll\n"
      "    for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;\n"
      "  for (i64 local = part; local < " + num(count) + "; local += " + num(perSlab) + ") {\n"
      "    const i64 tile = " + num(first) + " + local;\n"
      "    const i64 n = tile / " + num(tiles) + ";\n"
      "    const int s0 = (int)(tile % " + num(tiles) + ") * " + num(kTile) + ";\n"
      "    __syncthreads(); // the last tile is read\n"
      "    {\n"
      "    const int r0 = mt * 64;\n" + gemmLoad("as", A, S, t) +
      "    }\n"
      "    {\n"
      "    const int r0 = nt * 64;\n" + gemmLoad("bs", B, S, t) +
      "    }\n"
      "    __syncthreads();\n"
      "    #pragma unroll\n"
      "    for (int k0 = 0; k0 < " + num(kTile) + "; k0 += 16) {\n"
      "      unsigned a[2][4], b[4][2];\n"
      "      #pragma unroll\n"
      "      for (int i = 0; i < 2; ++i) {\n"
      "        const " + t + "* r = as + ((warp >> 1) * 32 + i * 16 + g) * " + TP + " + k0 + 2 * q;\n"
      "        a[i][0] = *(const unsigned*)r;\n"
      "        a[i][1] = *(const unsigned*)(r + " + num(8 * (kTile + 8)) + ");\n"
      "        a[i][2] = *(const unsigned*)(r + 8);\n"
      "        a[i][3] = *(const unsigned*)(r + " + num(8 * (kTile + 8) + 8) + ");\n"
      "      }\n"
      "      #pragma unroll\n"
      "      for (int j = 0; j < 4; ++j) {\n"
      "        const " + t + "* r = bs + ((warp & 1) * 32 + j * 8 + g) * " + TP + " + k0 + 2 * q;\n"
      "        b[j][0] = *(const unsigned*)r;\n"
      "        b[j][1] = *(const unsigned*)(r + 8);\n"
      "      }\n"
      "      #pragma unroll\n"
      "      for (int i = 0; i < 2; ++i)\n"
      "        #pragma unroll\n"
      "        for (int j = 0; j < 4; ++j) mma16816<" + t + ">(acc[i][j], a[i], b[j]);\n"
      "    }\n"
      "  }\n"
      "  // A part without a tile (the last slab can be short) writes its zeros all the same.\n"
      "  #pragma unroll\n"
      "  for (int i = 0; i < 2; ++i)\n"
      "    #pragma unroll\n"
      "    for (int j = 0; j < 4; ++j)\n"
      "      #pragma unroll\n"
      "      for (int e = 0; e < 4; ++e) {\n"
      "        const int m = m0 + i * 16 + g + (e >> 1) * 8, n = n0 + j * 8 + 2 * q + (e & 1);\n"
      "        if (m < " + num(M) + " && n < " + num(Nc) + ")\n"
      "          parts[(" + outIndex + ") * " + num(parts) + " + " + num(partBase) + " + part] = acc[i][j][e];\n"
      "      }\n";
  launch(op, src.kernel("mlp_grad_weights", typed(params, args), k, kWarps * 32),
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
