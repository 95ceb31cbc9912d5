"""The proof that the artifacts in dist/ install and work without a compiler.

Inside the minimal chroot (minimal_chroot.sh: no compiler, no -dev package,
no libcurl) each runtime's artifact is installed with the ecosystem's own
client and its example app runs against a loopback ingest server on the
host and into a folder; the profiles must arrive with the example's labels
and span ids. dist/ and the checkout are bind-mounted read-only (in a mount
namespace of the run's own, so nothing is left mounted).

    python proof.py --chroot DIR --dist DIR --work DIR [--runtimes python ...]

Prints one line per runtime: artifact, size, install time, what arrived.
"""
import argparse
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bindings/python/tests/package"))
import pprof_reader  # noqa: E402
from ingest_server import IngestServer  # noqa: E402

# Pure-Python wheels the example uses besides ours (OpenTelemetry), fetched
# once on the host; the chroot installs offline.
OTEL = "opentelemetry-sdk==1.45.2"


class Chroot:
    def __init__(self, root, dist, work):
        self.root, self.dist, self.work = root, dist, work

    def run(self, script, timeout=600, env=None):
        """script (sh) inside the chroot, with /mnt/dist, /mnt/src (read-only)
        and /mnt/work mounted; CompletedProcess."""
        mounts = ["mount -t proc proc %s/proc" % shlex.quote(self.root)]
        for src, name, ro in ((self.dist, "dist", True), (ROOT, "src", True),
                              (self.work, "work", False)):
            tgt = shlex.quote(os.path.join(self.root, "mnt", name))
            mounts.append("mkdir -p %s && mount --bind %s %s" % (tgt, shlex.quote(src), tgt))
            if ro:
                mounts.append("mount -o remount,bind,ro %s" % tgt)
        envs = ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8",
                "no_proxy=127.0.0.1", "NO_PROXY=127.0.0.1"] + \
            ["%s=%s" % kv for kv in (env or {}).items()]
        inner = "chroot %s /usr/bin/env -i %s sh -ec %s" % (
            shlex.quote(self.root), " ".join(shlex.quote(e) for e in envs), shlex.quote(script))
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-ec",
               " && ".join(mounts) + " && " + inner]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def check(self, script, what, **kw):
        r = self.run(script, **kw)
        if r.returncode:
            raise SystemExit("proof: %s failed (exit %d):\n%s%s" % (what, r.returncode,
                                                                   r.stdout, r.stderr))
        return r


def timed(ch, script, what):
    t = time.monotonic()
    ch.check(script, what)
    return time.monotonic() - t


def check_profiles(kind, server, folder, want_labels, spans_wanted=True):
    """The uploads and the folder's files: each runtime's samples carry
    want_labels (key -> allowed values) and span ids. Returns a summary."""
    if server is not None and not server.requests:
        raise SystemExit("proof %s: no upload reached the ingest server" % kind)
    reqs = server.requests if server is not None else []
    uploaded = [pprof_reader.decode(r.body) for r in reqs if r.query.get("format") == "pprof"]
    if len(uploaded) != len(reqs):
        raise SystemExit("proof %s: an upload was not the raw pprof of the runtime's sender "
                         "(libcurl's multipart?): %s" % (kind, [r.query for r in server.requests]))
    files = sorted(glob.glob(os.path.join(folder, "**", "*.pb.gz"), recursive=True))
    if not files:
        raise SystemExit("proof %s: no profile in the output folder %s" % (kind, folder))
    written = [pprof_reader.decode(open(f, "rb").read()) for f in files]
    out = {} if server is not None else {"server": "not run"}
    for name, profs in ((("server", uploaded),) if server is not None else ()) + (("folder", written),):
        labels, spans, total = {}, 0, 0
        for p in profs:
            for s in p["samples"]:
                total += 1
                for k in want_labels:
                    if k in s["labels"]:
                        labels.setdefault(k, set()).add(s["labels"][k])
                spans += "span_id" in s["labels"]
        for k, allowed in want_labels.items():
            if not labels.get(k) or not labels[k] <= allowed:
                raise SystemExit("proof %s (%s): label %s: %s, want some of %s"
                                 % (kind, name, k, labels.get(k), allowed))
        if spans_wanted and not spans:
            raise SystemExit("proof %s (%s): no sample carries a span_id" % (kind, name))
        out[name] = "%d profiles, %d samples, %d with span_id" % (len(profs), total, spans)
    return out


def prove_python(ch, dist, work):
    wheels = glob.glob(os.path.join(dist, "pyroscope_native-*-manylinux*x86_64*.whl"))
    if not wheels:
        raise SystemExit("proof python: no x86_64 wheel in %s (make dist)" % dist)
    house = os.path.join(work, "wheelhouse")
    if not glob.glob(os.path.join(house, "opentelemetry_sdk-*.whl")):
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                        "--only-binary=:all:", "--python-version", "3.13", "-d", house, OTEL],
                       check=True)
    ch.check("rm -rf /tmp/pn-venv && python3 -m venv /tmp/pn-venv && "
             "/tmp/pn-venv/bin/pip install -q --no-index --find-links /mnt/work/wheelhouse %s"
             % shlex.quote(OTEL), "python: venv + OpenTelemetry")
    # What a user types, with dist/ as the index: pip picks the wheel.
    secs = timed(ch, "/tmp/pn-venv/bin/pip install -q --no-index --find-links /mnt/dist "
                     "pyroscope-native", "python: pip install")
    r = ch.check("/tmp/pn-venv/bin/python -c 'import pyroscope, pyroscope._native as n; "
                 "print(n.__file__, n.libcurl_available())'", "python: import")
    so, curl = r.stdout.split()
    if curl != "False":
        raise SystemExit("proof python: libcurl loads in the chroot")
    folder = os.path.join(work, "out-python")
    subprocess.run(["rm", "-rf", folder], check=True)
    with IngestServer() as srv:
        ch.check("cd /tmp && /tmp/pn-venv/bin/python -m pyroscope run --server-address %s "
                 "--output-dir /mnt/work/out-python --upload-interval 1 "
                 "/mnt/src/examples/python/shop.py --seconds 4" % srv.url, "python: shop.py")
        got = check_profiles("python", srv, folder,
                             {"endpoint": {"/checkout", "/cart"}})
    tag = "cp" + re.search(r"cpython-(\d+)", so).group(1)
    whl, = [w for w in wheels if "-%s-%s-" % (tag, tag) in os.path.basename(w)]
    return {"artifact": os.path.basename(whl), "size_kib": os.path.getsize(whl) // 1024,
            "install_s": round(secs, 1), **got}


# npm's own client (Debian's npm depends on node-gyp, libnode-dev and g++),
# and an npm cache filled on the host with what the package and the example
# need, so the chroot installs offline.
NPM = "npm@10.9.2"
NODE_EXAMPLE_DEPS = ["@opentelemetry/api@1.9.1", "@opentelemetry/context-async-hooks@2.12.0",
                     "@opentelemetry/sdk-trace-base@2.12.1"]


# npm inside the chroot: npm_offline's client and cache.
NPM_OFFLINE = ("node /mnt/work/npm/package/bin/npm-cli.js --offline --cache /mnt/work/npm-cache "
               "--no-audit --no-fund --loglevel=error")


def npm_offline(work, tgz):
    npm = os.path.join(work, "npm")
    cache = os.path.join(work, "npm-cache")
    if not os.path.exists(os.path.join(npm, "package", "bin", "npm-cli.js")):
        os.makedirs(npm, exist_ok=True)
        subprocess.run(["npm", "pack", "--silent", NPM], cwd=npm, check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run("tar xzf npm-*.tgz", shell=True, cwd=npm, check=True)
    fill = os.path.join(work, "npm-fill")
    subprocess.run(["rm", "-rf", fill], check=True)
    os.makedirs(fill)
    with open(os.path.join(fill, "package.json"), "w") as f:
        f.write('{"name": "fill", "version": "1.0.0"}')
    subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--ignore-scripts",
                    "--cache", cache, tgz] + NODE_EXAMPLE_DEPS, cwd=fill, check=True)


def prove_node(ch, dist, work):
    tgzs = glob.glob(os.path.join(dist, "pyroscope-native-*.tgz"))
    if not tgzs:
        raise SystemExit("proof node: no npm tarball in %s (make dist)" % dist)
    tgz = tgzs[0]
    npm_offline(work, tgz)
    npm = NPM_OFFLINE
    ch.check("rm -rf /tmp/pn-node && mkdir /tmp/pn-node && cd /tmp/pn-node && "
             "echo '{\"name\": \"app\", \"version\": \"1.0.0\"}' >package.json && "
             "%s install %s && cp /mnt/src/examples/node/shop.js ." % (npm, " ".join(NODE_EXAMPLE_DEPS)),
             "node: app + OpenTelemetry")
    secs = timed(ch, "cd /tmp/pn-node && %s install /mnt/dist/%s" % (npm, os.path.basename(tgz)),
                 "node: npm install")
    r = ch.check("cd /tmp/pn-node && node -e \"console.log(require.resolve('pyroscope-native'));"
                 "console.log(require('node-gyp-build').path("
                 "'node_modules/pyroscope-native/bindings/node'))\" && "
                 "ls node_modules/pyroscope-native/bindings/node", "node: which addon")
    if "prebuilds" not in r.stdout or "\nbuild\n" in r.stdout:
        raise SystemExit("proof node: the addon was not the prebuilt one:\n" + r.stdout)
    folder = os.path.join(work, "out-node")
    subprocess.run(["rm", "-rf", folder], check=True)
    with IngestServer() as srv:
        ch.check("cd /tmp/pn-node && node shop.js --seconds 4",
                 "node: shop.js", env={"PYROSCOPE_SERVER_ADDRESS": srv.url,
                                       "PYROSCOPE_OUTPUT_DIR": "/mnt/work/out-node",
                                       "PYROSCOPE_UPLOAD_INTERVAL": "1s"})
        got = check_profiles("node", srv, folder, {"endpoint": {"/checkout", "/cart"}})
    return {"artifact": os.path.basename(tgz), "size_kib": os.path.getsize(tgz) // 1024,
            "install_s": round(secs, 1), **got}


def prove_ruby(ch, dist, work):
    gems = glob.glob(os.path.join(dist, "pyroscope-native-*-x86_64-linux.gem"))
    if not gems:
        raise SystemExit("proof ruby: no x86_64-linux gem in %s (make dist)" % dist)
    gem = gems[0]
    secs = timed(ch, "rm -rf /tmp/pn-gems && GEM_HOME=/tmp/pn-gems gem install --local "
                     "--no-document /mnt/dist/%s" % os.path.basename(gem), "ruby: gem install")
    folder = os.path.join(work, "out-ruby")
    subprocess.run(["rm", "-rf", folder], check=True)
    with IngestServer() as srv:
        ch.check("cd /tmp && ruby /mnt/src/examples/ruby/shop.rb --seconds 4 "
                 "--output-dir /mnt/work/out-ruby", "ruby: shop.rb",
                 env={"GEM_HOME": "/tmp/pn-gems", "PYROSCOPE_SERVER_ADDRESS": srv.url,
                      "PYROSCOPE_UPLOAD_INTERVAL": "1s"})
        # The example has no spans (no OpenTelemetry SDK for Ruby here).
        got = check_profiles("ruby", srv, folder, {"endpoint": {"/checkout", "/cart"}},
                             spans_wanted=False)
    return {"artifact": os.path.basename(gem), "size_kib": os.path.getsize(gem) // 1024,
            "install_s": round(secs, 1), **got}


PROVERS = {"python": prove_python, "node": prove_node, "ruby": prove_ruby}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chroot", required=True)
    ap.add_argument("--dist", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--runtimes", nargs="*", default=list(PROVERS))
    a = ap.parse_args()
    dist, work = os.path.abspath(a.dist), os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    ch = Chroot(os.path.abspath(a.chroot), dist, work)
    results = {}
    for rt in a.runtimes:
        t = time.monotonic()
        results[rt] = PROVERS[rt](ch, dist, work)
        results[rt]["proof_s"] = round(time.monotonic() - t, 1)
        print("proof %-7s %s" % (rt, json.dumps(results[rt])), flush=True)
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
