"""Writes PyTorch files of a MedNeXt v1 state_dict (safetensors in) as users have them:
  plain.pth    torch.save(model.state_dict())
  nested.pth   a training checkpoint: {'epoch', 'state_dict' with DDP's 'module.' prefix,
               'optimizer_state_dict', 'hparams': an argparse.Namespace} (objects beside
               the weights that only running the pickle would construct)
  legacy.pth   the same state_dict in the pre-1.6 format (no zip)
  notensor.pth {'epoch': 3}
  half.pth     the state_dict in float16, weights saved as strided (transposed) views
  evil.pth     {'state_dict', 'payload'}: unpickling the payload runs `touch MARKER`
               (make_pth.py SRC OUT MARKER)
"""
import argparse
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runfiles import read_safetensors  # noqa: E402

src, out = sys.argv[1], sys.argv[2]
marker = sys.argv[3] if len(sys.argv) > 3 else os.path.join(out, "pwned")


class Payload:
    def __reduce__(self):
        return (os.system, ("touch " + marker,))


os.makedirs(out, exist_ok=True)
sd = collections.OrderedDict((k, torch.from_numpy(v.copy())) for k, v in read_safetensors(src).items())
torch.save(sd, os.path.join(out, "plain.pth"))
opt = {"state": {0: {"exp_avg": torch.zeros(3)}}, "param_groups": [{"lr": 1e-3}]}
torch.save({"epoch": 3, "state_dict": collections.OrderedDict(("module." + k, v) for k, v in sd.items()),
            "optimizer_state_dict": opt, "hparams": argparse.Namespace(lr=1e-3, kernel=3)},
           os.path.join(out, "nested.pth"))
torch.save(sd, os.path.join(out, "legacy.pth"), _use_new_zipfile_serialization=False)
torch.save({"epoch": 3}, os.path.join(out, "notensor.pth"))
half = collections.OrderedDict()
for k, v in sd.items():
    h = v.half()
    half[k] = h.transpose(0, 1).contiguous().transpose(0, 1) if h.dim() > 1 else h  # strided
torch.save(half, os.path.join(out, "half.pth"))
torch.save({"state_dict": sd, "payload": Payload()}, os.path.join(out, "evil.pth"))
print("wrote plain.pth nested.pth legacy.pth notensor.pth half.pth evil.pth")
