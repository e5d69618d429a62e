// The generic depthwise weight gradient's first kernel (Conv.cpp's depthwiseGradWeight: any
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

#endif // MED_KERNELS_DEPTHWISE_CUH
