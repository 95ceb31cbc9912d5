"""The memory profile's cost on allocation-heavy Python, side by side.

    python3 bench/python/alloc_cost.py [--rounds N] [--quick] [--json PATH]

Each round runs every variant once, in a fresh interpreter each, in turn
(none, cpu, cpu+memory, tracemalloc, then again next round), on two
workloads: many small objects (tuples, strings, dicts, lists made and
dropped) and a JSON encode/decode loop. A run reports the CPU time of its
workload alone (time.process_time around it, after the profiler started).
The report gives per variant the median over rounds, and the ratio to `none`
as the median of each round's own ratio (so the machine's load, which
changes between rounds, cancels within a round).

  none         no profiler
  cpu          pyroscope-native, CPU profile at 100 Hz, memory off (default)
  cpu+memory   the same with memory=True at the default 512 KiB interval
  tracemalloc  the standard library's exact allocation tracer (1 frame)

Datadog's memory profiler (ddtrace) is not in this table yet.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys, time
variant, workload, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
if variant == "tracemalloc":
    import tracemalloc
    tracemalloc.start(1)
elif variant != "none":
    import pyroscope
    pyroscope.configure(application_name="bench.alloc", output_dir=sys.argv[4],
                        upload_interval=10, sample_rate=100,
                        memory=(variant == "cpu+memory"))

def objects(n):
    keep = []
    for i in range(n):
        rows = [(j, str(j), {"k": j, "v": [j, j + 1]}) for j in range(200)]
        keep.append(rows)
        if len(keep) > 50:
            keep.pop(0)
    return len(keep)

DOC = {"users": [{"id": i, "name": "user%d" % i, "tags": ["a", "b", "c"],
                  "score": i * 1.5, "active": i % 2 == 0} for i in range(100)]}

def json_loop(n):
    total = 0
    for _ in range(n):
        total += len(json.loads(json.dumps(DOC)))
    return total

fn = objects if workload == "objects" else json_loop
t0 = time.process_time()
fn(size)
t1 = time.process_time()
st = {}
if variant not in ("none", "tracemalloc"):
    st = pyroscope.stats()
    pyroscope.shutdown()
print(json.dumps({"cpu_s": t1 - t0, "sampled": st.get("memory_sampled", 0)}))
"""

VARIANTS = ("none", "cpu", "cpu+memory", "tracemalloc")
WORKLOADS = {"objects": 4000, "json": 4000}


def run(python, variant, workload, size, out):
    r = subprocess.run([python, "-c", CHILD, variant, workload, str(size), out],
                       capture_output=True, text=True, timeout=600,
                       env={k: v for k, v in os.environ.items()
                            if not k.startswith("PYROSCOPE_")})
    if r.returncode != 0:
        raise SystemExit(f"{variant}/{workload} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    rounds = 3 if a.quick else a.rounds
    scale = 0.25 if a.quick else 1.0
    res = {w: {v: [] for v in VARIANTS} for w in WORKLOADS}
    sampled = {w: [] for w in WORKLOADS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for w, size in WORKLOADS.items():
                for v in VARIANTS:
                    out = run(a.python, v, w, int(size * scale), os.path.join(tmp, f"{w}{r}{v}"))
                    res[w][v].append(out["cpu_s"])
                    if v == "cpu+memory":
                        sampled[w].append(out["sampled"])
            sys.stderr.write(f"[alloc_cost] round {r + 1}/{rounds} done\n")
    lines = [f"memory profile cost, {rounds} rounds, median workload CPU s (ratio to none: "
             "median of per-round ratios, [min..max])"]
    summary = {}
    for w in WORKLOADS:
        lines.append(f"  {w}:")
        for v in VARIANTS:
            ratios = [x / n for x, n in zip(res[w][v], res[w]["none"])]
            med = statistics.median(res[w][v])
            rmed = statistics.median(ratios)
            summary[f"{w}/{v}"] = {"cpu_s": med, "ratio": rmed,
                                   "ratio_min": min(ratios), "ratio_max": max(ratios)}
            lines.append(f"    {v:12s} {med:7.3f} s  x{rmed:.3f}  [{min(ratios):.3f}.."
                         f"{max(ratios):.3f}]")
        # Memory on vs off, CPU profiling running in both: the issue's question.
        on_off = [m / c for m, c in zip(res[w]["cpu+memory"], res[w]["cpu"])]
        summary[f"{w}/memory_on_vs_off"] = {"ratio": statistics.median(on_off),
                                            "ratio_min": min(on_off), "ratio_max": max(on_off)}
        lines.append(f"    memory on vs off (cpu+memory / cpu): x{statistics.median(on_off):.3f}"
                     f"  [{min(on_off):.3f}..{max(on_off):.3f}]")
        lines.append(f"    (memory samples per run: median {statistics.median(sampled[w]):.0f})")
    print("\n".join(lines))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": rounds, "summary": summary, "raw": res}, f, indent=1)


if __name__ == "__main__":
    main()
