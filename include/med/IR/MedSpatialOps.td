//===- MedSpatialOps.td - spatial augmentation ops of the med dialect -----------===//
//
// Included at the end of MedOps.td. Per-sample parameters are ordinary f32 operands of
// shape [N, ...], so the same op runs with given or with randomly drawn parameters.
//
//===----------------------------------------------------------------------------------===//

#ifndef MED_SPATIAL_OPS_TD
#define MED_SPATIAL_OPS_TD

def Med_ResampleMode : I32EnumAttr<"ResampleMode", "how med.spatial_transform samples", [
    I32EnumAttrCase<"linear", 0>,
    I32EnumAttrCase<"nearest", 1>,
    I32EnumAttrCase<"linear_argmax", 2>]> {
  let cppNamespace = "::mlir::med";
}

def Med_BorderMode : I32EnumAttr<"BorderMode", "what a sample outside the input reads", [
    I32EnumAttrCase<"zeros", 0>,
    I32EnumAttrCase<"constant", 1>,
    I32EnumAttrCase<"reflection", 2>]> {
  let cppNamespace = "::mlir::med";
}

def Med_SpatialTransformOp : Med_ShapedOp<"spatial_transform", [Med_NotDifferentiable, Med_Fusible]> {
  let shapeRule = [{spatialTransform($input, $matrix, $shape, $mode, $border, $value, $labels[])}];
  let flops = "16"; // a weighted sum of 8 neighbours (labels: their argmax)
  let planAttributes = [{
    if (!o.getLabels())
      attrs["labels"] = json::Array();
  }];
  let planAttributeNames = ["labels"];
  let summary = "resamples each sample by its affine matrix (rotation, scaling, shear)";
  let description = [{
    Resamples an N×C×D×H×W `input` (typically an enlarged patch) to N×C×`shape`, with one
    affine matrix per sample in `matrix` (N×3×4, f32). Axes are in (D, H, W) order and the
    matrix maps an output voxel `o` to an input position

    `p = M[:, :3]·(o − c_out) + M[:, 3] + c_in`, with `c = (n − 1)/2` per axis,

    so positions are voxel centres: the centre of the output lands on the centre of the
    input, and `M = [I | 0]` from a 13³ input to a 7³ output is the centre crop. This is
    `torch.nn.functional.grid_sample` with `align_corners=False` on the grid
    `(2p + 1)/n_in − 1` (flipped to x, y, z order), nnU-Net's and batchgenerators v2's
    convention (its matrix `Rz·Ry·Rx·diag(s)` is `M[:, :3]`, no translation).

    `mode`:
    - `linear`: trilinear interpolation of each channel (float inputs); the 8 neighbours
      weighted as grid_sample weights them, accumulated in f32.
    - `nearest`: the value at the nearest voxel, each coordinate rounded half to even
      (`nearbyint`), exactly as grid_sample's `nearest` on CUDA and on the CPU from
      PyTorch 2 (LibTorch 1.13's CPU kernel rounds 3-D halves away from zero); floats or
      i32 labels.
    - `linear_argmax`: for labels (f32 or i32), nnU-Net's segmentation resampling: each
      label of `labels` (strictly ascending, e.g. `[-1, 0, 1, 2, 3]`) is resampled as a
      one-hot mask trilinearly and the voxel takes the label of the largest value, by a
      running argmax with strict `>` (the lowest label wins ties); a voxel whose position
      lies outside `[0, n − 1]` on some axis (grid coordinate outside `[−1 + 1/n, 1 − 1/n]`)
      takes `value` (−1 for nnU-Net). A voxel matching no listed label counts for none.

    `border` (linear and nearest): what a neighbour outside the input reads: `zeros`
    (default), `constant` (`value`), or `reflection`: as grid_sample's
    `padding_mode='reflection'` with `align_corners=False`, the position is reflected about
    the input's outer edges (−0.5 and n − 0.5) and clamped to `[0, n − 1]` before sampling.

    Not differentiable (augmentation precedes the network).

    ```mlir
    %img = med.spatial_transform linear %x, %m {shape = array<i64: 128, 128, 128>}
        : (tensor<2x1x205x205x205xf32>, tensor<2x3x4xf32>) -> tensor<2x1x128x128x128xf32>
    %seg = med.spatial_transform linear_argmax %s, %m {shape = array<i64: 128, 128, 128>,
        labels = array<i64: -1, 0, 1, 2, 3>, value = -1.0}
        : (tensor<2x1x205x205x205xi32>, tensor<2x3x4xf32>) -> tensor<2x1x128x128x128xi32>
    %r = med.spatial_transform linear %x, %m border reflection {shape = array<i64: 64, 64, 64>}
        : (tensor<2x1x80x80x80xf32>, tensor<2x3x4xf32>) -> tensor<2x1x64x64x64xf32>
    ```
  }];
  let arguments = (ins Med_ResampleMode:$mode, Med_LabelTensor:$input, Med_FloatTensor:$matrix,
                       DenseI64ArrayAttr:$shape,
                       DefaultValuedAttr<Med_BorderMode, "::mlir::med::BorderMode::zeros">:$border,
                       DefaultValuedAttr<F64Attr, "0.0">:$value,
                       OptionalAttr<DenseI64ArrayAttr>:$labels);
  let results = (outs Med_LabelTensor:$result);
  let assemblyFormat = [{
    $mode $input `,` $matrix (`border` $border^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------------------===//
// Resizing (the networks' upsampling: ONNX Resize, torch.nn.functional.interpolate)
//===----------------------------------------------------------------------------------===//

def Med_ResizeMode : I32EnumAttr<"ResizeMode", "how med.resize samples", [
    I32EnumAttrCase<"linear", 0>,
    I32EnumAttrCase<"nearest", 1>]> {
  let cppNamespace = "::mlir::med";
}

def Med_ResizeOp : Med_ShapedOp<"resize", [Med_Differentiable]> {
  let family = "data movement";
  let shapeRule = [{resize($input, $size, $scale, $mode, $align_corners)}];
  let flops = "16";
  let summary = "trilinear or nearest resizing to a size or by integer factors, as torch's interpolate and ONNX Resize";
  let description = [{
    Resizes the spatial axes of an N×C×D×H×W input to `size` (D', H', W'), or by the whole
    factors `scale` (f_D, f_H, f_W ≥ 1) to the size (D·f_D, H·f_H, W·f_W): exactly one of
    the two is given. The scale form is what imported networks use (torch's
    `scale_factor`, ONNX Resize's `scales`): their spatial sizes stay open until
    `med-specialize`, and the result's size follows the input's. Per axis, with
    `s = in / out` (for a factor f, 1/f: the scale torch and ONNX compute from f):

    - `linear` (trilinear): the source position of output index `o` is `(o + 0.5)·s − 0.5`,
      clamped below at 0 (torch's `align_corners=False`, ONNX's `half_pixel`; for an
      output of more than one element also `pytorch_half_pixel`), or `o·(in − 1)/(out − 1)`
      with `align_corners` (0 for an output of one element; ONNX's `align_corners`); the
      result mixes the two neighbours `i = ⌊position⌋` and `min(i + 1, in − 1)` with weights
      `1 − λ` and `λ`, `λ = position − i`, along each axis.
    - `nearest`: the element `min(⌊o·s⌋, in − 1)` (torch's `nearest`, ONNX's `asymmetric`
      with `floor`).

    The positions and weights are computed in f32 (f64 in f64 programs), as torch computes
    them. Its gradient is `med.resize_grad`, the adjoint: each output's gradient sent back
    to the elements it read, with the same weights.

    ```mlir
    %up = med.resize linear %x {size = array<i64: 16, 16, 16>} : (tensor<2x32x8x8x8xf32>) -> tensor<2x32x16x16x16xf32>
    %up2 = med.resize nearest %x {size = array<i64: 16, 16, 16>} : (tensor<2x32x8x8x8xf32>) -> tensor<2x32x16x16x16xf32>
    %up3 = med.resize linear %y {scale = array<i64: 2, 2, 2>} : (tensor<?x32x?x?x?xf32>) -> tensor<?x32x?x?x?xf32>
    ```
  }];
  let arguments = (ins Med_ResizeMode:$mode, Med_FloatTensor:$input,
                       OptionalAttr<DenseI64ArrayAttr>:$size,
                       OptionalAttr<DenseI64ArrayAttr>:$scale, UnitAttr:$align_corners);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$mode $input attr-dict `:` functional-type(operands, results)";
}

def Med_ResizeGradOp : Med_ShapedOp<"resize_grad", [Med_NotDifferentiable]> {
  let family = "data movement";
  let shapeRule = [{resizeGrad($grad_output, $size, $mode, $align_corners)}];
  let flops = "16 per grad_output";
  let summary = "gradient of med.resize: the adjoint of the resizing";
  let description = [{
    `grad_output` is the gradient of a `med.resize` result (N×C×D'×H'×W'); `size` the
    spatial size of that resize's input, `mode` and `align_corners` its own. The result
    (N×C×`size`) holds at each input element the sum of the output gradients that read it,
    each times the weight it was read with, as torch's `upsample_trilinear3d_backward` and
    `upsample_nearest3d_backward`. Each input element gathers its sum itself (no scattered
    additions), in the same order on every executor.

    ```mlir
    %dx = med.resize_grad linear %dy {size = array<i64: 8, 8, 8>} : (tensor<2x32x16x16x16xf32>) -> tensor<2x32x8x8x8xf32>
    ```
  }];
  let arguments = (ins Med_ResizeMode:$mode, Med_FloatTensor:$grad_output,
                       DenseI64ArrayAttr:$size, UnitAttr:$align_corners);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$mode $grad_output attr-dict `:` functional-type(operands, results)";
}

#endif // MED_SPATIAL_OPS_TD
//===----------------------------------------------------------------------------------===//
// Average pooling (ResEncUNet's strided residual skip: ONNX AveragePool, torch's AvgPool3d)
//===----------------------------------------------------------------------------------===//

def Med_AvgPoolOp : Med_ShapedOp<"avg_pool", [Med_Differentiable]> {
  let family = "data movement";
  let shapeRule = [{avgPool($input, $kernel)}];
  let flops = "1 per input"; // an addition per element read
  let summary = "average pooling with the stride equal to the window, without padding";
  let description = [{
    Averages the non-overlapping `kernel` (kD, kH, kW) windows of an N×C×D×H×W input: the
    result is N×C×⌊D/kD⌋×⌊H/kH⌋×⌊W/kW⌋ (torch's `avg_pool3d` with `stride = kernel_size`,
    no padding, `ceil_mode=False`; ONNX AveragePool with `strides = kernel_shape` and no
    pads), each element the sum of its window (W inside H inside D, in the math type)
    divided by kD·kH·kW. Elements past the last whole window are not read. Its gradient is
    `med.avg_pool_grad`.

    ```mlir
    %y = med.avg_pool %x {kernel = array<i64: 2, 2, 2>} : (tensor<2x32x8x8x9xf32>) -> tensor<2x32x4x4x4xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, DenseI64ArrayAttr:$kernel);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Med_AvgPoolGradOp : Med_ShapedOp<"avg_pool_grad", [Med_NotDifferentiable]> {
  let family = "data movement";
  let shapeRule = [{avgPoolGrad($grad_output, $kernel, $size)}];
  let flops = "1";
  let summary = "gradient of med.avg_pool";
  let description = [{
    `grad_output` is the gradient of a `med.avg_pool` result (N×C×D'×H'×W'); `kernel` that
    pool's window, `size` the spatial size of its input (D'·kD ≤ D < (D'+1)·kD per axis).
    Each input element of a window gets that window's gradient divided by kD·kH·kW; the
    elements past the last whole window get 0.

    ```mlir
    %dx = med.avg_pool_grad %dy {kernel = array<i64: 2, 2, 2>, size = array<i64: 8, 8, 9>} : (tensor<2x32x4x4x4xf32>) -> tensor<2x32x8x8x9xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$grad_output, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$size);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$grad_output attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------------------===//
// Max pooling (MONAI BasicUNet's down path: ONNX MaxPool, torch's MaxPool3d)
//===----------------------------------------------------------------------------------===//

def Med_MaxPoolOp : Med_ShapedOp<"max_pool", [Med_Differentiable]> {
  let family = "data movement";
  let shapeRule = [{avgPool($input, $kernel)}];
  let flops = "1 per input"; // a comparison per element read
  let summary = "max pooling with the stride equal to the window, without padding";
  let description = [{
    The maximum of each non-overlapping `kernel` (kD, kH, kW) window of an N×C×D×H×W input:
    the result is N×C×⌊D/kD⌋×⌊H/kH⌋×⌊W/kW⌋ (torch's `max_pool3d` with `stride =
    kernel_size`, no padding, no dilation, `ceil_mode=False`; ONNX MaxPool with `strides =
    kernel_shape` and no pads). A NaN in a window is its maximum, as in torch. Its gradient
    is `med.max_pool_grad`.

    ```mlir
    %y = med.max_pool %x {kernel = array<i64: 2, 2, 2>} : (tensor<2x32x8x8x9xf32>) -> tensor<2x32x4x4x4xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, DenseI64ArrayAttr:$kernel);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Med_MaxPoolGradOp : Med_ShapedOp<"max_pool_grad", [Med_NotDifferentiable]> {
  let family = "data movement";
  let shapeRule = [{maxPoolGrad($input, $grad_output, $kernel)}];
  let flops = "1 per input";
  let summary = "gradient of med.max_pool";
  let description = [{
    `input` is the pooled tensor, `grad_output` the gradient of the `med.max_pool` result.
    Each window's gradient goes to the element torch's `max_pool3d` returns as its index:
    the first maximum in D, H, W order (the first NaN where there is one); every other
    element, and those past the last whole window, get 0. Each element finds this from its
    own window (no scattered additions).

    ```mlir
    %dx = med.max_pool_grad %x, %dy {kernel = array<i64: 2, 2, 2>} : (tensor<2x32x8x8x9xf32>, tensor<2x32x4x4x4xf32>) -> tensor<2x32x8x8x9xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$grad_output,
                       DenseI64ArrayAttr:$kernel);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad_output attr-dict `:` functional-type(operands, results)";
}
