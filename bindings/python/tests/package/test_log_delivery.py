"""Core messages reach `logging` from a native thread of ours: promptly
while the main thread sits in join(), stamped with the time the core logged
them, in a forked child too, and without hanging the interpreter's exit.

Every wait is bounded from outside (an event with a generous timeout, the
child's own timeout); no assertion depends on how fast the machine is."""

import json

from conftest import check_run
from ingest_server import IngestServer

LOOPBACK_ENV = {"no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}

# A handler that records each core message; `got` is set by the first one.
PROLOGUE = '''
import json, logging, os, sys, threading, time
import pyroscope
records = []
got = threading.Event()
class Recorder(logging.Handler):
    def emit(self, r):
        records.append({"created": r.created, "handled": time.time(),
                        "thread": threading.current_thread().name, "msg": r.getMessage()})
        got.set()
logging.getLogger("pyroscope").addHandler(Recorder())

def spin_until(event, bound):
    end = time.monotonic() + bound
    while not event.is_set() and time.monotonic() < end:
        sum(range(1000))
    return event.is_set()
'''

# Every upload is answered 400, which the core logs as an error at once.
CONFIGURE = '''
pyroscope.configure(application_name="logs", server_address=sys.argv[1], sample_rate=200,
                    upload_interval=0.1, gil_only=False, stop_timeout=2)
'''


def run(body, timeout=120):
    with IngestServer(status=400, message="bad tenant") as srv:
        r = check_run(PROLOGUE + CONFIGURE + body, args=(srv.url,), env=LOOPBACK_ENV,
                      timeout=timeout)
    return json.loads(r.stdout.strip().splitlines()[-1]), r


def test_messages_arrive_while_the_main_thread_sits_in_join():
    # The worker burns CPU (so there are samples, so uploads, so errors)
    # until a message was handled; the main thread only joins it. Before the
    # log thread, messages waited for the main thread to run Python code,
    # and the worker gave up after 60 s.
    out, r = run('''
result = {}
def worker():
    result["got"] = spin_until(got, 60)
t = threading.Thread(target=worker)
t.start()
t.join()
main_ident = threading.main_thread().name
print(json.dumps({"got": result["got"], "records": records, "main": main_ident}))
pyroscope.shutdown()
''')
    assert out["got"], r.stderr
    rec = out["records"][0]
    assert "400" in rec["msg"] or "bad tenant" in rec["msg"], rec
    assert rec["thread"] != out["main"], rec
    assert rec["created"] <= rec["handled"]


def test_records_carry_the_time_the_core_logged():
    # A slow handler holds the log thread: every few records one emit()
    # sleeps 0.3 s after noting its own record, and the core keeps logging
    # (an upload is refused every 0.1 s) into the queue meanwhile. A record
    # handled after such a sleep must say when it was logged (during the
    # sleep, well before it was handled), not when it was handled; a record
    # stamped at handling time is handled microseconds after its stamp, and
    # the 20 ms margin makes that impossible to pass by accident. Nothing
    # here depends on the GIL, so free-threaded builds prove it too.
    out, r = run('''
class Slow(logging.Handler):
    n = 0
    def emit(self, r):
        Slow.n += 1
        if Slow.n % 5 == 1:
            time.sleep(0.3)
logging.getLogger("pyroscope").addHandler(Slow())   # after the Recorder
def proved():
    return any(rec["created"] + 0.02 < rec["handled"] for rec in list(records))
end = time.monotonic() + 90
while not proved() and time.monotonic() < end:
    time.sleep(0.05)
ok = proved()
pyroscope.shutdown()
print(json.dumps({"proved": ok, "records": len(records), "slow": Slow.n,
                  "order": all(a["created"] <= a["handled"] for a in records)}))
''')
    assert out["proved"], (out, r.stderr[-2000:])
    assert out["order"], out


def test_forked_child_gets_its_own_log_thread():
    out, r = run('''
got_parent = spin_until(got, 60)
pid = os.fork()
if pid == 0:
    got = threading.Event()   # the handler sets this one from now on
    del records[:]
    res = {}
    def worker():
        res["got"] = spin_until(got, 60)
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    ok = res["got"] and records and records[0]["thread"] != "MainThread"
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
pyroscope.shutdown()
print(json.dumps({"parent": got_parent, "child": os.waitstatus_to_exitcode(status)}))
''')
    assert out == {"parent": True, "child": 0}, r.stderr[-2000:]


def test_exit_while_messages_flow_does_not_hang():
    # No shutdown: the interpreter exits while the core keeps logging from
    # its threads; the exit hook stops the log thread before finalization.
    # A daemon thread keeps the GIL busy meanwhile. Bounded by the timeout.
    out, r = run('''
spin_until(got, 60)
def busy():
    while True:
        sum(range(1000))
threading.Thread(target=busy, daemon=True).start()
print(json.dumps({"got": got.is_set()}))
''', timeout=120)
    assert out == {"got": True}
    assert "Fatal Python error" not in r.stderr, r.stderr
