"""A tiny Pyroscope ingest server on the loopback interface, for the tests.

Standard library only. It records every ``POST /ingest`` (query, headers and
the multipart ``profile`` part) and answers as told: 200, a list of statuses
to give in turn (e.g. 503, 503, then 200), or never (the connection is held
open until the server closes), to test retries, failures and bounded stops.

    with IngestServer(statuses=[503, 503]) as srv:
        run_child(server_address=srv.url)
        srv.wait_for(1)
        prof = pprof_reader.decode(srv.requests[-1].profile)

``GET /_count`` answers the number of ingest requests recorded so far, so a
profiled child can ask the server what it has seen at a given moment.
"""

import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


# The series tags every upload carries besides the user's, as the Grafana
# SDKs send them (issue 28): tests about the user's tags drop them.
SDK_TAGS = ("otel.scope.name", "otel.scope.version", "process.runtime.name",
            "process.runtime.version")


def user_name(name):
    """The ingest name without the SDK's own series tags:
    "app{otel.scope.name=...,env=ci}" -> "app{env=ci}"."""
    app, brace, rest = name.partition("{")
    kept = [kv for kv in rest.rstrip("}").split(",") if kv and kv.split("=", 1)[0] not in SDK_TAGS]
    return app + ("{" + ",".join(kept) + "}" if kept else "")


@dataclass
class IngestRequest:
    path: str
    query: dict           # name -> value (each parameter appears once)
    headers: dict         # lower-case name -> value
    body: bytes
    profile: bytes = b""  # the multipart part named "profile"
    filename: str = None  # that part's filename (the server requires one)
    parts: dict = field(default_factory=dict)  # every part: name -> bytes


def parse_multipart(content_type, body):
    """{part name: (filename or None, bytes)} of a multipart/form-data body,
    split by the boundary given in Content-Type."""
    ctype, _, params = content_type.partition(";")
    if ctype.strip().lower() != "multipart/form-data":
        raise ValueError(f"not multipart/form-data: {content_type!r}")
    boundary = None
    for p in params.split(";"):
        k, _, v = p.strip().partition("=")
        if k.lower() == "boundary":
            boundary = v.strip('"')
    if not boundary:
        raise ValueError(f"no boundary in {content_type!r}")
    delim = b"--" + boundary.encode("latin-1")
    out = {}
    # The body is: preamble, delim, part, delim, part, ..., delim + "--".
    for chunk in body.split(delim)[1:]:
        if chunk.startswith(b"--"):
            break  # the closing delimiter
        # Each part: CRLF, header lines, empty line, content, CRLF.
        chunk = chunk[2:] if chunk.startswith(b"\r\n") else chunk
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if not sep:
            raise ValueError("multipart part without a header/content separator")
        if content.endswith(b"\r\n"):
            content = content[:-2]
        name = filename = None
        for line in head.decode("latin-1").split("\r\n"):
            hname, _, hval = line.partition(":")
            if hname.strip().lower() != "content-disposition":
                continue
            for item in hval.split(";")[1:]:
                k, _, v = item.strip().partition("=")
                if k.lower() == "name":
                    name = v.strip('"')
                elif k.lower() == "filename":
                    filename = v.strip('"')
        if name is None:
            raise ValueError("multipart part without a name")
        out[name] = (filename, content)
    return out


class IngestServer:
    """Loopback ingest server. ``statuses``: answers for the first requests
    (an int, or a (status, body text) pair); later requests get ``status``
    with ``message``. ``hang=True``: read each request, record it, never
    answer. ``port``: 0 picks a free one."""

    def __init__(self, statuses=(), status=200, message="ok", hang=False, port=0):
        self._script = [s if isinstance(s, tuple) else (s, f"status {s}") for s in statuses]
        self._default = (status, message)
        self._hang = hang
        self._port = port
        self._release = threading.Event()  # set at close: hanging handlers return
        self._cond = threading.Condition()
        self.requests = []  # IngestRequest, in arrival order
        self.errors = []    # requests that could not be parsed (as text)
        self._httpd = None
        self._thread = None

    # ------------------------------------------------------------ lifetime

    def start(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 so curl's "Expect: 100-continue" is answered at once
            # instead of curl waiting a second before sending the body.
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass  # keep the test output clean

            def do_GET(self):
                if self.path == "/_count":
                    with server._cond:
                        n = len(server.requests)
                    self._answer(200, str(n))
                else:
                    self._answer(404, "not found")

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                url = urllib.parse.urlsplit(self.path)
                if url.path != "/ingest":
                    self._answer(404, "not found")
                    return
                server._record(url, dict((k.lower(), v) for k, v in self.headers.items()), body)
                if server._hang:
                    server._release.wait()
                    self.close_connection = True
                    return  # no answer at all
                status, message = server._next_answer()
                self._answer(status, message)

            def _answer(self, status, text):
                data = text.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def close(self):
        self._release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(5)
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def port(self):
        return self._httpd.server_address[1]

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------ requests

    def _next_answer(self):
        with self._cond:
            return self._script.pop(0) if self._script else self._default

    def _record(self, url, headers, body):
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        req = IngestRequest(path=url.path, query=query, headers=headers, body=body)
        try:
            parts = parse_multipart(headers.get("content-type", ""), body)
            req.parts = {k: v for k, (_, v) in parts.items()}
            if "profile" in parts:
                req.filename, req.profile = parts["profile"]
        except ValueError as exc:
            with self._cond:
                self.errors.append(f"{exc} (query {url.query})")
        with self._cond:
            self.requests.append(req)
            self._cond.notify_all()

    def wait_for(self, n, timeout=10.0):
        """Wait until at least n ingest requests arrived; True if they did."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.requests) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True
