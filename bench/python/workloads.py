"""The profiled side of the Python benchmarks: one workload per process.

    python workloads.py WORKLOAD --profiler {none,native,pyroscope-io,py-spy} [options]

run.py starts this script with the interpreter of the virtual environment
that holds the profiler under test (this project's `pyroscope` package, or
pyroscope-io, whose module is also named `pyroscope`; py-spy attaches from
outside, so its runs are plain). The exchange is line based, so that the
measured window never includes interpreter start-up or profiler start:

    child  -> BENCH {"event": "ready", ...}      profiler running, workload not
    parent -> go                                 (py-spy is attached by now)
    child  -> BENCH {"event": "result", ...}     the workload's own measurements
    child  -> BENCH {"event": "final", ...}      after the profiler was shut down

Every workload measures its own time (perf_counter for wall, process_time
for the whole process's CPU, sampler thread included) and, for the accuracy
workload, its own truth per function with time.thread_time().

Stdlib only: it must run unchanged in every benchmark environment.
"""

import argparse
import collections
import json
import os
import random
import sys
import threading
import time


def emit(event, **fields):
    fields["event"] = event
    sys.stdout.write("BENCH " + json.dumps(fields) + "\n")
    sys.stdout.flush()


def smaps_rollup_kib():
    """Pss and private bytes (KiB) of the whole process now: shared library
    pages count once over every process that maps them (PSS) or not at
    all (private)."""
    out = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].rstrip(":") in ("Pss", "Private_Clean",
                                                             "Private_Dirty"):
                out[parts[0].rstrip(":")] = int(parts[1])
    return {"pss_kib": out.get("Pss", 0),
            "private_kib": out.get("Private_Clean", 0) + out.get("Private_Dirty", 0)}


def proc_status_kib(key):
    """A `VmXxx:` line of /proc/self/status in KiB (VmHWM is the peak RSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


# ------------------------------------------------------------ profilers

class Profiler:
    """Starts and stops the in-process profiler named on the command line."""

    def __init__(self, args):
        self.kind = args.profiler
        self.args = args
        self.mod = None

    def start(self):
        if self.kind not in ("native", "pyroscope-io"):
            return
        import pyroscope  # this project's package or pyroscope-io, per venv
        self.mod = pyroscope
        kw = dict(application_name=self.args.app, sample_rate=self.args.rate)
        if self.args.upload_interval:
            # pyroscope-io takes whole seconds only.
            ui = self.args.upload_interval
            kw["upload_interval"] = int(ui) if float(ui).is_integer() else ui
        if self.kind == "native":
            # Only this project knows output_dir; the server is optional then.
            if self.args.output_dir:
                kw["output_dir"] = self.args.output_dir
            if self.args.server:
                kw["server_address"] = self.args.server
        else:
            kw["server_address"] = self.args.server
        pyroscope.configure(**kw)

    def stats(self):
        if self.kind == "native":
            return self.mod.stats()
        return None

    def stop(self):
        if self.mod is not None:
            self.mod.shutdown()


# ------------------------------------------------------------- building blocks

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def dict_string_work(n):
    """Dict and string churn, as request handlers do (formatting, parsing)."""
    d = {}
    for i in range(n):
        key = "user:%d:%s" % (i, "abcdefgh"[i % 8])
        d[key] = key.upper().replace(":", "/") + str(i * 7)
    parts = sorted(d.values())
    text = ",".join(parts)
    return len(text.split("/")) + len(d)


def descend(depth, fn, arg):
    """A deep stack: `depth` frames of this function, then fn(arg)."""
    if depth <= 0:
        return fn(arg)
    return descend(depth - 1, fn, arg) + 1


def descend_other(depth, fn, arg):
    """A second recursive shape, so stacks differ in more than depth."""
    if depth <= 0:
        return fn(arg)
    if depth % 3 == 0:
        return descend(depth - 1, fn, arg)
    return descend_other(depth - 1, fn, arg) + 1


# ------------------------------------------------------- 1. overhead: CPU

def cpu_step(i):
    total = fib(18)
    total += descend(40 + i % 60, dict_string_work, 400)
    total += descend_other(20 + i % 30, dict_string_work, 200)
    total += len(json.dumps({"k%d" % j: [j, str(j)] for j in range(40)}))
    return total


def task_cpu_ns():
    """{tid: ns on the CPU} for every thread of this process (schedstat is
    exact, unlike the 10 ms ticks of /proc/.../stat)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # the thread ended meanwhile
    return out


def profiler_threads_cpu_s(before, after, app_tids):
    """CPU the threads that are not the workload's used between two
    task_cpu_ns() snapshots: the in-process profiler's own cost."""
    ns = sum(v - before.get(tid, 0) for tid, v in after.items() if tid not in app_tids)
    return ns / 1e9


def workload_cpu(args, prof):
    """Fixed work, single-threaded and CPU-bound: wall time for it is the cost."""
    prof_ready(prof)
    wait_for_go()
    app = {threading.get_native_id()}
    t0 = task_cpu_ns()
    w0, c0 = time.perf_counter(), time.process_time()
    acc = 0
    for i in range(args.iters):
        acc += cpu_step(i)
    w1, c1 = time.perf_counter(), time.process_time()
    prof_cpu = profiler_threads_cpu_s(t0, task_cpu_ns(), app)
    emit("result", wall_s=w1 - w0, cpu_s=c1 - c0, profiler_cpu_s=prof_cpu, checksum=acc,
         stats=prof.stats())


# -------------------------------------------------- 1. overhead: threads

def threaded_worker(tid, iters, out):
    acc = 0
    for i in range(iters):
        # ~1 ms of CPU at a varying depth, then ~2 ms off CPU.
        acc += descend(10 + (i + tid) % 30, dict_string_work, 1500)
        time.sleep(0.002)
    out[tid] = acc


def workload_threaded(args, prof):
    """8 threads mixing CPU and sleeps; wall time until all are done."""
    prof_ready(prof)
    wait_for_go()
    out = [0] * args.threads
    threads = [threading.Thread(target=threaded_worker, args=(t, args.iters, out),
                                name=f"worker-{t}") for t in range(args.threads)]
    app = {threading.get_native_id()}
    t0 = task_cpu_ns()
    w0, c0 = time.perf_counter(), time.process_time()
    for t in threads:
        t.start()
    app.update(t.native_id for t in threads)
    for t in threads:
        t.join()
    w1, c1 = time.perf_counter(), time.process_time()
    # The workers are gone by now, so only the profiler's threads remain.
    prof_cpu = profiler_threads_cpu_s(t0, task_cpu_ns(), app)
    emit("result", wall_s=w1 - w0, cpu_s=c1 - c0, profiler_cpu_s=prof_cpu,
         checksum=sum(out), stats=prof.stats())


# -------------------------------------------------------- 4. memory

def make_chain(step, rng):
    """New functions (new code objects, names and file names) calling each
    other; the last one burns CPU. Every call of the result is a stack no
    profiler has seen before."""
    k = rng.randint(3, 8)
    names = [f"gen_{step}_{j}_{rng.randrange(1 << 20):x}" for j in range(k)]
    src = []
    for j, name in enumerate(names):
        if j + 1 < k:
            src.append(f"def {name}(budget):\n    return {names[j + 1]}(budget) + {j}\n")
        else:
            src.append(f"def {name}(budget):\n    x = 0\n    for i in range(budget):\n"
                       f"        x += i * {step % 97 + 1}\n    return x\n")
    ns = {}
    exec(compile("".join(src), f"/generated/pkg_{step % 50}/mod_{step}.py", "exec"), ns)
    return ns[names[0]]


def workload_memory(args, prof):
    """CPU-bound for `seconds`, always in stacks made of brand-new functions;
    peak RSS (VmHWM) is read at the end, before and after shutdown."""
    hwm_start = proc_status_kib("VmHWM")
    prof_ready(prof)
    wait_for_go()
    rng = random.Random(1234)
    # Keep a few recent functions only: the application itself stays flat,
    # so what grows is what the profiler keeps.
    recent = collections.deque(maxlen=64)
    end = time.perf_counter() + args.seconds
    steps = 0
    while time.perf_counter() < end:
        fn = make_chain(steps, rng)
        recent.append(fn)
        shape = descend if steps % 2 else descend_other
        shape(rng.randint(0, 40), fn, 30000)
        steps += 1
    hwm_run = proc_status_kib("VmHWM")
    emit("result", steps=steps, hwm_start_kib=hwm_start, hwm_run_kib=hwm_run,
         rss_end_kib=proc_status_kib("VmRSS"), stats=prof.stats(), **smaps_rollup_kib())


# ------------------------------------------------------- 5. accuracy

# Three functions with a known CPU split, one off-CPU phase: each is the
# leaf of its samples (spin is inlined so the leaf is the phase itself).
def phase_a(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(300):
            x += i * i
    return x


def phase_b(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(300):
            x += i * i
    return x


def phase_c(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(300):
            x += i * i
    return x


def off_cpu_phase(seconds):
    time.sleep(seconds)


def idle_thread_wait(ev):
    ev.wait()


ACCURACY_SPLIT = {"phase_a": 0.005, "phase_b": 0.003, "phase_c": 0.002}  # CPU s per round
ACCURACY_SLEEP = 0.004


def measured_run(cpu_seconds, seed):
    """Rounds of phase_a/b/c (50/30/20 of the CPU) and an off-CPU phase, in
    a random order with jittered lengths so that a periodic sampler cannot
    alias with the rounds. Returns this thread's CPU per phase, measured."""
    rng = random.Random(seed)
    fns = {"phase_a": phase_a, "phase_b": phase_b, "phase_c": phase_c,
           "off_cpu_phase": off_cpu_phase}
    truth = dict.fromkeys(fns, 0.0)
    t_start = time.thread_time()
    spent = 0.0
    while spent < cpu_seconds:
        order = list(fns)
        rng.shuffle(order)
        for name in order:
            jitter = rng.uniform(0.6, 1.4)
            arg = ACCURACY_SPLIT.get(name, ACCURACY_SLEEP) * jitter
            t0 = time.thread_time()
            fns[name](arg)
            truth[name] += time.thread_time() - t0
        spent = time.thread_time() - t_start
    truth["total"] = time.thread_time() - t_start
    return truth


def workload_accuracy(args, prof):
    # A thread that is off CPU the whole time: it must not show up either.
    ev = threading.Event()
    idle = threading.Thread(target=idle_thread_wait, args=(ev,), name="idle")
    idle.start()
    prof_ready(prof)
    wait_for_go()
    w0 = time.perf_counter()
    truth = measured_run(args.seconds, args.seed)
    w1 = time.perf_counter()
    ev.set()
    idle.join()
    emit("result", wall_s=w1 - w0, truth=truth, stats=prof.stats())


# ----------------------------------------------------------------- driver

def prof_ready(prof):
    prof.start()
    time.sleep(0.2)  # let the profiler's threads settle before the window
    emit("ready", pid=os.getpid())


def wait_for_go():
    line = sys.stdin.readline()
    if line.strip() != "go":
        sys.exit("workloads: expected 'go' on stdin, got %r" % line)


# ---------------------------------------------------------- 6. label churn

def churn_thread(prof, end, out):
    """tag_wrapper with a unique request id per pass, as a service labels
    requests; each enter+exit timed on its own (uuid4 outside the timing)."""
    import contextlib
    import uuid
    wrap = prof.mod.tag_wrapper if prof.mod is not None else (lambda tags: contextlib.nullcontext())
    times = []
    n = 0
    clock = time.perf_counter_ns
    while clock() < end:
        tags = {"request_id": uuid.uuid4().hex}
        t0 = clock()
        with wrap(tags):
            t1 = clock()
        t2 = clock()
        times.append((t1 - t0) + (t2 - t1))
        n += 1
    out.append((n, times))


def workload_churn(args, prof):
    """Unique label sets from two threads for `seconds`: sets per second,
    the slowest tag_wrapper enter+exit, and peak RSS (VmHWM) added. The
    no-profiler variant runs the same loop around a null context, so its
    slowest pass is what the GIL and the scheduler alone cost."""
    hwm_start = proc_status_kib("VmHWM")
    prof_ready(prof)
    wait_for_go()
    end = time.perf_counter_ns() + int(args.seconds * 1e9)
    out = []
    threads = [threading.Thread(target=churn_thread, args=(prof, end, out)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times = sorted(x for _, ts in out for x in ts)
    n = sum(k for k, _ in out)
    emit("result", sets=n, sets_per_s=n / args.seconds, max_ms=times[-1] / 1e6,
         p9999_ms=times[min(len(times) - 1, int(len(times) * 0.9999))] / 1e6,
         over_1ms=sum(1 for x in times if x > 1_000_000), hwm_start_kib=hwm_start,
         hwm_run_kib=proc_status_kib("VmHWM"), stats=prof.stats())


WORKLOADS = {"cpu": workload_cpu, "threaded": workload_threaded, "memory": workload_memory,
             "accuracy": workload_accuracy, "churn": workload_churn}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--profiler", default="none",
                    choices=["none", "native", "pyroscope-io", "py-spy"])
    ap.add_argument("--app", default="bench.python")
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--server", default="")
    ap.add_argument("--output-dir", default="")
    ap.add_argument("--upload-interval", type=float, default=0)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    prof = Profiler(args)
    WORKLOADS[args.workload](args, prof)
    prof.stop()
    emit("final", stats=prof.stats(), hwm_kib=proc_status_kib("VmHWM"))


if __name__ == "__main__":
    main()
