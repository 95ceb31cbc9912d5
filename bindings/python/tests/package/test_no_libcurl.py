"""Uploads on a machine without libcurl go through Python's http.client
(pyroscope/_sender.py): the child runs in its own mount namespace where
every libcurl.so.4 on the machine is an empty file, so dlopen fails as it
does on a slim image. Needs root (unshare, mount); skipped otherwise."""

import base64
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import pprof_reader
from conftest import HERE, NO_BUDGET
from ingest_server import IngestServer, user_name

CHILD = '''
import json, sys, time
import pyroscope
P = json.loads(sys.argv[1])

def burn_without_curl(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

pyroscope.configure(application_name="nocurl.test", server_address=P["url"],
                    basic_auth_username="alice", basic_auth_password="pw",
                    tags={"env": "ci"}, sample_rate=200, upload_interval=0.5)
with pyroscope.tag_wrapper({"endpoint": "/cart"}):
    burn_without_curl(0.6)
ok = pyroscope.flush(timeout=20)
maps = open("/proc/self/maps").read()
pyroscope.shutdown()
print(json.dumps({"flushed": ok, "curl_mapped": "libcurl" in maps,
                  "stats": pyroscope.stats()}))
'''


def libcurl_files():
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    return sorted({os.path.realpath(line.split("=>")[-1].strip())
                   for line in out.splitlines() if "libcurl" in line and "=>" in line})


def run_without_libcurl(code, *args):
    hide = " && ".join("mount --bind /dev/null %s" % f for f in libcurl_files()) or "true"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYROSCOPE_")}
    env.update(NO_BUDGET, no_proxy="127.0.0.1", NO_PROXY="127.0.0.1")
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
           '%s && exec "$0" "$@"' % hide, sys.executable, "-c", textwrap.dedent(code), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def can_hide_libcurl():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    r = run_without_libcurl("import ctypes\ntry:\n    ctypes.CDLL('libcurl.so.4')\n"
                            "except OSError:\n    print('hidden')")
    return r.returncode == 0 and r.stdout.strip() == "hidden"


pytestmark = pytest.mark.skipif(not can_hide_libcurl(),
                                reason="needs root to hide libcurl (unshare + mount)")


def test_profiles_reach_the_server_without_libcurl():
    with IngestServer() as srv:
        r = run_without_libcurl(CHILD, json.dumps({"url": srv.url}))
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["curl_mapped"] is False
    assert out["flushed"] is True, r.stderr
    assert srv.requests, "no upload reached the server"
    auth = "Basic " + base64.b64encode(b"alice:pw").decode()
    labelled = 0
    for req in srv.requests:
        # The sender's shape: the raw gzip'ed pprof, format=pprof.
        assert req.query["format"] == "pprof"
        assert user_name(req.query["name"]) == "nocurl.test{env=ci}"
        assert req.headers["authorization"] == auth
        prof = pprof_reader.decode(req.body)
        for s in prof["samples"]:
            if any(f[0] == "burn_without_curl" for f in s["stack"]):
                assert s["labels"].get("endpoint") == "/cart", s["labels"]
                labelled += s["values"][0]
    assert labelled >= 0.2e9, labelled
    assert out["stats"]["uploads_ok"] >= 1, out["stats"]
