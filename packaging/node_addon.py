"""Prebuilds the Node addon for the npm tarball: one Node-API build per CPU
(Node-API 8 serves every Node >= 20), compiled by native.py (Zig, glibc
2.17, protobuf-c and zlib inside), placed where node-gyp-build finds it:

    bindings/node/prebuilds/linux-<x64|arm64>/node.napi.glibc.node

    python node_addon.py --arch x86_64 --build build/dist
"""
import argparse
import glob
import os
import shutil

import native

ROOT = native.ROOT
NODE_ARCH = {"x86_64": "x64", "aarch64": "arm64"}


def node_api_headers():
    """Node-API's headers (C, architecture-independent)."""
    for d in ("/usr/include/node", "/usr/local/include/node"):
        if os.path.exists(os.path.join(d, "node_api.h")):
            return d
    raise SystemExit("node_addon: Node-API headers (node_api.h) not found")


def build(arch, work):
    archive = native.core_archive(arch, work, os.path.join(work, "src"))
    node = os.path.join(ROOT, "bindings/node")
    flags = native.OUR_CFLAGS + ["-DNAPI_VERSION=8"] + [
        "-I" + os.path.join(ROOT, d) for d in
        ("core/include", "bindings/node/src")] + \
        ["-isystem" + node_api_headers()]
    deps = native.core_headers() + glob.glob(os.path.join(node, "src/*.h"))
    objs = native.compile_all(arch, [(s, flags, deps) for s in
                                     sorted(glob.glob(os.path.join(node, "src/*.c")))],
                              os.path.join(work, arch, "node"))
    out = os.path.join(work, arch, "node", "pyroscope_native.node")
    native.link_shared(arch, out, objs, archive)
    native.check_glibc_only(out, arch)
    dest = os.path.join(node, "prebuilds", "linux-" + NODE_ARCH[arch])
    os.makedirs(dest, exist_ok=True)
    shutil.copy(out, os.path.join(dest, "node.napi.glibc.node"))
    return os.path.join(dest, "node.napi.glibc.node")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", choices=native.ARCHES, default="x86_64")
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "dist"))
    a = ap.parse_args()
    path = build(a.arch, os.path.abspath(a.build))
    print("%s  %d KiB" % (os.path.relpath(path, ROOT), os.path.getsize(path) // 1024))


if __name__ == "__main__":
    main()
