"""Builds the platform gem (x86_64-linux, aarch64-linux): the extension
precompiled per Ruby minor by native.py (Zig, glibc 2.17, protobuf-c and
zlib inside) at lib/pyroscope/<minor>/pyroscope_native.so, which
lib/pyroscope/native.rb picks at require time. libruby's symbols stay
undefined: the ruby process that loads the extension provides them.

    python ruby_gem.py --arch x86_64 --out dist --build build/dist [--rubies 3.1 3.3 3.4]

A Ruby whose headers are not on the machine gets no build (named on stderr).
"""
import argparse
import glob
import os
import shutil
import subprocess

import native

ROOT = native.ROOT
SID = os.environ.get("PN_SID_ROOT", os.path.join(ROOT, "build", "sid"))
DEFAULT_RUBIES = ("3.1", "3.3", "3.4")
GEM_PLATFORM = {"x86_64": "x86_64-linux", "aarch64": "aarch64-linux"}


def ruby_includes(minor, arch):
    """(common, arch-specific) header folders of Ruby `minor`, or None."""
    for base in ("/usr/include", os.path.join(SID, "usr/include")):
        common = os.path.join(base, "ruby-%s.0" % minor)
        conf = os.path.join(base, "%s-linux-gnu" % arch, "ruby-%s.0" % minor)
        if os.path.exists(os.path.join(common, "ruby.h")) and \
                os.path.exists(os.path.join(conf, "ruby", "config.h")):
            return [common, conf]
    return None


def build_ext(arch, minor, includes, archive, work):
    ext = os.path.join(ROOT, "bindings/ruby/ext/pyroscope_native")
    # extconf.rb's one probe: rb_postponed_job_trigger is Ruby 3.3+.
    probes = ["-DHAVE_RB_POSTPONED_JOB_TRIGGER=1"] if tuple(map(int, minor.split("."))) >= (3, 3) else []
    flags = native.OUR_CFLAGS + probes + ["-I" + ext, "-I" + os.path.join(ROOT, "core/include")] + \
        ["-isystem" + i for i in includes]
    deps = native.core_headers() + glob.glob(os.path.join(ext, "*.h"))
    out_dir = os.path.join(work, arch, "ruby" + minor)
    objs = native.compile_all(arch, [(s, flags, deps) for s in sorted(glob.glob(os.path.join(ext, "*.c")))],
                              out_dir)
    return native.link_shared(arch, os.path.join(out_dir, "pyroscope_native.so"), objs, archive)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", choices=native.ARCHES, default="x86_64")
    ap.add_argument("--out", default=os.path.join(ROOT, "dist"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "dist"))
    ap.add_argument("--rubies", nargs="*", default=list(DEFAULT_RUBIES))
    a = ap.parse_args()
    out, work = os.path.abspath(a.out), os.path.abspath(a.build)
    archive = native.core_archive(a.arch, work, os.path.join(work, "src"))
    stage = os.path.join(work, a.arch, "gem")
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "bindings/ruby/lib"), os.path.join(stage, "lib"))
    built = []
    for minor in a.rubies:
        inc = ruby_includes(minor, a.arch)
        if not inc:
            print("ruby_gem: no Ruby %s headers for %s: not in the gem" % (minor, a.arch))
            continue
        so = build_ext(a.arch, minor, inc, archive, work)
        dest = os.path.join(stage, "lib", "pyroscope", minor)
        os.makedirs(dest)
        shutil.copy(so, dest)
        built.append(minor)
    if not built:
        raise SystemExit("ruby_gem: no Ruby headers at all for %s" % a.arch)
    r = subprocess.run(["ruby", os.path.join(ROOT, "packaging/platform_gem.rb"),
                        os.path.join(ROOT, "bindings/ruby/pyroscope-native.gemspec"), stage,
                        GEM_PLATFORM[a.arch], ",".join(built), out],
                       check=True, capture_output=True, text=True)
    gem = r.stdout.strip().splitlines()[-1]
    print("%s  Ruby %s  %d KiB" % (os.path.basename(gem), ", ".join(built),
                                   os.path.getsize(gem) // 1024))


if __name__ == "__main__":
    main()
