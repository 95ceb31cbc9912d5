"""pyroscope.configure and friends: every pyroscope-io 1.x keyword, the
rules for bad values, PYROSCOPE_* environment variables, the default
destination, restarting with new settings, logging and the deprecated
no-op functions. Each case profiles a fresh interpreter (run_python)."""

import json
import os

import pytest

import pprof_reader
import pyroscope
from conftest import check_run
from ingest_server import IngestServer, user_name

LOOPBACK_ENV = {"no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}

# Every child starts like this: parameters as JSON in argv[1], and a way
# to burn CPU that is measured in the thread's own CPU time.
PROLOGUE = '''
import json, logging, os, sys, time, warnings
P = json.loads(sys.argv[1])
import pyroscope

def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
'''


def child(body, env=None, timeout=60, **params):
    """Run PROLOGUE + body; returns the JSON object it printed last."""
    r = check_run(PROLOGUE + body, args=(json.dumps(params),),
                  env={**LOOPBACK_ENV, **(env or {})}, timeout=timeout)
    return json.loads(r.stdout.strip().splitlines()[-1])


def ingest_name(name):
    """"app{k=v,k2=v2}" -> ("app", {"k": "v", "k2": "v2"})."""
    app, _, rest = user_name(name).partition("{")
    tags = dict(kv.split("=", 1) for kv in rest.rstrip("}").split(",") if kv)
    return app, tags


def profile_files(names):
    # The folder writer writes ".pn-*.tmp" and renames it: not a profile yet.
    return sorted(n for n in names if not (n.startswith(".pn-") and n.endswith(".tmp")))


def files(path):
    return profile_files(os.listdir(path)) if os.path.isdir(path) else []


def stacks_have(profiles, fn):
    return any(fn in {f[0] for f in s["stack"]} for s in pprof_reader.samples(profiles))


# ------------------------------------------------------------ keywords


def test_every_keyword_is_accepted(tmp_path):
    body = '''
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    pyroscope.configure(
        app_name="all.kw.old", application_name="all.kw", server_address=P["url"],
        basic_auth_username="user", basic_auth_password="pw", enable_logging=True,
        sample_rate=150, oncpu=True, native=True, gil_only=True, report_pid=True,
        report_thread_id=True, report_thread_name=True, tags={"t": "1"},
        tenant_id="tenant", http_headers={"X-Test": "1"},
        line_no=pyroscope.LineNo.LastInstruction, upload_interval=0.3,
        output_dir=P["dir"], log_level="warning", max_stacks=1000, max_depth=64,
        sampler_cpu_budget=0,
        stop_timeout=2)
running = pyroscope.is_running()
spin(0.3)
pyroscope.shutdown()
print(json.dumps({"running": running, "after": pyroscope.is_running(), "pid": os.getpid(),
                  "warnings": [[w.category.__name__, str(w.message)] for w in caught]}))
'''
    out_dir = str(tmp_path / "out")
    with IngestServer() as srv:
        out = child(body, url=srv.url, dir=out_dir)
    assert out["running"] is True and out["after"] is False
    deprecations = sorted(msg for cat, msg in out["warnings"] if cat == "DeprecationWarning")
    assert len(deprecations) == 2, out["warnings"]
    assert "app_name" in deprecations[0] and "native" in deprecations[1]
    # application_name wins over the deprecated app_name; both exporters ran.
    assert srv.requests
    assert all(user_name(r.query["name"]) == "all.kw{t=1}" for r in srv.requests)
    assert all(r.query["sampleRate"] == "150" for r in srv.requests)
    names = files(out_dir)
    assert names and all(n.startswith("all.kw-cpu-") for n in names), names
    profiles = pprof_reader.load_dir(out_dir)
    assert profiles[0]["period"] == round(1e9 / 150)
    labels = [s["labels"] for s in pprof_reader.samples(profiles)]
    assert labels and all(lb.get("pid") == str(out["pid"]) for lb in labels)
    assert all("thread_id" in lb for lb in labels)
    assert any(lb.get("thread_name") == "MainThread" for lb in labels)


# ------------------------------------------------------------ bad values

# (id, keyword arguments, accepted exception types, text the message names)
BAD_KEYWORDS = [
    # (a number out of range is the nearest bound: test_anchor_inputs.py)
    ("rate_nan", {"sample_rate": float("nan")}, "ValueError", "sample_rate"),
    ("rate_str", {"sample_rate": "fast"}, "TypeError", "sample_rate"),
    ("rate_bool", {"sample_rate": True}, "TypeError", "sample_rate"),
    ("interval_word", {"upload_interval": "soon"}, "ValueError", "upload_interval"),
    ("tag_reserved", {"tags": {"__reserved": "x"}}, "ValueError", "__reserved"),
    ("tag_space", {"tags": {"bad name": "x"}}, "ValueError", "tags"),
    ("tag_int_value", {"tags": {"k": 1}}, "TypeError", "tags"),
    ("tag_comma", {"tags": {"k": "a,b"}}, "ValueError", "tags"),
    ("tags_str", {"tags": "k=v"}, "TypeError", "tags"),
    ("header_space", {"http_headers": {"bad header": "x"}}, "ValueError", "http_headers"),
    ("header_newline", {"http_headers": {"X": "a\nb"}}, "ValueError", "http_headers"),
    ("server_ftp", {"server_address": "ftp://x"}, "ValueError", "server_address"),
    # Without a scheme it is http:// (issue 28 §2, test_anchor_inputs.py),
    # unless it is no address even so.
    ("server_no_scheme", {"server_address": "local host:4040"}, "ValueError",
     "server_address"),
    ("app_brace", {"application_name": "app{x}"}, "ValueError", "application_name"),
    ("user_colon", {"basic_auth_username": "a:b"}, "ValueError", "basic_auth_username"),
    ("password_alone", {"basic_auth_password": "pw"}, "ValueError", "basic_auth"),
    ("tenant_newline", {"tenant_id": "a\nb"}, "ValueError", "tenant_id"),
    ("gil_only_str", {"gil_only": "yes"}, "TypeError", "gil_only"),
    ("oncpu_str", {"oncpu": "yes"}, "TypeError", "oncpu"),
    ("line_no_int", {"line_no": 7}, "TypeError ValueError", "line_no"),
    ("max_depth_fraction", {"max_depth": 1.5}, "TypeError", "max_depth"),
    ("memory_interval_zero", {"memory_interval": 0}, "ValueError", "memory_interval"),
    ("log_level_word", {"log_level": "loud"}, "ValueError", "log_level"),
    ("unknown_keyword", {"bogus_setting": 1}, "TypeError", "bogus_setting"),
    # A lone surrogate (from an undecodable file name or environment) was a
    # bare UnicodeEncodeError naming no setting (issue 31).
    ("tag_value_surrogate", {"tags": {"k": "\udcff"}}, "ValueError", "tags"),
    ("tag_key_surrogate", {"tags": {"\udcff": "v"}}, "ValueError", "tags"),
    ("header_surrogate", {"http_headers": {"X": "a\udcff"}}, "ValueError", "http_headers"),
    ("app_surrogate", {"application_name": "app\ud800"}, "ValueError", "application_name"),
    ("password_surrogate", {"basic_auth_username": "u", "basic_auth_password": "\udcff"},
     "ValueError", "basic_auth_password"),
    ("dir_surrogate", {"output_dir": "/tmp/\udcff"}, "ValueError", "output_dir"),
]

# (variable, bad value); the message must name the variable.
BAD_ENV = [
    ("PYROSCOPE_SAMPLE_RATE", "fast"),
    ("PYROSCOPE_UPLOAD_INTERVAL", "soon"),
    ("PYROSCOPE_GIL_ONLY", "maybe"),
    ("PYROSCOPE_ONCPU", "maybe"),
    ("PYROSCOPE_REPORT_PID", "2"),
    ("PYROSCOPE_TAGS", "novalue"),
    ("PYROSCOPE_SERVER_ADDRESS", "ftp://x"),
    ("PYROSCOPE_LINE_NO", "middle"),
]

BAD_VALUES_CHILD = '''
def attempt(kwargs):
    """Configure with a bad value; report the error and whether a
    profiler runs afterwards."""
    base = {"application_name": "bad.case", "output_dir": P["bad_dir"]}
    try:
        pyroscope.configure(**{**base, **kwargs})
        err = None
    except Exception as exc:
        err = [type(exc).__name__, str(exc)]
    return {"error": err, "running": pyroscope.is_running()}

def env_attempt(var, value):
    os.environ[var] = value
    try:
        return attempt({})
    finally:
        del os.environ[var]

out = {"idle": {}, "busy": {}, "env_idle": {}, "env_busy": {}}
for case_id, kwargs in P["cases"]:
    out["idle"][case_id] = attempt(kwargs)
    if out["idle"][case_id]["running"]:
        pyroscope.shutdown()  # a bad value was accepted; the parent reports it
for var, value in P["bad_env"]:
    out["env_idle"][var] = env_attempt(var, value)
    if out["env_idle"][var]["running"]:
        pyroscope.shutdown()

pyroscope.configure(application_name="keeper", output_dir=P["good_dir"],
                    sample_rate=200, upload_interval=0.2)
for case_id, kwargs in P["cases"]:
    out["busy"][case_id] = attempt(kwargs)
for var, value in P["bad_env"]:
    out["env_busy"][var] = env_attempt(var, value)
spin(0.3)  # the keeper goes on profiling
pyroscope.shutdown()
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def bad_values(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad_values")
    good, bad = str(tmp / "good"), str(tmp / "bad")
    out = child(BAD_VALUES_CHILD, cases=[(c[0], c[1]) for c in BAD_KEYWORDS], bad_env=BAD_ENV,
                good_dir=good, bad_dir=bad)
    return out, good, bad


@pytest.mark.parametrize("case_id,kwargs,exc,named", BAD_KEYWORDS,
                         ids=[c[0] for c in BAD_KEYWORDS])
def test_bad_keyword_rejected(bad_values, case_id, kwargs, exc, named):
    out, _, _ = bad_values
    for phase in ("idle", "busy"):
        res = out[phase][case_id]
        assert res["error"] is not None, f"{kwargs} was accepted ({phase})"
        kind, msg = res["error"]
        assert kind in exc.split(), res
        assert named in msg, res
    # Rejected first configure: nothing runs. Rejected reconfigure: the
    # running configuration goes on.
    assert out["idle"][case_id]["running"] is False
    assert out["busy"][case_id]["running"] is True


@pytest.mark.parametrize("var,value", BAD_ENV, ids=[v for v, _ in BAD_ENV])
def test_bad_environment_value_rejected(bad_values, var, value):
    out, _, _ = bad_values
    for phase in ("env_idle", "env_busy"):
        res = out[phase][var]
        assert res["error"] is not None, f"{var}={value} was accepted"
        kind, msg = res["error"]
        assert kind == "ValueError" and var in msg, res
    assert out["env_idle"][var]["running"] is False
    assert out["env_busy"][var]["running"] is True


def test_rejected_reconfigure_keeps_old_profiler(bad_values):
    _, good, bad = bad_values
    names = files(good)
    assert names and all(n.startswith("keeper-cpu-") for n in names), names
    assert stacks_have(pprof_reader.load_dir(good), "spin")
    assert files(bad) == [], "a rejected configuration wrote profiles"


# ---------------------------------------------------------- environment

ENV = {
    "PYROSCOPE_APPLICATION_NAME": "env.app",
    "PYROSCOPE_SAMPLE_RATE": "250",
    "PYROSCOPE_TAGS": "k=v, k2=v2",
    "PYROSCOPE_UPLOAD_INTERVAL": "0.25",
    "PYROSCOPE_ONCPU": "false",
    "PYROSCOPE_GIL_ONLY": "false",
    "PYROSCOPE_REPORT_PID": "true",
    # No CPU budget: on a loaded machine a tick at 250-500 Hz can cost more
    # than 1 % of its interval, and these tests check the configured rate.
    "PYROSCOPE_SAMPLER_CPU_BUDGET": "0",
}

# A thread that waits in idle_wait: sampled only in wall mode without
# gil_only, since it is off-CPU and (blocked on a lock, with no timeout to
# wake it) never takes the GIL while profiled.
SLEEPER = '''
import threading
stop = threading.Event()
def idle_wait():
    stop.wait()
sleeper = threading.Thread(target=idle_wait)
sleeper.start()
'''


def test_environment_settings_apply(tmp_path):
    body = SLEEPER + '''
pyroscope.configure()
spin(0.6)
pyroscope.shutdown()
stop.set()
sleeper.join()
print(json.dumps({"pid": os.getpid()}))
'''
    out_dir = str(tmp_path / "env")
    with IngestServer() as srv:
        env = {**ENV, "PYROSCOPE_OUTPUT_DIR": out_dir, "PYROSCOPE_SERVER_ADDRESS": srv.url}
        out = child(body, env=env)
    # Every 0.25 s over >= 0.6 s: several uploads (the default is one per 10 s).
    assert len(srv.requests) >= 2, [r.query for r in srv.requests]
    for r in srv.requests:
        assert ingest_name(r.query["name"]) == ("env.app", {"k": "v", "k2": "v2"})
        assert r.query["sampleRate"] == "250"
    names = files(out_dir)
    assert names and all(n.startswith("env.app-wall-") for n in names), names
    profiles = pprof_reader.load_dir(out_dir)
    for p in profiles:
        assert p["sample_types"][0] == ("wall", "nanoseconds")
        assert p["period"] == 4_000_000  # 1e9 / 250 Hz
    labels = [s["labels"] for s in pprof_reader.samples(profiles)]
    assert labels and all(lb.get("pid") == str(out["pid"]) for lb in labels)
    assert stacks_have(profiles, "idle_wait"), "PYROSCOPE_GIL_ONLY=false was ignored"


def test_keywords_override_environment(tmp_path):
    # Two configurations in turn, each overriding some variables: the first
    # keeps wall mode from the environment so gil_only=True can be seen
    # (the sleeper disappears); the second turns on-CPU mode back on.
    body = SLEEPER + '''
pyroscope.configure(application_name="kw.one", output_dir=P["one"], gil_only=True,
                    sample_rate=500, tags={"k": "kw"}, report_pid=False,
                    upload_interval=10)
spin(0.6)
pyroscope.configure(application_name="kw.two", output_dir=P["two"], oncpu=True)
spin(0.2)
pyroscope.shutdown()
stop.set()
sleeper.join()
print(json.dumps({}))
'''
    env_dir, one, two = (str(tmp_path / n) for n in ("env", "one", "two"))
    with IngestServer() as srv:
        env = {**ENV, "PYROSCOPE_OUTPUT_DIR": env_dir, "PYROSCOPE_SERVER_ADDRESS": srv.url}
        child(body, env=env, one=one, two=two)
    assert files(env_dir) == []
    first = [r for r in srv.requests if r.query["name"].startswith("kw.one")]
    # upload_interval=10 beats 0.25: the 0.6 s run is one period.
    assert len(first) == 1, [r.query for r in srv.requests]
    app, tags = ingest_name(first[0].query["name"])
    assert tags["k"] == "kw"
    assert first[0].query["sampleRate"] == "500"
    p1 = pprof_reader.load_dir(one)
    assert all(n.startswith("kw.one-wall-") for n in files(one)) and p1
    assert all(p["period"] == 2_000_000 for p in p1)
    assert all("pid" not in s["labels"] for s in pprof_reader.samples(p1))
    # Without a GIL, gil_only=True is treated as False: the sleeper stays.
    assert stacks_have(p1, "spin")
    assert stacks_have(p1, "idle_wait") == bool(pyroscope._native.free_threaded)
    assert files(two) and all(n.startswith("kw.two-cpu-") for n in files(two))
    assert all(p["sample_types"][0] == ("cpu", "nanoseconds")
               for p in pprof_reader.load_dir(two))
    # Settings not given again come from the environment, not from kw.one.
    second = [r for r in srv.requests if r.query["name"].startswith("kw.two")]
    assert second and ingest_name(second[0].query["name"])[1] == {"k": "v", "k2": "v2"}
    assert second[0].query["sampleRate"] == "250"


# -------------------------------------------------------- destinations


def port_4040_server():
    """An ingest server on 127.0.0.1:4040 if that port is free, else None."""
    try:
        return IngestServer(port=4040).start()
    except OSError:
        return None


def test_default_destination_is_localhost_4040():
    body = '''
pyroscope.configure(application_name=P["app"], stop_timeout=1, sample_rate=200)
running = pyroscope.is_running()
spin(0.2)
t = time.monotonic()
pyroscope.shutdown()
print(json.dumps({"running": running, "took": time.monotonic() - t,
                  "stats": pyroscope.stats()}))
'''
    app = f"default.dest.{os.getpid()}"
    srv = port_4040_server()
    try:
        out = child(body, timeout=30, app=app)
    finally:
        if srv:
            srv.close()
    assert out["running"] is True
    assert out["took"] < 1 + 2, out
    s = out["stats"]
    if srv:
        # We own the port: the upload must have come here.
        assert any(user_name(r.query["name"]) == app for r in srv.requests), \
            [r.query for r in srv.requests]
        assert s["uploads_ok"] >= 1, s
    else:
        # Something else has the port: at least an upload was attempted
        # (the only exporter is HTTP; no output_dir was given).
        assert s["uploads_ok"] + s["uploads_failed"] + s["uploads_dropped"] + s["retries"] >= 1


def test_reconfigure_restarts_with_new_settings(tmp_path):
    body = '''
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    pyroscope.configure(app_name="one", output_dir=P["a"], sample_rate=200,
                        upload_interval=0.2)
spin(0.4)
pyroscope.configure(application_name="two", output_dir=P["b"], sample_rate=200,
                    upload_interval=0.2)
a_at_switch = sorted(os.listdir(P["a"]))
spin(0.4)
pyroscope.shutdown()
print(json.dumps({"a_at_switch": a_at_switch}))
'''
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    out = child(body, a=a, b=b)
    # The deprecated app_name alone names the application.
    # The replaced agent's stop runs on a thread of its own (configure does
    # not wait out a hanging upload), so its final, partial period may land
    # after configure returned (or be half-written, a temporary file, at the
    # switch): that one file and no more.
    at_switch = profile_files(out["a_at_switch"])
    assert at_switch and all(n.startswith("one-") for n in at_switch)
    later = [n for n in files(a) if n not in at_switch]
    assert len(later) <= 1, "the first configuration kept writing"
    assert files(b) and all(n.startswith("two-") for n in files(b))
    assert stacks_have(pprof_reader.load_dir(b), "spin")


# --------------------------------------------------------------- logging


def test_logging_goes_through_logger_pyroscope(tmp_path):
    body = '''
records = []

class Keep(logging.Handler):
    def emit(self, record):
        records.append([record.name, record.levelno, record.getMessage()])

logging.getLogger().addHandler(Keep())
log = logging.getLogger("pyroscope")
log.setLevel(logging.DEBUG)
pyroscope.configure(application_name="log.loud", output_dir=P["dir"], enable_logging=True)
pyroscope.shutdown()
loud = records[:]
del records[:]
log.setLevel(logging.NOTSET)  # back to the root's WARNING
pyroscope.configure(application_name="log.quiet", output_dir=P["dir"])
pyroscope.shutdown()
print(json.dumps({"loud": loud, "quiet": records}))
'''
    out = child(body, dir=str(tmp_path / "logs"))
    started = [r for r in out["loud"] if r[0] == "pyroscope" and r[1] == 20 and "log.loud" in r[2]]
    assert started, out["loud"]
    assert any(r[0] == "pyroscope" and "stopped" in r[2] for r in out["loud"]), out["loud"]
    # Without enable_logging, nothing below WARNING is reported.
    assert not [r for r in out["quiet"] if r[1] < 30], out["quiet"]


# ------------------------------------------------------------ deprecated

DEPRECATED = ["stop", "change_name", "tag", "remove_tags", "build_summary", "test_logger"]


def test_deprecated_functions_warn_and_do_nothing(tmp_path):
    body = '''
from pyroscope import _native
pyroscope.configure(application_name="dep", output_dir=P["dir"], sample_rate=200,
                    upload_interval=0.2)
calls = [("stop", ()), ("change_name", ("renamed",)), ("tag", ({"a": "b"},)),
         ("remove_tags", ("a",)), ("build_summary", ()), ("test_logger", ())]
seen = {}
for name, args in calls:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = getattr(pyroscope, name)(*args)
    seen[name] = {"warnings": [[w.category.__name__, str(w.message)] for w in caught],
                  "result": repr(result), "running": pyroscope.is_running(),
                  "labels": _native.labels_current()}
spin(0.3)
pyroscope.shutdown()
print(json.dumps(seen))
'''
    out_dir = str(tmp_path / "dep")
    seen = child(body, dir=out_dir)
    for name in DEPRECATED:
        res = seen[name]
        assert [c for c, _ in res["warnings"]] == ["DeprecationWarning"], (name, res)
        assert name in res["warnings"][0][1]
        assert res["result"] == "None" and res["running"] is True and res["labels"] == {}
    names = files(out_dir)
    assert names and all(n.startswith("dep-") for n in names), names


def test_deprecated_functions_in_process():
    # Without a running profiler too: a warning, no error, nothing started.
    for name in DEPRECATED:
        with pytest.warns(DeprecationWarning, match=name):
            assert getattr(pyroscope, name)() is None
    assert pyroscope.is_running() is False
