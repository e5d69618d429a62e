// The strided depthwise transposed convolution by parity classes (transposedParity, below),
// and the generic depthwise weight gradient's first kernel (Conv.cpp's depthwiseGradWeight: any
// stride, padding and dilation, groups = C with one input channel each; the stride-1 case
// with padding k/2 is stencil.cuh's shiftSumGradWeightParts where its tiles fit).
//
// A split reduction over two kernels. This one gives each block one (channel, kd) pair, one
// sample and one part of the output positions: each thread sums dy·x for the kH·kW taps of
// that kd over a fixed strided subset of the positions (x read through the cache, each
// element by up to kH·kW neighbouring threads), and the block combines each tap in a fixed
// tree into a partial. The second (the generic split sum's) sums each weight's partials
// (samples × parts) in a fixed tree. Every input element is read about kD times instead of
// once per weight: the reads of the plain reduction (one block per weight over all
// positions) shrink by the kernel volume over kD.
//
// The generator emits an `extern "C" __global__` wrapper with the kernel's name and
// parameters that instantiates the template (the CPU emulation, test/cuda/emu.h, compiles
// the same source as host C++ and finds kernels by their unmangled names). Every shape is a
// template argument, in 64 bits as the sizes of a kernel written out per shape were, so that
// the compiler sees the same constants and the same integer types.
#ifndef MED_KERNELS_DEPTHWISE_CUH
#define MED_KERNELS_DEPTHWISE_CUH

// The shapes: N samples of C channels, input D×H×W, output gradient OD×OH×OW, a KD×KH×KW
// kernel with strides S*, padding P* and dilations L* per axis; PARTS_PER_SAMPLE parts of
// the output positions per (sample, channel). Index: the type of the position indices
// (int where every index fits in 32 bits).
template <typename Index, i64 N_, i64 C_, i64 D_, i64 H_, i64 W_, i64 OD_, i64 OH_, i64 OW_,
          i64 KD_, i64 KH_, i64 KW_, i64 SD_, i64 SH_, i64 SW_, i64 PD_, i64 PH_, i64 PW_,
          i64 LD_, i64 LH_, i64 LW_, i64 PARTS_PER_SAMPLE>
struct DepthwiseGradWeightShape {
  typedef Index I;
  // Enumerators rather than static data members: constants without storage in the module.
  enum : i64 {
    N = N_, C = C_, D = D_, H = H_, W = W_, OD = OD_, OH = OH_, OW = OW_,
    KD = KD_, KH = KH_, KW = KW_, SD = SD_, SH = SH_, SW = SW_, PD = PD_, PH = PH_, PW = PW_,
    LD = LD_, LH = LH_, LW = LW_, S = PARTS_PER_SAMPLE,
    KHW = KH * KW, DHW = D * H * W, ODHW = OD * OH * OW, PARTS = N * S
  };
};

// Each block's partial of the kH·kW taps of its kd: parts[((c · KD + kd) · KHW + k) · PARTS
// + n · S + part], with BLOCK threads.
template <class T, int BLOCK, typename IN, typename GT>
void depthwiseGradWeightParts(float *__restrict__ parts, const IN *__restrict__ x,
                              const GT *__restrict__ dy) {
  typedef typename T::I I;
  const int t = threadIdx.x;
  i64 r = blockIdx.x;
  const I s = r % T::S; r /= T::S;
  const I n = r % T::N; r /= T::N;
  const I kd = r % T::KD, c = r / T::KD;
  const auto* xc = x + ((i64)n * T::C + c) * T::DHW;
  const auto* gc = dy + ((i64)n * T::C + c) * T::ODHW;
  float acc[T::KHW];
  #pragma unroll
  for (int k = 0; k < T::KHW; ++k) acc[k] = 0.0f;
  for (I q = s * BLOCK + t; q < T::ODHW; q += T::S * BLOCK) {
    const I ow = q % T::OW, u = q / T::OW;
    const I oh = u % T::OH, od = u / T::OH;
    const I id = od * T::SD - T::PD + kd * T::LD;
    if (id < 0 || id >= T::D) continue;
    const float g = gc[q];
    #pragma unroll
    for (int kh = 0; kh < T::KH; ++kh) {
      const I ih = oh * T::SH - T::PH + kh * T::LH;
      if (ih < 0 || ih >= T::H) continue;
      #pragma unroll
      for (int kw = 0; kw < T::KW; ++kw) {
        const I iw = ow * T::SW - T::PW + kw * T::LW;
        if (iw >= 0 && iw < T::W)
          acc[kh * T::KW + kw] += g * (float)xc[(id * T::H + ih) * T::W + iw];
      }
    }
  }
  __shared__ float sh[BLOCK];
  for (int k = 0; k < T::KHW; ++k) {
    const float v = blockSum(acc[k], sh);
    if (t == 0) parts[((i64)(c * T::KD + kd) * T::KHW + k) * T::PARTS + n * T::S + s] = v;
  }
}

// ---- the strided transposed depthwise convolution by parity classes -----------------------
//
// conv3d_transpose with groups = C (one input and one output channel per group), stride S*,
// padding P* ≥ 0 and no dilation (Conv.cpp's transposedParity; MEDC_STENCIL=tiles keeps the
// gather of conv()). Output o reads input (o + P − k)/S where that divides: along an axis the
// outputs o = S·j + r of one parity class r use the fixed taps k ≡ (r + P) mod S, and read
// input j + (r + P − k)/S, so each class is a dense stencil over the input grid. A thread owns
// the outputs of RJ consecutive cells j along W and one cell along D and H, every class of
// each (S_D·S_H rows of S_W·RJ consecutive outputs); it walks the input rows its outputs read
// once each, holds each row's window of RJ + the classes' span inputs in registers and feeds
// every class and tap from there. Each output sums its taps in ascending (kd, kh, kw) as the
// generic kernel does (input rows are walked from the highest offset down: a larger tap reads
// a lower input), so the results are the same bits.

// Along one axis of kernel K, stride S and padding P: class r's first tap, its taps, and the
// input offset (relative to the cell j) of its first tap; the offsets the classes span.
struct ParityAxis {
  int K, S, P;
  constexpr int first(int r) const { return (r + P) % S; }
  constexpr int taps(int r) const { return first(r) >= K ? 0 : (K - first(r) + S - 1) / S; }
  constexpr int offset(int r) const { return (r + P) / S; } // tap m reads offset(r) − m
  constexpr int high() const {
    int h = -1000000;
    for (int r = 0; r < S; ++r)
      if (taps(r) > 0 && offset(r) > h) h = offset(r);
    return h;
  }
  constexpr int low() const {
    int l = 1000000;
    for (int r = 0; r < S; ++r)
      if (taps(r) > 0 && offset(r) - (taps(r) - 1) < l) l = offset(r) - (taps(r) - 1);
    return l;
  }
};

// The shapes: N×C channels, input D×H×W, output OD×OH×OW, a KD×KH×KW kernel, strides S*,
// paddings P*, RJ cells along W per thread.
template <int NC_, int C_, int D_, int H_, int W_, int OD_, int OH_, int OW_, int KD_, int KH_,
          int KW_, int SD_, int SH_, int SW_, int PD_, int PH_, int PW_, int RJ_>
struct TransposedParityShape {
  enum : int {
    NC = NC_, C = C_, D = D_, H = H_, W = W_, OD = OD_, OH = OH_, OW = OW_,
    KD = KD_, KH = KH_, KW = KW_, SD = SD_, SH = SH_, SW = SW_, RJ = RJ_,
    KVOL = KD * KH * KW,
    JD = (OD + SD - 1) / SD, JH = (OH + SH - 1) / SH, JW = (OW + SW - 1) / SW, // cells
    GW = (JW + RJ - 1) / RJ,                                                   // threads along W
    THREADS_TOTAL = NC * JD * JH * GW,
    // Whole groups of 4 outputs stored as one vector.
    VEC_STORE = OW % 4 == 0 && (SW * RJ) % 4 == 0
  };
  static constexpr ParityAxis AD{KD_, SD_, PD_}, AH{KH_, SH_, PH_}, AW{KW_, SW_, PW_};
  enum : int {
    LOW = AW.low(), WIN = RJ + AW.high() - AW.low() // the window along W: cells' inputs
  };
};

template <class T, int BLOCK, class E, typename OUT, typename IN, typename WT>
void transposedParity(OUT *__restrict__ y, const IN *__restrict__ x, const WT *__restrict__ w,
                      E e) {
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i >= T::THREADS_TOTAL) return;
  const int gw = i % T::GW, jh = i / T::GW % T::JH, jd = i / (T::GW * T::JH) % T::JD;
  const int nc = i / (T::GW * T::JH * T::JD), c = nc % T::C;
  const int jw = gw * T::RJ;
  const auto* xc = x + (i64)nc * (T::D * T::H * T::W);
  const auto* wc = w + c * T::KVOL;
  constexpr ParityAxis AD = T::AD, AH = T::AH, AW = T::AW;
  float acc[T::SD][T::SH][T::SW][T::RJ];
#pragma unroll
  for (int a = 0; a < T::SD; ++a)
#pragma unroll
    for (int b = 0; b < T::SH; ++b)
#pragma unroll
      for (int r = 0; r < T::SW; ++r)
#pragma unroll
        for (int q = 0; q < T::RJ; ++q) acc[a][b][r][q] = 0.0f;
  // Input rows from the highest offset down, so that each output meets its taps ascending.
#pragma unroll
  for (int dd = AD.high(); dd >= AD.low(); --dd) {
    const int id = jd + dd;
    if ((unsigned)id >= (unsigned)T::D) continue;
#pragma unroll
    for (int hh = AH.high(); hh >= AH.low(); --hh) {
      const int ih = jh + hh;
      if ((unsigned)ih >= (unsigned)T::H) continue;
      // The row's window: inputs jw + LOW .. jw + LOW + WIN − 1, zero outside the volume.
      float win[T::WIN];
      const auto* xr = xc + (id * T::H + ih) * T::W;
#pragma unroll
      for (int k = 0; k < T::WIN; ++k) {
        const int iw = jw + T::LOW + k;
        win[k] = (unsigned)iw < (unsigned)T::W ? (float)xr[iw] : 0.0f;
      }
#pragma unroll
      for (int rd = 0; rd < T::SD; ++rd) {
        const int md = AD.offset(rd) - dd; // the class's tap reading this row
        if (md < 0 || md >= AD.taps(rd)) continue;
        const int kd = AD.first(rd) + T::SD * md;
#pragma unroll
        for (int rh = 0; rh < T::SH; ++rh) {
          const int mh = AH.offset(rh) - hh;
          if (mh < 0 || mh >= AH.taps(rh)) continue;
          const int kh = AH.first(rh) + T::SH * mh;
#pragma unroll
          for (int rw = 0; rw < T::SW; ++rw)
#pragma unroll
            for (int mw = 0; mw < AW.taps(rw); ++mw) {
              const int kw = AW.first(rw) + T::SW * mw;
              const float wk = (float)wc[(kd * T::KH + kh) * T::KW + kw];
#pragma unroll
              for (int q = 0; q < T::RJ; ++q)
                acc[rd][rh][rw][q] += wk * win[q + AW.offset(rw) - mw - T::LOW];
            }
        }
      }
    }
  }
  e.channel(c);
  auto* yc = y + (i64)nc * (T::OD * T::OH * T::OW);
#pragma unroll
  for (int rd = 0; rd < T::SD; ++rd) {
    const int od = T::SD * jd + rd;
    if (od >= T::OD) break;
#pragma unroll
    for (int rh = 0; rh < T::SH; ++rh) {
      const int oh = T::SH * jh + rh;
      if (oh >= T::OH) break;
      // The row's outputs S_W·jw .. S_W·(jw + RJ) − 1, output S_W·(jw + q) + rw from class rw.
      OUT *yr = yc + (od * T::OH + oh) * T::OW + T::SW * jw;
      const int left = T::OW - T::SW * jw;
#pragma unroll
      for (int g = 0; g < T::SW * T::RJ; g += 4) {
        if constexpr (T::VEC_STORE)
          if (g + 4 <= left) {
            Vec<OUT, 4> v;
#pragma unroll
            for (int u = 0; u < 4; ++u) v[u] = e(acc[rd][rh][(g + u) % T::SW][(g + u) / T::SW]);
            vstore(yr + g, v);
            continue;
          }
#pragma unroll
        for (int u = 0; u < 4 && g + u < T::SW * T::RJ; ++u)
          if (g + u < left) yr[g + u] = e(acc[rd][rh][(g + u) % T::SW][(g + u) / T::SW]);
      }
    }
  }
}

#endif // MED_KERNELS_DEPTHWISE_CUH
