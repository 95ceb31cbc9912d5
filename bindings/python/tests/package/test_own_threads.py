"""Every thread of ours (the core's and the binding's, started through the
core's pn_thread_spawn) blocks the application's signals, so a SIGTERM or
SIGINT sent to the process reaches one of the application's threads."""

import json

from conftest import check_run

CODE = '''
import json, os, signal, sys, threading, time
import pyroscope
pyroscope.configure(application_name="threads", output_dir=sys.argv[1], upload_interval=60)
def ours():
    found = {}
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/status") as f:
                status = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended between the listing and the read
        name = status["Name"].strip()
        if name.startswith("pyroscope"):
            found[name] = int(status["SigBlk"], 16)
    return found
def masks():
    return {n: {"term": bool(m >> (signal.SIGTERM - 1) & 1), "int": bool(m >> (signal.SIGINT - 1) & 1),
                "segv": bool(m >> (signal.SIGSEGV - 1) & 1)} for n, m in ours().items()}
def settled(found):
    return "pyroscope-log" in found and all(m == WANT for m in found.values())
# The log thread starts with configure. A thread glibc is starting blocks
# every signal until it runs, so wait (bounded) for the masks to settle.
WANT = {"term": True, "int": True, "segv": False}
end = time.monotonic() + 60
while not settled(found := masks()) and time.monotonic() < end:
    time.sleep(0.05)
pyroscope.shutdown()
print(json.dumps(found))
'''


def test_our_threads_block_the_applications_signals(tmp_path):
    r = check_run(CODE, args=(str(tmp_path),), timeout=120)
    found = json.loads(r.stdout.strip().splitlines()[-1])
    assert "pyroscope-log" in found, found  # the binding's log thread
    assert "pyroscope-flush" in found, found  # one of the core's
    for name, mask in found.items():
        assert mask == {"term": True, "int": True, "segv": False}, (name, mask)
