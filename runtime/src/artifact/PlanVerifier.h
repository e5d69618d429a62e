//===- PlanVerifier.h - re-checking a loaded plan before anything runs ----------===//
//
// Internal to the runtime: Artifact::load calls verifyPlan once the JSON is read. A plan whose
// checksum is valid may still be inconsistent (edited by hand, written by another tool, or by
// a compiler bug); the kernels trust the plan, so every size and every op is checked here.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_SRC_PLANVERIFIER_H
#define MEDRUN_SRC_PLANVERIFIER_H

#include "medrun/Artifact.h"

namespace medrun {

/// Largest tensor (value, parameter, scratch buffer) a plan may declare, in bytes.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 40;
/// Largest rank a plan may declare.
constexpr size_t kMaxRank = 16;

/// Checks every value (dtype, rank, element and byte counts), every op (operands, attributes
/// and result types, with the dialect's shape rules of med/ShapeRules.h) and the CUDA launch
/// plan. Throws Error naming the file, the function, the op (index, kind, location) and the
/// expected vs actual value of the first inconsistency.
void verifyPlan(const Artifact &artifact);

/// Whether the verifier has a shape rule for op `k` (the op table's completeness test).
bool hasShapeRule(med::ops::OpKind k);

} // namespace medrun

#endif // MEDRUN_SRC_PLANVERIFIER_H
