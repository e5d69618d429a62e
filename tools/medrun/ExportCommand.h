//===- ExportCommand.h - `medrun export`: a run's weights as a PyTorch state_dict ----===//
#ifndef MEDRUN_TOOLS_EXPORTCOMMAND_H
#define MEDRUN_TOOLS_EXPORTCOMMAND_H

#include <string>

namespace medrun {

struct ExportOptions {
  std::string input;    ///< a run directory, a checkpoints directory, a step directory, a
                        ///< latest/best pointer, or a safetensors/PyTorch file
  std::string out;      ///< the safetensors file to write
  std::string weights;  ///< "ema", "model" or "" (EMA where the checkpoint has it)
  std::string which;    ///< "last", "best" or "" (last) for a run or checkpoints directory
  std::string artifact; ///< the run's compiled recipe; "" finds it in the recipe cache
};

/// Writes the state_dict of the chosen weights, f32: for MedNeXt v1 (Interop.h) the model
/// keys plus dummy_tensor in PyTorch's order, with the constructor arguments as metadata;
/// for a network imported from ONNX (the run's compiled recipe was compiled from an .onnx
/// file) the parameters it declares, named as the ONNX initializers. Prints where they came
/// from and how to load them. Throws Error for a missing input, no EMA with --weights ema,
/// keys that are no MedNeXt v1 state_dict or do not match the run's model, or an imported
/// network whose ONNX file is missing or changed since the run compiled it.
int exportCommand(const ExportOptions &options);

} // namespace medrun

#endif // MEDRUN_TOOLS_EXPORTCOMMAND_H
