//===- Flops.h - arithmetic and memory traffic of an artifact function ------------===//
//
// What `medrun bench` divides by the step time to give TFLOP/s and GB/s. The FLOP rules are
// those of `medc stats` (lib/Analysis/ModelStats.cpp), so a forward function counts exactly
// the forward FLOPs medc stats prints for the same model, batch and patch:
//
//  - conv3d: 2 · N·Cout·prod(output spatial) · (Cin/groups) · prod(kernel), 2 per
//    multiply-add, and with a bias 1 per output element (medc stats counts that add as
//    elementwise, as it is once med-split-contraction-bias makes it an add);
//  - conv3d_transpose: the same with the roles of input and output swapped, 2 · N·Cin ·
//    prod(input spatial) · (Cout/groups) · prod(kernel): each input element meets every
//    weight of its group once;
//  - conv3d_grad_weight: that of the convolution it differentiates, 2 · numel(grad_output) ·
//    (Cin/groups) · prod(kernel) (also when it is the weight gradient of a transposed
//    convolution, with input and grad_output swapped);
//  - shift_sum and shift_sum_grad_weight: those of the depthwise convolution and weight
//    gradient they are, 2 · numel(result or grad_output) · prod(kernel);
//  - normalizations (group_norm, channel_layer_norm, grn) and their gradients: 7 per element
//    of the first result (two sums, centre, scale, affine);
//  - group_norm_stats: 4 per input element (its two sums), group_norm_apply the other 3 of
//    group_norm's 7 per element (a fused group norm counts as the unfused one);
//  - losses (bce_with_logits, dice_ce) and their gradients: 8 per logit;
//  - data movement (pad, slice, concat, reshape) and param, constant, assign: none;
//  - spatial_transform: 16 per result element (8 weighted neighbours);
//  - everything else (elementwise ops, reduce, gelu_grad, adamw, ...): 1 per element of the
//    first result. This under-counts AdamW (about a dozen operations per element), but the
//    convolutions are where the arithmetic is.
//
// Bytes: every operand and every result of every op, read once and written once in its
// storage type (bf16/f16 activations under mixed precision), as an unfused executor that keeps nothing in cache moves them; a lower
// bound for such an executor and an upper one for a fusing one. param (a binding of the
// parameter's buffer), reshape (an alias) and assign (applied by the caller) move nothing.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_FLOPS_H
#define MEDRUN_FLOPS_H

#include "medrun/Artifact.h"

#include <map>
#include <string>

namespace medrun {

struct OpCost {
  double flops = 0; ///< floating-point operations (2 per multiply-add)
  double bytes = 0; ///< operands read plus results written
  int64_t count = 0; ///< ops summed into this cost

  OpCost &operator+=(const OpCost &o) {
    flops += o.flops;
    bytes += o.bytes;
    count += o.count;
    return *this;
  }
};

/// The cost of one op of `fn`; throws Error (naming the op) for a convolution whose shapes
/// are not rank 5.
OpCost opCost(const Function &fn, const OpInfo &op);

struct FunctionCost {
  OpCost total;
  std::map<std::string, OpCost> byKind; ///< by OpInfo::kind
};

/// The cost of one call of `fn`: the sum over its ops.
FunctionCost functionCost(const Function &fn);

} // namespace medrun

#endif // MEDRUN_FLOPS_H
