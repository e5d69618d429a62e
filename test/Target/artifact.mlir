// RUN: medc compile %s --batch 2 --patch 6,6,6 --disable-pass=canonicalize --disable-pass=cse --emit=plan -o %t.json
// RUN: %python %S/Inputs/plan_query.py %t.json parameters | FileCheck %s --check-prefix=PARAMS
// RUN: %python %S/Inputs/plan_query.py %t.json functions[0].ops | FileCheck %s --check-prefix=NET
// RUN: %python %S/Inputs/plan_query.py %t.json functions[1].ops | FileCheck %s --check-prefix=LOSS
// RUN: %python %S/Inputs/plan_query.py %t.json functions[3].ops | FileCheck %s --check-prefix=GRAD
// RUN: %python %S/Inputs/plan_query.py %t.json functions[0].values[0] functions[0].inputs functions[0].outputs | FileCheck %s --check-prefix=SIG
// RUN: %python %S/Inputs/plan_query.py %t.json functions[2].ops functions[2].precision functions[2].init_loss_scale | FileCheck %s --check-prefix=SCALING
// RUN: %python -c "import json, sys; d = json.load(open(sys.argv[1])); print(*[','.join(sorted(k for k in f if k in ('precision', 'init_loss_scale'))) or '-' for f in d['functions']], any('fp32' in op for op in d['functions'][0]['ops']))" %t.json | FileCheck %s --check-prefix=ABSENT
// RUN: medc compile %s -o %t.medc && %python -c "import sys; b = open(sys.argv[1], 'rb').read(); print(b[:8], int.from_bytes(b[8:12], 'little'))" %t.medc | FileCheck %s --check-prefix=HEAD

// Every attribute is written with its default filled in, operands are grouped by their
// ODS names (empty for an absent optional operand), and every function is specialized.
// JSON numbers that are integral print without a fraction (0, 10); readers accept both.
// The plan is the program as written: canonicalize and cse, which hoist, merge and fold
// constants, are left out.

med.parameter @"c.weight" : tensor<4x2x3x3x3xf32> init uniform(54)
med.parameter @"n.weight" : tensor<4xf32> init ones
med.parameter @"n.bias" : tensor<4xf32> init zeros frozen

// PARAMS: {"dtype":"f32","fan_in":54,"init":"uniform","name":"c.weight","shape":[4,2,3,3,3],"trainable":true}
// PARAMS-NEXT: {"dtype":"f32","init":"ones","name":"n.weight","shape":[4],"trainable":true}
// PARAMS-NEXT: {"dtype":"f32","init":"zeros","name":"n.bias","shape":[4],"trainable":false}

// SIG: {"dtype":"f32","shape":[2,2,6,6,6]}
// SIG-NEXT: 0
// SIG-NEXT: 9

// NET: {"attrs":{"name":"c.weight"},"loc":"{{.*}}artifact.mlir:[[#]]:{{[0-9]+}}","op":"param","operands":{},"results":[1]}
// NET: {"attrs":{"dilation":[1,1,1],"groups":1,"padding":[1,1,1],"stride":[2,2,2]},"loc":"{{.*}}","op":"conv3d","operands":{"bias":[],"input":[0],"weight":[1]},"results":[2]}
// NET: {"attrs":{"epsilon":1e-05,"groups":2,"save_statistics":false},"loc":"{{.*}}","op":"group_norm","operands":{"beta":[4],"gamma":[3],"input":[2]},"results":[5]}
// NET: {"attrs":{},"loc":"{{.*}}","op":"gelu","operands":{"input":[5]},"results":[6]}
// NET: {"attrs":{"high":[0,0,0,0,0],"low":[0,0,1,1,1],"value":0},"loc":"{{.*}}","op":"pad","operands":{"input":[6]},"results":[7]}
// NET: {"attrs":{"value":[0.5]},"loc":"{{.*}}","op":"constant","operands":{},"results":[8]}
// NET: {"attrs":{},"loc":"{{.*}}","op":"mul","operands":{"lhs":[7],"rhs":[8]},"results":[9]}
func.func @net(%x: tensor<?x2x?x?x?xf32>) -> tensor<?x4x?x?x?xf32> {
  %w = med.param @"c.weight" : tensor<4x2x3x3x3xf32>
  %0 = med.conv3d %x, %w {padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (tensor<?x2x?x?x?xf32>, tensor<4x2x3x3x3xf32>) -> tensor<?x4x?x?x?xf32>
  %g = med.param @"n.weight" : tensor<4xf32>
  %b = med.param @"n.bias" : tensor<4xf32>
  %1 = med.group_norm %0, %g, %b {groups = 2 : i64} : (tensor<?x4x?x?x?xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<?x4x?x?x?xf32>
  %2 = med.gelu %1 : tensor<?x4x?x?x?xf32>
  %3 = med.pad %2 {low = array<i64: 0, 0, 1, 1, 1>, high = array<i64: 0, 0, 0, 0, 0>} : (tensor<?x4x?x?x?xf32>) -> tensor<?x4x?x?x?xf32>
  %c = med.constant dense<0.5> : tensor<f32>
  %4 = med.mul %3, %c : (tensor<?x4x?x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?x?xf32>
  return %4 : tensor<?x4x?x?x?xf32>
}

// LOSS: {"attrs":{"auto_pos_weight":true,"max_pos_weight":10,"reduction":"per_channel"},"loc":"{{.*}}","op":"bce_with_logits","operands":{"logits":[0],"mask":[2],"pos_weight":[],"target":[1]},"results":[5]}
// LOSS: {"attrs":{"batch_dice":true,"ce_weight":1,"dice_weight":1,"include_background":false,"smooth":1e-05,"weights":[1]},"loc":"{{.*}}","op":"dice_ce","operands":{"logits":[0],"targets":[3]},"results":[6]}
// LOSS: {"attrs":{"axes":[1],"keepdims":false,"kind":"max"},"loc":"{{.*}}","op":"reduce","operands":{"input":[0]},"results":[7]}
// LOSS: {"attrs":{"offsets":[0,0,0,0,0],"sizes":[2,3,4,4,4],"strides":[1,1,1,1,1]},"loc":"{{.*}}","op":"slice","operands":{"input":[0]},"results":[8]}
// LOSS: {"attrs":{"axis":1},"loc":"{{.*}}","op":"concat","operands":{"inputs":[8,9]},"results":[10]}
func.func @loss(%x: tensor<2x3x4x4x5xf32>, %y: tensor<2x3x4x4x5xf32>, %m: tensor<2x3x4x4x5xf32>, %t: tensor<2x1x4x4x5xi32>, %e: tensor<2x3x4x4x5xf32>) -> (tensor<f32>, tensor<f32>, tensor<2x4x4x5xf32>, tensor<2x6x4x4x4xf32>) {
  %0 = med.bce_with_logits %x, %y mask %m {reduction = #med<reduction per_channel>, auto_pos_weight} : (tensor<2x3x4x4x5xf32>, tensor<2x3x4x4x5xf32>, tensor<2x3x4x4x5xf32>) -> tensor<f32>
  %1 = med.dice_ce logits(%x) targets(%t) {weights = array<f64: 1.0>} : (tensor<2x3x4x4x5xf32>, tensor<2x1x4x4x5xi32>) -> tensor<f32>
  %2 = med.reduce max %x {axes = array<i64: 1>} : (tensor<2x3x4x4x5xf32>) -> tensor<2x4x4x5xf32>
  %3 = med.slice %x {offsets = array<i64: 0, 0, 0, 0, 0>, sizes = array<i64: 2, 3, 4, 4, 4>} : (tensor<2x3x4x4x5xf32>) -> tensor<2x3x4x4x4xf32>
  %4 = med.slice %x {offsets = array<i64: 0, 0, 0, 0, 1>, sizes = array<i64: 2, 3, 4, 4, 4>} : (tensor<2x3x4x4x5xf32>) -> tensor<2x3x4x4x4xf32>
  %5 = med.concat %3, %4 {axis = 1 : i64} : (tensor<2x3x4x4x4xf32>, tensor<2x3x4x4x4xf32>) -> tensor<2x6x4x4x4xf32>
  return %0, %1, %2, %5 : tensor<f32>, tensor<f32>, tensor<2x4x4x5xf32>, tensor<2x6x4x4x4xf32>
}

// Loss scaling; an op marked med.fp32 gets "fp32": true, and a function's med.precision and
// med.init_loss_scale become its "precision" and "init_loss_scale" (absent elsewhere).
// SCALING: {"attrs":{},"fp32":true,"loc":"{{.*}}","op":"any_non_finite","operands":{"inputs":[0,1]},"results":[4]}
// SCALING-NEXT: {"attrs":{},"loc":"{{.*}}","op":"select","operands":{"cond":[4],"on_false":[1],"on_true":[0]},"results":[5]}
// SCALING-NEXT: {"attrs":{"backoff_factor":0.5,"growth_factor":2,"growth_interval":100},"fp32":true,"loc":"{{.*}}","op":"update_loss_scale","operands":{"found_inf":[4],"growth_tracker":[3],"scale":[2]},"results":[6,7]}
// SCALING-NEXT: "fp16-mixed"
// SCALING-NEXT: 4096
// ABSENT: - - init_loss_scale,precision - False
func.func @scaling(%a: tensor<3xf32>, %b: tensor<3xf32>, %s: tensor<f32>, %n: tensor<f32>) -> (tensor<3xf32>, tensor<f32>, tensor<f32>) attributes {med.precision = "fp16-mixed", med.init_loss_scale = 4096.0 : f64} {
  %f = med.any_non_finite %a, %b {med.fp32} : (tensor<3xf32>, tensor<3xf32>) -> tensor<f32>
  %k = med.select %f, %a, %b : (tensor<f32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %u:2 = med.update_loss_scale %s, %n, %f {growth_interval = 100 : i64, med.fp32} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %k, %u#0, %u#1 : tensor<3xf32>, tensor<f32>, tensor<f32>
}


// The gradient ops (compiled without cse, which would drop the unused extremum_grad):
// group_norm with its saved statistics (three results) and the backward op that reads them, the max/min gradients and the strided slice's.
// GRAD: {"attrs":{"epsilon":1e-05,"groups":2,"save_statistics":true},"loc":"{{.*}}","op":"group_norm","operands":{"beta":[2],"gamma":[2],"input":[0]},"results":[3,4,5]}
// GRAD: {"attrs":{"groups":2},"loc":"{{.*}}","op":"group_norm_grad","operands":{"gamma":[2],"grad_output":[1],"input":[0],"mean":[4],"rstd":[5]},"results":[6,7,8]}
// GRAD: {"attrs":{"kind":"min"},"loc":"{{.*}}","op":"extremum_grad","operands":{"grad_output":[1],"lhs":[0],"rhs":[3]},"results":[9,10]}
// GRAD: {"attrs":{"axes":[2,3,4],"keepdims":true,"kind":"max"},"loc":"{{.*}}","op":"reduce_extremum_grad","operands":{"extremum":[11],"grad_output":[11],"input":[0]},"results":[12]}
// GRAD: {"attrs":{"offsets":[0,0,1,0,1],"shape":[2,4,9,4,8],"strides":[1,1,2,1,3]},"loc":"{{.*}}","op":"slice_grad","operands":{"grad_output":[1]},"results":[13]}
func.func @grads(%x: tensor<2x4x4x4x3xf32>, %dy: tensor<2x4x4x4x3xf32>) -> (tensor<2x4x4x4x3xf32>, tensor<2x4x4x4x3xf32>, tensor<2x4x9x4x8xf32>) {
  %g = med.param @"n.weight" : tensor<4xf32>
  %y, %s:2 = med.group_norm %x, %g, %g {groups = 2 : i64, save_statistics} : (tensor<2x4x4x4x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4x3xf32>, tensor<2x2xf32>, tensor<2x2xf32>)
  %d:3 = med.group_norm_grad %x, %g, %s#0, %s#1, %dy {groups = 2 : i64} : (tensor<2x4x4x4x3xf32>, tensor<4xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x4x4x4x3xf32>) -> (tensor<2x4x4x4x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %e:2 = med.extremum_grad min %x, %y, %dy : (tensor<2x4x4x4x3xf32>, tensor<2x4x4x4x3xf32>, tensor<2x4x4x4x3xf32>) -> (tensor<2x4x4x4x3xf32>, tensor<2x4x4x4x3xf32>)
  %m = med.reduce max %x {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x4x4x4x3xf32>) -> tensor<2x4x1x1x1xf32>
  %r = med.reduce_extremum_grad max %x, %m, %m {axes = array<i64: 2, 3, 4>, keepdims} : (tensor<2x4x4x4x3xf32>, tensor<2x4x1x1x1xf32>, tensor<2x4x1x1x1xf32>) -> tensor<2x4x4x4x3xf32>
  %z = med.slice_grad %dy {offsets = array<i64: 0, 0, 1, 0, 1>, strides = array<i64: 1, 1, 2, 1, 3>, shape = array<i64: 2, 4, 9, 4, 8>} : (tensor<2x4x4x4x3xf32>) -> tensor<2x4x9x4x8xf32>
  return %d#0, %r, %z : tensor<2x4x4x4x3xf32>, tensor<2x4x4x4x3xf32>, tensor<2x4x9x4x8xf32>
}

// HEAD: b'MEDCART\x00' 11
