// RUN: med-opt %s --split-input-file --verify-diagnostics --med-specialize="batch=1 patch=30,30,30"

// A patch the network cannot take: the skip connection no longer matches.
func.func @net(%x: tensor<?x4x?x?x?xf32>, %w: tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32> {
  %0 = med.conv3d %x, %w {groups = 4 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<?x4x?x?x?xf32>, tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  %1 = med.conv3d %0, %w {groups = 4 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<?x4x?x?x?xf32>, tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  %2 = med.conv3d_transpose %1, %w {groups = 4 : i64, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<?x4x?x?x?xf32>, tensor<4x1x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  %3 = med.pad %2 {low = array<i64: 0, 0, 1, 1, 1>, high = array<i64: 0, 0, 0, 0, 0>} : (tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  // expected-error @+1 {{'med.add' op operands do not broadcast: lhs 1x4x16x16x16 and rhs 1x4x15x15x15 differ on axis 2}}
  %4 = med.add %3, %0 : (tensor<?x4x?x?x?xf32>, tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  return %4 : tensor<?x4x?x?x?xf32>
}
// expected-remark @-9 {{while specializing @net for batch 1 and patch 30x30x30}}

// -----

// expected-error @+1 {{med-specialize: the module has no public function to specialize}}
module {
  func.func private @a() { return }
}

// -----

func.func private @external(tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
func.func @net(%x: tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32> {
  // expected-error @+1 {{callee @external has no body to inline}}
  %0 = call @external(%x) : (tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  return %0 : tensor<?x4x?x?x?xf32>
}

// -----

// Inlined ops keep their own locations, so the error points into @loop.
func.func private @loop(%x: tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32> {
  // expected-error @+1 {{calls nest deeper than 64 levels; recursive calls cannot be specialized}}
  %0 = call @loop(%x) : (tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  return %0 : tensor<?x4x?x?x?xf32>
}
func.func @net(%x: tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32> {
  %0 = call @loop(%x) : (tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  return %0 : tensor<?x4x?x?x?xf32>
}
