//===- Stencil.cpp - the tiled shift-sum kernels (stride-1 depthwise stencils) -------===//
//
// med.shift_sum and med.shift_sum_grad_weight (medrun/ConvView.h: the stride-1 depthwise
// convolution with padding k/2, its input gradient `mirrored`, and its weight gradient).
//
// The kernels are templates in kernels/stencil.cuh (which says how they work); this file
// chooses each shape's tiles, emits the epilogue functor of the fusion's body and the
// `extern "C"` wrapper kernel that instantiates the template, and launches it. The weight
// gradient's partials are summed by the generic depthwise weight gradient's second kernel
// (sumParts: each weight's partials in a fixed tree).
//
// Tiles are chosen per shape to fit 48 KiB of static shared memory; a shape whose smallest
// tile does not fit (a very large kernel) falls back to the generic kernels of Conv.cpp.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"
#include "medrun/ConvView.h"
#include "medrun/NormStats.h"

#include <cstdlib>

namespace mlir::med::cuda {

namespace {

std::string S(int64_t v) { return std::to_string(v); }

int pow2Ceil(int64_t n) {
  int p = 1;
  while (p < n)
    p *= 2;
  return p;
}

// Static shared memory a stencil block may use (the static limit is 48 KiB).
constexpr int64_t kStencilShared = 46 * 1024;

/// Floats per staged row: TW outputs need TW + kW - 1 inputs, read in 16-byte chunks of
/// which a thread's last may run past them (4·(chunks per window) − 4 beyond TW); the
/// rule of stencil.cuh's stencilRowPitch, which sizes the shared arrays.
int64_t rowPitch(int64_t TW, int64_t kW) { return TW + 4 * ((kW + 2) / 4); }

/// The epilogue functor of a shift-sum's fusion body (stencil.cuh's kernels: `channel`, then
/// each output's value, and with statistics how a chunk of them is stored), `biasType` the
/// bias's element type where there is one, `addendType` the residual addend's.
std::string stencilEpilogue(const std::optional<std::string> &biasType, bool stats,
                            const std::optional<std::string> &addendType) {
  std::string e = "struct KNAME_epilogue {\n"
                  "  enum : bool { kStatistics = " +
                  std::string(stats ? "true" : "false") +
                  ", kAddend = " + (addendType ? "true" : "false") + " };\n";
  if (addendType)
    e += "  const " + *addendType + " *__restrict__ addend;\n";
  if (biasType)
    e += "  const " + *biasType + " *__restrict__ bias;\n"
         "  float bc;\n"
         "  void channel(int c) { bc = (float)bias[c]; }\n"
         "  float operator()(float acc) const { return acc + bc; }\n";
  else
    e += "  void channel(int) {}\n"
         "  float operator()(float acc) const { return acc; }\n";
  if (stats)
    e += "  float *__restrict__ parts;\n"
         "  // The chunk's (pivot, dev, M2) as group_norm_merge reads them.\n"
         "  void statistics(i64 o, int n, float shift, float d1, float d2) const {\n"
         "    parts[3 * o] = shift;\n"
         "    parts[3 * o + 1] = d1 / (float)n;\n"
         "    parts[3 * o + 2] = fmaxf(0.0f, d2 - d1 * d1 / (float)n);\n"
         "  }\n";
  return e + "};\n";
}

} // namespace

StencilKernels stencilKernels() {
  static const StencilKernels k = [] {
    const char *env = std::getenv("MEDC_STENCIL");
    const std::string v = env ? env : "";
    if (v.empty() || v == "rows")
      return StencilKernels::Rows;
    if (v == "parity")
      return StencilKernels::Parity;
    if (v == "registers")
      return StencilKernels::Registers;
    if (v == "tiles")
      return StencilKernels::Tiles;
    throw CodegenError{"MEDC_STENCIL='" + v +
                       "': expected 'rows' (the default), 'parity', 'registers' or 'tiles'"};
  }();
  return k;
}

// Launches a shift-sum template instance, `call` (say "shiftSumTile<Tile, true>"), as kernel
// `name` with the epilogue of its bias and, with `parts` ≥ 0, of its chunks' statistics.
void FunctionGen::launchShiftSum(const Op &op, const std::string &name, const std::string &call,
                                 const std::string &tile, int64_t threads, int64_t blocks, int x,
                                 int w, std::optional<int> b, int y, int parts,
                                 std::optional<int> addend) {
  const bool stats = parts >= 0;
  const std::string epilogue =
      stencilEpilogue(b ? std::optional<std::string>(elemType(*b)) : std::nullopt, stats,
                      addend ? std::optional<std::string>(elemType(*addend)) : std::nullopt);
  // The functor's members in declaration order: addend, bias and its channel's value, parts.
  std::vector<std::string> members;
  if (addend)
    members.push_back("addend");
  if (b)
    members.push_back("bias, 0.0f");
  if (stats)
    members.push_back("parts");
  std::string init;
  for (const std::string &m : members)
    init += (init.empty() ? "" : ", ") + m;
  const std::string body =
      "  static_assert(" + tile + "::THREADS == " + S(threads) + ", \"the launch's block\");\n"
      "  " + call + "(y, x, w, KNAME_epilogue{" + init + "});\n";
  std::vector<std::string> params{out("y"), in("x"), in("w")};
  std::vector<int> args{y, x, w};
  if (addend) {
    params.push_back(in("addend"));
    args.push_back(*addend);
  }
  if (b) {
    params.push_back(in("bias"));
    args.push_back(*b);
  }
  if (stats) {
    params.push_back(out("parts"));
    args.push_back(parts);
  }
  launch(op,
         src.kernel(name, typed(params, args), body, static_cast<int>(threads),
                    kernelLibrary("stencil.cuh") + std::string("\n") + epilogue),
         blocks, static_cast<int>(threads), args);
}

// The forward and mirrored shift-sum (the header says how).
void FunctionGen::shiftSum(const Op &op) {
  const medrun::ConvView view = *medrun::convView(fn, op);
  const bool mirrored = view.kind == "conv3d_transpose";
  if (shiftSumTile(op, mirrored, op.single("input"), op.single("weight"), op.optional("bias"),
                   result(op), -1) == TileEmitted::None)
    conv(op); // the generic kernels
}

FunctionGen::TileEmitted FunctionGen::shiftSumTile(const Op &op, bool mirrored, int x, int w,
                                                   std::optional<int> b, int y, int parts,
                                                   std::optional<int> addend) {
  requireFloat(x, "the input");
  requireFloat(w, "the weight");
  requireFloat(y, "the result");
  if (b)
    requireFloat(*b, "the bias");
  const auto &xs = shape(x), &ws = shape(w), &ys = shape(y);
  if (xs.size() != 5 || ws.size() != 5 || ys != xs || ws[0] != xs[1] || ws[1] != 1)
    error("expected an N×C×D×H×W input and result of the same shape and a C×1×k×k×k weight");
  const int64_t C = xs[1], D = xs[2], H = xs[3], W = xs[4];
  const int64_t kD = ws[2], kH = ws[3], kW = ws[4], kHW = kH * kW, kVol = kD * kHW;
  if (kD % 2 == 0 || kH % 2 == 0 || kW % 2 == 0)
    error("a shift-sum needs an odd kernel");
  if (D * H * W >= (int64_t{1} << 31) - 65536)
    return TileEmitted::None; // channel offsets beyond 32 bits: the generic kernel
  if (stencilKernels() == StencilKernels::Rows)
    if (TileEmitted e = shiftSumStreamed(op, mirrored, x, w, b, y, parts, addend);
        e != TileEmitted::None)
      return e;
  const bool registers = stencilKernels() == StencilKernels::Registers;
  // Threads per block along W (rw outputs each: 4, or with register tiling 8 on rows
  // longer than 8, where 8 would leave a block of few threads), H (rh rows each) and D (one
  // slice each).
  const int rw = registers && W > 8 ? 8 : 4;
  // Inputs per global vector (the register-tiled kernel stages whole vectors): 16 bytes,
  // or for 16-bit inputs 8 bytes where the halo of 16-byte vectors would not fit.
  int v = elemType(x) == "float" ? 4 : 8;
  int tw = std::min(registers ? 8 : 16, pow2Ceil((W + rw - 1) / rw));
  int rh = H >= 4 ? 4 : H >= 2 ? 2 : 1;
  int th = std::min(4, pow2Ceil((H + rh - 1) / rh));
  int td = std::min<int64_t>(256 / (tw * th), pow2Ceil(D));
  // With statistics the tile is a chunk of them: at most kChunk.d slices (kChunk.h rows and
  // kChunk.w columns are the most the choice above makes).
  if (parts >= 0)
    td = std::min<int>(td, static_cast<int>(medrun::normstats::kChunk.d));
  // Floats per staged row (stencil.cuh's stencilRowPitch, or ShiftSumRegTile's P).
  auto pitch = [&] {
    if (!registers)
      return rowPitch(4 * tw, kW);
    const int64_t halo = (kW / 2 + v - 1) / v * v, off = halo - kW / 2, a = off % 4;
    const int64_t nch = (a + rw + kW - 1 + 3) / 4;
    const int64_t last = off - a + rw * (tw - 1) + 4 * nch, need = halo + rw * tw + kW / 2;
    return (std::max(last, need) + v - 1) / v * v;
  };
  auto bytes = [&] { return ((td + kD - 1) * (th * rh + kH - 1) * pitch() + kVol) * 4; };
  // Shrink the tile until it fits: along D to 4 slices, then the vectors, then along D, H,
  // and the rows per thread.
  while (bytes() > kStencilShared) {
    if (td > 4)
      td /= 2;
    else if (registers && v == 8)
      v = 4;
    else if (td > 1)
      td /= 2;
    else if (th > 1)
      th /= 2;
    else if (rh > 1)
      rh /= 2;
    else if (tw > 1)
      tw /= 2;
    else
      return TileEmitted::None; // does not fit even one row of outputs: the generic kernel
  }
  // The tile (stencil.cuh's ShiftSumTile or ShiftSumRegTile derives the rest from these).
  const int64_t TW = rw * tw, TH = th * rh, TD = td;
  const int threads = tw * th * td;
  const int64_t nW = (W + TW - 1) / TW, nH = (H + TH - 1) / TH, nD = (D + TD - 1) / TD;
  const int64_t blocks = xs[0] * C * nD * nH * nW;
  // Statistics in the epilogue where each tile is a chunk of them (NormStats.h): along each
  // axis the tile's extent is the chunk's, or both cover the whole axis.
  const medrun::normstats::Box k = medrun::normstats::kChunk;
  auto same = [](int64_t tile, int64_t chunk, int64_t n) {
    return tile == chunk || (tile >= n && chunk >= n);
  };
  const bool stats = parts >= 0 && same(TD, k.d, D) && same(TH, k.h, H) && same(TW, k.w, W);

  const std::string tile =
      std::string(registers ? "ShiftSumRegTile<" : "ShiftSumTile<") + S(C) + ", " + S(D) + ", " +
      S(H) + ", " + S(W) + ", " + S(kD) + ", " + S(kH) + ", " + S(kW) + ", " + S(tw) + ", " +
      S(th) + ", " + S(td) + ", " + S(rh) + (registers ? ", " + S(rw) + ", " + S(v) : "") + ">";
  const std::string base = std::string(mirrored ? "shift_sum_mirrored_tile" : "shift_sum_tile") +
                           (stats ? "_stats" : addend ? "_residual" : "");
  launchShiftSum(op, base,
                 std::string(registers ? "shiftSumRegs<" : "shiftSumTile<") + tile + ", " +
                     (mirrored ? "true" : "false") + ">",
                 tile, threads, blocks, x, w, b, y, stats ? parts : -1, addend);
  return stats ? TileEmitted::WithStatistics : TileEmitted::Plain;
}

// The weight gradient of a shift-sum as a split reduction (the header says how).
void FunctionGen::shiftSumGradWeight(const Op &op) {
  shiftSumGradWeight(op, op.single("input"), op.single("grad_output"), result(op), std::nullopt);
}

// The same into dw with, where `db` is given (a `stencil_grad` fusion), the bias gradient
// Σ dy over N, D, H, W: in the streamed kernel from the dy it loads, else the reduction's
// own kernels after the staged ones.
void FunctionGen::shiftSumGradWeight(const Op &op, int x, int dy, int dw, std::optional<int> db) {
  requireFloat(x, "the input");
  requireFloat(dy, "the output gradient");
  requireFloat(dw, "the result");
  const auto &xs = shape(x), &gs = shape(dy), &ws = shape(dw);
  if (xs.size() != 5 || gs != xs || ws.size() != 5 || ws[0] != xs[1] || ws[1] != 1)
    error("expected input and output gradient of one N×C×D×H×W shape and a C×1×k×k×k weight");
  const int64_t N = xs[0], C = xs[1], D = xs[2], H = xs[3], W = xs[4];
  const int64_t kD = ws[2], kH = ws[3], kW = ws[4], kVol = kD * kH * kW;
  const int64_t pairs = kD * kH;
  if (kD % 2 == 0 || kH % 2 == 0 || kW % 2 == 0)
    error("a shift-sum needs an odd kernel");
  if (D * H * W >= (int64_t{1} << 31) - 65536 || pairs > 512) {
    // Beyond 32-bit channel offsets, or a thread per (kd, kh) pair would exceed 512 threads:
    // the generic split reduction (the `stencil_grad` matcher takes neither).
    if (db)
      error("the stencil_grad fusion's volume or kernel is too large for the stencil kernels");
    return convGradWeight(op);
  }
  if (stencilKernels() == StencilKernels::Rows && shiftSumGradWeightRows(op, x, dy, dw, db))
    return;
  int tw = std::min(16, pow2Ceil((W + 3) / 4));
  int64_t TH = std::min(16, pow2Ceil(H)), TD = std::min(4, pow2Ceil(D));
  // Groups of rows: as many as fit 512 threads (a power of two), at most the tile's rows.
  auto groups = [&] {
    int64_t g = 1;
    while (2 * g * pairs <= 512 && 2 * g <= TD * TH)
      g *= 2;
    return g;
  };
  // Staged rows of 16-byte chunks, an odd number of chunks per row so that threads reading
  // different rows at the same column hit different banks (stencil.cuh's stencilOddPitch).
  auto pitch = [](int64_t floats) { return (floats / 4) % 2 ? floats : floats + 4; };
  auto bytes = [&] {
    const int64_t TW = 4 * tw;
    return ((TD + kD - 1) * (TH + kH - 1) * pitch(rowPitch(TW, kW)) + TD * TH * pitch(TW) +
            kVol * groups()) * 4;
  };
  while (bytes() > kStencilShared) {
    if (TH >= TD && TH > 1)
      TH /= 2;
    else if (TD > 1)
      TD /= 2;
    else if (tw > 1)
      tw /= 2;
    else if (db)
      error("the stencil_grad fusion's kernel does not fit the staged weight gradient");
    else
      return convGradWeight(op); // does not fit: the generic split reduction
  }
  // The tile (stencil.cuh's ShiftSumGradWeightTile derives the rest from these).
  const int64_t G = groups(), TW = 4 * tw, threads = pairs * G;
  const int64_t nW = (W + TW - 1) / TW, nH = (H + TH - 1) / TH, nDt = (D + TD - 1) / TD;
  // Runs of D tiles per block: about 4096 blocks in all, each at least one tile.
  const int64_t base = N * C * nH * nW;
  const int64_t run = std::max<int64_t>(1, nDt / ((4096 + base - 1) / base));
  const int64_t runs = (nDt + run - 1) / run;
  const int64_t perNC = nH * nW * runs, parts = N * perNC;
  const int buf = scratch(C * kVol * parts * 4);
  const std::string tile = "ShiftSumGradWeightTile<" + S(N) + ", " + S(C) + ", " + S(D) + ", " +
                           S(H) + ", " + S(W) + ", " + S(kD) + ", " + S(kH) + ", " + S(kW) +
                           ", " + S(tw) + ", " + S(TH) + ", " + S(TD) + ", " + S(G) + ", " +
                           S(run) + ">";
  const std::string body =
      "  static_assert(" + tile + "::THREADS == " + S(threads) + " && " + tile +
      "::PARTS == " + S(parts) + ", \"the launch's block and grid\");\n"
      "  shiftSumGradWeightParts<" + tile +
      (stencilKernels() == StencilKernels::Registers ? ", true" : "") + ">(parts, x, dy);\n";
  launch(op, src.kernel("shift_sum_grad_weight_parts",
                        typed({out("parts"), in("x"), in("dy")}, {buf, x, dy}), body,
                        static_cast<int>(threads), kernelLibrary("stencil.cuh")),
         N * C * perNC, static_cast<int>(threads), {buf, x, dy});
  // The same kernel (name and code) as the generic depthwise weight gradient's sum.
  sumParts(op, "dwconv_grad_weight_sum", "dw", dw, buf, 0, type(dw).numel(), parts);
  if (db)
    reduce(op, dy, *db, "sum", {0, 2, 3, 4});
}

// A shift-sum streamed along H (stencil.cuh's shiftSumRows, and with `parts` ≥ 0 its
// shiftSumChunks: a block per band of the statistics' chunks), where W is a multiple of one
// 16-byte vector of the input and the block has at least 64 threads; None where it does not
// apply (the tiled kernel then).
FunctionGen::TileEmitted FunctionGen::shiftSumStreamed(const Op &op, bool mirrored, int x, int w,
                                                       std::optional<int> b, int y, int parts,
                                                       std::optional<int> addend) {
  const auto &xs = shape(x), &ws = shape(w);
  const int64_t N = xs[0], C = xs[1], D = xs[2], H = xs[3], W = xs[4];
  const int64_t kD = ws[2], kH = ws[3], kW = ws[4];
  const int64_t vw = elemType(x) == "float" ? 4 : 8;
  const bool stats = parts >= 0;
  const medrun::normstats::Box k = medrun::normstats::kChunk;
  // The taps (which the unrolled loop keeps in registers), KH rows of VW sums and a window of
  // VW + KW − 1 inputs: no more than 96 floats (k3; at k5 ptxas took 255 registers).
  if (W % vw != 0 || (stats && k.w % vw != 0) || kD * kH * kW + kH * vw + vw + kW - 1 > 96)
    return TileEmitted::None;
  // An addend is read a vector at a time, as the output is stored: of the output's type.
  if (addend && (stats || elemType(*addend) != elemType(y)))
    return TileEmitted::None;
  const int64_t gw = W / vw;
  int64_t threads = 0, blocks = 0;
  std::string tile;
  if (stats) {
    threads = gw * k.d;
    blocks = N * C * ((D + k.d - 1) / k.d) * ((H + k.h - 1) / k.h);
    tile = "ShiftSumChunkTile<" + S(C) + ", " + S(D) + ", " + S(H) + ", " + S(W) + ", " + S(kD) +
           ", " + S(kH) + ", " + S(kW) + ", " + S(vw) + ", " + S(k.d) + ", " + S(k.h) + ", " +
           S(k.w) + ">";
  } else {
    int64_t gd = 1;
    while (2 * gd * gw <= 256 && gd < D)
      gd *= 2;
    threads = gw * gd;
    // Parts of H: about 4096 blocks in all where each part keeps at least 32 rows (a part
    // reads kH − 1 rows beyond its own).
    const int64_t nD = (D + gd - 1) / gd;
    int64_t hp = 1;
    while (N * C * nD * hp < 4096 && (H + 2 * hp - 1) / (2 * hp) >= 32)
      hp *= 2;
    const int64_t hr = (H + hp - 1) / hp;
    hp = (H + hr - 1) / hr;
    blocks = N * C * nD * hp;
    tile = "ShiftSumRowsTile<" + S(C) + ", " + S(D) + ", " + S(H) + ", " + S(W) + ", " + S(kD) +
           ", " + S(kH) + ", " + S(kW) + ", " + S(vw) + ", " + S(gd) + ", " + S(hp) + ">";
  }
  if (threads < 64 || threads > 1024)
    return TileEmitted::None;
  launchShiftSum(op,
                 std::string(mirrored ? "shift_sum_mirrored_" : "shift_sum_") +
                     (stats ? "chunks" : addend ? "rows_residual" : "rows"),
                 std::string(stats ? "shiftSumChunks<" : "shiftSumRows<") + tile + ", " +
                     (mirrored ? "true" : "false") + ">",
                 tile, threads, blocks, x, w, b, y, parts, addend);
  return stats ? TileEmitted::WithStatistics : TileEmitted::Plain;
}

// The weight gradient streamed along H (stencil.cuh's shiftSumGradWeightRows says how), where
// W is a multiple of one 16-byte vector of dy, a thread's rows and sums fit its registers and
// the block has at least 64 threads; false where it does not apply (the staged split
// reduction then).
bool FunctionGen::shiftSumGradWeightRows(const Op &op, int x, int dy, int dw,
                                         std::optional<int> db) {
  const auto &xs = shape(x), &ws = shape(dw);
  const int64_t N = xs[0], C = xs[1], D = xs[2], H = xs[3], W = xs[4];
  const int64_t kD = ws[2], kH = ws[3], kW = ws[4], kVol = kD * kH * kW;
  const int64_t vw = elemType(dy) == "float" ? 4 : 8;
  if (W % vw != 0 || elemType(x) != elemType(dy))
    return false;
  // A thread holds KH rows of VW + KW − 1 inputs and KH·KW sums: no more than 64 floats (k3:
  // 56 registers; at k5, 85 floats, ptxas took 128). A thread per (kd, kh) pair fits k5 but
  // lost to the staged split reduction on an H100 (19.4 against 16.7 ms: docs/perf.md).
  if (kH * (vw + kW - 1 + kW) > 64)
    return false;
  const int64_t gw = W / vw;
  // Output slices per block: as many as keep the block within 256 threads.
  int64_t gd = 1;
  while (2 * gd * gw * kD <= 256 && gd < D)
    gd *= 2;
  const int64_t threads = gw * kD * gd;
  if (threads < 64 || threads > 1024 || (kVol + (db ? 1 : 0)) * gw * gd * 4 > kStencilShared)
    return false;
  // Parts of H: about 4096 blocks in all where each part keeps at least 16 rows.
  const int64_t nD = (D + gd - 1) / gd;
  int64_t hp = 1;
  while (N * C * nD * hp < 4096 && (H + 2 * hp - 1) / (2 * hp) >= 16)
    hp *= 2;
  const int64_t hr = (H + hp - 1) / hp;
  hp = (H + hr - 1) / hr; // no empty part
  const int64_t perNC = nD * hp, parts = N * perNC;
  const int buf = scratch(C * (kVol + (db ? 1 : 0)) * parts * 4);
  const std::string tile = "ShiftSumGradWeightRowsTile<" + S(N) + ", " + S(C) + ", " + S(D) +
                           ", " + S(H) + ", " + S(W) + ", " + S(kD) + ", " + S(kH) + ", " +
                           S(kW) + ", " + S(vw) + ", " + S(gd) + ", " + S(hp) + ">";
  const std::string body =
      "  static_assert(" + tile + "::THREADS == " + S(threads) + " && " + tile +
      "::PARTS == " + S(parts) + ", \"the launch's block and grid\");\n"
      "  shiftSumGradWeightRows<" + tile + (db ? ", true" : "") + ">(parts, x, dy);\n";
  launch(op, src.kernel(db ? "shift_sum_grad_weight_bias_rows" : "shift_sum_grad_weight_rows",
                        typed({out("parts"), in("x"), in("dy")}, {buf, x, dy}), body,
                        static_cast<int>(threads), kernelLibrary("stencil.cuh")),
         N * C * perNC, static_cast<int>(threads), {buf, x, dy});
  sumParts(op, "dwconv_grad_weight_sum", "dw", dw, buf, 0, type(dw).numel(), parts);
  if (db) {
    requireFloat(*db, "the bias gradient");
    sumParts(op, "dwconv_grad_bias_sum", "db", *db, buf, C * kVol, C, parts);
  }
  return true;
}

// A strided depthwise conv3d_transpose as its stride's parity classes (kernels/depthwise.cuh's
// transposedParity says how): the up blocks' transposed convolutions and the strided
// down-sampling convolutions' input gradients.
bool FunctionGen::transposedParity(const Op &op) {
  if (stencilKernels() == StencilKernels::Tiles)
    return false;
  const std::optional<medrun::ConvView> view = medrun::convView(fn, op);
  if (!view || view->kind != "conv3d_transpose" || view->shiftSum)
    return false;
  const int x = op.single("input"), w = op.single("weight"), y = result(op);
  const std::optional<int> b = op.optional("bias");
  const auto &xs = shape(x), &ws = shape(w), &ys = shape(y);
  if (xs.size() != 5 || ws.size() != 5 || ys.size() != 5 || view->stride.size() != 3 ||
      view->padding.size() != 3 || view->dilation.size() != 3)
    return false;
  const int64_t C = xs[1];
  // Depthwise: one input and one output channel per group.
  if (view->groups != C || ys[1] != C || ws[0] != C || ws[1] != 1 || ys[0] != xs[0])
    return false;
  int64_t strided = 1;
  for (int a = 0; a < 3; ++a) {
    if (view->dilation[a] != 1 || view->padding[a] < 0 || view->stride[a] < 1 ||
        view->stride[a] > 4 || ws[2 + a] > 7)
      return false; // dilated, negative padding, or a class too large to unroll: conv()
    strided *= view->stride[a];
  }
  if (strided == 1)
    return false; // stride 1: a shift-sum's stencil, or conv()'s kernel
  const int64_t nc = xs[0] * C;
  if (nc * std::max(xs[2] * xs[3] * xs[4], ys[2] * ys[3] * ys[4]) >= (int64_t{1} << 31) - 65536)
    return false; // 32-bit indices only
  requireFloat(x, "the input");
  requireFloat(w, "the weight");
  requireFloat(y, "the result");
  if (b)
    requireFloat(*b, "the bias");
  const int64_t sw = view->stride[2];
  const int64_t jw = (ys[4] + sw - 1) / sw, rj = std::min<int64_t>(4, jw);
  std::string shape = "TransposedParityShape<" + S(nc) + ", " + S(C);
  for (int64_t v : {xs[2], xs[3], xs[4], ys[2], ys[3], ys[4], ws[2], ws[3], ws[4],
                    view->stride[0], view->stride[1], view->stride[2], view->padding[0],
                    view->padding[1], view->padding[2], rj})
    shape += ", " + S(v);
  shape += ">";
  const int64_t total = nc * ((ys[2] + view->stride[0] - 1) / view->stride[0]) *
                        ((ys[3] + view->stride[1] - 1) / view->stride[1]) * ((jw + rj - 1) / rj);
  const int block = static_cast<int>(std::min<int64_t>(kBlock, std::max<int64_t>(32, pow2Ceil(total))));
  // The epilogue functor: the bias of the output's channel.
  std::string epilogue = "struct KNAME_epilogue {\n";
  if (b)
    epilogue += "  const " + elemType(*b) + " *__restrict__ bias;\n"
                "  float bc;\n"
                "  void channel(int c) { bc = (float)bias[c]; }\n"
                "  float operator()(float acc) const { return acc + bc; }\n";
  else
    epilogue += "  void channel(int) {}\n"
                "  float operator()(float acc) const { return acc; }\n";
  epilogue += "};\n";
  const std::string body = "  static_assert(" + shape + "::THREADS_TOTAL == " + S(total) +
                           ", \"the launch's grid\");\n"
                           "  transposedParity<" + shape + ", " + S(block) +
                           ">(y, x, w, KNAME_epilogue{" + (b ? "bias, 0.0f" : "") + "});\n";
  std::vector<std::string> params{out("y"), in("x"), in("w")};
  std::vector<int> args{y, x, w};
  if (b) {
    params.push_back(in("bias"));
    args.push_back(*b);
  }
  launch(op,
         src.kernel("conv3d_transpose_parity", typed(params, args), body, block,
                    kernelLibrary("depthwise.cuh") + std::string("\n") + epilogue),
         (total + block - 1) / block, block, args);
  return true;
}

void FunctionGen::registerStencil(Emitters &e) {
  e[OpKind::ShiftSum] = [](FunctionGen &g, const Op &op) { g.shiftSum(op); };
  e[OpKind::ShiftSumGradWeight] = [](FunctionGen &g, const Op &op) { g.shiftSumGradWeight(op); };
}

} // namespace mlir::med::cuda
