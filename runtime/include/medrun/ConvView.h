//===- ConvView.h - the convolution a convolution-like op of a plan computes --------===//
//
// med.shift_sum is med.conv3d with groups = C, stride and dilation 1 and padding k/2 (with
// `mirrored`, med.conv3d_transpose with the same attributes); med.shift_sum_grad_weight is
// med.conv3d_grad_weight likewise (docs/dialect.md). The backends run the shift-sum ops
// through their convolution kernels and libraries with the attributes given here, so that
// the meaning of a shift-sum is the convolution's, written once.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_CONVVIEW_H
#define MEDRUN_CONVVIEW_H

#include "medrun/Plan.h"

#include <optional>
#include <string>

namespace medrun {

struct ConvView {
  /// "conv3d", "conv3d_transpose" or "conv3d_grad_weight".
  std::string kind;
  Shape stride, padding, dilation, outputPadding;
  int64_t groups = 1;
  bool shiftSum = false; ///< the op is a shift_sum or shift_sum_grad_weight
};

/// The convolution `op` computes: its own attributes for conv3d, conv3d_transpose and
/// conv3d_grad_weight, those of the equivalent convolution for shift_sum and
/// shift_sum_grad_weight; nullopt for any other op.
std::optional<ConvView> convView(const Function &fn, const OpInfo &op);

} // namespace medrun

#endif // MEDRUN_CONVVIEW_H
