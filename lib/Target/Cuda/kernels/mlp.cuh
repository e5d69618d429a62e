// The `mlp` and `mlp_grad` fusion templates (Fusion/Mlp.cpp instantiates them): the block MLP
// y = W2·act(W1·x + b1) + b2 (⊕ r) on mma.sync m16n8k16 tensor cores, 16-bit operands (the
// function's storage type) and f32 accumulators, with every 1×1×1 convolution as a product
// over the channel axis. Each warp takes 16 voxels of one sample (the rows of the products),
// the expanded channels go by in chunks of 16, and the expansion lives in registers only: the
// accumulator fragments of W1·x are the operand fragments of W2·g (the back-to-back GEMM
// layout). The block's input and output tiles pass through shared memory so that global
// memory is read and written along the voxels.
//
// mlp_grad recomputes the expansion. Where a block MLP's weights fit in shared memory beside
// a tile (the generator's resident limit), one kernel does the whole backward
// (mlpGradResident): dx, and the weight gradients as products over voxels of act(h) and dh
// passed through shared memory, summed in registers over the block's tiles. Otherwise one
// kernel per slab of tiles gives dx and writes act(h) and dh to scratch (mlpGradInput), and
// two products over the slab give partial sums of the weight gradients (mlpGradWeights).
// Either way fixed-tree sums over the parts finish them. No float atomics: the same bits on
// every run.
//
// The resident forward also has an sm_90a variant (mlpForwardWgmma: warpgroup products with
// the weights as core matrices in shared memory), listed as a variant of its launch; the
// runtime runs the faster on sm_90 GPUs (docs/architecture.md).
//
// The weights go to 16-bit copies in the layouts the fragments read (scratch), first. The
// kernels keep them in shared memory, shared by the block's warps: all of them for the
// whole kernel where they fit, else kMlpStage expanded channels at a time per tile (rows
// padded by 8 elements so that the eight rows a fragment load touches fall in distinct
// banks). Channel counts are padded to 16 with zeros. The templates' matchers
// (lib/IR/MedFusion.cpp) bound the input and output channels to 128 (fragments and
// accumulators in registers).
//
// How they are instantiated: every size is a compile-time constant (MlpShape's template
// arguments, and the generator's choice of variant, stages and parts), so NVRTC sees the
// same constants as in hand-written code. What a fusion's roles carry comes as a small
// generated body functor `Body` (an object holding the operand pointers it reads):
//   float hidden(float h, int e) const      h + b1[e] (or h: no expansion bias)
//   static float act(float v)               the activation
//   static float actGrad(float u, float v)  its gradient at h = u for dg = v (mlp_grad)
//   float out(float acc, int co, i64 o) const  the output element o (channel co) from the
//                                           compression's sum: + b2[co], the epilogue
// Each kernel is an `extern "C" __global__` wrapper with the kernel's name that calls the
// template (not an NVRTC name expression): the CPU emulation compiles the same source as host
// C++ and looks kernels up by their unmangled names.
#ifndef MED_KERNELS_MLP_CUH
#define MED_KERNELS_MLP_CUH

constexpr int kMlpWarps = 4, kMlpTile = 16 * kMlpWarps; // voxels per block and tile
constexpr i64 kMlpStage = 32; // expanded channels staged at a time (staged and slab kernels)
constexpr i64 mlpPad16(i64 v) { return (v + 15) / 16 * 16; }
constexpr i64 mlpMax(i64 a, i64 b) { return a < b ? b : a; }

// A block MLP's sizes: N samples of S voxels, C input, E expanded and Co output channels
// (padded to 16: Cp, Ep, Cop), S in tiles of kMlpTile voxels.
template <i64 N_, i64 C_, i64 S_, i64 E_, i64 Co_> struct MlpShape {
  static constexpr i64 N = N_, C = C_, S = S_, E = E_, Co = Co_;
  static constexpr i64 Cp = mlpPad16(C), Ep = mlpPad16(E), Cop = mlpPad16(Co);
  static constexpr i64 tiles = (S + kMlpTile - 1) / kMlpTile;
};

// ---- pieces shared by the kernels ----------------------------------------------------------

// Copies rows [0, Rows) × columns [0, Cols) of `src` (row pitch SrcPitch, from row rowOffset
// and column colOffset; zeros beyond SrcRows × SrcCols) into shared `dst` (row pitch Pitch),
// 16-byte vectors of 8 elements: every count, pitch and offset is a multiple of 8, so a
// vector lies wholly inside or outside.
template <i64 Rows, i64 Cols, i64 Pitch, i64 SrcPitch, i64 SrcRows, i64 SrcCols, typename T>
void mlpStage(T *dst, const T *src, i64 rowOffset, i64 colOffset) {
  for (int i = threadIdx.x; i < Rows * Cols / 8; i += blockDim.x) {
    const int r = i / (Cols / 8), c = (i % (Cols / 8)) * 8;
    const int sr = rowOffset + r, sc = colOffset + c;
    Vec<T, 8> v;
    if (sr < SrcRows && sc < SrcCols) {
      v = vload<8>(src + (i64)sr * SrcPitch + sc);
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k)
        v[k].bits = 0;
    }
    vstore<8>(dst + r * Pitch + c, v);
  }
}

// Loads channels [0, P) × voxels [s0, s0 + kMlpTile) of sample n of `src` (N×C×S) into
// shared `dst` [P][Pitch], zeros beyond C and S: 16-byte vectors of 8 elements where S is a
// multiple of 8 (a vector is then wholly inside or outside), else element by element.
template <i64 C, i64 P, i64 S, i64 Pitch, typename T>
void mlpLoad(T *dst, const T *src, i64 n, int s0) {
  if constexpr (S % 8 == 0) {
    for (int i = threadIdx.x; i < P * kMlpTile / 8; i += blockDim.x) {
      const int c = i / (kMlpTile / 8), s = s0 + (i % (kMlpTile / 8)) * 8;
      Vec<T, 8> v;
      if (c < C && s < S) {
        v = vload<8>(src + (n * C + c) * S + s);
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k)
          v[k].bits = 0;
      }
      vstore<8>(dst + c * Pitch + s - s0, v);
    }
  } else {
    for (int i = threadIdx.x; i < P * kMlpTile; i += blockDim.x) {
      const int c = i / kMlpTile, s = s0 + i % kMlpTile;
      dst[c * Pitch + s - s0] = c < C && s < S ? (float)src[(n * C + c) * S + s] : 0.0f;
    }
  }
}

// For expansion chunk ec (16 expanded channels): the warp's h = W1·x + b1 (two 16×8 tiles,
// zeros in, in h) and the operand fragment ga of act(h) (the f32 activation kept in a, zero
// beyond E). `w1rows`: the address of the chunk's W1 row g (row pitch Pitch, columns from 0).
template <i64 E, int KC, int Pitch, typename T, typename Body>
void mlpExpand(float (&h)[2][4], float (&a)[2][4], unsigned (&ga)[4],
               const unsigned (&xa)[KC][4], const T *w1rows, int ec, int q, const Body &body) {
  mmaTilePair<KC, Pitch>(h, xa, w1rows, q);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = ec * 16 + nt * 8 + 2 * q + (j & 1);
      if (e < E) {
        h[nt][j] = body.hidden(h[nt][j], e);
        const float v = h[nt][j];
        a[nt][j] = Body::act(v);
      } else {
        a[nt][j] = 0.0f;
      }
    }
  ga[0] = pack2<T>(a[0][0], a[0][1]);
  ga[1] = pack2<T>(a[0][2], a[0][3]);
  ga[2] = pack2<T>(a[1][0], a[1][1]);
  ga[3] = pack2<T>(a[1][2], a[1][3]);
}

// acc[ct] += A · B_ctᵀ for each of the warp's CT 16×8 tiles: A the warp's operand fragment
// `a` (16 k), B_ct eight rows of the 16-bit matrix `m` in shared memory (row pitch Pitch),
// rows ct * 8.., columns col..
template <int CT, i64 Pitch, typename T>
void mmaColumns(float (&acc)[CT][4], const unsigned (&a)[4], const T *m, int col, int g, int q) {
#pragma unroll
  for (int ct = 0; ct < CT; ++ct) {
    const T *wb = m + (ct * 8 + g) * Pitch + col + 2 * q;
    const unsigned b[2] = {*(const unsigned *)wb, *(const unsigned *)(wb + 8)};
    mma16816<T>(acc[ct], a, b);
  }
}

// ---- mlp: the forward ------------------------------------------------------------------

// One tile of sample n from s0, its x in shared xs [Cp][tile]: the warps' fragments of x,
// `products(acc, xa)` into the output accumulators, and y out through ys (xs's place) —
// 16-byte vectors of 8 outputs with VecStore (S a multiple of 8), else one by one.
template <typename Sh, bool VecStore, typename T, typename Body, typename Products>
void mlpForwardTile(const Body &body, T *y, const T *xs, float *ys, i64 n, int s0, int warp,
                    int g, int q, Products products) {
  __syncthreads();
  const int vr = warp * 16 + g;
  unsigned xa[Sh::Cp / 16][4];
  loadColumnsA<Sh::Cp / 16, kMlpTile>(xa, xs, vr, q);
  float acc[Sh::Cop / 8][4];
#pragma unroll
  for (int j = 0; j < Sh::Cop / 8; ++j)
    acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  products(acc, xa);
  __syncthreads(); // xs (and staged weights) are read: the output tile takes their place
  storeColumnsD<Sh::Cop / 8, kMlpTile>(ys, acc, vr, q);
  __syncthreads();
  if constexpr (VecStore) {
    for (int i = threadIdx.x; i < Sh::Co * kMlpTile / 8; i += blockDim.x) {
      const int co = i / (kMlpTile / 8), v = (i % (kMlpTile / 8)) * 8, s = s0 + v;
      if (s >= Sh::S)
        continue;
      const i64 o = (n * Sh::Co + co) * Sh::S + s;
      Vec<T, 8> out;
#pragma unroll
      for (int kk = 0; kk < 8; ++kk)
        out[kk] = body.out(ys[co * kMlpTile + v + kk], co, o + kk);
      vstore<8>(y + o, out);
    }
  } else {
    for (int i = threadIdx.x; i < Sh::Co * kMlpTile; i += blockDim.x) {
      const int co = i / kMlpTile, v = i % kMlpTile, s = s0 + v;
      if (s >= Sh::S)
        continue;
      const i64 o = (n * Sh::Co + co) * Sh::S + s;
      y[o] = body.out(ys[i], co, o);
    }
  }
}

// x's vectors of tile tn (none past the last tile) into the thread's registers `next`.
template <typename Sh, i64 PerThread, typename T>
void mlpPrefetch(Vec<T, 8> (&next)[PerThread], const T *x, i64 tn) {
  const i64 nn = tn / Sh::tiles;
  const int sn = (int)(tn % Sh::tiles) * kMlpTile;
#pragma unroll
  for (int j = 0; j < PerThread; ++j) {
    const int i = threadIdx.x + j * (kMlpWarps * 32);
    const int c = i / (kMlpTile / 8), s = sn + (i % (kMlpTile / 8)) * 8;
    if (tn < Sh::N * Sh::tiles && c < Sh::C && s < Sh::S) {
      next[j] = vload<8>(x + (nn * Sh::C + c) * Sh::S + s);
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k)
        next[j][k].bits = 0;
    }
  }
}

// After the weights are staged: the block's tiles blockIdx.x, + gridDim.x, ... (no sums
// across tiles: any grid will do), `products` on each. With 16-byte vectors (S a multiple of
// 8) the next tile's x is loaded into registers while this one is computed, and y is stored
// eight elements per thread.
template <typename Sh, typename T, typename Body, typename Products>
void mlpResidentTiles(const Body &body, T *y, const T *x, T *xs, float *ys, int warp, int g,
                      int q, Products products) {
  constexpr bool vec = Sh::S % 8 == 0;
  constexpr i64 perThread = Sh::Cp * kMlpTile / 8 / (kMlpWarps * 32); // x's vectors per thread
  Vec<T, 8> next[perThread];
  if constexpr (vec)
    mlpPrefetch<Sh>(next, x, blockIdx.x);
  for (i64 tile = blockIdx.x; tile < Sh::N * Sh::tiles; tile += gridDim.x) {
    const i64 n = tile / Sh::tiles;
    const int s0 = (int)(tile % Sh::tiles) * kMlpTile;
    __syncthreads(); // the weights are staged, the last tile's outputs read
    if constexpr (vec) {
#pragma unroll
      for (int j = 0; j < perThread; ++j) {
        const int i = threadIdx.x + j * (kMlpWarps * 32);
        vstore<8>(xs + i / (kMlpTile / 8) * kMlpTile + (i % (kMlpTile / 8)) * 8, next[j]);
      }
      const i64 tn = tile + gridDim.x;
      mlpPrefetch<Sh>(next, x, tn);
    } else {
      mlpLoad<Sh::C, Sh::Cp, Sh::S, kMlpTile>(xs, x, n, s0);
    }
    mlpForwardTile<Sh, vec>(body, y, xs, ys, n, s0, warp, g, q, products);
  }
}

// The forward with all the weights resident in shared memory, staged once per block.
template <typename Sh, typename T, typename Body>
void mlpForward(const Body &body, T *y, const T *x, const T *w1p, const T *w2p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  constexpr i64 P1 = Sh::Cp + 8, PE = Sh::Ep + 8;
  constexpr i64 tileWords = mlpMax(Sh::Cp * kMlpTile / 2, Sh::Cop * kMlpTile);
  constexpr i64 residentHalf = Sh::Ep * P1 + Sh::Cop * PE; // 16-bit elements of the weights
  alignas(16) __shared__ float smem[residentHalf / 2 + tileWords];
  T *w1s = (T *)smem;                      // [Ep][Cp + 8]: W1
  T *w2s = w1s + Sh::Ep * P1;              // [Cop][Ep + 8]: W2
  T *xs = (T *)(smem + residentHalf / 2); // [Cp][tile]
  float *ys = smem + residentHalf / 2;    // [Cop][tile]
  mlpStage<Sh::Ep, Sh::Cp, P1, Sh::Cp, Sh::Ep, Sh::Cp>(w1s, w1p, 0, 0);
  mlpStage<Sh::Cop, Sh::Ep, PE, Sh::Ep, Sh::Cop, Sh::Ep>(w2s, w2p, 0, 0);
  mlpResidentTiles<Sh>(body, y, x, xs, ys, warp, g, q, [&](auto &acc, const auto &xa) {
    for (int ec = 0; ec < Sh::Ep / 16; ++ec) {
      float h[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
      float a[2][4];
      unsigned ga[4];
      mlpExpand<Sh::E, Sh::Cp / 16, P1>(h, a, ga, xa, w1s + (ec * 16 + g) * P1, ec, q, body);
      mmaColumns<Sh::Cop / 8, PE>(acc, ga, w2s, ec * 16, g, q);
    }
  });
}

// The forward with kMlpStage expanded channels' weights at a time in shared memory, in the
// tile's place once xa is built; one tile per block.
template <typename Sh, typename T, typename Body>
void mlpForwardStaged(const Body &body, T *y, const T *x, const T *w1p, const T *w2p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  constexpr i64 P1 = Sh::Cp + 8, P2 = kMlpStage + 8, stages = (Sh::Ep + kMlpStage - 1) / kMlpStage;
  constexpr i64 weightsHalf = kMlpStage * P1 + Sh::Cop * P2; // 16-bit elements of one stage
  constexpr i64 tileWords = mlpMax(Sh::Cp * kMlpTile / 2, Sh::Cop * kMlpTile);
  const i64 n = blockIdx.x / Sh::tiles;
  const int s0 = (int)(blockIdx.x % Sh::tiles) * kMlpTile;
  alignas(16) __shared__ float smem[mlpMax(tileWords, (weightsHalf + 1) / 2)];
  T *xs = (T *)smem;            // [Cp][tile]
  float *ys = smem;             // [Cop][tile]
  T *w1s = (T *)smem;           // [stage][Cp + 8]: W1's rows of the stage (after xa)
  T *w2s = w1s + kMlpStage * P1; // [Cop][stage + 8]: W2's columns
  mlpLoad<Sh::C, Sh::Cp, Sh::S, kMlpTile>(xs, x, n, s0);
  mlpForwardTile<Sh, false>(body, y, xs, ys, n, s0, warp, g, q, [&](auto &acc, const auto &xa) {
    for (int st = 0; st < stages; ++st) {
      __syncthreads(); // the tile or the last stage's weights are read
      mlpStage<kMlpStage, Sh::Cp, P1, Sh::Cp, Sh::Ep, Sh::Cp>(w1s, w1p, st * kMlpStage, 0);
      mlpStage<Sh::Cop, kMlpStage, P2, Sh::Ep, Sh::Cop, Sh::Ep>(w2s, w2p, 0, st * kMlpStage);
      __syncthreads();
#pragma unroll
      for (int cl = 0; cl < kMlpStage / 16; ++cl) {
        const int ec = st * (kMlpStage / 16) + cl;
        if (ec >= Sh::Ep / 16)
          break;
        float h[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
        float a[2][4];
        unsigned ga[4];
        mlpExpand<Sh::E, Sh::Cp / 16, P1>(h, a, ga, xa, w1s + (cl * 16 + g) * P1, ec, q, body);
        mmaColumns<Sh::Cop / 8, P2>(acc, ga, w2s, cl * 16, g, q);
      }
    }
  });
}

// The resident forward's sm_90a variant: the same tiles on the warpgroup's tensor cores, the
// expansion in chunks of CW (up to 64) channels, one m64nCWk16 product per 16 input channels,
// act(h) back in as the A operand of the compression's products; the weights as wgmma's
// K-major core matrices (prelude.cuh). wgmmaMma<T, N> are the generator's warpgroup products
// (one per width), wgmmaFence... its fences.
template <i64 Rows, i64 Cols, typename T> void mlpCoreStage(T *dst, const T *src) {
  for (int i = threadIdx.x; i < Rows * Cols / 8; i += blockDim.x) {
    const int r = i / (Cols / 8), c = i % (Cols / 8);
    vstore<8>(dst + ((r / 8) * (Cols / 8) + c) * 64 + (r % 8) * 8, vload<8>(src + (i64)r * Cols + c * 8));
  }
}

template <typename T, int N>
void wgmmaMma(float (*d)[4], const unsigned a[4], const void *b, unsigned lbo, unsigned sbo);
#ifdef __CUDA_ARCH__
// Shared-memory writes made visible to the tensor cores' reads (async proxy).
inline void wgmmaFenceShared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// The accumulators are ready to be read and written by the next products.
inline void wgmmaFence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
inline void wgmmaCommitWait() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
// Keeps the compiler from reading d before the products that write it are waited for.
template <int N> void wgmmaHold(float (&d)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      asm volatile("" : "+f"(d[j][i])::"memory");
}
#else
inline void wgmmaFenceShared() {}
inline void wgmmaFence() {}
inline void wgmmaCommitWait() {}
template <int N> void wgmmaHold(float (&)[N][4]) {}
#endif

template <typename Sh, typename T, int CW, typename Body>
void mlpForwardWgmma(const Body &body, T *y, const T *x, const T *w1p, const T *w2p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  constexpr i64 coreWords = (Sh::Ep * Sh::Cp + Sh::Cop * Sh::Ep) / 2; // both weights, in floats
  constexpr i64 tileWords = mlpMax(Sh::Cp * kMlpTile / 2, Sh::Cop * kMlpTile);
  alignas(16) __shared__ float smem[coreWords + tileWords];
  T *w1c = (T *)smem;               // W1 as core matrices
  T *w2c = w1c + Sh::Ep * Sh::Cp;   // W2 as core matrices
  T *xs = (T *)(smem + coreWords); // [Cp][tile]
  float *ys = smem + coreWords;    // [Cop][tile]
  mlpCoreStage<Sh::Ep, Sh::Cp>(w1c, w1p);
  mlpCoreStage<Sh::Cop, Sh::Ep>(w2c, w2p);
  wgmmaFenceShared();
  mlpResidentTiles<Sh>(body, y, x, xs, ys, warp, g, q, [&](auto &acc, const auto &xa) {
    for (int ec = 0; ec < Sh::Ep / CW; ++ec) {
      float h[CW / 8][4];
#pragma unroll
      for (int j = 0; j < CW / 8; ++j)
        h[j][0] = h[j][1] = h[j][2] = h[j][3] = 0.0f;
      wgmmaFence();
#pragma unroll
      for (int kc = 0; kc < Sh::Cp / 16; ++kc)
        wgmmaMma<T, CW>(h, xa[kc], w1c + ec * (CW / 8 * Sh::Cp / 8 * 64) + kc * 128, 128, Sh::Cp * 16);
      wgmmaCommitWait();
      wgmmaHold(h);
      unsigned ga[CW / 16][4];
#pragma unroll
      for (int nt = 0; nt < CW / 8; ++nt) {
        float a[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int e = ec * CW + nt * 8 + 2 * q + (j & 1);
          if (e < Sh::E) {
            const float v = body.hidden(h[nt][j], e);
            a[j] = Body::act(v);
          } else {
            a[j] = 0.0f;
          }
        }
        ga[nt / 2][(nt & 1) * 2] = pack2<T>(a[0], a[1]);
        ga[nt / 2][(nt & 1) * 2 + 1] = pack2<T>(a[2], a[3]);
      }
      wgmmaFence();
#pragma unroll
      for (int kk = 0; kk < CW / 16; ++kk)
        wgmmaMma<T, Sh::Cop>(acc, ga[kk], w2c + (ec * (CW / 8) + 2 * kk) * 64, 128, Sh::Ep * 16);
      wgmmaCommitWait();
      wgmmaHold(acc);
    }
  });
}

#endif // MED_KERNELS_MLP_CUH
