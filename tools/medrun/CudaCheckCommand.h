//===- CudaCheckCommand.h - `medrun cuda-check`: the CUDA backend against the CPU's ----===//
#ifndef MEDRUN_TOOL_CUDACHECKCOMMAND_H
#define MEDRUN_TOOL_CUDACHECKCOMMAND_H

#include "CommandArgs.h"

namespace medrun {

/// Runs a function (or, with --fusions, every fusion_check_<k>) on both backends from the same
/// inputs and parameters and compares every output and updated parameter; 1 when one differs.
int cudaCheck(const Artifact &a, const Args &args);

} // namespace medrun

#endif // MEDRUN_TOOL_CUDACHECKCOMMAND_H
