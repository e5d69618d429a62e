//===- Stencil.cpp - the tiled shift-sum kernels (stride-1 depthwise stencils) -------===//
//
// med.shift_sum and med.shift_sum_grad_weight (medrun/ConvView.h: the stride-1 depthwise
// convolution with padding k/2, its input gradient `mirrored`, and its weight gradient).
//
//  * shift_sum: one block per (sample, channel) and output tile of TD slices × TH rows ×
//    TW columns. The block stages the tile's input plus halo in shared memory once, as f32
//    (16-bit storage is read as such and converted there, four consecutive elements per
//    thread: coalesced along W), and its channel's k³ weights (reversed for `mirrored`:
//    reversing the flat tap index flips all three axes). Each thread computes 4
//    neighbouring outputs along W in each of RH rows: per slice kd and input row it loads
//    its window of 4 + kW - 1 inputs with 16-byte shared loads (consecutive threads read
//    consecutive 16-byte chunks: no bank conflicts) and feeds every output row and tap that
//    uses it from registers. Each output sums its taps in the generic kernel's order (kd,
//    kh, kw), in f32, then adds the bias.
//  * shift_sum_grad_weight: a split reduction. A block owns one (sample, channel), an H×W
//    tile column and a run of D tiles; per tile it stages x (with halo) and dy in shared
//    memory. Thread (kd, kh, g) owns the kW taps of one (kd, kh) pair for rows g, g + G, …
//    of the tile and slides along W: per 4 outputs one 16-byte load of dy and one of x feed
//    4·kW multiply-adds from registers. The block combines each tap's G partials in a fixed
//    order into one partial per block; a second kernel sums each weight's partials in a
//    fixed tree. No float atomics: the same bits on every run.
//
// Tiles are chosen per shape to fit 48 KiB of static shared memory; a shape whose smallest
// tile does not fit (a very large kernel) falls back to the generic kernels of Conv.cpp.
//
//===------------------------------------------------------------------------------===//

#include "Cuda/Codegen.h"
#include "medrun/ConvView.h"
#include "medrun/NormStats.h"

namespace mlir::med::cuda {

namespace {

std::string S(int64_t v) { return std::to_string(v); }

/// min(tile, n - at) as code: a tile's extent clipped to its axis.
std::string clip(int64_t tile, int64_t n, const std::string &at) {
  return "(" + S(n) + " - " + at + " < " + S(tile) + " ? " + S(n) + " - " + at + " : " +
         S(tile) + ")";
}

int pow2Ceil(int64_t n) {
  int p = 1;
  while (p < n)
    p *= 2;
  return p;
}

// Static shared memory a stencil block may use (the static limit is 48 KiB).
constexpr int64_t kStencilShared = 46 * 1024;

/// Floats per staged row: TW outputs need TW + kW - 1 inputs, read in 16-byte chunks of
/// which a thread's last may run past them (4·(chunks per window) − 4 beyond TW).
int64_t rowPitch(int64_t TW, int64_t kW) { return TW + 4 * ((kW + 2) / 4); }

/// The code that stages the input region of SD slices × SH rows × 4·len columns starting
/// at (dIn, hIn, wIn) into shared `dst` (rows of P floats, a multiple of 4): four
/// consecutive elements of a row per thread and step (coalesced along W), converted to
/// f32, zero outside the volume.
std::string stage(const std::string &dst, const std::string &src, int64_t SD, int64_t SH,
                  int64_t len, int64_t P, int64_t D, int64_t H, int64_t W, int64_t threads) {
  return "  for (int q = t; q < " + S(SD * SH * len) + "; q += " + S(threads) + ") {\n"
         "    const int qw = q % " + S(len) + ", rr = q / " + S(len) + ";\n"
         "    const int id = dIn + rr / " + S(SH) + ", ih = hIn + rr % " + S(SH) +
         ", iw = wIn + 4 * qw;\n"
         "    const bool inside = (unsigned)id < " + S(D) + "u && (unsigned)ih < " + S(H) + "u;\n"
         "    const int at = (id * " + S(H) + " + ih) * " + S(W) + " + iw;\n"
         "    Vec<float, 4> v;\n"
         "#pragma unroll\n"
         "    for (int i = 0; i < 4; ++i)\n"
         "      v[i] = inside && (unsigned)(iw + i) < " + S(W) + "u ? (float)" + src +
         "[at + i] : 0.0f;\n"
         "    " + dst + "[rr * " + S(P / 4) + " + qw] = v;\n"
         "  }\n";
}

} // namespace

// The forward and mirrored shift-sum (the header says how).
void FunctionGen::shiftSum(const Op &op) {
  const medrun::ConvView view = *medrun::convView(fn, op);
  const bool mirrored = view.kind == "conv3d_transpose";
  if (shiftSumTile(op, mirrored, op.single("input"), op.single("weight"), op.optional("bias"),
                   result(op), -1) == TileEmitted::None)
    conv(op); // the generic kernels
}

FunctionGen::TileEmitted FunctionGen::shiftSumTile(const Op &op, bool mirrored, int x, int w,
                                                   std::optional<int> b, int y, int parts) {
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
  // Threads per block along W (4 outputs each), H (RH rows each) and D (one slice each).
  int tw = std::min(16, pow2Ceil((W + 3) / 4));
  int rh = H >= 4 ? 4 : H >= 2 ? 2 : 1;
  int th = std::min(4, pow2Ceil((H + rh - 1) / rh));
  int td = std::min<int64_t>(256 / (tw * th), pow2Ceil(D));
  // With statistics the tile is a chunk of them: at most kChunk.d slices (kChunk.h rows and
  // kChunk.w columns are the most the choice above makes).
  if (parts >= 0)
    td = std::min<int>(td, static_cast<int>(medrun::normstats::kChunk.d));
  const int64_t nvec = (kW + 6) / 4; // 16-byte chunks per window of 4 + kW - 1
  auto bytes = [&] {
    return ((td + kD - 1) * (th * rh + kH - 1) * rowPitch(4 * tw, kW) + kVol) * 4;
  };
  // Shrink the tile until it fits: first along D, then H, then the rows per thread.
  while (bytes() > kStencilShared) {
    if (td > 1)
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
  const int64_t TW = 4 * tw, TH = th * rh, TD = td, P = rowPitch(TW, kW);
  const int64_t SD = TD + kD - 1, SH = TH + kH - 1;
  const int threads = tw * th * td;
  const int64_t nW = (W + TW - 1) / TW, nH = (H + TH - 1) / TH, nD = (D + TD - 1) / TD;
  const int64_t blocks = xs[0] * C * nD * nH * nW;
  const int64_t DHW = D * H * W;
  // Whole 4-output groups are stored as one vector where rows are 4-element aligned.
  const bool vecStore = W % 4 == 0;
  // Statistics in the epilogue where each tile is a chunk of them (NormStats.h): along each
  // axis the tile's extent is the chunk's, or both cover the whole axis.
  const medrun::normstats::Box k = medrun::normstats::kChunk;
  auto same = [](int64_t tile, int64_t chunk, int64_t n) {
    return tile == chunk || (tile >= n && chunk >= n);
  };
  const bool stats = parts >= 0 && same(TD, k.d, D) && same(TH, k.h, H) && same(TW, k.w, W);

  std::string body =
      "  const int t = threadIdx.x;\n"
      "  int r = blockIdx.x;\n"
      "  const int bw = r % " + S(nW) + "; r /= " + S(nW) + ";\n"
      "  const int bh = r % " + S(nH) + "; r /= " + S(nH) + ";\n"
      "  const int bd = r % " + S(nD) + ", nc = r / " + S(nD) + ", c = nc % " + S(C) + ";\n"
      "  __shared__ Vec<float, 4> sx[" + S(SD * SH * P / 4) + "];\n"
      "  __shared__ float ws[" + S(kVol) + "];\n"
      "  const auto* xc = x + (i64)nc * " + S(DHW) + ";\n"
      "  for (int j = t; j < " + S(kVol) + "; j += " + S(threads) + ")\n" +
      (mirrored ? "    ws[j] = (float)w[c * " + S(kVol) + " + " + S(kVol - 1) + " - j]; // taps reversed\n"
                : "    ws[j] = (float)w[c * " + S(kVol) + " + j];\n") +
      "  // The tile's input origin: its first output less the halo.\n"
      "  const int dIn = bd * " + S(TD) + " - " + S(kD / 2) + ", hIn = bh * " + S(TH) + " - " +
      S(kH / 2) + ", wIn = bw * " + S(TW) + " - " + S(kW / 2) + ";\n" +
      stage("sx", "xc", SD, SH, P / 4, P, D, H, W, threads) +
      "  __syncthreads();\n"
      "  const int tx = t % " + S(tw) + ", ty = t / " + S(tw) + " % " + S(th) + ", tz = t / " +
      S(tw * th) + ";\n"
      "  const float* s = &sx[0][0] + (tz * " + S(SH) + " + ty * " + S(rh) + ") * " + S(P) +
      " + 4 * tx;\n"
      "  float acc[" + S(rh) + "][4];\n"
      "#pragma unroll\n"
      "  for (int i = 0; i < " + S(rh) + "; ++i)\n"
      "#pragma unroll\n"
      "    for (int q = 0; q < 4; ++q) acc[i][q] = 0.0f;\n"
      "#pragma unroll\n"
      "  for (int kd = 0; kd < " + S(kD) + "; ++kd) {\n"
      "    float wk[" + S(kHW) + "];\n"
      "#pragma unroll\n"
      "    for (int j = 0; j < " + S(kHW) + "; ++j) wk[j] = ws[kd * " + S(kHW) + " + j];\n"
      "#pragma unroll\n"
      "    for (int ir = 0; ir < " + S(rh + kH - 1) + "; ++ir) { // input row: feeds rows ir - kh\n"
      "      float win[" + S(4 * nvec) + "];\n"
      "#pragma unroll\n"
      "      for (int v = 0; v < " + S(nvec) + "; ++v) {\n"
      "        const Vec<float, 4> q4 = *reinterpret_cast<const Vec<float, 4>*>(s + (kd * " +
      S(SH) + " + ir) * " + S(P) + " + 4 * v);\n"
      "#pragma unroll\n"
      "        for (int q = 0; q < 4; ++q) win[4 * v + q] = q4[q];\n"
      "      }\n"
      "#pragma unroll\n"
      "      for (int i = 0; i < " + S(rh) + "; ++i) {\n"
      "        const int kh = ir - i;\n"
      "        if (kh < 0 || kh >= " + S(kH) + ") continue;\n"
      "#pragma unroll\n"
      "        for (int kw = 0; kw < " + S(kW) + "; ++kw)\n"
      "#pragma unroll\n"
      "          for (int q = 0; q < 4; ++q) acc[i][q] += wk[kh * " + S(kW) + " + kw] * win[q + kw];\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "  const int od = bd * " + S(TD) + " + tz, ow = bw * " + S(TW) + " + 4 * tx;\n" +
      (stats ? "  const bool live = od < " + S(D) + ";\n"
             : "  if (od >= " + S(D) + ") return;\n") +
      (b ? "  const float bc = (float)bias[c];\n" : "") +
      "  auto* yc = y + (i64)nc * " + S(DHW) + ";\n" + (stats ? "  if (live) {\n" : "") +
      "#pragma unroll\n"
      "  for (int i = 0; i < " + S(rh) + "; ++i) {\n"
      "    const int oh = bh * " + S(TH) + " + ty * " + S(rh) + " + i;\n"
      "    if (oh >= " + S(H) + ") break;\n"
      "    const int at = (od * " + S(H) + " + oh) * " + S(W) + " + ow;\n";
  const std::string value = b ? "acc[i][q] + bc" : "acc[i][q]";
  if (vecStore)
    body += "    if (ow + 4 <= " + S(W) + ") {\n"
            "      Vec<OUT, 4> v;\n"
            "#pragma unroll\n"
            "      for (int q = 0; q < 4; ++q) v[q] = " + value + ";\n"
            "      vstore(yc + at, v);\n"
            "      continue;\n"
            "    }\n";
  body += "#pragma unroll\n"
          "    for (int q = 0; q < 4; ++q)\n"
          "      if (ow + q < " + S(W) + ") yc[at + q] = " + value + ";\n"
          "  }\n";
  if (stats) {
    body += "  }\n";
    // The tile's chunk of the statistics, from the f32 outputs in registers: its first mean
    // (the pivot), then the deviations from it, as the group_norm_chunks kernel.
    const std::string each =
        "#pragma unroll\n"
        "  for (int i = 0; i < " + S(rh) + "; ++i)\n"
        "#pragma unroll\n"
        "    for (int q = 0; q < 4; ++q)\n"
        "      if (live && bh * " + S(TH) + " + ty * " + S(rh) + " + i < " + S(H) +
        " && ow + q < " + S(W) + ") {\n"
        "        const float v = " + value + ";\n";
    body += "  __shared__ float sh[" + S(threads) + "];\n"
            "  const int n = " + clip(TD, D, "bd * " + S(TD)) + " * " +
            clip(TH, H, "bh * " + S(TH)) + " * " + clip(TW, W, "bw * " + S(TW)) + ";\n"
            "  float sum = 0.0f;\n" + each + "        sum += v;\n      }\n"
            "  const float shift = blockSum(sum, sh) / (float)n; // the chunk's first mean\n"
            "  float d1 = 0.0f, d2 = 0.0f;\n" + each +
            "        const float dv = v - shift;\n        d1 += dv;\n        d2 += dv * dv;\n"
            "      }\n"
            "  d1 = blockSum(d1, sh);\n  d2 = blockSum(d2, sh);\n"
            "  if (t == 0) {\n"
            "    const i64 o = blockIdx.x; // the chunk's index: tiles run in chunk order\n"
            "    parts[3 * o] = shift;\n"
            "    parts[3 * o + 1] = d1 / (float)n;\n"
            "    parts[3 * o + 2] = fmaxf(0.0f, d2 - d1 * d1 / (float)n);\n  }\n";
  }
  std::vector<std::string> params{out("y"), in("x"), in("w")};
  std::vector<int> args{y, x, w};
  if (b) {
    params.push_back(in("bias"));
    args.push_back(*b);
  }
  if (stats) {
    params.push_back(out("parts"));
    args.push_back(parts);
  }
  const std::string outType = elemType(y);
  size_t at;
  while ((at = body.find("Vec<OUT, 4>")) != std::string::npos)
    body.replace(at, 11, "Vec<" + outType + ", 4>");
  const std::string base = std::string(mirrored ? "shift_sum_mirrored_tile" : "shift_sum_tile") +
                           (stats ? "_stats" : "");
  launch(op, src.kernel(base, typed(params, args), body, threads), blocks, threads, args);
  return stats ? TileEmitted::WithStatistics : TileEmitted::Plain;
}

// The weight gradient of a shift-sum as a split reduction (the header says how).
void FunctionGen::shiftSumGradWeight(const Op &op) {
  const int x = op.single("input"), dy = op.single("grad_output"), dw = result(op);
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
  if (D * H * W >= (int64_t{1} << 31) - 65536 || pairs > 512)
    return convGradWeight(op); // beyond 32-bit channel offsets, or a thread per (kd, kh)
                               // pair would exceed 512 threads: the generic split reduction
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
  // different rows at the same column hit different banks.
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
    else
      return convGradWeight(op); // does not fit: the generic split reduction
  }
  const int64_t G = groups(), TW = 4 * tw, threads = pairs * G;
  const int64_t Px = pitch(rowPitch(TW, kW)), Pg = pitch(TW);
  const int64_t SD = TD + kD - 1, SH = TH + kH - 1, rows = TD * TH;
  const int64_t nW = (W + TW - 1) / TW, nH = (H + TH - 1) / TH, nDt = (D + TD - 1) / TD;
  // Runs of D tiles per block: about 4096 blocks in all, each at least one tile.
  const int64_t base = N * C * nH * nW;
  const int64_t run = std::max<int64_t>(1, nDt / ((4096 + base - 1) / base));
  const int64_t runs = (nDt + run - 1) / run;
  const int64_t perNC = nH * nW * runs, parts = N * perNC, DHW = D * H * W;
  const int buf = scratch(C * kVol * parts * 4);
  const int64_t chunks = TW / 4, extra = (kW + 2) / 4; // chunks of x beyond a chunk of dy

  std::string body =
      "  const int t = threadIdx.x;\n"
      "  int r = blockIdx.x;\n"
      "  const int part = r % " + S(perNC) + ", nc = r / " + S(perNC) + ";\n"
      "  const int bw = part % " + S(nW) + ", bh = part / " + S(nW) + " % " + S(nH) +
      ", run = part / " + S(nW * nH) + ";\n"
      "  const int n = nc / " + S(C) + ", c = nc % " + S(C) + ";\n"
      "  __shared__ Vec<float, 4> sx[" + S(SD * SH * Px / 4) + "];\n"
      "  __shared__ Vec<float, 4> sg[" + S(rows * Pg / 4) + "];\n"
      "  __shared__ float red[" + S(kVol * G) + "];\n"
      "  const auto* xc = x + (i64)nc * " + S(DHW) + ";\n"
      "  const auto* gc = dy + (i64)nc * " + S(DHW) + ";\n"
      "  const int pair = t % " + S(pairs) + ", g = t / " + S(pairs) + ";\n"
      "  const int kd = pair / " + S(kH) + ", kh = pair % " + S(kH) + ";\n"
      "  float acc[" + S(kW) + "];\n"
      "#pragma unroll\n"
      "  for (int k = 0; k < " + S(kW) + "; ++k) acc[k] = 0.0f;\n"
      "  for (int bd = run * " + S(run) + "; bd < run * " + S(run) + " + " + S(run) + " && bd < " +
      S(nDt) + "; ++bd) {\n"
      "    __syncthreads(); // the previous tile is read\n"
      "    {\n"
      "      // The tile's input origin: its first output less the halo.\n"
      "      const int dIn = bd * " + S(TD) + " - " + S(kD / 2) + ", hIn = bh * " + S(TH) +
      " - " + S(kH / 2) + ", wIn = bw * " + S(TW) + " - " + S(kW / 2) + ";\n" +
      stage("sx", "xc", SD, SH, (TW + kW + 2) / 4, Px, D, H, W, threads) +
      "    }\n"
      "    {\n"
      "      const int dIn = bd * " + S(TD) + ", hIn = bh * " + S(TH) + ", wIn = bw * " + S(TW) +
      ";\n" +
      stage("sg", "gc", TD, TH, TW / 4, Pg, D, H, W, threads) +
      "    }\n"
      "    __syncthreads();\n"
      "    for (int row = g; row < " + S(rows) + "; row += " + S(G) + ") {\n"
      "      const int rd = row / " + S(TH) + ", rhh = row % " + S(TH) + ";\n"
      "      const Vec<float, 4>* xr = sx + ((rd + kd) * " + S(SH) + " + rhh + kh) * " +
      S(Px / 4) + ";\n"
      "      const Vec<float, 4>* gr = sg + row * " + S(Pg / 4) + ";\n"
      "      float win[" + S(4 * (extra + 1)) + "];\n"
      "#pragma unroll\n"
      "      for (int v = 0; v < " + S(extra) + "; ++v)\n"
      "#pragma unroll\n"
      "        for (int q = 0; q < 4; ++q) win[4 * v + q] = xr[v][q];\n"
      "#pragma unroll\n"
      "      for (int cw = 0; cw < " + S(chunks) + "; ++cw) { // 4 outputs: x[4cw, 4cw + 4 + kW - 1)\n"
      "        const Vec<float, 4> x4 = xr[cw + " + S(extra) + "], g4 = gr[cw];\n"
      "#pragma unroll\n"
      "        for (int q = 0; q < 4; ++q) win[" + S(4 * extra) + " + q] = x4[q];\n"
      "#pragma unroll\n"
      "        for (int q = 0; q < 4; ++q)\n"
      "#pragma unroll\n"
      "          for (int k = 0; k < " + S(kW) + "; ++k) acc[k] += g4[q] * win[q + k];\n"
      "#pragma unroll\n"
      "        for (int j = 0; j < " + S(4 * extra) + "; ++j) win[j] = win[j + 4];\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "  // Each tap's partials of the block, combined in a fixed order.\n"
      "#pragma unroll\n"
      "  for (int k = 0; k < " + S(kW) + "; ++k) red[(pair * " + S(kW) + " + k) * " + S(G) +
      " + g] = acc[k];\n"
      "  __syncthreads();\n"
      "  for (int tap = t; tap < " + S(kVol) + "; tap += " + S(threads) + ") {\n"
      "    float v = 0.0f;\n"
      "    for (int gg = 0; gg < " + S(G) + "; ++gg) v += red[tap * " + S(G) + " + gg];\n"
      "    parts[((i64)c * " + S(kVol) + " + tap) * " + S(parts) + " + n * " + S(perNC) +
      " + part] = v;\n"
      "  }\n";
  launch(op, src.kernel("shift_sum_grad_weight_parts",
                        typed({out("parts"), in("x"), in("dy")}, {buf, x, dy}), body,
                        static_cast<int>(threads)),
         N * C * perNC, static_cast<int>(threads), {buf, x, dy});
  // The same kernel (name and code) as the generic depthwise weight gradient's sum.
  sumParts(op, "dwconv_grad_weight_sum", "dw", dw, buf, 0, type(dw).numel(), parts);
}

void FunctionGen::registerStencil(Emitters &e) {
  e["shift_sum"] = [](FunctionGen &g, const Op &op) { g.shiftSum(op); };
  e["shift_sum_grad_weight"] = [](FunctionGen &g, const Op &op) { g.shiftSumGradWeight(op); };
}

} // namespace mlir::med::cuda
