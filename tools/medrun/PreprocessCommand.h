//===- PreprocessCommand.h - `medrun preprocess`: nnU-Net's preprocessing ---------------===//
#ifndef MEDRUN_TOOL_PREPROCESSCOMMAND_H
#define MEDRUN_TOOL_PREPROCESSCOMMAND_H

#include "medrun/Preprocess.h"

namespace medrun {

/// Runs preprocessDataset (Preprocess.h) and prints what it did.
int preprocessCommand(const PreprocessOptions &options);

} // namespace medrun

#endif // MEDRUN_TOOL_PREPROCESSCOMMAND_H
