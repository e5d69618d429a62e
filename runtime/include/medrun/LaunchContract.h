//===- LaunchContract.h - what a CUDA kernel was generated for, and how it is launched -===//
//
// medc's CUDA code generator writes, per function, each kernel's launch contracts
// (`cuda_plan.kernels`, docs/artifact.md): the op it was generated for (its kind and a
// signature of its attributes and stored types), the grid, block and dynamic shared memory it
// was generated for, and the role of each pointer it takes (an operand or result of that op,
// one of the op's scratch buffers with its size, the status word). The contract is made by
// the same call that writes the launch step (FunctionGen::launch), from the numbers that
// launch uses, so there is no second geometry formula that could drift; the runtime's plan
// verifier checks every launch step against its kernel's contracts and each contract against
// the op of the step, with the functions below (compiled into medc and medrun alike).
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_LAUNCHCONTRACT_H
#define MEDRUN_LAUNCHCONTRACT_H

#include "medrun/Plan.h"

#include <string>
#include <vector>

namespace medrun {

/// A digest of what a kernel generated for `op` depends on: its kind, attributes, the
/// `fp32` flag, its operands' and results' element types, storage types and shapes, and for
/// a fusion its body (template, roles, values, ops and their wiring). Two ops with equal
/// signatures get equal kernels; a kernel of another kind, shape or attribute has another.
std::string opSignature(const Function &fn, const OpInfo &op);

/// The role of buffer `id` (a value id, or values + k for scratch buffer k) passed to a
/// kernel of `op`; `scratchBase` is the first scratch buffer the op's emitter allocated
/// and `scratchBytes` the sizes of all. Empty when the buffer is none of the op's.
std::string launchRole(const Function &fn, const OpInfo &op, int id, size_t scratchBase,
                       const std::vector<int64_t> &scratchBytes);

/// "grid [4, 1, 1]"-style text of three sizes.
std::string tripleStr(const std::array<uint32_t, 3> &t);

} // namespace medrun

#endif // MEDRUN_LAUNCHCONTRACT_H
