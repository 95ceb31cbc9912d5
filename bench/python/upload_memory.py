"""Memory the uploads add to a CPython process: RSS, PSS, Private_Dirty and
Private_Clean from /proc/self/smaps_rollup, before configure() and after
3.5 s of CPU work with 1 s uploads, to a local HTTP server (http://) or to
a folder. Each given interpreter (one per installed build, e.g. before and
after a change) runs in alternation; medians over the rounds, in KiB.

    python3 bench/python/upload_memory.py [--rounds N] PYTHON [PYTHON ...]

Each PYTHON must have this project's `pyroscope` installed (the probe
imports hashlib, so OpenSSL's libcrypto is mapped in every variant, as in
most applications)."""
import argparse
import http.server
import statistics
import subprocess
import sys
import threading

PROBE = r"""
import hashlib, os, sys, tempfile, time
def mem():
    d = {}
    for line in open('/proc/self/smaps_rollup'):
        k, _, v = line.partition(':')
        if k in ('Rss', 'Pss', 'Private_Dirty', 'Private_Clean'):
            d[k] = int(v.split()[0])
    return d
import pyroscope
before = mem()
kw = dict(application_name='memprobe', upload_interval=1)
if sys.argv[1] == 'http':
    kw['server_address'] = sys.argv[2]
else:
    kw['output_dir'] = tempfile.mkdtemp()
pyroscope.configure(**kw)
end = time.time() + 3.5
while time.time() < end:
    hashlib.sha256(os.urandom(64)).hexdigest()
after = mem()
pyroscope.shutdown()
print(' '.join(str(after[k] - before[k]) for k in ('Rss', 'Pss', 'Private_Dirty', 'Private_Clean')))
"""

FIELDS = ("RSS", "PSS", "Private_Dirty", "Private_Clean")


class Ingest(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive, as Pyroscope's server

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("pythons", nargs="+")
    args = ap.parse_args()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ingest)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d" % srv.server_address[1]
    env = {"no_proxy": "127.0.0.1", "PATH": "/usr/bin:/bin"}
    got = {(py, mode): [] for py in args.pythons for mode in ("http", "folder")}
    for r in range(args.rounds):
        for py in args.pythons:
            for mode in ("http", "folder"):
                out = subprocess.run([py, "-c", PROBE, mode, url], capture_output=True, text=True,
                                     env=env, check=True).stdout.split()
                got[(py, mode)].append([int(x) for x in out])
        print("round %d/%d" % (r + 1, args.rounds), file=sys.stderr)
    srv.shutdown()
    print("added by configure() + 3.5 s of 1 s uploads, KiB, medians of %d rounds" % args.rounds)
    print("%-50s %-7s %8s %8s %14s %14s" % (("python", "to") + FIELDS))
    for (py, mode), rows in got.items():
        med = [statistics.median(col) for col in zip(*rows)]
        print("%-50s %-7s %8.0f %8.0f %14.0f %14.0f" % (py[-50:], mode, *med))


if __name__ == "__main__":
    main()
