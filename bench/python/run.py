"""Python-side benchmarks of pyroscope-native, against pyroscope-io and py-spy.

    python3 bench/python/run.py [--quick] [--only overhead,sampler,encode,memory,accuracy]

`make bench` runs it after build/bench_core (whose output it reads for the
encode section). Every comparison runs in this one invocation with its
variants interleaved (A B C D A B C D ...), and reports medians and ratios
of the pairs, never a single time. The sections:

  1. overhead   fixed work (CPU-bound; 8 threads mixing CPU and sleeps) with
                no profiler, this project, pyroscope-io and py-spy, 100 Hz
  2. sampler    sampler CPU per stack walked (depth x threads), the
                sampler thread's share of a core with 10 threads at 100 Hz,
                and 50-frame stacks that keep changing next to parked ones
  3. encode     pprof encode + gzip of 1k/10k/50k unique stacks (bench_core)
  4. memory     peak RSS added over a run that keeps creating new stacks
  5. accuracy   CPU attribution error against the workload's own truth
  7. alloc      the memory profile's cost on allocation-heavy code, beside
                Datadog's memory profiler (ddtrace) and tracemalloc
                (alloc_cost.py)
  8. runtimes   this project on several interpreters side by side (--runtimes:
                3.13 beside 3.14, the free-threaded build beside the GIL
                build): sampler cost per stack and the CPU-bound workload's
                overhead, rounds interleaved across the interpreters

Peers come from PyPI, each into its own virtual environment under
build/bench/ (pyroscope-io's module is also named `pyroscope`). pyroscope-io
uploads to a loopback HTTP server run here, which also keeps its profiles
for the accuracy section.

Writes the text report to stdout and build/bench/python-report.txt, and
every number to build/bench/python-results.json. Uses only the standard
library.
"""

import argparse
import email.parser
import gzip
import http.server
import importlib.util
import itertools
import json
import os
import platform
import queue
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORKLOADS = os.path.join(HERE, "workloads.py")
SAMPLER_COST = os.path.join(HERE, "sampler_cost.py")
PPROF_READER = os.path.join(ROOT, "bindings", "python", "tests", "package", "pprof_reader.py")

PYROSCOPE_IO_VERSION = "1.4.0"
PY_SPY_VERSION = "0.4.3"
DDTRACE_VERSION = "4.16.0"  # Datadog's profiler: its memory collector in section 7
SETUPTOOLS_VERSION = "75.6.0"  # as the test venvs: has bdist_wheel built in
SECTIONS = ("overhead", "sampler", "encode", "memory", "accuracy", "churn", "alloc",
            "runtimes")
RATE = 100  # Hz, every comparison
# Overhead rounds that spread wider than this (max - min of the per-round
# ratios, in points) get no yes/no verdict: the machine was too busy.
NOISY_SPREAD_PTS = 5.0


def load_pprof_reader():
    spec = importlib.util.spec_from_file_location("pprof_reader", PPROF_READER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


pprof_reader = load_pprof_reader()


def log(msg):
    """Progress lines go to stderr, so stdout stays the report."""
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def clean_env():
    """The children see none of the caller's profiler settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYROSCOPE_") and k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONUNBUFFERED"] = "1"
    # One string-hash seed for every run: with random seeds, dict and set
    # layouts (and so the workload's speed) differ from process to process
    # by more than the overhead being measured.
    env["PYTHONHASHSEED"] = "0"
    return env


# ------------------------------------------------------------- environments

class Envs:
    """The three virtual environments, created when missing."""

    def __init__(self, build_dir, python, reinstall_native=True):
        self.dir = os.path.join(build_dir, "bench")
        self.python = python
        self.reinstall_native = reinstall_native
        self.native = os.path.join(self.dir, "venv-native", "bin", "python")
        self.pio = os.path.join(self.dir, "venv-pyroscope-io", "bin", "python")
        self.pyspy_python = os.path.join(self.dir, "venv-pyspy", "bin", "python")
        self.pyspy = os.path.join(self.dir, "venv-pyspy", "bin", "py-spy")
        self.ddtrace = os.path.join(self.dir, "venv-ddtrace", "bin", "python")
        self.ddtrace_missing = None  # why there is no ddtrace, when there is none
        self.versions = {"python": sys.version.split()[0]}

    def _venv(self, name):
        path = os.path.join(self.dir, name)
        py = os.path.join(path, "bin", "python")
        want = "%d.%d" % sys.version_info[:2]
        if os.path.exists(py):
            r = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True)
            if r.stdout.strip() != want:
                log(f"{path} is not Python {want}: recreating it")
                shutil.rmtree(path)
        if not os.path.exists(py):
            log(f"creating {path}")
            subprocess.run([self.python, "-m", "venv", path], check=True)
        return py

    @staticmethod
    def _pip(py, *args):
        subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        *args], check=True, cwd=ROOT)

    @staticmethod
    def _dist_version(py, dist):
        r = subprocess.run([py, "-c", "import importlib.metadata as m, sys; "
                            f"print(m.version({dist!r}))"], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    def setup(self):
        os.makedirs(self.dir, exist_ok=True)
        py = self._venv("venv-native")
        if self._dist_version(py, "setuptools") != SETUPTOOLS_VERSION:
            self._pip(py, f"setuptools=={SETUPTOOLS_VERSION}")
        if self.reinstall_native or self._dist_version(py, "pyroscope-native") is None:
            log("installing this project into venv-native")
            self._pip(py, "--no-build-isolation", "--no-deps", ".")
        py = self._venv("venv-pyroscope-io")
        if self._dist_version(py, "pyroscope-io") != PYROSCOPE_IO_VERSION:
            log(f"installing pyroscope-io=={PYROSCOPE_IO_VERSION}")
            self._pip(py, f"pyroscope-io=={PYROSCOPE_IO_VERSION}")
        py = self._venv("venv-pyspy")
        if self._dist_version(py, "py-spy") != PY_SPY_VERSION:
            log(f"installing py-spy=={PY_SPY_VERSION}")
            self._pip(py, f"py-spy=={PY_SPY_VERSION}")
        # ddtrace has no wheel for every CPython: its absence is a line in
        # the report, not a failed run.
        py = self._venv("venv-ddtrace")
        if self._dist_version(py, "ddtrace") != DDTRACE_VERSION:
            log(f"installing ddtrace=={DDTRACE_VERSION}")
            try:
                self._pip(py, "--only-binary", "ddtrace", f"ddtrace=={DDTRACE_VERSION}")
            except subprocess.CalledProcessError as e:
                self.ddtrace_missing = (f"ddtrace=={DDTRACE_VERSION} did not install on Python "
                                        f"{sys.version.split()[0]} (pip exit {e.returncode})")
                log(self.ddtrace_missing)
        self.versions["ddtrace"] = self._dist_version(py, "ddtrace")
        for key, py, dist in (("pyroscope-native", self.native, "pyroscope-native"),
                              ("pyroscope-io", self.pio, "pyroscope-io"),
                              ("py-spy", self.pyspy_python, "py-spy")):
            self.versions[key] = self._dist_version(py, dist)
        r = subprocess.run([self.native, "-c", "import sys; print(sys.version.split()[0])"],
                           capture_output=True, text=True, check=True)
        self.versions["python"] = r.stdout.strip()

    def python_for(self, profiler):
        return self.pio if profiler == "pyroscope-io" else self.native


# ------------------------------------------------------- loopback ingest

class IngestServer:
    """Answers every POST with 200, as a Pyroscope server would: our
    /ingest (multipart pprof) and pyroscope-io's Connect push
    (/push.v1.PusherService/Push, gzip'ed protobuf). Bodies are kept only
    while `keep` is set; decoding happens later, outside measured windows."""

    def __init__(self):
        outer = self
        self.lock = threading.Lock()
        self.keep = False
        self.kept = []           # (path, headers dict, body)
        self.requests = {}       # path -> count
        self.bytes = {}          # path -> bytes received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                path = urllib.parse.urlsplit(self.path).path
                with outer.lock:
                    outer.requests[path] = outer.requests.get(path, 0) + 1
                    outer.bytes[path] = outer.bytes.get(path, 0) + len(body)
                    if outer.keep:
                        outer.kept.append((self.path, dict(self.headers.items()), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def take(self):
        with self.lock:
            kept, self.kept = self.kept, []
        return kept

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _pb_fields(buf):
    return pprof_reader._fields(buf)


def decode_upload(path, headers, body):
    """(application name, [decoded pprof]) of one captured request."""
    lower = {k.lower(): v for k, v in headers.items()}
    if lower.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    url = urllib.parse.urlsplit(path)
    if url.path.endswith("/Push"):
        # PushRequest{1: series{1: labels{1: name, 2: value}, 2: samples{1: raw_profile}}}
        app, profiles = None, []
        for num, _, series in _pb_fields(body):
            if num != 1:
                continue
            for n2, _, v2 in _pb_fields(series):
                if n2 == 1:
                    kv = {k: bytes(v).decode() for k, _, v in _pb_fields(v2)}
                    if kv.get(1) == "service_name":
                        app = kv.get(2)
                elif n2 == 2:
                    for n3, _, raw in _pb_fields(v2):
                        if n3 == 1:
                            profiles.append(pprof_reader.decode(bytes(raw)))
        return app, profiles
    # Our /ingest: name=app{labels} and a multipart body with the pprof.
    q = urllib.parse.parse_qs(url.query)
    app = q.get("name", [""])[0].split("{")[0]
    ctype = lower.get("content-type", "")
    if ctype.startswith("multipart/"):
        msg = email.parser.BytesParser().parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
        return app, [pprof_reader.decode(part.get_payload(decode=True))
                     for part in msg.get_payload() if part.get_filename()]
    return app, [pprof_reader.decode(body)]


def profiles_for(kept, app):
    out = []
    for path, headers, body in kept:
        name, profiles = decode_upload(path, headers, body)
        if name == app:
            out.extend(profiles)
    return out


def pprof_cpu_samples(profiles):
    """[(stack root-first as function names, value in sampling periods)]."""
    out = []
    for p in profiles:
        idx = 0
        for i, (typ, _unit) in enumerate(p["sample_types"]):
            if typ in ("cpu", "samples"):
                idx = i
                break
        unit = p["period"] if p["sample_types"][idx][1] == "nanoseconds" and p["period"] else 1
        for s in p["samples"]:
            out.append(([f[0] for f in reversed(s["stack"])], s["values"][idx] / unit))
    return out


def pyspy_raw_samples(path):
    """py-spy's raw (collapsed) output: `root;...;leaf count`, each frame
    `function (file:line)`."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count = line.rpartition(" ")
            frames = [fr.split(" (", 1)[0] for fr in stack.split(";")]
            out.append((frames, int(count)))
    return out


# ---------------------------------------------------------- one workload

def proc_cpu_s(pid):
    """utime + stime of a process, from /proc (for py-spy, outside ours)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Child:
    """A workload process speaking the BENCH line protocol of workloads.py."""

    def __init__(self, python, args, timeout, prefix=()):
        self.timeout = timeout
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.cmd = [*prefix, python, WORKLOADS, *args]
        self.p = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.stderr, text=True, env=clean_env(), cwd=HERE)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            if line.startswith("BENCH "):
                self.lines.put(json.loads(line[6:]))
        self.lines.put(None)

    def event(self, name):
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            try:
                ev = self.lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                ev = None
                self.kill()
            if ev is None:
                self.fail(f"no '{name}' event")
            if ev["event"] == name:
                return ev

    def send(self, text):
        self.p.stdin.write(text + "\n")
        self.p.stdin.flush()

    def wait(self):
        try:
            rc = self.p.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.fail("did not exit")
        if rc != 0:
            self.fail(f"exit status {rc}")

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def fail(self, what):
        self.kill()
        self.stderr.seek(0)
        raise RuntimeError(f"{' '.join(self.cmd)}: {what}\n{self.stderr.read()[-4000:]}")


class PySpy:
    """py-spy record attached by pid (no pausing: --nonblocking), raw output."""

    def __init__(self, exe, pid, out_path):
        self.out_path = out_path
        self.p = subprocess.Popen([exe, "record", "--nonblocking", "-r", str(RATE), "-f", "raw",
                                   "-o", out_path, "--pid", str(pid)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # "py-spy> Sampling process 100 times a second..." once it is attached.
        line = self.p.stdout.readline()
        if "Sampling process" not in line:
            self.p.kill()
            raise RuntimeError(f"py-spy did not attach to {pid} (it needs ptrace rights: root, "
                               f"or kernel.yama.ptrace_scope=0): {line}{self.p.stdout.read()}")
        time.sleep(0.2)

    def cpu_s(self):
        return proc_cpu_s(self.p.pid)

    def finish(self):
        """py-spy stops by itself when the target exits, and writes out."""
        try:
            out, _ = self.p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.send_signal(signal.SIGINT)
            out, _ = self.p.communicate(timeout=10)
        if not os.path.exists(self.out_path):
            raise RuntimeError(f"py-spy wrote no {self.out_path}: {out}")
        return out


def run_one(envs, workload, profiler, wargs, server, app, tmp, timeout, pyspy_out=None):
    """Runs one workload process with one profiler; returns its result and
    final events, plus py-spy's CPU over the window when it is attached."""
    args = [workload, "--profiler", profiler, "--app", app, "--rate", str(RATE), *wargs]
    if profiler in ("native", "pyroscope-io"):
        args += ["--server", server.url]
    child = Child(envs.python_for(profiler), args, timeout)
    spy = None
    try:
        child.event("ready")
        if profiler == "py-spy":
            spy = PySpy(envs.pyspy, child.p.pid,
                        pyspy_out or os.path.join(tmp, f"{app}.pyspy.txt"))
        spy_cpu0 = spy.cpu_s() if spy else None
        child.send("go")
        result = child.event("result")
        spy_cpu1 = spy.cpu_s() if spy else None
        final = child.event("final")
        child.wait()
    finally:
        child.kill()
    if spy:
        spy.finish()
        result["external_cpu_s"] = (spy_cpu1 - spy_cpu0) if None not in (spy_cpu0, spy_cpu1) \
            else None
        result["pyspy_out"] = spy.out_path
    return result, final


# ------------------------------------------------------------ 1. overhead

VARIANTS = ("none", "native", "pyroscope-io", "py-spy")
LABEL = {"none": "no profiler", "native": "pyroscope-native", "pyroscope-io": "pyroscope-io",
         "py-spy": "py-spy --nonblocking"}


def section_overhead(envs, server, tmp, quick, rounds):
    sizes = {"cpu": ["--iters", "700" if quick else "2600"],
             "threaded": ["--iters", "70" if quick else "250", "--threads", "8"]}
    out = {"rounds": rounds, "rate_hz": RATE, "workloads": {}}
    for wl, wargs in sizes.items():
        runs = {v: [] for v in VARIANTS}
        server.keep = True
        for r in range(rounds):
            for v in VARIANTS:
                app = f"bench.overhead.{wl}.{v}.r{r}"
                res, final = run_one(envs, wl, v, wargs, server, app, tmp, timeout=300)
                res["app"] = app
                res["final_stats"] = final.get("stats")
                runs[v].append(res)
                log(f"overhead {wl} round {r + 1}/{rounds} {v}: {res['wall_s']:.3f} s")
        server.keep = False
        kept = server.take()
        # Samples each profiler took (a check that it really ran).
        for v in VARIANTS:
            for res in runs[v]:
                if v == "native":
                    res["samples"] = (res["final_stats"] or {}).get("samples")
                elif v == "pyroscope-io":
                    res["samples"] = round(sum(x for _, x in pprof_cpu_samples(
                        profiles_for(kept, res["app"]))))
                elif v == "py-spy":
                    res["samples"] = sum(c for _, c in pyspy_raw_samples(res["pyspy_out"]))
                else:
                    res["samples"] = 0
        out["workloads"][wl] = summarise_pairs(runs, wargs)
    return out


def summarise_pairs(runs, wargs):
    base = runs["none"]
    summary = {"args": wargs, "variants": {}}
    for v in VARIANTS:
        walls = [r["wall_s"] for r in runs[v]]
        cpus = [r["cpu_s"] + (r.get("external_cpu_s") or 0) for r in runs[v]]
        wall_ratios = [r["wall_s"] / b["wall_s"] for r, b in zip(runs[v], base)]
        cpu_ratios = [(r["cpu_s"] + (r.get("external_cpu_s") or 0)) / b["cpu_s"]
                      for r, b in zip(runs[v], base)]
        summary["variants"][v] = {
            "wall_s": walls, "cpu_s": cpus,
            "external_cpu_s": [r.get("external_cpu_s") for r in runs[v]],
            "samples": [r.get("samples") for r in runs[v]],
            "wall_ratio_per_pair": wall_ratios, "cpu_ratio_per_pair": cpu_ratios,
            "median_wall_s": median(walls), "median_cpu_s": median(cpus),
            "median_wall_ratio": median(wall_ratios), "median_cpu_ratio": median(cpu_ratios),
            "overhead_pct": (median(wall_ratios) - 1) * 100,
            "cpu_overhead_pct": (median(cpu_ratios) - 1) * 100,
            # The profiler's own CPU: its threads in the process (measured by
            # the workload from schedstat) plus py-spy's process, as a share
            # of the same round's unprofiled CPU. Free of the workload's own
            # run-to-run noise, which the ratios above carry.
            "profiler_cpu_pct_per_pair": (own := [
                ((r.get("profiler_cpu_s") or 0) + (r.get("external_cpu_s") or 0))
                / b["cpu_s"] * 100 for r, b in zip(runs[v], base)]),
            "profiler_cpu_pct": median(own),
        }
    return summary


# ------------------------------------------------------------ 8. runtimes

class Runtime:
    """One interpreter of the runtimes section: NAME=PYTHON, or
    NAME=CHROOT:PYTHON for one inside a chroot made by
    tests/runtimes/sid_chroot.sh (run through in_chroot.sh, this checkout
    bind-mounted at its own path). Its venv lives under BUILD/bench, inside
    the checkout, so the chroot sees it too."""

    def __init__(self, spec, build_dir):
        self.name, _, where = spec.partition("=")
        chroot, _, python = where.rpartition(":")
        self.base_python = python
        # The chroot's /tmp is private: every path it is given is under ROOT.
        self.prefix = ([os.path.join(ROOT, "tests", "runtimes", "in_chroot.sh"), chroot, ROOT]
                       if chroot else [])
        self.venv = os.path.join(build_dir, "bench", f"venv-rt-{self.name}")
        self.python = os.path.join(self.venv, "bin", "python")
        self.version = None

    def cmd(self, *args):
        """A command line that runs in this runtime's world, with the
        environment clean_env() gives a host child."""
        if not self.prefix:
            return list(args)
        env = clean_env()
        keep = [f"{k}={env[k]}" for k in ("PYTHONUNBUFFERED", "PYTHONHASHSEED")]
        return [*self.prefix, "env", *keep, *args]

    def setup(self):
        def run(*args):
            subprocess.run(self.cmd(*args), check=True, cwd=ROOT)
        if not os.path.exists(self.python):
            log(f"creating {self.venv}")
            run(self.base_python, "-m", "venv", self.venv)
        run(self.python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
            f"setuptools=={SETUPTOOLS_VERSION}")
        log(f"installing this project for {self.name}")
        # The same lock as the test lanes: setuptools' build/ is shared.
        run("flock", os.path.join(os.path.dirname(os.path.dirname(self.venv)), ".pip-install.lock"),
            self.python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
            "--no-build-isolation", "--no-deps", "--force-reinstall", ".")
        r = subprocess.run(self.cmd(self.python, "-c",
                                    "import sys, sysconfig; print(sys.version.split()[0] + "
                                    "('t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))"),
                           capture_output=True, text=True, check=True, cwd=ROOT)
        self.version = r.stdout.strip().splitlines()[-1]


def section_runtimes(specs, build_dir, quick, rounds):
    """Per round, every runtime in turn: the workload without and with this
    profiler (ratio of the pair), then the sampler's cost per stack. The
    order rotates, so no runtime always runs first in a round."""
    rts = [Runtime(spec, build_dir) for spec in specs]
    for rt in rts:
        rt.setup()
    out_dir = os.path.join(build_dir, "bench", "runtimes-out")
    shutil.rmtree(out_dir, ignore_errors=True)
    wargs = ["--iters", "700" if quick else "2600"]
    secs, chunks = ("0.5", "2") if quick else ("2", "3")
    runs = {rt.name: {"none": [], "native": [], "sampler": []} for rt in rts}
    for r in range(rounds):
        for rt in rts[r % len(rts):] + rts[:r % len(rts)]:
            for v in ("none", "native"):
                args = ["cpu", "--profiler", v, "--app", f"bench.rt.{rt.name}.{v}.r{r}",
                        "--rate", str(RATE), *wargs]
                if v == "native":
                    args += ["--output-dir", os.path.join(out_dir, f"{rt.name}.r{r}")]
                child = Child(rt.python, args, timeout=300, prefix=rt.cmd())
                try:
                    child.event("ready")
                    child.send("go")
                    res = child.event("result")
                    res["final_stats"] = child.event("final").get("stats")
                    child.wait()
                finally:
                    child.kill()
                runs[rt.name][v].append(res)
            runs[rt.name]["sampler"] += run_sampler_cost(
                rt.cmd(rt.python), ["--cases", "50x10", "--rate", "1000", "--seconds", secs,
                                    "--chunks", chunks,
                                    "--out-dir", os.path.join(out_dir, "sampler")], timeout=300)
            log(f"runtimes round {r + 1}/{rounds} {rt.name}: none "
                f"{runs[rt.name]['none'][-1]['cpu_s']:.3f} s, native "
                f"{runs[rt.name]['native'][-1]['cpu_s']:.3f} s CPU, sampler "
                f"{runs[rt.name]['sampler'][-1]['us_per_stack']:.2f} us/stack")
    shutil.rmtree(out_dir, ignore_errors=True)
    rows = {}
    for rt in rts:
        d = runs[rt.name]
        pairs = list(zip(d["native"], d["none"]))
        ratios = [a["cpu_s"] / b["cpu_s"] for a, b in pairs]
        rows[rt.name] = {
            "python": rt.version, "rounds": rounds, "args": wargs,
            "cpu_ratio_per_pair": ratios, "median_cpu_ratio": median(ratios),
            "profiler_cpu_pct": median([(a.get("profiler_cpu_s") or 0) / b["cpu_s"] * 100
                                        for a, b in pairs]),
            "samples": median([(a["final_stats"] or {}).get("samples") for a, _ in pairs]),
            "us_per_stack": median([c["us_per_stack"] for c in d["sampler"]]),
            "ns_per_frame": median([c["ns_per_frame"] for c in d["sampler"]]),
            "walk_errors": sum(c["totals"]["walk_errors"] for c in d["sampler"]),
        }
    return {"rate_hz": RATE, "sampler_rate_hz": 1000, "runtimes": rows}


# ------------------------------------------------------------- 2. sampler

def run_sampler_cost(python_cmd, args, timeout):
    """sampler_cost.py under python_cmd (a list: the interpreter, and for a
    chroot the command that enters it); its BENCH lines."""
    r = subprocess.run([*python_cmd, SAMPLER_COST, *args], capture_output=True, text=True,
                       env=clean_env(), cwd=HERE, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"sampler_cost.py {' '.join(args)}: exit {r.returncode}\n"
                           f"{r.stderr[-4000:]}")
    return [json.loads(line[6:]) for line in r.stdout.splitlines() if line.startswith("BENCH ")]


def section_sampler(envs, tmp, quick):
    cases = ",".join(f"{d}x{t}" for d in (10, 50, 200) for t in (1, 10, 50))
    secs, chunks = ("0.5", "3") if quick else ("2", "5")
    out_dir = os.path.join(tmp, "sampler")
    grid = run_sampler_cost([envs.native], ["--cases", cases, "--rate", "1000", "--seconds", secs,
                                   "--chunks", chunks, "--out-dir", out_dir], timeout=300)
    log("sampler grid done")
    prod = run_sampler_cost([envs.native], ["--production", "--threads", "10", "--rate", str(RATE),
                                   "--seconds", "2" if quick else "5", "--chunks", chunks,
                                   "--out-dir", out_dir], timeout=300)
    log("sampler production cases done")
    changing = run_sampler_cost([envs.native], ["--changing", "--threads", "4", "--rate", "1000",
                                       "--seconds", secs, "--chunks", chunks,
                                       "--rounds", "2" if quick else "3",
                                       "--out-dir", out_dir], timeout=600)
    log("sampler changing-stack rows done")
    # 1000 idle threads, wall mode, 1000 Hz: the default budget and none,
    # interleaved round by round. Throttled, a tick comes every ~0.4 s:
    # chunks of 2 s so each holds several.
    idle = {"1": [], "0": []}
    for r in range(1 if quick else 3):
        for budget in idle:
            idle[budget] += run_sampler_cost(
                [envs.native], ["--idle", "1000", "--rate", "1000", "--budget", budget, "--seconds",
                       "2" if quick else "6", "--chunks", "1" if quick else "3",
                       "--out-dir", out_dir], timeout=300)
            log(f"sampler idle round {r + 1} budget {budget} %: "
                f"{idle[budget][-1]['sampler_core_pct']:.2f} % of a core")
    return {"grid_rate_hz": 1000, "grid": grid, "production": prod, "idle": idle, "changing": changing}


# -------------------------------------------------------------- 3. encode

def section_encode(build_dir, core_output):
    """bench_core's (c) table: encode + gzip of one period, split included."""
    if core_output:
        with open(core_output) as f:
            text = f.read()
        source = core_output
    else:
        exe = os.path.join(build_dir, "bench_core")
        text = subprocess.run([exe], capture_output=True, text=True, check=True,
                              timeout=120).stdout
        source = exe
    rows, in_c = [], False
    for line in text.splitlines():
        if line.startswith("(c)"):
            in_c = True
            continue
        if in_c:
            # The last column (the flusher's copy of the period, ms) is optional.
            m = re.match(r"\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)x\s+([\d.]+)\s+([\d.]+)"
                         r"(?:\s+([\d.]+))?\s*$", line)
            if m:
                rows.append({"unique_stacks": int(m[1]), "profiles": int(m[2]),
                             "raw_bytes": int(m[3]), "gzip_bytes": int(m[4]),
                             "ratio": float(m[5]), "ms": float(m[6]),
                             "ns_per_sample": float(m[7]), "depth": 30,
                             "copy_ms": float(m[8]) if m[8] else None})
            elif line.strip() == "" and rows:
                break
    notes = [ln for ln in text.splitlines() if ln.startswith("note:")]
    if not rows:
        raise RuntimeError(f"no (c) pprof table in the output of {source}")
    return {"source": source, "notes": notes, "rows": rows}


# -------------------------------------------------------------- 4. memory

MEM_VARIANTS = ("none", "native", "pyroscope-io")


def section_memory(envs, server, tmp, quick, rounds):
    """The variants of a round run at the same time (the workload is
    CPU-bound for a fixed time, peak RSS does not depend on the pace)."""
    seconds = 12 if quick else 60
    runs = {v: [] for v in MEM_VARIANTS}
    for r in range(rounds):
        children = {}
        try:
            for v in MEM_VARIANTS:
                args = ["memory", "--profiler", v, "--app", f"bench.memory.{v}.r{r}",
                        "--rate", str(RATE), "--seconds", str(seconds)]
                if v != "none":
                    args += ["--server", server.url]
                children[v] = Child(envs.python_for(v), args, timeout=seconds + 120)
            for c in children.values():
                c.event("ready")
            for c in children.values():
                c.send("go")
            for v, c in children.items():
                res = c.event("result")
                final = c.event("final")
                c.wait()
                res["hwm_final_kib"] = final["hwm_kib"]
                res["final_stats"] = final.get("stats")
                runs[v].append(res)
        finally:
            for c in children.values():
                c.kill()
        log(f"memory round {r + 1}/{rounds}: " + ", ".join(
            f"{v} {runs[v][-1]['hwm_final_kib'] / 1024:.1f} MiB" for v in MEM_VARIANTS))
    out = {"seconds": seconds, "rounds": rounds, "rate_hz": RATE, "concurrent_variants": True,
           "variants": {}}
    for v in MEM_VARIANTS:
        added = [(x["hwm_final_kib"] - b["hwm_final_kib"]) / 1024
                 for x, b in zip(runs[v], runs["none"])]
        out["variants"][v] = {
            "hwm_final_mib": [x["hwm_final_kib"] / 1024 for x in runs[v]],
            "hwm_run_mib": [x["hwm_run_kib"] / 1024 for x in runs[v]],
            "steps": [x["steps"] for x in runs[v]],
            "added_mib_per_round": added,
            "median_added_mib": median(added),
            # At the end of the run (not peaks): what the profiler costs
            # when shared library pages are counted once (PSS) or not at
            # all (private), as the issue on libcurl asks memory be judged.
            "median_pss_added_mib": median([(x["pss_kib"] - b["pss_kib"]) / 1024
                                            for x, b in zip(runs[v], runs["none"])]),
            "median_private_added_mib": median([(x["private_kib"] - b["private_kib"]) / 1024
                                                for x, b in zip(runs[v], runs["none"])]),
            "stats": [x.get("final_stats") for x in runs[v]],
        }
    return out


# ------------------------------------------------------------ 6. churn

CHURN_VARIANTS = ("none", "native", "pyroscope-io")


def section_alloc(envs, tmp, quick):
    """alloc_cost.py in the native venv: none / cpu / cpu+memory /
    ddtrace's memory collector (its own venv) / tracemalloc at 1 and 64
    frames, interleaved per round, per-round ratios."""
    out = os.path.join(tmp, "alloc.json")
    dd = (["--ddtrace-missing", envs.ddtrace_missing] if envs.ddtrace_missing
          else ["--ddtrace-python", envs.ddtrace])
    r = subprocess.run([envs.native, os.path.join(HERE, "alloc_cost.py"), "--json", out,
                        "--python", envs.native] + dd + (["--quick"] if quick else []),
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit("alloc_cost.py failed:\n" + r.stderr)
    with open(out) as f:
        res = json.load(f)
    res["text"] = r.stdout.strip()
    return res


def section_churn(envs, server, tmp, quick, rounds):
    """A unique label set per request, from two threads, one variant at a
    time (stalls are timings, so variants must not share the CPU)."""
    seconds = 4 if quick else 12
    runs = {v: [] for v in CHURN_VARIANTS}
    for r in range(rounds):
        for v in CHURN_VARIANTS:
            args = ["churn", "--profiler", v, "--app", f"bench.churn.{v}.r{r}", "--rate",
                    str(RATE), "--seconds", str(seconds), "--upload-interval", "2"]
            if v != "none":
                args += ["--server", server.url]
            c = Child(envs.python_for(v), args, timeout=seconds + 120)
            try:
                c.event("ready")
                c.send("go")
                res = c.event("result")
                res["hwm_final_kib"] = c.event("final")["hwm_kib"]
                c.wait()
            finally:
                c.kill()
            runs[v].append(res)
        log(f"churn round {r + 1}/{rounds}: " + ", ".join(
            f"{v} {runs[v][-1]['sets_per_s']:.0f}/s max {runs[v][-1]['max_ms']:.2f} ms "
            f"hwm {runs[v][-1]['hwm_run_kib'] / 1024:.1f} MiB" for v in CHURN_VARIANTS))
    out = {"seconds": seconds, "rounds": rounds, "variants": {}}
    for v in CHURN_VARIANTS:
        added = [(x["hwm_run_kib"] - b["hwm_run_kib"]) / 1024
                 for x, b in zip(runs[v], runs["none"])]
        out["variants"][v] = {
            "sets_per_s": median([x["sets_per_s"] for x in runs[v]]),
            "max_ms": median([x["max_ms"] for x in runs[v]]),
            "max_ms_per_round": [x["max_ms"] for x in runs[v]],
            "p9999_ms": median([x["p9999_ms"] for x in runs[v]]),
            "over_1ms": median([x["over_1ms"] for x in runs[v]]),
            "median_added_mib": median(added),
            "added_mib_per_round": added,
        }
    return out


# ------------------------------------------------------------ 5. accuracy

ACC_PROFILERS = ("native", "pyroscope-io", "py-spy")
CATEGORIES = ("phase_a", "phase_b", "phase_c", "off_cpu_phase", "idle_thread_wait")


def categorise(samples):
    """Sums per category: the named function nearest the leaf, else `other`
    inside measured_run; samples outside both (start-up, shutdown) are left
    out and counted separately."""
    sums = dict.fromkeys(CATEGORIES + ("other",), 0.0)
    outside = 0.0
    for frames, value in samples:
        cat = next((f for f in reversed(frames) if f in sums), None)
        if cat is None:
            cat = "other" if "measured_run" in frames else None
        if cat is None:
            outside += value
        else:
            sums[cat] += value
    return sums, outside


def shares(sums):
    total = sum(sums.values())
    return {k: (100.0 * v / total if total else None) for k, v in sums.items()}


def truth_sums(truth):
    t = {k: truth.get(k, 0.0) for k in CATEGORIES}
    t["other"] = max(truth["total"] - sum(truth[k] for k in ("phase_a", "phase_b", "phase_c",
                                                            "off_cpu_phase")), 0.0)
    return t


def attribution_error(measured, true):
    if any(measured[k] is None for k in measured):
        return None
    return max(abs(measured[k] - true[k]) for k in true)


def section_accuracy(envs, server, tmp, quick, rounds):
    seconds = 1.5 if quick else 3
    per = {p: [] for p in ACC_PROFILERS}
    for r in range(rounds):
        for p in ACC_PROFILERS:
            app = f"bench.accuracy.{p}.r{r}"
            wargs = ["--seconds", str(seconds), "--seed", str(r + 1)]
            out_dir = os.path.join(tmp, f"acc-{p}-{r}")
            if p == "native":
                # Files instead of uploads: the profiles as written, no server.
                wargs += ["--output-dir", out_dir]
            server.keep = p == "pyroscope-io"
            res, _ = run_one(envs, "accuracy", p, wargs,
                             server if p == "pyroscope-io" else _NoServer, app, tmp,
                             timeout=seconds * 4 + 60)
            server.keep = False
            if p == "native":
                samples = pprof_cpu_samples(pprof_reader.load_dir(out_dir))
            elif p == "pyroscope-io":
                samples = pprof_cpu_samples(profiles_for(server.take(), app))
            else:
                samples = pyspy_raw_samples(res["pyspy_out"])
            sums, outside = categorise(samples)
            true = truth_sums(res["truth"])
            entry = {"round": r, "truth_cpu_s": true, "profile_sums": sums,
                     "outside_window": outside, "true_pct": shares(true),
                     "profile_pct": shares(sums)}
            entry["error_pts"] = attribution_error(entry["profile_pct"], entry["true_pct"])
            per[p].append(entry)
            log(f"accuracy round {r + 1}/{rounds} {p}: error "
                f"{entry['error_pts'] if entry['error_pts'] is None else round(entry['error_pts'], 2)} pts")
    out = {"seconds_cpu": seconds, "rounds": rounds, "rate_hz": RATE, "profilers": {}}
    # A sample is a draw: with n of them a 50 % share is known to about
    # 100 * sqrt(0.25 / n) points (1 sigma), whatever the profiler.
    n = sum(sum(e["truth_cpu_s"].values()) for e in per["native"]) * RATE
    out["sampling_sigma_pts"] = 100 * (0.25 / n) ** 0.5 if n > 0 else None
    out["expected_samples"] = n
    for p in ACC_PROFILERS:
        pooled_sums = {k: sum(e["profile_sums"][k] for e in per[p]) for k in per[p][0]["profile_sums"]}
        pooled_true = {k: sum(e["truth_cpu_s"][k] for e in per[p]) for k in per[p][0]["truth_cpu_s"]}
        pt, ps = shares(pooled_true), shares(pooled_sums)
        out["profilers"][p] = {
            "rounds": per[p],
            "pooled_true_pct": pt, "pooled_profile_pct": ps,
            "pooled_error_pts": attribution_error(ps, pt),
            "median_round_error_pts": median([e["error_pts"] for e in per[p]]),
            "samples_in_window": sum(sum(e["profile_sums"].values()) for e in per[p]),
        }
    return out


class _NoServer:
    url = ""


# -------------------------------------------------------------- report

def fmt(x, spec=".2f", none="n/a"):
    return none if x is None else format(x, spec)


def yes_no(ok):
    if isinstance(ok, str):
        return ok
    return "n/a" if ok is None else ("yes" if ok else "NO")


def table(rows, header, left=(0,)):
    """Columns padded to width; those in `left` are left-aligned."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]

    def line(cells):
        return "  " + "  ".join(str(c).ljust(w) if i in left else str(c).rjust(w)
                                for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(header)] + [line(r) for r in rows])


def evaluate_targets(res):
    """Each target of the issue, with the number it is judged on."""
    t = []

    def add(name, value, limit, ok, note=""):
        t.append({"target": name, "value": value, "limit": limit, "met": ok, "note": note})

    ov = res.get("overhead")
    # Wall time is what the application feels; CPU (the process's, profiler
    # threads included) is what the profiler costs, and steal time and the
    # scheduler move it far less on a shared VM.
    kinds = (("wall", "overhead_pct", "wall_ratio_per_pair"),
             ("CPU", "cpu_overhead_pct", "cpu_ratio_per_pair"))
    workloads = ov["workloads"].items() if ov else ()
    for (wl, s), (kind, pct, per_pair) in itertools.product(workloads, kinds):
        ours = s["variants"]["native"][pct]
        pio = s["variants"]["pyroscope-io"][pct]
        # A verdict on 1 % means nothing when the rounds disagree by much more.
        spreads = {v: (max(rr) - min(rr)) * 100 for v in ("native", "pyroscope-io")
                   for rr in [s["variants"][v][per_pair]]}
        noisy = max(spreads.values()) > NOISY_SPREAD_PTS
        note = (f"rounds spread: ours {spreads['native']:.1f}, pyroscope-io "
                f"{spreads['pyroscope-io']:.1f} points"
                + (f" (over {NOISY_SPREAD_PTS:g}: too noisy to judge, rerun on an idle "
                   "machine)" if noisy else ""))
        add(f"overhead at 100 Hz, {wl} workload ({kind}, % vs no profiler)", ours, "<= 1 %",
            "noisy" if noisy else ours <= 1.0, note)
        add(f"overhead vs pyroscope-io, {wl} workload, {kind} (ours <= half of theirs)", ours,
            f"<= {fmt(pio / 2)} %", "noisy" if noisy else ours <= pio / 2,
            f"pyroscope-io {fmt(pio)} % on the same run")
    for wl, s in workloads:
        ours = s["variants"]["native"].get("profiler_cpu_pct")
        pio = s["variants"]["pyroscope-io"].get("profiler_cpu_pct")
        if ours is None or pio is None:
            continue
        add(f"profiler's own CPU, {wl} workload (% of the workload's CPU)", ours, "<= 1 %",
            ours <= 1.0)
        add(f"profiler's own CPU vs pyroscope-io, {wl} workload (ours <= half)", ours,
            f"<= {fmt(pio / 2)} %", ours <= pio / 2, f"pyroscope-io {fmt(pio)} %")
    sm = res.get("sampler")
    if sm:
        case = next((c for c in sm["grid"] if c["depth"] == 50 and c["threads"] == 10), None)
        if case:
            v = case["us_per_stack"]
            add("sampler CPU per 50-frame stack (10 threads, 1000 Hz)", v, "<= 5 us",
                v is not None and v <= 5.0, f"{fmt(case['frames_per_stack'], '.1f')} frames/stack")
        for c in sm["production"]:
            v = c["sampler_core_pct"]
            add(f"sampler thread, 10 threads at 100 Hz, {c['case']} (% of one core)", v,
                "<= 0.5 %", v is not None and v <= 0.5)
        ch = next((c for c in sm.get("changing", []) if c["case"] == "changing"), None)
        pk = next((c for c in sm.get("changing", []) if c["case"] == "parked"), None)
        if ch:
            v = ch["us_per_stack"]
            add("sampler CPU per 50-frame stack that keeps changing (5 threads, 1000 Hz)", v,
                "<= 10 us", v is not None and v <= 10.0,
                f"{fmt(ch['frames_per_stack'], '.1f')} frames/stack; parked in the same run "
                f"{fmt(pk and pk['us_per_stack'])} us")
        if sm.get("idle"):
            v = median([c["sampler_core_pct"] for c in sm["idle"]["1"]])
            off = median([c["sampler_core_pct"] for c in sm["idle"]["0"]])
            add("sampler thread, 1000 idle threads, wall mode, 1000 Hz, default budget "
                "(% of one core)", v, "<= 1 %", v <= 1.0,
                f"{fmt(off, '.1f')} % with no budget on the same run")
    en = res.get("encode")
    if en:
        row = next((r for r in en["rows"] if r["unique_stacks"] == 10000), None)
        add("encode + gzip of 10k unique stacks, depth 30 (ms)", row and row["ms"], "<= 10 ms",
            None if row is None else row["ms"] <= 10.0,
            "traded for zlib (level 3) by the libcurl/zlib issue; see docs/benchmarks.md")
    me = res.get("memory")
    if me:
        v = me["variants"]["native"]["median_added_mib"]
        pss = me["variants"]["native"].get("median_pss_added_mib")
        add(f"peak RSS added over a {me['seconds']} s run (MiB)", v, "<= 10 MiB",
            v is not None and v <= 10.0,
            f"PSS added at the end {fmt(pss, '+.1f')} MiB (libcurl's pages are shared)")
    ch = res.get("churn")
    if ch:
        ours, base = ch["variants"]["native"], ch["variants"]["none"]
        add("label churn: peak RSS added with a unique label set per request (MiB)",
            ours["median_added_mib"], "<= 16 MiB", ours["median_added_mib"] <= 16.0,
            f"{fmt(ours['sets_per_s'], '.0f')} sets/s over two threads")
        add("label churn: slowest tag_wrapper enter+exit (ms)", ours["max_ms"], "<= 1 ms",
            ours["max_ms"] <= 1.0 or ("within noise" if ours["max_ms"] <= base["max_ms"]
                                      else False),
            f"the same loop with no profiler: {fmt(base['max_ms'])} ms (GIL hand-offs and "
            "scheduling alone)")
    ac = res.get("accuracy")
    if ac:
        pr = ac["profilers"]
        ours = pr["native"]["pooled_error_pts"]
        peers = [pr[p]["pooled_error_pts"] for p in ("pyroscope-io", "py-spy")]
        med = {p: pr[p]["median_round_error_pts"] for p in pr}
        add("attribution error (pooled over rounds, max over functions, points)", ours,
            "<= 2 pts", ours is not None and ours <= 2.0,
            "median of single rounds: " + ", ".join(f"{LABEL[p]} {fmt(med[p])}" for p in pr))
        best_peer = min((x for x in peers if x is not None), default=None)
        sigma = ac.get("sampling_sigma_pts")
        verdict = None
        if best_peer is not None and ours is not None:
            verdict = True if ours <= best_peer else (
                "within noise" if sigma is not None and ours <= best_peer + sigma else False)
        add("attribution error no worse than either peer", ours,
            f"<= {fmt(best_peer)} pts", verdict,
            f"pyroscope-io {fmt(peers[0])}, py-spy {fmt(peers[1])}; sampling noise "
            f"{fmt(sigma)} pts (1 sigma, {fmt(ac.get('expected_samples'), '.0f')} samples)")
    return t


def report(res):
    out = []
    m = res["meta"]
    out.append("== pyroscope-native Python benchmarks ==")
    out.append(f"mode: {'QUICK (small sizes, for checking the harness; not for numbers)' if m['quick'] else 'full'}")
    out.append(f"python {m['versions'].get('python')}, pyroscope-io {m['versions'].get('pyroscope-io')}, "
               f"py-spy {m['versions'].get('py-spy')}; {m['cpus']} CPUs; load average "
               f"{m['loadavg_start']} at start, {m.get('loadavg_end')} at end")
    out.append("every comparison: variants interleaved in one run, medians of the rounds; "
               "ratios are per round (variant / no profiler of the same round)")

    ov = res.get("overhead")
    if ov:
        out.append("")
        out.append(f"1. Overhead at {ov['rate_hz']} Hz ({ov['rounds']} rounds, order "
                   f"{' / '.join(VARIANTS)} in every round)")
        for wl, s in ov["workloads"].items():
            desc = ("CPU-bound: recursion, deep stacks, dict/string/json work"
                    if wl == "cpu" else "8 threads, ~1 ms CPU then 2 ms sleep each")
            out.append(f"  workload '{wl}' ({desc}; {' '.join(s['args'])})")
            rows = []
            for v in VARIANTS:
                d = s["variants"][v]
                rr = d["wall_ratio_per_pair"]
                rows.append([LABEL[v], fmt(d["median_wall_s"], ".3f"),
                             fmt(d["median_wall_ratio"], ".3f"),
                             f"{min(rr):.3f}-{max(rr):.3f}",
                             fmt(d["overhead_pct"], "+.1f"),
                             fmt(d["median_cpu_s"], ".3f"), fmt(d["median_cpu_ratio"], ".3f"),
                             fmt(d.get("profiler_cpu_pct"), ".2f"),
                             fmt(median(d["samples"]), ".0f")])
            out.append(table(rows, ["variant", "wall s", "wall ratio", "ratio range",
                                    "overhead %", "CPU s", "CPU ratio", "profiler CPU %",
                                    "samples"]))
        out.append("  wall ratio = median over rounds of (variant / no profiler of the same "
                   "round); the range shows the rounds' spread,")
        out.append("  i.e. the noise of this machine. CPU = the process's CPU over the window "
                   "(profiler threads included),")
        out.append("  plus py-spy's own process for py-spy. profiler CPU % = CPU of the "
                   "profiler's own threads (schedstat) or py-spy's process,")
        out.append("  over the unprofiled run's CPU. samples = what each profiler "
                   "recorded over the whole process")

    sm = res.get("sampler")
    if sm:
        out.append("")
        out.append(f"2. Sampler cost (this project; {sm['grid_rate_hz']} Hz, oncpu=False, "
                   "gil_only=False: every thread walked every tick; median of chunks)")
        rows = []
        for c in sm["grid"]:
            tot = c["totals"]
            rows.append([f"depth {c['depth']}", c["threads"], fmt(c["frames_per_stack"], ".1f"),
                         fmt(c["us_per_stack"]), fmt(c["ns_per_frame"], ".0f"),
                         fmt(c["sampler_core_pct"], ".1f"), tot["stacks_walked"],
                         tot["missed_ticks"], tot["walk_errors"]])
        out.append(table(rows, ["stack", "threads", "frames/stack", "us/stack", "ns/frame",
                                "% of a core", "stacks", "missed ticks", "walk errors"]))
        out.append(f"  10 threads at {RATE} Hz: CPU of the sampler thread")
        rows = [[c["case"], fmt(c["sampler_core_pct"], ".2f"), fmt(c["us_per_stack"]),
                 c["totals"]["stacks_walked"], c["totals"]["walk_errors"]]
                for c in sm["production"]]
        out.append(table(rows, ["settings", "% of a core", "us/stack", "stacks", "walk errors"]))
        if sm.get("changing"):
            out.append(f"  Stacks that keep changing vs parked ({sm['grid_rate_hz']} Hz, 5 "
                       "threads at depth 50, rounds interleaved; median of every chunk of "
                       "every round)")
            rows = [[c["case"], fmt(c["frames_per_stack"], ".1f"), fmt(c["us_per_stack"]),
                     fmt(c["ns_per_frame"], ".0f"), c["totals"]["stacks_walked"],
                     c["totals"]["cache_misses"], c["totals"]["missed_ticks"],
                     c["totals"]["walk_errors"]] for c in sm["changing"]]
            out.append(table(rows, ["threads' stacks", "frames/stack", "us/stack", "ns/frame",
                                    "stacks", "code cache misses", "missed ticks",
                                    "walk errors"]))
        idle = sm.get("idle")
        if idle:
            out.append("  1000 idle threads, wall mode, 1000 Hz, every stack walked: the CPU "
                       "budget (sampler_cpu_budget) against none,")
            out.append(f"  medians of {len(idle['1'])} interleaved rounds (each the median "
                       "of its chunks)")
            rows = []
            for budget, name in (("1", "budget 1 % (default)"), ("0", "no budget (0)")):
                runs = idle[budget]
                rows.append([name, fmt(median([c["sampler_core_pct"] for c in runs]), ".2f"),
                             fmt(median([c["ticks_per_s"] for c in runs]), ".1f"),
                             fmt(median([c["us_per_stack"] for c in runs])),
                             sum(c["totals"]["budget_throttled_ticks"] for c in runs),
                             sum(c["totals"]["walk_errors"] for c in runs)])
            out.append(table(rows, ["settings", "% of a core", "ticks/s", "us/stack",
                                    "throttled deadlines", "walk errors"]))

    en = res.get("encode")
    if en:
        out.append("")
        out.append(f"3. Encode + gzip of one period, unique stacks of depth 30 (from bench_core; "
                   "split at 16000 samples / 4 MiB)")
        for n in en["notes"]:
            out.append("  " + n)
        rows = [[r["unique_stacks"], r["profiles"], r["raw_bytes"], r["gzip_bytes"],
                 fmt(r["ms"]), fmt(r["ns_per_sample"], ".0f")] for r in en["rows"]]
        out.append(table(rows, ["stacks", "profiles", "raw bytes", "gzip bytes", "ms",
                                "ns/stack"]))

    me = res.get("memory")
    if me:
        out.append("")
        out.append(f"4. Memory: peak RSS (VmHWM) after a {me['seconds']} s CPU-bound run that "
                   f"keeps creating new functions and stacks, {me['rounds']} rounds "
                   "(the three variants of a round run side by side)")
        rows = []
        for v in MEM_VARIANTS:
            d = me["variants"][v]
            rows.append([LABEL[v], fmt(median(d["hwm_final_mib"]), ".1f"),
                         fmt(d["median_added_mib"], "+.1f"),
                         fmt(d.get("median_pss_added_mib"), "+.1f"),
                         fmt(d.get("median_private_added_mib"), "+.1f"),
                         fmt(median(d["steps"]), ".0f")])
        out.append(table(rows, ["variant", "peak RSS MiB", "added MiB", "PSS added MiB",
                                "private added MiB", "new stacks made"]))
        if me["rounds"] < 5:
            out.append(f"  note: {me['rounds']} rounds (fewer than 5) to keep `make bench` "
                       "within 10 minutes")

    ch = res.get("churn")
    if ch:
        out.append("")
        out.append(f"6. Label churn: tag_wrapper({{'request_id': uuid4().hex}}) in a loop on two "
                   f"threads for {ch['seconds']} s, exporting every 2 s, {ch['rounds']} rounds "
                   "one variant at a time (medians)")
        rows = []
        for v in CHURN_VARIANTS:
            d = ch["variants"][v]
            rows.append([LABEL[v], fmt(d["sets_per_s"], ".0f"), fmt(d["max_ms"], ".2f"),
                         fmt(d["p9999_ms"], ".3f"), fmt(d["over_1ms"], ".0f"),
                         fmt(d["median_added_mib"], "+.1f")])
        out.append(table(rows, ["variant", "sets/s", "slowest ms", "p99.99 ms", "> 1 ms",
                                "peak RSS added MiB"]))
    al = res.get("alloc")
    if al:
        out.append("")
        out.append("7. " + al["text"])
    ac = res.get("accuracy")
    if ac:
        out.append("")
        out.append(f"5. Accuracy: CPU attribution against the workload's own thread_time "
                   f"truth ({ac['rounds']} rounds of ~{ac['seconds_cpu']} s CPU, {RATE} Hz)")
        cats = CATEGORIES + ("other",)
        rows = [["truth"] + [fmt(ac["profilers"]["native"]["pooled_true_pct"][k], ".1f")
                             for k in cats] + ["", ""]]
        for p in ACC_PROFILERS:
            d = ac["profilers"][p]
            rows.append([LABEL[p]] + [fmt(d["pooled_profile_pct"][k], ".1f") for k in cats]
                        + [fmt(d["pooled_error_pts"]), fmt(d["median_round_error_pts"])])
        out.append(table(rows, ["% of CPU", "phase_a", "phase_b", "phase_c", "off-CPU phase",
                                "idle thread", "other", "error pts", "median round"]))
        out.append("  error = largest |profile share - true share| over the columns, pooled "
                   "over the rounds; off-CPU phase and idle thread are truly ~0 %")
    rt = res.get("runtimes")
    if rt:
        out.append("")
        out.append(f"8. Interpreters side by side (this project; the CPU-bound workload at "
                   f"{rt['rate_hz']} Hz, and 10 threads at depth 50 walked at "
                   f"{rt['sampler_rate_hz']} Hz; rounds interleaved across interpreters)")
        rows = []
        for name, d in rt["runtimes"].items():
            rr = d["cpu_ratio_per_pair"]
            rows.append([name, d["python"], fmt(d["median_cpu_ratio"], ".3f"),
                         f"{min(rr):.3f}-{max(rr):.3f}", fmt(d["profiler_cpu_pct"], ".2f"),
                         fmt(d["samples"], ".0f"), fmt(d["us_per_stack"]),
                         fmt(d["ns_per_frame"], ".0f"), d["walk_errors"]])
        out.append(table(rows, ["runtime", "python", "CPU ratio", "ratio range",
                                "profiler CPU %", "samples", "us/stack", "ns/frame",
                                "walk errors"]))
        out.append("  CPU ratio = median over rounds of (with profiler / without, same "
                   "interpreter, same round); us/stack = sampler CPU per stack walked")

    out.append("")
    out.append("Targets (2-core machine)")
    rows = [[t["target"], fmt(t["value"]) if isinstance(t["value"], (int, float)) else "n/a",
             t["limit"], yes_no(t["met"]), t["note"]] for t in res["targets"]]
    out.append(table(rows, ["target", "value", "limit", "met", "note"], left=(0, 4)))
    out.append("")
    out.append(f"total {res['meta']['elapsed_s']:.0f} s; sections: " + ", ".join(
        f"{k} {res['meta']['section_s'][k]:.0f} s" for k in res["meta"]["sections"]
        if k in res["meta"]["section_s"]))
    return "\n".join(out)


# ---------------------------------------------------------------- main

def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small sizes (under 2 minutes), to check the harness, not for numbers")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help="comma-separated sections: " + ",".join(SECTIONS))
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--core-output", default="",
                    help="bench_core's output to read (else bench_core is run)")
    ap.add_argument("--json", default="", help="default: BUILD/bench/python-results.json")
    ap.add_argument("--rounds", type=int, default=0,
                    help="rounds per comparison (default: 5, quick 2; memory 3, quick 1)")
    ap.add_argument("--no-reinstall", action="store_true",
                    help="keep the installed pyroscope-native in venv-native")
    ap.add_argument("--runtimes", default="",
                    help="comma-separated NAME=PYTHON or NAME=CHROOT:PYTHON for the runtimes "
                         "section (make bench passes 3.13, 3.14 in the sid chroot and 3.13t)")
    ap.add_argument("--from-json", default="",
                    help="print the report of a saved results file and exit (runs nothing)")
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            res = json.load(f)
        res["targets"] = evaluate_targets(res)
        print(report(res))
        return
    if sys.version_info < (3, 11):
        sys.exit("bench/python needs CPython 3.11+ (it creates the venvs from this interpreter)")
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    for s in only:
        if s not in SECTIONS:
            sys.exit(f"unknown section {s!r}; choose from {', '.join(SECTIONS)}")
    if "runtimes" in only and not args.runtimes:
        sys.exit("the runtimes section needs --runtimes NAME=PYTHON,... (make bench gives it)")
    build_dir = os.path.abspath(args.build_dir)
    json_path = args.json or os.path.join(build_dir, "bench", "python-results.json")
    rounds = args.rounds or (2 if args.quick else 5)
    # Overhead is the noisiest comparison and each round is short: more.
    overhead_rounds = args.rounds or (2 if args.quick else 9)
    mem_rounds = args.rounds or (1 if args.quick else 3)
    # Attribution is limited by sampling noise: more rounds, more samples.
    acc_rounds = args.rounds or (2 if args.quick else 8)

    t_start = time.monotonic()
    res = {"meta": {"quick": args.quick, "sections": only, "cpus": os.cpu_count(),
                    "machine": platform.machine(), "kernel": platform.release(),
                    "loadavg_start": loadavg(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "section_s": {}}}
    envs = Envs(build_dir, sys.executable, reinstall_native=not args.no_reinstall)
    need_envs = any(s not in ("encode", "runtimes") for s in only)
    if need_envs:
        envs.setup()
    res["meta"]["versions"] = envs.versions
    res["meta"]["setup_s"] = time.monotonic() - t_start
    server = IngestServer()
    tmp = tempfile.mkdtemp(prefix="pn-bench-")
    try:
        for name in only:
            t0 = time.monotonic()
            log(f"section {name}")
            if name == "overhead":
                res[name] = section_overhead(envs, server, tmp, args.quick, overhead_rounds)
            elif name == "sampler":
                res[name] = section_sampler(envs, tmp, args.quick)
            elif name == "encode":
                res[name] = section_encode(build_dir, args.core_output)
            elif name == "memory":
                res[name] = section_memory(envs, server, tmp, args.quick, mem_rounds)
            elif name == "accuracy":
                res[name] = section_accuracy(envs, server, tmp, args.quick, acc_rounds)
            elif name == "churn":
                res[name] = section_churn(envs, server, tmp, args.quick, mem_rounds)
            elif name == "alloc":
                res[name] = section_alloc(envs, tmp, args.quick)
            elif name == "runtimes":
                res[name] = section_runtimes([x for x in args.runtimes.split(",") if x],
                                             build_dir, args.quick, rounds)
            res["meta"]["section_s"][name] = time.monotonic() - t0
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    res["meta"]["server_requests"] = server.requests
    res["meta"]["loadavg_end"] = loadavg()
    res["meta"]["elapsed_s"] = time.monotonic() - t_start
    res["targets"] = evaluate_targets(res)
    os.makedirs(os.path.dirname(json_path), exist_ok=True)
    with open(json_path, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    text = report(res)
    txt_path = os.path.splitext(json_path)[0].replace("-results", "") + "-report.txt"
    with open(txt_path, "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"\nall numbers: {json_path} (this report: {txt_path})")


if __name__ == "__main__":
    main()
