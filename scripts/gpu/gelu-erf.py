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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvrtc_kernels import init, launch, load

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


def evaluate(f, v):
    out = torch.empty(4 * v.numel(), dtype=torch.float32, device='cuda')
    launch(f, (v.numel() + 255) // 256,
           [ctypes.c_void_p(v.data_ptr()), ctypes.c_void_p(out.data_ptr()), ctypes.c_int(v.numel())])
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
    init()
    wrong = prelude.replace('1.421413741f', '1.421513741f')
    assert wrong != prelude, 'prelude.cuh: no coefficient 1.421413741f'
    errs, exact = errors(load(prelude + KERNEL, ['gelu_parts'])['gelu_parts'])
    cerrs, cexact = errors(load(wrong + KERNEL, ['gelu_parts'])['gelu_parts'])
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
