// RUN: medc compile %s --emit cuda -o - | FileCheck %s
// RUN: medc compile %s --target cuda --emit plan -o - | %python %S/Inputs/plan_query.py /dev/stdin functions[0].cuda_plan.steps | FileCheck %s --check-prefix=PLAN
// RUN: medc compile %S/../cuda/Inputs/vectorized-train.mlir --batch 1 --patch 4,6,7 --train 'precision=bf16-mixed' --disable-pass=med-form-fusions --emit cuda -o - | FileCheck %s --check-prefix=BF16
// REQUIRES: nvrtc
// (The bf16 training step is compiled without med-form-fusions: these checks are about each
// op's own vectorized kernel; the fused kernels have cuda-fusion-elementwise.mlir.)

// The shape of the vectorized elementwise kernels (medc compile --emit cuda): 4 f32 (8 bf16)
// consecutive elements per thread, moved with one 16-byte vector per operand; 32-bit indices
// where every index fits, 64-bit ones past 2^31 elements; the remainder of a size that is
// no multiple of the lanes moved one by one; broadcast operands read once per thread, as
// vectors at an offset, or element by element; group norm's channel found once per thread
// where the planes are whole vectors. The emulated tests (test/cuda/vectorized.test) check
// their results.

// CHECK: template <typename T, int K> struct alignas(sizeof(T) * K) Vec {

// 2^31 elements: 64-bit indices.
// CHECK-LABEL: void __launch_bounds__(256) gelu_{{[0-9a-f]+}}(float* __restrict__ y, const float* __restrict__ x) {
// CHECK-NEXT: const i64 i0 = ((i64)blockIdx.x * 256 + threadIdx.x) * 4;
// CHECK-NEXT: if (i0 >= 2147483648ll) return;
// CHECK-NEXT: Vec<float, 4> x_v;
// CHECK-NEXT: Vec<float, 4> y_v;
// CHECK-NEXT: const auto element = [&](int k) {
// CHECK-NEXT: const float v = x_v[k];
// CHECK-NEXT: y_v[k] = gelu(v);
// CHECK-NEXT: };
// CHECK-NEXT: x_v = vload<4>(x + i0);
// CHECK-NEXT: #pragma unroll
// CHECK-NEXT: for (int k = 0; k < 4; ++k)
// CHECK-NEXT: element(k);
// CHECK-NEXT: vstore(y + i0, y_v);
// CHECK-NEXT: }
func.func @kernels(%big: tensor<2x1024x1024x1024xf32>, %x: tensor<3x5x7xf32>, %a: tensor<2x3x5x4x8xf32>, %c: tensor<1x3x1x1x1xf32>, %p: tensor<4x8xf32>, %v: tensor<7xf32>, %n: tensor<2x4x2x3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<2x1024x1024x1024xf32>, tensor<3x5x7xf32>, tensor<2x3x5x4x8xf32>, tensor<2x3x5x4x8xf32>, tensor<3x5x7xf32>, tensor<2x4x2x3x4xf32>) {
  %0 = med.gelu %big : tensor<2x1024x1024x1024xf32>
  %1 = med.sigmoid %x : tensor<3x5x7xf32>
  %2 = med.mul %a, %c : (tensor<2x3x5x4x8xf32>, tensor<1x3x1x1x1xf32>) -> tensor<2x3x5x4x8xf32>
  %3 = med.sub %p, %a : (tensor<4x8xf32>, tensor<2x3x5x4x8xf32>) -> tensor<2x3x5x4x8xf32>
  %4 = med.add %x, %v : (tensor<3x5x7xf32>, tensor<7xf32>) -> tensor<3x5x7xf32>
  %5 = med.group_norm %n, %g, %b {groups = 2 : i64} : (tensor<2x4x2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x2x3x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x1024x1024x1024xf32>, tensor<3x5x7xf32>, tensor<2x3x5x4x8xf32>, tensor<2x3x5x4x8xf32>, tensor<3x5x7xf32>, tensor<2x4x2x3x4xf32>
}

// 105 elements: 32-bit indices; the last thread's one element moved alone.
// CHECK-LABEL: sigmoid_{{[0-9a-f]+}}(
// CHECK-NEXT: const int i0 = (int)(blockIdx.x * 256u + threadIdx.x) * 4;
// CHECK-NEXT: if (i0 >= 105) return;
// CHECK: if (i0 + 4 <= 105) {
// CHECK-NEXT: x_v = vload<4>(x + i0);
// CHECK: vstore(y + i0, y_v);
// CHECK-NEXT: } else { // the last thread: 105 is no multiple of 4
// CHECK-NEXT: #pragma unroll
// CHECK-NEXT: for (int k = 0; k < 4; ++k) {
// CHECK-NEXT: if (i0 + k >= 105) break;
// CHECK-NEXT: x_v[k] = x[i0 + k];
// CHECK-NEXT: element(k);
// CHECK-NEXT: y[i0 + k] = y_v[k];

// A channel value shared by the thread's 4 elements (planes of 160): read once.
// CHECK-LABEL: mul_{{[0-9a-f]+}}(
// CHECK: const int q1 = qt % 3; qt /= 3;
// CHECK: const float b_s = b[q1];
// CHECK: const float u = a_v[k], v = b_s;
// CHECK: a_v = vload<4>(a + i0);
// CHECK-NOT: vload

// A 4x8 plane: consecutive over 32 elements, read as vectors at the thread's offset in it.
// CHECK-LABEL: sub_{{[0-9a-f]+}}(
// CHECK: const float u = a_v[k], v = b_v[k];
// CHECK: a_v = vload<4>(a + q3 * 8 + q4);
// CHECK-NEXT: b_v = vload<4>(b + i0);

// Runs of 7: element by element.
// CHECK-LABEL: add_{{[0-9a-f]+}}(
// CHECK: const auto element = [&](int k) {
// CHECK-NEXT: const int i = i0 + k;
// CHECK: const int o2 = ot % 7; ot /= 7;
// CHECK: const float u = a_v[k], v = b[o2];

// Planes of 24: the channel once per thread.
// CHECK-LABEL: group_norm_{{[0-9a-f]+}}(
// CHECK: if (i0 >= 192) return;
// CHECK-NEXT: const int row = i0 / 24;
// CHECK-NEXT: const int c = row % 4;
// CHECK-NEXT: const int seg = (row / 4) * 2 + c / 2;
// CHECK-NEXT: const float mu = mean[seg], scale = rstd[seg] * gamma[c];
// CHECK: const auto element = [&](int k) {
// CHECK-NEXT: y_v[k] = (x_v[k] - mu) * scale + beta[c];
// CHECK-NEXT: };

// PLAN: "grid":[2097152,1,1],"kernel":"gelu_{{[0-9a-f]+}}"
// PLAN: "grid":[1,1,1],"kernel":"sigmoid_{{[0-9a-f]+}}"
// PLAN: "grid":[1,1,1],"kernel":"mul_{{[0-9a-f]+}}"

// bf16-mixed: 8 elements per thread, 16-byte vectors; f32 parameters read as bf16 copies.
// Planes of 168: group norm and its gradient find the channel once per thread.
// BF16-LABEL: group_norm_{{[0-9a-f]+}}(bf16* __restrict__ y, const bf16* __restrict__ x,
// BF16-NEXT: const int i0 = (int)(blockIdx.x * 256u + threadIdx.x) * 8;
// BF16-NEXT: if (i0 >= 504) return;
// BF16-NEXT: const int row = i0 / 168;
// BF16: Vec<bf16, 8> x_v;
// BF16-NEXT: Vec<bf16, 8> y_v;
// BF16: x_v = vload<8>(x + i0);
// BF16-LABEL: gelu_{{[0-9a-f]+}}(bf16* __restrict__ y, const bf16* __restrict__ x) {
// BF16: vstore(y + i0, y_v);
// BF16-LABEL: gelu_grad_{{[0-9a-f]+}}(bf16* __restrict__ dx, const bf16* __restrict__ x, const bf16* __restrict__ dy) {
// BF16: x_v = vload<8>(x + i0);
// BF16-NEXT: dy_v = vload<8>(dy + i0);
// BF16: vstore(dx + i0, dx_v);
// BF16-LABEL: group_norm_grad_{{[0-9a-f]+}}(bf16* __restrict__ dx, const bf16* __restrict__ x, const bf16* __restrict__ dy,
// BF16: const int row = i0 / 168;
// BF16: dx_v[k] = r * (gamma[c] * dy_v[k] - mg[2 * seg] - xh * mg[2 * seg + 1]);
