// The shift-sum kernels (stride-1 depthwise stencils; Stencil.cpp chooses the kernels,
// Fusion/Stencil.cpp the `stencil` fusion): med.shift_sum forward and `mirrored`, with an
// epilogue that may keep group-norm statistics, and med.shift_sum_grad_weight's split
// reduction.
//
// Every shape, tile size and kernel size is a template argument, so the compiler sees the
// same constants as in a kernel written out for one shape. The generator emits, per kernel,
// the epilogue functor (what the fusion's body does with each output: add the bias, store
// the tile's statistics) and an `extern "C" __global__` wrapper with the kernel's name and
// parameters that calls the template. A wrapper rather than NVRTC name expressions: the CPU
// emulation (test/cuda/emu.h) compiles the same source as host C++ and finds kernels by
// their unmangled names.
//
//  * shiftSumTile: one block per (sample, channel) and output tile of TD slices × TH rows ×
//    TW columns. The block stages the tile's input plus halo in shared memory once, as f32
//    (16-bit storage is read as such and converted there, four consecutive elements per
//    thread: coalesced along W), and its channel's k³ weights (reversed for `mirrored`:
//    reversing the flat tap index flips all three axes). Each thread computes 4
//    neighbouring outputs along W in each of RH rows: per slice kd and input row it loads
//    its window of 4 + kW - 1 inputs with 16-byte shared loads (consecutive threads read
//    consecutive 16-byte chunks: no bank conflicts) and feeds every output row and tap that
//    uses it from registers. Each output sums its taps in the generic kernel's order (kd,
//    kh, kw), in f32, then the epilogue adds the bias. With statistics (the tile is a chunk
//    of medrun/NormStats.h) the block also reduces the tile's f32 outputs in registers to
//    the chunk's first mean (the pivot) and the deviations from it, as the
//    group_norm_chunks kernel, and the epilogue stores them.
//  * shiftSumRegs (MEDC_STENCIL=registers; `parity` and `tiles` emit shiftSumTile): the same
//    tiles and epilogue, with register tiling along W: each thread computes 8 outputs along
//    W (4 on a narrow row) in each of RH rows from a window of 8 + kW − 1 inputs per input row in
//    registers, and the staged rows start aligned so that the block stages whole 16-byte
//    (or 8-byte) global vectors where W allows. Each output sums its taps in the same
//    order: the same bits as shiftSumTile.
//  * shiftSumGradWeightParts: a split reduction. A block owns one (sample, channel), an H×W
//    tile column and a run of D tiles; per tile it stages x (with halo) and dy in shared
//    memory. Thread (kd, kh, g) owns the kW taps of one (kd, kh) pair for rows g, g + G, …
//    of the tile and slides along W: per 4 outputs one 16-byte load of dy and one of x feed
//    4·kW multiply-adds from registers. The block combines each tap's G partials in a fixed
//    order into one partial per block; a second kernel (the generic depthwise weight
//    gradient's) sums each weight's partials in a fixed tree. No float atomics: the same
//    bits on every run.
//  * MEDC_STENCIL=rows (the default) streams instead of staging where a thread's sums and
//    rows fit its registers (k3; larger kernels take the kernels above): shiftSumRows (the
//    shift-sums without statistics), shiftSumChunks (with them, a block per band of the
//    statistics' chunks) and shiftSumGradWeightRows (the same partials as
//    shiftSumGradWeightParts): each thread walks the rows of its part of H with 8 outputs
//    along W and keeps its sums, and the rows they read, in registers (the functions say how).
//
// Each kernel's shared memory is static (the tile sizes are chosen to fit 48 KiB).
#ifndef MED_KERNELS_STENCIL_CUH
#define MED_KERNELS_STENCIL_CUH

// Floats per staged row: TW outputs need TW + KW - 1 inputs, read in 16-byte chunks of which
// a thread's last may run past them (4·(chunks per window) − 4 beyond TW).
constexpr int stencilRowPitch(int TW, int KW) { return TW + 4 * ((KW + 2) / 4); }

// Whether a stored type is f32 (the tail stores keep NVRTC's order of operations for f32
// and for the 16-bit types' operator=, so that the machine code is that of a kernel written
// out for one type).
template <typename T> struct IsFloat { enum : bool { value = false }; };
template <> struct IsFloat<float> { enum : bool { value = true }; };

// A shift-sum's output v at element i of the output, plus the residual's addend there where
// the epilogue has one (E::kAddend: a `stencil` fusion's residual), in f32 before the one
// rounding of the store.
template <class E> float withAddend(const E &e, float v, i64 i) {
  if constexpr (E::kAddend)
    return v + (float)e.addend[i];
  else
    return v;
}

// Stages the input region of SD slices × SH rows × 4·LEN columns starting at (dIn, hIn, wIn)
// of one D×H×W channel `src` into shared `dst` (rows of P floats, a multiple of 4): four
// consecutive elements of a row per thread `t` and step (coalesced along W), converted to
// f32, zero outside the volume. A macro rather than a function: LLVM simplifies a function
// on its own before inlining it, and some tiles' staging loops then unroll differently from
// the same loop written in the kernel (their PTX changed); the kernels keep the code of the
// kernels written out per shape.
#define MED_STENCIL_STAGE(dst, src, SD, SH, LEN, P, D, H, W, THREADS)                       \
  for (int q = t; q < (SD) * (SH) * (LEN); q += (THREADS)) {                                \
    const int qw = q % (LEN), rr = q / (LEN);                                               \
    const int id = dIn + rr / (SH), ih = hIn + rr % (SH), iw = wIn + 4 * qw;                \
    const bool inside = (unsigned)id < (unsigned)(D) && (unsigned)ih < (unsigned)(H);       \
    const int at = (id * (H) + ih) * (W) + iw;                                              \
    Vec<float, 4> v;                                                                        \
    _Pragma("unroll") for (int i = 0; i < 4; ++i)                                           \
      v[i] = inside && (unsigned)(iw + i) < (unsigned)(W) ? (float)(src)[at + i] : 0.0f;    \
    (dst)[rr * ((P) / 4) + qw] = v;                                                         \
  }

// The forward tile: C channels of D×H×W, a KD×KH×KW kernel, TX threads along W (4 outputs
// each), TY along H (RH rows each) and TZ along D (one slice each).
template <int C_, int D_, int H_, int W_, int KD_, int KH_, int KW_, int TX_, int TY_, int TZ_,
          int RH_>
struct ShiftSumTile {
  // Enumerators rather than static data members: constants without storage in the module.
  enum : int {
    C = C_, D = D_, H = H_, W = W_, KD = KD_, KH = KH_, KW = KW_,
    TX = TX_, TY = TY_, TZ = TZ_, RH = RH_, THREADS = TX * TY * TZ,
    TW = 4 * TX, TH = TY * RH, TD = TZ, P = stencilRowPitch(TW, KW),
    SD = TD + KD - 1, SH = TH + KH - 1, // staged slices and rows
    NW = (W + TW - 1) / TW, NH = (H + TH - 1) / TH, ND = (D + TD - 1) / TD,
    KHW = KH * KW, KVOL = KD * KHW, DHW = D * H * W,
    NVEC = (KW + 6) / 4, // 16-byte chunks per window of 4 + KW - 1
    // Whole 4-output groups are stored as one vector where rows are 4-element aligned.
    VEC_STORE = W % 4 == 0
  };
};

// The shift-sum of one tile (the header says how): MIRRORED reverses the taps; the
// epilogue functor E gives each output's value from its sum (`e.channel(c)` first, then
// `e(acc)`) and, where E::kStatistics, stores the tile's statistics
// (`e.statistics(chunk, n, pivot, dev sum, dev² sum)`; tiles run in chunk order).
template <class T, bool MIRRORED, class E, typename OUT, typename IN, typename WT>
void shiftSumTile(OUT *__restrict__ y, const IN *__restrict__ x, const WT *__restrict__ w, E e) {
  constexpr bool STATS = E::kStatistics;
  static_assert(!(STATS && E::kAddend), "an addend or statistics");
  const int t = threadIdx.x;
  int r = blockIdx.x;
  const int bw = r % T::NW; r /= T::NW;
  const int bh = r % T::NH; r /= T::NH;
  const int bd = r % T::ND, nc = r / T::ND, c = nc % T::C;
  __shared__ Vec<float, 4> sx[T::SD * T::SH * T::P / 4];
  __shared__ float ws[T::KVOL];
  const auto* xc = x + (i64)nc * T::DHW;
  for (int j = t; j < T::KVOL; j += T::THREADS)
    if constexpr (MIRRORED)
      ws[j] = (float)w[c * T::KVOL + (T::KVOL - 1) - j]; // taps reversed
    else
      ws[j] = (float)w[c * T::KVOL + j];
  // The tile's input origin: its first output less the halo.
  const int dIn = bd * T::TD - T::KD / 2, hIn = bh * T::TH - T::KH / 2, wIn = bw * T::TW - T::KW / 2;
  MED_STENCIL_STAGE(sx, xc, T::SD, T::SH, T::P / 4, T::P, T::D, T::H, T::W, T::THREADS)
  __syncthreads();
  const int tx = t % T::TX, ty = t / T::TX % T::TY, tz = t / (T::TX * T::TY);
  const float* s = &sx[0][0] + (tz * T::SH + ty * T::RH) * T::P + 4 * tx;
  float acc[T::RH][4];
#pragma unroll
  for (int i = 0; i < T::RH; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[i][q] = 0.0f;
#pragma unroll
  for (int kd = 0; kd < T::KD; ++kd) {
    float wk[T::KHW];
#pragma unroll
    for (int j = 0; j < T::KHW; ++j) wk[j] = ws[kd * T::KHW + j];
#pragma unroll
    for (int ir = 0; ir < T::RH + T::KH - 1; ++ir) { // input row: feeds rows ir - kh
      float win[4 * T::NVEC];
#pragma unroll
      for (int v = 0; v < T::NVEC; ++v) {
        const Vec<float, 4> q4 = *reinterpret_cast<const Vec<float, 4>*>(s + (kd * T::SH + ir) * T::P + 4 * v);
#pragma unroll
        for (int q = 0; q < 4; ++q) win[4 * v + q] = q4[q];
      }
#pragma unroll
      for (int i = 0; i < T::RH; ++i) {
        const int kh = ir - i;
        if (kh < 0 || kh >= T::KH) continue;
#pragma unroll
        for (int kw = 0; kw < T::KW; ++kw)
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[i][q] += wk[kh * T::KW + kw] * win[q + kw];
      }
    }
  }
  const int od = bd * T::TD + tz, ow = bw * T::TW + 4 * tx;
  const bool live = od < T::D; // with statistics every thread takes part in the block's sums
  if constexpr (!STATS)
    if (!live) return;
  e.channel(c);
  auto* yc = y + (i64)nc * T::DHW;
  if (STATS ? live : true) {
#pragma unroll
    for (int i = 0; i < T::RH; ++i) {
      const int oh = bh * T::TH + ty * T::RH + i;
      if (oh >= T::H) break;
      const int at = (od * T::H + oh) * T::W + ow;
      if constexpr (T::VEC_STORE)
        if (ow + 4 <= T::W) {
          Vec<OUT, 4> v;
#pragma unroll
          for (int q = 0; q < 4; ++q) v[q] = withAddend(e, e(acc[i][q]), (yc - y) + at + q);
          vstore(yc + at, v);
          continue;
        }
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (ow + q < T::W) {
          if constexpr (IsFloat<OUT>::value) {
            yc[at + q] = withAddend(e, e(acc[i][q]), (yc - y) + at + q);
          } else { // bf16/f16's operator=: the element's address first, as NVRTC orders it
            OUT &o = yc[at + q];
            o = withAddend(e, e(acc[i][q]), (yc - y) + at + q);
          }
        }
    }
  }
  if constexpr (STATS) {
    // The tile's chunk of the statistics, from the f32 outputs in registers: its first mean
    // (the pivot), then the deviations from it, as the group_norm_chunks kernel.
    __shared__ float sh[T::THREADS];
    const int n = (T::D - bd * T::TD < T::TD ? T::D - bd * T::TD : T::TD) *
                  (T::H - bh * T::TH < T::TH ? T::H - bh * T::TH : T::TH) *
                  (T::W - bw * T::TW < T::TW ? T::W - bw * T::TW : T::TW);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < T::RH; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (live && bh * T::TH + ty * T::RH + i < T::H && ow + q < T::W) {
          const float v = e(acc[i][q]);
          sum += v;
        }
    const float shift = blockSum(sum, sh) / (float)n; // the chunk's first mean
    float d1 = 0.0f, d2 = 0.0f;
#pragma unroll
    for (int i = 0; i < T::RH; ++i)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (live && bh * T::TH + ty * T::RH + i < T::H && ow + q < T::W) {
          const float v = e(acc[i][q]);
          const float dv = v - shift;
          d1 += dv;
          d2 += dv * dv;
        }
    d1 = blockSum(d1, sh);
    d2 = blockSum(d2, sh);
    if (t == 0)
      e.statistics(blockIdx.x, n, shift, d1, d2); // the chunk's index: tiles run in chunk order
  }
}

// ---- register-tiled forward and mirrored shift-sum (the default; MEDC_STENCIL) ---------------

// The register-tiled tile: C channels of D×H×W, a KD×KH×KW kernel read as IN (V elements
// per global vector: 4 for f32, 8 for bf16/f16, or 4 where 16 bytes' halo does not fit
// shared memory), TX threads along W (RW outputs each,
// a multiple of 4), TY along H (RH rows each) and TZ along D (one slice each).
//
// The staged rows start V-aligned (HALO columns, KW/2 rounded up to V, before the tile's
// first output) so that a row is staged as whole global vectors where W is a
// multiple of V; the thread's window of RW + KW − 1 inputs then starts A floats into its
// first 16-byte shared chunk (A = (HALO − KW/2) mod 4, a constant).
template <int C_, int D_, int H_, int W_, int KD_, int KH_, int KW_, int TX_, int TY_, int TZ_,
          int RH_, int RW_, int V_>
struct ShiftSumRegTile {
  enum : int {
    C = C_, D = D_, H = H_, W = W_, KD = KD_, KH = KH_, KW = KW_,
    TX = TX_, TY = TY_, TZ = TZ_, RH = RH_, RW = RW_, V = V_, THREADS = TX * TY * TZ,
    TW = RW * TX, TH = TY * RH, TD = TZ,
    HALO = (KW / 2 + V - 1) / V * V,   // staged columns before the tile's first output
    OFF = HALO - KW / 2,               // shared column of the first output's first input
    A = OFF % 4, B = OFF - A,          // the window: A floats into the chunk at column B
    NCH = (A + RW + KW - 1 + 3) / 4,   // 16-byte shared chunks per window
    // Staged columns: the last thread's window, and the tile's inputs, in whole vectors.
    LAST = B + RW * (TX - 1) + 4 * NCH, NEED = HALO + TW + KW / 2,
    P = ((LAST > NEED ? LAST : NEED) + V - 1) / V * V,
    SD = TD + KD - 1, SH = TH + KH - 1, // staged slices and rows
    NW = (W + TW - 1) / TW, NH = (H + TH - 1) / TH, ND = (D + TD - 1) / TD,
    KHW = KH * KW, KVOL = KD * KHW, DHW = D * H * W,
    // Vector loads where every staged vector is wholly inside or outside a row.
    VEC_LOAD = W % V == 0 && TW % V == 0,
    VEC_STORE = W % 4 == 0 // whole 4-output groups stored as one vector
  };
  static_assert(RW % 4 == 0 && P % 4 == 0 && (V == 4 || V == 8), "the tile's vectors");
};

// The shift-sum of one tile with RW outputs per thread along W and RH rows (the header of
// shiftSumTile says what the epilogue functor E does; the taps are summed in the same
// order, kd, kh, kw, so each output has the same bits as that kernel's).
template <class T, bool MIRRORED, class E, typename OUT, typename IN, typename WT>
void shiftSumRegs(OUT *__restrict__ y, const IN *__restrict__ x, const WT *__restrict__ w, E e) {
  constexpr bool STATS = E::kStatistics;
  static_assert(!(STATS && E::kAddend), "an addend or statistics");
  static_assert(sizeof(IN) * T::V <= 16, "V elements of the input per vector of at most 16 bytes");
  const int t = threadIdx.x;
  int r = blockIdx.x;
  const int bw = r % T::NW; r /= T::NW;
  const int bh = r % T::NH; r /= T::NH;
  const int bd = r % T::ND, nc = r / T::ND, c = nc % T::C;
  __shared__ Vec<float, 4> sx[T::SD * T::SH * T::P / 4];
  __shared__ float ws[T::KVOL];
  const auto* xc = x + (i64)nc * T::DHW;
  for (int j = t; j < T::KVOL; j += T::THREADS)
    if constexpr (MIRRORED)
      ws[j] = (float)w[c * T::KVOL + (T::KVOL - 1) - j]; // taps reversed
    else
      ws[j] = (float)w[c * T::KVOL + j];
  // The staged region's origin: the tile's first output less the halo (V-aligned along W).
  const int dIn = bd * T::TD - T::KD / 2, hIn = bh * T::TH - T::KH / 2;
  const int wIn = bw * T::TW - T::HALO;
  if constexpr (T::VEC_LOAD) {
    // One vector of V inputs per thread and step, converted to V/4 shared chunks.
    constexpr int LEN = T::P / T::V;
    for (int q = t; q < T::SD * T::SH * LEN; q += T::THREADS) {
      const int qw = q % LEN, rr = q / LEN;
      const int id = dIn + rr / T::SH, ih = hIn + rr % T::SH, iw = wIn + T::V * qw;
      Vec<float, 4>* dst = sx + rr * (T::P / 4) + qw * (T::V / 4);
      if ((unsigned)id < (unsigned)T::D && (unsigned)ih < (unsigned)T::H &&
          (unsigned)iw < (unsigned)T::W) {
        const Vec<IN, T::V> in = vload<T::V>(xc + (id * T::H + ih) * T::W + iw);
#pragma unroll
        for (int k = 0; k < T::V / 4; ++k) {
          Vec<float, 4> v;
#pragma unroll
          for (int i = 0; i < 4; ++i) v[i] = (float)in[4 * k + i];
          dst[k] = v;
        }
      } else {
#pragma unroll
        for (int k = 0; k < T::V / 4; ++k) {
          Vec<float, 4> v;
#pragma unroll
          for (int i = 0; i < 4; ++i) v[i] = 0.0f;
          dst[k] = v;
        }
      }
    }
  } else {
    // Rows not V-aligned: four elements per thread and step, each tested.
    constexpr int LEN = T::P / 4;
    for (int q = t; q < T::SD * T::SH * LEN; q += T::THREADS) {
      const int qw = q % LEN, rr = q / LEN;
      const int id = dIn + rr / T::SH, ih = hIn + rr % T::SH, iw = wIn + 4 * qw;
      const bool inside = (unsigned)id < (unsigned)T::D && (unsigned)ih < (unsigned)T::H;
      const int at = (id * T::H + ih) * T::W + iw;
      Vec<float, 4> v;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        v[i] = inside && (unsigned)(iw + i) < (unsigned)T::W ? (float)xc[at + i] : 0.0f;
      sx[rr * (T::P / 4) + qw] = v;
    }
  }
  __syncthreads();
  const int tx = t % T::TX, ty = t / T::TX % T::TY, tz = t / (T::TX * T::TY);
  // The thread's window: RW outputs' inputs, from the 16-byte chunk at column B + RW·tx.
  const float* s = &sx[0][0] + (tz * T::SH + ty * T::RH) * T::P + T::B + T::RW * tx;
  float acc[T::RH][T::RW];
#pragma unroll
  for (int i = 0; i < T::RH; ++i)
#pragma unroll
    for (int q = 0; q < T::RW; ++q) acc[i][q] = 0.0f;
#pragma unroll
  for (int kd = 0; kd < T::KD; ++kd) {
    float wk[T::KHW];
#pragma unroll
    for (int j = 0; j < T::KHW; ++j) wk[j] = ws[kd * T::KHW + j];
#pragma unroll
    for (int ir = 0; ir < T::RH + T::KH - 1; ++ir) { // input row: feeds rows ir - kh
      // The row's window in registers (16-byte shared loads), reused by every output of
      // the row and every output row and tap that reads it.
      float win[4 * T::NCH];
#pragma unroll
      for (int v = 0; v < T::NCH; ++v) {
        const Vec<float, 4> q4 = *reinterpret_cast<const Vec<float, 4>*>(s + (kd * T::SH + ir) * T::P + 4 * v);
#pragma unroll
        for (int q = 0; q < 4; ++q) win[4 * v + q] = q4[q];
      }
#pragma unroll
      for (int i = 0; i < T::RH; ++i) {
        const int kh = ir - i;
        if (kh < 0 || kh >= T::KH) continue;
#pragma unroll
        for (int kw = 0; kw < T::KW; ++kw)
#pragma unroll
          for (int q = 0; q < T::RW; ++q) acc[i][q] += wk[kh * T::KW + kw] * win[T::A + q + kw];
      }
    }
  }
  const int od = bd * T::TD + tz, ow = bw * T::TW + T::RW * tx;
  const bool live = od < T::D; // with statistics every thread takes part in the block's sums
  if constexpr (!STATS)
    if (!live) return;
  e.channel(c);
  auto* yc = y + (i64)nc * T::DHW;
  if (STATS ? live : true) {
#pragma unroll
    for (int i = 0; i < T::RH; ++i) {
      const int oh = bh * T::TH + ty * T::RH + i;
      if (oh >= T::H) break;
      const int at = (od * T::H + oh) * T::W + ow;
#pragma unroll
      for (int g = 0; g < T::RW; g += 4) {
        if constexpr (T::VEC_STORE)
          if (ow + g + 4 <= T::W) {
            Vec<OUT, 4> v;
#pragma unroll
            for (int q = 0; q < 4; ++q) v[q] = withAddend(e, e(acc[i][g + q]), (yc - y) + at + g + q);
            vstore(yc + at + g, v);
            continue;
          }
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (ow + g + q < T::W) yc[at + g + q] = withAddend(e, e(acc[i][g + q]), (yc - y) + at + g + q);
      }
    }
  }
  if constexpr (STATS) {
    // The tile's chunk of the statistics, from the f32 outputs in registers: its first mean
    // (the pivot), then the deviations from it, as the group_norm_chunks kernel.
    __shared__ float sh[T::THREADS];
    const int n = (T::D - bd * T::TD < T::TD ? T::D - bd * T::TD : T::TD) *
                  (T::H - bh * T::TH < T::TH ? T::H - bh * T::TH : T::TH) *
                  (T::W - bw * T::TW < T::TW ? T::W - bw * T::TW : T::TW);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < T::RH; ++i)
#pragma unroll
      for (int q = 0; q < T::RW; ++q)
        if (live && bh * T::TH + ty * T::RH + i < T::H && ow + q < T::W) {
          const float v = e(acc[i][q]);
          sum += v;
        }
    const float shift = blockSum(sum, sh) / (float)n; // the chunk's first mean
    float d1 = 0.0f, d2 = 0.0f;
#pragma unroll
    for (int i = 0; i < T::RH; ++i)
#pragma unroll
      for (int q = 0; q < T::RW; ++q)
        if (live && bh * T::TH + ty * T::RH + i < T::H && ow + q < T::W) {
          const float v = e(acc[i][q]);
          const float dv = v - shift;
          d1 += dv;
          d2 += dv * dv;
        }
    d1 = blockSum(d1, sh);
    d2 = blockSum(d2, sh);
    if (t == 0)
      e.statistics(blockIdx.x, n, shift, d1, d2); // the chunk's index: tiles run in chunk order
  }
}

// ---- med.shift_sum_grad_weight ------------------------------------------------------------

// Floats per staged row of the weight gradient's tiles: an odd number of 16-byte chunks, so
// that threads reading different rows at the same column hit different banks.
constexpr int stencilOddPitch(int floats) { return (floats / 4) % 2 ? floats : floats + 4; }

// The weight gradient's tile: N samples of C channels of D×H×W, a KD×KH×KW kernel, output
// tiles of TD slices × TH rows × 4·TX columns, G groups of rows (threads: G per (kd, kh)
// pair), and runs of RUN D tiles per block.
template <int N_, int C_, int D_, int H_, int W_, int KD_, int KH_, int KW_, int TX_, int TH_,
          int TD_, int G_, int RUN_>
struct ShiftSumGradWeightTile {
  enum : int {
    N = N_, C = C_, D = D_, H = H_, W = W_, KD = KD_, KH = KH_, KW = KW_,
    TW = 4 * TX_, TH = TH_, TD = TD_, G = G_, RUN = RUN_,
    PAIRS = KD * KH, THREADS = PAIRS * G, KVOL = PAIRS * KW, DHW = D * H * W,
    PX = stencilOddPitch(stencilRowPitch(TW, KW)), PG = stencilOddPitch(TW),
    SD = TD + KD - 1, SH = TH + KH - 1, ROWS = TD * TH, // staged slices and rows; dy's rows
    NW = (W + TW - 1) / TW, NH = (H + TH - 1) / TH, NDT = (D + TD - 1) / TD,
    PERNC = NH * NW * ((NDT + RUN - 1) / RUN), PARTS = N * PERNC, // blocks per (n, c); in all
    CHUNKS = TW / 4, EXTRA = (KW + 2) / 4 // chunks of x beyond a chunk of dy
  };
};

// The weight gradient's first kernel (the header says how): each block's partial
// of every tap, at parts[(c · KVOL + tap) · PARTS + n · PERNC + block's part]. VEC_DY (the
// register-tiled kernels' choice): where W is a multiple of 4, dy's tile, which starts
// 4-aligned, is staged as vectors of 4 (the same values: the same bits).
template <class T, bool VEC_DY = false, typename IN, typename GT>
void shiftSumGradWeightParts(float *__restrict__ parts, const IN *__restrict__ x,
                             const GT *__restrict__ dy) {
  const int t = threadIdx.x;
  int r = blockIdx.x;
  const int part = r % T::PERNC, nc = r / T::PERNC;
  const int bw = part % T::NW, bh = part / T::NW % T::NH, run = part / (T::NW * T::NH);
  const int n = nc / T::C, c = nc % T::C;
  __shared__ Vec<float, 4> sx[T::SD * T::SH * T::PX / 4];
  __shared__ Vec<float, 4> sg[T::ROWS * T::PG / 4];
  __shared__ float red[T::KVOL * T::G];
  const auto* xc = x + (i64)nc * T::DHW;
  const auto* gc = dy + (i64)nc * T::DHW;
  const int pair = t % T::PAIRS, g = t / T::PAIRS;
  const int kd = pair / T::KH, kh = pair % T::KH;
  float acc[T::KW];
#pragma unroll
  for (int k = 0; k < T::KW; ++k) acc[k] = 0.0f;
  for (int bd = run * T::RUN; bd < run * T::RUN + T::RUN && bd < T::NDT; ++bd) {
    __syncthreads(); // the previous tile is read
    {
      // The tile's input origin: its first output less the halo.
      const int dIn = bd * T::TD - T::KD / 2, hIn = bh * T::TH - T::KH / 2, wIn = bw * T::TW - T::KW / 2;
      MED_STENCIL_STAGE(sx, xc, T::SD, T::SH, (T::TW + T::KW + 2) / 4, T::PX, T::D, T::H, T::W,
                        T::THREADS)
    }
    if constexpr (VEC_DY && T::W % 4 == 0) {
      // Four consecutive dy per thread and step, one vector load: wholly inside or outside.
      for (int q = t; q < T::ROWS * T::CHUNKS; q += T::THREADS) {
        const int qw = q % T::CHUNKS, rr = q / T::CHUNKS;
        const int id = bd * T::TD + rr / T::TH, ih = bh * T::TH + rr % T::TH, iw = bw * T::TW + 4 * qw;
        Vec<float, 4> v;
        if ((unsigned)id < (unsigned)T::D && (unsigned)ih < (unsigned)T::H &&
            (unsigned)iw < (unsigned)T::W) {
          const Vec<GT, 4> g4 = vload<4>(gc + (id * T::H + ih) * T::W + iw);
#pragma unroll
          for (int i = 0; i < 4; ++i) v[i] = (float)g4[i];
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) v[i] = 0.0f;
        }
        sg[rr * (T::PG / 4) + qw] = v;
      }
    } else {
      const int dIn = bd * T::TD, hIn = bh * T::TH, wIn = bw * T::TW;
      MED_STENCIL_STAGE(sg, gc, T::TD, T::TH, T::TW / 4, T::PG, T::D, T::H, T::W, T::THREADS)
    }
    __syncthreads();
    for (int row = g; row < T::ROWS; row += T::G) {
      const int rd = row / T::TH, rhh = row % T::TH;
      const Vec<float, 4>* xr = sx + ((rd + kd) * T::SH + rhh + kh) * (T::PX / 4);
      const Vec<float, 4>* gr = sg + row * (T::PG / 4);
      float win[4 * (T::EXTRA + 1)];
#pragma unroll
      for (int v = 0; v < T::EXTRA; ++v)
#pragma unroll
        for (int q = 0; q < 4; ++q) win[4 * v + q] = xr[v][q];
#pragma unroll
      for (int cw = 0; cw < T::CHUNKS; ++cw) { // 4 outputs: x[4cw, 4cw + 4 + kW - 1)
        const Vec<float, 4> x4 = xr[cw + T::EXTRA], g4 = gr[cw];
#pragma unroll
        for (int q = 0; q < 4; ++q) win[4 * T::EXTRA + q] = x4[q];
#pragma unroll
        for (int q = 0; q < 4; ++q)
#pragma unroll
          for (int k = 0; k < T::KW; ++k) acc[k] += g4[q] * win[q + k];
#pragma unroll
        for (int j = 0; j < 4 * T::EXTRA; ++j) win[j] = win[j + 4];
      }
    }
  }
  // Each tap's partials of the block, combined in a fixed order.
#pragma unroll
  for (int k = 0; k < T::KW; ++k) red[(pair * T::KW + k) * T::G + g] = acc[k];
  __syncthreads();
  for (int tap = t; tap < T::KVOL; tap += T::THREADS) {
    float v = 0.0f;
    for (int gg = 0; gg < T::G; ++gg) v += red[tap * T::G + gg];
    parts[((i64)c * T::KVOL + tap) * T::PARTS + n * T::PERNC + part] = v;
  }
}

// ---- shift-sums streamed along H (MEDC_STENCIL=rows, the default) --------------------------

// The streamed shift-sum's shapes: C channels of D×H×W, a KD×KH×KW kernel, VW outputs along W
// per thread (one 16-byte vector of the input; W a multiple of VW), GD output slices per
// block and HP parts of H.
template <int C_, int D_, int H_, int W_, int KD_, int KH_, int KW_, int VW_, int GD_, int HP_>
struct ShiftSumRowsTile {
  enum : int {
    C = C_, D = D_, H = H_, W = W_, KD = KD_, KH = KH_, KW = KW_, VW = VW_, GD = GD_, HP = HP_,
    GW = W / VW, THREADS = GW * GD, KHW = KH * KW, KVOL = KD * KHW, DHW = D * H * W,
    ND = (D + GD - 1) / GD, HR = (H + HP - 1) / HP, PERNC = ND * HP, WIN = VW + KW - 1
  };
  static_assert(W % VW == 0, "whole vectors along W");
};

// The streamed shift-sum with statistics: blocks of CD slices × CH rows × all of W, the
// chunks of medrun/NormStats.h (CD×CH×CW, clipped at the volume's end).
template <int C_, int D_, int H_, int W_, int KD_, int KH_, int KW_, int VW_, int CD_, int CH_,
          int CW_>
struct ShiftSumChunkTile {
  enum : int {
    C = C_, D = D_, H = H_, W = W_, KD = KD_, KH = KH_, KW = KW_, VW = VW_, CD = CD_, CH = CH_,
    CW = CW_, GW = W / VW, THREADS = GW * CD, KHW = KH * KW, KVOL = KD * KHW, DHW = D * H * W,
    ND = (D + CD - 1) / CD, NH = (H + CH - 1) / CH, NWC = (W + CW - 1) / CW, PER = ND * NH * NWC,
    WIN = VW + KW - 1
  };
  static_assert(W % VW == 0 && CW % VW == 0, "whole vectors along W and in a chunk");
};

// Row r of slice xd of one channel, the window of a thread's VW outputs from w0: VW + KW − 1
// inputs from w0 − KW/2 in f32, zero outside the volume (one vector and KW − 1 scalars).
template <class T, typename IN>
void streamedRow(float (&win)[T::WIN], const IN *__restrict__ xc, int xd, int r, int w0) {
  const bool inside = (unsigned)xd < (unsigned)T::D && (unsigned)r < (unsigned)T::H;
  const IN *row = xc + (xd * T::H + r) * T::W;
  if (inside) {
    const Vec<IN, T::VW> v = vload<T::VW>(row + w0);
#pragma unroll
    for (int i = 0; i < T::VW; ++i) win[T::KW / 2 + i] = (float)v[i];
  } else {
#pragma unroll
    for (int i = 0; i < T::VW; ++i) win[T::KW / 2 + i] = 0.0f;
  }
#pragma unroll
  for (int j = 0; j < T::KW / 2; ++j) {
    const int l = w0 - T::KW / 2 + j, rr = w0 + T::VW + j;
    win[j] = inside && l >= 0 ? (float)row[l] : 0.0f;
    win[T::KW / 2 + T::VW + j] = inside && rr < T::W ? (float)row[rr] : 0.0f;
  }
}

// The streamed shift-sum of one thread: VW outputs from w0 of slice d, output rows [h0, h0 +
// rows). Input row j of the walk (row h0 − KH/2 + j) adds, for each slice kd, its window
// times the taps (kd, kh, ·) to output row j − kh of the part: the KH output rows still open
// are sums in registers (slot (j − kh) % KH; the loop is unrolled KH times, so no sums move),
// and after the step output row j − KH + 1 is complete: `row(o, sums)` takes it. Each output
// sums its taps in (kh, kd, kw) order in f32. `ws`: the KVOL taps (shared memory).
template <class T, typename IN, class ROW>
void streamShiftSum(const float *ws, const IN *__restrict__ xc, int d, int h0, int rows, int w0,
                    ROW &&row) {
  float acc[T::KH][T::VW];
#pragma unroll
  for (int k = 0; k < T::KH; ++k)
#pragma unroll
    for (int q = 0; q < T::VW; ++q) acc[k][q] = 0.0f;
  const int steps = rows + T::KH - 1;
  for (int j0 = 0; j0 < steps; j0 += T::KH) {
#pragma unroll
    for (int s = 0; s < T::KH; ++s) {
      const int j = j0 + s;
      if (j < steps) {
#pragma unroll
        for (int kd = 0; kd < T::KD; ++kd) {
          float win[T::WIN];
          streamedRow<T>(win, xc, d + kd - T::KD / 2, h0 - T::KH / 2 + j, w0);
#pragma unroll
          for (int kh = 0; kh < T::KH; ++kh)
#pragma unroll
            for (int kw = 0; kw < T::KW; ++kw) {
              const float wk = ws[(kd * T::KH + kh) * T::KW + kw];
#pragma unroll
              for (int q = 0; q < T::VW; ++q) acc[(s - kh + T::KH) % T::KH][q] += wk * win[q + kw];
            }
        }
        // Output row j − KH + 1 is complete: handed on where it lies in the part, then reset.
        float (&done)[T::VW] = acc[(s + 1) % T::KH];
        const int o = j - T::KH + 1;
        if (o >= 0)
          row(o, done);
#pragma unroll
        for (int q = 0; q < T::VW; ++q) done[q] = 0.0f;
      }
    }
  }
}

// The channel's taps into shared `ws` (reversed for MIRRORED: all three axes flipped).
template <class T, bool MIRRORED, typename WT> void streamedTaps(float *ws, const WT *w, int c) {
  for (int j = threadIdx.x; j < T::KVOL; j += T::THREADS)
    ws[j] = (float)w[c * T::KVOL + (MIRRORED ? (T::KVOL - 1) - j : j)];
}

// The forward or mirrored shift-sum without statistics, streamed: thread (w, dd) of a block
// owns VW consecutive outputs along W of output slice d (the block's GD slices from its slab)
// over its part of H (streamShiftSum), and stores each complete row of them as one vector
// through the epilogue (`e.channel(c)`, then `e(sum)` per output). No staging; one barrier,
// after the taps.
//
// With E::kAddend (a `stencil` fusion's residual: the shift-sum plus another tensor of its
// shape, as a residual block's input gradient sums two paths) each stored vector adds the
// addend's vector at the same place (e.addend, of the output's type) in f32 before the one
// rounding: the shift-sum alone is never stored.
template <class T, bool MIRRORED, class E, typename OUT, typename IN, typename WT>
void shiftSumRows(OUT *__restrict__ y, const IN *__restrict__ x, const WT *__restrict__ w, E e) {
  static_assert(!E::kStatistics, "statistics: shiftSumChunks");
  const int t = threadIdx.x;
  const int r = blockIdx.x;
  const int part = r % T::PERNC, nc = r / T::PERNC, c = nc % T::C;
  const int hp = part % T::HP, slab = part / T::HP;
  const int d = slab * T::GD + t / T::GW, w0 = t % T::GW * T::VW;
  const int h0 = hp * T::HR, rows = h0 + T::HR < T::H ? T::HR : T::H - h0;
  __shared__ float ws[T::KVOL];
  streamedTaps<T, MIRRORED>(ws, w, c);
  __syncthreads();
  if (d >= T::D)
    return;
  e.channel(c);
  OUT *yc = y + (i64)nc * T::DHW + (d * T::H + h0) * T::W + w0;
  streamShiftSum<T>(ws, x + (i64)nc * T::DHW, d, h0, rows, w0, [&](int o, const float (&sums)[T::VW]) {
    Vec<OUT, T::VW> v;
    if constexpr (E::kAddend) {
      const auto a = vload<T::VW>(e.addend + (yc - y) + o * T::W);
#pragma unroll
      for (int q = 0; q < T::VW; ++q) v[q] = e(sums[q]) + (float)a[q];
    } else {
#pragma unroll
      for (int q = 0; q < T::VW; ++q) v[q] = e(sums[q]);
    }
    vstore(yc + o * T::W, v);
  });
}

// The streamed shift-sum with group-norm statistics: a block is the CD slices × CH rows of
// one band of chunks (medrun/NormStats.h), every chunk along W; threads and rows as in
// shiftSumRows. Each chunk's statistics pivot on the mean of its first output row (a block
// sum once that row is complete; the tiled kernel pivots on the chunk's mean, which a
// stream does not have before its end); each thread sums its outputs' deviations and their
// squares, and the block combines them per chunk in a fixed order: the chunk's (pivot, dev,
// M2) through `e.statistics(chunk, n, pivot, dev sum, dev² sum)`.
template <class T, bool MIRRORED, class E, typename OUT, typename IN, typename WT>
void shiftSumChunks(OUT *__restrict__ y, const IN *__restrict__ x, const WT *__restrict__ w, E e) {
  static_assert(E::kStatistics, "without statistics: shiftSumRows");
  static_assert(!E::kAddend, "an addend: shiftSumRows");
  const int t = threadIdx.x;
  int r = blockIdx.x;
  const int bh = r % T::NH;
  r /= T::NH;
  const int bd = r % T::ND, nc = r / T::ND, c = nc % T::C;
  const int wc = t % T::GW, dd = t / T::GW;
  const int d = bd * T::CD + dd, w0 = wc * T::VW, chunk = w0 / T::CW;
  const int h0 = bh * T::CH, rows = h0 + T::CH < T::H ? T::CH : T::H - h0;
  const int slices = T::D - bd * T::CD < T::CD ? T::D - bd * T::CD : T::CD;
  const bool live = d < T::D; // every thread takes part in the block's sums
  __shared__ float ws[T::KVOL];
  __shared__ float red[2][T::THREADS];
  __shared__ float pivots[T::NWC];
  streamedTaps<T, MIRRORED>(ws, w, c);
  __syncthreads();
  e.channel(c);
  // The threads of chunk k: slices dd, vectors [k·CW/VW, (k + 1)·CW/VW) within GW.
  auto combine = [&](const float *v, int k) {
    float sum = 0.0f;
    for (int i = 0; i < T::CD; ++i)
      for (int u = k * (T::CW / T::VW); u < (k + 1) * (T::CW / T::VW) && u < T::GW; ++u)
        sum += v[i * T::GW + u];
    return sum;
  };
  auto width = [](int k) { return T::W - k * T::CW < T::CW ? T::W - k * T::CW : T::CW; };
  OUT *yc = y + (i64)nc * T::DHW + (d * T::H + h0) * T::W + w0;
  float pivot = 0.0f, d1 = 0.0f, d2 = 0.0f;
  streamShiftSum<T>(ws, x + (i64)nc * T::DHW, d, h0, rows, w0, [&](int o, const float (&sums)[T::VW]) {
    float v[T::VW];
#pragma unroll
    for (int q = 0; q < T::VW; ++q) v[q] = e(sums[q]);
    if (live) {
      Vec<OUT, T::VW> out;
#pragma unroll
      for (int q = 0; q < T::VW; ++q) out[q] = v[q];
      vstore(yc + o * T::W, out);
    }
    if (o == 0) { // the same step for every thread of the block
      float first = 0.0f;
      if (live)
#pragma unroll
        for (int q = 0; q < T::VW; ++q) first += v[q];
      red[0][t] = first;
      __syncthreads();
      if (t < T::NWC)
        pivots[t] = combine(red[0], t) / (float)(slices * width(t));
      __syncthreads();
      pivot = pivots[chunk];
    }
    if (live)
#pragma unroll
      for (int q = 0; q < T::VW; ++q) {
        const float dv = v[q] - pivot;
        d1 += dv;
        d2 += dv * dv;
      }
  });
  red[0][t] = d1;
  red[1][t] = d2;
  __syncthreads();
  if (t < T::NWC)
    e.statistics((i64)nc * T::PER + (bd * T::NH + bh) * T::NWC + t, slices * rows * width(t),
                 pivots[t], combine(red[0], t), combine(red[1], t));
}

// ---- med.shift_sum_grad_weight streamed along H (MEDC_STENCIL=rows, the default) ----------

// The streamed weight gradient's shapes: N samples of C channels of D×H×W, a KD×KH×KW
// kernel, VW outputs along W per thread (one 16-byte vector of dy; W a multiple of VW), GD
// output slices per block and HP parts of H.
template <int N_, int C_, int D_, int H_, int W_, int KD_, int KH_, int KW_, int VW_, int GD_,
          int HP_>
struct ShiftSumGradWeightRowsTile {
  enum : int {
    N = N_, C = C_, D = D_, H = H_, W = W_, KD = KD_, KH = KH_, KW = KW_, VW = VW_, GD = GD_,
    HP = HP_, GW = W / VW, THREADS = GW * KD * GD, SLOTS = GW * GD,
    KVOL = KD * KH * KW,
    DHW = D * H * W, ND = (D + GD - 1) / GD, HR = (H + HP - 1) / HP, PERNC = ND * HP,
    PARTS = N * PERNC, WIN = VW + KW - 1
  };
  static_assert(W % VW == 0, "whole vectors along W");
};

// The streamed weight gradients' last step: once every thread has put its taps' sums into
// `red` (tap by tap, SLOTS a tap), each tap's sums combined in a fixed order into the block's
// partial at parts[(c · KVOL + tap) · PARTS + n · PERNC + part]. With BIAS, `red` holds one
// more row, the sums of dy (the bias gradient), whose partial goes after every tap's, at
// parts[(C · KVOL + c) · PARTS + n · PERNC + part].
template <class T, bool BIAS = false>
void combineTapSums(float *__restrict__ parts, const float *red, int c, int n, int part) {
  __syncthreads();
  for (int tap = threadIdx.x; tap < T::KVOL + (BIAS ? 1 : 0); tap += T::THREADS) {
    float v = 0.0f;
    for (int m = 0; m < T::SLOTS; ++m) v += red[tap * T::SLOTS + m];
    const i64 row = tap < T::KVOL ? (i64)c * T::KVOL + tap : (i64)T::C * T::KVOL + c;
    parts[row * T::PARTS + n * T::PERNC + part] = v;
  }
}

// The weight gradient with its partials in registers: thread (w, kd, dd) of a block owns the
// KH·KW taps of one kd for VW consecutive outputs along W of output slice d (the block's
// GD slices from its slab) and walks the rows of its part of H. Per row it loads one vector
// of dy and one row of x (slice d + kd − KD/2, row h + KH/2: a vector and its halo), keeps
// the KH rows its taps read in registers (a rolling window: the loop is unrolled KH times,
// so each row stays in its registers) and adds VW·KH·KW products. No shared memory and no
// barrier in the loop; x's rows are read by the block's KD threads of a slice and dy by its
// KD threads of an output, through the cache. The block then combines each tap's partials
// over its threads in a fixed order into parts[(c · KVOL + tap) · PARTS + n · PERNC + part]
// (the layout of shiftSumGradWeightParts, summed by the same second kernel). With BIAS (the
// `stencil_grad` fusion) it also sums dy, the bias gradient, from the dy it loads anyway:
// each thread over its outputs in order (every thread sums, the KD threads of an output
// alike; the kd = 0 thread's sum is kept), the block's in slot order (combineTapSums).
template <class T, bool BIAS = false, typename IN, typename GT>
void shiftSumGradWeightRows(float *__restrict__ parts, const IN *__restrict__ x,
                            const GT *__restrict__ dy) {
  const int t = threadIdx.x;
  const int r = blockIdx.x;
  const int part = r % T::PERNC, nc = r / T::PERNC;
  const int hp = part % T::HP, slab = part / T::HP;
  const int n = nc / T::C, c = nc % T::C;
  const int wc = t % T::GW, kd = t / T::GW % T::KD, dd = t / (T::GW * T::KD);
  const int d = slab * T::GD + dd, xd = d + kd - T::KD / 2, w0 = wc * T::VW;
  const int h0 = hp * T::HR, h1 = h0 + T::HR < T::H ? h0 + T::HR : T::H;
  __shared__ float red[(T::KVOL + (BIAS ? 1 : 0)) * T::SLOTS];
  const IN *xc = x + (i64)nc * T::DHW;
  const GT *gc = dy + (i64)nc * T::DHW;
  float acc[T::KH][T::KW];
  float bsum = 0.0f;
#pragma unroll
  for (int kh = 0; kh < T::KH; ++kh)
#pragma unroll
    for (int kw = 0; kw < T::KW; ++kw) acc[kh][kw] = 0.0f;
  if (d < T::D) {
    // Row h + kh − KH/2 of the window is in slot (s + kh) % KH at the loop's step s.
    float win[T::KH][T::WIN];
#pragma unroll
    for (int j = 0; j + 1 < T::KH; ++j) streamedRow<T>(win[j], xc, xd, h0 - T::KH / 2 + j, w0);
    for (int h = h0; h < h1; h += T::KH) {
#pragma unroll
      for (int s = 0; s < T::KH; ++s) {
        const int hh = h + s;
        if (hh < h1) {
          streamedRow<T>(win[(s + T::KH - 1) % T::KH], xc, xd, hh + T::KH / 2, w0);
          const Vec<GT, T::VW> g = vload<T::VW>(gc + (d * T::H + hh) * T::W + w0);
#pragma unroll
          for (int q = 0; q < T::VW; ++q) {
            const float gq = (float)g[q];
            if constexpr (BIAS)
              bsum += gq;
#pragma unroll
            for (int kh = 0; kh < T::KH; ++kh)
#pragma unroll
              for (int kw = 0; kw < T::KW; ++kw) acc[kh][kw] += gq * win[(s + kh) % T::KH][q + kw];
          }
        }
      }
    }
  }
  // Each tap's partials of the block, combined in a fixed order (slot = dd · GW + w).
#pragma unroll
  for (int kh = 0; kh < T::KH; ++kh)
#pragma unroll
    for (int kw = 0; kw < T::KW; ++kw)
      red[((kd * T::KH + kh) * T::KW + kw) * T::SLOTS + dd * T::GW + wc] = acc[kh][kw];
  if constexpr (BIAS)
    if (kd == 0)
      red[T::KVOL * T::SLOTS + dd * T::GW + wc] = bsum;
  combineTapSums<T, BIAS>(parts, red, c, n, part);
}

#undef MED_STENCIL_STAGE

#endif // MED_KERNELS_STENCIL_CUH
