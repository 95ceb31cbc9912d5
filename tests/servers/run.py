"""What a user of the real backends sees, for each runtime:

  pprof -> Pyroscope (/ingest), OTLP -> Pyroscope (http/protobuf; Ruby
  grpc) with a busy process on the same core, OTLP -> the Collector (debug
  exporter) by grpc (Python), http/json (Node) or http/protobuf (Ruby);

checked through Pyroscope's query API (Connect JSON): the profile type
process_cpu, series and labels (static tags included), the CPU split of two
burners (2:1), process_cpu totals against the CPU the burners measured,
span and trace selection, frame names the same by pprof and by OTLP; and
in the Collector's log the samples with their tags.

Memory profiles (per runtime more runs at once, memory profiling on, one
period each: pprof -> Pyroscope plus OTLP -> the Collector, OTLP ->
Pyroscope, and Node 26's heap.allocations by pprof where PN_NODE26 names
it): the memory:* profile types, the function that allocates and frees and
the one that keeps objects alive, each within 10 % of the truth the app
measured (Python: bytes; Ruby: objects, as its bytes are 40 B heap slots;
Node: V8's used-heap delta), the freed ones absent from in-use, (Python,
Ruby) the label value and the span_id each selecting its own function
only, and a run over periods of 1 s whose in-use profile per period holds
the kept objects until they are freed, and not after. Node's heap samples
carry no labels or spans (V8 records no context with them). In the
Collector's log: the sample types and the keeping function.

    run.py python|node|ruby ...   (the servers: servers.py start, before)

Skips, saying so, when the server folder is absent (outside the
workplace); CI runs on the workplace's machines, where it is present."""
import json
import os
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import servers

HERE = os.path.dirname(os.path.abspath(__file__))
CPU_TYPE = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
UNIT_S = float(os.environ.get("PN_SERVERS_UNIT_S", "1.0"))  # CPU of the small burner
# Our memory profile's sample types. Pyroscope's profile type IDs for them:
# from pprof (period type space/bytes, as Go's heap profile)
# memory:<type>:<unit>:space:bytes; from OTLP, which Pyroscope names by the
# period type's word, memory:<type>:<unit>:memory:bytes (we send memory/bytes
# there: otlp.c). Both show under "memory".
MEM_UNITS = {"alloc_objects": "count", "alloc_space": "bytes",
             "inuse_objects": "count", "inuse_space": "bytes"}
TAGS = "env=staging,region=eu"
PYRO_ENV = {"PYROSCOPE_TAGS": TAGS, "PYROSCOPE_UPLOAD_INTERVAL": "1"}  # every app's
RUN = "%x" % int(time.time())  # app names unique per run: a server may hold earlier runs


class Failed(Exception):
    pass


def check(cond, what, *detail):
    if not cond:
        raise Failed(what + (": " + " ".join(str(d) for d in detail) if detail else ""))


def query(base, method, body):
    rq = urllib.request.Request(f"{base}/querier.v1.QuerierService/{method}",
                                data=json.dumps(body).encode(),
                                headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(rq, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def mem_type(t, kind):
    """Pyroscope's ID of sample type t from a run of that kind (its OTLP
    runs are "otlp" and "periods")."""
    via_otlp = kind in ("otlp", "periods")
    return f"memory:{t}:{MEM_UNITS[t]}:{'memory' if via_otlp else 'space'}:bytes"


def flame_nodes(fg):
    """A flame graph's nodes that have a value: (level, x, total, name);
    each level's values are 4 per node, x relative to the end of the
    node before."""
    names = fg.get("names") or []
    for depth, level in enumerate(fg.get("levels") or []):
        v = [int(x) for x in level.get("values") or []]
        end = 0
        for i in range(0, len(v), 4):
            x = end + v[i]
            end = x + v[i + 1]
            if v[i + 1] > 0:
                yield depth, x, v[i + 1], names[v[i + 3]]


def flame_names(fg):
    """The names of a flame graph's nodes that have a value."""
    return {n for _, _, _, n in flame_nodes(fg)}


def flame_total(fg, part):
    """The value of the stacks through a function whose name holds `part`
    (a node under another such node counted once)."""
    spans = []
    total = 0
    for _, x, v, name in flame_nodes(fg):
        if part in name and not any(a <= x < b for a, b in spans):
            spans.append((x, x + v))
            total += v
    return total


class Pyro:
    def __init__(self, base, app, t0):
        self.base, self.app = base, app
        self.start = int((t0 - 120) * 1000)

    def rng(self):
        return {"start": self.start, "end": int((time.time() + 120) * 1000)}

    def sel(self, extra=""):
        return '{service_name="%s"%s}' % (self.app, extra)

    def merge(self, extra="", ptype=CPU_TYPE):
        fg = query(self.base, "SelectMergeStacktraces",
                   dict(self.rng(), profileTypeID=ptype, labelSelector=self.sel(extra),
                        maxNodes=4096)).get("flamegraph") or {}
        return int(fg.get("total") or 0), fg

    def span(self, span_id, ptype=CPU_TYPE):
        fg = query(self.base, "SelectMergeSpanProfile",
                   dict(self.rng(), profileTypeID=ptype, labelSelector=self.sel(),
                        spanSelector=[span_id], maxNodes=4096)).get("flamegraph") or {}
        return int(fg.get("total") or 0), fg

    def types(self):
        return [t.get("ID") for t in
                query(self.base, "ProfileTypes", self.rng()).get("profileTypes") or []]


def _exemplars(self):
    r = query(self.base, "SelectHeatmap",
              dict(self.rng(), profileTypeID=CPU_TYPE, labelSelector=self.sel(), step=15,
                   queryType="HEATMAP_QUERY_TYPE_SPAN", exemplarType="EXEMPLAR_TYPE_SPAN"))
    return [x for s in r.get("series") or [] for sl in s.get("slots") or []
            for x in sl.get("exemplars") or []]


Pyro.span_exemplars = _exemplars


def run_app(rt, app, env, pin=None, workload=str(UNIT_S)):
    """Runs the runtime's workload (CPU: UNIT_S; or "memory") with the
    profiler's settings in env; its JSON line."""
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("PYROSCOPE_", "OTEL_"))}
    full.update(env)
    cmd = {"python": [full.get("PN_PYTHON", sys.executable), os.path.join(HERE, "apps", "app.py")],
           "node": [full.get("PN_NODE", "node"), "--expose-gc",
                    os.path.join(HERE, "apps", "app.js")],
           "ruby": [full.get("PN_RUBY", "ruby"), os.path.join(HERE, "apps", "app.rb")]}[rt]
    cmd = cmd + [workload, app]
    if pin is not None:
        cmd = ["taskset", "-c", str(pin)] + cmd
    r = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise Failed(f"{rt} app exited {r.returncode}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def busy_neighbour(cpu):
    """A process spinning on `cpu`, competing with the app pinned there."""
    return subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c",
                             "while True: pass"], stdin=subprocess.DEVNULL)


def wait_stable(read, enough, timeout_s=120):
    """read() once it gives the same answer three times in a row (~6 s:
    ingestion and compaction are asynchronous) and enough(answer), or at
    the deadline."""
    deadline = time.time() + timeout_s
    last, same = None, 0
    while True:
        now = read()
        same = same + 1 if now == last else 0
        if (same >= 2 and enough(now)) or time.time() > deadline:
            return now
        last = now
        time.sleep(3)


def wait_totals(p, want_ns, timeout_s=120):
    """worker=a and worker=b totals once they stop growing and hold the 90 %
    of want_ns the check needs (or at the timeout: then the check says what
    is missing). Stable for ~6 s alone was not enough: after the other
    runtimes' runs the server took longer to make a run's last periods
    queryable, and the Ruby busy-core check read 85 % of it (twice)."""
    return wait_stable(lambda: (p.merge(',worker="a"')[0], p.merge(',worker="b"')[0]),
                       lambda ab: sum(ab) >= 0.9 * want_ns, timeout_s)


def check_pyroscope(base, rt, app, out, t0, kind):
    p = Pyro(base, app, t0)
    want = out["a"] + out["b"]
    a, b = wait_totals(p, want)
    types = p.types()
    check(CPU_TYPE in types, f"{kind}: no {CPU_TYPE} type", types)
    names = query(base, "LabelNames", dict(p.rng(), matchers=[p.sel()])).get("names") or []
    for n in ("env", "region", "worker", "service_name"):
        check(n in names, f"{kind}: label {n} missing", names)
    env = query(base, "LabelValues", dict(p.rng(), name="env", matchers=[p.sel()])).get("names")
    check(env == ["staging"], f"{kind}: env values", env)
    workers = query(base, "LabelValues", dict(p.rng(), name="worker", matchers=[p.sel()])).get("names")
    check(sorted(workers or []) == ["a", "b"], f"{kind}: worker values", workers)
    series = query(base, "Series", dict(p.rng(), matchers=[p.sel()], labelNames=["worker", "env"]))
    sets = [{kv["name"]: kv["value"] for kv in s.get("labels") or []}
            for s in series.get("labelsSet") or []]
    check({"worker": "a", "env": "staging"} in sets and {"worker": "b", "env": "staging"} in sets,
          f"{kind}: series", sets)
    split = a / (a + b) if a + b else 0
    ratio = (a + b) / want
    print(f"  {rt} {kind}: process_cpu a {a / 1e9:.3f} s b {b / 1e9:.3f} s, split "
          f"{split:.3f} (truth {out['a'] / want:.3f}), total/measured {ratio:.3f}")
    check(abs(split - out["a"] / want) <= 0.05, f"{kind}: CPU split {split:.3f}")
    check(abs(ratio - 1) <= 0.10, f"{kind}: process_cpu total {(a + b) / 1e9:.3f} s against "
          f"{want / 1e9:.3f} s measured; the app's stats", json.dumps(out.get("stats")))
    # The span and its trace select the small burner's work, only it.
    st, sfg = p.span(out["span_id"])
    sn = flame_names(sfg)
    check(st > 0.5 * out["b"], f"{kind}: span {out['span_id']} selects {st} ns", out["b"])
    check(any("burn_b" in n for n in sn) and not any("burn_a" in n for n in sn),
          f"{kind}: span selection names", sorted(sn))
    # Trace ids are not series labels: Grafana finds a span's trace through
    # the span heatmap's exemplars, which must carry ours.
    ex = p.span_exemplars()
    mine = [x for x in ex if x.get("spanId") == out["span_id"]]
    check(mine and all(x.get("traceId") == out["trace_id"] for x in mine),
          f"{kind}: span exemplars with trace {out['trace_id']}",
          [(x.get("spanId"), x.get("traceId")) for x in ex][:10])
    check(all(x.get("spanId") == out["span_id"] for x in ex),
          f"{kind}: exemplars of other spans", [x.get("spanId") for x in ex][:10])
    full = flame_names(p.merge()[1])
    return sorted(n for n in full if "burn_" in n)


def collector_log(st, since, want, timeout_s=60):
    """The Collector's debug log (verbosity detailed) after `since` bytes
    once it holds every string of `want`, or at the deadline; and what it
    misses."""
    deadline = time.time() + timeout_s
    while True:
        with open(st["otelcol_log"], errors="replace") as f:
            f.seek(since)
            log = f.read()
        missing = [w.strip() for w in want if w not in log]
        if not missing or time.time() > deadline:
            return missing, log
        time.sleep(1)


def collector_saw(st, app, since):
    """The app's service.name and its tags as sample attributes."""
    missing, log = collector_log(st, since, [
        f"-> service.name: Str({app})", "-> env: Str(staging)", "-> region: Str(eu)",
        "-> worker: Str(a)"])
    return not missing, log


def collector_port(rt, st):
    """The runtime's protocol to the Collector, and its port for it."""
    proto = {"python": "grpc", "node": "http/json", "ruby": "http/protobuf"}[rt]
    return proto, st["otel_grpc"] if proto == "grpc" else st["otel_http"]


def otlp_all_sent(out, kind):
    """Every OTLP upload went through (where the binding reports stats)."""
    st = out.get("stats") or {}
    if "otlp_sent" in st:
        check(st["otlp_sent"] > 0 and st.get("otlp_failed", 0) == 0,
              f"{kind}: OTLP uploads failed", {k: v for k, v in st.items() if k.startswith("otlp")})


# Per runtime: the app's two functions, the unit its truth is in, the
# sample types it compares (allocated, in use), and whether its samples
# carry labels and spans. Intervals below the default so that the kept
# objects have thousands of samples: a standard error of 1 % or less
# (Python's 64 KiB objects are sampled with a probability of 98 %), so the
# 10 % bound holds every run.
MEM_APPS = {
    "python": dict(churn="alloc_churn", keep="alloc_keep", unit="bytes", interval=16384,
                   alloc="alloc_space", inuse="inuse_space", labels=True),
    "ruby": dict(churn="churn_objects", keep="keep_objects", unit="objects", interval=2048,
                 alloc="alloc_objects", inuse="inuse_objects", labels=True),
    # Node's heap profile is in use only; allocations instead (not both) on
    # Node 26+ with heap.allocations: the "alloc" run, with PN_NODE26
    "node": dict(churn="churnArrays", keep="keepArrays", unit="bytes", interval=4096,
                 alloc=None, inuse="inuse_space", labels=False),
}


def mem_totals(p, spec, kind):
    """[keeping, churning function] in use, then allocated, of the types
    the run has."""
    got = []
    for t in (spec["inuse"], spec["alloc"]):
        if t:
            fg = p.merge(ptype=mem_type(t, kind))[1]
            got += [flame_total(fg, spec["keep"]), flame_total(fg, spec["churn"])]
    return got


def check_memory(p, rt, spec, out, got, kind):
    """One memory run's profiles in Pyroscope (see the module's doc); got:
    its mem_totals once stable."""
    churn_fn, keep_fn, unit = spec["churn"], spec["keep"], spec["unit"]
    want_churn, want_keep = out.get(f"churn_{unit}"), out[f"keep_{unit}"]
    alloc = mem_type(spec["alloc"], kind) if spec["alloc"] else None
    types = p.types()
    want_types = [mem_type(t, kind) for t in MEM_UNITS
                  if spec[t.split("_")[0]]]  # the "alloc" or "inuse" types the run has
    check(all(t in types for t in want_types), f"memory {kind}: profile types", types)

    def near(what, value, truth):
        err = (value - truth) / truth
        print(f"  {rt} memory {kind}: {what} {value} {unit} (truth {truth}, {err * 100:+.1f} %)")
        check(abs(err) <= 0.10, f"memory {kind}: {what} {value} {unit} against {truth}",
              json.dumps({k: v for k, v in (out.get("stats") or {}).items() if "mem" in k}))

    if spec["inuse"]:
        near(f"{spec['inuse']} of {keep_fn}", got[0], want_keep)
        check(got[1] <= 0.02 * want_keep,
              f"memory {kind}: {spec['inuse']} of {churn_fn} (freed)", got[1])
        got = got[2:]
    if alloc:
        near(f"{spec['alloc']} of {keep_fn}", got[0], want_keep)
        near(f"{spec['alloc']} of {churn_fn}", got[1], want_churn)
    if not spec["labels"]:
        return
    # The label value and the span select their own function only: what it
    # allocated, and (the keeping one's) what it holds.
    inuse = mem_type(spec["inuse"], kind)
    for label, span, mine, other, truth in (("a", out["span_a"], churn_fn, keep_fn, want_churn),
                                            ("b", out["span_b"], keep_fn, churn_fn, want_keep)):
        for how, (total, fg) in ((f'worker="{label}"', p.merge(f',worker="{label}"', alloc)),
                                 (f"span_id {span}", p.span(span, alloc))):
            names = flame_names(fg)
            check(any(mine in n for n in names) and not any(other in n for n in names),
                  f"memory {kind}: {how} selects", sorted(names))
            check(abs(total - truth) <= 0.10 * truth,
                  f"memory {kind}: {spec['alloc']} of {how}: {total} against {truth}")
        for how, (total, fg) in ((f'worker="{label}"', p.merge(f',worker="{label}"', inuse)),
                                 (f"span_id {span}", p.span(span, inuse))):
            held = flame_total(fg, keep_fn)
            if label == "b":
                check(abs(held - want_keep) <= 0.10 * want_keep and total - held <= 0.02 * total,
                      f"memory {kind}: {spec['inuse']} of {how}: {held} of {total} in "
                      f"{keep_fn} against {want_keep}")
            else:
                check(total <= 0.02 * want_keep,
                      f"memory {kind}: {spec['inuse']} of {how} (all freed): {total}")
    print(f"  {rt} memory {kind}: worker=a and its span select {churn_fn} only (allocated, "
          f"nothing in use), worker=b and its span {keep_fn} only (allocated and in use)")


def check_periods(p, rt, spec, out):
    """Held over periods, then freed: worker=b's in-use profile of each
    period (one point of the series each) that began once all were kept
    and ended before the free holds them; the one the free ends, and any
    after it, hold no more than 2 % of it (what the label's code left
    alive: Ruby's call caches of its first calls); worker=c's objects,
    kept after the free, are seen."""
    inuse = mem_type(spec["inuse"], "periods")
    want = out[f"keep_{spec['unit']}"]

    def points(label):
        r = query(p.base, "SelectSeries", dict(p.rng(), profileTypeID=inuse, step=0.1,
                                               labelSelector=p.sel(f',worker="{label}"')))
        return sorted((int(pt["timestamp"]) / 1e3, int(pt["value"]))
                      for s in r.get("series") or [] for pt in s.get("points") or [])

    kept, freed = out["kept_at"], out["freed_at"]
    held, late = wait_stable(lambda: (points("b"), points("c")),
                             lambda r: any(t >= kept for t, _ in r[0]) and r[1])
    def full(v):
        return abs(v - want) <= 0.10 * want

    def gone(v):
        return v <= 0.02 * want

    between = [v for t, v in held if kept <= t < freed]
    after = [v for t, v in held if t >= freed]
    print(f"  {rt} memory periods: {spec['inuse']} of worker=b per period {[v for _, v in held]}"
          f" (truth {want}; {len(between)} begun once all were kept, {len(after)} after the "
          f"free); worker=c's in {len(late)} periods after")
    check(any(full(v) for v in between) and all(full(v) or gone(v) for v in between),
          f"memory periods: {spec['inuse']} of worker=b per period", held, kept, want)
    check(all(gone(v) for v in after), "memory periods: worker=b in use after it was freed",
          held, freed)
    check(late and all(t > kept for t, _ in late), "memory periods: worker=c in use", late)


def run_memory(rt, st, base):
    """Memory profiling on, one period each (a long upload interval: the
    in-use snapshot is the one at shutdown, with the kept objects alive),
    the apps at once: pprof to Pyroscope and OTLP to the Collector; OTLP to
    Pyroscope; (Node 26, PN_NODE26) heap.allocations by pprof; (Python,
    Ruby) periods of 1 s over which the kept objects are held, then freed."""
    spec = MEM_APPS[rt]
    proto, port = collector_port(rt, st)
    mem_env = dict(PYRO_ENV, PYROSCOPE_UPLOAD_INTERVAL="3600", PYROSCOPE_MEMORY="true",
                   PYROSCOPE_MEMORY_INTERVAL=str(spec["interval"]))
    runs = {"pprof": dict(mem_env, PYROSCOPE_SERVER_ADDRESS=base,
                          OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                          OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL=proto),
            "otlp": dict(mem_env, OTEL_EXPORTER_OTLP_ENDPOINT=base)}
    specs = {"pprof": spec, "otlp": spec}
    if rt == "ruby":
        runs["otlp"]["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
    node26 = os.environ.get("PN_NODE26")
    if rt == "node" and node26:
        runs["alloc"] = dict(mem_env, PYROSCOPE_SERVER_ADDRESS=base, PN_NODE=node26,
                             PYROSCOPE_HEAP_ALLOCATIONS="true")
        specs["alloc"] = dict(spec, alloc="alloc_space", inuse=None)
    workloads = dict.fromkeys(runs, "memory")
    if spec["labels"]:
        # held over periods of 1 s, then freed: by OTLP, whose times are in ns
        runs["periods"] = dict(mem_env, PYROSCOPE_UPLOAD_INTERVAL="1",
                               OTEL_EXPORTER_OTLP_ENDPOINT=base)
        workloads["periods"] = "memory-periods"
    apps = {kind: f"srv.{rt}.memory-{kind}.{RUN}" for kind in runs}
    since = os.path.getsize(st["otelcol_log"])
    t0 = time.time()
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {kind: pool.submit(run_app, rt, apps[kind], env, workload=workloads[kind])
                   for kind, env in runs.items()}
        outs = {kind: f.result() for kind, f in futures.items()}
    pyros = {kind: Pyro(base, apps[kind], t0) for kind in runs}
    keep = f"keep_{spec['unit']}"
    got = wait_stable(lambda: {k: mem_totals(pyros[k], specs[k], k) for k in specs},
                      lambda g: all(g[k][0] > 0.5 * outs[k][keep] for k in specs))
    for kind in runs:
        otlp_all_sent(outs[kind], f"memory {kind}")
    for kind in specs:
        check_memory(pyros[kind], rt, specs[kind], outs[kind], got[kind], kind)
    if "periods" in runs:
        check_periods(pyros["periods"], rt, spec, outs["periods"])
    # The Collector: the sample types and the keeping function (in a frame
    # name: Ruby's and Node's carry more) in the string table.
    types = [t for t in MEM_UNITS if spec["alloc"] or t.startswith("inuse")]
    missing, log = collector_log(st, since, [f"-> service.name: Str({apps['pprof']})",
                                             spec["keep"]] + [f"\n    {t}\n" for t in types])
    check(not missing, f"the Collector ({proto}) did not log {apps['pprof']}'s memory profile",
          missing, log[-2000:])
    print(f"  {rt} memory collector ({proto}): {', '.join(types)} and {spec['keep']} logged")


def run_runtime(rt, st, base):
    # 1. pprof to /ingest.
    app = f"srv.{rt}.pprof.{RUN}"
    t0 = time.time()
    out = run_app(rt, app, dict(PYRO_ENV, PYROSCOPE_SERVER_ADDRESS=base))
    pprof_names = check_pyroscope(base, rt, app, out, t0, "pprof")
    # 2. OTLP/HTTP, only OTEL_EXPORTER_OTLP_ENDPOINT (no localhost:4040
    # upload), the app and a busy process pinned to one CPU.
    app = f"srv.{rt}.otlp.{RUN}"
    t0 = time.time()
    busy = busy_neighbour(0)
    try:
        # Ruby's goes by gRPC (Pyroscope serves it on its HTTP port too)
        env = dict(PYRO_ENV, OTEL_EXPORTER_OTLP_ENDPOINT=base)
        if rt == "ruby":
            env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
        out = run_app(rt, app, env, pin=0)
    finally:
        busy.kill()
        busy.wait()
    check(not any(k.startswith("http_") for k in out.get("stats") or {}),
          "OTLP only: a Pyroscope exporter was made", out.get("stats"))
    otlp_all_sent(out, "otlp")
    otlp_names = check_pyroscope(base, rt, app, out, t0, "otlp (busy core)")
    check(otlp_names == pprof_names, "frame names differ between pprof and OTLP",
          pprof_names, otlp_names)
    # 3. The Collector, one protocol per runtime.
    proto, port = collector_port(rt, st)
    app = f"srv.{rt}.collector.{RUN}"
    since = os.path.getsize(st["otelcol_log"])
    out = run_app(rt, app, dict(PYRO_ENV, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                                OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL=proto))
    otlp_all_sent(out, f"collector ({proto})")
    ok, log = collector_saw(st, app, since)
    check(ok, f"the Collector ({proto}) did not log {app}'s samples with tags", log[-3000:])
    print(f"  {rt} collector ({proto}): samples with service.name and tags logged")


def main():
    rts = sys.argv[1:] or ["python", "node", "ruby"]
    if not servers.servers_dir():
        print("tests/servers: SKIPPED: no server folder (set PN_SERVERS_DIR, or "
              "../shared/servers beside the checkout): real-backend checks not run")
        return 0
    st = servers.state()
    if not st:
        servers.start()
        st = servers.state()
    t = time.time()
    base = servers.wait_ready(st)
    print(f"tests/servers: ready ({time.time() - t:.0f} s waited)")
    failed = []
    # Every runtime's CPU checks first, then the memory runs: those run
    # several apps at once, and the busy-core CPU check wants no neighbours
    # but its own (nor Pyroscope ingesting what they sent).
    for stage, what in ((run_runtime, ""), (run_memory, " memory")):
        for rt in rts:
            t = time.time()
            try:
                stage(rt, st, base)
                print(f"ok   {rt}{what} ({time.time() - t:.0f} s)")
            except Failed as e:
                failed.append(rt)
                print(f"FAIL {rt}{what}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
