"""Prints parts of an artifact plan (medc compile --emit=plan) as one-line JSON, for FileCheck.

usage: plan_query.py PLAN.json PATH...   where PATH is like functions[0].ops[2] or parameters
Each op is printed on a line of its own when PATH selects a list.
"""
import json
import re
import sys

doc = json.load(open(sys.argv[1]))
for path in sys.argv[2:]:
    node = doc
    for key, index in re.findall(r"(\w+)|\[(\d+)\]", path):
        node = node[key] if key else node[int(index)]
    for item in node if isinstance(node, list) else [node]:
        print(json.dumps(item, sort_keys=True, separators=(",", ":")))
