"""Uploads through Python's own ``http.client`` when libcurl cannot be loaded.

A slim image often has no ``libcurl.so.4``. Then the core hands each upload
request (already built: URL with the ingest query, headers, the raw gzip'ed
pprof or OTLP body) to this module's daemon thread, which sends it and
returns the server's answer; retries, backoff and logging stay in the core
(src/sender.c has the native half). With libcurl present nothing here runs.
"""

import base64
import http.client
import os
import ssl
import threading
import time
import urllib.parse

from . import _native

REPLY_KEEP = 300   # the core keeps this many bytes of a reply (PN_HTTP_REPLY_KEEP)
_lock = threading.Lock()
_thread = None
_pid = None


def ensure():
    """Start the sender thread once per process, only without libcurl."""
    global _thread, _pid
    with _lock:
        if _thread is not None and _pid == os.getpid() and _thread.is_alive():
            return
        if _native.libcurl_available():
            return
        _pid = os.getpid()
        _thread = threading.Thread(target=_run, name="pyroscope-sender", daemon=True)
        _thread.start()


def after_fork_in_child():
    """The thread does not exist in a child: start a new one if it ran."""
    global _lock, _thread
    _lock = threading.Lock()
    if _thread is not None:
        _thread = None
        ensure()


def _run():
    _native.sender_attach(True)
    try:
        while True:
            req = _native.sender_next(60.0)
            if req is not None:
                _answer(req)
    finally:
        _native.sender_attach(False)


def _answer(req):
    gen = req[0]
    try:
        status, reply = send(*req[1:])
        _native.sender_done(gen, status, reply, None, False)
    except ssl.SSLCertVerificationError as e:
        _native.sender_done(gen, 0, b"", "TLS: %s" % e, True)   # retrying will not help
    except Exception as e:  # any failure is the core's to count and retry
        _native.sender_done(gen, 0, b"", "%s: %s" % (type(e).__name__, e), False)


def send(url, headers, body, user, password, timeout_s, connect_timeout_s, ca_file, ca_dir):
    """POST body to url; (status, first bytes of the reply)."""
    u = urllib.parse.urlsplit(url)
    if user is None and u.username is not None:
        user = urllib.parse.unquote(u.username)
        password = urllib.parse.unquote(u.password or "")
    hdrs = dict(headers)
    if user is not None:
        token = base64.b64encode(("%s:%s" % (user, password or "")).encode()).decode()
        hdrs["Authorization"] = "Basic " + token
    path = (u.path or "/") + ("?" + u.query if u.query else "")
    deadline = time.monotonic() + timeout_s
    if u.scheme == "https":
        ctx = ssl.create_default_context(cafile=ca_file, capath=ca_dir)
        conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=connect_timeout_s,
                                           context=ctx)
    else:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=connect_timeout_s)
    try:
        conn.connect()
        conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
        conn.request("POST", path, body=body, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, resp.read(REPLY_KEEP)
    finally:
        conn.close()
