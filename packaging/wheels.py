"""Builds the manylinux_2_17 wheels: one per CPython minor and CPU, each with
pyroscope/_native compiled by native.py (Zig, glibc 2.17, protobuf-c and
zlib inside), and checks every one with `auditwheel show`.

    python wheels.py --arch x86_64 --out dist --build build/dist [--pythons 3.10 ...]

The package's metadata and Python files come from setup.py itself (a
wheel built without the extension), so they are never written twice; each
wheel is that one plus its module, re-tagged and packed by `wheel pack`.
A CPython whose headers are not on the machine, or which the walker does
not support (cpython_layout.h's PNW_SUPPORTED), gets no wheel: it is named
on stderr.

aarch64 wheels are compiled against Debian's arm64 headers (pyconfig.h
differs per CPU), fetched by python_headers.sh into <build>/headers-arm64:
Debian has arm64 CPython 3.11, 3.13, 3.14 and 3.15, none of 3.10 or 3.12.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import native

ROOT = native.ROOT
PY = sys.executable
DEFAULT_PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15")
# Debian unstable's headers for the CPythons pyenv does not have (made by
# tests/runtimes/sid_chroot.sh); override with PN_SID_ROOT.
SID = os.environ.get("PN_SID_ROOT", os.path.join(ROOT, "build", "sid"))
MANYLINUX = "manylinux_2_17_{arch}.manylinux2014_{arch}"


def python_includes(version, arch, work):
    """Include folders for CPython `version` built for arch, or None."""
    if arch == "aarch64":
        return debian_includes(os.path.join(work, "headers-arm64"), version, arch, work)
    if arch == "x86_64":
        root = os.popen("pyenv root 2>/dev/null").read().strip() or os.path.expanduser("~/.pyenv")
        found = sorted(glob.glob(os.path.join(root, "versions", version + ".*",
                                              "include", "python" + version)),
                       key=lambda p: [int(x) for x in re.findall(r"\d+", p.split("versions")[-1])[:3]])
        if found and os.path.exists(os.path.join(found[-1], "internal")):
            return [found[-1]]
    return debian_includes(SID, version, arch, work)


def debian_includes(root, version, arch, work):
    """Debian's layout: pyconfig.h under the multiarch folder, the rest
    (with internal/, which the walker reads) in the common one, whose own
    pyconfig.h includes <triplet/pythonX.Y/pyconfig.h>: a folder of its own
    holds that one path (the whole usr/include would shadow Zig's glibc
    2.17 headers)."""
    base = os.path.join(root, "usr/include")
    triplet = "%s-linux-gnu" % arch
    multi = os.path.join(base, triplet, "python" + version)
    common = os.path.join(base, "python" + version)
    if not (os.path.exists(os.path.join(multi, "pyconfig.h")) and
            os.path.exists(os.path.join(common, "internal"))):
        return None
    shim = os.path.join(work, arch, "pyconfig-" + version)
    link = os.path.join(shim, triplet, "python" + version)
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.abspath(multi), link)
    return [multi, common, shim]


def walker_supports(arch, includes, work):
    """Whether cpython_layout.h accepts these headers (PNW_SUPPORTED)."""
    probe = os.path.join(work, "probe.c")
    with open(probe, "w") as f:
        f.write('#include "cpython_layout.h"\n#if !PNW_SUPPORTED\n#error unsupported\n#endif\n')
    cmd = native.zig_cc(arch) + ["-E", "-o", os.path.join(work, "probe.i"), "-std=c11", "-D_GNU_SOURCE",
                                 "-I" + os.path.join(ROOT, "core/include"),
                                 "-I" + os.path.join(ROOT, "bindings/python/src")] \
        + ["-isystem" + i for i in includes] + [probe]
    return subprocess.run(cmd, capture_output=True).returncode == 0


def pure_wheel(work):
    """setup.py's wheel without the extension, unpacked: the metadata and
    the Python files every wheel shares."""
    out = os.path.join(work, "pure")
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PN_PURE_WHEEL="1")
    subprocess.run([PY, "setup.py", "-q", "build", "--build-base", os.path.join(out, "b"),
                    "egg_info", "--egg-base", out,
                    "bdist_wheel", "--bdist-dir", os.path.join(out, "bd"), "-d", out],
                   cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    whl, = glob.glob(os.path.join(out, "*.whl"))
    subprocess.run([PY, "-m", "wheel", "unpack", "-d", os.path.join(out, "tree"), whl],
                   check=True, stdout=subprocess.DEVNULL)
    tree, = glob.glob(os.path.join(out, "tree", "*"))
    return tree


def build_module(arch, version, includes, archive, work):
    tag = version.replace(".", "")
    objs = native.compile_all(arch, [
        (s, native.OUR_CFLAGS + ["-I" + os.path.join(ROOT, "core/include"),
                                 "-I" + os.path.join(ROOT, "bindings/python/src")]
         + ["-isystem" + i for i in includes],
         native.core_headers() + glob.glob(os.path.join(ROOT, "bindings/python/src/*.h")))
        for s in sorted(glob.glob(os.path.join(ROOT, "bindings/python/src/*.c")))],
        os.path.join(work, arch, "py" + tag))
    so = os.path.join(work, arch, "py" + tag, "_native.cpython-%s-%s-linux-gnu.so" % (tag, arch))
    return native.link_shared(arch, so, objs, archive)


def pack(tree, so, version, arch, work, out):
    """The shared tree plus one module, tagged cpXY-cpXY-manylinux_2_17."""
    tag = "cp" + version.replace(".", "")
    t = os.path.join(work, arch, "wheel-" + tag)
    shutil.rmtree(t, ignore_errors=True)
    shutil.copytree(tree, t)
    shutil.copy(so, os.path.join(t, "pyroscope"))
    info, = glob.glob(os.path.join(t, "*.dist-info"))
    wheel_file = os.path.join(info, "WHEEL")
    lines = [ln for ln in open(wheel_file).read().splitlines()
             if not ln.startswith(("Tag:", "Root-Is-Purelib:")) and ln]
    lines.append("Root-Is-Purelib: false")
    lines += ["Tag: %s-%s-%s" % (tag, tag, p) for p in MANYLINUX.format(arch=arch).split(".")]
    with open(wheel_file, "w") as f:
        f.write("\n".join(lines) + "\n")
    r = subprocess.run([PY, "-m", "wheel", "pack", "-d", out, t], check=True,
                       capture_output=True, text=True)
    return os.path.join(out, re.search(r"([^/\s]+\.whl)", r.stdout).group(1))


def audit(whl, arch):
    """`auditwheel show`: the wheel must be consistent with manylinux_2_17
    or an older policy (no library outside the policy, no newer glibc)."""
    r = subprocess.run([PY, "-m", "auditwheel", "show", whl], capture_output=True, text=True)
    text = " ".join((r.stdout + r.stderr).split())
    m = re.search(r'consistent with the following platform tag: "manylinux_(\d+)_(\d+)_%s"'
                  % arch, text)
    if r.returncode or not m or (int(m.group(1)), int(m.group(2))) > (2, 17):
        os.unlink(whl)
        raise SystemExit("auditwheel: %s is not manylinux_2_17 (deleted):\n%s"
                         % (os.path.basename(whl), r.stdout + r.stderr))
    return "manylinux_%s_%s_%s" % (m.group(1), m.group(2), arch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", choices=native.ARCHES, default="x86_64")
    ap.add_argument("--out", default=os.path.join(ROOT, "dist"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "dist"))
    ap.add_argument("--pythons", nargs="*", default=list(DEFAULT_PYTHONS))
    a = ap.parse_args()
    out, work = os.path.abspath(a.out), os.path.abspath(a.build)
    os.makedirs(out, exist_ok=True)
    archive = native.core_archive(a.arch, work, os.path.join(work, "src"))
    tree = pure_wheel(os.path.join(work, a.arch))
    for version in a.pythons:
        includes = python_includes(version, a.arch, work)
        if not includes:
            print("wheels: no CPython %s headers for %s: no wheel" % (version, a.arch), file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            if not walker_supports(a.arch, includes, tmp):
                print("wheels: the walker does not support CPython %s yet: no wheel" % version,
                      file=sys.stderr)
                continue
        so = build_module(a.arch, version, includes, archive, work)
        whl = pack(tree, so, version, a.arch, work, out)
        print("%s  %s  %d KiB" % (os.path.basename(whl), audit(whl, a.arch),
                                  os.path.getsize(whl) // 1024))


if __name__ == "__main__":
    main()
