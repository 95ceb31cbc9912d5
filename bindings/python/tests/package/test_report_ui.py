"""The report page as a user drives it: headless Chromium over the DevTools
protocol (headless.py) clicks rows and checkboxes, drags across the
timeline and measures the layout at 1500 and 1920 px; the numbers the page
shows are checked against `report`'s text and the profiles themselves."""
import os
import re
import textwrap
import urllib.parse

import pytest

import pprof_reader
from headless import Browser

# The page is the C core's, the same under every interpreter: `make test`
# drives it from its first Python lane only (the others set this).
pytestmark = pytest.mark.skipif(os.environ.get("PN_PAGE_UI_ONCE") == "skip",
                                reason="the page's browser tests run in the first Python lane")
from test_report_page import assert_ok, run_cli, table_rows

APP = """
import time
import pyroscope
from opentelemetry.sdk.trace import TracerProvider
from pyroscope.otel import PyroscopeSpanProcessor
import moda, modb

provider = TracerProvider()
provider.add_span_processor(PyroscopeSpanProcessor())
tracer = provider.get_tracer("ui")

# CPU time, not wall time: on a loaded machine every part still gets its
# share of samples. Untagged work first: the "(none)" rows.
moda.work(0.15)
for i in range(6):
    with tracer.start_as_current_span("checkout" if i % 2 else "cart"):
        with pyroscope.tag_wrapper({"route": "/checkout" if i % 2 else "/cart"}):
            (modb if i % 2 else moda).work(0.12 if i % 2 else 0.05)
modb.work(0.3)  # a late spike of its own
"""

WORK = """
import time

def work(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    base = tmp_path_factory.mktemp("ui")
    (base / "app.py").write_text(textwrap.dedent(APP))
    (base / "moda.py").write_text(WORK)
    (base / "modb.py").write_text(WORK)
    r = run_cli("run", "--sample-rate", "250", "--upload-interval", "0.2",
                "--output-dir", "out", "--top", "5", "app.py", cwd=base)
    assert_ok(r)
    assert len(list((base / "out").glob("*.pb.gz"))) >= 3
    return base


def page_of(base, tmp_path, *args):
    page = tmp_path / "page.html"
    assert_ok(run_cli("report", "out", "--output", str(page), *args, cwd=base))
    return page


def url(page, **view):
    return page.resolve().as_uri() + ("#" + urllib.parse.urlencode(view) if view else "")


def rows(b, table):
    return b.js(f"Array.from(document.querySelectorAll('#{table} tbody tr')).map("
                "tr => Array.from(tr.cells).map(td => td.textContent))")


def summary(b):
    return b.js("(function (s) { return {total: +s.dataset.total, samples: +s.dataset.samples,"
                " text: s.textContent}; })(document.getElementById('summary'))")


def test_diff_with_a_breakdown_shows_shares_of_the_selection(recorded, tmp_path):
    page = page_of(recorded, tmp_path)
    with Browser() as b:
        b.open(url(page, group="route", diff="", a="route=/cart", b="route=/checkout"))
        shares = [float(r[1].rstrip("%")) for r in rows(b, "bd")]
    assert shares and all(0 <= s <= 100 for s in shares), shares
    assert abs(sum(shares) - 100) < 0.1, shares


def test_none_row_selects_the_samples_without_the_label(recorded, tmp_path):
    page = page_of(recorded, tmp_path)
    with Browser() as b:
        b.open(url(page, group="span_id"))
        none = b.js("(function () { var tr = document.querySelector('#bd tr[data-label=\"(none)\"]');"
                    " return tr && [+tr.dataset.value, +tr.dataset.count]; })()")
        assert none and none[1] > 0
        b.click('#bd tr[data-label="(none)"]')
        s = summary(b)
        assert (s["total"], s["samples"]) == tuple(none), s
        assert b.js("document.getElementById('filter').value") == "span_id=(none)"
    # The CLI selects the same samples.
    r = run_cli("report", "out", "--filter", "span_id=(none)", "--top", "1",
                "-o", str(tmp_path / "cli.html"), cwd=recorded)
    assert_ok(r)
    m = re.search(r"in \d+ profiles?, (\d+) samples selected", r.stdout)
    assert m and int(m.group(1)) == none[1], r.stdout
    g = run_cli("report", "out", "--group-by", "span_id", "--top", "0",
                "-o", str(tmp_path / "cli.html"), cwd=recorded)
    by = {row[-1]: row for row in table_rows(g.stdout, "share")}
    assert int(by["(none)"][2]) == none[1]


@pytest.mark.parametrize("width", [1500, 1920])
def test_file_line_column_is_in_sight(recorded, tmp_path, width):
    page = page_of(recorded, tmp_path)
    with Browser(width=width, height=1000) as b:
        for view in ({"group": ""}, {"group": "route"}):
            b.open(url(page, **view))
            b.js("window.scrollTo(0, document.getElementById('top').getBoundingClientRect().top"
                 " + window.scrollY - 40)")
            cells = b.js("""Array.from(document.querySelectorAll('#top tbody tr')).slice(0, 8).map(tr => {
                var td = tr.cells[6], r = td.getBoundingClientRect(), sec = td.closest('section');
                return {name: tr.cells[5].textContent, text: td.textContent, right: r.right, width: r.width, scroll: td.scrollWidth,
                        client: td.clientWidth, sec: sec.getBoundingClientRect().right,
                        dir: getComputedStyle(td).direction}; })""")
            inner = b.js("window.innerWidth")
            assert cells
            for c in cells:
                if c["name"].startswith("["):
                    continue  # a frame of ours ([launcher], [unknown]) has no file
                assert c["text"] and c["width"] > 0, c
                assert c["right"] <= min(inner, c["sec"]) + 1, (view, width, c)
                assert c["scroll"] <= c["client"] + 1, (view, width, c)  # not clipped
                assert c["dir"] == "ltr", c
            assert any(c["text"].startswith(("moda.py:", "modb.py:")) for c in cells), cells
            bd_hidden = b.js("document.getElementById('bd').closest('section').offsetParent === null")
            assert bd_hidden == (view["group"] == ""), view
        b.screenshot(str(tmp_path / f"page-{width}.png"))


def test_label_values_show_time_and_share_by_size_and_span_names(recorded, tmp_path):
    page = page_of(recorded, tmp_path)
    with Browser() as b:
        b.open(url(page, group="span_id"))
        for key in ("route", "span_id"):
            vals = b.js(f"""Array.from(document.querySelectorAll('#labels details[data-key="{key}"] label'))
                .map(l => [l.dataset.value, +l.dataset.amount, l.textContent])""")
            assert len(vals) >= 2, vals
            amounts = [v[1] for v in vals]
            assert amounts == sorted(amounts, reverse=True) and amounts[0] > 0, vals
            assert all("%" in v[2] for v in vals), vals
        spans = b.js("""Array.from(document.querySelectorAll('#labels details[data-key="span_id"] label'))
            .map(l => l.textContent)""")
        assert all(("checkout" in t or "cart" in t) for t in spans if "(none)" not in t), spans
        bd = [r[3] for r in rows(b, "bd")]
        assert all(re.fullmatch(r"[0-9a-f]{16} (cart|checkout)", t) for t in bd if t != "(none)"), bd


def canvas_colours(b):
    """Distinct fill colours drawn on the flame graph (sampled pixels)."""
    return b.js("""(function () { var c = document.getElementById('fg'), x = c.getContext('2d');
        var d = x.getImageData(0, 0, c.width, c.height).data, s = {};
        for (var i = 0; i < d.length; i += 4 * 7) s[d[i] + ',' + d[i + 1] + ',' + d[i + 2]] = 1;
        return Object.keys(s); })()""")


def test_diff_opens_on_the_current_selection(recorded, tmp_path):
    page = page_of(recorded, tmp_path)
    with Browser() as b:
        b.open(url(page))
        # The route value's checkbox, found by its text (as a user would).
        b.js("""Array.from(document.querySelectorAll('#labels details')).forEach(d => {
            if (d.querySelector('summary').textContent.startsWith('route')) {
                d.open = true;
                Array.from(d.querySelectorAll('label')).forEach(l => {
                    if (l.textContent.trim().startsWith('/checkout')) l.querySelector('input').id = 'pick'; });
            } })""")
        b.click('#pick')
        assert b.js("document.getElementById('filter').value") == "route=/checkout"
        b.click("#mode")
        a, bb = b.js("[document.getElementById('a').value, document.getElementById('b').value]")
        assert a == "route=/checkout" and bb and bb != a, (a, bb)
        colours = canvas_colours(b)
        # Red (larger share in B) or green (smaller), not only grey.
        assert any(int(c.split(",")[0]) != int(c.split(",")[1]) for c in colours), colours


def test_flame_graph_pane_fits_its_content_and_the_window(recorded, tmp_path):
    page = page_of(recorded, tmp_path)
    with Browser(width=1500, height=900) as b:
        b.open(url(page))
        m = b.js("""(function () { var v = document.getElementById('view'), r = v.getBoundingClientRect();
            return {h: v.clientHeight, content: v.scrollHeight, bottom: r.bottom,
                    canvas: document.getElementById('fg').clientHeight, inner: innerHeight}; })()""")
    assert m["content"] - m["h"] <= 1 and m["h"] - m["canvas"] <= 1, m  # no blank space
    assert m["bottom"] <= m["inner"], m
    deep = tmp_path / "deep.py"
    deep.write_text(textwrap.dedent("""
        import sys, time
        sys.setrecursionlimit(500)
        def down(n):
            if n == 0:
                end = time.thread_time() + 0.4
                while time.thread_time() < end:
                    pass
                return
            down(n - 1)
        down(120)
    """))
    assert_ok(run_cli("run", "--sample-rate", "250", "--output-dir", "deep", "--top", "1",
                      str(deep), cwd=tmp_path))
    with Browser(width=1500, height=900) as b:
        b.open((tmp_path / "deep" / "flamegraph.html").resolve().as_uri())
        m = b.js("""(function () { var v = document.getElementById('view'), r = v.getBoundingClientRect();
            return {h: v.clientHeight, content: v.scrollHeight, bottom: r.bottom, inner: innerHeight}; })()""")
    assert m["content"] > m["h"] and m["bottom"] <= m["inner"] and m["h"] >= 0.4 * m["inner"], m


def test_python_page_opens_with_a_breakdown(recorded):
    page = recorded / "out" / "flamegraph.html"  # written by `run`, no view asked for
    with Browser() as b:
        b.open(page.resolve().as_uri())
        assert b.js("document.getElementById('group').value") == "route"
        assert {r[3] for r in rows(b, "bd")} >= {"/cart", "/checkout", "(none)"}


def test_timeline_brush_selects_profiles(recorded, tmp_path):
    page = page_of(recorded, tmp_path)
    # (start, duration) in ms as the page has them, and the value of each.
    profiles = [(p["time_nanos"] // 10**6, p["duration_nanos"] // 10**6,
                 sum(s["values"][0] for s in p["samples"]))
                for p in pprof_reader.load_dir(recorded / "out")]
    with Browser() as b:
        b.open(url(page))
        assert int(b.js("document.getElementById('timeline').dataset.profiles")) == len(profiles)
        box = b.js("(function () { var r = document.getElementById('tl').getBoundingClientRect();"
                   " return [r.left, r.top, r.width, r.height]; })()")
        y = box[1] + box[3] / 2
        b.drag(box[0] + box[2] * 0.45, y, box[0] + box[2] - 2, y)
        t = b.js("Object.assign({}, document.getElementById('timeline').dataset)")
        t0, t1 = float(t["from"]), float(t["until"])
        picked = [p for p in profiles if t0 <= p[0] + p[1] / 2 < t1]
        assert 0 < len(picked) < len(profiles) and int(t["selected"]) == len(picked)
        s = summary(b)
        assert s["total"] == sum(p[2] for p in picked), (s, picked)
        assert f"{len(picked)} of {len(profiles)} profiles" in s["text"]
        assert "from=" in b.js("location.hash")
        b.click("#tlall")
        assert summary(b)["total"] == sum(p[2] for p in profiles)
        # A click on a bar selects that profile alone.
        t0, t1 = min(p[0] for p in profiles), max(p[0] + p[1] for p in profiles)
        one = profiles[len(profiles) // 2]
        b.click_at(box[0] + (one[0] + one[1] / 2 - t0) / (t1 - t0) * box[2], y)
        assert b.js("document.getElementById('timeline').dataset.selected") == "1"
        assert summary(b)["total"] == one[2]
