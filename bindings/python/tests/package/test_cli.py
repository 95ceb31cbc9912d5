"""The `python -m pyroscope` command line: `run` (a script or -m module, its
argv, exit status and report) and `report`, each in a subprocess; plus the
example app through the CLI."""

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import NO_BUDGET

import pprof_reader

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
SHOP = os.path.join(REPO, "examples", "python", "shop.py")

# Two functions that burn a known amount of their thread's CPU time, each in
# its own loop so the time is its own (leaf) time in the profile.
WORKLOAD = """
import sys, time

def hot_function(seconds):
    deadline = time.thread_time() + seconds
    n = 0
    while time.thread_time() < deadline:
        for i in range(500):
            n += i
    return n

def cold_function(seconds):
    deadline = time.thread_time() + seconds
    n = 0
    while time.thread_time() < deadline:
        for i in range(500):
            n -= i
    return n
"""


def run_cli(*args, cwd, env=None, timeout=60):
    """`python -m pyroscope ARGS` in a fresh interpreter, without the test
    runner's PYROSCOPE_* variables."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PYROSCOPE_")}
    full_env.update(NO_BUDGET)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "pyroscope", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def write(path, code):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(code))
    return path


def top_rows(text):
    """Function names of the top-functions table in `text`, in order."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines)
                 if "self%" in ln and ln.rstrip().endswith("function (file:line)"))
    rows = []
    for ln in lines[start + 1:]:
        if ln.count("%") < 2:
            break
        # samples, function, then file:line when the file is known
        rows.append(re.split(r"\s{2,}", ln.split("%", 2)[2].strip())[1])
    return rows


def profiles_in(folder, prefix):
    names = sorted(n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".pb.gz"))
    return [pprof_reader.decode((folder / n).read_bytes()) for n in names]


def assert_ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"


# ---------------------------------------------------------------------- run

def test_run_script_profiles_into_default_folder(tmp_path):
    write(tmp_path / "work.py", WORKLOAD + """
hot_function(0.6)
cold_function(0.15)
print("program output")
""")
    folder = tmp_path / "pyroscope-profiles"
    folder.mkdir()
    # A profile of an earlier run (unreadable, even): the report covers this
    # run's files only, so it must not trip over it.
    (folder / "old-cpu-1-2.pb.gz").write_bytes(b"not a profile")

    r = run_cli("run", "--sample-rate", "250", "--upload-interval", "0.3", "work.py",
                cwd=tmp_path)
    assert_ok(r)
    assert r.stdout == "program output\n"  # the report goes to stderr

    profiles = profiles_in(folder, "work-cpu-")  # named after the script
    assert profiles, os.listdir(folder)
    self_ns = pprof_reader.function_values(profiles)
    assert self_ns.get("hot_function", 0) > 2 * self_ns.get("cold_function", 0) > 0, self_ns

    html = (folder / "flamegraph.html").read_text()
    assert "hot_function" in html and "cold_function" in html
    assert top_rows(r.stderr)[0] == "hot_function", r.stderr
    assert "flamegraph.html" in r.stderr


def test_run_module_gets_argv_name_and_cwd_path(tmp_path):
    write(tmp_path / "mods" / "argvmod.py", WORKLOAD + """
import json
hot_function(0.3)
print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0]}))
""")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    out = tmp_path / "out"
    r = run_cli("run", "--output-dir", str(out), "--sample-rate", "250", "-m", "argvmod",
                "a b", "--sample-rate", "x", "-m", "y",
                cwd=cwd, env={"PYTHONPATH": str(tmp_path / "mods")})
    assert_ok(r)
    seen = json.loads(r.stdout)
    assert seen["argv"][0] == str(tmp_path / "mods" / "argvmod.py")
    # Everything after the module is the program's, options or not.
    assert seen["argv"][1:] == ["a b", "--sample-rate", "x", "-m", "y"]
    assert seen["name"] == "__main__"
    assert os.path.realpath(seen["path0"]) == os.path.realpath(cwd)
    assert profiles_in(out, "argvmod-cpu-")  # named after the module
    assert "hot_function" in (out / "flamegraph.html").read_text()
    assert not (cwd / "pyroscope-profiles").exists()


def test_run_script_argv_path_and_env_settings(tmp_path):
    write(tmp_path / "app" / "prog.py", WORKLOAD + """
import json
hot_function(0.3)
print(json.dumps({"argv": sys.argv, "path0": sys.path[0]}))
""")
    r = run_cli("run", "--sample-rate", "250", "app/prog.py", "--top", "1", "--", "-x",
                cwd=tmp_path,
                env={"PYROSCOPE_APPLICATION_NAME": "from-env",
                     "PYROSCOPE_OUTPUT_DIR": "env-out"})
    assert_ok(r)
    seen = json.loads(r.stdout)
    assert seen["argv"] == ["app/prog.py", "--top", "1", "--", "-x"]
    assert seen["path0"] == os.path.realpath(tmp_path / "app")
    # The environment's name and folder are used when no option is given.
    assert profiles_in(tmp_path / "env-out", "from-env-cpu-")
    assert (tmp_path / "env-out" / "flamegraph.html").exists()
    assert not (tmp_path / "pyroscope-profiles").exists()


def test_options_reach_configure(tmp_path, monkeypatch):
    """In-process with configure replaced: which keywords each flag sets
    (only the given ones, so the rest still come from the environment)."""
    import pyroscope
    from pyroscope import cli

    calls = []
    monkeypatch.setattr(pyroscope, "configure", lambda **kw: calls.append(kw))
    monkeypatch.setattr(pyroscope, "shutdown", lambda: None)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "noop.py", "pass\n")
    code = cli.main(["run", "--http-header", "X-Token=a=b", "--tag", "env=test",
                     "--tag", "zone=a", "--sample-rate", "50", "--upload-interval", "0.5",
                     "--no-oncpu", "--gil-only", "--report-pid", "--line-no", "first",
                     "--max-depth", "64", "--otlp-endpoint", "http://o:4318",
                     "--otlp-header", "k=v", "--resource-attributes", "team=a", "noop.py"])
    assert code == 0
    assert calls == [{
        "http_headers": {"X-Token": "a=b"},  # split on the first '='
        "tags": {"env": "test", "zone": "a"},
        "sample_rate": 50, "upload_interval": "0.5", "oncpu": False, "gil_only": True,
        "report_pid": True, "line_no": pyroscope.LineNo.First, "max_depth": 64,
        # issue 27: every configure keyword of the core's table is a flag (OTLP too)
        "otlp_endpoint": "http://o:4318", "otlp_headers": {"k": "v"},
        "resource_attributes": "team=a",
        "application_name": "noop",
        "output_dir": os.path.join(os.getcwd(), "pyroscope-profiles"),
    }]


@pytest.mark.parametrize("body, code, message", [
    ("import sys\nsys.exit(3)\n", 3, None),
    ("import sys\nsys.exit('bad thing')\n", 1, "bad thing"),
    ("raise KeyboardInterrupt\n", 130, "KeyboardInterrupt"),
])
def test_run_exit_status(tmp_path, body, code, message):
    write(tmp_path / "prog.py", body)
    r = run_cli("run", "prog.py", cwd=tmp_path)
    assert r.returncode == code, r.stderr
    if message:
        assert message in r.stderr


def test_run_exception_prints_traceback_then_reports(tmp_path):
    write(tmp_path / "crash.py", WORKLOAD + """
def fail_here():
    hot_function(0.4)
    raise ValueError("boom from the program")

fail_here()
""")
    r = run_cli("run", "--sample-rate", "250", "crash.py", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback (most recent call last)" in r.stderr
    assert 'crash.py", line' in r.stderr and "in fail_here" in r.stderr
    assert "ValueError: boom from the program" in r.stderr
    # The traceback starts at the program, not in the CLI or runpy.
    assert "runpy" not in r.stderr and "cli.py" not in r.stderr
    # The profiler was shut down (last period exported) and the report made.
    folder = tmp_path / "pyroscope-profiles"
    assert pprof_reader.function_values(profiles_in(folder, "crash-cpu-")).get("hot_function")
    assert "hot_function" in (folder / "flamegraph.html").read_text()


def test_run_waits_for_program_threads_before_shutdown(tmp_path):
    # The main module returns at once; the work happens on a non-daemon
    # thread afterwards, as `python prog.py` would let it.
    write(tmp_path / "threads.py", WORKLOAD + """
import threading

def thread_work():
    hot_function(0.5)
    print("thread done", flush=True)

threading.Thread(target=thread_work).start()
""")
    r = run_cli("run", "--sample-rate", "250", "threads.py", cwd=tmp_path)
    assert_ok(r)
    assert r.stdout == "thread done\n"
    profiles = profiles_in(tmp_path / "pyroscope-profiles", "threads-cpu-")
    # Had the profiler stopped when the main module returned, the thread's
    # 0.5 s would be (nearly) missing.
    assert pprof_reader.function_values(profiles).get("hot_function", 0) >= 0.2e9


def test_run_ctrl_c_exits_130_after_report(tmp_path):
    write(tmp_path / "spin.py", """
        import pathlib

        def spin_until_interrupted():
            pathlib.Path("started").touch()
            n = 0
            while True:
                n += 1

        spin_until_interrupted()
        """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYROSCOPE_")}
    # SIGINT must have its default action in the child for Python to turn
    # it into KeyboardInterrupt (a background test runner may ignore it).
    p = subprocess.Popen([sys.executable, "-m", "pyroscope", "run", "--sample-rate", "250",
                          "spin.py"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for _ in range(300):
            if (tmp_path / "started").exists() or p.poll() is not None:
                break
            time.sleep(0.05)
        time.sleep(0.5)  # let it burn a while
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=40)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, err
    assert "KeyboardInterrupt" in err
    folder = tmp_path / "pyroscope-profiles"
    assert "spin_until_interrupted" in (folder / "flamegraph.html").read_text()
    assert top_rows(err)[0] == "spin_until_interrupted"


def test_run_forked_child_leaves_the_report_to_the_parent(tmp_path):
    # The child leaves through SystemExit, which the CLI catches in the child
    # too; only the parent may write the report.
    write(tmp_path / "forks.py", WORKLOAD + """
import os
pid = os.fork()
hot_function(0.3)
if pid == 0:
    sys.exit(5)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status))
""")
    r = run_cli("run", "--sample-rate", "250", "forks.py", cwd=tmp_path)
    assert_ok(r)
    assert r.stdout == "child exit 5\n"
    assert r.stderr.count("flame graph:") == 1, r.stderr
    assert r.stderr.count("self%") == 1, r.stderr
    assert (tmp_path / "pyroscope-profiles" / "flamegraph.html").exists()


@pytest.mark.parametrize("args, named", [
    (["--sample-rate", "abc"], "--sample-rate"),
    # Out of range starts clamped (the anchors took those); no number at all
    # is still refused, by configure.
    (["--sample-rate", "nan"], "--sample-rate"),
    (["--upload-interval", "soon"], "--upload-interval"),
    (["--tag", "novalue"], "--tag"),
    (["--http-header", "NoEquals"], "--http-header"),
    (["--server-address", "ftp://host"], "--server-address"),
    (["--line-no", "sideways"], "--line-no"),
    (["--no-such-flag"], "--no-such-flag"),
])
def test_run_bad_option_exits_2_naming_it(tmp_path, args, named):
    write(tmp_path / "prog.py", "open('ran', 'w').close()\n")
    r = run_cli("run", *args, "prog.py", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert named in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "ran").exists()  # the program never started


@pytest.mark.parametrize("args, env, message", [
    (["prog.py"], {"PYROSCOPE_SAMPLE_RATE": "fast"}, "PYROSCOPE_SAMPLE_RATE"),
    (["missing.py"], {}, "missing.py"),
    (["-m", "no_such_module_here"], {}, "no_such_module_here"),
    ([], {}, "script or -m MODULE"),
])
def test_run_cannot_start_exits_2(tmp_path, args, env, message):
    write(tmp_path / "prog.py", "open('ran', 'w').close()\n")
    r = run_cli("run", *args, cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "ran").exists()


def test_run_help_lists_options(tmp_path):
    r = run_cli("run", "--help", cwd=tmp_path)
    assert_ok(r)
    for flag in ("--application-name", "--server-address", "--no-oncpu", "--tag",
                 "--http-header", "--output-dir", "-m module"):
        assert flag in r.stdout


def test_run_with_unreachable_server_exits_promptly(tmp_path):
    # A loopback port nobody listens on: uploads fail, shutdown's flush is
    # bounded, and nothing goes to a folder, so no report either.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    write(tmp_path / "work.py", WORKLOAD + "hot_function(0.5)\nprint('finished')\n")
    r = run_cli("run", "--server-address", f"http://127.0.0.1:{port}", "--upload-interval",
                "0.2", "--sample-rate", "250", "work.py", cwd=tmp_path, timeout=40)
    assert_ok(r)
    assert r.stdout == "finished\n"
    assert not (tmp_path / "pyroscope-profiles").exists()
    assert not list(tmp_path.rglob("flamegraph.html"))
    assert "flame graph" not in r.stderr


# ------------------------------------------------------------------- report

@pytest.fixture(scope="module")
def saved_profiles(tmp_path_factory):
    """A folder of profiles from one CLI run of the workload."""
    base = tmp_path_factory.mktemp("saved")
    write(base / "work.py", WORKLOAD + "hot_function(0.5)\ncold_function(0.1)\n")
    r = run_cli("run", "--sample-rate", "250", "--top", "0", "--output-dir", "profiles",
                "work.py", cwd=base)
    assert_ok(r)
    folder = base / "profiles"
    os.unlink(folder / "flamegraph.html")
    assert profiles_in(folder, "work-cpu-")
    return folder


def test_report_folder(tmp_path, saved_profiles):
    folder = tmp_path / "in"
    shutil.copytree(saved_profiles, folder)
    r = run_cli("report", str(folder), cwd=tmp_path)
    assert_ok(r)
    rows = top_rows(r.stdout)
    assert rows[0] == "hot_function" and "cold_function" in rows
    html = (folder / "flamegraph.html").read_text()
    assert "hot_function" in html
    assert re.search(r"\d+ profiles? read", r.stdout)


def test_report_file_with_output_top_and_title(tmp_path, saved_profiles):
    src = sorted(saved_profiles.glob("work-cpu-*.pb.gz"))[0]
    one = tmp_path / "one" / src.name
    one.parent.mkdir()
    shutil.copy(src, one)

    r = run_cli("report", str(one), "--output", "out.html", "--top", "1", "--title",
                "My title here", cwd=tmp_path)
    assert_ok(r)
    assert len(top_rows(r.stdout)) == 1
    assert "My title here" in (tmp_path / "out.html").read_text()
    assert not (one.parent / "flamegraph.html").exists()

    # Without --output the page goes next to the file.
    r = run_cli("report", str(one), cwd=tmp_path)
    assert_ok(r)
    assert (one.parent / "flamegraph.html").exists()


def test_report_type_is_a_folder_type_or_a_sample_type(tmp_path, saved_profiles):
    # The core's rule, as in Node and Ruby: a folder's profile type picks its
    # files; another type is a sample type, and none with it is a usage error
    # naming the types the folder has.
    folder = tmp_path / "in"
    shutil.copytree(saved_profiles, folder)
    r = run_cli("report", str(folder), "--type", "cpu", "--top", "1", cwd=tmp_path)
    assert_ok(r)
    assert (folder / "flamegraph.html").exists()
    r = run_cli("report", str(folder), "--type", "inuse_space", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"--type: no inuse_space profiles in {folder} (there are: cpu)" in r.stderr, r.stderr
    assert not (folder / "flamegraph-inuse_space.html").exists()


@pytest.mark.parametrize("kind", ["missing", "empty folder", "not a profile"])
def test_report_bad_path_exits_2_unreadable_1(tmp_path, kind):
    # The core's report command, as in Node and Ruby: a path that is not
    # there or holds no profile is a usage error (2, the usage follows); a
    # profile that cannot be read is 1.
    status, usage = 2, True
    if kind == "missing":
        path, message = tmp_path / "nowhere", "nowhere: no such file or folder"
    elif kind == "empty folder":
        path, message = tmp_path / "empty", "no profiles"
        path.mkdir()
    else:
        path, message = tmp_path / "junk.pb.gz", "junk.pb.gz: gunzip: corrupt gzip data"
        path.write_bytes(b"\x1f\x8b not gzip")
        status, usage = 1, False
    r = run_cli("report", str(path), cwd=tmp_path)
    assert r.returncode == status, r.stdout + r.stderr
    assert r.stderr.startswith("pyroscope: ") and message in r.stderr
    assert ("\nusage: python -m pyroscope report PATH..." in r.stderr) == usage, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert not list(tmp_path.rglob("flamegraph.html"))


def test_report_command_line_is_the_cores(tmp_path, saved_profiles):
    # -h, the flags' messages and --diff alone with two paths (the first
    # against the second by source), as the C test checks the parser.
    r = run_cli("report", "-h", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m pyroscope report PATH...")
    assert "--diff A B" in r.stdout and r.stderr == ""
    for args, message in ((["--top", "-1"], '--top: "-1" is not a whole number >= 0'),
                          (["--filter", "phase"], '--filter: expected KEY=VALUE, got "phase"'),
                          (["--bogus"], "--bogus: unknown option"),
                          (["--diff"], "--diff: takes two selections")):
        r = run_cli("report", str(saved_profiles), *args, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.startswith("pyroscope: " + message), r.stderr
    r = run_cli("report", cwd=tmp_path)
    assert r.returncode == 2 and "PATH: a profile file or folder is required" in r.stderr
    src = sorted(saved_profiles.glob("work-cpu-*.pb.gz"))[0]
    a, b = tmp_path / "a.pb.gz", tmp_path / "b.pb.gz"
    shutil.copy(src, a)
    shutil.copy(src, b)
    r = run_cli("report", str(a), str(b), "--diff", "-o", "d.html", cwd=tmp_path)
    assert_ok(r)
    assert f"A: source={a} (total" in r.stdout and f"B: source={b} (total" in r.stdout
    assert re.search(r"^2 profiles read, flame graph: d\.html$", r.stdout, re.M), r.stdout


def test_report_words_need_not_be_utf8(tmp_path, saved_profiles):
    # A file name that is not UTF-8 (sys.argv has it surrogate-escaped), and
    # a message cut short inside a character (a long non-ASCII path): the
    # core's words, not a UnicodeError traceback (they were).
    folder = tmp_path / os.fsdecode(b"prof-\xff")
    folder.mkdir()
    shutil.copy(sorted(saved_profiles.glob("work-cpu-*.pb.gz"))[0], folder)
    # (the core's log line names the path as its bytes are)
    r = subprocess.run([sys.executable, "-m", "pyroscope", "report", str(folder), "--top", "1"],
                       cwd=tmp_path, env={**os.environ, **NO_BUDGET}, capture_output=True,
                       text=True, errors="replace", timeout=60)
    assert "Traceback" not in r.stderr, r.stderr
    assert_ok(r)
    assert re.search(r"^1 profile read, flame graph: .*prof-\ufffd/flamegraph\.html$", r.stdout,
                     re.M), r.stdout
    for pad in ("x", "xx", "xxx"):
        r = run_cli("report", f"{tmp_path}/{pad}" + "日本語のフォルダ/" * 25 + "p.pb", cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.startswith("pyroscope: "), r.stderr
        assert "Traceback" not in r.stderr, r.stderr


# ------------------------------------------------------------------ example

def test_example_shop_shape(tmp_path):
    """examples/python/shop.py through the CLI: 50/30/20 across its three
    steps, both endpoints tagged, requests linked to spans."""
    # All threads are sampled (--no-gil-only), each charged its own CPU
    # clock: the shape's only noise is then which step a tick lands in. In
    # gil_only mode (the default, what `make demo` shows) the GIL holder is
    # charged the whole interval, preemption by other processes included,
    # so on a busy machine its shares vary with the scheduler's time
    # slices, not with the number of samples.
    #
    # With n samples a share p has a sampling noise of sqrt(p(1-p)/n): at
    # n >= 400 that is at most 2.5 points, so the bounds below are 4 to 6
    # sigma wide. An idle machine takes ~500 samples in one 1.5 s run; on a
    # busy one, where the example serves fewer requests, runs are added
    # (pooled) until there are 400, at most 60 s.
    profiles, runs = [], 0
    deadline = time.monotonic() + 60
    steps = ("parse_order", "price_cart", "render_receipt")
    while True:
        out = f"out{runs}"
        r = run_cli("run", "--sample-rate", "250", "--upload-interval", "0.5", "--no-gil-only",
                    "--output-dir", out, SHOP, "--seconds", "1.5", cwd=tmp_path)
        assert_ok(r)
        assert "shop: served" in r.stdout
        runs += 1
        profiles += pprof_reader.load_dir(tmp_path / out)
        n = sum(s["values"][1] for s in pprof_reader.samples(profiles)
                if s["stack"] and s["stack"][0][0] in steps)
        if n >= 400 or time.monotonic() > deadline:
            break
    assert n >= 400, f"only {n} samples of the steps in {runs} runs (60 s)"
    self_ns = pprof_reader.function_values(profiles)
    steps = {k: self_ns.get(k, 0) for k in steps}
    total = sum(steps.values())
    share = {k: v / total for k, v in steps.items()}
    assert 0.38 <= share["parse_order"] <= 0.62, share
    assert 0.18 <= share["price_cart"] <= 0.42, share
    assert 0.10 <= share["render_receipt"] <= 0.32, share
    assert share["parse_order"] > max(share["price_cart"], share["render_receipt"]), share

    # Labels by the steps' CPU time. The sampler reads a thread's stack and
    # its labels a moment apart, so a sample at a request's edge may carry
    # the labels of just before or after: allow a few percent of those.
    step_samples = [s for s in pprof_reader.samples(profiles)
                    if s["stack"] and s["stack"][0][0] in steps]
    by_endpoint = {}
    for s in step_samples:
        ep = s["labels"].get("endpoint")
        by_endpoint[ep] = by_endpoint.get(ep, 0) + s["values"][0]
    assert by_endpoint.get("/checkout", 0) > 0.3 * total, by_endpoint
    assert by_endpoint.get("/cart", 0) > 0.3 * total, by_endpoint
    assert by_endpoint.get("/checkout", 0) + by_endpoint.get("/cart", 0) > 0.95 * total
    if importlib.util.find_spec("opentelemetry.sdk") is not None:
        linked = [s for s in step_samples
                  if re.fullmatch(r"[0-9a-f]{16}", s["labels"].get("span_id", ""))]
        assert sum(s["values"][0] for s in linked) > 0.95 * total
        assert {s["labels"].get("span_name") for s in linked} == {"POST /checkout", "POST /cart"}
    assert "parse_order" in (tmp_path / "out0" / "flamegraph.html").read_text()


def test_output_dir_that_cannot_be_made_is_the_reported_cause(tmp_path):
    # Issue 31: the folder error was logged, then "no profiles were written
    # ... the program ran too briefly".
    prog = write(tmp_path / "prog.py", "print('ran')\n")
    r = run_cli("run", "--output-dir", "/dev/null/x", str(prog), cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "--output-dir" in r.stderr and "Not a directory" in r.stderr, r.stderr
    assert "too briefly" not in r.stderr and "ran" not in r.stdout, (r.stdout, r.stderr)
    # The folder goes away while the program runs: the writes' failure is
    # the reason given for the missing flame graph.
    out = tmp_path / "out"
    prog = write(tmp_path / "gone.py", f"""
        import os, shutil, time
        shutil.rmtree({str(out)!r})
        open({str(out)!r}, "w").close()
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
    """)
    r = run_cli("run", "--output-dir", str(out), str(prog), cwd=tmp_path)
    assert "writing failed" in r.stderr and "too briefly" not in r.stderr, r.stderr
