"""Writes a copy of an effective recipe (JSON) with values replaced, for the recipe tests.

usage: edit_json.py IN OUT SECTION.KEY=JSON ...  (a JSON value: 1e300, [1, 2], "word")"""
import json
import sys

src, dst, *edits = sys.argv[1:]
config = json.load(open(src))
for edit in edits:
    key, value = edit.split("=", 1)
    section, name = key.split(".", 1)
    config[section][name] = json.loads(value)
json.dump(config, open(dst, "w"))
