#!/usr/bin/env python3
"""The CUDA GELU's Phi and phi on the GPU (lib/Target/Cuda/prelude.cuh's geluErf, gelu and
geluGradFactor, compiled by NVRTC: MUFU.EX2 and MUFU.RCP as the generated kernels run them)
against erfc and exp in float64, on every 2^-12 step of [-12, 12] and the values that must come
out exactly, with test/cuda/gelu.test's bounds (which it checks under the CPU emulation with
exact reciprocal and exponential). Negative control: the prelude with a coefficient of the
polynomial off in its fourth digit must fail. Part `cuda` of scripts/gpu-check.sh runs it;
exit 0 when the check passes and the control fails.

usage: gelu-erf.py PRELUDE.cuh"""
import ctypes, math, os, sys
import torch

N = '/opt/torch/.venv/lib/python3.12/site-packages/nvidia'
nvrtc = ctypes.CDLL(os.path.join(N, 'cu13/lib/libnvrtc.so.13'))
cuda = ctypes.CDLL('libcuda.so.1')

KERNEL = r'''
extern "C" __global__ void gelu_parts(const float *v, float *out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const GeluErf g = geluErf(v[i]);
  out[4 * i] = g.cdf;
  out[4 * i + 1] = g.pdf;
  out[4 * i + 2] = gelu(v[i]);
  out[4 * i + 3] = geluGradFactor(v[i]);
}
'''


def check(r, what):
    if r != 0:
        raise SystemExit(f'gelu-erf: {what} failed ({r})')


def compile_kernel(source):
    prog = ctypes.c_void_p()
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b'gelu.cu', 0, None, None), 'nvrtcCreateProgram')
    major, minor = torch.cuda.get_device_capability()
    opts = [f'--gpu-architecture=sm_{major}{minor}'.encode(), b'-default-device', b'--std=c++17']
    if nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) != 0:
        n = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise SystemExit('gelu-erf: NVRTC failed:\n' + log.value.decode())
    n = ctypes.c_size_t()
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    cubin = ctypes.create_string_buffer(n.value)
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    module, f = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), cubin), 'cuModuleLoadData')
    check(cuda.cuModuleGetFunction(ctypes.byref(f), module, b'gelu_parts'), 'cuModuleGetFunction')
    return f


def evaluate(f, v):
    out = torch.empty(4 * v.numel(), dtype=torch.float32, device='cuda')
    args = [ctypes.c_void_p(v.data_ptr()), ctypes.c_void_p(out.data_ptr()), ctypes.c_int(v.numel())]
    ptrs = (ctypes.c_void_p * 3)(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
    check(cuda.cuLaunchKernel(f, (v.numel() + 255) // 256, 1, 1, 256, 1, 1, 0, None, ptrs, None), 'cuLaunchKernel')
    torch.cuda.synchronize()
    return out.view(-1, 4).double().cpu()


def errors(f):
    """The largest errors on the grid (as test/cuda/Inputs/gelu-erf.cpp measures them) and
    whether the exact values come out."""
    v = torch.arange(-12 * 4096, 12 * 4096 + 1, dtype=torch.float32) / 4096
    r = evaluate(f, v.cuda())
    x = v.double()
    cdf = 0.5 * torch.special.erfc(-x / math.sqrt(2))
    pdf = torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    near = x.abs() <= 6
    errs = {
        'Phi abs': ((r[:, 0] - cdf).abs().max().item(), 3e-7),
        'phi rel, |v| <= 6': (((r[:, 1] - pdf).abs() / pdf)[near].max().item(), 5e-6),
        'Phi + v phi abs': ((r[:, 3] - (cdf + x * pdf)).abs().max().item(), 5e-7),
        'gelu abs / max(|v|, 1)': (((r[:, 2] - x * cdf).abs() / x.abs().clamp(min=1)).max().item(), 3e-7),
    }
    s = evaluate(f, torch.tensor([0.0, math.inf, -math.inf, math.nan, -20.0], dtype=torch.float32).cuda())
    exact = (s[0, 2] == 0 and s[0, 0] == 0.5 and s[1, 2] == math.inf and math.isnan(s[2, 2])
             and math.isnan(s[3, 2]) and math.isnan(s[3, 3]) and math.isnan(s[1, 3]) and s[4, 0] == 0)
    return errs, bool(exact)


def main():
    prelude = open(sys.argv[1]).read()
    torch.zeros(1, device='cuda')  # the primary context, current on this thread
    check(cuda.cuInit(0), 'cuInit')
    wrong = prelude.replace('1.421413741f', '1.421513741f')
    assert wrong != prelude, 'prelude.cuh: no coefficient 1.421413741f'
    errs, exact = errors(compile_kernel(prelude + KERNEL))
    cerrs, cexact = errors(compile_kernel(wrong + KERNEL))
    ok = exact
    for what, (e, bound) in errs.items():
        print(f'{what} {e:.3g} (bound {bound:.2g}): {"ok" if e <= bound else "WRONG"}')
        ok = ok and e <= bound
    print(f'exact values: {"ok" if exact else "WRONG"}')
    caught = not cexact or any(e > bound for e, bound in cerrs.values())
    print(f'control (a coefficient off in its fourth digit): Phi abs {cerrs["Phi abs"][0]:.3g}, '
          f'{"caught" if caught else "NOT caught"}')
    print('PASS gelu-erf' if ok and caught else 'FAIL gelu-erf')
    return 0 if ok and caught else 1


if __name__ == '__main__':
    sys.exit(main())
