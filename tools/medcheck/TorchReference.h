//===- TorchReference.h - the op-level plan of an artifact, run with LibTorch -------===//
//
// An independent reference for medcheck: every med op of an artifact's function is
// mapped onto LibTorch ops (torch::conv3d, torch::group_norm, ...), composed from
// primitive torch ops where torch has no such op (GRN, the channels-first layer norm, the
// masked/per-channel BCE, nnU-Net's Dice + CE); med.shift_sum is torch::conv3d with groups = C
// (its taps flipped when mirrored). The gradient ops (conv3d_grad_weight, shift_sum_grad_weight,
// *_norm_grad, gelu_grad, extremum_grad, reduce_extremum_grad, slice_grad, the loss
// gradients) are torch autograd of those forward mappings; group_norm_grad, which reads the
// statistics group_norm saved, is torch's native_group_norm_backward. No medrun kernel is
// used here.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDCHECK_TORCHREFERENCE_H
#define MEDCHECK_TORCHREFERENCE_H

#include "medrun/Artifact.h"
#include "medrun/Tensor.h"

#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace medcheck {

/// torch dtype of a medrun dtype (and back); throws medrun::Error for one torch lacks.
torch::ScalarType torchType(medrun::DType t);
medrun::DType medrunType(torch::ScalarType t);

/// Copies (never aliases) between the two tensor types; toTorch puts the copy on `device`,
/// fromTorch copies from any device.
torch::Tensor toTorch(const medrun::Tensor &t, torch::Device device = torch::kCPU);
medrun::Tensor fromTorch(const torch::Tensor &t);

/// Runs `fn` op by op with LibTorch and returns its outputs (out0, out1, ...), reshaped to
/// the declared result shapes. `inputs` are the arguments (arg0, ...), `params` the
/// parameters by state_dict key. Float values are computed in `floatType` (F32 or F64):
/// float inputs, parameters and constants are converted to it; integer values keep their
/// type. Everything is computed on the device of the inputs (of the parameters when there
/// are no inputs): values the mapping creates itself (constants, loss-scaling results) are
/// put there too. Throws medrun::Error naming the op for a plan it cannot map (unknown op, missing
/// parameter, a result shape torch disagrees with).
std::vector<torch::Tensor> runTorch(const medrun::Artifact &artifact, const medrun::Function &fn,
                                    const std::vector<torch::Tensor> &inputs,
                                    const std::map<std::string, torch::Tensor> &params,
                                    torch::ScalarType floatType = torch::kFloat);

/// Torch autograd of a loss function: the gradients of out0 (a float scalar).
struct TorchGradients {
  std::vector<torch::Tensor> outputs;          ///< the forward outputs, as runTorch's
  std::map<std::string, torch::Tensor> params; ///< by name, every float parameter `fn` reads
  std::map<std::string, bool> paramReached;    ///< false: out0 does not depend on it (zeros)
  std::vector<torch::Tensor> inputs;           ///< by argument; undefined for integer ones
  std::vector<bool> inputReached;              ///< false: no differentiable path (zeros)
};

/// Runs `fn` as runTorch does, but under torch autograd with the parameters it reads and its
/// float arguments as leaves, and returns d out0 / d leaf for each (zeros where out0 does not
/// depend on the leaf). The mapping follows docs/dialect.md: the target, mask and pos_weight
/// of med.bce_with_logits and the targets of med.dice_ce are data and get no gradient.
/// Independent of medrun's gradient rules and kernels. With a `seed` (a scalar), the
/// backward pass starts from it instead of 1: the gradients of out0 · seed, as
/// `(loss * scale).backward()` of torch.amp.GradScaler computes them.
/// With `autocast` (kBFloat16 or kHalf), the forward pass runs under torch autocast to that
/// type on the device of the inputs (`with torch.autocast(device, dtype=...)` around the
/// model, backward outside): autocast's lower-precision ops (conv3d, ...) compute in it, and
/// every float result keeps the type its op produced instead of being converted to
/// `floatType`, as in a PyTorch model; the leaves (f32 here) and their gradients keep
/// `floatType`. The outputs may then be bf16 or f16.
TorchGradients gradTorch(const medrun::Artifact &artifact, const medrun::Function &fn,
                         const std::vector<torch::Tensor> &inputs,
                         const std::map<std::string, torch::Tensor> &params,
                         torch::ScalarType floatType = torch::kFloat,
                         const torch::Tensor &seed = torch::Tensor(),
                         std::optional<torch::ScalarType> autocast = std::nullopt);

/// Returns when torch autocast to `dtype` works on `device` (a convolution under it computes
/// in `dtype`); otherwise throws medrun::Error saying why. LibTorch 1.13's CPU autocast
/// takes bf16 only, and its CPU convolutions have no f16 kernels.
void checkAutocast(torch::Device device, torch::ScalarType dtype);

} // namespace medcheck

#endif // MEDCHECK_TORCHREFERENCE_H
