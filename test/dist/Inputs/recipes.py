"""Writes the shrunk quickstart recipe of the data-parallel tests for each batch size B given:
OUT/bB.json (the effective recipe, `medc recipe`) and OUT/bB.medc (compiled with
--data-parallel, `medc compile`).

  recipes.py MEDC RECIPE.yaml OUT B...
"""
import subprocess
import sys

medc, recipe, out, batches = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
common = ["--set", "data.patch=16,16,16", "--set", "data.volume_shape=32,32,32",
          "--set", "data.volumes=2", "--set", "loss.mask=false", "--set", "train.steps=4",
          "--set", "schedule.warmup_steps=1", "--set", "logging.every=1",
          "--set", "checkpoint.every=2", "--set", "data.workers=1"]
for b in batches:
    sets = common + ["--set", "data.batch=" + b]
    with open("%s/b%s.json" % (out, b), "w") as f:
        subprocess.run([medc, "recipe", recipe] + sets, stdout=f, check=True)
    subprocess.run([medc, "compile", "--recipe", recipe] + sets +
                   ["--data-parallel", "-o", "%s/b%s.medc" % (out, b)], check=True)
