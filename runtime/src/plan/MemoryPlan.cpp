//===- MemoryPlan.cpp - buffer lives over a CUDA plan, and the arena's check --------===//
#include "medrun/MemoryPlan.h"

#include "medrun/Error.h"
#include "medrun/Plan.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace medrun {

std::vector<BufferLife> bufferLives(const Function &fn,
                                    const std::function<bool(const CudaStep &)> &resident) {
  const CudaPlan &plan = *fn.cuda;
  const size_t V = fn.values.size(), B = V + plan.scratch.size();
  std::vector<int> home(B); // the buffer holding each value
  std::iota(home.begin(), home.end(), 0);
  // Values placed inside another value's buffer (a gradient in its slice of the packed
  // gradients) before anything else: aliases of them and launches then find them there.
  for (const CudaStep &s : plan.steps)
    if (s.kind == CudaStep::Kind::Place)
      home[s.value] = s.from;
  std::vector<BufferLife> life(B);
  for (size_t i = 0; i < B; ++i)
    life[i].bytes = i < V ? static_cast<size_t>(fn.values[i].numel()) *
                                dtypeSize(fn.values[i].storage)
                          : static_cast<size_t>(plan.scratch[i - V]);
  for (int id : fn.inputs)
    life[id].touch(BufferLife::kBeforeSteps);
  std::vector<bool> isState(V, false); // a param's value that is the resident tensor
  for (size_t t = 0; t < plan.steps.size(); ++t) {
    const CudaStep &s = plan.steps[t];
    switch (s.kind) {
    case CudaStep::Kind::Param:
      if (resident(s)) {
        life[s.value].bytes = 0; // lives in its resident buffer, not in the arena
        isState[s.value] = true;
      } else {
        life[s.value].touch(BufferLife::kBeforeSteps); // uploaded (or converted) first
      }
      break;
    case CudaStep::Kind::Alias:
      home[s.value] = home[s.from];
      life[s.value].bytes = 0;
      break;
    case CudaStep::Kind::Place:
      life[s.value].bytes = 0; // lives in the buffer of s.from
      break;
    case CudaStep::Kind::Launch:
    case CudaStep::Kind::AllReduce:
      for (int a : s.args)
        life[home[a]].touch(static_cast<int>(t));
      break;
    case CudaStep::Kind::Assign:
      if (s.inPlace && home[s.value] == s.value && !isState[s.value] && resident(s)) {
        life[s.value].bytes = 0; // its producer writes the resident tensor itself
        break;
      }
      life[home[s.value]].touch(BufferLife::kAfterSteps); // downloaded or committed
      break;
    }
  }
  for (int id : fn.outputs)
    life[home[id]].touch(BufferLife::kAfterSteps);
  BufferLife &status = life[V]; // written by kernels, read after the run
  status.touch(BufferLife::kBeforeSteps);
  status.touch(BufferLife::kAfterSteps);
  for (BufferLife &b : life)
    if (b.bytes && b.first > b.last) // never touched: keep it for the whole run
      b = {b.bytes, BufferLife::kBeforeSteps, BufferLife::kAfterSteps};
  return life;
}

bool residentAsPlanned(const Function &fn, const CudaStep &s) {
  const ValueInfo &v = fn.values.at(s.value);
  return v.storage == v.dtype;
}

namespace {
/// "value 12 (result 0 of 'med.conv3d' at f:1:2)", "scratch buffer 3 (of 'med.group_norm' ...)".
std::string describeBuffer(const Function &fn, size_t id) {
  const size_t V = fn.values.size();
  if (id < V) {
    for (const OpInfo &op : fn.ops)
      for (size_t r = 0; r < op.results.size(); ++r)
        if (op.results[r] == static_cast<int>(id))
          return str("value ", id, " (result ", r, " of ", op.describe(), ")");
    for (size_t i = 0; i < fn.inputs.size(); ++i)
      if (fn.inputs[i] == static_cast<int>(id))
        return str("value ", id, " (input '", fn.inputNames.at(i), "')");
    return str("value ", id);
  }
  if (fn.cuda)
    for (const CudaStep &s : fn.cuda->steps)
      if (std::count(s.args.begin(), s.args.end(), static_cast<int>(id)))
        return str("scratch buffer ", id - V, " (of ", fn.ops.at(s.op).describe(), ")");
  return str("scratch buffer ", id - V);
}

std::string span(int step) {
  return step == BufferLife::kBeforeSteps  ? std::string("upload")
         : step == BufferLife::kAfterSteps ? std::string("download")
                                           : str("step ", step);
}
} // namespace

void checkArena(const Function &fn, const std::vector<BufferLife> &life,
                const std::vector<int64_t> &offset, size_t arenaBytes) {
  auto fail = [&](const std::string &msg) {
    throw Error(str("function '", fn.name, "': invalid memory plan: ", msg,
                    "; recompile the model with this medc"));
  };
  if (offset.size() != life.size())
    fail(str(offset.size(), " offsets for ", life.size(), " buffers"));
  std::vector<size_t> placed;
  for (size_t i = 0; i < life.size(); ++i) {
    if (!life[i].bytes)
      continue;
    const int64_t at = offset[i];
    if (at < 0 || at % static_cast<int64_t>(kArenaAlignment) != 0)
      fail(str(describeBuffer(fn, i), " is at offset ", at, ", not a multiple of ",
               kArenaAlignment, " inside the arena"));
    if (static_cast<size_t>(at) + life[i].bytes > arenaBytes)
      fail(str(describeBuffer(fn, i), " (", life[i].bytes, " bytes at offset ", at,
               ") ends past the arena's ", arenaBytes, " bytes"));
    placed.push_back(i);
  }
  // Sweep over time: the buffers live at once must lie apart, so each buffer that starts
  // need only be compared with its neighbours by offset among those live (a map of
  // disjoint ranges). All buffers starting at a step enter before those ending there leave.
  std::vector<std::pair<int, size_t>> starts, ends;
  for (size_t i : placed) {
    starts.emplace_back(life[i].first, i);
    ends.emplace_back(life[i].last, i);
  }
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  std::map<int64_t, size_t> live; // offset -> buffer
  auto clash = [&](size_t a, size_t b) {
    fail(str(describeBuffer(fn, a), " at bytes [", offset[a], ", ", offset[a] + life[a].bytes,
             ") and ", describeBuffer(fn, b), " at [", offset[b], ", ",
             offset[b] + life[b].bytes, ") overlap while both are live (", span(life[a].first),
             " to ", span(life[a].last), ", and ", span(life[b].first), " to ",
             span(life[b].last), ")"));
  };
  size_t e = 0;
  for (size_t s = 0; s < starts.size();) {
    const int t = starts[s].first;
    for (; e < ends.size() && ends[e].first < t; ++e)
      live.erase(offset[ends[e].second]);
    for (; s < starts.size() && starts[s].first == t; ++s) {
      const size_t i = starts[s].second;
      const int64_t begin = offset[i], end = begin + static_cast<int64_t>(life[i].bytes);
      auto next = live.lower_bound(begin);
      if (next != live.end() && next->first < end)
        clash(next->second, i);
      if (next != live.begin()) {
        auto prev = std::prev(next);
        if (prev->first + static_cast<int64_t>(life[prev->second].bytes) > begin)
          clash(prev->second, i);
      }
      live[begin] = i;
    }
  }
}

} // namespace medrun
