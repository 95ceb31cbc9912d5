"""What a user of the real backends sees, for each runtime:

  pprof -> Pyroscope (/ingest), OTLP -> Pyroscope (http/protobuf; Ruby
  grpc) with a busy process on the same core, OTLP -> the Collector (debug
  exporter) by grpc (Python), http/json (Node) or http/protobuf (Ruby);

checked through Pyroscope's query API (Connect JSON): the profile type
process_cpu, series and labels (static tags included), the CPU split of two
burners (2:1), process_cpu totals against the CPU the burners measured,
span and trace selection, frame names the same by pprof and by OTLP; and
in the Collector's log the samples with their tags.

    run.py python|node|ruby ...   (the servers: servers.py start, before)

Skips, saying so, when the server folder is absent (outside the
workplace); CI runs on the workplace's machines, where it is present."""
import json
import os
import subprocess
import sys
import time
import urllib.request

import servers

HERE = os.path.dirname(os.path.abspath(__file__))
CPU_TYPE = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
UNIT_S = float(os.environ.get("PN_SERVERS_UNIT_S", "1.0"))  # CPU of the small burner
TAGS = "env=staging,region=eu"
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


def flame_names(fg):
    """The names of a flame graph's nodes that have a value."""
    names = fg.get("names") or []
    out = set()
    for level in fg.get("levels") or []:
        v = [int(x) for x in level.get("values") or []]
        for i in range(0, len(v), 4):
            if v[i + 1] > 0:
                out.add(names[v[i + 3]])
    return out


class Pyro:
    def __init__(self, base, app, t0):
        self.base, self.app = base, app
        self.start = int((t0 - 120) * 1000)

    def rng(self):
        return {"start": self.start, "end": int((time.time() + 120) * 1000)}

    def sel(self, extra=""):
        return '{service_name="%s"%s}' % (self.app, extra)

    def merge(self, extra=""):
        fg = query(self.base, "SelectMergeStacktraces",
                   dict(self.rng(), profileTypeID=CPU_TYPE, labelSelector=self.sel(extra),
                        maxNodes=4096)).get("flamegraph") or {}
        return int(fg.get("total") or 0), fg

    def span(self, span_id):
        fg = query(self.base, "SelectMergeSpanProfile",
                   dict(self.rng(), profileTypeID=CPU_TYPE, labelSelector=self.sel(),
                        spanSelector=[span_id], maxNodes=4096)).get("flamegraph") or {}
        return int(fg.get("total") or 0), fg


def _exemplars(self):
    r = query(self.base, "SelectHeatmap",
              dict(self.rng(), profileTypeID=CPU_TYPE, labelSelector=self.sel(), step=15,
                   queryType="HEATMAP_QUERY_TYPE_SPAN", exemplarType="EXEMPLAR_TYPE_SPAN"))
    return [x for s in r.get("series") or [] for sl in s.get("slots") or []
            for x in sl.get("exemplars") or []]


Pyro.span_exemplars = _exemplars


def run_app(rt, app, env, pin=None):
    """Runs the runtime's workload with the profiler's settings in env; its
    JSON line."""
    cmd = {"python": [os.environ.get("PN_PYTHON", sys.executable), os.path.join(HERE, "apps", "app.py")],
           "node": [os.environ.get("PN_NODE", "node"), os.path.join(HERE, "apps", "app.js")],
           "ruby": [os.environ.get("PN_RUBY", "ruby"), os.path.join(HERE, "apps", "app.rb")]}[rt]
    cmd = cmd + [str(UNIT_S), app]
    if pin is not None:
        cmd = ["taskset", "-c", str(pin)] + cmd
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("PYROSCOPE_", "OTEL_"))}
    full.update(env)
    r = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise Failed(f"{rt} app exited {r.returncode}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def busy_neighbour(cpu):
    """A process spinning on `cpu`, competing with the app pinned there."""
    return subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c",
                             "while True: pass"], stdin=subprocess.DEVNULL)


def wait_totals(p, want_ns, timeout_s=120):
    """worker=a and worker=b totals once they stop growing (ingestion and
    compaction are asynchronous)."""
    deadline = time.time() + timeout_s
    last = None
    same = 0
    while True:
        a = p.merge(',worker="a"')[0]
        b = p.merge(',worker="b"')[0]
        same = same + 1 if (a, b) == last else 0
        # three equal answers in a row (~6 s) once most of it is in, or
        # the deadline
        if (same >= 2 and a + b >= 0.5 * want_ns) or time.time() > deadline:
            return a, b
        last = (a, b)
        time.sleep(3)


def check_pyroscope(base, rt, app, out, t0, kind):
    p = Pyro(base, app, t0)
    want = out["a"] + out["b"]
    a, b = wait_totals(p, want)
    types = [t.get("ID") for t in query(base, "ProfileTypes", p.rng()).get("profileTypes") or []]
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


def collector_saw(st, app, since, timeout_s=60):
    """The Collector's debug log (verbosity detailed) after `since` bytes
    holds the app's service.name and its tags as sample attributes."""
    deadline = time.time() + timeout_s
    while True:
        with open(st["otelcol_log"], errors="replace") as f:
            f.seek(since)
            log = f.read()
        ok = (f"-> service.name: Str({app})" in log and "-> env: Str(staging)" in log
              and "-> region: Str(eu)" in log and "-> worker: Str(a)" in log)
        if ok or time.time() > deadline:
            return ok, log
        time.sleep(1)


def otlp_all_sent(out, kind):
    """Every OTLP upload went through (where the binding reports stats)."""
    st = out.get("stats") or {}
    if "otlp_sent" in st:
        check(st["otlp_sent"] > 0 and st.get("otlp_failed", 0) == 0,
              f"{kind}: OTLP uploads failed", {k: v for k, v in st.items() if k.startswith("otlp")})


def run_runtime(rt, st, base):
    pyro_env = {"PYROSCOPE_TAGS": TAGS, "PYROSCOPE_UPLOAD_INTERVAL": "1"}
    # 1. pprof to /ingest.
    app = f"srv.{rt}.pprof.{RUN}"
    t0 = time.time()
    out = run_app(rt, app, dict(pyro_env, PYROSCOPE_SERVER_ADDRESS=base))
    pprof_names = check_pyroscope(base, rt, app, out, t0, "pprof")
    # 2. OTLP/HTTP, only OTEL_EXPORTER_OTLP_ENDPOINT (no localhost:4040
    # upload), the app and a busy process pinned to one CPU.
    app = f"srv.{rt}.otlp.{RUN}"
    t0 = time.time()
    busy = busy_neighbour(0)
    try:
        # Ruby's goes by gRPC (Pyroscope serves it on its HTTP port too)
        env = dict(pyro_env, OTEL_EXPORTER_OTLP_ENDPOINT=base)
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
    proto = {"python": "grpc", "node": "http/json", "ruby": "http/protobuf"}[rt]
    port = st["otel_grpc"] if proto == "grpc" else st["otel_http"]
    app = f"srv.{rt}.collector.{RUN}"
    since = os.path.getsize(st["otelcol_log"])
    out = run_app(rt, app, dict(pyro_env, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
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
    for rt in rts:
        t = time.time()
        try:
            run_runtime(rt, st, base)
            print(f"ok   {rt} ({time.time() - t:.0f} s)")
        except Failed as e:
            failed.append(rt)
            print(f"FAIL {rt}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
