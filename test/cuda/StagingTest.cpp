//===- StagingTest.cpp - inputs uploaded ahead and pinned memory, on the fake driver ----===//
//
// CudaSession::stage and pinnedTensor under FakeCuda.cpp, whose copy stream runs its copies
// only when something waits for them and reads host memory then. The function's outputs are
// its inputs (a plan without launches), so each run returns exactly what reached the device
// for it: a staged upload used by the wrong run, read from the wrong slot or before its
// copies ran shows up as other values.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Artifact.h"
#include "medrun/Cuda.h"
#include "medrun/Error.h"

#include "../runtime/ArtifactFiles.h"

#include "gtest/gtest.h"
#include "../runtime/ExpectError.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

using namespace medrun;

namespace {

// Before the driver is first loaded: the fake one, a module without kernels, no cuDNN.
const bool kEnvironment = [] {
  setenv("MEDRUN_LIBCUDA", FAKE_LIBCUDA, 1);
  setenv("MEDRUN_FAKE_CUDA_KERNELS", EMPTY_KERNELS, 1);
  setenv("MEDRUN_CUDNN", "off", 1);
  return true;
}();

/// Inputs x (f32 2x3x5) and n (i64 scalar), returned as they are.
const char *kPlan = R"({"format":"medc-artifact","compiler":"test","source":"t.mlir",
 "source_sha256":"00","options":{},"parameters":[],
 "functions":[{"name":"f","values":[{"dtype":"f32","shape":[2,3,5]},{"dtype":"i64","shape":[]}],
   "inputs":[0,1],"input_names":["x","n"],"outputs":[0,1],"ops":[],
   "cuda_plan":{"scratch":[4],"steps":[],
                "memory":{"arena":768,"offsets":[0,256,512]}}}],
 "cuda":{"arch":"sm_90","nvrtc":"13.0","kernels":0,"launches":0,
   "modules":[{"source":"cuda.source.0","cubin":"cuda.cubin.0"}]}})";

const Artifact &artifact() {
  static Artifact a = [] {
    std::string json = kPlan;
    std::string bytes(kArtifactMagic, 8);
    test::appendLE<uint32_t>(bytes, Artifact::kFormatVersion);
    test::appendLE<uint32_t>(bytes, 0);
    test::appendLE<uint64_t>(bytes, json.size());
    bytes += json;
    test::appendLE<uint64_t>(bytes, 2);
    for (const char *name : {"cuda.source.0", "cuda.cubin.0"}) {
      test::appendLE<uint64_t>(bytes, std::strlen(name));
      bytes += name;
      test::appendLE<uint64_t>(bytes, 4);
      bytes += "none";
    }
    test::appendLE<uint32_t>(bytes, crc32(bytes.data(), bytes.size()));
    return Artifact::load(test::writeTemp("staging.medc", bytes));
  }();
  return a;
}

/// A batch whose every element says which batch it is.
Tensor batch(CudaSession &s, float id, bool pinned = true) {
  Tensor t = pinned ? s.pinnedTensor(DType::F32, {2, 3, 5}) : Tensor(DType::F32, {2, 3, 5});
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = id * 100 + static_cast<float>(i);
  return t;
}

Tensor scalar(int64_t v) {
  Tensor t(DType::I64, {});
  t.data<int64_t>()[0] = v;
  return t;
}

/// Runs f and checks that it returned `x` and `n`.
void expectRun(CudaSession &s, const Tensor &x, int64_t n) {
  const Function &f = artifact().function("f");
  std::vector<Tensor> out = s.run(f, {x, scalar(n)}, {});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(std::memcmp(out[0].raw(), x.raw(), x.nbytes()), 0)
      << "run " << n << " got batch " << out[0].data<float>()[0] / 100;
  EXPECT_EQ(out[1].data<int64_t>()[0], n);
}

struct EnvGuard {
  const char *name;
  EnvGuard(const char *n, const char *v) : name(n) { setenv(n, v, 1); }
  ~EnvGuard() { unsetenv(name); }
};

TEST(CudaStaging, RunsUseStagedInputsInOrder) {
  CudaSession s(artifact());
  const Function &f = artifact().function("f");
  Tensor b0 = batch(s, 0), b1 = batch(s, 1), b2 = batch(s, 2), b3 = batch(s, 3), b4 = batch(s, 4);
  ASSERT_TRUE(s.canStage());
  expectRun(s, b0, 0); // uploaded by the run
  // Two waiting: the first is issued by its own run, the second while that run's step runs.
  EXPECT_TRUE(s.stage(f, {b1, Tensor()}));
  EXPECT_TRUE(s.stage(f, {b2, Tensor()}));
  expectRun(s, b1, 1);
  EXPECT_TRUE(s.stage(f, {b3, Tensor()})); // back into b1's slot
  expectRun(s, b2, 2);                      // from the graph captured on run 2 on
  expectRun(s, b3, 3);
  // Staged, then the next run of the batch: one slot alternating with the other.
  for (int k = 4; k < 8; ++k) {
    Tensor b = batch(s, static_cast<float>(k));
    EXPECT_TRUE(s.stage(f, {b, Tensor()}));
    expectRun(s, b, k);
  }
  expectRun(s, b4, 8); // nothing staged: uploaded by the run
  EXPECT_EQ(s.graphs(f), "one CUDA graph per run (captured on run 2)");
  EXPECT_NE(s.uploads().find("7 of 9 runs' inputs copied ahead on a copy stream"),
            std::string::npos)
      << s.uploads();
}

TEST(CudaStaging, MismatchesAreErrorsNamingTheInput) {
  CudaSession s(artifact());
  const Function &f = artifact().function("f");
  EXPECT_ERROR(s.stage(f, {Tensor(DType::F32, {2, 5, 3}), Tensor()}),
               "staging input 'x' of function 'f': expected 2x3x5 f32, got 2x5x3 f32");
  EXPECT_ERROR(s.stage(f, {Tensor(DType::F64, {2, 3, 5}), Tensor()}),
               "staging input 'x' of function 'f': expected 2x3x5 f32, got 2x3x5 f64");
  EXPECT_ERROR(s.stage(f, {Tensor(), Tensor(DType::I32, {})}),
               "staging input 'n' of function 'f': expected scalar i64, got scalar i32");
  EXPECT_ERROR(s.stage(f, {Tensor(DType::F32, {2, 3, 5})}),
               "staging inputs of function 'f': it takes 2 inputs, got 1");
  Tensor b1 = batch(s, 1), b2 = batch(s, 2), b3 = batch(s, 3);
  ASSERT_TRUE(s.stage(f, {b1, Tensor()}));
  ASSERT_TRUE(s.stage(f, {b2, Tensor()}));
  EXPECT_ERROR(s.stage(f, {b3, Tensor()}), "2 staged uploads are already waiting");
  // Staged inputs run in order; a run of other tensors uploads them itself.
  EXPECT_ERROR(s.run(f, {b2, scalar(0)}, {}),
               "function 'f': run with inputs staged for a later run");
  expectRun(s, b3, 0);
  expectRun(s, b1, 1);
  expectRun(s, b2, 2);
  // releaseMemory drops what is staged: the runs upload themselves.
  ASSERT_TRUE(s.stage(f, {b3, Tensor()}));
  s.releaseMemory();
  expectRun(s, b1, 3);
  EXPECT_NE(s.uploads().find("2 of 4 runs"), std::string::npos) << s.uploads();
}

TEST(CudaStaging, ScalarsAndBatchesTogether) {
  CudaSession s(artifact());
  const Function &f = artifact().function("f");
  Tensor b1 = batch(s, 1), n = scalar(42);
  ASSERT_TRUE(s.stage(f, {b1, n}));
  EXPECT_ERROR(s.run(f, {b1, scalar(42)}, {}),
               "function 'f' input 'n': not the tensor staged with the run's other inputs");
  std::vector<Tensor> out = s.run(f, {b1, n}, {});
  EXPECT_EQ(out[1].data<int64_t>()[0], 42);
  EXPECT_EQ(std::memcmp(out[0].raw(), b1.raw(), b1.nbytes()), 0);
}

TEST(CudaStaging, BatchesArePinned) {
  CudaSession s(artifact());
  const Function &f = artifact().function("f");
  EnvGuard pinnedOnly("FAKE_CUDA_REQUIRE_PINNED", "1"); // the fake refuses pageable sources
  Tensor pinned = batch(s, 1);
  ASSERT_TRUE(s.stage(f, {pinned, Tensor()}));
  expectRun(s, pinned, 1);
  EXPECT_NE(s.uploads().find("MiB of pinned host memory"), std::string::npos) << s.uploads();
  Tensor pageable = batch(s, 2, false);
  ASSERT_TRUE(s.stage(f, {pageable, Tensor()}));
  EXPECT_ERROR(s.run(f, {pageable, scalar(2)}, {}),
               "uploading input 'x' of function 'f' ahead: CUDA_ERROR");
}

TEST(CudaStaging, PinningFailureFallsBackToPageableMemory) {
  CudaSession s(artifact());
  const Function &f = artifact().function("f");
  EnvGuard noPinned("FAKE_CUDA_NO_PINNED", "1");
  testing::internal::CaptureStderr();
  Tensor b1 = batch(s, 1), b2 = batch(s, 2);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "medrun: warning: host memory is not pinned, uploads to the GPU are slower "
                 "(cuMemHostAlloc of 0.0 MiB: CUDA_ERROR_OUT_OF_MEMORY (2): fake driver "
                 "error)\n"); // once
  for (int64_t i = 0; i < b1.numel(); ++i)
    EXPECT_EQ(b2.data<float>()[i], 200.0f + static_cast<float>(i));
  ASSERT_TRUE(s.stage(f, {b1, Tensor()}));
  expectRun(s, b1, 1);
  EXPECT_NE(s.uploads().find("pageable host memory (cuMemHostAlloc"), std::string::npos)
      << s.uploads();
}

TEST(CudaStaging, PinnedTensorsOutliveTheSession) {
  Tensor t;
  {
    CudaSession s(artifact());
    t = s.pinnedTensor(DType::I32, {7, 3});
    for (int64_t i = 0; i < t.numel(); ++i)
      EXPECT_EQ(t.data<int32_t>()[i], 0); // zero-filled, as Tensor(dtype, shape)
    const Function &f = artifact().function("f");
    Tensor b = batch(s, 5);
    ASSERT_TRUE(s.stage(f, {b, Tensor()}));
    // The session goes with an upload staged: it waits for the copy, then lets b go.
  }
  t.data<int32_t>()[20] = 5; // still valid memory; freed with the last copy of t
  EXPECT_EQ(t.data<int32_t>()[20], 5);
}

TEST(CudaStaging, TurnedOffByEnvironment) {
  CudaSession s(artifact());
  const Function &f = artifact().function("f");
  EnvGuard off("MEDRUN_CUDA_NO_PREFETCH", "1");
  EXPECT_FALSE(s.canStage());
  Tensor b1 = batch(s, 1);
  EXPECT_FALSE(s.stage(f, {b1, Tensor()}));
  expectRun(s, b1, 1);
  EXPECT_NE(s.uploads().find("0 of 1 runs' inputs copied ahead (MEDRUN_CUDA_NO_PREFETCH)"),
            std::string::npos)
      << s.uploads();
}

} // namespace
