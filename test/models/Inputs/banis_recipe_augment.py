#!/usr/bin/python3
"""Reads an effective recipe (`medc recipe` JSON) on stdin and prints NAME: its generated
augmentation and affinity offsets; exits 1 when it has no augmentation
(test/models/affinities-offsets-banis-configs.test)."""
import json
import sys

recipe = json.load(sys.stdin)
name = sys.argv[1]
augment = recipe.get("augment", {}).get("pipeline")
if not augment:
    print("%s: no augmentation" % name)
    sys.exit(1)
print("%s: augment %s, offsets %s" % (name, augment, recipe["loss"]["affinities"]["offsets"]))
