"""Compares the outputs of `medrun run` in pairs of directories (resample-fusion.test): each
outN.npy of A against B's, bit for bit. Prints one line per output: its shape and `equal`
(with the count of ones where the values are 0/1 masks, which must not be trivial), or
`differ` with the count of elements that do.

usage: same_outputs.py A1 B1 [A2 B2 ...]"""
import os
import sys

import numpy as np

dirs = sys.argv[1:]
if len(dirs) % 2:
    sys.exit("usage: same_outputs.py A1 B1 [A2 B2 ...]")
bad = 0
for a, b in zip(dirs[::2], dirs[1::2]):
    for name in sorted(f for f in os.listdir(a) if f.endswith(".npy")):
        x, y = np.load(os.path.join(a, name)), np.load(os.path.join(b, name))
        shape = "x".join(map(str, x.shape))
        if x.shape != y.shape or x.dtype != y.dtype:
            print(f"{name[:-4]} {shape} differ in shape or type: {y.shape} {y.dtype}")
            bad += 1
            continue
        diff = int(np.count_nonzero(x.view(np.uint8) != y.view(np.uint8)))
        if diff:
            print(f"{name[:-4]} {shape} differ ({diff} bytes)")
            bad += 1
            continue
        binary = np.isin(x, (0, 1)).all()
        ones = f" (ones {int(np.count_nonzero(x))} of {x.size})" if binary else ""
        print(f"{name[:-4]} {shape} equal{ones}")
sys.exit(1 if bad else 0)
