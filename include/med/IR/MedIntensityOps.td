//===- MedIntensityOps.td - augmentation transforms of the image ----------------------===//
//
// Transforms of a batch whose parameters are operands ([B, ...] tensors, drawn with
// med.random or given), so the same op runs drawn and chosen augmentations
// (docs/augment.md). Not differentiable: they act on the data before the network.
//
//===----------------------------------------------------------------------------------===//

#ifndef MED_INTENSITY_OPS_TD
#define MED_INTENSITY_OPS_TD

def Med_GaussianBlurOp : Med_ShapedOp<"gaussian_blur", [Med_NotDifferentiable]> {
  let shapeRule = [{sampleTransform("sigma", $input, $sigma, true)}];
  let summary = "separable Gaussian blur, a sigma per sample, channel and axis";
  let description = [{
    Blurs each channel of each sample of an N×C×D×H×W `input` along D, then H, then W (each
    pass reads the previous one's f32 result) with the 1-D kernel w_j ∝ exp(−½ (j/σ)²),
    j = −r … r, normalised to sum 1, σ = `sigma`[n, c, axis] (`sigma` is N×C×3, f32). The
    kernel has 2r + 1 taps, the odd integer nearest to 6σ + ½ (rounded half to even first;
    an even result moves towards 6σ + ½): 3 to 7 taps for σ in [0.5, 1], as nnU-Net's
    GaussianBlurTransform (batchgeneratorsv2, truncate 6); r is at most twice the axis
    (a wider kernel would only fold onto the same voxels again). Outside the volume the input is
    reflected without repeating the edge (torch's `reflect` padding, folded again where
    the kernel is wider than the axis). A σ of 0 or below leaves that axis of that channel as
    it is, as does one that is not finite, so a transform applied to some channels only is a
    σ of 0 for the others.

    ```mlir
    %y = med.gaussian_blur %x, %sigma : (tensor<2x1x8x8x8xf32>, tensor<2x1x3xf32>) -> tensor<2x1x8x8x8xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$sigma);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input `,` $sigma attr-dict `:` functional-type(operands, results)";
}

def Med_SimulateLowResolutionOp : Med_ShapedOp<"simulate_low_resolution",
                                               [Med_NotDifferentiable]> {
  let shapeRule = [{sampleTransform("scale", $input, $scale, true)}];
  let summary = "nearest-exact downsampling, then trilinear upsampling back";
  let description = [{
    nnU-Net's SimulateLowResolutionTransform: each channel of each sample of an N×C×D×H×W
    `input` is resampled to m_a = round(n_a · s_a) voxels per axis (rounded half to even,
    kept within [1, n_a]; a scale that is not finite keeps n_a), s_a = `scale`[n, c, a]
    (`scale` is N×C×3, f32), with torch's `nearest-exact` rule
    (voxel j reads min(⌊(j + ½) · n_a/m_a⌋, n_a − 1)), and back to n_a with `trilinear`
    interpolation, `align_corners=False` (voxel o reads the position (o + ½) · m_a/n_a − ½,
    clamped below at 0). A scale of 1 on every axis leaves the channel as it is, so a
    transform applied to some channels only is a scale of 1 for the others. The two
    resamplings are one pass: the low-resolution volume is never stored.

    ```mlir
    %y = med.simulate_low_resolution %x, %scale : (tensor<2x1x8x8x8xf32>, tensor<2x1x3xf32>) -> tensor<2x1x8x8x8xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$input, Med_FloatTensor:$scale);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input `,` $scale attr-dict `:` functional-type(operands, results)";
}

def Med_MirrorOp : Med_ShapedOp<"mirror", [Med_NotDifferentiable]> {
  let shapeRule = [{sampleTransform("flip", $input, $flip, false)}];
  let summary = "flips the spatial axes of each sample that its flags select";
  let description = [{
    y[n, c, d, h, w] reads `input` with d → D − 1 − d where `flip`[n, 0] is non-zero, and
    likewise h with `flip`[n, 1] and w with `flip`[n, 2] (`flip` is N×3, f32): nnU-Net's
    MirrorTransform and BANIS's flips, one decision per sample and axis, image and labels
    alike (any element type; values are moved, never computed).

    ```mlir
    %y = med.mirror %labels, %flip : (tensor<2x1x8x8x8xi32>, tensor<2x3xf32>) -> tensor<2x1x8x8x8xi32>
    ```
  }];
  let arguments = (ins Med_LabelTensor:$input, Med_FloatTensor:$flip);
  let results = (outs Med_LabelTensor:$result);
  let assemblyFormat = "$input `,` $flip attr-dict `:` functional-type(operands, results)";
}

def Med_AffineMatrixOp : Med_ShapedOp<"affine_matrix", [Med_NotDifferentiable]> {
  let shapeRule = [{affineMatrix($angles, $scales, $shear)}];
  let summary = "per-sample matrices of a spatial transform from rotations, shears and scales";
  let description = [{
    The N×3×4 matrices of med.spatial_transform (output voxel offsets from the centre to
    input positions, axes D, H, W; docs/augment.md) of rotations by `angles` (N×3, radians),
    scales `scales` (N×3) and, if given, shears `shear` (N×6), without translation:

        M = R_D(a₀) · R_H(a₁) · R_W(a₂) · Sh · diag(k₀, k₁, k₂),   M[:, 3] = 0

    where R_D rotates in the (H, W) plane ([[1, 0, 0], [0, c, −s], [0, s, c]]), R_H in the
    (D, W) plane ([[c, 0, s], [0, 1, 0], [−s, 0, c]]), R_W in the (D, H) plane
    ([[c, −s, 0], [s, c, 0], [0, 0, 1]]) and Sh = [[1, s₀, s₁], [s₂, 1, s₃], [s₄, s₅, 1]]:
    MONAI's `create_rotate`, `create_shear` and `create_scale` composed as its `AffineGrid`
    does (BANIS's RandAffine). nnU-Net's Rz·Ry·Rx·S (batchgeneratorsv2) is the same product
    up to the signs of its angles, as it rotates (x, y, z) = (W, H, D) coordinates: equal in
    distribution for its symmetric ranges. Computed in double, rounded once to f32.

    ```mlir
    %m = med.affine_matrix %angles, %scales shear %shear : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x3x4xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$angles, Med_FloatTensor:$scales,
                       Optional<Med_FloatTensor>:$shear);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$angles `,` $scales (`shear` $shear^)? attr-dict `:` functional-type(operands, results)";
}

def Med_OrientationMatrixOp : Med_ShapedOp<"orientation_matrix", [Med_NotDifferentiable]> {
  let shapeRule = [{orientationMatrix($u)}];
  let summary = "per-sample axis permutations with signs: the 48 orientations of a cube";
  let description = [{
    The N×3×4 matrices of med.spatial_transform of element ⌊48 u⌋ (clamped to 0 … 47) of the
    group of signed axis permutations, u = `u`[n] (N, f32, a uniform number in [0, 1)):
    element 8·q + f permutes the axes by the q-th permutation of (D, H, W) in lexicographic
    order (DHW, DWH, HDW, HWD, WDH, WHD) and flips axis a where bit a of f is set:
    M[i, π_q(i)] = ±1, the rest 0 (no translation). BANIS's axis permutation, rot90 in three
    planes and flips together draw a uniform element of this group, so one uniform number
    per sample stands for all three; the orientation is exact in any resampling mode (an
    output voxel centre lands on an input voxel centre when the input and output sizes match).

    ```mlir
    %o = med.orientation_matrix %u : (tensor<2xf32>) -> tensor<2x3x4xf32>
    ```
  }];
  let arguments = (ins Med_FloatTensor:$u);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$u attr-dict `:` functional-type(operands, results)";
}

def Med_ShiftSlicesOp : Med_ShapedOp<"shift_slices", [Med_NotDifferentiable]> {
  let shapeRule = [{shiftSlices($input, $shift)}];
  let summary = "rolls each D-slice of each sample within its plane, with wrap-around";
  let description = [{
    BANIS's slice shift (a misaligned section of a serial-section volume): slice d of sample
    n of an N×C×D×H×W `input` is rolled by (⌊`shift`[n, d, 0]⌋, ⌊`shift`[n, d, 1]⌋) voxels
    along H and W, as `np.roll` does: y[n, c, d, h, w] = x[n, c, d, (h − s_h) mod H,
    (w − s_w) mod W]. `shift` is N×D×2, f32; a shift of 0 leaves the slice where it is, so
    the slices a transform leaves alone have 0 (a uniform number in [−10, 11) floors to a
    shift in −10 … 10); a non-finite shift counts as 0. Any element type: values are moved,
    never computed.

    ```mlir
    %y = med.shift_slices %x, %shift : (tensor<2x1x8x8x8xf32>, tensor<2x8x2xf32>) -> tensor<2x1x8x8x8xf32>
    ```
  }];
  let arguments = (ins Med_LabelTensor:$input, Med_FloatTensor:$shift);
  let results = (outs Med_LabelTensor:$result);
  let assemblyFormat = "$input `,` $shift attr-dict `:` functional-type(operands, results)";
}

#endif // MED_INTENSITY_OPS_TD
