#!/usr/bin/env python3
"""fake_dp_checks.py OUT: what parts equiv and kill of scripts/gpu-data-parallel.sh leave in
OUT, made up so that each check has one way to fail, for a test of its verdicts (--report
--gpus "2 3"):
  equiv, 2 ranks: losses and states agree, but so does the control on other samples (the
                  comparison could not tell them apart);
  kill, 2 ranks:  the job outlived the bound, a rank left, the launcher named no one;
  kill, 3 ranks:  the job ended, but the launcher named rank 1, not rank 2, the one killed.
"""
import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def write(name, text):
    with open(os.path.join(out, name), "w") as f:
        f.write(text)


write("dp-equiv-2.status", "ranks 0 one 0 other 0 batch 4 rtol 0.015625\n")
write("dp-equiv-2.same", "same losses: 20 steps (0..19) within 0.015625 (largest relative difference 0.002, step 3 loss)\n")
write("dp-equiv-2.control", "same losses: 20 steps (0..19) within 0.015625 (largest relative difference 0.01, step 0 loss)\n")
write("dp-equiv-2.ranks.log", "".join("medrun: rank %d of 2: state after step 20: crc32c 0badcafe of 9 tensors\n" % r
                                      for r in (1, 0)))
write("dp-kill-2.status", "fault 1 rank 1 within 60\n")
write("dp-kill-2.log", "launcher exit 1\ntrain_fault.py: ranks still running: [0]\n")
write("dp-kill-3.status", "fault 0 rank 2 within 60\n")
write("dp-kill-3.log", "launcher exit 137\nmedrun: rank 1 (pid 42) was killed by signal 9 (Killed); stopping the other ranks\n"
      "train_fault.py: no rank left, the job ended within 60 s of the fault (after 0.50 s)\n")
