"""Checks what --init-from starts a run with.

  init_check.py params INIT.safetensors WEIGHTS.safetensors [--half]
      `medrun init --init-from WEIGHTS` wrote INIT: every model parameter equals WEIGHTS'
      (rounded to float16 with --half), each EMA weight equals its parameter, the optimizer
      state is zero.
  init_check.py losses RUN_A RUN_B [--differs RUN_C]
      the first step's loss of RUN_A equals RUN_B's (metrics.jsonl, exactly); with --differs,
      RUN_C's is another one (the weights made a difference).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runfiles import read_safetensors  # noqa: E402


def first_loss(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        return json.loads(f.readline())["loss"]


mode = sys.argv[1]
if mode == "params":
    init, weights = read_safetensors(sys.argv[2]), read_safetensors(sys.argv[3])
    weights.pop("dummy_tensor", None)
    if "--half" in sys.argv:
        weights = {k: v.astype(np.float16).astype(np.float32) for k, v in weights.items()}
    model = [k for k in init if not k.startswith(("ema.", "optimizer."))]
    bad = [k for k in model if not np.array_equal(init[k], weights[k])]
    bad += ["ema." + k for k in model if "ema." + k in init and not np.array_equal(init["ema." + k], init[k])]
    bad += [k for k in init if k.startswith("optimizer.") and np.any(init[k])]
    emas = sum(k.startswith("ema.") for k in init)
    moments = sum(k.startswith("optimizer.") for k in init)
    print("init: %d model parameters as the weights, %d EMA weights as them, %d optimizer tensors "
          "zero: %s" % (len(model), emas, moments, "ok" if not bad and len(model) == len(weights)
                        else "differ: %s" % bad[:3]))
    sys.exit(0 if not bad and len(model) == len(weights) else 1)
a, b = first_loss(sys.argv[2]), first_loss(sys.argv[3])
ok = a == b
line = "first loss %r vs %r: %s" % (a, b, "equal" if ok else "DIFFER")
if "--differs" in sys.argv:
    c = first_loss(sys.argv[sys.argv.index("--differs") + 1])
    ok = ok and c != a
    line += "; fresh weights %r: %s" % (c, "another loss" if c != a else "THE SAME")
print(line)
sys.exit(0 if ok else 1)
