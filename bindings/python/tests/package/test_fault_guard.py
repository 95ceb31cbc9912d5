"""The fault guard from Python: stacks are read with plain loads while our
SIGSEGV/SIGBUS handler is installed, with process_vm_readv when it is not
(fault_guard=False, or someone replaced it), and either way the profile is
the same. Faults that are not ours still reach faulthandler.
"""

import json
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import check_run, run_python
import pprof_reader

# Spins in burn() for ~0.6 s of CPU in each of two phases, with `between`
# run in the middle, each phase going on until the sampler ticked more
# than 50 times in it (the 0.6 s take ~120 ticks on an idle machine; at
# most 60 s); prints each phase's ticks, syscall_ticks and CPU seconds as
# JSON lines.
WORKLOAD = """
import faulthandler, json, logging, os, sys, time
import pyroscope

logging.basicConfig(level=logging.INFO)

def burn(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1
    return x

def phase():
    before = pyroscope.stats()
    c0 = time.thread_time()
    burn(0.6)
    give_up = time.monotonic() + 60
    while pyroscope.stats()["ticks"] - before["ticks"] <= 50 and time.monotonic() < give_up:
        burn(0.05)
    after = pyroscope.stats()
    d = {k: after[k] - before[k] for k in ("ticks", "syscall_ticks")}
    d["cpu"] = time.thread_time() - c0
    print(json.dumps(d))

pyroscope.configure(application_name="fg", output_dir=os.environ["OUT"], sample_rate=200,
                    upload_interval=30, **json.loads(os.environ.get("KW", "{}")))
phase()
{between}
phase()
pyroscope.shutdown()
"""


def run(tmp_path, between="", kw=None, env=None):
    out = tmp_path / "p"
    code = WORKLOAD.replace("{between}", between)
    r = check_run(code, env={"OUT": str(out), "KW": json.dumps(kw or {}), **(env or {})},
                  timeout=60)
    phases = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    burned = pprof_reader.function_values(pprof_reader.load_dir(str(out))).get("burn", 0)
    return phases, burned, r.stderr


def test_default_reads_with_the_guard(tmp_path):
    phases, burned, _ = run(tmp_path)
    for p in phases:
        assert p["ticks"] > 50 and p["syscall_ticks"] == 0, phases
    # The CPU spent in burn (1.2 s or a little more) is in the profile.
    assert burned > 0.75 * sum(p["cpu"] for p in phases) * 1e9, (burned, phases)


@pytest.mark.parametrize("how", ["keyword", "env"])
def test_fault_guard_off_reads_with_syscalls(tmp_path, how):
    kw, env = ({"fault_guard": False}, None) if how == "keyword" else \
        (None, {"PYROSCOPE_FAULT_GUARD": "false"})
    phases, burned, _ = run(tmp_path, kw=kw, env=env)
    for p in phases:
        # The two counters are bumped at different points of a tick.
        assert p["ticks"] > 50 and abs(p["syscall_ticks"] - p["ticks"]) <= 1, phases
    assert burned > 0.75 * sum(p["cpu"] for p in phases) * 1e9, (burned, phases)


def test_replaced_handler_falls_back_and_rearms(tmp_path):
    # faulthandler installed after us sees every fault first, so the
    # sampler must stop faulting; disabling it puts our handler back.
    phases, burned, err = run(
        tmp_path, between="faulthandler.enable(); phase(); faulthandler.disable()",
        kw={"log_level": "info"})
    first, during, after = phases
    assert first["syscall_ticks"] == 0, phases
    assert during["ticks"] > 50 and during["syscall_ticks"] >= during["ticks"] - 2, phases
    assert after["syscall_ticks"] <= 2, phases
    assert "fault_guard" in err and "process_vm_readv" in err, err
    assert "Fatal Python error" not in err, err
    # The CPU of all three phases (1.8 s or a little more) is in the profile.
    assert burned > 0.75 * sum(p["cpu"] for p in phases) * 1e9, (burned, phases)


def test_application_crash_still_reaches_faulthandler(tmp_path):
    # faulthandler first, then us: a real crash in the application must
    # still be reported by faulthandler and kill the process with SIGSEGV.
    r = run_python("""
        import ctypes, faulthandler, os, time
        faulthandler.enable()
        import pyroscope
        pyroscope.configure(application_name="fg", output_dir=os.environ["OUT"],
                            sample_rate=500)
        time.sleep(0.1)
        assert pyroscope.stats()["syscall_ticks"] == 0
        print("crashing", flush=True)
        ctypes.string_at(16)
    """, env={"OUT": str(tmp_path / "p")}, timeout=60)
    assert "crashing" in r.stdout, r.stderr
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    assert "Fatal Python error: Segmentation fault" in r.stderr, r.stderr


# Threads recurse to the recursion limit and unwind, over and over (their
# frame chunks are unmapped as they unwind, so reading their stacks faults
# now and then), sampled at 1000 Hz, while the main thread changes the
# SIGSEGV handler as fast as it can: "faulthandler" enables and disables
# faulthandler; "signal" installs a Python SIGSEGV handler with
# signal.signal and puts ours back from C (ctypes); "chained" installs an
# application's C handler that chains to the one it replaced (ours), from
# C, unannounced, and puts ours back. Goes on for at least
# 8 s and until 300 stack reads failed (at most 20 s: 3.10 frames are
# seldom unmapped, its reads fail a few times a second); prints the toggles,
# the calls of the Python handler and stats() as JSON.
TOGGLING = """
import ctypes, faulthandler, json, os, signal, sys, threading, time
import pyroscope
pyroscope.configure(application_name="fg", output_dir=os.environ["OUT"], sample_rate=1000,
                    gil_only=False, upload_interval=30)
sys.setswitchinterval(1e-5)
def rec(n):
    return rec(n + 1) + 1
stop = False
def deep():
    while not stop:
        try:
            rec(0)
        except RecursionError:
            pass
def short_lived():
    while not stop:
        t = threading.Thread(target=deep_once)
        t.start()
        t.join()
def deep_once():
    for _ in range(3):
        try:
            rec(0)
        except RecursionError:
            pass
threads = [threading.Thread(target=deep) for _ in range(3)] + \\
    [threading.Thread(target=short_lived) for _ in range(2)]
for t in threads:
    t.start()
calls = 0
def handler(sig, frame):
    global calls
    calls += 1
libc = ctypes.CDLL(None)
ours = ctypes.create_string_buffer(512)  # a struct sigaction
libc.sigaction(signal.SIGSEGV, None, ours)
if sys.argv[1] == "chained":
    chain = ctypes.CDLL(os.environ["CHAIN_LIB"])
errors0 = pyroscope.stats()["walk_errors"]
t0 = time.monotonic()
n = 0
while True:
    if n % 1000 == 0:
        took = time.monotonic() - t0
        if took > 20 or (took > 8 and pyroscope.stats()["walk_errors"] - errors0 >= 300):
            break
    if sys.argv[1] == "faulthandler":
        faulthandler.enable()
        faulthandler.disable()
    elif sys.argv[1] == "chained":
        chain.install()
        libc.sigaction(signal.SIGSEGV, ours, None)
    else:
        signal.signal(signal.SIGSEGV, handler)
        libc.sigaction(signal.SIGSEGV, ours, None)
    n += 1
stop = True
for t in threads:
    t.join()
print(json.dumps({"toggles": n, "calls": calls, **pyroscope.stats()}))
pyroscope.shutdown()
"""


# An application's SIGSEGV handler that chains to the handler it replaced
# with the same siginfo, as crash reporters do.
CHAIN_C = r"""
#include <signal.h>
#include <string.h>
static struct sigaction prev;
static void on_segv(int sig, siginfo_t *si, void *uc)
{
    if (prev.sa_flags & SA_SIGINFO)
        prev.sa_sigaction(sig, si, uc);
    else
        signal(sig, SIG_DFL);
}
int install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGSEGV, &sa, &prev);
}
"""


@pytest.mark.parametrize("how", ["faulthandler", "signal", "chained"])
def test_handler_changed_while_reads_fault(tmp_path, how):
    # Issue 31: faulthandler saw a fault of ours, printed "Fatal Python
    # error" and re-raised it, and we let it kill the process; a Python
    # SIGSEGV handler was called for our faults. A chaining C handler may
    # see ours (installed unannounced, found at the next tick) and passes
    # them back.
    env = {"OUT": str(tmp_path / "p")}
    if how == "chained":
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            pytest.skip("no C compiler")
        src, lib = tmp_path / "chain.c", tmp_path / "libchain.so"
        src.write_text(CHAIN_C)
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
        env["CHAIN_LIB"] = str(lib)
    r = run_python(TOGGLING, env=env, args=(how,), timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    assert "Fatal Python error" not in r.stderr, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["calls"] == 0, out
    assert out["toggles"] > 100, out
    # Reads did fail meanwhile (3.10's frames are seldom unmapped: there
    # the test may see none on a busy machine).
    assert out["walk_errors"] >= (0 if sys.version_info < (3, 11) else 20), out
