#!/usr/bin/env python3
"""The device's f16 conversions (lib/Target/Cuda/prelude.cuh: cvt.f32.f16 and cvt.rn.f16.f32)
against the branch-by-branch definition the CPU emulation runs (the same struct with its
__CUDA_ARCH__ path switched off), both compiled by NVRTC and run on the GPU: every one of the
65,536 f16 values read, and every one of the 2^32 f32 bit patterns assigned. Equal bits, or
NaN on both sides (the device does not keep a NaN's payload). Negative control: the prelude with
cvt.rz (rounding toward zero) instead of cvt.rn must differ. Part `cuda` of scripts/gpu-check.sh
runs it; exit 0 when the check passes and the control fails.

usage: f16-convert.py PRELUDE.cuh"""
import ctypes, os, re, sys
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvrtc_kernels import init, launch, load

KERNELS = r'''
extern "C" __global__ void f16_read(const unsigned short *in, float *out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  f16 h;
  h.bits = in[i];
  out[i] = h;
}
extern "C" __global__ void f16_write(unsigned base, unsigned short *out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  f16 h;
  h = __uint_as_float(base + i);
  out[i] = h.bits;
}
'''

NAMES = ('f16_read', 'f16_write')


def run(fns):
    """The read of every f16 (as f32 bits) and the write of every f32 pattern (in chunks)."""
    halves = torch.arange(65536, dtype=torch.int32, device='cuda').to(torch.int16)
    read = torch.empty(65536, dtype=torch.float32, device='cuda')
    launch(fns['f16_read'], 65536 // 256, [ctypes.c_void_p(halves.data_ptr()), ctypes.c_void_p(read.data_ptr())])
    chunk = 1 << 28
    writes = []
    for base in range(0, 1 << 32, chunk):
        out = torch.empty(chunk, dtype=torch.int16, device='cuda')
        launch(fns['f16_write'], chunk // 256, [ctypes.c_uint32(base), ctypes.c_void_p(out.data_ptr())])
        writes.append(out)
    torch.cuda.synchronize()
    return read, writes


def differ(a, b):
    """Elements where the two sides differ in bits and are not both NaN."""
    ra, wa = a
    rb, wb = b
    bad_read = int(((ra.view(torch.int32) != rb.view(torch.int32)) & ~(ra.isnan() & rb.isnan())).sum())
    bad_write = 0
    for x, y in zip(wa, wb):
        nan = lambda h: ((h & 0x7c00) == 0x7c00) & ((h & 0x3ff) != 0)
        bad_write += int(((x != y) & ~(nan(x) & nan(y))).sum())
    return bad_read, bad_write


def main():
    prelude = open(sys.argv[1]).read()
    init()
    struct = re.search(r'struct f16 \{.*?\n\};', prelude, re.S)
    assert struct, 'prelude.cuh: no struct f16'
    software = prelude[:struct.start()] + struct.group(0).replace('#ifdef __CUDA_ARCH__', '#if 0') + prelude[struct.end():]
    wrong = prelude.replace('cvt.rn.f16.f32', 'cvt.rz.f16.f32')
    assert wrong != prelude, 'prelude.cuh: no cvt.rn.f16.f32'
    ref = run(load(software + KERNELS, NAMES))
    dev = run(load(prelude + KERNELS, NAMES))
    ctl = run(load(wrong + KERNELS, NAMES))
    r, w = differ(dev, ref)
    cr, cw = differ(ctl, ref)
    print(f'f16 conversions on the device vs the branch definition: {r} of 65536 reads and {w} of 2^32 writes differ'
          f' (control cvt.rz: {cr} reads, {cw} writes differ)')
    ok = r == 0 and w == 0 and cw > 0
    print('PASS f16-convert' if ok else 'FAIL f16-convert')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
