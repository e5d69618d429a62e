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

N = '/opt/torch/.venv/lib/python3.12/site-packages/nvidia'
nvrtc = ctypes.CDLL(os.path.join(N, 'cu13/lib/libnvrtc.so.13'))
cuda = ctypes.CDLL('libcuda.so.1')

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


def check(r, what):
    if r != 0:
        raise SystemExit(f'f16-convert: {what} failed ({r})')


def compile_module(source):
    prog = ctypes.c_void_p()
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b'f16.cu', 0, None, None), 'nvrtcCreateProgram')
    major, minor = torch.cuda.get_device_capability()
    opts = [f'--gpu-architecture=sm_{major}{minor}'.encode(), b'-default-device', b'--std=c++17']
    r = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    if r != 0:
        n = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise SystemExit('f16-convert: NVRTC failed:\n' + log.value.decode())
    n = ctypes.c_size_t()
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    cubin = ctypes.create_string_buffer(n.value)
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), cubin), 'cuModuleLoadData')
    fns = {}
    for name in ('f16_read', 'f16_write'):
        f = ctypes.c_void_p()
        check(cuda.cuModuleGetFunction(ctypes.byref(f), module, name.encode()), 'cuModuleGetFunction')
        fns[name] = f
    return fns


def launch(f, blocks, args):
    holders = [a for a in args]
    ptrs = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.byref(h), ctypes.c_void_p) for h in holders])
    check(cuda.cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0, None, ptrs, None), 'cuLaunchKernel')


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
    torch.zeros(1, device='cuda')  # the primary context, current on this thread
    check(cuda.cuInit(0), 'cuInit')
    struct = re.search(r'struct f16 \{.*?\n\};', prelude, re.S)
    assert struct, 'prelude.cuh: no struct f16'
    software = prelude[:struct.start()] + struct.group(0).replace('#ifdef __CUDA_ARCH__', '#if 0') + prelude[struct.end():]
    wrong = prelude.replace('cvt.rn.f16.f32', 'cvt.rz.f16.f32')
    assert wrong != prelude, 'prelude.cuh: no cvt.rn.f16.f32'
    ref = run(compile_module(software + KERNELS))
    dev = run(compile_module(prelude + KERNELS))
    ctl = run(compile_module(wrong + KERNELS))
    r, w = differ(dev, ref)
    cr, cw = differ(ctl, ref)
    print(f'f16 conversions on the device vs the branch definition: {r} of 65536 reads and {w} of 2^32 writes differ'
          f' (control cvt.rz: {cr} reads, {cw} writes differ)')
    ok = r == 0 and w == 0 and cw > 0
    print('PASS f16-convert' if ok else 'FAIL f16-convert')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
