// checkArena: the runtime accepts medc's memory plan only when no two buffers live at the
// same time share bytes, every offset is aligned and every buffer lies inside the arena.
#include "medrun/Error.h"
#include "medrun/MemoryPlan.h"
#include "medrun/Plan.h"

#include <gtest/gtest.h>

using namespace medrun;

namespace {

/// @f: x (input) -> a = relu(x) at step 0 -> b = relu(a) at step 1 -> c = relu(b) at step 2,
/// c returned; four f32 values of 1024 bytes each, and the status word.
Function chain() {
  Function fn;
  fn.name = "f";
  for (int i = 0; i < 4; ++i)
    fn.values.push_back({DType::F32, {256}, DType::F32});
  fn.inputs = {0};
  fn.inputNames = {"x"};
  fn.outputs = {3};
  fn.outputNames = {"out0"};
  CudaPlan plan;
  plan.scratch = {4};
  for (int i = 0; i < 3; ++i) {
    OpInfo op;
    op.kind = "relu";
    op.operands = {{"input", {i}}};
    op.results = {i + 1};
    op.location = "f.mlir:" + std::to_string(i + 2) + ":3";
    fn.ops.push_back(op);
    CudaStep s;
    s.op = i;
    s.kernel = "k";
    s.args = {i, i + 1, 4};
    plan.steps.push_back(s);
  }
  fn.cuda = plan;
  return fn;
}

std::vector<BufferLife> lives(const Function &fn) {
  return bufferLives(fn, [](const CudaStep &) { return true; });
}

std::string rejected(const Function &fn, const std::vector<int64_t> &offsets, size_t bytes) {
  try {
    checkArena(fn, lives(fn), offsets, bytes);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(ArenaCheck, Lives) {
  std::vector<BufferLife> l = lives(chain());
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(l[0].first, BufferLife::kBeforeSteps); // uploaded
  EXPECT_EQ(l[0].last, 0);
  EXPECT_EQ(l[1].first, 0);
  EXPECT_EQ(l[1].last, 1);
  EXPECT_EQ(l[3].last, BufferLife::kAfterSteps); // downloaded
  EXPECT_EQ(l[4].bytes, 4u);                      // the status word lives throughout
  EXPECT_EQ(l[4].first, BufferLife::kBeforeSteps);
}

TEST(ArenaCheck, AcceptsReuse) {
  // x and b share bytes (x's last step is 0, b's first is 1), a and c too.
  EXPECT_EQ(rejected(chain(), {0, 1024, 0, 1024, 2048}, 2304), "");
}

TEST(ArenaCheck, RejectsOverlap) {
  // a (steps 0..1) and b (steps 1..2) at overlapping bytes: both live at step 1.
  std::string e = rejected(chain(), {0, 1024, 1536, 3072, 4096}, 4352);
  EXPECT_NE(e.find("function 'f': invalid memory plan"), std::string::npos) << e;
  EXPECT_NE(e.find("value 1 (result 0 of 'med.relu' at f.mlir:2:3)"), std::string::npos) << e;
  EXPECT_NE(e.find("value 2 (result 0 of 'med.relu' at f.mlir:3:3)"), std::string::npos) << e;
  EXPECT_NE(e.find("overlap while both are live"), std::string::npos) << e;
  // The same bytes for buffers live at one step: the status word over the input.
  e = rejected(chain(), {0, 1024, 2048, 3072, 0}, 4096);
  EXPECT_NE(e.find("value 0 (input 'x')"), std::string::npos) << e;
  EXPECT_NE(e.find("scratch buffer 0 (of 'med.relu' at f.mlir:2:3)"), std::string::npos) << e;
}

TEST(ArenaCheck, RejectsMisalignedAndOutside) {
  std::string e = rejected(chain(), {0, 1024, 2048, 3072, 4100}, 8192);
  EXPECT_NE(e.find("scratch buffer 0"), std::string::npos) << e;
  EXPECT_NE(e.find("not a multiple of 256"), std::string::npos) << e;
  e = rejected(chain(), {0, 1024, 2048, 3072, 4096}, 4096);
  EXPECT_NE(e.find("ends past the arena's 4096 bytes"), std::string::npos) << e;
  e = rejected(chain(), {0, 1024, -1, 3072, 4096}, 8192);
  EXPECT_NE(e.find("value 2"), std::string::npos) << e;
}

TEST(ArenaCheck, ResidentAndPlacedTakeNoBytes) {
  Function fn = chain();
  // a becomes a resident parameter's value; c lives in b's buffer (a place step).
  fn.ops[0].kind = "param";
  fn.cuda->steps[0] = CudaStep{};
  fn.cuda->steps[0].kind = CudaStep::Kind::Param;
  fn.cuda->steps[0].op = 0;
  fn.cuda->steps[0].name = "w";
  fn.cuda->steps[0].value = 1;
  CudaStep place;
  place.kind = CudaStep::Kind::Place;
  place.op = 2;
  place.value = 3;
  place.from = 2;
  fn.cuda->steps.insert(fn.cuda->steps.begin(), place);
  std::vector<BufferLife> l = bufferLives(fn, [](const CudaStep &) { return true; });
  EXPECT_EQ(l[1].bytes, 0u);
  EXPECT_EQ(l[3].bytes, 0u);
  EXPECT_EQ(l[2].last, BufferLife::kAfterSteps); // holds c, which is returned
  l = bufferLives(fn, [](const CudaStep &) { return false; }); // not held: uploaded
  EXPECT_EQ(l[1].first, BufferLife::kBeforeSteps);
  EXPECT_EQ(l[1].bytes, 1024u);
}
