//===- MedLabelOps.td - label transforms: targets made from label volumes -----------===//
//
// Ops that turn a (possibly augmented) label volume into training targets on the device:
// BANIS affinities, nnU-Net's remove-label, regions and deep-supervision downsampling. None
// is differentiable (labels have no gradient); their shape rules live in med/ShapeRules.h.
//
//===----------------------------------------------------------------------------------===//

#ifndef MED_LABEL_OPS_TD
#define MED_LABEL_OPS_TD

def Med_AffinitiesOp : Med_ShapedOp<"affinities", [Med_NotDifferentiable, Med_Fusible]> {
  let shapeRule = [{affinities($seg, $offsets, $crop_low, $crop_size)}];
  // The plan writes the crop whole: its low corner and the result's spatial size.
  let planAttributes = [{
    if (!o.getCropLow())
      attrs["crop_low"] = json::Array(SmallVector<int64_t>(3, 0));
    attrs["crop_size"] = json::Array(o.getAffinities().getType().getShape().drop_front(2));
  }];
  let planAttributeNames = ["crop_low", "crop_size"];
  let summary = "affinity targets and their loss mask from an instance label volume";
  let description = [{
    From instance ids `seg` (N × 1 × D × H × W, float or integer; 0 is background) gives,
    for each offset k (three entries of `offsets` per affinity, along D, H, W), the affinity
    and its loss mask at every voxel v of the output box (N × K × …, both f32, 0 or 1):

    - `mask_k(v) = 1` when v + off_k lies inside the volume and both voxels are labelled
      (an id below `unlabelled_below`, default 0, is unlabelled: −1 from padding or from
      outside a resampled patch);
    - `aff_k(v) = 1` when `mask_k(v)`, `seg(v) = seg(v + off_k)` and `seg(v) ≠ 0`, else 0.

    This is BANIS's `data.py::comp_affinities` (`aff[0, :-1] = seg[:-1] == seg[1:]` and
    likewise per axis and offset; voxels with seg = 0 get affinity 0; the loss takes the
    voxels where both ends are labelled and the other end is inside the volume, so the
    trailing edge is invalid), with the unlabelled ones as a mask of their own instead of
    the −1 BANIS stores in the int8 affinities; an affinity is never 1 where its mask is 0.
    Offsets may be negative (the leading edge is then invalid). Ids are compared in their
    own type: give instance ids as integers (i32) — an f32 id is exact only up to 2^24, and
    under bf16-mixed a step's f32 arguments are stored in bf16 (exact up to 256).

    The output box is `crop_size` voxels from `crop_low` (default: the low corner at 0 and
    the rest of the volume): the other end of an affinity may lie outside the box but
    inside the volume, so that long-range affinities are valid up to the output's edge.
    BANIS reads 128 + 10 voxels per axis and keeps the first 128:

    ```mlir
    %aff, %mask = med.affinities %seg {offsets = array<i64: 1, 0, 0, 0, 1, 0, 0, 0, 1, 10, 0, 0, 0, 10, 0, 0, 0, 10>,
                                       crop_size = array<i64: 128, 128, 128>}
        : (tensor<2x1x138x138x138xi32>) -> (tensor<2x6x128x128x128xf32>, tensor<2x6x128x128x128xf32>)
    ```
  }];
  let numResultsOnFailure = "2";
  let arguments = (ins Med_LabelTensor:$seg, DenseI64ArrayAttr:$offsets,
                       OptionalAttr<DenseI64ArrayAttr>:$crop_low,
                       OptionalAttr<DenseI64ArrayAttr>:$crop_size,
                       DefaultValuedAttr<I64Attr, "0">:$unlabelled_below);
  let results = (outs Med_FloatTensor:$affinities, Med_FloatTensor:$mask);
  let assemblyFormat = "$seg attr-dict `:` functional-type(operands, results)";
}

def Med_RemoveLabelOp : Med_ShapedOp<"remove_label", [Med_NotDifferentiable]> {
  let shapeRule = [{removeLabel($input, $label, $replace_with)}];
  let summary = "replaces one label value by another";
  let description = [{
    `y = (x == label) ? replace_with : x` per element, of the input's type (float or
    integer labels, any shape). nnU-Net's `RemoveLabelTansform(-1, 0)` turns the −1 that
    the spatial transform leaves outside the image into background this way:

    ```mlir
    %y = med.remove_label %seg {label = -1 : i64, replace_with = 0 : i64}
        : (tensor<2x1x128x128x128xf32>) -> tensor<2x1x128x128x128xf32>
    ```
  }];
  let arguments = (ins Med_LabelTensor:$input, I64Attr:$label, I64Attr:$replace_with);
  let results = (outs Med_LabelTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Med_LabelRegionsOp : Med_ShapedOp<"label_regions", [Med_NotDifferentiable]> {
  // The plan writes the regions' labels one after the other, and how many each has.
  let planAttributes = [{
    SmallVector<int64_t> labels, sizes;
    for (Attribute a : o.getRegions()) {
      ArrayRef<int64_t> region = ::llvm::cast<DenseI64ArrayAttr>(a).asArrayRef();
      labels.append(region.begin(), region.end());
      sizes.push_back(static_cast<int64_t>(region.size()));
    }
    attrs["regions"] = json::Array(labels);
    attrs["region_sizes"] = json::Array(sizes);
  }];
  let planAttributeNames = ["regions:ints", "region_sizes:ints"];
  let summary = "one f32 channel per region: 1 where the label is one of the region's";
  let description = [{
    From class labels N × 1 × … (float or integer) gives N × R × … in f32: channel r is 1
    where the label is one of the labels of `regions[r]`, else 0. nnU-Net's
    `ConvertSegmentationToRegionsTransform` for region-based training (BraTS: whole tumour,
    tumour core, enhancing tumour); nnU-Net's channels are bool, these are the 0/1 targets
    the loss reads.

    ```mlir
    %r = med.label_regions %seg {regions = [array<i64: 1, 2, 3>, array<i64: 2, 3>, array<i64: 3>]}
        : (tensor<2x1x128x128x128xi32>) -> tensor<2x3x128x128x128xf32>
    ```
  }];
  let arguments = (ins Med_LabelTensor:$input,
                       TypedArrayAttrBase<DenseI64ArrayAttr, "list of label lists">:$regions);
  let results = (outs Med_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Med_DownsampleNearestOp : Med_ShapedOp<"downsample_nearest", [Med_NotDifferentiable]> {
  let shapeRule = [{downsampleNearest($input, $size)}];
  let summary = "resizes labels to a given size by torch's nearest-exact rule";
  let description = [{
    N × C × D × H × W (float or integer) to N × C × `size`, of the input's type: along each
    axis of input size n and output size m, output index j reads input index
    `min(floor((j + 0.5) · s), n − 1)` with `s = n / m` rounded to f32 and the product
    rounded to f32 once, exactly as `torch.nn.functional.interpolate(x, size,
    mode='nearest-exact')` picks it. nnU-Net's `DownsampleSegForDSTransform` makes the
    deep-supervision targets so, with `size = round(shape · scale)`:

    ```mlir
    %y = med.downsample_nearest %seg {size = array<i64: 64, 64, 64>}
        : (tensor<2x1x128x128x128xf32>) -> tensor<2x1x64x64x64xf32>
    ```
  }];
  let arguments = (ins Med_LabelTensor:$input, DenseI64ArrayAttr:$size);
  let results = (outs Med_LabelTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

#endif // MED_LABEL_OPS_TD
