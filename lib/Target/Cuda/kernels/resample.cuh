// The `resample` kernels (docs/architecture.md): med.spatial_transform (Spatial.cpp) and the
// `resample` fusion template (Fusion/Resample.cpp), one thread per output voxel. The voxel's
// input position, its neighbours and their weights are computed once (samplePoint), then
// each channel is sampled from them (sampleChannel). The arithmetic is the CPU kernel's
// (runtime/src/cpu/Spatial.cpp), operation for operation, with the products that meet a sum
// written as fmaf: --fmad cannot contract them differently, and the GPU gives the CPU's bits
// (nearest samples and labels exactly).
//
// Compile-time parameters: a generated shape struct S per kernel, with
//   typedef int|i64 I;                 the index type (int where every index fits)
//   static constexpr I N, C;           batch and channels
//   static constexpr I XD, XH, XW;     the input's spatial size
//   static constexpr I YD, YH, YW;     the transform's output size
//   static constexpr I BD, BH, BW;     the box the threads visit (the output, or a crop of it)
//   static constexpr I LD, LH, LW;     the box's origin in the output
//   static constexpr SampleMode mode;  static constexpr SampleBorder border;
//   typedef int|float T;               a nearest sample's type: i32 labels stay int
//   static float fill(); static T fillT();   the value outside (constant border,
//                                      linear_argmax), as a float and as T (a literal cast in
//                                      the source, which the front end folds)
//   static constexpr int labels;  static float label(int l);   linear_argmax's labels
// and, for the affinities, K, offset(k, axis), the labels' compare type V and `below`.
// A fusion's epilogue is a generated functor: Body::channel(n, c, q, od, oh, ow, o, sample,
// params...) computes the epilogue's scalar forms and random numbers of one channel of the
// voxel in f32 registers and stores the results.
//
// The generator emits the shape struct, the functor and an extern "C" __global__ wrapper with
// the kernel's name and parameters that calls the template, rather than instantiating the
// templates through NVRTC name expressions: the CPU emulation (test/cuda/emu.h) compiles the
// same source as host C++ and finds kernels by their unmangled names.
#ifndef MED_KERNELS_RESAMPLE_CUH
#define MED_KERNELS_RESAMPLE_CUH

enum class SampleMode { Linear, Nearest, LinearArgmax };
enum class SampleBorder { Zeros, Constant, Reflection };

// The thread's voxel: 32-bit arithmetic where every index fits (blocks of 256 threads).
template <typename I> I voxelThread() {
  if constexpr (sizeof(I) == 4)
    return (int)(blockIdx.x * 256u + threadIdx.x);
  else
    return (i64)blockIdx.x * blockDim.x + threadIdx.x;
}

// grid_sample's reflection about -0.5 and size - 0.5, then the clamp to [0, size - 1].
template <i64 Size> float reflectCoordinate(float p) {
  constexpr float n = (float)Size;
  const float q = fminf(fmaxf(p, -16777216.0f), 16777216.0f), d = fabsf(q - -0.5f);
  // fmodf is a loop on the GPU; below n it returns d exactly, as the CPU's does.
  const float extra = d < n ? d : fmodf(d, n);
  const int flips = (int)floorf(d / n);
  const float r = flips % 2 == 0 ? extra + -0.5f : n - extra + -0.5f;
  return fminf((float)(Size - 1.0), fmaxf(r, 0.0f));
}

// Where an output voxel samples the input: nearest's one voxel (`inside`, `at`), or the 8
// neighbours of the linear modes in grid_sample's order (z, then y, then x, low before high).
template <class S> struct SamplePoint {
  typedef typename S::I I;
  bool inside; // linear_argmax: the position is inside [0, n - 1] on every axis
  I at;
  bool ok[8];
  I ats[8];
  float wt[8];
};

// The input position of output voxel (od, oh, ow) of sample n (matrices m, N × 3 × 4):
// M·d + t + c_in with d the voxel's offset from the output's centre.
template <class S>
SamplePoint<S> samplePoint(const float *__restrict__ m, typename S::I n, typename S::I od,
                           typename S::I oh, typename S::I ow) {
  typedef typename S::I I;
  SamplePoint<S> s;
  const auto *mb = m + 12 * n;
  const float d0 = (float)od - (float)((S::YD - 1) / 2.0);
  const float d1 = (float)oh - (float)((S::YH - 1) / 2.0);
  const float d2 = (float)ow - (float)((S::YW - 1) / 2.0);
  float p0 = fmaf(mb[0], d0, fmaf(mb[0 + 1], d1, fmaf(mb[0 + 2], d2, mb[0 + 3] + (float)((S::XD - 1) / 2.0))));
  float p1 = fmaf(mb[4], d0, fmaf(mb[4 + 1], d1, fmaf(mb[4 + 2], d2, mb[4 + 3] + (float)((S::XH - 1) / 2.0))));
  float p2 = fmaf(mb[8], d0, fmaf(mb[8 + 1], d1, fmaf(mb[8 + 2], d2, mb[8 + 3] + (float)((S::XW - 1) / 2.0))));
  if constexpr (S::mode == SampleMode::Nearest) {
    if constexpr (S::border == SampleBorder::Reflection) {
      p0 = reflectCoordinate<S::XD>(p0);
      p1 = reflectCoordinate<S::XH>(p1);
      p2 = reflectCoordinate<S::XW>(p2);
    }
    const float r0 = nearbyintf(p0), r1 = nearbyintf(p1), r2 = nearbyintf(p2); // half to even
    s.inside = r0 >= 0.0f && r0 <= (float)(S::XD - 1.0) && r1 >= 0.0f && r1 <= (float)(S::XH - 1.0) && r2 >= 0.0f && r2 <= (float)(S::XW - 1.0);
    s.at = s.inside ? ((I)r0 * S::XH + (I)r1) * S::XW + (I)r2 : 0;
    return s;
  } else {
    if constexpr (S::mode == SampleMode::LinearArgmax)
      s.inside = p0 >= 0.0f && p0 <= (float)(S::XD - 1.0) && p1 >= 0.0f && p1 <= (float)(S::XH - 1.0) && p2 >= 0.0f && p2 <= (float)(S::XW - 1.0);
    if constexpr (S::border == SampleBorder::Reflection && S::mode == SampleMode::Linear) {
      p0 = reflectCoordinate<S::XD>(p0);
      p1 = reflectCoordinate<S::XH>(p1);
      p2 = reflectCoordinate<S::XW>(p2);
    } else { // clamped to where no neighbour is inside any more: the same samples
      p0 = fminf(fmaxf(p0, -2.0f), (float)(S::XD + 1.0));
      p1 = fminf(fmaxf(p1, -2.0f), (float)(S::XH + 1.0));
      p2 = fminf(fmaxf(p2, -2.0f), (float)(S::XW + 1.0));
    }
    const float f0 = floorf(p0);
    const I l0 = (I)f0;
    const float w0[2] = {(f0 + 1.0f) - p0, p0 - f0};
    const float f1 = floorf(p1);
    const I l1 = (I)f1;
    const float w1[2] = {(f1 + 1.0f) - p1, p1 - f1};
    const float f2 = floorf(p2);
    const I l2 = (I)f2;
    const float w2[2] = {(f2 + 1.0f) - p2, p2 - f2};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int dz = k >> 2, dy = k >> 1 & 1, dx = k & 1;
      s.ok[k] = l0 + dz >= 0 && l0 + dz < S::XD && l1 + dy >= 0 && l1 + dy < S::XH && l2 + dx >= 0 && l2 + dx < S::XW;
      s.ats[k] = s.ok[k] ? ((l0 + dz) * S::XH + l1 + dy) * S::XW + l2 + dx : 0;
      s.wt[k] = (w2[dx] * w1[dy]) * w0[dz];
    }
    return s;
  }
}

// The sample at point s of the channel whose input volume starts at xc: S::T for nearest and
// linear_argmax, a float for linear.
template <class S, typename X> auto sampleChannel(const SamplePoint<S> &s, const X *__restrict__ xc) {
  typedef typename S::T T;
  const bool filled = S::mode == SampleMode::LinearArgmax || S::border == SampleBorder::Constant;
  const float fill = filled ? S::fill() : 0.0f;
  const T fillT = filled ? S::fillT() : (T)(0.0f);
  if constexpr (S::mode == SampleMode::Nearest) {
    return s.inside ? (T)xc[s.at] : fillT;
  } else {
    float v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v[k] = s.ok[k] ? (float)xc[s.ats[k]] : fill;
    if constexpr (S::mode == SampleMode::Linear) {
      float acc = 0.0f;
#pragma unroll
      for (int k = 0; k < 8; ++k)
        acc = fmaf(v[k], s.wt[k], acc);
      return acc;
    } else {
      float best = 0.0f, label = 0.0f;
#pragma unroll
      for (int l = 0; l < S::labels; ++l) {
        const float L = S::label(l);
        float w = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; ++k)
          if (s.ok[k] && v[k] == L) w += s.wt[k];
        // Strict: a later label must beat the best so far, so the lowest label wins a tie.
        if (l == 0) {
          best = w;
          label = L;
        } else if (w > best) {
          best = w;
          label = L;
        }
      }
      // Outside [0, n - 1] on some axis: the fill value (nnU-Net's -1).
      return s.inside ? (T)(label) : fillT;
    }
  }
}

// med.spatial_transform: y (N × C × YD × YH × YW) sampled from x, all channels of a voxel in
// its thread.
template <class S, typename Y, typename X>
void spatialTransform(Y *__restrict__ y, const X *__restrict__ x, const float *__restrict__ m) {
  typedef typename S::I I;
  constexpr I inPlane = S::XD * S::XH * S::XW, outPlane = S::YD * S::YH * S::YW;
  const I i = voxelThread<I>();
  if (i >= S::N * outPlane) return;
  const I n = i / outPlane, o = i - n * outPlane;
  const I od = o / (S::YH * S::YW), oh = o / S::YW % S::YH, ow = o % S::YW;
  const SamplePoint<S> s = samplePoint<S>(m, n, od, oh, ow);
  const I xb = n * (S::C * inPlane), yb = n * (S::C * outPlane) + o;
  for (I c = 0; c < S::C; ++c) {
    const auto *xc = x + xb + c * inPlane;
    const auto v = sampleChannel<S>(s, xc);
    y[yb + c * outPlane] = v;
  }
}

// The `resample` fusion: the voxels of the box (a crop of the output, or all of it), each
// channel's sample handed to the epilogue Body::channel with the voxel's sample n, channel c,
// index q in the box, coordinates in the output and index o in the output's volume (the
// random numbers' counter), and the kernel's other parameters p.
template <class S, class Body, typename X, typename... P>
void resample(const X *__restrict__ x, const float *__restrict__ m, P... p) {
  typedef typename S::I I;
  constexpr I inPlane = S::XD * S::XH * S::XW, boxPlane = S::BD * S::BH * S::BW;
  const I i = voxelThread<I>();
  if (i >= S::N * boxPlane) return;
  const I n = i / boxPlane, q = i - n * boxPlane;
  const I od = q / (S::BH * S::BW) + S::LD, oh = q / S::BW % S::BH + S::LH, ow = q % S::BW + S::LW;
  const I o = (od * S::YH + oh) * S::YW + ow;
  const SamplePoint<S> s = samplePoint<S>(m, n, od, oh, ow);
  const I xb = n * (S::C * inPlane);
  for (I c = 0; c < S::C; ++c) {
    const auto *xc = x + xb + c * inPlane;
    Body::channel(n, c, q, od, oh, ow, o, sampleChannel<S>(s, xc), p...);
  }
}

// The `resample` fusion with med.affinities (Labels.cpp's rules): a thread per voxel of the
// crop (the box), all K offsets; the labels at both ends of each affinity are sampled where
// they are needed, compared in S::V (integers exactly, floats as float), and never stored.
template <class S, typename Y, typename X>
void resampleAffinities(Y *__restrict__ aff, Y *__restrict__ mask, const X *__restrict__ x,
                        const float *__restrict__ m) {
  typedef typename S::I I;
  typedef typename S::V V;
  constexpr I inPlane = S::XD * S::XH * S::XW, crop = S::BD * S::BH * S::BW;
  const I i = voxelThread<I>();
  if (i >= S::N * crop) return;
  const I n = i / crop, q = i - n * crop;
  const I xb = n * inPlane;
  // The resampled label at output voxel (od, oh, ow) of sample n.
  auto sample = [&](const I od, const I oh, const I ow) {
    const SamplePoint<S> s = samplePoint<S>(m, n, od, oh, ow);
    const auto v = sampleChannel<S>(s, x + xb);
    return (V)v;
  };
  const I vz = q / (S::BH * S::BW) + S::LD, vy = q / S::BW % S::BH + S::LH, vx = q % S::BW + S::LW;
  const V la = sample(vz, vy, vx);
#pragma unroll
  for (int k = 0; k < S::K; ++k) {
    const I uz = vz + S::offset(k, 0), uy = vy + S::offset(k, 1), ux = vx + S::offset(k, 2);
    const bool in = uz >= 0 && uz < S::YD && uy >= 0 && uy < S::YH && ux >= 0 && ux < S::YW;
    const V lb = in ? sample(uz, uy, ux) : la;
    const bool valid = in && la >= S::below && lb >= S::below;
    const I at = (n * S::K + k) * crop + q;
    aff[at] = valid && la == lb && la != 0 ? 1.0f : 0.0f; // no background affinity
    mask[at] = valid ? 1.0f : 0.0f;
  }
}

#endif // MED_KERNELS_RESAMPLE_CUH
