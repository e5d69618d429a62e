// RUN: med-opt %s --split-input-file --verify-diagnostics

func.func @result_type(%a: tensor<4xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{result: expected type 'tensor<4xf32>' (inferred from the operands), got 'tensor<5xf32>'}}
  %r = med.all_reduce %a bucket 0 offsets [0] size 4 : (tensor<4xf32>) -> tensor<5xf32>
  return %r : tensor<5xf32>
}

// -----

func.func @overlap(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'offsets': input 1 at 2 overlaps the one before it (which ends at 4)}}
  %r:2 = med.all_reduce %a, %b bucket 0 offsets [0, 2] size 8 : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @size(%a: tensor<4xf32>) {
  // expected-error @+1 {{input 0 (4 elements at offset 0) does not fit in 'size' 3}}
  %r = med.all_reduce %a bucket 0 offsets [0] size 3 : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @bucket(%a: tensor<4xf32>) {
  // expected-error @+1 {{bucket must be non-negative, got -1}}
  %r = med.all_reduce %a bucket -1 offsets [0] size 4 : (tensor<4xf32>) -> tensor<4xf32>
  return
}
