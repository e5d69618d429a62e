// A kernel module without kernels for the fake driver (FakeCuda.cpp): only the emulation's
// thread indices and barrier hook (emu.h), for sessions whose plans launch nothing.
#include "emu.h"
