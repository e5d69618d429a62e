// Elementwise kernels that move several elements per thread as vectors (4 of f32): sizes
// that leave a remainder for the last thread, and every way a broadcast operand is read
// (once per thread, as vectors at an offset, element by element). Run by vectorized.test.

// 105 elements: 26 whole vectors and 1 left over.
func.func @unary_tail(%x: tensor<3x5x7xf32>) -> (tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<3x5x7xf32>) {
  %0 = med.gelu %x : tensor<3x5x7xf32>
  %1 = med.sigmoid %x : tensor<3x5x7xf32>
  %2 = med.exp %x : tensor<3x5x7xf32>
  %3 = med.neg %x : tensor<3x5x7xf32>
  return %0, %1, %2, %3 : tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<3x5x7xf32>, tensor<3x5x7xf32>
}

// Fewer elements than one vector; 2 and 3 left over.
func.func @binary_tail(%a: tensor<3xf32>, %b: tensor<3xf32>, %c: tensor<2x5xf32>, %d: tensor<2x5xf32>, %e: tensor<11xf32>, %f: tensor<11xf32>) -> (tensor<3xf32>, tensor<2x5xf32>, tensor<11xf32>) {
  %0 = med.add %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = med.max %c, %d : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %2 = med.div %e, %f : (tensor<11xf32>, tensor<11xf32>) -> tensor<11xf32>
  return %0, %1, %2 : tensor<3xf32>, tensor<2x5xf32>, tensor<11xf32>
}

// Broadcast operands into 2x3x5x4x8 (960 elements, whole vectors): a channel value shared
// by a thread's 4 elements; a 4x8 plane and a 5x1x8 operand read as vectors at an offset;
// a scalar; a 3x1x1x1 operand on the other side.
func.func @broadcast_vectors(%x: tensor<2x3x5x4x8xf32>, %c: tensor<1x3x1x1x1xf32>, %p: tensor<4x8xf32>, %w: tensor<5x1x8xf32>, %s: tensor<f32>, %t: tensor<3x1x1x1xf32>) -> (tensor<2x3x5x4x8xf32>, tensor<2x3x5x4x8xf32>, tensor<2x3x5x4x8xf32>, tensor<2x3x5x4x8xf32>, tensor<2x3x5x4x8xf32>) {
  %0 = med.mul %x, %c : (tensor<2x3x5x4x8xf32>, tensor<1x3x1x1x1xf32>) -> tensor<2x3x5x4x8xf32>
  %1 = med.sub %p, %x : (tensor<4x8xf32>, tensor<2x3x5x4x8xf32>) -> tensor<2x3x5x4x8xf32>
  %2 = med.add %x, %w : (tensor<2x3x5x4x8xf32>, tensor<5x1x8xf32>) -> tensor<2x3x5x4x8xf32>
  %3 = med.min %s, %x : (tensor<f32>, tensor<2x3x5x4x8xf32>) -> tensor<2x3x5x4x8xf32>
  %4 = med.max %t, %x : (tensor<3x1x1x1xf32>, tensor<2x3x5x4x8xf32>) -> tensor<2x3x5x4x8xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3x5x4x8xf32>, tensor<2x3x5x4x8xf32>, tensor<2x3x5x4x8xf32>, tensor<2x3x5x4x8xf32>, tensor<2x3x5x4x8xf32>
}

// Broadcast operands read element by element (runs of 7, 35 and 2), with a remainder:
// 2x3x5x7 = 210 elements; both operands broadcast (2x1x7 with 3x1 into 2x3x7 = 42); a
// scalar with a remainder.
func.func @broadcast_elements(%x: tensor<2x3x5x7xf32>, %v: tensor<7xf32>, %c: tensor<3x1x1xf32>, %a: tensor<2x1x7xf32>, %b: tensor<3x1xf32>, %y: tensor<3x7xf32>, %s: tensor<f32>, %z: tensor<2x3x5x2xf32>, %q: tensor<2xf32>) -> (tensor<2x3x5x7xf32>, tensor<2x3x5x7xf32>, tensor<2x3x7xf32>, tensor<3x7xf32>, tensor<2x3x5x2xf32>) {
  %0 = med.mul %x, %v : (tensor<2x3x5x7xf32>, tensor<7xf32>) -> tensor<2x3x5x7xf32>
  %1 = med.div %x, %c : (tensor<2x3x5x7xf32>, tensor<3x1x1xf32>) -> tensor<2x3x5x7xf32>
  %2 = med.sub %a, %b : (tensor<2x1x7xf32>, tensor<3x1xf32>) -> tensor<2x3x7xf32>
  %3 = med.add %y, %s : (tensor<3x7xf32>, tensor<f32>) -> tensor<3x7xf32>
  %4 = med.mul %q, %z : (tensor<2xf32>, tensor<2x3x5x2xf32>) -> tensor<2x3x5x2xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3x5x7xf32>, tensor<2x3x5x7xf32>, tensor<2x3x7xf32>, tensor<3x7xf32>, tensor<2x3x5x2xf32>
}

// Group norm: planes of 24 (a thread's 4 elements share their channel), of 105 (each
// element finds its own; the last thread has 2) and of 1.
func.func @group_norm(%x: tensor<2x4x2x3x4xf32>, %y: tensor<2x6x3x5x7xf32>, %z: tensor<3x6xf32>, %g4: tensor<4xf32>, %b4: tensor<4xf32>, %g6: tensor<6xf32>, %b6: tensor<6xf32>) -> (tensor<2x4x2x3x4xf32>, tensor<2x6x3x5x7xf32>, tensor<3x6xf32>) {
  %0 = med.group_norm %x, %g4, %b4 {groups = 2 : i64} : (tensor<2x4x2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x2x3x4xf32>
  %1 = med.group_norm %y, %g6, %b6 {groups = 3 : i64} : (tensor<2x6x3x5x7xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x3x5x7xf32>
  %2 = med.group_norm %z, %g6, %b6 {groups = 2 : i64} : (tensor<3x6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<3x6xf32>
  return %0, %1, %2 : tensor<2x4x2x3x4xf32>, tensor<2x6x3x5x7xf32>, tensor<3x6xf32>
}
