//===- ShapeRules.h - the shape rules of the med ops, without MLIR ---------------===//
//
// One rule per op (or op family): operand types and attribute values in, result types or
// one message out. The message names the operand or attribute and the expected vs actual
// value. The dialect's verifier and type inference (lib/IR/MedOps.cpp) and the runtime's
// plan verifier (runtime/src/artifact/PlanVerifier.cpp) both call these functions, so a compiled
// plan is re-checked by exactly the rules that built it.
//
// Sizes may be kDynamic (MLIR's `?`, which the runtime never has): a rule then checks what it
// can and infers kDynamic. Size arithmetic is checked: sizes that overflow int64 are an error.
//
//===----------------------------------------------------------------------------------===//
#ifndef MED_SHAPERULES_H
#define MED_SHAPERULES_H

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace med::shape {

/// An unknown size; equal to mlir::ShapedType::kDynamic.
constexpr int64_t kDynamic = std::numeric_limits<int64_t>::min();

using Dims = std::vector<int64_t>;

/// A ranked tensor type: sizes and the element type in MLIR's spelling ("f32", "bf16", "i64").
struct TensorType {
  Dims shape;
  std::string element;
  bool operator==(const TensorType &o) const { return shape == o.shape && element == o.element; }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};
using Types = std::vector<TensorType>;

/// The result of a rule: empty when the operands fit, else the message (without the op name).
using Error = std::string;

/// "2x3x4", "?x3" ("scalar" for rank 0), as in the verifier's messages.
std::string shapeStr(const Dims &shape);
/// "[1, 2, 3]".
std::string listStr(const std::vector<int64_t> &values);
/// "tensor<2x3xf32>", as MLIR prints the type.
std::string typeStr(const TensorType &t);

// Convolutions. `outputPadding` is {0, 0, 0} for conv3d; `transposed` selects
// conv3d_transpose's output-size formula and weight layout.
Error conv3d(const TensorType &input, const TensorType &weight, const TensorType *bias,
             const Dims &stride, const Dims &padding, const Dims &dilation,
             const Dims &outputPadding, int64_t groups, bool transposed, Types &out);
Error conv3dGradWeight(const TensorType &input, const TensorType &gradOutput, const Dims &kernel,
                       const Dims &stride, const Dims &padding, const Dims &dilation,
                       int64_t groups, Types &out);
// Shift-sums (med.shift_sum, med.shift_sum_grad_weight): a depthwise convolution of stride 1
// and "same" padding, so the rules are conv3d's with stride and dilation 1, padding k/2 and
// groups = C, after checking the weight is C x 1 x k x k x k with every k odd.
Error shiftSum(const TensorType &input, const TensorType &weight, const TensorType *bias,
               bool mirrored, Types &out);
Error shiftSumGradWeight(const TensorType &input, const TensorType &gradOutput,
                         const Dims &kernel, Types &out);

// Normalizations and their gradients.
/// med.batch_norm: gamma, beta and the running statistics one value per channel; the
/// result is the input's type, then the new running statistics (C each). In the training
/// form a channel needs more than one value (the unbiased variance divides by n - 1).
Error batchNorm(const TensorType &input, const TensorType &gamma, const TensorType &beta,
                const TensorType &runningMean, const TensorType &runningVar, double epsilon,
                double momentum, bool training, Types &out);
Error groupNorm(const TensorType &input, const TensorType &gamma, const TensorType &beta,
                int64_t groups, double epsilon, bool saveStatistics, Types &out);
Error groupNormStats(const TensorType &input, int64_t groups, double epsilon, Types &out);
Error groupNormApply(const TensorType &input, const TensorType &mean, const TensorType &rstd,
                     const TensorType &gamma, const TensorType &beta, int64_t groups, Types &out);
Error channelLayerNorm(const TensorType &input, const TensorType &gamma, const TensorType &beta,
                       double epsilon, Types &out);
Error grn(const TensorType &input, const TensorType &gamma, const TensorType &beta, Types &out);
Error groupNormGrad(const TensorType &input, const TensorType &gamma, const TensorType &mean,
                    const TensorType &rstd, const TensorType &gradOutput, int64_t groups,
                    Types &out);
Error channelLayerNormGrad(const TensorType &input, const TensorType &gamma,
                           const TensorType &gradOutput, Types &out);
Error grnGrad(const TensorType &input, const TensorType &gamma, const TensorType &gradOutput,
              Types &out);

// Elementwise.
Error unary(const TensorType &input, Types &out);
Error broadcastBinary(const TensorType &lhs, const TensorType &rhs, Types &out);
Error geluGrad(const TensorType &input, const TensorType &gradOutput, Types &out);
/// med.prelu: `slope` broadcasts to `input` (never enlarging it); the result is the input's type.
Error prelu(const TensorType &input, const TensorType &slope, Types &out);
/// med.softmax: `axis` an axis of the input; the result is the input's type.
Error softmax(const TensorType &input, int64_t axis, Types &out);
Error preluGrad(const TensorType &input, const TensorType &slope, const TensorType &gradOutput,
                Types &out);
Error extremumGrad(const TensorType &lhs, const TensorType &rhs, const TensorType &gradOutput,
                   Types &out);

// Data movement and shapes. `strides` of slice may be null (all 1).
Error pad(const TensorType &input, const Dims &low, const Dims &high, Types &out);
Error slice(const TensorType &input, const Dims &offsets, const Dims &sizes, const Dims *strides,
            Types &out);
Error sliceGrad(const TensorType &gradOutput, const Dims &offsets, const Dims &strides,
                const Dims &shape, Types &out);
Error concat(const Types &inputs, int64_t axis, Types &out);
/// med.transpose: `permutation` holds each axis of the input (rank >= 1) once; axis i of
/// the result is axis permutation[i] of the input.
Error transpose(const TensorType &input, const Dims &permutation, Types &out);
Error reshape(const TensorType &input, const Dims &shape, Types &out);
Error broadcastTo(const TensorType &input, const Dims &shape, Types &out);

// Reductions.
Error reduce(const TensorType &input, const Dims &axes, bool keepdims, Types &out);
Error reduceExtremumGrad(const TensorType &input, const TensorType &extremum,
                         const TensorType &gradOutput, const Dims &axes, bool keepdims,
                         Types &out);

// Losses. `gradLoss` is null for the losses themselves and given for their gradients.
Error bceWithLogits(const TensorType &logits, const TensorType &target, const TensorType *mask,
                    const TensorType *posWeight, bool reductionNone, bool autoPosWeight,
                    double maxPosWeight, const TensorType *gradLoss, Types &out);
Error diceCE(const Types &logits, const Types &targets, const std::vector<double> &weights,
             const TensorType *gradLoss, Types &out);

// Optimizers and mixed precision.
Error adamw(const TensorType &param, const TensorType &grad, const TensorType &expAvg,
            const TensorType &expAvgSq, const TensorType &lr, const TensorType &step,
            double beta1, double beta2, double epsilon, Types &out);
Error sgd(const TensorType &param, const TensorType &grad, const TensorType &momentumBuffer,
          const TensorType &lr, double momentum, bool nesterov, Types &out);
Error anyNonFinite(const Types &inputs, Types &out);
/// The sum of the squares of every element of every input: an f32 scalar.
Error sumSquares(const Types &inputs, Types &out);
// med.random: an f32 tensor shaped like `like`, or [like's first size] ++ *sampleShape; `key`
// is an i64 scalar, and a sample has fewer than 2^32 elements (its counter word).
// med.random; `stream` must be a 32-bit counter word and `probability` in [0, 1].
Error random(const TensorType &key, const TensorType &like, int64_t stream, double probability,
             const Dims *sampleShape, Types &out);
// med.dropout: the input's type; `key` an i64 scalar, `stream` a 32-bit counter word, `p`
// in [0, 1), a sample fewer than 2^32 elements (its counter word).
Error dropout(const TensorType &input, const TensorType &key, int64_t stream, double p,
              Types &out);
// A transform of an N×C×D×H×W batch by per-sample parameters `param` (f32) of shape N×C×3
// (`perChannel`: med.gaussian_blur's sigma, med.simulate_low_resolution's scale) or N×3
// (med.mirror's flip); the result has the input's type.
Error sampleTransform(const std::string &paramName, const TensorType &input,
                      const TensorType &param, bool perChannel, Types &out);
// med.affine_matrix: f32 angles and scales of N×3, shear (if given) N×6; the result N×3×4.
Error affineMatrix(const TensorType &angles, const TensorType &scales, const TensorType *shear,
                   Types &out);
// med.orientation_matrix: an f32 u of N; the result N×3×4.
Error orientationMatrix(const TensorType &u, Types &out);
// med.shift_slices: an N×C×D×H×W input and an f32 shift of N×D×2.
Error shiftSlices(const TensorType &input, const TensorType &shift, Types &out);
/// The inputs' elements laid out in one 1-D tensor of `size`: input i (f32, any shape) at
/// element offset `offsets[i]`, ascending and without overlap; the rest are zeros.
Error pack(const Types &inputs, const Dims &offsets, int64_t size, Types &out);
/// A gradient bucket summed over the ranks of a data-parallel job (med.all_reduce): the
/// inputs laid out as `pack` lays them out (the same rules), one result of each input's type.
Error allReduce(const Types &inputs, const Dims &offsets, int64_t size, Types &out);
Error select(const TensorType &cond, const TensorType &onTrue, const TensorType &onFalse,
             Types &out);
Error updateLossScale(const TensorType &scale, const TensorType &growthTracker,
                      const TensorType &foundInf, double growthFactor, double backoffFactor,
                      int64_t growthInterval, Types &out);

// Label transforms (include/med/IR/MedLabelOps.td). `cropLow`/`cropSize` of affinities may
// be null (the low corner at 0, the rest of the volume).
Error affinities(const TensorType &seg, const Dims &offsets, const Dims *cropLow,
                 const Dims *cropSize, Types &out);
Error removeLabel(const TensorType &input, int64_t label, int64_t replaceWith, Types &out);
Error labelRegions(const TensorType &input, const std::vector<Dims> &regions, Types &out);
Error downsampleNearest(const TensorType &input, const Dims &size, Types &out);
// Spatial augmentation.
/// med.spatial_transform: an N x C x D x H x W input resampled to N x C x `shape` by one
/// N x 3 x 4 f32 matrix per sample. `mode` is linear, nearest or linear_argmax; `border`
/// zeros, constant or reflection; `labels` (empty when absent) the labels of linear_argmax.
Error spatialTransform(const TensorType &input, const TensorType &matrix, const Dims &shape,
                       const std::string &mode, const std::string &border, double value,
                       const Dims &labels, Types &out);
/// med.resize: an N x C x D x H x W input resized to N x C x `size`, or by the whole
/// factors `scale` to N x C x (D, H, W)·scale (open sizes stay open); exactly one of the two
/// is given. `mode` linear or nearest; `alignCorners` only with linear.
Error resize(const TensorType &input, const Dims *size, const Dims *scale,
             const std::string &mode, bool alignCorners, Types &out);
/// med.resize_grad: the gradient of a resize's result back to N x C x `size`.
Error resizeGrad(const TensorType &gradOutput, const Dims &size, const std::string &mode,
                 bool alignCorners, Types &out);
/// med.avg_pool: N x C x D x H x W pooled by non-overlapping `kernel` windows (stride =
/// kernel, no padding, floor): N x C x floor(D/kD) x floor(H/kH) x floor(W/kW).
Error avgPool(const TensorType &input, const Dims &kernel, Types &out);
/// med.avg_pool_grad: back to N x C x `size`, `size` pooled by `kernel` giving grad_output's.
Error avgPoolGrad(const TensorType &gradOutput, const Dims &kernel, const Dims &size, Types &out);
/// med.max_pool_grad: grad_output the type of `input` pooled by `kernel`; the result is input's type.
Error maxPoolGrad(const TensorType &input, const TensorType &gradOutput, const Dims &kernel,
                  Types &out);

} // namespace med::shape

#endif // MED_SHAPERULES_H
