// RUN: medc compile %s --emit cuda -o - | FileCheck %s
// RUN: medc compile %s --target cuda --emit plan -o - | %python %S/Inputs/plan_query.py /dev/stdin functions[0].ops functions[0].cuda_plan.steps fusions | FileCheck %s --check-prefix=PLAN
// REQUIRES: nvrtc

// An `elementwise` fusion becomes one kernel: the body's scalar expressions (the ones the
// ops' own kernels use) in f32 registers, one after the other; the full-shape inputs moved
// as 16-byte vectors, the per-channel bias read once per thread; one store of the result.
// CHECK-LABEL: void __launch_bounds__(256) fusion_{{[0-9a-f]+}}(float* __restrict__ y0, const float* __restrict__ x0, const float* __restrict__ x1, const float* __restrict__ x2) {
// CHECK: const float x1_s = x1[q1];
// CHECK: const float t[[S:[0-9]+]] = __fadd_rn(x0_v[k], x1_s);
// CHECK-NEXT: const float t[[G:[0-9]+]] = gelu(t[[S]]);
// CHECK-NEXT: const float t[[R:[0-9]+]] = __fadd_rn(t[[G]], x2_v[k]);
// CHECK-NEXT: y0_v[k] = t[[R]];
// CHECK: x0_v = vload<4>(x0 + i0);
// CHECK-NEXT: x2_v = vload<4>(x2 + i0);
// CHECK: vstore(y0 + i0, y0_v);

// The plan: one fusion op, one launch for it, one body in the table.
// PLAN: {"attrs":{"body":0,"template":"elementwise"},"loc":"{{.*}}cuda-fusion-elementwise.mlir:{{[0-9]+}}:8","op":"fusion","operands":{"inputs":[0,1,2]},"results":[3]}
// PLAN-NEXT: {"args":[3,0,1,2],"block":[256,1,1],"grid":[1,1,1],"kernel":"fusion_{{[0-9a-f]+}}","kind":"launch","op":0,"shared":0}
// PLAN-NEXT: {"inputs":[0,1,2],"ops":[{"attrs":{},"op":"add","operands":{"lhs":[0],"rhs":[1]},"results":[3]},{"attrs":{},"op":"gelu","operands":{"input":[3]},"results":[4]},{"attrs":{},"op":"add","operands":{"lhs":[4],"rhs":[2]},"results":[5]}],"outputs":[5],"template":"elementwise","values":[{{.*}}]}
func.func @bias_gelu_residual(%x: tensor<2x8x4x4x4xf32>, %b: tensor<1x8x1x1x1xf32>, %r: tensor<2x8x4x4x4xf32>) -> tensor<2x8x4x4x4xf32> {
  %0 = med.add %x, %b : (tensor<2x8x4x4x4xf32>, tensor<1x8x1x1x1xf32>) -> tensor<2x8x4x4x4xf32>
  %1 = med.gelu %0 : tensor<2x8x4x4x4xf32>
  %2 = med.add %1, %r : (tensor<2x8x4x4x4xf32>, tensor<2x8x4x4x4xf32>) -> tensor<2x8x4x4x4xf32>
  return %2 : tensor<2x8x4x4x4xf32>
}
