#!/usr/bin/env python3
"""The core's subsystems include one way (issue 27): support <- aggregation <-
sampling, encoding <- export <- pipeline. Fails naming each include that
goes against that order (a file may include its own subsystem's headers),
and each circle between files (a .c and its .h are one file)."""
import os
import re
import sys

ORDER = {"support": 0, "aggregation": 1, "sampling": 2, "encoding": 2, "export": 3, "pipeline": 4}
root = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "core", "src")
bad = []
uses = {}  # "sub/name" -> the "sub/name"s whose header it includes
for sub in sorted(ORDER):
    for name in sorted(os.listdir(os.path.join(root, sub))):
        if not name.endswith((".c", ".h")):
            continue
        text = open(os.path.join(root, sub, name)).read()
        me = f"{sub}/{name[:-2]}"
        uses.setdefault(me, set()).update(
            h for h in re.findall(r'#include "([a-z_]+/[a-z_0-9]+)\.h"', text) if h != me)
        for inc in re.findall(r'#include "([a-z_]+)/[^"]+"', text):
            if inc in ORDER and inc != sub and ORDER[inc] >= ORDER[sub]:
                bad.append(f"core/src/{sub}/{name} includes {inc}/ (layers: {ORDER})")


def reaches(a, b, seen):
    """True when file a includes, through any chain, file b."""
    for n in uses.get(a, ()):
        if n == b or (n not in seen and not seen.add(n) and reaches(n, b, seen)):
            return True
    return False


circles = {}  # each circle (its files) once, under its first file
for f in sorted(uses):
    group = sorted(g for g in uses if g == f or (reaches(f, g, set()) and reaches(g, f, set())))
    if len(group) > 1:
        circles.setdefault(tuple(group), None)
bad += ["circle of files: " + " <-> ".join(group) for group in circles]
print("\n".join(bad) or "core layers: every include goes down, no circle")
sys.exit(1 if bad else 0)
