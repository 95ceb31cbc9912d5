"""The prebuilt artifacts' C build: one static archive per CPU with the
shared core, the report library, protobuf-c and zlib, compiled by Zig's
clang against glibc 2.17 (`zig cc -target <arch>-linux-gnu.2.17`), so a
binding's module runs on any Linux with glibc 2.17 or newer and needs no
other library (libcurl stays dlopen'ed, and optional).

Used by wheels.py (and the Node and Ruby builders); objects are kept under
the build folder and recompiled only when a source or header is newer.
"""
import concurrent.futures
import glob
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHES = ("x86_64", "aarch64")
GLIBC = "2.17"

# The project's warnings as errors on our sources (as in setup.py / CMake).
OUR_CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow",
              "-Wvla", "-fvisibility=hidden", "-fPIC", "-g0"]
# Third-party sources: their own flags, their symbols hidden so they never
# clash with a copy the host process already loaded.
ZLIB_CFLAGS = ["-O2", "-fPIC", "-fvisibility=hidden", "-g0", "-D_LARGEFILE64_SOURCE=1",
               "-DHAVE_UNISTD_H", "-DHAVE_STDARG_H", "-w"]
PROTOBUF_C_CFLAGS = ["-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-g0", "-w"]
ZLIB_SOURCES = ("adler32 compress crc32 deflate gzclose gzlib gzread gzwrite infback inffast "
                "inflate inftrees trees uncompr zutil").split()
LIBS = ["-lpthread", "-ldl", "-lrt", "-lm"]
# What a module may need at run time (manylinux2014's glibc libraries).
GLIBC_LIBS = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
              "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
ELF_MACHINE = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}


def zig_cc(arch):
    """The C compiler command for arch against glibc 2.17."""
    return [sys.executable, "-m", "ziglang", "cc", "-target", "%s-linux-gnu.%s" % (arch, GLIBC)]


def jobs():
    return max(1, int(os.environ.get("JOBS", "1")))


def _stale(obj, deps):
    if not os.path.exists(obj):
        return True
    t = os.path.getmtime(obj)
    return any(os.path.getmtime(d) > t for d in deps)


def compile_all(arch, units, out_dir):
    """units: (source, flags, header deps). Compiles the stale ones into
    out_dir, JOBS at a time; returns the object paths in order."""
    os.makedirs(out_dir, exist_ok=True)
    todo, objs = [], []
    for src, flags, deps in units:
        rel = os.path.relpath(src, ROOT) if src.startswith(ROOT) else os.path.basename(src)
        obj = os.path.join(out_dir, rel.replace("/", "__")[:-2] + ".o")
        objs.append(obj)
        if _stale(obj, [src] + deps):
            todo.append(zig_cc(arch) + flags + ["-c", src, "-o", obj])

    def run(cmd):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise SystemExit("compile failed:\n  %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))

    with concurrent.futures.ThreadPoolExecutor(jobs()) as ex:
        list(ex.map(run, todo))
    return objs


def deps_include(src_dir):
    """Headers of the vendored libraries and libcurl's (types only)."""
    inc = os.path.join(src_dir, "include")
    os.makedirs(os.path.join(inc, "protobuf-c"), exist_ok=True)
    links = {
        os.path.join(inc, "protobuf-c", "protobuf-c.h"):
            os.path.join(src_dir, "protobuf-c", "protobuf-c", "protobuf-c.h"),
        os.path.join(inc, "zlib.h"): os.path.join(src_dir, "zlib", "zlib.h"),
        os.path.join(inc, "zconf.h"): os.path.join(src_dir, "zlib", "zconf.h"),
        os.path.join(inc, "curl"): curl_headers(),
    }
    for link, target in links.items():
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(target, link)
    return inc


def curl_headers():
    """libcurl's headers (only its types and constants are compiled in; the
    library is dlopen'ed). Architecture-independent since curl 7.50."""
    for d in glob.glob("/usr/include/*/curl") + ["/usr/include/curl"]:
        if os.path.exists(os.path.join(d, "curl.h")):
            return d
    raise SystemExit("libcurl headers not found (apt-get install libcurl4-openssl-dev)")


def core_sources():
    """The core's and report library's sources: the ones core/sources.txt lists."""
    with open(os.path.join(ROOT, "core/sources.txt")) as f:
        return [os.path.join(ROOT, "core", line.strip()) for line in f
                if line.strip() and line[0] != "#"]


def core_headers():
    return sorted(glob.glob(os.path.join(ROOT, "core/include/*.h"))
                  + glob.glob(os.path.join(ROOT, "core/src/*/*.h"))
                  + glob.glob(os.path.join(ROOT, "core/report/*.h"))
                  + glob.glob(os.path.join(ROOT, "core/gen/**/*.h"), recursive=True))


def core_archive(arch, build_dir, src_dir):
    """build_dir/<arch>/libpyroscope_core.a: core, report, protobuf-c, zlib."""
    inc = deps_include(src_dir)
    core_inc = ["-I" + os.path.join(ROOT, d) for d in
                ("core/include", "core/src", "core/report", "core/gen")] + ["-I" + inc]
    hdrs = core_headers()
    units = [(s, OUR_CFLAGS + core_inc, hdrs) for s in core_sources()]
    pbc = os.path.join(src_dir, "protobuf-c", "protobuf-c")
    units.append((os.path.join(pbc, "protobuf-c.c"), PROTOBUF_C_CFLAGS + ["-I" + inc],
                  [os.path.join(pbc, "protobuf-c.h")]))
    z = os.path.join(src_dir, "zlib")
    units += [(os.path.join(z, n + ".c"), ZLIB_CFLAGS, []) for n in ZLIB_SOURCES]
    out = os.path.join(build_dir, arch)
    objs = compile_all(arch, units, os.path.join(out, "core"))
    lib = os.path.join(out, "libpyroscope_core.a")
    if _stale(lib, objs):
        if os.path.exists(lib):
            os.unlink(lib)
        subprocess.run([sys.executable, "-m", "ziglang", "ar", "rcs", lib] + objs, check=True)
    return lib


def link_shared(arch, out, objs, archive, extra=()):
    """A shared module of objs + the core archive; only glibc (2.17 symbols)
    stays dynamic."""
    if _stale(out, list(objs) + [archive]):
        cmd = zig_cc(arch) + ["-shared", "-fPIC", "-o", out] + list(objs) + [archive] \
            + list(extra) + ["-Wl,--as-needed"] + LIBS + ["-s"]
        subprocess.run(cmd, check=True)
    return out


def check_glibc_only(path, arch):
    """For the artifacts auditwheel does not see (the Node addon): the
    module is for arch, needs only glibc's libraries and no symbol version
    newer than GLIBC_2.17. Uses pyelftools (auditwheel's own ELF reader)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection
    with open(path, "rb") as f:
        elf = ELFFile(f)
        problems = []
        if elf["e_machine"] != ELF_MACHINE[arch]:
            problems.append("machine %s, not %s" % (elf["e_machine"], ELF_MACHINE[arch]))
        dyn = elf.get_section_by_name(".dynamic")
        needed = {t.needed for t in dyn.iter_tags() if t.entry.d_tag == "DT_NEEDED"}
        problems += ["needs %s" % n for n in sorted(needed - GLIBC_LIBS)]
        newest = (0,)
        for sec in elf.iter_sections():
            if isinstance(sec, GNUVerNeedSection):
                for _, auxes in sec.iter_versions():
                    for aux in auxes:
                        if aux.name.startswith("GLIBC_") and aux.name[6:][:1].isdigit():
                            newest = max(newest, tuple(int(x) for x in aux.name[6:].split(".")))
        if newest > tuple(int(x) for x in GLIBC.split(".")):
            problems.append("needs GLIBC_%s" % ".".join(map(str, newest)))
    if problems:
        raise SystemExit("%s: not a glibc %s module for %s: %s"
                         % (path, GLIBC, arch, "; ".join(problems)))
    return "GLIBC_" + ".".join(map(str, newest))
