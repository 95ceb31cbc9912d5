"""The memory profile's cost on allocation-heavy Python, side by side.

    python3 bench/python/alloc_cost.py [--rounds N] [--quick] [--json PATH]
        [--python PY] [--ddtrace-python PY | --ddtrace-missing REASON]

Each round runs every variant once, each in a fresh interpreter, in an order
that rotates from round to round, on two workloads: many small objects
(tuples, strings, dicts, lists made and dropped) and a JSON encode/decode
loop. A run does its workload `REPS` times and reports the least CPU time
of one pass (time.process_time: the whole process, profiler threads
included; the least, because the machine's other load only ever adds
time), and its PSS at the end of the workload (/proc/self/smaps_rollup).
The report gives per variant the median over rounds, and the ratio to
`none` as the median of each round's own ratio (so the machine's load,
which changes between rounds, cancels within a round).

  none           no profiler
  cpu            pyroscope-native, CPU profile at 100 Hz, memory off (default)
  cpu+memory     the same with memory=True at the default 512 KiB interval
  ddtrace-mem    Datadog's ddtrace profiler with its memory collector alone
                 (stack, lock and exception collectors off; heap sample size
                 512 KiB like ours, Datadog's default is 1 MiB or more), in its
                 own venv on the same CPython (--ddtrace-python)
  tracemalloc-1  the standard library's exact allocation tracer, 1 frame
  tracemalloc-64 the same keeping 64 frames (ddtrace's default depth)

Memory on vs off is also measured inside one process per round ("paired"):
PAIRS passes with memory off and on alternating (ABBA), pyroscope configured
afresh for each pass, the ratio the median of the pairs'; with no layout or
start-up difference between the two, it is the closest reading of the
hooks' own cost.

Every process runs with PYTHONHASHSEED=0 (hash seeds change dict layouts
and so the workload's speed from process to process).
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
variant, workload, size, reps, out = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                      int(sys.argv[4]), sys.argv[5])
if variant.startswith("tracemalloc-"):
    import tracemalloc
    tracemalloc.start(int(variant.split("-")[1]))
elif variant == "ddtrace-mem":
    from ddtrace.profiling import Profiler
    prof = Profiler()
    prof.start()
    names = sorted(type(c).__name__ for c in prof._profiler._collectors)
    if names != ["MemoryCollector"]:
        raise SystemExit("ddtrace runs other collectors than memory: %s" % names)
elif variant != "none":
    import pyroscope
    pyroscope.configure(application_name="bench.alloc", output_dir=out,
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

def pss_kib():
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None

def one_pass():
    t0 = time.process_time()
    fn(size)
    return time.process_time() - t0

fn = objects if workload == "objects" else json_loop
if variant == "paired":
    # Memory off and on in one process, pass after pass (ABBA...), the
    # profiler started afresh for each: no layout or load difference
    # between the two but the hooks. The ratio: median over pairs.
    import pyroscope
    ratios = []
    for i in range(reps):
        t = {}
        for mem in ((False, True) if i % 2 == 0 else (True, False)):
            pyroscope.configure(application_name="bench.alloc", output_dir=out,
                                upload_interval=10, sample_rate=100, memory=mem)
            t[mem] = one_pass()
            pyroscope.shutdown()
        ratios.append(t[True] / t[False])
    ratios.sort()
    print(json.dumps({"ratio": ratios[len(ratios) // 2]}))
    sys.exit(0)
best = min(one_pass() for _ in range(reps))
pss = pss_kib()
st = {}
if variant in ("cpu", "cpu+memory"):
    st = pyroscope.stats()
    pyroscope.shutdown()
elif variant == "ddtrace-mem":
    prof.stop(flush=False)
print(json.dumps({"cpu_s": best, "pss_kib": pss, "sampled": st.get("memory_sampled", 0),
                  "probes": st.get("memory_free_probes", 0)}))
"""

VARIANTS = ("none", "cpu", "cpu+memory", "ddtrace-mem", "tracemalloc-1", "tracemalloc-64")
WORKLOADS = {"objects": 2000, "json": 1500}
REPS = 3
PAIRS = 8
# ddtrace's memory collector alone, writing pprof files instead of
# uploading to an agent; no tracer, telemetry or remote configuration.
DDTRACE_ENV = {
    "DD_PROFILING_STACK_ENABLED": "false",
    "DD_PROFILING_LOCK_ENABLED": "false",
    "DD_PROFILING_EXCEPTION_ENABLED": "false",
    "DD_PROFILING_PYTORCH_ENABLED": "false",
    "DD_PROFILING_MEMORY_ENABLED": "true",
    "DD_PROFILING_HEAP_ENABLED": "true",
    "DD_PROFILING_HEAP_SAMPLE_SIZE": str(512 * 1024),
    "DD_PROFILING_UPLOAD_INTERVAL": "10",
    "DD_TRACE_ENABLED": "false",
    "DD_INSTRUMENTATION_TELEMETRY_ENABLED": "false",
    "DD_REMOTE_CONFIGURATION_ENABLED": "false",
}


def run(python, variant, workload, size, out):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYROSCOPE_", "DD_", "PYTHONTRACEMALLOC"))}
    env["PYTHONHASHSEED"] = "0"
    if variant == "ddtrace-mem":
        env.update(DDTRACE_ENV, DD_PROFILING_OUTPUT_PPROF=os.path.join(out, "dd"))
    os.makedirs(out, exist_ok=True)
    # tracemalloc is 10-30 times slower: one pass is precise enough.
    reps = PAIRS if variant == "paired" else 1 if variant.startswith("tracemalloc") else REPS
    r = subprocess.run([python, "-c", CHILD, variant, workload, str(size), str(reps), out],
                       capture_output=True, text=True, timeout=900, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{variant}/{workload} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def ratio_line(name, num, den):
    rs = [a / b for a, b in zip(num, den)]
    return rs, (f"    {name}: x{statistics.median(rs):.3f}  [{min(rs):.3f}..{max(rs):.3f}]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--ddtrace-python", help="a Python with ddtrace installed")
    ap.add_argument("--ddtrace-missing", help="why there is no ddtrace row")
    ap.add_argument("--only", help="variants to run, comma-separated (none is always run)")
    a = ap.parse_args()
    rounds = 3 if a.quick else a.rounds
    scale = 0.25 if a.quick else 1.0
    variants = list(VARIANTS)
    if a.only:
        want = set(a.only.split(",")) | {"none"}
        variants = [v for v in VARIANTS if v in want]
    dd_note = None
    if "ddtrace-mem" in variants and not a.ddtrace_python:
        variants.remove("ddtrace-mem")
        dd_note = ("ddtrace-mem: not measured: " +
                   (a.ddtrace_missing or "no --ddtrace-python given"))
    res = {w: {v: [] for v in variants} for w in WORKLOADS}
    pss = {w: {v: [] for v in variants} for w in WORKLOADS}
    sampled = {w: [] for w in WORKLOADS}
    probes = {w: [] for w in WORKLOADS}
    paired = {w: [] for w in WORKLOADS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            order = variants[r % len(variants):] + variants[:r % len(variants)]
            for w, size in WORKLOADS.items():
                for v in order:
                    py = a.ddtrace_python if v == "ddtrace-mem" else a.python
                    out = run(py, v, w, int(size * scale), os.path.join(tmp, f"{w}{r}{v}"))
                    res[w][v].append(out["cpu_s"])
                    pss[w][v].append(out["pss_kib"])
                    if v == "cpu+memory":
                        sampled[w].append(out["sampled"])
                        probes[w].append(out["probes"])
                if "cpu+memory" in variants:
                    out = run(a.python, "paired", w, int(size * scale),
                              os.path.join(tmp, f"{w}{r}paired"))
                    paired[w].append(out["ratio"])
            sys.stderr.write(f"[alloc_cost] round {r + 1}/{rounds} done\n")
    lines = [f"memory profile cost, {rounds} rounds of {REPS} passes (the least of each run), "
             "median workload CPU s, ratio to none: median of per-round ratios [min..max], "
             "PSS at the workload's end (median MiB, added vs none)"]
    if dd_note:
        lines.append("  " + dd_note)
    summary = {}
    for w in WORKLOADS:
        lines.append(f"  {w}:")
        pss_none = pss[w]["none"]
        for v in variants:
            ratios = [x / n for x, n in zip(res[w][v], res[w]["none"])]
            med = statistics.median(res[w][v])
            rmed = statistics.median(ratios)
            have_pss = all(p is not None for p in pss[w][v] + pss_none)
            pss_mib = statistics.median(pss[w][v]) / 1024 if have_pss else None
            added = (statistics.median([p - n for p, n in zip(pss[w][v], pss_none)]) / 1024
                     if have_pss else None)
            summary[f"{w}/{v}"] = {"cpu_s": med, "ratio": rmed, "ratio_min": min(ratios),
                                   "ratio_max": max(ratios), "pss_mib": pss_mib,
                                   "pss_added_mib": added}
            mem = (f"  PSS {pss_mib:6.1f} MiB ({added:+.1f})" if have_pss else "  PSS n/a")
            lines.append(f"    {v:14s} {med:7.3f} s  x{rmed:.3f}  [{min(ratios):.3f}.."
                         f"{max(ratios):.3f}]{mem}")
        if "cpu" in variants and "cpu+memory" in variants:
            # Memory on vs off, CPU profiling running in both: the issue's question.
            rs, line = ratio_line("memory on vs off (cpu+memory / cpu)",
                                  res[w]["cpu+memory"], res[w]["cpu"])
            summary[f"{w}/memory_on_vs_off"] = {"ratio": statistics.median(rs),
                                                "ratio_min": min(rs), "ratio_max": max(rs)}
            lines.append(line)
            rs = paired[w]
            summary[f"{w}/memory_on_vs_off_paired"] = {
                "ratio": statistics.median(rs), "ratio_min": min(rs), "ratio_max": max(rs)}
            lines.append(f"    memory on vs off in one process ({PAIRS} alternating passes a "
                         f"round, median pair): x{statistics.median(rs):.3f}  [{min(rs):.3f}.."
                         f"{max(rs):.3f}]")
            lines.append(f"    (memory samples per run: median {statistics.median(sampled[w]):.0f}"
                         f", frees past the filter: median {statistics.median(probes[w]):.0f})")
    print("\n".join(lines))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": rounds, "reps": REPS, "variants": variants,
                       "ddtrace_note": dd_note, "summary": summary, "raw": res, "pss_kib": pss},
                      f, indent=1)


if __name__ == "__main__":
    main()
