// A stand-in for libcudnn.so.9 (test only): every call the CUDA executor makes succeeds and
// records nothing, but a convolution computes nothing either. It lets CI check the paths
// around cuDNN: the handle, one measured algorithm per shape and its on-disk cache, and how
// a failing call is reported. FAKE_CUDNN_FAIL=1 makes every convolution call return
// CUDNN_STATUS_EXECUTION_FAILED (8); FAKE_CUDNN_DELAY_MS=T makes each take T ms (to lose a
// measured comparison with cuBLASLt).
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

namespace {
int handles = 0;
bool failing() {
  const char *v = std::getenv("FAKE_CUDNN_FAIL");
  if (const char *delay = std::getenv("FAKE_CUDNN_DELAY_MS"))
    usleep(static_cast<useconds_t>(std::atoi(delay)) * 1000);
  return v && std::strcmp(v, "1") == 0;
}
struct AlgoPerf { // the layout of cudnnConvolution*AlgoPerf_t
  int algo, status;
  float time;
  size_t memory;
  int determinism, mathType, reserved[3];
};
int find(int *returned, AlgoPerf *perf) {
  // Two algorithms: a slower deterministic one and a faster one that is not.
  perf[0] = {1, 0, 1.0f, 0, 0, 0, {}};
  perf[1] = {0, 0, 2.0f, 0, 1, 0, {}};
  *returned = 2;
  return 0;
}
} // namespace

extern "C" {
size_t cudnnGetVersion() { return 91900; }
const char *cudnnGetErrorString(int s) {
  return s == 8 ? "CUDNN_STATUS_EXECUTION_FAILED" : "CUDNN_STATUS_(fake)";
}
int cudnnCreate(void **h) {
  *h = &handles;
  return 0;
}
int cudnnDestroy(void *) { return 0; }
int cudnnSetStream(void *, void *) { return 0; }
int cudnnCreateTensorDescriptor(void **d) { return *d = std::malloc(1), 0; }
int cudnnDestroyTensorDescriptor(void *d) { return std::free(d), 0; }
int cudnnSetTensorNdDescriptor(void *, int, int, const int *, const int *) { return 0; }
int cudnnCreateFilterDescriptor(void **d) { return *d = std::malloc(1), 0; }
int cudnnDestroyFilterDescriptor(void *d) { return std::free(d), 0; }
int cudnnSetFilterNdDescriptor(void *, int, int, int, const int *) { return 0; }
int cudnnCreateConvolutionDescriptor(void **d) { return *d = std::malloc(1), 0; }
int cudnnDestroyConvolutionDescriptor(void *d) { return std::free(d), 0; }
int cudnnSetConvolutionNdDescriptor(void *, int, const int *, const int *, const int *, int, int) {
  return 0;
}
int cudnnSetConvolutionGroupCount(void *, int) { return 0; }
int cudnnSetConvolutionMathType(void *, int) { return 0; }
int cudnnAddTensor(void *, const void *, void *, const void *, const void *, void *, void *) {
  return failing() ? 8 : 0;
}
#define MED_FAKE_DIRECTION(Dir)                                                                \
  int cudnnFindConvolution##Dir##AlgorithmEx(void *, void *, const void *, void *, const void *, \
                                             void *, void *, void *, int, int *returned,      \
                                             AlgoPerf *perf, void *, size_t) {                \
    return find(returned, perf);                                                              \
  }                                                                                           \
  int cudnnGetConvolution##Dir##Algorithm_v7(void *, void *, void *, void *, void *, int,      \
                                             int *returned, AlgoPerf *perf) {                 \
    return find(returned, perf);                                                              \
  }                                                                                           \
  int cudnnGetConvolution##Dir##WorkspaceSize(void *, void *, void *, void *, void *, int,     \
                                              size_t *size) {                                  \
    *size = 0;                                                                                \
    return 0;                                                                                 \
  }                                                                                           \
  int cudnnConvolution##Dir(void *, const void *, void *, const void *, void *, const void *,  \
                            void *, int, void *, size_t, const void *, void *, void *) {      \
    return failing() ? 8 : 0;                                                                 \
  }
MED_FAKE_DIRECTION(Forward)
MED_FAKE_DIRECTION(BackwardData)
MED_FAKE_DIRECTION(BackwardFilter)
}
