#!/usr/bin/env python3
"""The device's f16 and bf16 conversions (lib/Target/Cuda/prelude.cuh: cvt.f32.f16, cvt.rn.f16.f32,
cvt.rn.bf16.f32, and pack2's cvt.rn.f16x2.f32 and cvt.rn.bf16x2.f32) against the integer and
branch definitions the CPU emulation runs (the same code with its __CUDA_ARCH__ paths switched
off), both compiled by NVRTC and run on the GPU: every one of the 65,536 values of each type
read, and every one of the 2^32 f32 bit patterns assigned, alone and as a pair (pack2, its other
half the complemented pattern). Equal bits, or NaN on both sides (the device does not keep a
NaN's payload). Negative controls: the prelude with cvt.rz (rounding toward zero) instead of
cvt.rn, and pack2 with its two halves swapped, must differ. Part `cuda` of scripts/gpu-check.sh
runs it; exit 0 when the check passes and every control fails.

usage: convert.py PRELUDE.cuh"""
import ctypes, os, re, sys
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvrtc_kernels import init, launch, load

KERNELS = r'''
extern "C" __global__ void read(const unsigned short *in, float *out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  T h;
  h.bits = in[i];
  out[i] = h;
}
extern "C" __global__ void write(unsigned base, unsigned short *out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  T h;
  h = __uint_as_float(base + i);
  out[i] = h.bits;
}
extern "C" __global__ void write_pair(unsigned base, unsigned *out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = pack2<T>(__uint_as_float(base + i), __uint_as_float(~(base + i)));
}
'''
NAMES = ('read', 'write', 'write_pair')
CHUNK = 1 << 26


def is_nan(h, kind):
    """NaN halves of int16 (or the low/high halves of int32 pairs) of f16 or bf16."""
    exp, man = (0x7c00, 0x3ff) if kind == 'f16' else (0x7f80, 0x7f)
    return ((h & exp) == exp) & ((h & man) != 0)


def bad(x, y, kind):
    """Elements whose bits differ where not both NaN (pairs: either half)."""
    if x.dtype == torch.int32:
        halves = lambda v: (v.to(torch.int16), (v >> 16).to(torch.int16))
        return sum(bad(a, b, kind) for a, b in zip(halves(x), halves(y)))
    return int(((x != y) & ~(is_nan(x, kind) & is_nan(y, kind))).sum())


def compare(kind, variants):
    """Counts of differing reads, writes and pair writes of each variant against the first."""
    halves = torch.arange(65536, dtype=torch.int32, device='cuda').to(torch.int16)
    counts = {name: [0, 0, 0] for name in variants}
    reads = {}
    for name, fns in variants.items():
        out = torch.empty(65536, dtype=torch.float32, device='cuda')
        launch(fns['read'], 65536 // 256, [ctypes.c_void_p(halves.data_ptr()), ctypes.c_void_p(out.data_ptr())])
        reads[name] = out
    ref = next(iter(variants))
    for name in variants:
        r, s = reads[name], reads[ref]
        counts[name][0] = int(((r.view(torch.int32) != s.view(torch.int32)) & ~(r.isnan() & s.isnan())).sum())
    for base in range(0, 1 << 32, CHUNK):
        outs = {}
        for name, fns in variants.items():
            w = torch.empty(CHUNK, dtype=torch.int16, device='cuda')
            p = torch.empty(CHUNK, dtype=torch.int32, device='cuda')
            launch(fns['write'], CHUNK // 256, [ctypes.c_uint32(base), ctypes.c_void_p(w.data_ptr())])
            launch(fns['write_pair'], CHUNK // 256, [ctypes.c_uint32(base), ctypes.c_void_p(p.data_ptr())])
            outs[name] = (w, p)
        for name in variants:
            counts[name][1] += bad(outs[name][0], outs[ref][0], kind)
            counts[name][2] += bad(outs[name][1], outs[ref][1], kind)
    torch.cuda.synchronize()
    return counts


def main():
    prelude = open(sys.argv[1]).read()
    init()
    ok = True
    for kind in ('f16', 'bf16'):
        struct = re.search(r'struct %s \{.*?\n\};' % kind, prelude, re.S)
        pairs = re.search(r'#ifdef __CUDA_ARCH__\n// Two values rounded by one cvt.*?#endif', prelude, re.S)
        assert struct and pairs, f'prelude.cuh: no struct {kind} or no device pack2'
        cut = lambda s, m, new: s[:m.start()] + new + s[m.end():]
        software = cut(prelude, pairs, '')
        software = cut(software, re.search(r'struct %s \{.*?\n\};' % kind, software, re.S),
                       struct.group(0).replace('#ifdef __CUDA_ARCH__', '#if 0'))
        one, two = f'cvt.rn.{kind}.f32', f'cvt.rn.{kind}x2.f32'
        rz = prelude.replace(one, one.replace('.rn.', '.rz.')).replace(two, two.replace('.rn.', '.rz.'))
        pair = pairs.group(0)
        spec = re.search(r'unsigned pack2<%s>.*?\n\}' % kind, pair, re.S)
        swapped = cut(prelude, pairs, pair.replace(spec.group(0), spec.group(0).replace('"f"(hi), "f"(lo)', '"f"(lo), "f"(hi)')))
        assert rz != prelude and swapped != prelude, f'prelude.cuh: no {one}, {two} or pack2<{kind}> operands'
        head = f'#define T {kind}\n'
        variants = {name: load(src + head + KERNELS, NAMES) for name, src in
                    (('software', software), ('device', prelude), ('cvt.rz', rz), ('pack2 swapped', swapped))}
        c = compare(kind, variants)
        dev, ctl, swp = c['device'], c['cvt.rz'], c['pack2 swapped']
        print(f'{kind} conversions on the device vs the integer definition: {dev[0]} of 65536 reads, {dev[1]} of 2^32 '
              f'writes, {dev[2]} of 2^32 pair writes differ (control cvt.rz: {ctl[1]} writes, {ctl[2]} pairs; '
              f'control pack2 swapped: {swp[2]} pairs)')
        ok = ok and dev == [0, 0, 0] and ctl[1] > 0 and ctl[2] > 0 and swp[2] > 0
    print('PASS convert' if ok else 'FAIL convert')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
