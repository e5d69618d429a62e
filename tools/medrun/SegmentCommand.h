//===- SegmentCommand.h - `medrun segment`: instances from affinities ---------------===//
#ifndef MEDRUN_TOOL_SEGMENTCOMMAND_H
#define MEDRUN_TOOL_SEGMENTCOMMAND_H

#include "CommandArgs.h"

namespace medrun {

/// The command table's entry (usage, summary, options) for medrun.cpp's table.
Command segmentCommandEntry();

/// Reads the affinities (a C x D x H x W volume), segments them (Segmentation.h) whole or
/// block by block, and writes the labels.
int segmentCommand(const Args &args);

} // namespace medrun

#endif // MEDRUN_TOOL_SEGMENTCOMMAND_H
