// The `reduce` kernels (docs/architecture.md): med.reduce, the gradient of a max/min
// reduction and Σ x² (Reduce.cpp), and the split sums (KernelBuilder.cpp: a reduce of the
// innermost axes, the `reduce` fusion's sibling reductions, and the sums of the losses and
// norm gradients). Every sum is in an order fixed by the shapes alone: the same bits on every
// run, and each kernel the bits its former generated code gave.
//
// Compile-time parameters: the reduction's kind (ReduceKind), block sizes and part counts as
// template arguments, and a generated shape struct S per kernel with
//   static constexpr i64 outs, count;  outputs, terms per output
//   static i64 kept(i64 o);            the element of term 0 of output o (the kept axes)
//   static i64 term(i64 j);            the offset of term j from it (the reduced axes)
//   static constexpr bool run;         the reduced axes are one contiguous run: term(j) = j
// A split sum (splitSumTerms below) keeps its main loop here; the generated kernel holds the
// per-accumulator code around it: the output's first term, the accumulators, the row and
// term functors (the term: each accumulator's element function, e.g. a `reduce` fusion's
// sum, minimum and maximum of one read), their combination and the finish.
//
// The generator emits the shape struct, the functor and an extern "C" __global__ wrapper with
// the kernel's name and parameters that calls the template, rather than instantiating the
// templates through NVRTC name expressions: the CPU emulation (test/cuda/emu.h) compiles the
// same source as host C++ and finds kernels by their unmangled names.
#ifndef MED_KERNELS_REDUCE_CUH
#define MED_KERNELS_REDUCE_CUH

enum class ReduceKind { Sum, Mean, Max, Min };

// A reduction's identity, its step and its combining functor over a block (prelude.cuh's
// Add, Max, Min; torch.maximum / minimum: NaN wins).
template <ReduceKind K> struct Reduction {
  typedef Add Fn;
  static float init() { return 0.0f; }
  static float step(float acc, float v) { return acc + v; }
};
template <> struct Reduction<ReduceKind::Max> {
  typedef Max Fn;
  static float init() { return __int_as_float(0xff800000); }
  static float step(float acc, float v) { return maxNaN(acc, v); }
};
template <> struct Reduction<ReduceKind::Min> {
  typedef Min Fn;
  static float init() { return __int_as_float(0x7f800000); }
  static float step(float acc, float v) { return minNaN(acc, v); }
};
// The result of `count` terms' reduction `acc`: a mean divides.
template <ReduceKind K, i64 Count> float reduceResult(float acc) {
  if constexpr (K == ReduceKind::Mean)
    return acc / (float)Count;
  else
    return acc;
}

// Many outputs of a few terms each (a sum over a handful of channels): one thread per output
// (i < S::outs), its terms in order.
template <class S, ReduceKind K, typename Y, typename X>
void reduceRows(const i64 i, Y *__restrict__ y, const X *__restrict__ x) {
  typedef Reduction<K> R;
  const auto *base = x + S::kept(i);
  float acc = R::init();
  for (i64 j = 0; j < S::count; ++j) {
    const float v = base[S::term(j)];
    acc = R::step(acc, v);
  }
  y[i] = reduceResult<K, S::count>(acc);
}

// One block of B threads per output o, or with Parts > 1 per (output, part): the output's
// terms cut in Parts chunks of Chunk, whose partials y[o] reduceCombine combines.
template <class S, ReduceKind K, int B, i64 Parts, i64 Chunk, typename Y, typename X>
void reduceBlock(const i64 o, const int t, Y *__restrict__ y, const X *__restrict__ x) {
  typedef Reduction<K> R;
  __shared__ float sh[B];
  i64 out = o, begin = 0, end = S::count;
  if constexpr (Parts > 1) {
    const i64 part = o % Parts;
    out = o / Parts;
    begin = part * Chunk;
    end = begin + Chunk < S::count ? begin + Chunk : S::count;
  }
  // Reduced axes that are one contiguous run (a whole volume per channel) index it
  // directly: no 64-bit divisions per element.
  const auto *base = x + S::kept(out);
  float acc = R::init();
  for (i64 j = begin + t; j < end; j += B) {
    float v;
    if constexpr (S::run)
      v = base[j];
    else
      v = base[S::term(j)];
    acc = R::step(acc, v);
  }
  acc = blockReduce(acc, sh, typename R::Fn());
  if (t == 0) {
    if constexpr (Parts > 1)
      y[o] = acc;
    else
      y[o] = reduceResult<K, S::count>(acc);
  }
}

// The Parts partials p[o * Parts + j] of output o of Count terms, in a fixed tree.
template <ReduceKind K, int B, i64 Parts, i64 Count, typename Y>
void reduceCombine(const i64 o, const int t, Y *__restrict__ y, const float *__restrict__ p) {
  typedef Reduction<K> R;
  __shared__ float sh[B];
  float acc = R::init();
  for (i64 j = t; j < Parts; j += B) {
    const float v = p[o * Parts + j];
    acc = R::step(acc, v);
  }
  acc = blockReduce(acc, sh, typename R::Fn());
  if (t == 0) y[o] = reduceResult<K, Count>(acc);
}

// torch.amax/amin backward, one block per output o: count the ties with the extremum m[o],
// then share dy[o] evenly among them.
template <class S, int B>
void reduceExtremumGrad(const i64 o, const int t, float *__restrict__ dx, const float *__restrict__ x,
                        const float *__restrict__ m, const float *__restrict__ dy) {
  __shared__ float sh[B];
  const i64 base = S::kept(o);
  const float mx = m[o];
  float ties = 0.0f;
  for (i64 j = t; j < S::count; j += B)
    ties += x[base + S::term(j)] == mx ? 1.0f : 0.0f;
  ties = blockSum(ties, sh);
  const float share = dy[o] / ties;
  for (i64 j = t; j < S::count; j += B) {
    const i64 i = base + S::term(j);
    dx[i] = share * (x[i] == mx ? 1.0f : 0.0f);
  }
}

// Σ x² of N elements: chunk o of Chunk elements into p[o] (blocks of B threads) ...
template <i64 N, i64 Chunk, int B, typename X>
void sumSquaresPart(const i64 o, const int t, float *__restrict__ p, const X *__restrict__ x) {
  __shared__ float sh[B];
  const i64 begin = o * Chunk;
  const i64 end = begin + Chunk < N ? begin + Chunk : N;
  float acc = 0.0f;
  for (i64 j = begin + t; j < end; j += B) {
    const float v = (float)x[j];
    acc += v * v;
  }
  acc = blockReduce(acc, sh, Add());
  if (t == 0) p[o] = acc;
}
// ... then the Chunks partials in a fixed tree into y[0] (First), or added to it.
template <i64 Chunks, int B, bool First>
void sumSquaresTotal(const int t, float *__restrict__ y, const float *__restrict__ p) {
  __shared__ float sh[B];
  float acc = 0.0f;
  for (i64 j = t; j < Chunks; j += B) acc += p[j];
  acc = blockReduce(acc, sh, Add());
  if constexpr (First) {
    if (t == 0) y[0] = acc;
  } else {
    if (t == 0) y[0] += acc;
  }
}

// ---- split sums (KernelBuilder.cpp's splitSum) --------------------------------------------
//
// Each output's terms (row q, column i: term q·cols + i) cut into S::parts contiguous ranges
// of S::len terms, one block of S::block threads each; a thread walks its range row by row
// with S::unroll independent accumulators, which the generated kernel then combines over
// the thread (foldAccumulators) and the block, and a second kernel (combineParts) over the
// parts. S: static constexpr i64 parts, len, count, cols; static constexpr int unroll,
// block; typedef int|i64 Col (32-bit column arithmetic where a row allows it).
// The generated functors: row(q), the offset of row q from the output's first term ob, and
// term(e, u), the element function that adds the term at element e to accumulators [u].

// The terms of part `part` of the output whose term 0 is at ob.
template <class S, typename Row, typename Term>
void splitSumTerms(const int t, const i64 part, const i64 ob, Row row, Term term) {
  typedef typename S::Col Col;
  i64 j = part * S::len;
  const i64 jEnd = j + S::len < S::count ? j + S::len : S::count;
  while (j < jEnd) { // the part's piece of row q: columns [c0, cEnd)
    const i64 q = j / S::cols;
    const Col c0 = (Col)(j - q * S::cols);
    const Col cEnd = (Col)(jEnd - q * S::cols < S::cols ? jEnd - q * S::cols : S::cols);
    const i64 rb = ob + row(q);
    for (Col c = c0 + t; c < cEnd; c += S::unroll * S::block) {
#pragma unroll
      for (int u = 0; u < S::unroll; ++u) { // independent loads in flight
        if (c + u * S::block >= cEnd) break;
        const i64 e = rb + c + u * S::block;
        term(e, u);
      }
    }
    j = q * S::cols + cEnd;
  }
}

// A thread's accumulators a[0..U) combined with fn, then over the block (shared sh).
template <int U, typename T, typename W, typename F> W foldAccumulators(T (&a)[U], W *sh, F fn) {
  for (int u = 1; u < U; ++u) a[0] = fn(a[0], a[u]);
  return blockReduce((W)a[0], sh, fn);
}

// The Parts partials p[o * Parts + k] of output o combined with fn by a block of B threads.
template <i64 Parts, int B, typename W, typename F>
W combineParts(const i64 o, const int t, const W *__restrict__ p, W init, W *sh, F fn) {
  W acc = init;
  for (i64 k = t; k < Parts; k += B) acc = fn(acc, p[o * Parts + k]);
  return blockReduce(acc, sh, fn);
}

#endif // MED_KERNELS_REDUCE_CUH
