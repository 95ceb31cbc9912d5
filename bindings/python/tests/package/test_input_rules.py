"""Hostile input at the API's edges: NUL characters in strings the core reads
as C strings, environment variables that are bad or not UTF-8 next to
keywords that win, credentials in a malformed address, out-of-range flush
timeouts, and configure from a sub-interpreter. Each is a clear error
naming the setting, never a silently changed value or a crash."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import pprof_reader
import pyroscope
from conftest import check_run, run_python

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def running(tmp_path):
    out = str(tmp_path / "p")
    pyroscope.configure(application_name="rules", output_dir=out, upload_interval=60)
    yield out
    pyroscope.shutdown()


# ------------------------------------------------------------------ NUL

NUL_CASES = [
    ("tags", dict(tags={"k": "ok\x00{,=}"}), "tags"),
    ("tag key", dict(tags={"k\x00x": "v"}), "tags"),
    ("application_name", dict(application_name="app\x00x"), "application_name"),
    ("server_address", dict(server_address="http://h\x00evil"), "server_address"),
    ("header value", dict(http_headers={"X-A": "v\x00w"}), "http_headers"),
    ("tenant_id", dict(tenant_id="t\x00"), "tenant_id"),
    ("basic_auth_username", dict(basic_auth_username="u\x00"), "basic_auth_username"),
    ("basic_auth_password", dict(basic_auth_username="u", basic_auth_password="p\x00w"),
     "basic_auth_password"),
    ("output_dir", dict(output_dir="/tmp/a\x00b"), "output_dir"),
    ("log_level", dict(log_level="debug\x00"), "log_level"),
]


@pytest.mark.parametrize("case,kwargs,named", NUL_CASES, ids=[c[0] for c in NUL_CASES])
def test_nul_in_a_setting_is_rejected(tmp_path, case, kwargs, named):
    base = dict(application_name="nul", output_dir=str(tmp_path / "out"))
    with pytest.raises(ValueError) as err:
        pyroscope.configure(**{**base, **kwargs})
    assert named in str(err.value) and "NUL" in str(err.value), str(err.value)
    assert not pyroscope.is_running()


def test_nul_in_a_label_is_made_u_fffd(running):
    # Never cut at the NUL, never raised (issue 28): the character becomes U+FFFD.
    with pyroscope.tag_wrapper({"k": "ok\x00{,=}"}):
        assert pyroscope._native.context_labels() == {"k": "ok\ufffd{,=}"}
    pyroscope.add_thread_tag("k", "ok\x00x")
    assert pyroscope._native.labels_current() == {"k": "ok\ufffdx"}
    pyroscope.remove_thread_tag("k", "ok\x00x")
    pyroscope.add_thread_tag("k\x00", "x")
    assert pyroscope._native.labels_current() == {"k_": "x"}
    pyroscope.remove_thread_tag("k\x00", "x")
    assert pyroscope._native.labels_current() == {}


# ------------------------------------------------------------ environment

def test_keyword_wins_over_a_bad_environment_value(tmp_path):
    # The README: a keyword wins. Then the variable is not even parsed.
    out = str(tmp_path / "out")
    code = '''
import json, sys, pyroscope
pyroscope.configure(application_name="kw", output_dir=sys.argv[1], sample_rate=200,
                    upload_interval=60, tags={"k": "v"}, server_address="")
running = pyroscope.is_running()
pyroscope.shutdown()
print(json.dumps({"running": running}))
'''
    env = {"PYROSCOPE_SAMPLE_RATE": "fast", "PYROSCOPE_TAGS": "no pairs",
           "PYROSCOPE_SERVER_ADDRESS": "ftp://x", "PYROSCOPE_UPLOAD_INTERVAL": "-1"}
    r = check_run(code, env=env, args=(out,))
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"running": True}
    # Without the keyword the same variable is still refused, by name.
    r = run_python('import pyroscope\npyroscope.configure(application_name="x", '
                   'output_dir="/tmp/unused-pyroscope-dir")', env={"PYROSCOPE_SAMPLE_RATE": "fast"})
    assert r.returncode != 0 and "PYROSCOPE_SAMPLE_RATE" in r.stderr, r.stderr


def run_with_raw_env(code, raw_env):
    """Run code in a child whose environment holds raw (non-UTF-8) bytes."""
    env = {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()
           if not k.startswith("PYROSCOPE_")}
    env[b"PYTHONPATH"] = os.fsencode(HERE)
    env.update(raw_env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("var", [b"PYROSCOPE_TAGS", b"PYROSCOPE_BASIC_AUTH_PASSWORD",
                                 b"PYROSCOPE_APPLICATION_NAME"])
def test_non_utf8_environment_value_names_the_variable(var):
    code = '''
import pyroscope
try:
    pyroscope.configure(application_name="x", output_dir="/tmp/unused-pyroscope-dir",
                        basic_auth_username="u")
except ValueError as e:
    print("ValueError:", e)
'''
    raw = {var: b"s3cr\xffet"}
    if var == b"PYROSCOPE_APPLICATION_NAME":
        code = code.replace('application_name="x", ', "")
    r = run_with_raw_env(code, raw)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ValueError:"), r.stdout + r.stderr
    assert var.decode() in r.stdout and "UTF-8" in r.stdout and "0xff" in r.stdout, r.stdout
    assert "s3cr" not in r.stdout  # the value (maybe a password) is not shown


def test_non_utf8_environment_value_of_a_given_keyword_is_not_read():
    code = '''
import pyroscope
pyroscope.configure(application_name="x", output_dir="/tmp/unused-pyroscope-dir",
                    tags={"k": "v"}, upload_interval=60)
pyroscope.shutdown()
print("ok")
'''
    r = run_with_raw_env(code, {b"PYROSCOPE_TAGS": b"k=\xff"})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


# ----------------------------------------------------------- credentials

@pytest.mark.parametrize("address", [
    "http://bob:hunter2@127.0.0.1:99999",   # refused by libcurl at start
    "ftp://bob:hunter2@example.com",        # refused by the scheme rule
    "http://bob:hunter2@host/?query",       # refused by the query rule
])
def test_malformed_address_never_shows_the_password(address):
    code = '''
import logging, sys, pyroscope
logging.basicConfig(level=logging.DEBUG)
try:
    pyroscope.configure(application_name="x", server_address=sys.argv[1], enable_logging=True)
except ValueError as e:
    print("ValueError:", e)
'''
    r = check_run(code, args=(address,))
    assert r.stdout.startswith("ValueError:"), r.stdout + r.stderr
    assert "bob:***@" in r.stdout and "server_address" in r.stdout, r.stdout
    assert "hunter2" not in r.stdout + r.stderr
    # The same through the environment.
    r = check_run(code.replace("server_address=sys.argv[1], ", ""), args=(address,),
                  env={"PYROSCOPE_SERVER_ADDRESS": address})
    assert "bob:***@" in r.stdout and "hunter2" not in r.stdout + r.stderr, r.stdout


# ----------------------------------------------------------------- flush

@pytest.mark.parametrize("bad", [float("inf"), float("nan"), -1, -0.5, "1"])
def test_flush_rejects_bad_timeouts(bad):
    with pytest.raises((ValueError, TypeError)) as err:
        pyroscope.flush(bad)
    assert "timeout" in str(err.value)
    # The native entry point checks too.
    if not isinstance(bad, str):
        with pytest.raises(ValueError, match="timeout"):
            pyroscope._native.flush(bad)


def test_flush_with_a_huge_timeout_is_bounded(running):
    # 1e10 s of nanoseconds does not fit an int64_t: clamped, and done.
    assert pyroscope.flush(1e10) is True
    # an int no float holds: as long (it was an OverflowError)
    assert pyroscope.flush(10**400) is True
    assert pyroscope.flush(0) in (True, False)


# ------------------------------------------------------- sub-interpreters

def test_configure_from_a_sub_interpreter_is_refused(tmp_path):
    try:
        import _testcapi  # noqa: F401
    except ImportError:
        pytest.skip("_testcapi (run_in_subinterp) is not available")
    main_dir, sub_dir = str(tmp_path / "main"), str(tmp_path / "sub")
    code = '''
import json, sys, time, _testcapi, pyroscope
# gil_only=False: the GIL's last holder stays the sub-interpreter's thread
# state until the GIL changes hands (a walker matter, not this test's).
pyroscope.configure(application_name="main.app", output_dir=sys.argv[1], upload_interval=60,
                    gil_only=False)
sub = """
import json
out = {}
try:
    import pyroscope
except ImportError as e:  # free-threaded CPython: no single-phase modules there
    out["import"] = str(e)
    calls = ()
else:
    calls = (("configure", lambda: pyroscope.configure(application_name="sub.app",
                                                       output_dir=%r)),
             ("shutdown", pyroscope.shutdown))
for name, call in calls:
    try:
        call()
        out[name] = None
    except RuntimeError as e:
        out[name] = str(e)
open(%r, "w").write(json.dumps(out))
""" % (sys.argv[2], sys.argv[3])
rc = _testcapi.run_in_subinterp(sub)
running = pyroscope.is_running()
end = time.thread_time() + 0.3
while time.thread_time() < end:
    pass
pyroscope.shutdown()
print(json.dumps({"rc": rc, "running": running}))
'''
    result = str(tmp_path / "sub.json")
    r = check_run(code, args=(main_dir, sub_dir, result))
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"rc": 0, "running": True}, r.stderr
    sub = json.load(open(result))
    if pyroscope._native.free_threaded:
        # A free-threaded CPython loads no single-phase-init extension in a
        # sub-interpreter: the package cannot even be imported there.
        assert "does not support loading in subinterpreters" in sub["import"], sub
        return
    for name in ("configure", "shutdown"):
        assert sub[name] and "sub-interpreter" in sub[name], sub
    assert not os.path.exists(sub_dir)
    names = os.listdir(main_dir)
    assert names and all(n.startswith("main.app-") for n in names), names
    assert pprof_reader.load_dir(main_dir)
