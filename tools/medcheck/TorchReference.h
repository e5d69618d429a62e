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
/// parameter, a result shape torch disagrees with). With `assigned`, the values the function's
/// med.assign ops set go there by name (without it an assign is an error).
std::vector<torch::Tensor> runTorch(const medrun::Artifact &artifact, const medrun::Function &fn,
                                    const std::vector<torch::Tensor> &inputs,
                                    const std::map<std::string, torch::Tensor> &params,
                                    torch::ScalarType floatType = torch::kFloat,
                                    std::map<std::string, torch::Tensor> *assigned = nullptr);

/// "Running the reference in parts" (activation checkpointing) for gradTorch, so that the
/// reference of a large network fits the device: the loss function's ops are cut into
/// segments of about equal estimated autograd memory (cuts placed where few bytes cross);
/// the forward pass runs without autograd, keeping only the values a later segment reads;
/// then, last segment first, each segment is run again under autograd from those values
/// (leaves) and torch::autograd::grad takes the gradients flowing into it to its leaves and
/// the parameters it reads. A gradient that reaches a value from several segments is
/// summed in the order torch's autograd engine sums it (the later segment's first), so the
/// result is the unsegmented reference's, bit for bit on the CPU.
struct Recompute {
  enum class Mode { Auto, On, Off };
  /// Auto: recompute when the unsegmented estimate exceeds `availableBytes` (never when that
  /// is 0, unknown). On: always (--torch-recompute). Off: never.
  Mode mode = Mode::Auto;
  size_t availableBytes = 0;
  int64_t segments = 0; ///< > 0: aim at this many segments; 0: chosen from the estimate
  /// Also compute the unsegmented reference and require every result to be equal bit for
  /// bit (a check of the segmentation itself; throws medrun::Error where one differs).
  bool verify = false;
  /// Negative control for tests: a value read by several segments keeps only the gradient
  /// of the earliest segment's ops (the later segments' contributions are dropped).
  bool fault = false;
};

/// The estimated autograd memory of one unsegmented gradTorch of `fn` in `floatType`
/// (every value computed, fusion bodies op by op and the norms' saved intermediates
/// counted), the figure Recompute::Mode::Auto compares with the free memory.
double estimateReferenceBytes(const medrun::Function &fn, torch::ScalarType floatType);

/// Under autocast, the types of the reference's 5-D float results (activations): by op kind
/// (`fusion[template]` for a fusion; ` instance_norm` appended for an op that carries
/// med.instance_norm), the number of results held in each torch type ("BFloat16", "Float").
using AutocastTypes = std::map<std::string, std::map<std::string, int>>;

/// Torch autograd of a loss function: the gradients of out0 (a float scalar).
struct TorchGradients {
  std::vector<torch::Tensor> outputs;          ///< the forward outputs, as runTorch's
  std::map<std::string, torch::Tensor> params; ///< by name, every float parameter `fn` reads
  std::map<std::string, bool> paramReached;    ///< false: out0 does not depend on it (zeros)
  std::vector<torch::Tensor> inputs;           ///< by argument; undefined for integer ones
  std::vector<bool> inputReached;              ///< false: no differentiable path (zeros)
  /// The values the function's med.assign ops set (state its forward pass updates, such as
  /// BatchNorm's running statistics), by state name.
  std::map<std::string, torch::Tensor> assigned;
  /// With recompute: "loss in 19 segments of 1027 ops; estimated 152.0 GiB unsegmented,
  /// checkpoints 13.3 GiB, largest segment 13.7 GiB (...)"; empty when it ran in one piece.
  std::string recompute;
  /// With autocast: the type flow of the forward pass (AutocastTypes).
  AutocastTypes autocastTypes;
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
/// `recompute` says whether to run it in segments (see Recompute); the results are the same.
TorchGradients gradTorch(const medrun::Artifact &artifact, const medrun::Function &fn,
                         const std::vector<torch::Tensor> &inputs,
                         const std::map<std::string, torch::Tensor> &params,
                         torch::ScalarType floatType = torch::kFloat,
                         const torch::Tensor &seed = torch::Tensor(),
                         std::optional<torch::ScalarType> autocast = std::nullopt,
                         const Recompute &recompute = Recompute());

/// Returns when torch autocast to `dtype` works on `device` (a convolution under it computes
/// in `dtype`); otherwise throws medrun::Error saying why. LibTorch 1.13's CPU autocast
/// takes bf16 only, and its CPU convolutions have no f16 kernels.
void checkAutocast(torch::Device device, torch::ScalarType dtype);

} // namespace medcheck

#endif // MEDCHECK_TORCHREFERENCE_H
