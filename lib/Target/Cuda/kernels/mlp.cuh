// The `mlp` and `mlp_grad` fusion templates (Fusion/Mlp.cpp instantiates them): the block MLP
// y = W2·act(W1·x + b1) + b2 (⊕ r) on mma.sync m16n8k16 tensor cores, 16-bit operands (the
// function's storage type) and f32 accumulators, with every 1×1×1 convolution as a product
// over the channel axis. Each warp takes 16 voxels of one sample (the rows of the products),
// the expanded channels go by in chunks of 16, and the expansion lives in registers only: the
// accumulator fragments of W1·x are the operand fragments of W2·g (the back-to-back GEMM
// layout). The block's input and output tiles pass through shared memory so that global
// memory is read and written along the voxels.
//
// mlp_grad recomputes the expansion. Where a block is narrow enough (C, Co ≤ 64, E ≤ 256),
// medc's default is one kernel with the expanded channels split across warps
// (mlpGradChunks, its own comment below). Otherwise, where a block MLP's weights fit in
// shared memory beside a tile (the generator's resident limit), one kernel with the voxels
// split across warps does the whole backward (mlpGradResident): dx, and the weight gradients as products over voxels of act(h) and dh
// passed through shared memory, summed in registers over the block's tiles. Otherwise one
// kernel per slab of tiles gives dx and writes act(h) and dh to scratch (mlpGradInput), and
// two products over the slab give partial sums of the weight gradients (mlpGradWeights).
// Either way fixed-tree sums over the parts finish them. No float atomics: the same bits on
// every run.
//
// The resident kernels keep TS ≥ 2 tiles in flight where their buffers fit (the generator's
// --cuda-mlp-pipeline; mlpPipelinedTiles, mlpGradPipelined): a tile's x (and dy) is copied by
// cp.async into one of TS swizzled buffers TS - 1 tiles ahead, so the copies run while the
// tile before is computed. With TS = 1 they take one tile at a time (mlpResidentTiles,
// mlpGradResident), the kernels the pipeline is measured against.
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
//
// Built from prelude.cuh (mma16816, pack2, Vec) and the tile library (kernels/tile.cuh:
// loadColumnsA, mmaTilePair, storeColumnsD; swizzle64, loadColumnsASwizzled and the cp.async
// copies for the pipelines), which the generator puts in front of this file.
// The templates keep the arithmetic of the string-built kernels they replaced, operation for
// operation (the same float instructions in NVRTC's PTX, the same bits under the emulation).
// test/cuda/mlp.test runs every kernel under the emulation; its negative controls are sed'ed
// variants of this file.
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

// Element i of the weights' 16-bit copies (mlp_weights, before the kernels): `w` Rows × Cols
// into wp (R × Cc, row-major; with Plain) and its transpose wt (Cc × R; with Transposed),
// zeros beyond Rows × Cols.
template <i64 Rows, i64 Cols, i64 R, i64 Cc, bool Plain, bool Transposed, typename T, typename W>
void mlpPackWeight(T *wp, T *wt, const W *w, i64 i) {
  const int r = i / Cc, c = i % Cc;
  T v;
  v = r < Rows && c < Cols ? (float)w[r * Cols + c] : 0.0f;
  if constexpr (Plain)
    wp[i] = v;
  if constexpr (Transposed)
    wt[c * R + r] = v;
}

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
      if (e < E)
        h[nt][j] = body.hidden(h[nt][j], e);
      // Unconditional, then selected: mlpActGrad's act'(h) then finds the activation's
      // common part (the GELU's erfc and exponential) already computed (NVVM's GVN).
      const float v = Body::act(h[nt][j]);
      a[nt][j] = e < E ? v : 0.0f;
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

// The tile's outputs from shared ys [Cop][tile] (the compression's sums) through the body's
// epilogue to y along the voxels: 16-byte vectors of 8 outputs with VecStore (S a multiple of
// 8), else one by one.
template <typename Sh, bool VecStore, typename T, typename Body>
void mlpStoreY(const Body &body, T *y, const float *ys, i64 n, int s0) {
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
  mlpStoreY<Sh, VecStore>(body, y, ys, n, s0);
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

// ---- the copy pipeline: tiles in flight ----------------------------------------------------

// The shared memory (floats) of the tiles of a resident kernel that keeps TS tiles of P
// channels in flight (TS of 1: one tile, its outputs of Po channels in its place, f32).
template <i64 P, i64 Po, int TS>
constexpr i64 mlpTileWords = TS == 1 ? mlpMax(P * kMlpTile / 2, Po * kMlpTile)
                                     : TS * P * kMlpTile / 2 + Po * kMlpTile;

// Starts loading channels [0, P) of tile `tile` (sample tile / tiles, voxels from
// (tile % tiles) · kMlpTile) of `src` (N×C×S) into the swizzled tile `dst` [P][64]
// (tile.cuh: swizzle64), zeros beyond C and S: 16-byte cp.async copies where S is a multiple
// of 8 (a vector lies wholly inside or outside S), which land when their group is waited for;
// else element by element, at once.
template <i64 C, i64 P, i64 S, typename T> void mlpLoadTile(T *dst, const T *src, i64 tile) {
  constexpr i64 tiles = (S + kMlpTile - 1) / kMlpTile;
  const i64 n = tile / tiles;
  const int s0 = (int)(tile % tiles) * kMlpTile;
  if constexpr (S % 8 == 0) {
    for (int i = threadIdx.x; i < P * kMlpTile / 8; i += blockDim.x) {
      const int c = i / (kMlpTile / 8), v = (i % (kMlpTile / 8)) * 8, s = s0 + v;
      const bool in = c < C && s < S;
      cpAsync16Zfill(dst + swizzle64(c, v), in ? src + (n * C + c) * S + s : src, in);
    }
  } else {
    for (int i = threadIdx.x; i < P * kMlpTile; i += blockDim.x) {
      const int c = i / kMlpTile, v = i % kMlpTile, s = s0 + v;
      dst[swizzle64(c, v)] = c < C && s < S ? (float)src[(n * C + c) * S + s] : 0.0f;
    }
  }
}

// The resident forward's tiles with TS ≥ 2 of them in flight: the block's tiles blockIdx.x,
// + gridDim.x, ... go through TS swizzled buffers `tiles` [TS][Cp][64]. While a tile is
// computed, the copies of the next TS - 1 are under way (one cp.async group per tile, empty
// past the last, so that tile k is group k); each tile costs two barriers, and y leaves
// through ys [Cop][tile] (f32, its own buffer).
template <typename Sh, int TS, typename T, typename Body, typename Products>
void mlpPipelinedTiles(const Body &body, T *y, const T *x, T *tiles, float *ys, int warp, int g,
                       int q, Products products) {
  static_assert(TS >= 2, "a pipeline keeps two or more tiles in flight");
  constexpr i64 total = Sh::N * Sh::tiles, tileHalf = Sh::Cp * kMlpTile;
  auto issue = [&](int buffer, i64 tile) {
    if (tile < total)
      mlpLoadTile<Sh::C, Sh::Cp, Sh::S>(tiles + buffer * tileHalf, x, tile);
    cpAsyncCommit();
  };
  for (int k = 0; k < TS - 1; ++k)
    issue(k, blockIdx.x + (i64)k * gridDim.x);
  int k = 0;
  for (i64 tile = blockIdx.x; tile < total; tile += gridDim.x, ++k) {
    const i64 n = tile / Sh::tiles;
    const int s0 = (int)(tile % Sh::tiles) * kMlpTile;
    cpAsyncWait<TS - 2>();
    __syncthreads(); // tile k has landed for every thread; tile k - 1's buffer and ys are read
    issue((k + TS - 1) % TS, tile + (i64)(TS - 1) * gridDim.x);
    const int vr = warp * 16 + g;
    unsigned xa[Sh::Cp / 16][4];
    loadColumnsASwizzled<Sh::Cp / 16>(xa, tiles + (k % TS) * tileHalf, vr, q);
    float acc[Sh::Cop / 8][4];
#pragma unroll
    for (int j = 0; j < Sh::Cop / 8; ++j)
      acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    products(acc, xa);
    storeColumnsD<Sh::Cop / 8, kMlpTile>(ys, acc, vr, q);
    __syncthreads();
    mlpStoreY<Sh, Sh::S % 8 == 0>(body, y, ys, n, s0);
  }
  cpAsyncWait<0>(); // (only empty groups are left)
}

// The forward with all the weights resident in shared memory, staged once per block; TS
// tiles in flight (1: one at a time, the next one's x prefetched into registers).
template <typename Sh, typename T, int TS, typename Body>
void mlpForward(const Body &body, T *y, const T *x, const T *w1p, const T *w2p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  constexpr i64 P1 = Sh::Cp + 8, PE = Sh::Ep + 8;
  constexpr i64 tileWords = mlpTileWords<Sh::Cp, Sh::Cop, TS>;
  constexpr i64 residentHalf = Sh::Ep * P1 + Sh::Cop * PE; // 16-bit elements of the weights
  alignas(16) __shared__ float smem[residentHalf / 2 + tileWords];
  T *w1s = (T *)smem;                      // [Ep][Cp + 8]: W1
  T *w2s = w1s + Sh::Ep * P1;              // [Cop][Ep + 8]: W2
  T *xs = (T *)(smem + residentHalf / 2); // [Cp][tile] (TS = 1), [TS][Cp][64] swizzled
  float *ys = smem + residentHalf / 2 + (TS == 1 ? 0 : TS * Sh::Cp * kMlpTile / 2); // [Cop][tile]
  mlpStage<Sh::Ep, Sh::Cp, P1, Sh::Cp, Sh::Ep, Sh::Cp>(w1s, w1p, 0, 0);
  mlpStage<Sh::Cop, Sh::Ep, PE, Sh::Ep, Sh::Cop, Sh::Ep>(w2s, w2p, 0, 0);
  auto products = [&](auto &acc, const auto &xa) {
    for (int ec = 0; ec < Sh::Ep / 16; ++ec) {
      float h[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
      float a[2][4];
      unsigned ga[4];
      mlpExpand<Sh::E, Sh::Cp / 16, P1>(h, a, ga, xa, w1s + (ec * 16 + g) * P1, ec, q, body);
      mmaColumns<Sh::Cop / 8, PE>(acc, ga, w2s, ec * 16, g, q);
    }
  };
  if constexpr (TS == 1)
    mlpResidentTiles<Sh>(body, y, x, xs, ys, warp, g, q, products);
  else
    mlpPipelinedTiles<Sh, TS>(body, y, x, xs, ys, warp, g, q, products);
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

// ---- sm_90a: the warpgroup's products and fences ------------------------------------------

// The warpgroup products (wgmma.mma_async m64nNk16, f32 accumulators: N / 2 registers a
// thread, spelled out for each N in groups of eight, MED_WGMMA_Rg and their operands
// MED_WGMMA_Og).
#define MED_WGMMA_R0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define MED_WGMMA_R1 "%8, %9, %10, %11, %12, %13, %14, %15"
#define MED_WGMMA_R2 "%16, %17, %18, %19, %20, %21, %22, %23"
#define MED_WGMMA_R3 "%24, %25, %26, %27, %28, %29, %30, %31"
#define MED_WGMMA_R4 "%32, %33, %34, %35, %36, %37, %38, %39"
#define MED_WGMMA_R5 "%40, %41, %42, %43, %44, %45, %46, %47"
#define MED_WGMMA_R6 "%48, %49, %50, %51, %52, %53, %54, %55"
#define MED_WGMMA_R7 "%56, %57, %58, %59, %60, %61, %62, %63"
#define MED_WGMMA_O0                                                                          \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),     \
      "+f"(d[1][2]), "+f"(d[1][3])
#define MED_WGMMA_O1                                                                          \
  "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),     \
      "+f"(d[3][2]), "+f"(d[3][3])
#define MED_WGMMA_O2                                                                          \
  "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]),     \
      "+f"(d[5][2]), "+f"(d[5][3])
#define MED_WGMMA_O3                                                                          \
  "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),     \
      "+f"(d[7][2]), "+f"(d[7][3])
#define MED_WGMMA_O4                                                                          \
  "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]),     \
      "+f"(d[9][2]), "+f"(d[9][3])
#define MED_WGMMA_O5                                                                          \
  "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]),     \
      "+f"(d[11][2]), "+f"(d[11][3])
#define MED_WGMMA_O6                                                                          \
  "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]),     \
      "+f"(d[13][2]), "+f"(d[13][3])
#define MED_WGMMA_O7                                                                          \
  "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]),     \
      "+f"(d[15][2]), "+f"(d[15][3])
#define MED_WGMMA(N, TY, REGS, AREGS, DESC, PRED, ...)                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\nwgmma.mma_async.sync.aligned.m64n" N \
               "k16.f32." TY "." TY " {" REGS "}, {" AREGS "}, " DESC ", p, 1, 1, 0;\n}\n"         \
               : __VA_ARGS__                                                               \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1))
#define MED_WGMMA_N16(TY)                                                                     \
  MED_WGMMA("16", TY, MED_WGMMA_R0, \
            "%8, %9, %10, %11", "%12", "%13", MED_WGMMA_O0)
#define MED_WGMMA_N32(TY)                                                                     \
  MED_WGMMA("32", TY, MED_WGMMA_R0 ", " MED_WGMMA_R1, \
            "%16, %17, %18, %19", "%20", "%21", MED_WGMMA_O0, MED_WGMMA_O1)
#define MED_WGMMA_N48(TY)                                                                     \
  MED_WGMMA("48", TY, MED_WGMMA_R0 ", " MED_WGMMA_R1 ", " MED_WGMMA_R2, \
            "%24, %25, %26, %27", "%28", "%29", MED_WGMMA_O0, MED_WGMMA_O1, MED_WGMMA_O2)
#define MED_WGMMA_N64(TY)                                                                     \
  MED_WGMMA("64", TY, MED_WGMMA_R0 ", " MED_WGMMA_R1 ", " MED_WGMMA_R2 ", " MED_WGMMA_R3, \
            "%32, %33, %34, %35", "%36", "%37", MED_WGMMA_O0, MED_WGMMA_O1, MED_WGMMA_O2, MED_WGMMA_O3)
#define MED_WGMMA_N80(TY)                                                                     \
  MED_WGMMA("80", TY, MED_WGMMA_R0 ", " MED_WGMMA_R1 ", " MED_WGMMA_R2 ", " MED_WGMMA_R3 ", " MED_WGMMA_R4, \
            "%40, %41, %42, %43", "%44", "%45", MED_WGMMA_O0, MED_WGMMA_O1, MED_WGMMA_O2, MED_WGMMA_O3, MED_WGMMA_O4)
#define MED_WGMMA_N96(TY)                                                                     \
  MED_WGMMA("96", TY, MED_WGMMA_R0 ", " MED_WGMMA_R1 ", " MED_WGMMA_R2 ", " MED_WGMMA_R3 ", " MED_WGMMA_R4 ", " MED_WGMMA_R5, \
            "%48, %49, %50, %51", "%52", "%53", MED_WGMMA_O0, MED_WGMMA_O1, MED_WGMMA_O2, MED_WGMMA_O3, MED_WGMMA_O4, MED_WGMMA_O5)
#define MED_WGMMA_N112(TY)                                                                     \
  MED_WGMMA("112", TY, MED_WGMMA_R0 ", " MED_WGMMA_R1 ", " MED_WGMMA_R2 ", " MED_WGMMA_R3 ", " MED_WGMMA_R4 ", " MED_WGMMA_R5 ", " MED_WGMMA_R6, \
            "%56, %57, %58, %59", "%60", "%61", MED_WGMMA_O0, MED_WGMMA_O1, MED_WGMMA_O2, MED_WGMMA_O3, MED_WGMMA_O4, MED_WGMMA_O5, MED_WGMMA_O6)
#define MED_WGMMA_N128(TY)                                                                     \
  MED_WGMMA("128", TY, MED_WGMMA_R0 ", " MED_WGMMA_R1 ", " MED_WGMMA_R2 ", " MED_WGMMA_R3 ", " MED_WGMMA_R4 ", " MED_WGMMA_R5 ", " MED_WGMMA_R6 ", " MED_WGMMA_R7, \
            "%64, %65, %66, %67", "%68", "%69", MED_WGMMA_O0, MED_WGMMA_O1, MED_WGMMA_O2, MED_WGMMA_O3, MED_WGMMA_O4, MED_WGMMA_O5, MED_WGMMA_O6, MED_WGMMA_O7)

template <typename T> constexpr bool mlpIsBf16 = false;
template <> constexpr bool mlpIsBf16<bf16> = true;

// d[N / 8][4] += A · B on the warpgroup's tensor cores (sm_90a), T bf16 or f16: a the
// thread's A fragment, B core matrices at b with leading and stride byte offsets lbo and sbo
// (prelude.cuh: wgmmaDescriptor, and the CPU emulation wgmmaEmu).
template <typename T, int N>
void wgmmaMma(float (*d)[4], const unsigned a[4], const void *b, unsigned lbo, unsigned sbo) {
#ifdef __CUDA_ARCH__
  const u64 desc = wgmmaDescriptor(b, lbo, sbo);
#define MED_WGMMA_CASE(W)                                                                      \
  if constexpr (N == W) {                                                                      \
    if constexpr (mlpIsBf16<T>)                                                                \
      MED_WGMMA_N##W("bf16");                                                                  \
    else                                                                                       \
      MED_WGMMA_N##W("f16");                                                                   \
  }
  MED_WGMMA_CASE(16) MED_WGMMA_CASE(32) MED_WGMMA_CASE(48) MED_WGMMA_CASE(64)
  MED_WGMMA_CASE(80) MED_WGMMA_CASE(96) MED_WGMMA_CASE(112) MED_WGMMA_CASE(128)
  static_assert(N % 16 == 0 && N >= 16 && N <= 128, "wgmma widths: 16, 32, ..., 128");
#else
  wgmmaEmu<T>(d, N, a, b, lbo, sbo);
#endif
}

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

// ---- mlp's sm_90a variant -------------------------------------------------------------

// Copies `src` (Rows × Cols, row-major, 16-bit, multiples of 8) into shared `dst` as wgmma's
// K-major core matrices (prelude.cuh; K: the columns): lbo 128 bytes, sbo Cols * 16.
template <i64 Rows, i64 Cols, typename T> void mlpCoreStage(T *dst, const T *src) {
  for (int i = threadIdx.x; i < Rows * Cols / 8; i += blockDim.x) {
    const int r = i / (Cols / 8), c = i % (Cols / 8);
    vstore<8>(dst + ((r / 8) * (Cols / 8) + c) * 64 + (r % 8) * 8,
              vload<8>(src + (i64)r * Cols + c * 8));
  }
}

// The resident forward's sm_90a variant: the same tiles on the warpgroup's tensor cores, the
// expansion in chunks of CW (up to 64) channels, one m64nCWk16 product per 16 input channels,
// act(h) back in as the A operand of the compression's products; the weights as core
// matrices.
template <typename Sh, typename T, int CW, int TS, typename Body>
void mlpForwardWgmma(const Body &body, T *y, const T *x, const T *w1p, const T *w2p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  constexpr i64 coreWords = (Sh::Ep * Sh::Cp + Sh::Cop * Sh::Ep) / 2; // both weights, in floats
  constexpr i64 tileWords = mlpTileWords<Sh::Cp, Sh::Cop, TS>;
  alignas(16) __shared__ float smem[coreWords + tileWords];
  T *w1c = (T *)smem;               // W1 as core matrices
  T *w2c = w1c + Sh::Ep * Sh::Cp;   // W2 as core matrices
  T *xs = (T *)(smem + coreWords); // [Cp][tile] (TS = 1), [TS][Cp][64] swizzled
  float *ys = smem + coreWords + (TS == 1 ? 0 : TS * Sh::Cp * kMlpTile / 2); // [Cop][tile]
  mlpCoreStage<Sh::Ep, Sh::Cp>(w1c, w1p);
  mlpCoreStage<Sh::Cop, Sh::Ep>(w2c, w2p);
  wgmmaFenceShared();
  auto products = [&](auto &acc, const auto &xa) {
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
  };
  if constexpr (TS == 1)
    mlpResidentTiles<Sh>(body, y, x, xs, ys, warp, g, q, products);
  else
    mlpPipelinedTiles<Sh, TS>(body, y, x, xs, ys, warp, g, q, products);
}

// ---- mlp_grad: the backward ------------------------------------------------------------

// Loads a tile of sample n from s0 — x into xs [Cp][Pitch] and dy into dys [Cop][Pitch]
// (16-bit, zero-padded) — and builds the warp's operand fragments of both (rows: its 16
// voxels from vr; columns: channels) in xa and dya. Returns vr.
template <typename Sh, i64 Pitch, typename T>
int mlpGradTile(unsigned (&xa)[Sh::Cp / 16][4], unsigned (&dya)[Sh::Cop / 16][4], T *xs,
                T *dys, const T *x, const T *dy, i64 n, int s0, int warp, int g, int q) {
  mlpLoad<Sh::C, Sh::Cp, Sh::S, Pitch>(xs, x, n, s0);
  mlpLoad<Sh::Co, Sh::Cop, Sh::S, Pitch>(dys, dy, n, s0);
  __syncthreads();
  const int vr = warp * 16 + g;
  loadColumnsA<Sh::Cp / 16, Pitch>(xa, xs, vr, q);
  loadColumnsA<Sh::Cop / 16, Pitch>(dya, dys, vr, q);
  return vr;
}

// After mlpExpand for chunk ec: dg = W2ᵀ·dy (two 16×8 tiles) and dh = act'(h, dg) in f32
// (zero beyond E), with its operand fragment dha. `w2rows`: the address of the chunk's W2ᵀ
// row g (row pitch Pitch).
template <i64 E, int KC, int Pitch, typename T, typename Body>
void mlpActGrad(float (&dh)[2][4], unsigned (&dha)[4], const float (&h)[2][4],
                const unsigned (&dya)[KC][4], const T *w2rows, int ec, int q) {
  float dg[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
  mmaTilePair<KC, Pitch>(dg, dya, w2rows, q);
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float u = h[nt][j], v = dg[nt][j];
      dh[nt][j] = ec * 16 + nt * 8 + 2 * q + (j & 1) < E ? Body::actGrad(u, v) : 0.0f;
    }
  dha[0] = pack2<T>(dh[0][0], dh[0][1]);
  dha[1] = pack2<T>(dh[0][2], dh[0][3]);
  dha[2] = pack2<T>(dh[1][0], dh[1][1]);
  dha[3] = pack2<T>(dh[1][2], dh[1][3]);
}

// The tile's dx from the warps' fragments acc through shared `out` [Cp][tile] to dx
// (N×C×S), along the voxels.
template <typename Sh, typename DX>
void mlpStoreDx(DX *dx, float *out, const float (&acc)[Sh::Cp / 8][4], i64 n, int s0, int vr,
                int q) {
  storeColumnsD<Sh::Cp / 8, kMlpTile>(out, acc, vr, q);
  __syncthreads();
  for (int i = threadIdx.x; i < Sh::C * kMlpTile; i += blockDim.x) {
    const int c = i / kMlpTile, s = s0 + i % kMlpTile;
    if (s < Sh::S)
      dx[(n * Sh::C + c) * Sh::S + s] = out[i];
  }
}

// The backward in one kernel (all weights in shared memory beside a tile, the weight
// gradients' accumulators in registers): no scratch, and no expansion in device memory. A
// block stages the weights once and takes tiles blockIdx.x, + gridDim.x, ...; per tile its
// warps recompute h and dg, give dh and dx (as mlpGradInput does), and pass act(h) and dh
// through shared memory, a stage of SE expanded channels at a time, to the products over the
// tile's voxels that accumulate dW2 = dy·act(h)ᵀ, dW1 = dh·xᵀ and db1 = dh·1 in registers
// (the stage's output fragments dealt to the warps in turn: Slots each). Each block writes
// its sums as part blockIdx.x of Parts: parts[o * Parts + blockIdx.x] for output element o
// of dW2 [Co][E], dW1 [E][C], db1 [E] in turn.
template <i64 Ep, i64 Cp, i64 Cop, i64 Stages> struct MlpGradStages {
  static constexpr i64 SE = (Ep / 16 + Stages - 1) / Stages * 16; // expanded channels a stage
  static constexpr i64 F2 = Cop / 16 * (SE / 8); // dW2 fragments of a stage: Co rows, SE columns
  static constexpr i64 F1 = SE / 16 * (Cp / 8);  // dW1: SE rows, C columns
  static constexpr i64 F = F2 + F1 + SE / 16;    // and db1: SE rows, one column
  static constexpr i64 slots = (F + kMlpWarps - 1) / kMlpWarps;
};

template <typename Sh, typename T, bool HasDx, i64 Stages, i64 Parts, typename Body, typename DX>
void mlpGradResident(const Body &body, float *parts, DX *dx, const T *x, const T *dy,
                     const T *w1p, const T *w1t, const T *w2t) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  constexpr i64 Cp = Sh::Cp, Ep = Sh::Ep, Cop = Sh::Cop, E = Sh::E;
  constexpr i64 TP = kMlpTile + 8, P1 = Cp + 8, P3 = Cop + 8, PE = Ep + 8;
  using St = MlpGradStages<Ep, Cp, Cop, Stages>;
  constexpr i64 SE = St::SE, F2 = St::F2, F1 = St::F1, F = St::F, slots = St::slots;
  constexpr i64 weightsHalf = Ep * P1 + Ep * P3 + Cp * PE; // W1, W2ᵀ, W1ᵀ (16-bit)
  constexpr i64 regionHalf = mlpMax((Cp + Cop) * TP + 2 * SE * TP, Cp * kMlpTile * 2);
  alignas(16) __shared__ float smem[(weightsHalf + regionHalf) / 2];
  T *w1s = (T *)smem;         // [Ep][Cp + 8]: W1
  T *w2ts = w1s + Ep * P1;    // [Ep][Cop + 8]: W2ᵀ
  T *w1ts = w2ts + Ep * P3;   // [Cp][Ep + 8]: W1ᵀ
  T *xs = w1ts + Cp * PE;     // [Cp][tile + 8]
  T *dys = xs + Cp * TP;      // [Cop][tile + 8]
  T *actS = dys + Cop * TP;   // [SE][tile + 8]: act(h) of a stage
  T *dhS = actS + SE * TP;    // [SE][tile + 8]: dh of a stage
  float *out = (float *)xs;   // [Cp][tile]: dx, once the stages are done
  mlpStage<Ep, Cp, P1, Cp, Ep, Cp>(w1s, w1p, 0, 0);
  mlpStage<Ep, Cop, P3, Cop, Ep, Cop>(w2ts, w2t, 0, 0);
  mlpStage<Cp, Ep, PE, Ep, Cp, Ep>(w1ts, w1t, 0, 0);
  float gacc[Stages][slots][4];
#pragma unroll
  for (int st = 0; st < Stages; ++st)
#pragma unroll
    for (int sl = 0; sl < slots; ++sl)
      gacc[st][sl][0] = gacc[st][sl][1] = gacc[st][sl][2] = gacc[st][sl][3] = 0.0f;
  for (i64 tile = blockIdx.x; tile < Sh::N * Sh::tiles; tile += gridDim.x) {
    const i64 n = tile / Sh::tiles;
    const int s0 = (int)(tile % Sh::tiles) * kMlpTile;
    __syncthreads(); // the weights are staged, the last tile's dx read
    unsigned xa[Cp / 16][4], dya[Cop / 16][4];
    const int vr = mlpGradTile<Sh, TP>(xa, dya, xs, dys, x, dy, n, s0, warp, g, q);
    float acc[Cp / 8][4];
#pragma unroll
    for (int j = 0; j < Cp / 8; ++j)
      acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
    for (int st = 0; st < Stages; ++st) {
#pragma unroll 1 // (unrolled, the chunks' live values spill)
      for (int cl = 0; cl < SE / 16; ++cl) {
        const int ec = st * (SE / 16) + cl;
        if (ec >= Ep / 16)
          break;
        float h[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
        float a[2][4], dh[2][4];
        unsigned ga[4], dha[4];
        mlpExpand<E, Cp / 16, P1>(h, a, ga, xa, w1s + (ec * 16 + g) * P1, ec, q, body);
        mlpActGrad<E, Cop / 16, P3, T, Body>(dh, dha, h, dya, w2ts + (ec * 16 + g) * P3, ec, q);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int e = cl * 16 + nt * 8 + 2 * q + (j & 1), v = vr + (j >> 1) * 8;
            actS[e * TP + v] = a[nt][j];
            dhS[e * TP + v] = dh[nt][j];
          }
        if constexpr (HasDx)
          mmaColumns<Cp / 8, PE>(acc, dha, w1ts, ec * 16, g, q);
      }
      __syncthreads(); // the stage's act(h) and dh are written
      // The stage's products over the tile's voxels: fragment f of dW2 (A: dy's rows, B:
      // act(h)'s), dW1 (dh's, x's) or db1 (dh's, a column of ones).
#pragma unroll
      for (int sl = 0; sl < slots; ++sl) {
        // A warp without a fragment in this slot repeats the last one (its sums are not
        // written): every warp runs the same products, as the CPU emulation's mma needs.
        const int f = warp + kMlpWarps * sl < F ? warp + kMlpWarps * sl : F - 1;
        const T *ar, *br = nullptr;
        if (f < F2) {
          ar = dys + (f / (SE / 8) * 16 + g) * TP;
          br = actS + (f % (SE / 8) * 8 + g) * TP;
        } else if (f < F2 + F1) {
          ar = dhS + ((f - F2) / (Cp / 8) * 16 + g) * TP;
          br = xs + ((f - F2) % (Cp / 8) * 8 + g) * TP;
        } else {
          ar = dhS + ((f - (F2 + F1)) * 16 + g) * TP;
        }
        const unsigned one = g == 0 ? pack2<T>(1.0f, 1.0f) : 0u;
#pragma unroll
        for (int k0 = 0; k0 < kMlpTile; k0 += 16) {
          const T *r = ar + k0 + 2 * q;
          const unsigned a[4] = {*(const unsigned *)r, *(const unsigned *)(r + 8 * TP),
                                 *(const unsigned *)(r + 8), *(const unsigned *)(r + (8 * TP + 8))};
          const unsigned b[2] = {br ? *(const unsigned *)(br + k0 + 2 * q) : one,
                                 br ? *(const unsigned *)(br + k0 + 2 * q + 8) : one};
          mma16816<T>(gacc[st][sl], a, b);
        }
      }
      __syncthreads(); // the stage's act(h) and dh are read
    }
    if constexpr (HasDx)
      mlpStoreDx<Sh>(dx, out, acc, n, s0, vr, q);
  }
  // The block's sums, one part of each output (zeros for a block without a tile).
#pragma unroll
  for (int st = 0; st < Stages; ++st)
#pragma unroll
    for (int sl = 0; sl < slots; ++sl) {
      const int f = warp + kMlpWarps * sl;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = g + (j >> 1) * 8, col = 2 * q + (j & 1);
        i64 o = -1;
        if (f < F2) {
          const int co = f / (SE / 8) * 16 + row, e = st * SE + f % (SE / 8) * 8 + col;
          if (co < Sh::Co && e < E)
            o = (i64)co * E + e;
        } else if (f < F2 + F1) {
          const int e = st * SE + (f - F2) / (Cp / 8) * 16 + row, c = (f - F2) % (Cp / 8) * 8 + col;
          if (e < E && c < Sh::C)
            o = Sh::Co * E + (i64)e * Sh::C + c;
        } else if (f < F) {
          const int e = st * SE + (f - (F2 + F1)) * 16 + row;
          if (e < E && col == 0)
            o = Sh::Co * E + E * Sh::C + e;
        }
        if (o >= 0)
          parts[o * Parts + blockIdx.x] = gacc[st][sl][j];
      }
    }
}

// mlpGradResident with TS ≥ 2 tiles in flight: each tile's x and dy go to one of TS swizzled
// buffers [TS][Cp + Cop][64] (tile.cuh: swizzle64) by cp.async, issued TS - 1 tiles ahead
// (one group per tile, empty past the last), so that the copies of the next tiles run while
// this one's expansion is recomputed and its products summed. act(h) and dh of a stage pass
// through their own region as before, and dx's f32 tile takes that region's place once the
// stages are done. The arithmetic and the parts are mlpGradResident's.
template <typename Sh, typename T, bool HasDx, i64 Stages, i64 Parts, int TS, typename Body,
          typename DX>
void mlpGradPipelined(const Body &body, float *parts, DX *dx, const T *x, const T *dy,
                      const T *w1p, const T *w1t, const T *w2t) {
  static_assert(TS >= 2, "a pipeline keeps two or more tiles in flight");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  constexpr i64 Cp = Sh::Cp, Ep = Sh::Ep, Cop = Sh::Cop, E = Sh::E;
  constexpr i64 TP = kMlpTile + 8, P1 = Cp + 8, P3 = Cop + 8, PE = Ep + 8;
  using St = MlpGradStages<Ep, Cp, Cop, Stages>;
  constexpr i64 SE = St::SE, F2 = St::F2, F1 = St::F1, F = St::F, slots = St::slots;
  constexpr i64 weightsHalf = Ep * P1 + Ep * P3 + Cp * PE; // W1, W2ᵀ, W1ᵀ (16-bit)
  constexpr i64 tileHalf = (Cp + Cop) * kMlpTile;          // a buffer: x's rows, then dy's
  constexpr i64 stageHalf = mlpMax(2 * SE * TP, Cp * kMlpTile * 2);
  alignas(16) __shared__ float smem[(weightsHalf + TS * tileHalf + stageHalf) / 2];
  T *w1s = (T *)smem;             // [Ep][Cp + 8]: W1
  T *w2ts = w1s + Ep * P1;        // [Ep][Cop + 8]: W2ᵀ
  T *w1ts = w2ts + Ep * P3;       // [Cp][Ep + 8]: W1ᵀ
  T *tiles = w1ts + Cp * PE;      // [TS][Cp + Cop][64], swizzled
  T *actS = tiles + TS * tileHalf; // [SE][tile + 8]: act(h) of a stage
  T *dhS = actS + SE * TP;        // [SE][tile + 8]: dh of a stage
  float *out = (float *)actS;     // [Cp][tile]: dx, once the stages are done
  mlpStage<Ep, Cp, P1, Cp, Ep, Cp>(w1s, w1p, 0, 0);
  mlpStage<Ep, Cop, P3, Cop, Ep, Cop>(w2ts, w2t, 0, 0);
  mlpStage<Cp, Ep, PE, Ep, Cp, Ep>(w1ts, w1t, 0, 0);
  float gacc[Stages][slots][4];
#pragma unroll
  for (int st = 0; st < Stages; ++st)
#pragma unroll
    for (int sl = 0; sl < slots; ++sl)
      gacc[st][sl][0] = gacc[st][sl][1] = gacc[st][sl][2] = gacc[st][sl][3] = 0.0f;
  constexpr i64 total = Sh::N * Sh::tiles;
  auto issue = [&](int buffer, i64 tile) {
    if (tile < total) {
      mlpLoadTile<Sh::C, Cp, Sh::S>(tiles + buffer * tileHalf, x, tile);
      mlpLoadTile<Sh::Co, Cop, Sh::S>(tiles + buffer * tileHalf + Cp * kMlpTile, dy, tile);
    }
    cpAsyncCommit();
  };
  for (int k = 0; k < TS - 1; ++k)
    issue(k, blockIdx.x + (i64)k * gridDim.x);
  int k = 0;
  for (i64 tile = blockIdx.x; tile < total; tile += gridDim.x, ++k) {
    const i64 n = tile / Sh::tiles;
    const int s0 = (int)(tile % Sh::tiles) * kMlpTile;
    cpAsyncWait<TS - 2>();
    __syncthreads(); // tile k has landed for every thread; tile k - 1's buffer and dx are read
    issue((k + TS - 1) % TS, tile + (i64)(TS - 1) * gridDim.x);
    const T *xs = tiles + (k % TS) * tileHalf, *dys = xs + Cp * kMlpTile;
    const int vr = warp * 16 + g;
    unsigned xa[Cp / 16][4], dya[Cop / 16][4];
    loadColumnsASwizzled<Cp / 16>(xa, xs, vr, q);
    loadColumnsASwizzled<Cop / 16>(dya, dys, vr, q);
    float acc[Cp / 8][4];
#pragma unroll
    for (int j = 0; j < Cp / 8; ++j)
      acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
    for (int st = 0; st < Stages; ++st) {
#pragma unroll 1 // (unrolled, the chunks' live values spill)
      for (int cl = 0; cl < SE / 16; ++cl) {
        const int ec = st * (SE / 16) + cl;
        if (ec >= Ep / 16)
          break;
        float h[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
        float a[2][4], dh[2][4];
        unsigned ga[4], dha[4];
        mlpExpand<E, Cp / 16, P1>(h, a, ga, xa, w1s + (ec * 16 + g) * P1, ec, q, body);
        mlpActGrad<E, Cop / 16, P3, T, Body>(dh, dha, h, dya, w2ts + (ec * 16 + g) * P3, ec, q);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int e = cl * 16 + nt * 8 + 2 * q + (j & 1), v = vr + (j >> 1) * 8;
            actS[e * TP + v] = a[nt][j];
            dhS[e * TP + v] = dh[nt][j];
          }
        if constexpr (HasDx)
          mmaColumns<Cp / 8, PE>(acc, dha, w1ts, ec * 16, g, q);
      }
      __syncthreads(); // the stage's act(h) and dh are written
      // The stage's products over the tile's voxels: fragment f of dW2 (A: dy's rows, B:
      // act(h)'s), dW1 (dh's, x's) or db1 (dh's, a column of ones). Rows of x and dy are read
      // from the swizzled buffer, those of act(h) and dh from their padded rows.
#pragma unroll
      for (int sl = 0; sl < slots; ++sl) {
        // A warp without a fragment in this slot repeats the last one (its sums are not
        // written): every warp runs the same products, as the CPU emulation's mma needs.
        const int f = warp + kMlpWarps * sl < F ? warp + kMlpWarps * sl : F - 1;
        const T *ar, *br = nullptr;
        int arow = 0, brow = 0; // rows of swizzled operands (ar / br then the tile's base)
        bool aSwizzled = false, bSwizzled = false;
        if (f < F2) {
          ar = dys;
          arow = f / (SE / 8) * 16 + g;
          aSwizzled = true;
          br = actS + (f % (SE / 8) * 8 + g) * TP;
        } else if (f < F2 + F1) {
          ar = dhS + ((f - F2) / (Cp / 8) * 16 + g) * TP;
          br = xs;
          brow = (f - F2) % (Cp / 8) * 8 + g;
          bSwizzled = true;
        } else {
          ar = dhS + ((f - (F2 + F1)) * 16 + g) * TP;
        }
        const unsigned one = g == 0 ? pack2<T>(1.0f, 1.0f) : 0u;
#pragma unroll
        for (int k0 = 0; k0 < kMlpTile; k0 += 16) {
          const int c = k0 + 2 * q;
          unsigned a[4];
          if (aSwizzled) {
            a[0] = *(const unsigned *)(ar + swizzle64(arow, c));
            a[1] = *(const unsigned *)(ar + swizzle64(arow + 8, c));
            a[2] = *(const unsigned *)(ar + swizzle64(arow, c + 8));
            a[3] = *(const unsigned *)(ar + swizzle64(arow + 8, c + 8));
          } else {
            const T *r = ar + c;
            a[0] = *(const unsigned *)r;
            a[1] = *(const unsigned *)(r + 8 * TP);
            a[2] = *(const unsigned *)(r + 8);
            a[3] = *(const unsigned *)(r + (8 * TP + 8));
          }
          unsigned b[2] = {one, one};
          if (bSwizzled) {
            b[0] = *(const unsigned *)(br + swizzle64(brow, c));
            b[1] = *(const unsigned *)(br + swizzle64(brow, c + 8));
          } else if (br) {
            b[0] = *(const unsigned *)(br + c);
            b[1] = *(const unsigned *)(br + c + 8);
          }
          mma16816<T>(gacc[st][sl], a, b);
        }
      }
      __syncthreads(); // the stage's act(h) and dh are read
    }
    if constexpr (HasDx)
      mlpStoreDx<Sh>(dx, out, acc, n, s0, vr, q);
  }
  cpAsyncWait<0>(); // (only empty groups are left)
  // The block's sums, one part of each output (zeros for a block without a tile).
#pragma unroll
  for (int st = 0; st < Stages; ++st)
#pragma unroll
    for (int sl = 0; sl < slots; ++sl) {
      const int f = warp + kMlpWarps * sl;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = g + (j >> 1) * 8, col = 2 * q + (j & 1);
        i64 o = -1;
        if (f < F2) {
          const int co = f / (SE / 8) * 16 + row, e = st * SE + f % (SE / 8) * 8 + col;
          if (co < Sh::Co && e < E)
            o = (i64)co * E + e;
        } else if (f < F2 + F1) {
          const int e = st * SE + (f - F2) / (Cp / 8) * 16 + row, c = (f - F2) % (Cp / 8) * 8 + col;
          if (e < E && c < Sh::C)
            o = Sh::Co * E + (i64)e * Sh::C + c;
        } else if (f < F) {
          const int e = st * SE + (f - (F2 + F1)) * 16 + row;
          if (e < E && col == 0)
            o = Sh::Co * E + E * Sh::C + e;
        }
        if (o >= 0)
          parts[o * Parts + blockIdx.x] = gacc[st][sl][j];
      }
    }
}

// The backward with the expanded channels split across warps (mlpGradChunks): warp w of a
// block of Ep / 16 warps owns expansion chunk w (expanded channels 16 w..16 w + 15) for every
// voxel of the block's tiles, VS voxels at a time: its h and dg are 16 × VS products whose B
// fragments come from the tile by ldmatrix .trans, and their accumulator fragments are, as
// they stand, the operands of the weight gradients' products over the voxels (act(h) as the
// B fragment of dW2 = dy·act(h)ᵀ, dh as the A fragment of dW1 = dh·xᵀ and db1 = dh·1): no
// expansion through shared memory for them, and each warp's sums are its own chunk's rows of
// dW1 and columns of dW2, in registers across the block's tiles. The warp's W1 and W2ᵀ rows
// stay in registers too. Only dx = W1ᵀ·dh sums across the chunks: dh goes to shared dhS
// [voxel][Ep + 8] and after a barrier the warps share the tile's dx fragments (A: W1ᵀ,
// staged once per block). Per tile two barriers, against the voxel split's two per stage,
// and VS / 8 independent products and VS / 2 activations a thread between them, which is
// what hides the latency the voxel split waits on (docs/perf.md). TS ≥ 2 tiles in flight as
// in mlpGradPipelined; the parts are laid out as mlpGradResident's. The warp's rows of W1
// and W2ᵀ stay in registers, or with WS (wide blocks, whose sums need the registers) in
// shared memory, read back each step. The shared memory is the launch's (dynamic: it may
// exceed the 48 KiB of a static array), SharedBytes as the generator sized it.
template <typename Sh, typename T, bool HasDx, i64 Parts, int TS, int VS, bool WS,
          i64 SharedBytes, typename Body, typename DX>
void mlpGradChunks(const Body &body, float *parts, DX *dx, const T *x, const T *dy,
                   const T *w1p, const T *w1t, const T *w2t) {
  static_assert(TS >= 2 && VS % 16 == 0 && kMlpTile % VS == 0, "tiles in flight, voxel steps");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  constexpr i64 Cp = Sh::Cp, Ep = Sh::Ep, Cop = Sh::Cop, E = Sh::E, PE = Ep + 8;
  constexpr i64 P1 = Cp + 8, P3 = Cop + 8;
  constexpr i64 tileHalf = (Cp + Cop) * kMlpTile; // a buffer: x's rows, then dy's (swizzled)
  constexpr i64 sharedHalf = TS * tileHalf + Cp * PE + kMlpTile * PE + (WS ? Ep * (P1 + P3) : 0);
  static_assert(SharedBytes >= 2 * sharedHalf, "the launch's shared memory is too small");
  MED_DYNAMIC_SHARED(float, smem, sharedHalf / 2);
  T *tiles = (T *)smem;          // [TS][Cp + Cop][64], swizzled
  T *w1ts = tiles + TS * tileHalf; // [Cp][Ep + 8]: W1ᵀ
  T *dhS = w1ts + Cp * PE;       // [64][Ep + 8]: the tile's dh, voxel by voxel
  T *w1s = dhS + kMlpTile * PE;  // with WS: [Ep][Cp + 8]: W1
  T *w2ts = w1s + Ep * P1;       // with WS: [Ep][Cop + 8]: W2ᵀ
  mlpStage<Cp, Ep, PE, Ep, Cp, Ep>(w1ts, w1t, 0, 0);
  if constexpr (WS) {
    mlpStage<Ep, Cp, P1, Cp, Ep, Cp>(w1s, w1p, 0, 0);
    mlpStage<Ep, Cop, P3, Cop, Ep, Cop>(w2ts, w2t, 0, 0);
  }
  // The warp's rows of W1 (16 × Cp) and W2ᵀ (16 × Cop) as A fragments (with WS: each step).
  const int e0 = warp * 16;
  unsigned w1a[Cp / 16][4], w2a[Cop / 16][4];
  if constexpr (!WS) {
#pragma unroll
    for (int kc = 0; kc < Cp / 16; ++kc) {
      const T *r = w1p + (e0 + g) * Cp + kc * 16 + 2 * q;
      w1a[kc][0] = *(const unsigned *)r;
      w1a[kc][1] = *(const unsigned *)(r + 8 * Cp);
      w1a[kc][2] = *(const unsigned *)(r + 8);
      w1a[kc][3] = *(const unsigned *)(r + 8 * Cp + 8);
    }
#pragma unroll
    for (int kc = 0; kc < Cop / 16; ++kc) {
      const T *r = w2t + (e0 + g) * Cop + kc * 16 + 2 * q;
      w2a[kc][0] = *(const unsigned *)r;
      w2a[kc][1] = *(const unsigned *)(r + 8 * Cop);
      w2a[kc][2] = *(const unsigned *)(r + 8);
      w2a[kc][3] = *(const unsigned *)(r + 8 * Cop + 8);
    }
  }
  // dW2's columns e0.. (rows: Cop / 16 tiles of 16, columns: two of 8), dW1's rows e0..
  // (columns: Cp / 8 tiles of 8), db1's (column 0 of a tile).
  float gw2[Cop / 16][2][4] = {}, gw1[Cp / 8][4] = {}, gb1[4] = {};
  const unsigned one = g == 0 ? pack2<T>(1.0f, 1.0f) : 0u;
  const unsigned ones[2] = {one, one};
  constexpr i64 total = Sh::N * Sh::tiles;
  // Where S is a multiple of 8, cp.async copies TS - 1 tiles ahead. Else (a row of a channel
  // is not 16-byte aligned) the next tile's pairs of voxels go to registers before a tile is
  // computed and to shared memory after, so that their loads wait on nothing.
  constexpr bool async = Sh::S % 8 == 0;
  static_assert(async || TS == 2, "the register prefetch fills one buffer ahead");
  constexpr int pairs = (Cp + Cop) * kMlpTile / 2, threads = Ep / 16 * 32;
  unsigned next[(pairs + threads - 1) / threads];
  auto prefetch = [&](i64 tile) {
    const i64 n = tile / Sh::tiles;
    const int s0 = (int)(tile % Sh::tiles) * kMlpTile;
#pragma unroll
    for (int j = 0; j < (pairs + threads - 1) / threads; ++j) {
      const int i = threadIdx.x + j * threads, r = i / (kMlpTile / 2), s = s0 + i % (kMlpTile / 2) * 2;
      const bool isX = r < Cp;
      const int c = isX ? r : r - Cp, rows = isX ? Sh::C : Sh::Co;
      const T *src = (isX ? x : dy) + (n * rows + c) * Sh::S + s;
      T lo, hi;
      lo.bits = hi.bits = 0;
      if (i < pairs && tile < total && c < rows) {
        if (s < Sh::S)
          lo = src[0];
        if (s + 1 < Sh::S)
          hi = src[1];
      }
      next[j] = pack2<T>(lo, hi);
    }
  };
  auto commit = [&](int buffer) {
#pragma unroll
    for (int j = 0; j < (pairs + threads - 1) / threads; ++j) {
      const int i = threadIdx.x + j * threads, r = i / (kMlpTile / 2), v = i % (kMlpTile / 2) * 2;
      if (i < pairs)
        *(unsigned *)(tiles + buffer * tileHalf + swizzle64(r, v)) = next[j];
    }
  };
  auto issue = [&](int buffer, i64 tile) {
    if (tile < total) {
      mlpLoadTile<Sh::C, Cp, Sh::S>(tiles + buffer * tileHalf, x, tile);
      mlpLoadTile<Sh::Co, Cop, Sh::S>(tiles + buffer * tileHalf + Cp * kMlpTile, dy, tile);
    }
    cpAsyncCommit();
  };
  if constexpr (async) {
    for (int k = 0; k < TS - 1; ++k)
      issue(k, blockIdx.x + (i64)k * gridDim.x);
  } else {
    prefetch(blockIdx.x);
    commit(0);
  }
  int k = 0;
  for (i64 tile = blockIdx.x; tile < total; tile += gridDim.x, ++k) {
    if constexpr (async)
      cpAsyncWait<TS - 2>();
    __syncthreads(); // tile k has landed for every thread; tile k - 1's buffer and dh are read
    if constexpr (async)
      issue((k + TS - 1) % TS, tile + (i64)(TS - 1) * gridDim.x);
    else
      prefetch(tile + gridDim.x);
    const T *xs = tiles + (k % TS) * tileHalf, *dys = xs + Cp * kMlpTile;
#pragma unroll 1
    for (int v0 = 0; v0 < kMlpTile; v0 += VS) {
      if constexpr (WS) {
#pragma unroll
        for (int kc = 0; kc < Cp / 16; ++kc)
          ldmatrixX4(w1a[kc], w1s + (e0 + (lane & 15)) * P1 + kc * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int kc = 0; kc < Cop / 16; ++kc)
          ldmatrixX4(w2a[kc], w2ts + (e0 + (lane & 15)) * P3 + kc * 16 + (lane >> 4) * 8);
      }
      // h = W1·x and dg = W2ᵀ·dy for the warp's 16 expanded channels × VS voxels.
      float h[VS / 8][4] = {}, dg[VS / 8][4] = {};
#pragma unroll
      for (int np = 0; np < VS / 16; ++np) {
        const int v = v0 + np * 16 + (lane >> 4) * 8, r = (lane >> 3 & 1) * 8 + (lane & 7);
#pragma unroll
        for (int kc = 0; kc < Cp / 16; ++kc) {
          unsigned b[4];
          ldmatrixX4Trans(b, xs + swizzle64(kc * 16 + r, v));
          mma16816<T>(h[2 * np], w1a[kc], b);
          mma16816<T>(h[2 * np + 1], w1a[kc], b + 2);
        }
#pragma unroll
        for (int kc = 0; kc < Cop / 16; ++kc) {
          unsigned b[4];
          ldmatrixX4Trans(b, dys + swizzle64(kc * 16 + r, v));
          mma16816<T>(dg[2 * np], w2a[kc], b);
          mma16816<T>(dg[2 * np + 1], w2a[kc], b + 2);
        }
      }
      // act(h) into h and dh into dg (zeros beyond E), f32.
#pragma unroll
      for (int nt = 0; nt < VS / 8; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int e = e0 + g + (j >> 1) * 8;
          const float u = e < E ? body.hidden(h[nt][j], e) : h[nt][j];
          const float a = Body::act(u), d = Body::actGrad(u, dg[nt][j]);
          h[nt][j] = e < E ? a : 0.0f;
          dg[nt][j] = e < E ? d : 0.0f;
        }
      // The weight gradients' products over the step's voxels, 16 at a time (k-step kv: the
      // accumulator tiles 2 kv and 2 kv + 1).
#pragma unroll
      for (int kv = 0; kv < VS / 16; ++kv) {
        const float(&a0)[4] = h[2 * kv], (&a1)[4] = h[2 * kv + 1];
        const float(&d0)[4] = dg[2 * kv], (&d1)[4] = dg[2 * kv + 1];
        const unsigned ab[2][2] = {{pack2<T>(a0[0], a0[1]), pack2<T>(a1[0], a1[1])},
                                   {pack2<T>(a0[2], a0[3]), pack2<T>(a1[2], a1[3])}};
        const unsigned da[4] = {pack2<T>(d0[0], d0[1]), pack2<T>(d0[2], d0[3]),
                                pack2<T>(d1[0], d1[1]), pack2<T>(d1[2], d1[3])};
        const int v = v0 + kv * 16;
#pragma unroll
        for (int mt = 0; mt < Cop / 16; ++mt) {
          unsigned ya[4]; // dy's rows mt·16.. as the A fragment (k: voxels)
          ldmatrixX4(ya, dys + swizzle64(mt * 16 + (lane & 15), v + (lane >> 4) * 8));
          mma16816<T>(gw2[mt][0], ya, ab[0]);
          mma16816<T>(gw2[mt][1], ya, ab[1]);
        }
#pragma unroll
        for (int ct = 0; ct < Cp / 16; ++ct) {
          unsigned xb[4]; // x's rows ct·16.. as two B fragments (k: voxels)
          ldmatrixX4(xb, xs + swizzle64(ct * 16 + (lane >> 4) * 8 + (lane & 7),
                                        v + (lane >> 3 & 1) * 8));
          mma16816<T>(gw1[2 * ct], da, xb);
          mma16816<T>(gw1[2 * ct + 1], da, xb + 2);
        }
        mma16816<T>(gb1, da, ones);
      }
      if constexpr (HasDx)
#pragma unroll
        for (int nt = 0; nt < VS / 8; ++nt)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            dhS[(v0 + nt * 8 + 2 * q + (j & 1)) * PE + e0 + g + (j >> 1) * 8] = dg[nt][j];
    }
    if constexpr (!async)
      commit((k + 1) % TS); // (the buffer tile k - 1 was computed from)
    if constexpr (HasDx) {
      __syncthreads(); // the tile's dh is written
      // dx = W1ᵀ·dh: units of 16 channels × 16 voxels dealt to the warps in turn (a warp
      // without a unit repeats the last one and stores nothing: every warp runs the same
      // products, as the CPU emulation's needs).
      constexpr int W = Ep / 16, U = Cp / 16 * (kMlpTile / 16), slots = (U + W - 1) / W;
      const i64 n = tile / Sh::tiles;
      const int s0 = (int)(tile % Sh::tiles) * kMlpTile;
#pragma unroll
      for (int sl = 0; sl < slots; ++sl) {
        const int u = warp + W * sl < U ? warp + W * sl : U - 1, mt = u / (kMlpTile / 16),
                  vp = u % (kMlpTile / 16);
        float acc[2][4] = {};
#pragma unroll
        for (int kc = 0; kc < Ep / 16; ++kc) {
          unsigned wa[4], hb[4];
          ldmatrixX4(wa, w1ts + (mt * 16 + (lane & 15)) * PE + kc * 16 + (lane >> 4) * 8);
          ldmatrixX4(hb, dhS + (vp * 16 + (lane >> 4) * 8 + (lane & 7)) * PE + kc * 16 +
                             (lane >> 3 & 1) * 8);
          mma16816<T>(acc[0], wa, hb);
          mma16816<T>(acc[1], wa, hb + 2);
        }
        if (warp + W * sl < U)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const int c = mt * 16 + g + (j >> 1) * 8, s = s0 + vp * 16 + nt * 8 + 2 * q + (j & 1);
              if (c < Sh::C && s < Sh::S)
                dx[(n * Sh::C + c) * Sh::S + s] = acc[nt][j];
            }
      }
    }
  }
  if constexpr (async)
    cpAsyncWait<0>(); // (only empty groups are left)
  // The warp's sums, one part of each of its outputs (zeros for a block without a tile).
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int row = g + (j >> 1) * 8, col = 2 * q + (j & 1);
#pragma unroll
    for (int mt = 0; mt < Cop / 16; ++mt)
#pragma unroll
      for (int nh = 0; nh < 2; ++nh) {
        const int co = mt * 16 + row, e = e0 + nh * 8 + col;
        if (co < Sh::Co && e < E)
          parts[((i64)co * E + e) * Parts + blockIdx.x] = gw2[mt][nh][j];
      }
    const int e = e0 + row;
#pragma unroll
    for (int ct = 0; ct < Cp / 8; ++ct) {
      const int c = ct * 8 + col;
      if (e < E && c < Sh::C)
        parts[(Sh::Co * E + (i64)e * Sh::C + c) * Parts + blockIdx.x] = gw1[ct][j];
    }
    if (e < E && col == 0)
      parts[(Sh::Co * E + E * Sh::C + e) * Parts + blockIdx.x] = gb1[j];
  }
}

// The slab path's dx kernel: the block's tile First + blockIdx.x, all expansion chunks in
// registers, kMlpStage expanded channels' weights (W1's rows, W2ᵀ's rows, W1ᵀ's columns) at
// a time in the tiles' place once the fragments are built; act(h) and dh of the tile go to
// the slab's scratch act, dh [tile][Ep][64] (16-bit) for mlpGradWeights.
template <typename Sh, typename T, bool HasDx, i64 First, typename Body, typename DX>
void mlpGradInput(const Body &body, DX *dx, T *act, T *dh, const T *x, const T *dy,
                  const T *w1p, const T *w1t, const T *w2t) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  constexpr i64 Cp = Sh::Cp, Ep = Sh::Ep, Cop = Sh::Cop, E = Sh::E;
  constexpr i64 P1 = Cp + 8, P2 = kMlpStage + 8, P3 = Cop + 8, stages = (Ep + kMlpStage - 1) / kMlpStage;
  constexpr i64 weightsHalf = kMlpStage * P1 + kMlpStage * P3 + Cp * P2;
  alignas(16) __shared__ float smem[mlpMax(mlpMax((Cp + Cop) * kMlpTile / 2, Cp * kMlpTile), (weightsHalf + 1) / 2)];
  T *xs = (T *)smem;                 // [Cp][tile]
  T *dys = xs + Cp * kMlpTile;       // [Cop][tile]
  T *w1s = (T *)smem;                // [stage][Cp + 8]
  T *w2ts = w1s + kMlpStage * P1;    // [stage][Cop + 8]
  T *w1ts = w2ts + kMlpStage * P3;   // [Cp][stage + 8]
  const i64 tile = First + blockIdx.x; // of this slab
  const i64 n = tile / Sh::tiles;
  const int s0 = (int)(tile % Sh::tiles) * kMlpTile;
  T *actT = act + (i64)blockIdx.x * (Ep * kMlpTile); // [Ep][tile]
  T *dhT = dh + (i64)blockIdx.x * (Ep * kMlpTile);
  unsigned xa[Cp / 16][4], dya[Cop / 16][4];
  const int vr = mlpGradTile<Sh, kMlpTile>(xa, dya, xs, dys, x, dy, n, s0, warp, g, q);
  float acc[Cp / 8][4];
#pragma unroll
  for (int j = 0; j < Cp / 8; ++j)
    acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  for (int st = 0; st < stages; ++st) {
    __syncthreads(); // the tiles or the last stage's weights are read
    mlpStage<kMlpStage, Cp, P1, Cp, Ep, Cp>(w1s, w1p, st * kMlpStage, 0);
    mlpStage<kMlpStage, Cop, P3, Cop, Ep, Cop>(w2ts, w2t, st * kMlpStage, 0);
    mlpStage<Cp, kMlpStage, P2, Ep, Cp, Ep>(w1ts, w1t, 0, st * kMlpStage);
    __syncthreads();
#pragma unroll
    for (int cl = 0; cl < kMlpStage / 16; ++cl) {
      const int ec = st * (kMlpStage / 16) + cl;
      if (ec >= Ep / 16)
        break;
      float h[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
      float a[2][4], d[2][4];
      unsigned ga[4], dha[4];
      mlpExpand<E, Cp / 16, P1>(h, a, ga, xa, w1s + (cl * 16 + g) * P1, ec, q, body);
      mlpActGrad<E, Cop / 16, P3, T, Body>(d, dha, h, dya, w2ts + (cl * 16 + g) * P3, ec, q);
      // act(h) and dh of the chunk to scratch: rows e, columns the tile's voxels
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int e = ec * 16 + nt * 8 + 2 * q + (j & 1), v = vr + (j >> 1) * 8;
          actT[e * kMlpTile + v] = a[nt][j];
          dhT[e * kMlpTile + v] = d[nt][j];
        }
      mmaColumns<Cp / 8, P2>(acc, dha, w1ts, cl * 16, g, q);
    }
  }
  if constexpr (HasDx) {
    __syncthreads(); // the weights are read: dx takes their place
    mlpStoreDx<Sh>(dx, smem, acc, n, s0, vr, q);
  }
}

// An operand of mlpGradWeights: an activation [N][Rows][S] or a slab's scratch
// [tile][Rows][64] (ScratchTiles), with Ones: a row of ones after its rows (a bias gradient
// as one more column).
template <i64 Rows_, bool ScratchTiles_, bool Ones_> struct MlpOperand {
  static constexpr i64 Rows = Rows_;
  static constexpr bool ScratchTiles = ScratchTiles_, Ones = Ones_;
};

// Loads rows [r0, r0 + 64) of operand O (`src`) at the block's tile into shared `dst`
// [64][kMlpTile + 8] (16-bit): at sample n from voxel s0, or at the slab's tile `local`;
// zeros beyond its rows and S, and with O::Ones a row of ones (within S) after its rows.
template <typename O, i64 S, typename T>
void mlpGemmLoad(T *dst, const T *src, int r0, i64 n, int s0, i64 local) {
  constexpr i64 tile = kMlpTile, TP = kMlpTile + 8;
  if constexpr (O::ScratchTiles) {
    for (int i = threadIdx.x; i < tile * tile / 8; i += blockDim.x) {
      const int r = i / (tile / 8), c = (i % (tile / 8)) * 8, row = r0 + r;
      Vec<T, 8> v;
      if (row < O::Rows) {
        v = vload<8>(src + ((i64)local * O::Rows + row) * tile + c);
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k)
          v[k].bits = 0;
      }
      vstore<8>(dst + r * TP + c, v);
    }
  } else if constexpr (S % 8 == 0) { // 16-byte vectors: a vector lies wholly inside or outside S
    for (int i = threadIdx.x; i < tile * tile / 8; i += blockDim.x) {
      const int r = i / (tile / 8), c = (i % (tile / 8)) * 8, row = r0 + r, s = s0 + c;
      Vec<T, 8> v;
      if (row < O::Rows && s < S) {
        v = vload<8>(src + (n * O::Rows + row) * S + s);
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k)
          v[k] = O::Ones && row == O::Rows && s < S ? 1.0f : 0.0f;
      }
      vstore<8>(dst + r * TP + c, v);
    }
  } else {
    for (int i = threadIdx.x; i < tile * tile; i += blockDim.x) {
      const int r = i / tile, c = i % tile, row = r0 + r, s = s0 + c;
      dst[r * TP + c] = row < O::Rows && s < S ? (float)src[(n * O::Rows + row) * S + s]
                        : O::Ones && row == O::Rows && s < S ? 1.0f : 0.0f;
    }
  }
}

// Partial sums over a slab's tiles (Count from First) of out[m][n] = Σ_k A[m][k]·B[n][k]
// (k: voxels; M × Nc): a block owns a 64×64 tile of the output and part blockIdx.x / (its
// tiles) of PerSlab, which takes the slab's tiles part, + PerSlab, ...; warp w a 32×32
// quarter (two 16-row by four 8-column fragments); a tile of 64 voxels is four k-steps.
// Element (m, n) goes to parts[Index::at(m, n) * Parts + PartBase + part].
template <typename A, typename B, i64 M, i64 Nc, i64 S, i64 First, i64 Count, i64 PartBase,
          i64 PerSlab, i64 Parts, typename Index, typename T>
void mlpGradWeights(float *parts, const T *a0, const T *b0) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  constexpr i64 TP = kMlpTile + 8, mTiles = (M + 63) / 64, nTiles = (Nc + 63) / 64;
  constexpr i64 tiles = (S + kMlpTile - 1) / kMlpTile;
  alignas(16) __shared__ T as[64 * TP], bs[64 * TP];
  const int mt = blockIdx.x % mTiles, nt = (blockIdx.x / mTiles) % nTiles;
  const int part = blockIdx.x / (mTiles * nTiles);
  const int m0 = mt * 64 + (warp >> 1) * 32, n0 = nt * 64 + (warp & 1) * 32;
  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
  for (i64 local = part; local < Count; local += PerSlab) {
    const i64 tile = First + local;
    const i64 n = tile / tiles;
    const int s0 = (int)(tile % tiles) * (i64)kMlpTile;
    __syncthreads(); // the last tile is read
    mlpGemmLoad<A, S>(as, a0, mt * 64, n, s0, local);
    mlpGemmLoad<B, S>(bs, b0, nt * 64, n, s0, local);
    __syncthreads();
#pragma unroll
    for (int k0 = 0; k0 < (i64)kMlpTile; k0 += 16) {
      unsigned a[2][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const T *r = as + ((warp >> 1) * 32 + i * 16 + g) * TP + k0 + 2 * q;
        a[i][0] = *(const unsigned *)r;
        a[i][1] = *(const unsigned *)(r + 8 * TP);
        a[i][2] = *(const unsigned *)(r + 8);
        a[i][3] = *(const unsigned *)(r + (8 * TP + 8));
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const T *r = bs + ((warp & 1) * 32 + j * 8 + g) * TP + k0 + 2 * q;
        b[j][0] = *(const unsigned *)r;
        b[j][1] = *(const unsigned *)(r + 8);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          mma16816<T>(acc[i][j], a[i], b[j]);
    }
  }
  // A part without a tile (the last slab can be short) writes its zeros all the same.
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = m0 + i * 16 + g + (e >> 1) * 8, n = n0 + j * 8 + 2 * q + (e & 1);
        if (m < M && n < Nc)
          parts[Index::at(m, n) * Parts + PartBase + part] = acc[i][j][e];
      }
}

#endif // MED_KERNELS_MLP_CUH
