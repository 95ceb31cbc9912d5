"""The one fork path: a fork while another thread is inside configure or
shutdown must leave a child that can configure, profile and exit.

Before the fork path existed, the module lock held by the other thread was
inherited locked and the child's configure waited for it forever. Each
child is bounded from the parent (waitpid with a deadline, then SIGKILL and
a failure), never by a speed assertion.
"""

import json

from conftest import check_run
import pprof_reader

CHILD_PROFILES = """
def child_body(out_dir):
    # Configure, burn some CPU under a label, shut down: every step would
    # hang on an inherited lock.
    pyroscope.configure(application_name="forked", output_dir=out_dir,
                        sample_rate=200, upload_interval=60, stop_timeout=5,
                        report_thread_name=True)
    with pyroscope.tag_wrapper({"phase": "child"}):
        t = time.process_time()
        while time.process_time() - t < 0.3:
            sum(i * i for i in range(1000))
    pyroscope.shutdown()


def wait_child(pid, bound):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "hung"
"""


def run_case(tmp_path, holder):
    out = tmp_path / "child"
    code = ("import json, os, signal, sys, threading, time\nimport pyroscope\n"
            + CHILD_PROFILES + holder + """
ready.wait(30)
pid = os.fork()
if pid == 0:
    try:
        child_body(sys.argv[1])
        os._exit(0)
    except BaseException as e:
        print("child failed:", repr(e), file=sys.stderr, flush=True)
        os._exit(3)
result = wait_child(pid, 60)
release.set()
print(json.dumps({"child": result}))
""")
    r = check_run(code, args=(str(out),), timeout=150)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["child"] == 0, f"child {res['child']}\nstderr:\n{r.stderr}"
    profiles = pprof_reader.load_dir(str(out))
    assert profiles, "the child wrote no profile"
    labelled = [s for p in profiles for s in p["samples"] if s["labels"].get("phase") == "child"]
    assert labelled, "the child's samples lost their labels"


def test_fork_while_another_thread_holds_the_configure_lock(tmp_path):
    # A thread parked inside the module lock stands for one inside
    # configure(): it holds the lock across the fork.
    holder = """
ready, release = threading.Event(), threading.Event()
def hold():
    with pyroscope._lock:
        ready.set()
        release.wait(120)
threading.Thread(target=hold, daemon=True).start()
"""
    run_case(tmp_path, holder)


def test_fork_while_another_thread_is_inside_shutdown(tmp_path):
    # shutdown() against a server that accepts but never answers waits up to
    # stop_timeout inside the lock and inside the core's stop: fork then.
    holder = """
import socket
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(16)
addr = "http://127.0.0.1:%d" % srv.getsockname()[1]
pyroscope.configure(application_name="parent", server_address=addr, sample_rate=100,
                    upload_interval=60, stop_timeout=8)
t = time.process_time()
while time.process_time() - t < 0.2:
    sum(i * i for i in range(1000))
ready, release = threading.Event(), threading.Event()
def stop():
    # The lock is taken before the thread is reported inside shutdown.
    with pyroscope._lock:
        ready.set()
        pyroscope.shutdown()
threading.Thread(target=stop, daemon=True).start()
ready.wait(30)
time.sleep(0.5)  # let shutdown reach the hanging upload
"""
    run_case(tmp_path, holder)


def test_fork_while_another_thread_holds_the_thread_names_lock(tmp_path):
    # configure(report_thread_name=True) takes this lock to patch threading.
    holder = """
ready, release = threading.Event(), threading.Event()
def hold():
    with pyroscope._threads._lock:
        ready.set()
        release.wait(120)
threading.Thread(target=hold, daemon=True).start()
"""
    run_case(tmp_path, holder)
