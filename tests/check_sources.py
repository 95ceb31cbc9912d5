#!/usr/bin/env python3
"""core/sources.txt is the one list of the core's C sources that every build
reads (issue 27). Fails naming each .c file under core/src, core/report or
core/gen the list lacks, each line that names no file, and each line twice."""
import glob
import os
import sys

core = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "core")
with open(os.path.join(core, "sources.txt")) as f:
    listed = [line.strip() for line in f if line.strip() and not line.startswith("#")]
present = {os.path.relpath(p, core) for top in ("src", "report", "gen")
           for p in glob.glob(os.path.join(core, top, "**", "*.c"), recursive=True)}
bad = [f"core/{p} is not in core/sources.txt" for p in sorted(present - set(listed))]
bad += [f"core/sources.txt names core/{p}, which does not exist"
        for p in listed if not os.path.isfile(os.path.join(core, p))]
bad += [f"core/sources.txt names core/{p} twice" for p in sorted(set(listed)) if listed.count(p) > 1]
print("\n".join(bad) or f"core sources: core/sources.txt lists all {len(listed)}")
sys.exit(1 if bad else 0)
