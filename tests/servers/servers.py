"""The real backends for tests/servers: Grafana Pyroscope and an
OpenTelemetry Collector, from the workplace's server folder
($PN_SERVERS_DIR, default ../shared/servers beside the checkout), unpacked
once into build/servers (checked against SHA256SUMS) and started on
127.0.0.1 with free ports.

    servers.py start   start both in the background (returns at once; the
                       state goes to build/servers/state.json)
    servers.py stop    stop the ones `start` started

Pyroscope takes a minute or more to be ready (far more on a loaded
machine), so `make test` starts it before the C suites and the lane that
uses it (run.py) waits for /ready. Each server runs under `timeout`, so
one that a failed run left behind ends on its own."""
import hashlib
import json
import lzma
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(os.environ.get("PN_BUILD_DIR") or os.path.join(ROOT, "build"), "servers")
STATE = os.path.join(BUILD, "state.json")
LIFETIME_S = 3600  # an upper bound on one `make test`; then the servers end themselves


def servers_dir():
    """The folder with the compressed binaries, or None when absent."""
    d = os.environ.get("PN_SERVERS_DIR") or os.path.join(ROOT, "..", "shared", "servers")
    d = os.path.abspath(d)
    return d if os.path.isfile(os.path.join(d, "SHA256SUMS")) else None


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def unpack(src):
    """build/servers/{pyroscope,otelcol}, unpacked once and checked."""
    os.makedirs(BUILD, exist_ok=True)
    sums = {}
    with open(os.path.join(src, "SHA256SUMS")) as f:
        for line in f:
            if line.strip():
                digest, name = line.split()
                sums[name.lstrip("*")] = digest
    for name in ("pyroscope", "otelcol"):
        dst = os.path.join(BUILD, name)
        if os.path.exists(dst) and _sha256(dst) == sums[name]:
            continue
        tmp = dst + ".tmp"
        with lzma.open(os.path.join(src, name + ".xz")) as fin, open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
        if _sha256(tmp) != sums[name]:
            os.unlink(tmp)
            raise SystemExit(f"{name}: the unpacked binary does not match {src}/SHA256SUMS")
        os.chmod(tmp, 0o755)
        os.replace(tmp, dst)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pyroscope_args(http, grpc, gossip, raft):
    a = "127.0.0.1"
    return [
        # the metastore's raft transport (default localhost:9099: taken by
        # any other Pyroscope on the machine)
        f"-metastore.raft.bind-address={a}:{raft}", f"-metastore.raft.advertise-address={a}:{raft}",
        f"-metastore.raft.server-id={a}:{raft}",
        f"-server.http-listen-address={a}", f"-server.http-listen-port={http}",
        f"-server.grpc-listen-address={a}", f"-server.grpc-listen-port={grpc}",
        f"-memberlist.bind-addr={a}", f"-memberlist.advertise-addr={a}",
        f"-memberlist.bind-port={gossip}",
        f"-metastore.address=localhost:{grpc}", f"-query-backend.address=localhost:{grpc}",
        f"-compactor.ring.instance-addr={a}", f"-distributor.ring.instance-addr={a}",
        f"-ingester.lifecycler.addr={a}", f"-overrides-exporter.ring.instance-addr={a}",
        f"-query-frontend.instance-addr={a}", f"-query-scheduler.ring.instance-addr={a}",
        f"-segment-writer.lifecycler.addr={a}", f"-store-gateway.sharding-ring.instance-addr={a}",
        "-enable-query-backend-from=2020-01-01T00:00:00Z",
        "-self-profiling.disable-push=true", "-usage-stats.enabled=false",
    ]


COLLECTOR_CONFIG = """
receivers:
  otlp:
    protocols:
      grpc: {{endpoint: "127.0.0.1:{grpc}"}}
      http: {{endpoint: "127.0.0.1:{http}"}}
exporters:
  debug:
    verbosity: detailed
service:
  telemetry:
    metrics: {{level: none}}
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [debug]
"""


def _spawn(argv, cwd, log):
    with open(log, "wb") as out:
        return subprocess.Popen(["timeout", str(LIFETIME_S)] + argv, cwd=cwd, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True).pid


def start():
    src = servers_dir()
    if not src:
        print("tests/servers: no server folder (PN_SERVERS_DIR or ../shared/servers): skipped")
        return
    stop(quiet=True)
    unpack(src)
    work = os.path.join(BUILD, "run")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "pyroscope"))
    os.makedirs(os.path.join(work, "otelcol"))
    st = {"pyroscope_http": free_port(), "pyroscope_grpc": free_port(),
          "pyroscope_gossip": free_port(), "pyroscope_raft": free_port(),
          "otel_http": free_port(), "otel_grpc": free_port(),
          "work": work}
    st["pyroscope_pid"] = _spawn(
        [os.path.join(BUILD, "pyroscope")] + pyroscope_args(
            st["pyroscope_http"], st["pyroscope_grpc"], st["pyroscope_gossip"],
            st["pyroscope_raft"]),
        os.path.join(work, "pyroscope"), os.path.join(work, "pyroscope.log"))
    cfg = os.path.join(work, "otelcol", "config.yaml")
    with open(cfg, "w") as f:
        f.write(COLLECTOR_CONFIG.format(grpc=st["otel_grpc"], http=st["otel_http"]))
    st["otelcol_log"] = os.path.join(work, "otelcol.log")
    st["otelcol_pid"] = _spawn(
        [os.path.join(BUILD, "otelcol"), "--config", cfg,
         "--feature-gates=service.profilesSupport"],
        os.path.join(work, "otelcol"), st["otelcol_log"])
    st["started"] = time.time()
    with open(STATE, "w") as f:
        json.dump(st, f)
    print(f"tests/servers: Pyroscope on 127.0.0.1:{st['pyroscope_http']}, Collector on "
          f"127.0.0.1:{st['otel_http']} (HTTP) / {st['otel_grpc']} (gRPC), starting")


def state():
    try:
        with open(STATE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def stop(quiet=False):
    st = state()
    if not st:
        return
    for key in ("pyroscope_pid", "otelcol_pid"):
        try:
            os.killpg(st[key], signal.SIGTERM)
        except (ProcessLookupError, PermissionError, KeyError):
            pass
    os.unlink(STATE)
    if not quiet:
        print("tests/servers: stopped")


def ready(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_ready(st, timeout_s=900):
    """Both servers answer; Pyroscope's /ready can take minutes on a loaded
    machine."""
    deadline = time.time() + timeout_s
    base = f"http://127.0.0.1:{st['pyroscope_http']}"
    while time.time() < deadline:
        col = _port_open(st["otel_http"])
        if ready(base + "/ready") and col:
            return base
        time.sleep(1)
    raise SystemExit(f"tests/servers: Pyroscope or the Collector not ready after {timeout_s} s; "
                     f"see {st['work']}/*.log")


def _port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "start":
        start()
    elif cmd == "stop":
        stop()
    else:
        raise SystemExit(__doc__)
