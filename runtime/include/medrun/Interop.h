//===- Interop.h - MedNeXt v1 state_dicts in and out ---------------------------------===//
//
// Our model files name their parameters like MedNeXt v1's PyTorch state_dict
// (MIC-DKFZ/MedNeXt, nnunet_mednext/network_architecture/mednextv1). What PyTorch's module
// has besides them is `dummy_tensor`, a parameter of shape [1] and value 1 that only serves
// its gradient checkpointing; GroupNorm has no buffers. So:
//
//  - export: our model keys plus dummy_tensor is exactly the state_dict of
//    MedNeXt(...) with the arguments mednextV1Of() reads off the keys, which
//    `load_state_dict(strict=True)` loads;
//  - import (--init-from): a state_dict file (safetensors, or a PyTorch zip file read
//    without running its pickle: TorchFile.h) initializes the model parameters of an
//    artifact, strictly (every key, every shape); dummy_tensor is accepted and ignored;
//  - UpKern (MedNeXt's upkern_load_weights): a kernel-5 network from kernel-3 weights; a
//    weight whose spatial size differs is resized by trilinear interpolation exactly as
//    torch.nn.functional.interpolate(w, size, mode='trilinear') does (align_corners False).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_INTEROP_H
#define MEDRUN_INTEROP_H

#include "medrun/Artifact.h"
#include "medrun/Tensor.h"

#include <array>
#include <cstdio>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace medrun {

/// The arguments of MedNeXt v1's constructor that its state_dict determines. do_res is
/// always true in our models (every block adds its input); norm_type 'group', dim '3d'.
struct MedNeXtV1 {
  int64_t inChannels = 0, nChannels = 0, nClasses = 0;
  std::array<int64_t, 9> expR{}, blockCounts{};
  int64_t encKernel = 0, decKernel = 0;
  bool deepSupervision = false, doResUpDown = false, grn = false;

  /// "MedNeXt(in_channels=1, n_channels=32, ...)" as a Python expression.
  std::string python() const;
  /// create_mednext_v1(...) when the network is one of the factory's S/B/M/L, else "".
  std::string factory() const;
  /// The same arguments as a JSON object (for file metadata).
  std::string json() const;
};

/// The state_dict of MedNeXt v1 with these arguments, in PyTorch's order (dummy_tensor
/// first, then the modules as the constructor registers them): key and shape.
std::vector<std::pair<std::string, Shape>> mednextV1StateDict(const MedNeXtV1 &net);

/// Reads the architecture off the keys and shapes of `tensors` (dummy_tensor optional) and
/// checks that they are exactly its state_dict. Throws Error starting with `what` that
/// lists the missing, unexpected and mismatched keys otherwise.
MedNeXtV1 mednextV1Of(const TensorMap &tensors, const std::string &what);

/// Removes MedNeXt v1's `dummy_tensor` (shape [1]) from `tensors`; one of another shape
/// stays, so that a strict check reports it.
void eraseDummyTensor(TensorMap &tensors);

/// The model parameters of an artifact (neither optimizer nor EMA state), in table order.
std::vector<const ParameterInfo *> modelParameters(const Artifact &artifact);

/// Strict comparison of `tensors` with `expected` (key -> shape): Throws Error starting with
/// `what` listing the missing keys, the unexpected ones and those of another shape (with
/// both shapes), a few of each and their counts.
void checkKeys(const std::vector<std::pair<std::string, Shape>> &expected,
               const TensorMap &tensors, const std::string &what);

/// A state_dict file: safetensors (any float dtype), or a PyTorch file (`torch.save`, zip
/// format) read without running its pickle (TorchFile.h). A wrapper's prefix that every key
/// carries (`module.`, `_orig_mod.`, Lightning's `model.`) is removed, every float tensor
/// becomes f32 and `dummy_tensor` is dropped. `note` says what was done ("" if nothing).
TensorMap readStateDict(const std::string &path, std::string *note = nullptr);

/// torch.nn.functional.interpolate(w, size=size, mode='trilinear', align_corners=...) of a
/// rank-5 f32 tensor: the first two dimensions are batch and channel, the last three are
/// resized. Same source indices and weights as PyTorch's CPU kernel.
Tensor interpolateTrilinear(const Tensor &w, const std::array<int64_t, 3> &size,
                            bool alignCorners = false);

/// Initializes the model parameters of `params` (as initParameters made them) from
/// `weights`, strictly: every model key of the artifact, no other key, the same shapes;
/// `dummy_tensor` is ignored. With `upkern`, a weight whose last three dimensions differ
/// (the depthwise kernels of a kernel-3 network in a kernel-5 one) is resized with
/// interpolateTrilinear as MedNeXt's upkern_load_weights does; its first two dimensions must
/// agree. Parameters that start as a copy of another (EMA) are copied again from the loaded
/// values; optimizer state stays as initialized (fresh). Throws Error starting with `what`.
/// Returns the keys that were interpolated.
std::vector<std::string> initFromWeights(const Artifact &artifact, TensorMap &params,
                                         const TensorMap &weights, bool upkern,
                                         const std::string &what);

/// readStateDict(path), then initFromWeights; prints what it did to `console` (the file,
/// a removed prefix, the interpolated kernels). Errors name `path`.
void initFromFile(const Artifact &artifact, TensorMap &params, const std::string &path,
                  bool upkern, FILE *console);

} // namespace medrun

#endif // MEDRUN_INTEROP_H
