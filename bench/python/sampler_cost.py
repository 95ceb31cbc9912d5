"""Sampler cost through the real package (this project's `pyroscope` only).

    python sampler_cost.py --cases 10x1,50x10,... --rate 1000 --seconds 2 --out-dir DIR
    python sampler_cost.py --production --threads 10 --rate 100 --seconds 5 --out-dir DIR
    python sampler_cost.py --changing --threads 4 --rate 1000 --seconds 2 --rounds 3

Cases are DEPTHxTHREADS. For each, THREADS threads (the main thread is one
of them) recurse to DEPTH Python frames and block; the profiler samples them
all at --rate with oncpu=False and gil_only=False, so every thread's stack is
walked on every tick. The sampler's own counters (CPU of the sampler thread,
stacks walked, frames, walk errors) are read in chunks; each chunk gives one
cost per stack and the median over the chunks is reported.

--idle N runs N threads parked in Event.wait at depth 10, sampled in wall
mode at --rate with every stack walked, under --budget (sampler_cpu_budget,
% of one core; 0: no limit): the sampler's share of a core and the rate it
kept.

Cases, --changing and --production measure the raw cost, so they run with no budget.

--production runs the default settings (oncpu=True, gil_only=True) with
threads that mix CPU and sleeps at depth ~30, and a worst case with every
blocked thread walked on every tick, and reports the sampler thread's CPU as
a share of one core.

--changing compares, in one run with the two interleaved round by round,
threads parked at depth 50 against threads whose 50-frame stacks keep
changing: each builds random call chains through 1000 generated functions
(distinct code objects, three call sites each), so consecutive ticks see
different functions and lines and the sampler reads frames the
application just wrote. Both rows are medians over every chunk of every
round.

Prints one `BENCH {json}` line per case.
"""

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time

import pyroscope


def emit(**fields):
    sys.stdout.write("BENCH " + json.dumps(fields) + "\n")
    sys.stdout.flush()


def at_depth(depth, fn):
    """Call fn with `depth` frames of this function under it."""
    if depth <= 0:
        return fn()
    return at_depth(depth - 1, fn)


def measure(seconds, chunks):
    """Counter deltas over `chunks` equal slices of `seconds`."""
    rows = []
    prev, t_prev = pyroscope.stats(), time.perf_counter()
    for _ in range(chunks):
        time.sleep(seconds / chunks)
        cur, t_cur = pyroscope.stats(), time.perf_counter()
        row = {k: cur[k] - prev[k] for k in ("ticks", "missed_ticks", "samples",
                                                "sampler_cpu_ns", "stacks_walked", "frames",
                                                "walk_errors", "idle_skipped", "cache_hits",
                                                "cache_misses", "budget_throttled_ticks")}
        row["wall_ns"] = int((t_cur - t_prev) * 1e9)
        rows.append(row)
        prev, t_prev = cur, t_cur
    return rows


def summarise(rows):
    per_stack = [r["sampler_cpu_ns"] / r["stacks_walked"] / 1000 for r in rows
                 if r["stacks_walked"]]
    per_frame = [r["sampler_cpu_ns"] / r["frames"] for r in rows if r["frames"]]
    core_pct = [100.0 * r["sampler_cpu_ns"] / r["wall_ns"] for r in rows if r["wall_ns"]]
    rate = [1e9 * r["ticks"] / r["wall_ns"] for r in rows if r["wall_ns"]]
    tot = {k: sum(r[k] for r in rows) for k in rows[0]}
    return {
        "us_per_stack": statistics.median(per_stack) if per_stack else None,
        "us_per_stack_chunks": per_stack,
        "ns_per_frame": statistics.median(per_frame) if per_frame else None,
        "frames_per_stack": tot["frames"] / tot["stacks_walked"] if tot["stacks_walked"] else 0,
        "sampler_core_pct": statistics.median(core_pct) if core_pct else None,
        "ticks_per_s": statistics.median(rate) if rate else None,
        "totals": tot,
    }


def run_blocked(depth, nthreads, rate, seconds, chunks, out_dir, oncpu=False, gil_only=False,
                budget=0):
    """nthreads threads (main included) parked at `depth` frames while the
    profiler samples them."""
    release = threading.Event()
    parked = threading.Barrier(nthreads)
    result = {}

    def park():
        parked.wait()
        release.wait()

    def main_at_depth():
        parked.wait()  # every worker is at its depth now
        pyroscope.configure(application_name="bench.sampler", output_dir=out_dir,
                            sample_rate=rate, oncpu=oncpu, gil_only=gil_only,
                            max_depth=max(256, depth + 32), upload_interval=60,
                            sampler_cpu_budget=budget)
        time.sleep(0.3)  # first ticks intern every frame: keep them out
        result["rows"] = measure(seconds, chunks)
        pyroscope.shutdown()

    workers = [threading.Thread(target=at_depth, args=(depth, park), daemon=True)
               for _ in range(nthreads - 1)]
    for t in workers:
        t.start()
    at_depth(depth, main_at_depth)
    release.set()
    for t in workers:
        t.join()
    return result["rows"]


def run_mixed(nthreads, rate, seconds, chunks, out_dir):
    """Default settings; threads alternate ~2 ms of CPU and ~8 ms of sleep."""
    stop = threading.Event()

    def work():
        while not stop.is_set():
            end = time.thread_time() + 0.002
            x = 0
            while time.thread_time() < end:
                for i in range(200):
                    x += i
            time.sleep(0.008)

    threads = [threading.Thread(target=at_depth, args=(30, work), daemon=True)
               for _ in range(nthreads)]
    pyroscope.configure(application_name="bench.sampler", output_dir=out_dir,
                        sample_rate=rate, upload_interval=60, sampler_cpu_budget=0)
    for t in threads:
        t.start()
    time.sleep(0.3)
    rows = measure(seconds, chunks)
    pyroscope.shutdown()
    stop.set()
    for t in threads:
        t.join()
    return rows


CHANGING_FUNCS = 1000


def make_changing_funcs(n=CHANGING_FUNCS):
    """n distinct functions; f(d, k) recurses d levels through randomly
    chosen ones (an LCG in k), at one of three call sites, then spins."""
    src = ["def leaf(k):\n    x = 0\n    for i in range(3000):\n        x += i\n    return x\n"]
    for i in range(n):
        src.append(
            f"def f{i}(d, k):\n"
            f"    if d == 0:\n"
            f"        return leaf(k)\n"
            f"    k = (k * 1103515245 + 12345) & 0x7fffffff\n"
            f"    g = FUNCS[k % {n}]\n"
            f"    if k & 0x100:\n"
            f"        return g(d - 1, k)\n"
            f"    if k & 0x200:\n"
            f"        return g(d - 1, k) + 1\n"
            f"    y = g(d - 1, k)\n"
            f"    return y\n")
    ns = {}
    exec(compile("\n".join(src), "<changing-stacks>", "exec"), ns)
    ns["FUNCS"] = [ns[f"f{i}"] for i in range(n)]
    return ns["FUNCS"]


def run_changing(depth, nthreads, rate, seconds, chunks, out_dir):
    """nthreads threads whose stacks (depth generated frames plus a few of
    their own) change continuously while the profiler samples them all.
    The leaf spins ~100 us, about as long as building the chain, so most
    ticks find a thread at full depth, and never twice at the same stack."""
    funcs = make_changing_funcs()
    stop = threading.Event()
    started = threading.Barrier(nthreads + 1)

    def churn(seed):
        started.wait()
        k = seed
        while not stop.is_set():
            k = (k * 1103515245 + 12345) & 0x7fffffff
            funcs[k % len(funcs)](depth - 1, k)

    threads = [threading.Thread(target=churn, args=(i * 7919 + 1,), daemon=True)
               for i in range(nthreads)]
    for t in threads:
        t.start()
    started.wait()
    pyroscope.configure(application_name="bench.sampler", output_dir=out_dir,
                        sample_rate=rate, oncpu=False, gil_only=False,
                        max_depth=max(256, depth + 32), upload_interval=60,
                        sampler_cpu_budget=0)
    time.sleep(0.3)  # first ticks intern every frame: keep them out
    # The main thread is walked too: parked at the same depth, one stack
    # in nthreads + 1.
    rows = at_depth(depth, lambda: measure(seconds, chunks))
    pyroscope.shutdown()
    stop.set()
    for t in threads:
        t.join()
    return rows


def run_changing_vs_parked(nthreads, rate, seconds, chunks, rounds, out_dir):
    """Parked and changing rows, interleaved round by round."""
    parked, changing = [], []
    for _ in range(rounds):
        parked += run_blocked(50, nthreads + 1, rate, seconds, chunks, out_dir)
        changing += run_changing(50, nthreads, rate, seconds, chunks, out_dir)
    return parked, changing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="10x1")
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--chunks", type=int, default=5)
    ap.add_argument("--production", action="store_true")
    ap.add_argument("--changing", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle", type=int, default=0)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=10)
    ap.add_argument("--out-dir", default="")
    args = ap.parse_args()
    sys.setrecursionlimit(10000)
    if not args.out_dir:
        with tempfile.TemporaryDirectory(prefix="bench-sampler-") as tmp:
            run(args, tmp)
    else:
        run(args, args.out_dir)


def run(args, out_dir):
    if args.changing:
        parked, changing = run_changing_vs_parked(args.threads, args.rate, args.seconds,
                                                  args.chunks, args.rounds, out_dir)
        common = dict(depth=50, rate=args.rate, oncpu=False, gil_only=False,
                      rounds=args.rounds)
        emit(case="parked", threads=args.threads + 1, **common, **summarise(parked))
        emit(case="changing", threads=args.threads + 1, **common, **summarise(changing))
        return
    if args.idle:
        rows = run_blocked(10, args.idle, args.rate, args.seconds, args.chunks, out_dir,
                           budget=args.budget)
        emit(case=f"{args.idle} idle threads, wall mode", threads=args.idle, depth=10,
             rate=args.rate, budget=args.budget, oncpu=False, gil_only=False, **summarise(rows))
        return
    if args.production:
        rows = run_mixed(args.threads, args.rate, args.seconds, args.chunks, out_dir)
        emit(case="default settings, threads mixing CPU and sleep", threads=args.threads,
             depth=30, rate=args.rate, oncpu=True, gil_only=True, **summarise(rows))
        rows = run_blocked(50, args.threads, args.rate, args.seconds, args.chunks, out_dir)
        emit(case="every thread walked every tick (oncpu=False, gil_only=False)",
             threads=args.threads, depth=50, rate=args.rate, oncpu=False, gil_only=False,
             **summarise(rows))
        return
    for case in args.cases.split(","):
        depth, nthreads = (int(x) for x in case.split("x"))
        rows = run_blocked(depth, nthreads, args.rate, args.seconds, args.chunks, out_dir)
        emit(case=case, depth=depth, threads=nthreads, rate=args.rate, oncpu=False,
             gil_only=False, **summarise(rows))


if __name__ == "__main__":
    main()
