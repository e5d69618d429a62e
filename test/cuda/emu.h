// Emulation of the CUDA device language for the generated kernels (test only).
//
// Force-included (g++ -include emu.h -x c++) into the source medc generates with
// `--emit cuda`, it turns the kernels into plain host functions: the fake driver
// (FakeCuda.cpp) runs each block's threads as cooperative fibers on one OS thread and
// switches fibers at __syncthreads, so shared memory is a static array and atomics are
// trivially atomic. It checks the kernels' logic (indexing, reductions, launch plans), not
// the GPU's arithmetic.
#include <math.h>
#include <stdint.h>
#include <string.h>

struct EmuDim3 {
  unsigned x, y, z;
};
extern "C" {
EmuDim3 threadIdx, blockIdx, blockDim, gridDim; // set by the fake driver before each resume
void (*emuSyncHook)();                          // yields to the fake driver's scheduler
}

#define __global__
#define __device__
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__ __restrict

inline void __syncthreads() { emuSyncHook(); }
// Rounded float operations, never contracted (the host compiles without fma).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __int_as_float(unsigned v) {
  float f;
  memcpy(&f, &v, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned v;
  memcpy(&v, &f, 4);
  return v;
}
inline float __uint_as_float(unsigned v) {
  float f;
  memcpy(&f, &v, 4);
  return f;
}
inline double __longlong_as_double(long long v) {
  double d;
  memcpy(&d, &v, 8);
  return d;
}
inline unsigned atomicCAS(unsigned *a, unsigned compare, unsigned value) {
  unsigned old = *a;
  if (old == compare)
    *a = value;
  return old;
}
