// The tile library the tensor-core templates are built from (docs/architecture.md): a warp's
// operand and accumulator fragments of mma.sync m16n8k16 (prelude.cuh's mma16816), ldmatrix,
// and asynchronous global→shared copies in a multi-stage pipeline (cp.async groups). Each
// piece has its CPU emulation beside it (#ifndef __CUDA_ARCH__), which keeps the GPU's data
// layout and timing rules (a copy lands only when its group is waited for), so that a wrong
// index or a missing wait shows in CI: test/cuda/tile.test runs every piece, and a wrong
// variant of each, under the emulation. A swizzled tile layout (swizzle64) keeps unpadded
// 64-voxel tiles free of bank conflicts for the fragment loads.
#ifndef MED_KERNELS_TILE_CUH
#define MED_KERNELS_TILE_CUH

// ---- mma.sync fragments (g = lane / 4, q = lane % 4; vr = the warp's row 16 w + g) ---------

// The warp's A fragments [KC][4] of K = 16 KC columns from shared `sh` laid out column by
// column: element (row, k) at sh[k * PITCH + row] (a tile of voxels, channels by rows).
template <int KC, int PITCH, typename T>
void loadColumnsA(unsigned (&a)[KC][4], const T *sh, int vr, int q) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    const int c = kc * 16 + 2 * q;
    a[kc][0] = pack2(sh[c * PITCH + vr], sh[(c + 1) * PITCH + vr]);
    a[kc][1] = pack2(sh[c * PITCH + vr + 8], sh[(c + 1) * PITCH + vr + 8]);
    a[kc][2] = pack2(sh[(c + 8) * PITCH + vr], sh[(c + 9) * PITCH + vr]);
    a[kc][3] = pack2(sh[(c + 8) * PITCH + vr + 8], sh[(c + 9) * PITCH + vr + 8]);
  }
}

// d[nt] += A · B_ntᵀ for the warp's two 16×8 tiles: A its fragments [KC][4], B_nt eight rows
// of K = 16 KC 16-bit elements in shared memory, row g of tile nt at rows + nt * 8 * PITCH
// (`rows` addresses the lane's row g of tile 0).
template <int KC, int PITCH, typename T>
void mmaTilePair(float (&d)[2][4], const unsigned (&a)[KC][4], const T *rows, int q) {
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int kc = 0; kc < KC; ++kc) {
      const T *wb = rows + nt * 8 * PITCH + kc * 16 + 2 * q;
      const unsigned b[2] = {*(const unsigned *)wb, *(const unsigned *)(wb + 8)};
      mma16816<T>(d[nt], a[kc], b);
    }
}

// The warp's accumulators [CT][4] (rows vr and vr + 8, 8 CT columns) into shared f32 `sh`
// column by column: element (row, c) at sh[c * PITCH + row] (loadColumnsA's layout).
template <int CT, int PITCH> void storeColumnsD(float *sh, const float (&d)[CT][4], int vr, int q) {
#pragma unroll
  for (int ct = 0; ct < CT; ++ct)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      sh[(ct * 8 + 2 * q + (j & 1)) * PITCH + vr + (j >> 1) * 8] = d[ct][j];
}

// ---- a swizzled tile: rows of 64 16-bit elements, unpadded -------------------------------

// Where element (r, c) of a tile of 64-element rows lies: the row's 16-byte chunk c / 8 is
// stored at chunk (c / 8) ^ (r % 8). The eight rows that one fragment load touches (rows g,
// or channels 2q, 2q + 1) then fall in distinct banks without padding the rows, and a 16-byte
// vector of 8 elements from a multiple of 8 stays whole (cp.async's unit).
constexpr int swizzle64(int r, int c) { return r * 64 + (((c >> 3) ^ (r & 7)) << 3) + (c & 7); }

// loadColumnsA for a swizzled tile: element (row, k) at sh[swizzle64(k, row)] (channels by
// rows of 64 voxels).
template <int KC, typename T>
void loadColumnsASwizzled(unsigned (&a)[KC][4], const T *sh, int vr, int q) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    const int c = kc * 16 + 2 * q;
    a[kc][0] = pack2(sh[swizzle64(c, vr)], sh[swizzle64(c + 1, vr)]);
    a[kc][1] = pack2(sh[swizzle64(c, vr + 8)], sh[swizzle64(c + 1, vr + 8)]);
    a[kc][2] = pack2(sh[swizzle64(c + 8, vr)], sh[swizzle64(c + 9, vr)]);
    a[kc][3] = pack2(sh[swizzle64(c + 8, vr + 8)], sh[swizzle64(c + 9, vr + 8)]);
  }
}

// ---- ldmatrix ----------------------------------------------------------------------------

#ifdef __CUDA_ARCH__
// The shared-window address of a pointer into shared memory (ldmatrix's and cp.async's).
unsigned sharedAddress(const void *p) {
  unsigned addr;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(addr) : "l"(p));
  return addr;
}
#endif

// Four 8×8 matrices of 16-bit elements from shared memory, as ldmatrix.sync.aligned.m8n8.x4:
// lane l gives the address of row l % 8 of matrix l / 8 (16 contiguous bytes) and receives in
// r[i] the elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix i. With the lanes'
// rows of a row-major 16×16 tile A — lane l: row l % 16, columns 8 (l / 16) on — r is
// mma16816's A fragment. Every lane of the warp calls it together.
#ifdef __CUDA_ARCH__
template <typename T> void ldmatrixX4(unsigned (&r)[4], const T *row) {
  const unsigned addr = sharedAddress(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
#else
// The CPU emulation: the warp's row addresses meet in shared staging; each lane reads its
// elements through them.
template <typename T> void ldmatrixX4(unsigned (&r)[4], const T *row) {
  static const T *rows[32][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  rows[warp][lane] = row;
  __syncthreads();
  for (int i = 0; i < 4; ++i) {
    const T *p = rows[warp][i * 8 + lane / 4] + 2 * (lane % 4);
    r[i] = pack2(p[0], p[1]);
  }
  __syncthreads();
}
#endif

// The same with .trans: lane l receives in r[i] the elements (2 (l % 4), l / 4) and
// (2 (l % 4) + 1, l / 4) of matrix i. With the lanes' rows of a row-major 16×16 tile B[k][n]
// — lane l: row 8 ((l / 8) % 2) + l % 8, columns 8 (l / 16) on — {r[0], r[1]} is mma16816's
// B fragment of columns 0..7 and {r[2], r[3]} that of columns 8..15 (k: the rows).
#ifdef __CUDA_ARCH__
template <typename T> void ldmatrixX4Trans(unsigned (&r)[4], const T *row) {
  const unsigned addr = sharedAddress(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
#else
template <typename T> void ldmatrixX4Trans(unsigned (&r)[4], const T *row) {
  static const T *rows[32][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  rows[warp][lane] = row;
  __syncthreads();
  for (int i = 0; i < 4; ++i) {
    const T *lo = rows[warp][i * 8 + 2 * (lane % 4)], *hi = rows[warp][i * 8 + 2 * (lane % 4) + 1];
    r[i] = pack2(lo[lane / 4], hi[lane / 4]);
  }
  __syncthreads();
}
#endif

// ---- asynchronous copies: cp.async groups --------------------------------------------------

// Copies 16 bytes from global `src` to shared `dst` without the thread waiting: the bytes
// are in `dst` once the group the copy was committed in is waited for (cpAsyncWait), and
// visible to the block's other threads after a __syncthreads that follows the wait. A
// pipeline of S stages issues the copies of stage k + S - 1 and commits them as one group,
// then waits until at most S - 1 groups are in flight, so stage k has landed.
#ifdef __CUDA_ARCH__
void cpAsync16(void *dst, const void *src) {
  const unsigned addr = sharedAddress(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(addr), "l"(src) : "memory");
}
// The same with zeros in place of the source where `full` is false (the copy's source size
// 0: nothing is read from `src`, which must still be a valid address).
void cpAsync16Zfill(void *dst, const void *src, bool full) {
  const unsigned addr = sharedAddress(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src),
               "r"(full ? 16 : 0)
               : "memory");
}
void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> void cpAsyncWait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
#else
// The CPU emulation: each thread's copies wait in a queue with their group and land (read
// their source and write their destination) only when a wait retires their group, so a
// stage read before its group is waited for holds what was there before.
struct CpAsyncQueue {
  void *dst[64];
  const void *src[64]; // null: 16 zero bytes (cpAsync16Zfill)
  int group[64];
  int count, committed;
};
inline CpAsyncQueue &cpAsyncQueue() {
  static CpAsyncQueue queues[1024];
  return queues[threadIdx.x];
}
inline void cpAsync16(void *dst, const void *src) {
  CpAsyncQueue &q = cpAsyncQueue();
  if (q.count == 64)
    __builtin_trap(); // more copies in flight than the emulation keeps
  q.dst[q.count] = dst;
  q.src[q.count] = src;
  q.group[q.count++] = q.committed;
}
inline void cpAsync16Zfill(void *dst, const void *src, bool full) {
  cpAsync16(dst, full ? src : nullptr);
}
inline void cpAsyncCommit() { ++cpAsyncQueue().committed; }
template <int N> void cpAsyncWait() {
  CpAsyncQueue &q = cpAsyncQueue();
  int kept = 0;
  for (int i = 0; i < q.count; ++i) {
    if (q.group[i] < q.committed - N) {
      if (q.src[i])
        memcpy(q.dst[i], q.src[i], 16);
      else
        memset(q.dst[i], 0, 16);
      continue;
    }
    q.dst[kept] = q.dst[i];
    q.src[kept] = q.src[i];
    q.group[kept++] = q.group[i];
  }
  q.count = kept;
}
#endif

#endif // MED_KERNELS_TILE_CUH
