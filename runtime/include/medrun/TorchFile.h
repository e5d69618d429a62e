//===- TorchFile.h - state_dicts from PyTorch files, no pickle code run -------------===//
//
// `torch.save` (PyTorch >= 1.6) writes a zip archive: <name>/data.pkl, a pickle of the
// saved object in which each tensor is a call of torch._utils._rebuild_tensor_v2 on a
// storage named by a persistent id, and <name>/data/<key>, the storages' raw bytes.
//
// This reader never runs the pickle: it interprets the pickle opcodes as data (a small
// stack machine that builds dicts, lists, tuples, strings and numbers), treats every
// GLOBAL as a name and every call as an inert record, and recognizes by name only the
// calls that make tensors (_rebuild_tensor_v2, _rebuild_parameter[_with_state]) and
// OrderedDict. So any object a checkpoint holds beside its weights (optimizer state,
// argparse namespaces, numpy scalars) is read as data and left alone; nothing is imported
// or executed. Refused with a message that gives the conversion to safetensors: the legacy
// (pre-1.6, non-zip) format, compressed zip entries, big-endian files, opcodes outside
// protocols 2-5 as torch.save writes them.
//
// The state_dict is the saved mapping itself when all its values are tensors, else its
// entry `state_dict` (MedNeXt/nnU-Net v1, Lightning), `network_weights` (nnU-Net v2),
// `model` or `module`.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_TORCHFILE_H
#define MEDRUN_TORCHFILE_H

#include "medrun/Tensor.h"

#include <string>

namespace medrun {

/// The Python line that converts a PyTorch checkpoint at `path` to model.safetensors
/// (for messages and docs).
std::string torchConversionHint(const std::string &path);

/// True if `path` starts like a PyTorch file (a zip archive, or the legacy format's magic
/// number); false for anything else (safetensors).
bool isTorchFile(const std::string &path);

/// The state_dict of a PyTorch zip file (see above). `note` says where in the file it
/// was found. Throws Error naming the file and what could not be read.
TensorMap readTorchStateDict(const std::string &path, std::string *note = nullptr);

} // namespace medrun

#endif // MEDRUN_TORCHFILE_H
