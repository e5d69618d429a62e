//===- Kernels.h - CPU reference kernels, one per med op ----------------------===//
//
// Plain C++ kernels, multi-threaded with parallelFor and bit-identical for any thread
// count. Preconditions (checked by the caller, the executor): shapes are those medc
// inferred; all floating-point operands and the result of a kernel share one dtype, F32,
// F64 or BF16 (BF16 is storage only: math and accumulation in float). Accumulation is in
// float for F32/BF16 and double for F64; reductions over many elements sum fixed-size
// chunks and combine the partials in order.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_KERNELS_H
#define MEDRUN_KERNELS_H

#include "medrun/Tensor.h"

#include <array>
#include <optional>
#include <vector>

namespace medrun::cpu {

struct ConvParams {
  std::array<int64_t, 3> stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1};
  std::array<int64_t, 3> outputPadding{0, 0, 0}; ///< transposed only
  int64_t groups = 1;
};

/// y = conv3d(x, w) + bias, as torch.nn.functional.conv3d. x N×Cin×D×H×W,
/// w Cout×Cin/g×k×k×k, bias Cout or null, y N×Cout×D'×H'×W'.
void conv3d(const Tensor &x, const Tensor &w, const Tensor *bias, const ConvParams &p, Tensor &y);
/// As torch.nn.functional.conv_transpose3d; w is Cin×Cout/g×k×k×k.
void conv3dTranspose(const Tensor &x, const Tensor &w, const Tensor *bias, const ConvParams &p,
                     Tensor &y);

/// torch.nn.GroupNorm: statistics per (sample, group) over channels of the group and all
/// trailing axes, biased variance; gamma/beta size C. With mean and rstd (both or neither;
/// N×groups, in the accumulation type: F64 for F64 x, F32 otherwise), also writes the
/// statistics it normalized with, the mean and 1/sqrt(var + eps), as torch.native_group_norm.
void groupNorm(const Tensor &x, const Tensor &gamma, const Tensor &beta, int64_t groups,
               double eps, Tensor &y, Tensor *mean = nullptr, Tensor *rstd = nullptr);
/// med.batch_norm (torch.nn.functional.batch_norm): training: per channel over N and the
/// trailing axes, the batch mean and biased variance normalize, and newMean / newVar are the
/// running statistics moved by momentum towards the batch's (unbiased variance); eval: the
/// running statistics normalize and are copied. gamma, beta and the statistics: C values of
/// the accumulation type.
void batchNorm(const Tensor &x, const Tensor &gamma, const Tensor &beta,
               const Tensor &runningMean, const Tensor &runningVar, double eps, double momentum,
               bool training, Tensor &y, Tensor &newMean, Tensor &newVar);
/// med.group_norm_stats: group_norm's statistics, mean and 1/sqrt(var + eps) per (sample,
/// group) into N×groups tensors of the accumulation type, by the chunked merge of
/// medrun/NormStats.h (group_norm computes its statistics the same way).
void groupNormStats(const Tensor &x, int64_t groups, double eps, Tensor &mean, Tensor &rstd);
/// med.group_norm_apply: group_norm's map from given statistics (N×groups, accumulation
/// type), y = (x − mean)·rstd·gamma + beta.
void groupNormApply(const Tensor &x, const Tensor &mean, const Tensor &rstd, const Tensor &gamma,
                    const Tensor &beta, int64_t groups, Tensor &y);
/// Normalizes over axis 1 only at each (sample, position); gamma/beta size C.
void channelLayerNorm(const Tensor &x, const Tensor &gamma, const Tensor &beta, double eps,
                      Tensor &y);
/// GRN: g = ||x||_2 over D,H,W per (n,c); n = g / (mean_c g + eps); y = gamma*(x*n) + beta + x.
/// gamma/beta 1×C×1×1×1.
void grn(const Tensor &x, const Tensor &gamma, const Tensor &beta, double eps, Tensor &y);

enum class Unary { Gelu, Sigmoid, Neg, Exp, Log, Sqrt, Relu };
void unary(Unary op, const Tensor &x, Tensor &y);
/// med.softmax along `axis`: exp(x − max) / Σ exp(x − max), the max and the sum in the
/// math type (f32 for f32 and bf16 storage).
void softmax(const Tensor &x, int64_t axis, Tensor &y);
/// med.resize of x (N×C×D×H×W) to y (N×C×D'×H'×W'): per axis the taps of
/// medrun/Resize.h; `linear` trilinear, else nearest.
void resize(const Tensor &x, bool linear, bool alignCorners, Tensor &y);
/// med.resize_grad: dx (N×C×D×H×W) gathers the gradients dy of the outputs that read each
/// element, times their weights (the adjoint of resize from dx's shape to dy's).
void resizeGrad(const Tensor &dy, bool linear, bool alignCorners, Tensor &dx);
/// med.avg_pool: y (N×C×D'×H'×W') the means of x's non-overlapping windows, the window
/// x's size over y's rounded down per axis (stride = window, no padding).
void avgPool(const Tensor &x, const std::vector<int64_t> &kernel, Tensor &y);
/// med.avg_pool_grad: dx gets each window's dy / window volume; elements past the last
/// whole window get 0.
void avgPoolGrad(const Tensor &dy, const std::vector<int64_t> &kernel, Tensor &dx);
/// med.max_pool: y the maxima of x's non-overlapping windows (a NaN wins), as avgPool's.
void maxPool(const Tensor &x, const std::vector<int64_t> &kernel, Tensor &y);
/// med.max_pool_grad: dx gets each window's dy at the window's first maximum (first NaN),
/// 0 elsewhere.
void maxPoolGrad(const Tensor &x, const Tensor &dy, const std::vector<int64_t> &kernel, Tensor &dx);
/// med.leaky_relu: y = x where x > 0, else slope·x (the slope in the math type).
void leakyRelu(const Tensor &x, double slope, Tensor &y);

/// PRelu (med.prelu): u where u > 0, else v·u; its slope v broadcasts to u.
enum class Binary { Add, Sub, Mul, Div, Max, Min, Pow, PRelu };
/// NumPy broadcasting; y has the broadcast shape.
void binary(Binary op, const Tensor &a, const Tensor &b, Tensor &y);

/// Constant padding; low/high one entry per axis. Like slice and concat, works on any dtype
/// (the values are copied as bytes); a negative entry crops.
void pad(const Tensor &x, const std::vector<int64_t> &low, const std::vector<int64_t> &high,
         double value, Tensor &y);
/// y[i] = x[offsets + i * strides] per axis; empty strides mean all 1.
void slice(const Tensor &x, const std::vector<int64_t> &offsets,
           const std::vector<int64_t> &strides, Tensor &y);
void concat(const std::vector<const Tensor *> &inputs, int64_t axis, Tensor &y);
/// med.transpose: axis i of y is axis permutation[i] of x (rank >= 1; any dtype, copied as
/// bytes).
void transpose(const Tensor &x, const std::vector<int64_t> &permutation, Tensor &y);
/// y (1-D) = zeros, with input i flattened at element offsets[i] (med.pack). Inputs have
/// y's dtype.
void pack(const std::vector<const Tensor *> &inputs, const std::vector<int64_t> &offsets,
          Tensor &y);

/// Label transforms (labels of any float or signed integer type, compared in that type).
/// med.affinities: seg N×1×D×H×W, aff and mask N×K×(output box) of one float type; offsets
/// 3 per affinity (D, H, W); the box starts at cropLow; ids below unlabelledBelow are
/// unlabelled. aff = mask ∧ seg(v) = seg(v+off) ∧ seg(v) ≠ 0, mask = v+off inside ∧ both
/// labelled.
void affinities(const Tensor &seg, const std::vector<int64_t> &offsets,
                const std::array<int64_t, 3> &cropLow, int64_t unlabelledBelow, Tensor &aff,
                Tensor &mask);
/// med.remove_label: y = x == label ? replaceWith : x; y has x's type.
void removeLabel(const Tensor &x, int64_t label, int64_t replaceWith, Tensor &y);
/// med.label_regions: x N×1×…, y (float) N×R×…: 1 where x is one of regions[r].
void labelRegions(const Tensor &x, const std::vector<std::vector<int64_t>> &regions, Tensor &y);
/// med.downsample_nearest: x N×C×D×H×W to y's size (of x's type) by torch's nearest-exact
/// index rule.
void downsampleNearest(const Tensor &x, Tensor &y);

enum class Reduce { Sum, Mean, Max, Min };
/// Reduces over `axes`; y has the reduced axes removed or kept as 1 (the caller's shape).
void reduce(Reduce op, const Tensor &x, const std::vector<int64_t> &axes, Tensor &y);
/// y (a scalar) = Σ over the inputs of Σ x², each input in fixed chunks combined in order,
/// then the inputs in order (med.sum_squares).
void sumSquares(const std::vector<const Tensor *> &inputs, Tensor &y);

enum class LossReduction { Mean, Sum, None, PerChannel };
struct BceParams {
  LossReduction reduction = LossReduction::Mean;
  bool autoPosWeight = false;
  double maxPosWeight = 10.0;
};
/// Binary cross-entropy with logits (see docs/dialect.md, med.bce_with_logits). mask and
/// posWeight may be null. y is a scalar, or the elementwise loss for LossReduction::None.
/// Masked-out elements contribute 0 to the elementwise loss. A reduced loss is written in
/// y's own float dtype (the executor passes F32 for F32/BF16 logits, F64 for F64).
void bceWithLogits(const Tensor &logits, const Tensor &target, const Tensor *mask,
                   const Tensor *posWeight, const BceParams &p, Tensor &y);

struct DiceCEParams {
  std::vector<double> weights;
  double smooth = 1e-5, ceWeight = 1.0, diceWeight = 1.0;
  bool batchDice = true, includeBackground = false;
  /// nnU-Net's ignore label: voxels whose target holds it count in no sum (CE: the mean over
  /// the other voxels, 0 without any; Dice: out of tp, Σsoftmax and Σone-hot).
  std::optional<int64_t> ignoreIndex;
};
/// nnU-Net's DC_and_CE loss summed over deep-supervision levels (docs/dialect.md,
/// med.dice_ce). targets hold class indices (any dtype; a value outside [0, C) throws Error
/// naming the level, voxel and value). y is a scalar (F32 / F64). With no class kept
/// (C == 1 without include_background) the dice term is NaN, like torch's mean of nothing.
void diceCE(const std::vector<const Tensor *> &logits, const std::vector<const Tensor *> &targets,
            const DiceCEParams &p, Tensor &y);

//===----------------------------------------------------------------------------------===//
// Gradient kernels (the backward ops med-autodiff emits; docs/dialect.md, *_grad ops)
//===----------------------------------------------------------------------------------===//

/// dw[co, ci, a, b, c] = Σ_{n,z,y,x} dy[n, co, z, y, x] · x[n, g·Cin/groups + ci,
/// z·s − p + a·d, ...] (zero outside), g the group of co. x N×Cin×D×H×W, dy N×Cout×D'×H'×W',
/// dw Cout×Cin/groups×kD×kH×kW (the kernel size is dw's shape; p.outputPadding unused).
/// D'×H'×W' need not follow from D×H×W: the sum runs over dy's extent and bounds-checks x,
/// so the weight gradient of conv3dTranspose is conv3dGradWeight(its dy, its x, p, dw)
/// with dw Cin×Cout/groups×k.
void conv3dGradWeight(const Tensor &x, const Tensor &dy, const ConvParams &p, Tensor &dw);

/// Gradients of groupNorm / channelLayerNorm / grn with respect to the input, gamma and
/// beta, from the forward input, gamma and dy. groupNormGrad takes the mean and rstd that
/// groupNorm saved (N×groups, accumulation type, as above; torch.native_group_norm_backward);
/// the others recompute their statistics from x. dgamma and dbeta have gamma's shape (C for
/// the norms, 1×C×1×1×1 for grn). For grn, where a channel's norm ‖x_c‖₂ is 0 its derivative
/// is taken as 0 (as torch's norm backward).
void groupNormGrad(const Tensor &x, const Tensor &gamma, const Tensor &mean, const Tensor &rstd,
                   const Tensor &dy, int64_t groups, Tensor &dx, Tensor &dgamma, Tensor &dbeta);
void channelLayerNormGrad(const Tensor &x, const Tensor &gamma, const Tensor &dy, double eps,
                          Tensor &dx, Tensor &dgamma, Tensor &dbeta);
void grnGrad(const Tensor &x, const Tensor &gamma, const Tensor &dy, double eps, Tensor &dx,
             Tensor &dgamma, Tensor &dbeta);

/// dx = dy · (Φ(x) + x·φ(x)), exact erf form.
void geluGrad(const Tensor &x, const Tensor &dy, Tensor &dx);
/// med.prelu_grad: dx = dy where x > 0, else slope·dy, the slope broadcast to x's shape
/// (x, dy and dx of one shape).
void preluGrad(const Tensor &x, const Tensor &slope, const Tensor &dy, Tensor &dx);

/// y = x broadcast (NumPy rules) to y's shape.
void broadcast(const Tensor &x, Tensor &y);

enum class Extremum { Max, Min };
/// Gradient of binary Max / Min (torch.maximum / minimum's backward): with a, b broadcast
/// to dy's shape, da = dy where a wins, 0 where b wins, dy/2 where a == b (a NaN operand:
/// dy to both); db likewise. da and db have dy's shape.
void extremumGrad(Extremum op, const Tensor &a, const Tensor &b, const Tensor &dy, Tensor &da,
                  Tensor &db);
/// Gradient of reduce Max / Min over `axes` (torch.amax / amin's backward): y is the
/// forward result and dy its gradient (either shape of the reduction, with or without the
/// kept size-1 axes); dx = (dy / count) · (x == y), count the elements equal to y in each
/// reduced set (a NaN y: NaN).
void reduceExtremumGrad(const Tensor &x, const Tensor &y, const Tensor &dy,
                        const std::vector<int64_t> &axes, Tensor &dx);
/// Gradient of slice: dx (the slice's input shape) is zero except dx[offsets + i·strides] =
/// dy[i]. Any dtype, like slice.
void sliceGrad(const Tensor &dy, const std::vector<int64_t> &offsets,
               const std::vector<int64_t> &strides, Tensor &dx);

/// Gradient of bceWithLogits with respect to the logits for the upstream gradient dloss
/// (rank 0 for reduced losses, logits' shape for LossReduction::None). Targets, mask and
/// pos_weight (also the automatic one) are constants. Masked-out elements get 0. dloss may
/// have any float dtype (read as a value); dlogits has the logits' dtype.
void bceWithLogitsGrad(const Tensor &logits, const Tensor &target, const Tensor *mask,
                       const Tensor *posWeight, const Tensor &dloss, const BceParams &p,
                       Tensor &dlogits);

/// Gradient of diceCE with respect to each logits tensor for the scalar upstream gradient
/// dloss; dlogits[i] has logits[i]'s shape. With no class kept (C == 1 without
/// include_background) the dice term is NaN but passes no gradient (torch's mean of an
/// empty tensor), so only the CE term remains.
void diceCEGrad(const std::vector<const Tensor *> &logits,
                const std::vector<const Tensor *> &targets, const Tensor &dloss,
                const DiceCEParams &p, const std::vector<Tensor *> &dlogits);

//===----------------------------------------------------------------------------------===//
// Optimizers (docs/dialect.md, med.adamw and med.sgd). Elementwise over the parameter;
// lr and step are rank-0 tensors of any float dtype. Results may not alias the inputs.
//===----------------------------------------------------------------------------------===//

struct AdamWParams {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 1e-2;
};
void adamw(const Tensor &param, const Tensor &grad, const Tensor &expAvg, const Tensor &expAvgSq,
           const Tensor &lr, const Tensor &step, const AdamWParams &p, Tensor &newParam,
           Tensor &newExpAvg, Tensor &newExpAvgSq);

struct SGDParams {
  double momentum = 0, weightDecay = 0;
  bool nesterov = false;
};
void sgd(const Tensor &param, const Tensor &grad, const Tensor &buffer, const Tensor &lr,
         const SGDParams &p, Tensor &newParam, Tensor &newBuffer);

//===----------------------------------------------------------------------------------===//
// Dynamic loss scaling (docs/dialect.md, med.any_non_finite, med.select,
// med.update_loss_scale). Scalars may have any float dtype.
//===----------------------------------------------------------------------------------===//

//===----------------------------------------------------------------------------------===//
// Random numbers (docs/dialect.md, med.random; medrun/Random.h)
//===----------------------------------------------------------------------------------===//

enum class Distribution { Uniform, Normal, Bernoulli };
/// y[n, i] = the number of element i of sample n (the first index) of `stream` under the
/// i64 scalar `key`: uniform, normal, or 1/0 with `probability` (Bernoulli).
void random(const Tensor &key, int64_t stream, Distribution distribution, double probability,
            Tensor &y);
/// med.dropout: y = x * s where element i of sample n (the first index) is kept (its draw of
/// `stream` under the i64 scalar `key`, dropoutKeeps), else 0; s = dropoutScale(p) (in f64
/// under f64: 1/(1 - p)).
void dropout(const Tensor &x, const Tensor &key, int64_t stream, double p, Tensor &y);

//===----------------------------------------------------------------------------------===//
// Augmentation transforms (docs/dialect.md; medrun/Augment.h): N×C×D×H×W batches,
// per-sample parameters in f32.
//===----------------------------------------------------------------------------------===//

/// med.gaussian_blur: sigma is N×C×3; passes along D, H, W in f32.
void gaussianBlur(const Tensor &x, const Tensor &sigma, Tensor &y);
/// med.simulate_low_resolution: scale is N×C×3.
void simulateLowResolution(const Tensor &x, const Tensor &scale, Tensor &y);
/// med.mirror: flip is N×3; any element type (y has x's).
void mirror(const Tensor &x, const Tensor &flip, Tensor &y);
/// med.affine_matrix: N×3×4 matrices from angles, scales (N×3) and shear (N×6, or none).
void affineMatrix(const Tensor &angles, const Tensor &scales, const Tensor *shear, Tensor &y);
/// med.orientation_matrix: N×3×4 signed axis permutations, element ⌊48 u⌋ of each sample.
void orientationMatrix(const Tensor &u, Tensor &y);
/// med.shift_slices: shift is N×D×2 (floored); any element type (y has x's).
void shiftSlices(const Tensor &x, const Tensor &shift, Tensor &y);

/// y (a scalar) = 1 if any element of any input is ±inf or NaN, else 0.
void anyNonFinite(const std::vector<const Tensor *> &inputs, Tensor &y);

/// y = onTrue if the scalar cond is non-zero (NaN counts as non-zero), else onFalse, as a
/// whole (the other operand is not read). onTrue, onFalse and y have one dtype and shape.
void select(const Tensor &cond, const Tensor &onTrue, const Tensor &onFalse, Tensor &y);

struct LossScaleParams {
  double growthFactor = 2.0, backoffFactor = 0.5;
  int64_t growthInterval = 2000;
};
/// torch._amp_update_scale_: with found_inf, scale · backoff and tracker 0; else tracker + 1,
/// and when that reaches growthInterval, scale · growth (if finite in f32) and tracker 0.
/// Products in double, rounded to the results' dtype.
void updateLossScale(const Tensor &scale, const Tensor &tracker, const Tensor &foundInf,
                     const LossScaleParams &p, Tensor &newScale, Tensor &newTracker);

enum class SpatialMode { Linear, Nearest, LinearArgmax };
enum class SpatialBorder { Zeros, Constant, Reflection };
struct SpatialParams {
  SpatialMode mode = SpatialMode::Linear;
  SpatialBorder border = SpatialBorder::Zeros;
  double value = 0;            ///< border constant's fill; linear_argmax's label outside
  std::vector<int64_t> labels; ///< linear_argmax: ascending
};
/// med.spatial_transform: x N×C×D×H×W (f32, f64, bf16; i32 labels for nearest and
/// linear_argmax) resampled into y N×C×D'×H'×W' by matrix N×3×4 (f32, or f64 in f64 runs):
/// output voxel o reads input position M[:, :3]·(o − c_out) + M[:, 3] + c_in, c = (n − 1)/2.
void spatialTransform(const Tensor &x, const Tensor &matrix, const SpatialParams &p, Tensor &y);

} // namespace medrun::cpu

#endif // MEDRUN_KERNELS_H
