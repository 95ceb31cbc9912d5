"""The report shows what the profiler knows: static tags and tag_wrapper
labels to filter and break down by, functions keyed by name and file with
file:line, sample counts, and the CLI's own frames hidden. The HTML page is
loaded in headless Chromium (driven by its URL fragment) and what it draws
is compared with what `report` prints for the same filter, breakdown and
diff."""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import urllib.parse

import pytest

import pprof_reader
from conftest import check_run
from ingest_server import IngestServer
from test_cli import WORKLOAD

APP = """
import time
import pyroscope
import moda, modb

# CPU time, not wall time: on a loaded machine every route still gets its
# share of samples.
for _ in range(8):
    with pyroscope.tag_wrapper({"route": "/a"}):
        moda.work(0.06)
    with pyroscope.tag_wrapper({"route": "/b"}):
        modb.work(0.03)
"""

# The same function in two files (moda.py, modb.py): the report must keep
# the two apart.
WORK = WORKLOAD + "\nwork = hot_function\n"


def run_cli(*args, cwd, umask=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYROSCOPE_")}
    return subprocess.run([sys.executable, "-m", "pyroscope", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def assert_ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    base = tmp_path_factory.mktemp("routes")
    (base / "app.py").write_text(textwrap.dedent(APP))
    (base / "moda.py").write_text(WORK)
    (base / "modb.py").write_text(WORK)
    r = run_cli("run", "--sample-rate", "250", "--tag", "env=dev", "--output-dir", "out",
                "--top", "10", "app.py", cwd=base, umask=0o077)
    assert_ok(r)
    return base, r


def table_rows(text, header_word):
    """Rows of the text table whose header line contains header_word, each
    split on runs of two or more spaces."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if header_word in ln)
    rows = []
    for ln in lines[start + 1:]:
        if not ln.strip() or "%" not in ln:
            break
        rows.append(re.split(r"\s{2,}", ln.strip()))
    return rows


def test_folder_profiles_carry_static_tags_and_labels(recorded):
    base, _ = recorded
    samples = pprof_reader.samples(pprof_reader.load_dir(base / "out"))
    assert samples and all(s["labels"].get("env") == "dev" for s in samples)
    assert {s["labels"].get("route") for s in samples} >= {"/a", "/b"}

    r = run_cli("report", "out", "--group-by", "env", "--top", "0", cwd=base)
    assert_ok(r)
    rows = table_rows(r.stdout, "share")
    assert [row[-1] for row in rows] == ["dev"] and rows[0][1] == "100.00%"


def test_functions_by_name_and_file_without_cli_frames(recorded):
    base, run = recorded
    for text in (run.stderr, run_cli("report", "out", cwd=base).stdout):
        names = [row[-2] if ":" in row[-1] else row[-1]
                 for row in table_rows(text, "function (file:line)")]
        assert "hot_function (moda.py)" in names and "hot_function (modb.py)" in names, text
        assert re.search(r"hot_function \(moda\.py\)\s+\S*moda\.py:\d+", text), text
        for launcher in ("_run_program", "run_path", "_run_code", "_run "):
            assert launcher not in text, text


def test_samples_are_counted_not_rows(recorded):
    base, _ = recorded
    profiles = pprof_reader.load_dir(base / "out")
    idx = [t for t, _ in profiles[0]["sample_types"]].index("samples")
    expected = sum(s["values"][idx] for s in pprof_reader.samples(profiles))
    r = run_cli("report", "out", cwd=base)
    assert_ok(r)
    m = re.search(r"Total cpu time \(([^)]+)\) in \d+ profiles?, (\d+) samples", r.stdout)
    assert m and int(m.group(2)) == expected, r.stdout


def test_page_mode_follows_the_umask(recorded, tmp_path):
    base, _ = recorded
    profile = next((base / "out").glob("*.pb.gz"))
    assert stat.S_IMODE(profile.stat().st_mode) == 0o600  # recorded under umask 077
    for umask, mode in ((0o077, 0o600), (0o022, 0o644)):
        page = tmp_path / f"page-{umask:o}.html"
        assert_ok(run_cli("report", "out", "-o", str(page), cwd=base, umask=umask))
        assert stat.S_IMODE(page.stat().st_mode) == mode


def test_filter_breakdown_and_diff_in_the_text_report(recorded):
    base, _ = recorded
    all_ = run_cli("report", "out", "--group-by", "route", "--top", "0", cwd=base)
    assert_ok(all_)
    by_route = {row[-1]: row for row in table_rows(all_.stdout, "share")}
    assert set(by_route) - {"(none)"} == {"/a", "/b"}  # (none): before the first tag
    only_b = run_cli("report", "out", "--filter", "route=/b", cwd=base)
    assert_ok(only_b)
    m = re.search(r"Total cpu time \(([^)]+)\) in \d+ profiles?, (\d+) samples selected",
                  only_b.stdout)
    assert m and m.group(1) == by_route["/b"][0] and m.group(2) == by_route["/b"][2]
    assert "hot_function (moda.py)" not in only_b.stdout

    diff = run_cli("report", "out", "--diff", "route=/a", "route=/b", cwd=base)
    assert_ok(diff)
    rows = {row[-2]: row for row in table_rows(diff.stdout, "B self")}
    assert rows["hot_function (moda.py)"][4].startswith("-") and rows["hot_function (modb.py)"][4].startswith("+")

    bad = run_cli("report", "out", "--diff", "route", cwd=base)
    assert bad.returncode == 2 and "--diff" in bad.stderr


# ------------------------------------------------------------ the page

def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def page_dom(page, fragment):
    """The page's DOM after its script ran on #fragment, from headless
    Chromium (file URL, no network)."""
    browser = chromium()
    if browser is None:
        pytest.skip("chromium is not installed (make deps installs it)")
    url = page.resolve().as_uri() + "#" + fragment
    r = subprocess.run([browser, "--headless", "--disable-gpu", "--no-sandbox",
                        "--no-first-run", "--disable-extensions", "--virtual-time-budget=5000",
                        f"--user-data-dir={page.parent / '.chromium'}", "--dump-dom", url],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'data-ready="1"' in r.stdout, "the page's script did not finish:\n" + r.stderr[-2000:]
    return r.stdout


def dom_rows(dom, table_id):
    """Cell texts of the rows of <table id=table_id> in a dumped DOM."""
    m = re.search(r'<table id="%s">(.*?)</table>' % table_id, dom, re.S)
    assert m, table_id
    body = m.group(1).split("<tbody>", 1)[1]
    rows = []
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        rows.append([urllib.parse.unquote(c).replace("&amp;", "&").replace("&lt;", "<")
                     .replace("&gt;", ">") for c in cells])
    return rows


def test_page_filter_and_breakdown_match_report(recorded, tmp_path):
    base, _ = recorded
    page = tmp_path / "page.html"
    r = run_cli("report", str(base / "out"), "--output", str(page), "--filter", "route=/a",
                "--group-by", "env", "--top", "5", cwd=base)
    assert_ok(r)
    dom = page_dom(page, urllib.parse.urlencode({"filter": "route=/a", "group": "env"}))

    # Breakdown: value, share, samples per label value.
    text_bd = [row[:3] + [row[-1]] for row in table_rows(r.stdout, "share")]
    assert dom_rows(dom, "bd") == text_bd

    # Top table: self, self%, total, total%, samples, function, file:line.
    text_top = table_rows(r.stdout, "function (file:line)")
    page_top = dom_rows(dom, "top")[:len(text_top)]
    assert [row[:6] for row in page_top] == [row[:6] for row in text_top]
    assert page_top[0][5] == "hot_function (moda.py)" and page_top[0][6].endswith("moda.py:" +
                                                                         text_top[0][6].split(":")[-1])
    m = re.search(r'id="summary" data-total="(\d+)" data-samples="(\d+)"', dom)
    t = re.search(r"Total cpu time \([^)]+\) in \d+ profiles?, (\d+) samples", r.stdout)
    assert m and t and m.group(2) == t.group(1)


def test_page_diff_matches_report(recorded, tmp_path):
    base, _ = recorded
    page = tmp_path / "diff.html"
    r = run_cli("report", str(base / "out"), "--output", str(page), "--diff", "route=/a",
                "route=/b", cwd=base)
    assert_ok(r)
    dom = page_dom(page, urllib.parse.urlencode({"diff": "", "a": "route=/a", "b": "route=/b"}))
    text_rows = table_rows(r.stdout, "B self")
    page_rows = dom_rows(dom, "top")
    assert len(page_rows) == len(text_rows)
    assert [row[:6] for row in page_rows] == [row[:6] for row in text_rows]


def test_flush_is_false_after_a_failed_upload(tmp_path):
    code = """
    import json, sys, time, pyroscope
    pyroscope.configure(application_name="flush.fail", server_address=sys.argv[1],
                        sample_rate=250, upload_interval=60, stop_timeout=5)
    deadline = time.thread_time() + 0.2
    while time.thread_time() < deadline:
        pass
    ok = pyroscope.flush(timeout=20)
    stats = pyroscope.stats()
    pyroscope.shutdown()
    print(json.dumps({"ok": ok, "failed": stats["uploads_failed"]}))
    """
    with IngestServer(status=400, message="rejected") as srv:
        r = check_run(code, args=(srv.url,), timeout=60)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["failed"] >= 1 and out["ok"] is False, out
