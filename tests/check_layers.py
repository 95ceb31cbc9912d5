#!/usr/bin/env python3
"""The core's subsystems include one way (issue 27): support <- aggregation <-
sampling, encoding <- export <- pipeline. Fails naming each include that
goes against that order (a file may include its own subsystem's headers)."""
import os
import re
import sys

ORDER = {"support": 0, "aggregation": 1, "sampling": 2, "encoding": 2, "export": 3, "pipeline": 4}
root = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "core", "src")
bad = []
for sub in sorted(ORDER):
    for name in sorted(os.listdir(os.path.join(root, sub))):
        if not name.endswith((".c", ".h")):
            continue
        text = open(os.path.join(root, sub, name)).read()
        for inc in re.findall(r'#include "([a-z_]+)/[^"]+"', text):
            if inc in ORDER and inc != sub and ORDER[inc] >= ORDER[sub]:
                bad.append(f"core/src/{sub}/{name} includes {inc}/ (layers: {ORDER})")
print("\n".join(bad) or "core layers: every include goes down")
sys.exit(1 if bad else 0)
