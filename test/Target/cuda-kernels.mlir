// RUN: medc compile %s --batch 2 --patch 5,6,7 --emit cuda --disable-pass=med-form-stencil-fusions -o - | FileCheck %s
// RUN: medc compile %s --batch 2 --patch 5,6,7 --emit cuda --disable-pass=med-shift-sum -o - | FileCheck %s --check-prefix=CONV
// RUN: medc compile %s --batch 2 --patch 5,6,7 --target cuda --emit plan --disable-pass=med-form-stencil-fusions -o - | %python %S/Inputs/plan_query.py /dev/stdin functions[0].cuda_plan.steps | FileCheck %s --check-prefix=PLAN
// RUN: medc compile %s --batch 2 --patch 5,6,7 --emit cuda -o - | FileCheck %s --check-prefix=FUSED
// RUN: medc compile %s --batch 2 --patch 5,6,7 --target cuda --emit plan -o - | %python %S/Inputs/plan_query.py /dev/stdin functions[0].cuda_plan.steps | FileCheck %s --check-prefix=FUSED-PLAN
// REQUIRES: nvrtc

// The CUDA source of a few ops (medc compile --emit cuda): one kernel per op, extern "C",
// shapes baked in as constants (batch 2, 4 channels, 5x6x7: 1680 elements, 210 per plane),
// reductions with a fixed-order block reduction, and a launch plan
// that binds parameters instead of running kernels for them.

med.parameter @"dw.weight" : tensor<4x1x3x3x3xf32> init uniform(27)
med.parameter @"n.weight" : tensor<4xf32> init ones
med.parameter @"n.bias" : tensor<4xf32> init zeros
med.parameter @"scale" : tensor<4x1x1x1xf32> init ones
func.func @net(%x: tensor<?x4x?x?x?xf32>) -> (tensor<?x4x?x?x?xf32>, tensor<4xf32>) {
  %dw = med.param @"dw.weight" : tensor<4x1x3x3x3xf32>
  %g = med.param @"n.weight" : tensor<4xf32>
  %be = med.param @"n.bias" : tensor<4xf32>
  %s = med.param @"scale" : tensor<4x1x1x1xf32>
  %1 = med.conv3d %x, %dw {groups = 4 : i64, padding = array<i64: 1, 1, 1>} : (tensor<?x4x?x?x?xf32>, tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  %2 = med.group_norm %1, %g, %be {groups = 2 : i64} : (tensor<?x4x?x?x?xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<?x4x?x?x?xf32>
  %3 = med.mul %2, %s : (tensor<?x4x?x?x?xf32>, tensor<4x1x1x1xf32>) -> tensor<?x4x?x?x?xf32>
  %4 = med.reduce mean %3 {axes = array<i64: 0, 2, 3, 4>} : (tensor<?x4x?x?x?xf32>) -> tensor<4xf32>
  return %3, %4 : tensor<?x4x?x?x?xf32>, tensor<4xf32>
}

// CHECK: template <typename T, typename F> T blockReduce(T v, T *sh, F f) {
// The depthwise convolution is a shift-sum (med-shift-sum), run by the stencil template
// (kernels/stencil.cuh): a generated epilogue (no bias, no statistics here) and a wrapper
// that instantiates shiftSumTile with the shape as template arguments (4 channels, 5x6x7,
// kernel 3x3x3, then the tile's threads and rows per thread) for one block per (sample,
// channel) and tile, 32 threads.
// CHECK: struct shift_sum_tile_{{[0-9a-f]+}}_epilogue {
// CHECK-NEXT: enum : bool { kStatistics = false, kAddend = false };
// CHECK-LABEL: extern "C" __global__ void __launch_bounds__(32) shift_sum_tile_{{[0-9a-f]+}}(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ w) {
// CHECK-NEXT: static_assert(ShiftSumTile<4, 5, 6, 7, 3, 3, 3, 2, 2, 8, 4>::THREADS == 32, "the launch's block");
// CHECK-NEXT: shiftSumTile<ShiftSumTile<4, 5, 6, 7, 3, 3, 3, 2, 2, 8, 4>, false>(y, x, w, shift_sum_tile_{{[0-9a-f]+}}_epilogue{});
// Without med-shift-sum, the generic convolution kernel: one thread per output, its index
// arithmetic in 32 bits (every index here fits).
// CONV-LABEL: extern "C" __global__ void __launch_bounds__(256) conv3d_{{[0-9a-f]+}}(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ w) {
// CONV: if (i >= 1680ll) return;
// CONV: const int e = (int)i;
// CONV: const auto* xc = x + (o0 * 4 + ci) * 210;
// CONV: const auto* wc = w + (o1 * 1 + cl) * 27;
// CONV: const int id = o2 * 1 - 1 + kd * 1;
// CONV: acc += wc[(kd * 3 + kh) * 3 + kw] * xc[(id * 6 + ih) * 7 + iw];
// CONV: y[i] = acc;

// Group norm: its statistics are med.group_norm_stats' (medrun/NormStats.h), per (sample,
// group) of 2 channels x 5x6x7 positions: one block per chunk (a box of at most 4 x 16 x 64:
// 2 per plane along D, 4 per group) writes the chunk's pivot (its mean), the mean of the
// deviations from it and their M2; one block per group merges its 4 chunks by Chan's formula.
// CHECK-LABEL: group_norm_chunks_{{[0-9a-f]+}}(float* __restrict__ parts, const float* __restrict__ x) {
// CHECK: const i64 c = o % 4ll, b = c % 2ll;
// CHECK: const int d0 = (int)(b / 1ll) * 4, h0 = (int)(b / 1ll % 1ll) * 16, w0 = (int)(b % 1ll) * 64;
// CHECK: const int ed = (5 - d0 < 4 ? 5 - d0 : 4), eh = (6 - h0 < 16 ? 6 - h0 : 16), ew = (7 - w0 < 64 ? 7 - w0 : 64);
// CHECK: const auto* p = x + ((o / 4ll) * 2ll + c / 2ll) * 210ll + ((i64)d0 * 6 + h0) * 7 + w0;
// CHECK: const float shift = blockSum(sum, sh) / (float)n; // the chunk's first mean
// CHECK: parts[3 * o + 2] = fmaxf(0.0f, d2 - d1 * d1 / (float)n);
// CHECK-LABEL: group_norm_merge_{{[0-9a-f]+}}(float* __restrict__ mean, float* __restrict__ rstd, float* __restrict__ parts) {
// CHECK: for (i64 w = 1; w < 4ll; w *= 2) {
// CHECK: chanMerge(qa[0], qa[1], qa[2], qb[0], qb[1], qb[2], m - a,
// CHECK: mean[o] = q[0] + q[1];
// CHECK: rstd[o] = 1.0f / sqrtf(q[2] / (float)420ll + 9.99999975e-06f);
// The map: 4 elements per thread, moved as one 16-byte vector, 32-bit indices. Planes of
// 210 are no whole vectors, so each element finds its channel.
// CHECK-LABEL: group_norm_{{[0-9a-f]+}}(
// CHECK: const int i0 = (int)(blockIdx.x * 256u + threadIdx.x) * 4;
// CHECK-NEXT: if (i0 >= 1680) return;
// CHECK: const auto element = [&](int k) {
// CHECK-NEXT: const int i = i0 + k;
// CHECK-NEXT: const int row = i / 210;
// CHECK: const int seg = (row / 4) * 2 + c / 2;
// CHECK: y_v[k] = (x_v[k] - mu) * scale + beta[c];
// CHECK: x_v = vload<4>(x + i0);
// CHECK: element(k);
// CHECK-NEXT: vstore(y + i0, y_v);

// With med-form-stencil-fusions (on by default) the shift-sum and the norm's statistics are
// one stencil fusion: the tile kernel (its tile, 4 x 8 x 8, a chunk of the statistics: 4
// slices, and all 6 rows and 7 columns) writes y and, through the generated epilogue's
// `statistics`, each tile's pivot, dev and M2 from its f32 outputs; the merge kernel combines the 2 tiles of each plane (the group's 4 chunks);
// group_norm_apply is the norm's map.
// FUSED: struct shift_sum_tile_stats_{{[0-9a-f]+}}_epilogue {
// FUSED-NEXT: enum : bool { kStatistics = true, kAddend = false };
// FUSED: void statistics(i64 o, int n, float shift, float d1, float d2) const {
// FUSED-NEXT: parts[3 * o] = shift;
// FUSED: parts[3 * o + 2] = fmaxf(0.0f, d2 - d1 * d1 / (float)n);
// FUSED-LABEL: shift_sum_tile_stats_{{[0-9a-f]+}}(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ parts) {
// FUSED: shiftSumTile<ShiftSumTile<4, 5, 6, 7, 3, 3, 3, 2, 2, 4, 4>, false>(y, x, w, shift_sum_tile_stats_{{[0-9a-f]+}}_epilogue{parts});
// FUSED-LABEL: group_norm_merge_{{[0-9a-f]+}}(
// FUSED: for (i64 w = 1; w < 4ll; w *= 2) {
// FUSED-LABEL: group_norm_{{[0-9a-f]+}}(
// FUSED: const float mu = mean[seg], scale = rstd[seg] * gamma[c];
// FUSED-PLAN: {"args":[5,0,1,12],"block":[16,1,1],"grid":[16,1,1],"kernel":"shift_sum_tile_stats_{{[0-9a-f]+}}","kind":"launch","op":4,"shared":0}
// FUSED-PLAN-NEXT: {"args":[6,7,12],"block":[32,1,1],"grid":[4,1,1],"kernel":"group_norm_merge_{{[0-9a-f]+}}","kind":"launch","op":4,"shared":0}
// FUSED-PLAN-NEXT: {"args":[8,5,6,7,2,3],"block":[256,1,1],"grid":[2,1,1],"kernel":"group_norm_{{[0-9a-f]+}}","kind":"launch","op":5,"shared":0}

// Broadcasting: the 4x1x1x1 operand is read at the channel index only, the other one as
// vectors.
// CHECK-LABEL: mul_{{[0-9a-f]+}}(
// CHECK: const int o1 = ot % 4; ot /= 4;
// CHECK: const float u = a_v[k], v = b[o1];
// CHECK: a_v = vload<4>(a + i0);

// Mean over axes 0, 2, 3, 4: one block per channel (420 terms: too few to split in parts),
// walking 2 rows of 210 contiguous terms with 8 accumulators per thread (reduce.cuh's
// splitSumTerms over the generated shape).
// CHECK-LABEL: struct reduce_mean_{{[0-9a-f]+}}_shape {
// CHECK: static constexpr i64 parts = 1ll, len = 420ll, count = 420ll, cols = 210ll;
// CHECK-NEXT: static constexpr int unroll = 8, block = 128;
// CHECK: reduce_mean_{{[0-9a-f]+}}(
// CHECK: const i64 out = o / 1ll, part = o % 1ll;
// CHECK: const i64 ob = k0 * 210ll;
// CHECK: splitSumTerms<reduce_mean_{{[0-9a-f]+}}_shape>(t, part, ob, [&](const i64 q) {
// CHECK: const i64 ro = r0 * 840ll;
// CHECK: a_acc[u] += x[e];
// CHECK: const float acc = foldAccumulators(a_acc, sh_f, Add());
// CHECK: y[o] = acc / (float)420ll;

// Values 0-8; buffer 9 is the status word (scratch 0), 10 and 11 the group statistics
// (mean, rstd), 12 the chunks' partials.
// PLAN: {"kind":"param","name":"dw.weight","op":0,"value":1}
// PLAN: {"kind":"param","name":"scale","op":3,"value":4}
// PLAN-NEXT: {"args":[5,0,1],"block":[32,1,1],"grid":[8,1,1],"kernel":"shift_sum_tile_{{[0-9a-f]+}}","kind":"launch","op":4,"shared":0}
// PLAN-NEXT: {"args":[12,5],"block":[256,1,1],"grid":[16,1,1],"kernel":"group_norm_chunks_{{[0-9a-f]+}}","kind":"launch","op":5,"shared":0}
// PLAN-NEXT: {"args":[10,11,12],"block":[32,1,1],"grid":[4,1,1],"kernel":"group_norm_merge_{{[0-9a-f]+}}","kind":"launch","op":5,"shared":0}
// PLAN-NEXT: {"args":[6,5,10,11,2,3],"block":[256,1,1],"grid":[2,1,1],"kernel":"group_norm_{{[0-9a-f]+}}","kind":"launch","op":5,"shared":0}
// PLAN-NEXT: {"args":[7,6,4],"block":[256,1,1],"grid":[2,1,1],"kernel":"mul_{{[0-9a-f]+}}","kind":"launch","op":6,"shared":0}
// PLAN-NEXT: {"args":[8,7],"block":[128,1,1],"grid":[4,1,1],"kernel":"reduce_mean_{{[0-9a-f]+}}","kind":"launch","op":7,"shared":0}
