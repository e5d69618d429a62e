"""Helpers of augment-overrides.test.

  inputs DIR SIZE        writes DIR/image.npy (2x1xSIZE^3 f32 in [0, 1]), DIR/seg.npy (i32
                         instance ids 0 .. 5) and DIR/rng.npy (an i64 key)
  compare A B NAME...    for each output NAME: 'NAME: same' where A/NAME.npy and B/NAME.npy
                         are equal bit for bit, else 'NAME: differs (max |a - b| ...)'
"""
import os
import sys

import numpy as np


def main():
    what = sys.argv[1]
    if what == "inputs":
        d, size = sys.argv[2], int(sys.argv[3])
        os.makedirs(d, exist_ok=True)
        r = np.random.default_rng(3)
        np.save(os.path.join(d, "image.npy"), r.random((2, 1, size, size, size)).astype(np.float32))
        np.save(os.path.join(d, "seg.npy"), r.integers(0, 6, (2, 1, size, size, size)).astype(np.int32))
        np.save(os.path.join(d, "rng.npy"), np.array(12345, dtype=np.int64))
        return
    if what == "compare":
        a, b = sys.argv[2], sys.argv[3]
        for name in sys.argv[4:]:
            x, y = np.load(os.path.join(a, name + ".npy")), np.load(os.path.join(b, name + ".npy"))
            if x.shape == y.shape and x.tobytes() == y.tobytes():
                print("%s: same" % name)
            else:
                print("%s: differs (max |a - b| %.3g)" % (name, float(np.abs(x.astype(np.float64) - y).max())))
        return
    sys.exit("augment_overrides.py: expected inputs or compare")


if __name__ == "__main__":
    main()
