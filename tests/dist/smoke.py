"""The smoke test of prebuilt artifacts on a machine with no compiler: by
default the aarch64 ones of dist/, run on an arm64 Debian under
qemu-user-static (minimal_chroot.sh DIR arm64: sid minbase, no compiler, no
-dev package, no libcurl; its own CPython 3.13, 3.14, 3.15 and Node.js 24);
with --arch x86_64, the x86_64 wheels of the CPythons test-dist's trixie
chroot lacks, on an amd64 sid minbase (minimal_chroot.sh DIR amd64-sid:
CPython 3.14 and 3.15).

For each of those CPythons, pip picks and installs its wheel from dist/ in
a venv; for Node, npm installs the tarball and node-gyp-build must load the
prebuilt addon of that CPU. Each app (smoke/busy.py, busy.js) profiles 2 s
of a labelled busy loop into a folder; the profiles must decode and hold
samples with the label.

    python smoke.py --chroot DIR --dist DIR --work DIR [--arch A] [--runtimes python3.13 ... node]
    python smoke.py --chroot DIR --dist DIR --work DIR --prepare   # the venvs only

Prints one line per runtime; writes work/results.json. The venvs and npm's
cache stay under work/ (emulated pip and npm are slow), so a rerun only
reinstalls the artifacts; and a tree whose artifacts of that CPU and smoke
files are those of its last pass (work/smoke.stamp) is not run again.
"""
import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import time

import proof
import pprof_reader
from proof import Chroot, check_profiles, npm_offline, timed

SMOKE = "/mnt/src/tests/dist/smoke"
LABEL = {"endpoint": {"/smoke"}}
# No sampler CPU budget: under emulation the sampler costs ten times what
# it does on an arm64 CPU, and the budget would thin the samples out.
# ARCH: the CPU's name in wheels, and Node's in prebuilds/ (set by main).
ARCH = {"aarch64": "arm64", "x86_64": "x64"}
arch = "aarch64"
ENV = {"PYROSCOPE_SAMPLER_CPU_BUDGET": "0"}


def fresh(folder):
    subprocess.run(["rm", "-rf", folder], check=True)
    return folder


def busy_samples(kind, folder):
    """The sample count of stacks through the app's busy(): at least 20
    (2 s of CPU at 100 Hz makes about 200)."""
    n = 0
    for f in glob.glob(os.path.join(folder, "**", "*.pb.gz"), recursive=True):
        p = pprof_reader.decode(open(f, "rb").read())
        types = [t for t, _ in p["sample_types"]]
        if "samples" not in types:
            continue  # e.g. Node's wall profile
        for s in p["samples"]:
            # Python's frame is "busy"; Node's "./busy.js:busy:9".
            if any(re.fullmatch(r"(.*:)?busy(:\d+)?", fn) for fn, *_ in s["stack"]):
                n += s["values"][types.index("samples")]
    if n < 20:
        raise SystemExit("smoke %s: %d samples in busy(), want 20 or more" % (kind, n))
    return n


def make_venv(ch, work, python):
    """The venv pip installs into, made once per work folder: under emulation
    it takes minutes (ensurepip), so `make runtimes` makes it (--prepare)."""
    venv = "/mnt/work/venv-" + python
    if not os.path.exists(os.path.join(work, "venv-" + python, "bin", "pip")):
        ch.check("%s -m venv %s" % (python, venv), python + ": venv", timeout=1800)
    return venv


def smoke_python(ch, dist, work, python):
    """python: the chroot's interpreter, e.g. python3.13."""
    tag = "cp" + python[len("python"):].replace(".", "")
    whl = glob.glob(os.path.join(dist, "pyroscope_native-*-%s-%s-*%s*.whl" % (tag, tag, arch)))
    if not whl:
        raise SystemExit("smoke %s: no %s %s wheel in %s (make dist)" % (python, tag, arch, dist))
    venv = make_venv(ch, work, python)
    # What a user types, with dist/ as the index: pip picks the wheel.
    secs = timed(ch, "%s/bin/pip install -q --disable-pip-version-check --force-reinstall "
                     "--no-index --find-links /mnt/dist pyroscope-native" % venv,
                 python + ": pip install")
    folder = fresh(os.path.join(work, "out-" + python))
    r = ch.check("%s/bin/python %s/busy.py /mnt/work/out-%s" % (venv, SMOKE, python),
                 python + ": busy.py", env=ENV)
    so, stats = r.stdout.split("\n")[:2]
    if not so.endswith(".cpython-%s-%s-linux-gnu.so" % (tag[2:], arch)):
        raise SystemExit("smoke %s: imported %s, not the %s wheel's module" % (python, so, arch))
    got = check_profiles(python, None, folder, dict(LABEL, route={"/ctx"}), spans_wanted=False)
    if json.loads(stats).get("context_labels_enabled") != 1:
        raise SystemExit("smoke %s: context labels are off: %s" % (python, stats))
    return {"artifact": os.path.basename(whl[0]), "size_kib": os.path.getsize(whl[0]) // 1024,
            "install_s": round(secs, 1), **got, "busy_samples": busy_samples(python, folder),
            "stats": json.loads(stats)}


def smoke_node(ch, dist, work):
    tgz, = glob.glob(os.path.join(dist, "pyroscope-native-*.tgz"))
    npm_offline(work, tgz)
    secs = timed(ch, "rm -rf /mnt/work/node-app && mkdir /mnt/work/node-app && "
                     "cd /mnt/work/node-app && echo '{\"name\": \"app\", \"version\": \"1.0.0\"}' "
                     ">package.json && %s install /mnt/dist/%s" % (proof.NPM_OFFLINE,
                                                                   os.path.basename(tgz)),
                 "node: npm install")
    folder = fresh(os.path.join(work, "out-node"))
    # In the app's folder, so require() finds what npm installed.
    r = ch.check("cd /mnt/work/node-app && cp %s/busy.js . && node busy.js /mnt/work/out-node"
                 % SMOKE, "node: busy.js", env=ENV)
    addon = r.stdout.split()[0]
    if not addon.endswith("/prebuilds/linux-%s/node.napi.glibc.node" % ARCH[arch]):
        raise SystemExit("smoke node: loaded %s, not the prebuilt linux-%s addon"
                         % (addon, ARCH[arch]))
    got = check_profiles("node", None, folder, LABEL, spans_wanted=False)
    return {"artifact": os.path.basename(tgz) + " (prebuilds/linux-%s)" % ARCH[arch],
            "size_kib": os.path.getsize(tgz) // 1024, "install_s": round(secs, 1), **got,
            "busy_samples": busy_samples("node", folder)}


def stamp_key(dist):
    """What a pass covers: the wheels of the CPU, the npm tarball, this test."""
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for f in sorted(glob.glob(os.path.join(dist, "pyroscope_native-*%s*.whl" % arch))
                    + glob.glob(os.path.join(dist, "pyroscope-native-*.tgz"))) + \
            [os.path.join(here, "smoke.py"), os.path.join(here, "proof.py")] + \
            sorted(glob.glob(os.path.join(here, "smoke", "*"))):
        h.update(os.path.basename(f).encode() + b"\0" + open(f, "rb").read())
    return h.hexdigest()[:16]


def chroot_pythons(root):
    return sorted((os.path.basename(p) for p in glob.glob(os.path.join(root, "usr/bin/python3.*"))
                   if re.fullmatch(r"python3\.\d+", os.path.basename(p))),
                  key=lambda p: int(p.split(".")[1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chroot", required=True)
    ap.add_argument("--dist", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--arch", choices=sorted(ARCH), default="aarch64")
    ap.add_argument("--runtimes", nargs="*")
    ap.add_argument("--prepare", action="store_true",
                    help="only make the venvs (make runtimes), test nothing")
    a = ap.parse_args()
    global arch
    arch = a.arch
    root, dist, work = (os.path.abspath(p) for p in (a.chroot, a.dist, a.work))
    os.makedirs(work, exist_ok=True)
    if a.prepare:
        os.makedirs(dist, exist_ok=True)
        ch = Chroot(root, dist, work)
        # Two at a time (each is one emulated process): half the wall time.
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda py: make_venv(ch, work, py), a.runtimes or chroot_pythons(root)))
        return 0
    stamp, key = os.path.join(work, "smoke.stamp"), stamp_key(dist)
    if a.runtimes is None and os.path.exists(stamp) and open(stamp).read() == key:
        print("smoke %s: passed before with these artifacts (%s; %s)"
              % (arch, key, os.path.join(work, "results.json")))
        return 0
    ch = Chroot(root, dist, work)
    results = {}
    node = ["node"] if os.path.exists(os.path.join(root, "usr/bin/node")) else []
    for rt in a.runtimes or chroot_pythons(root) + node:
        t = time.monotonic()
        results[rt] = smoke_node(ch, dist, work) if rt == "node" else \
            smoke_python(ch, dist, work, rt)
        results[rt]["smoke_s"] = round(time.monotonic() - t, 1)
        print("smoke %s %-10s %s" % (arch, rt, json.dumps(results[rt])), flush=True)
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    if a.runtimes is None:
        with open(stamp, "w") as f:
            f.write(key)


if __name__ == "__main__":
    sys.exit(main())
