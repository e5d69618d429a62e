"""Keeps the worked examples of docs/architecture.md ("Adding an op", "Adding a fusion
template") true: every file a step names exists, the example's entry occurs in one of them,
and every check the step names exists (a file, a ctest or gtest, a compiler flag of the
build). Fails naming the row and what is missing.

  adding_steps.py --doc docs/architecture.md --source SRC
"""
import argparse
import glob
import os
import re
import sys

p = argparse.ArgumentParser()
p.add_argument("--doc", required=True)
p.add_argument("--source", required=True)
a = p.parse_args()
text = open(a.doc).read()
src = a.source


def read(path):
    try:
        return open(os.path.join(src, path), encoding="utf-8", errors="replace").read()
    except OSError:
        return None


test_sources = {f: open(f, errors="replace").read()
                for f in glob.glob(os.path.join(src, "test", "**", "*"), recursive=True)
                if os.path.isfile(f) and f.endswith((".cpp", ".txt", ".py", ".test", ".mlir"))}
# The build's own CMake files (compile flags), not the tests' (which name flags in patterns).
cmake_sources = [open(f).read() for d in ("lib", "runtime", "tools")
                 for f in glob.glob(os.path.join(src, d, "**", "CMakeLists.txt"), recursive=True)]


def check_exists(item):
    """Is the named check there? A path, a gtest (unit/Suite.Name), a ctest name or a flag."""
    if item.startswith("-"):
        return any(item in c for c in cmake_sources)
    if re.search(r"\.\w+$", item) and "/" in item and not re.match(r"^(unit|runtime)/\w+\.\w+$", item):
        return os.path.exists(os.path.join(src, item))
    name = item.split("/", 1)[1] if "/" in item else item
    if "." in name:
        suite, test = name.split(".", 1)
        pattern = re.compile(r"TEST\(\s*%s,\s*%s\)" % (re.escape(suite), re.escape(test)))
        return any(pattern.search(t) for t in test_sources.values())
    return any("NAME " + item in t for t in test_sources.values())


failures, rows = [], 0
for heading in ("### Adding an op", "### Adding a fusion template"):
    m = re.search(re.escape(heading) + r"\n(.*?)(?=\n#)", text, re.S)
    if not m:
        failures.append(f"{a.doc}: no section '{heading}'")
        continue
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("step",) or set(cells[0]) <= set("-"):
            continue
        rows += 1
        step, where, entry, checked = cells
        files = re.findall(r"`([^`]+)`", where)
        entries = re.findall(r"`([^`]+)`", entry)
        where_text = [read(f) for f in files]
        for f, t in zip(files, where_text):
            if t is None:
                failures.append(f"{heading} / {step}: {f} does not exist")
        if not entries or not any(t is not None and entries[0] in t for t in where_text):
            failures.append(f"{heading} / {step}: '{entries[0] if entries else '?'}' is in none of "
                            f"{', '.join(files)}")
        for item in re.findall(r"`([^`]+)`", checked):
            if not check_exists(item):
                failures.append(f"{heading} / {step}: the check '{item}' does not exist")
for f in failures:
    print("adding steps: FAIL " + f)
if not failures:
    print(f"adding steps: {rows} steps checked")
if rows < 8:
    print(f"adding steps: FAIL only {rows} steps found")
    sys.exit(1)
sys.exit(1 if failures else 0)
