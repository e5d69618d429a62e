// Kernels that run each piece of the tile library (lib/Target/Cuda/kernels/tile.cuh), after
// prelude.cuh and tile.cuh, under the CPU emulation and by NVRTC for sm_90 (tile.test).

// One warp: D = A·Bᵀ for A 16×32 stored by columns (a[k * 16 + row]) and B 16×32 by rows
// (b[n * 32 + k]); D 16×16 stored by columns (d[n * 16 + row]).
extern "C" __global__ void tile_fragments(const bf16 *a, const bf16 *b, float *d) {
  alignas(16) __shared__ bf16 as[32 * 16], bs[16 * 32];
  __shared__ float ds[16 * 16];
  const int lane = threadIdx.x, g = lane / 4, q = lane % 4;
  for (int i = lane; i < 512; i += 32) {
    as[i] = a[i];
    bs[i] = b[i];
  }
  __syncthreads();
  unsigned fa[2][4];
  loadColumnsA<2, 16>(fa, as, g, q);
  float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
  mmaTilePair<2, 32>(acc, fa, bs + g * 32, q);
  storeColumnsD<2, 16>(ds, acc, g, q);
  __syncthreads();
  for (int i = lane; i < 256; i += 32)
    d[i] = ds[i];
}

// One warp: the A fragment of a row-major 16×16 tile (a[row * 16 + k]) by ldmatrix; lane l's
// registers in r[4 l + i].
extern "C" __global__ void tile_ldmatrix(const bf16 *a, unsigned *r) {
  alignas(16) __shared__ bf16 as[16 * 16];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32)
    as[i] = a[i];
  __syncthreads();
  unsigned f[4];
  ldmatrixX4(f, as + (lane % 16) * 16 + (lane / 16) * 8);
  for (int i = 0; i < 4; ++i)
    r[4 * lane + i] = f[i];
}

// One warp: the two B fragments of a row-major 16×16 tile (b[k * 16 + n]) by ldmatrix's
// .trans; lane l's registers in r[4 l + i].
extern "C" __global__ void tile_ldmatrix_trans(const bf16 *b, unsigned *r) {
  alignas(16) __shared__ bf16 bs[16 * 16];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32)
    bs[i] = b[i];
  __syncthreads();
  unsigned f[4];
  ldmatrixX4Trans(f, bs + ((lane / 8) % 2 * 8 + lane % 8) * 16 + (lane / 16) * 8);
  for (int i = 0; i < 4; ++i)
    r[4 * lane + i] = f[i];
}

// 128 threads: y[j] = Σ_k x[k][(j + 4) % 512] over kChunks chunks of 512 floats, each chunk
// brought to shared memory by a kStages-stage cp.async pipeline (16 bytes per thread); every
// thread reads its neighbour's copy, so the stage must have landed for the whole block.
constexpr int kChunks = 7, kStages = 3;
extern "C" __global__ void tile_pipeline(const float *x, float *y) {
  alignas(16) __shared__ float stage[kStages][512];
  const int t = threadIdx.x;
  for (int k = 0; k < kStages - 1; ++k) {
    cpAsync16(&stage[k][4 * t], x + k * 512 + 4 * t);
    cpAsyncCommit();
  }
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k = 0; k < kChunks; ++k) {
    const int next = k + kStages - 1; // into the slot read in the last iteration
    if (next < kChunks)
      cpAsync16(&stage[next % kStages][4 * t], x + next * 512 + 4 * t);
    cpAsyncCommit(); // empty groups keep the count: stage k is group k
    cpAsyncWait<kStages - 1>();
    __syncthreads(); // every thread's copies of stage k have landed
    for (int j = 0; j < 4; ++j)
      acc[j] += stage[k % kStages][(4 * t + 4 + j) % 512];
    __syncthreads(); // stage k is read before the next iteration refills its slot
  }
  cpAsyncWait<0>();
  for (int j = 0; j < 4; ++j)
    y[4 * t + j] = acc[j];
}

// 32 threads: a 16-channel × 64-voxel bf16 tile (channels by rows) copied by cp.async into a
// swizzled buffer (swizzle64), the rows from 12 on zero-filled (cpAsync16Zfill), then the
// warp's A fragments of voxels 48..63 (loadColumnsASwizzled): out[lane][4], then the buffer.
extern "C" __global__ void tile_swizzle(const bf16 *x, unsigned *out, bf16 *raw) {
  alignas(16) __shared__ bf16 tile[16 * 64];
  for (int i = threadIdx.x; i < 16 * 8; i += 32) {
    const int r = i / 8, c = (i % 8) * 8;
    cpAsync16Zfill(tile + swizzle64(r, c), x + r * 64 + c, r < 12);
  }
  cpAsyncCommit();
  cpAsyncWait<0>();
  __syncthreads();
  unsigned a[1][4];
  loadColumnsASwizzled<1>(a, tile, 48 + threadIdx.x / 4, threadIdx.x % 4);
  for (int i = 0; i < 4; ++i)
    out[threadIdx.x * 4 + i] = a[0][i];
  for (int i = threadIdx.x; i < 16 * 64; i += 32)
    raw[i] = tile[i];
}
