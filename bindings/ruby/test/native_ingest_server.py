"""The Python tests' loopback IngestServer, for the Ruby tests: prints its
URL, then when stdin closes writes every request it got into the folder
given as argv[1] (N.profile: the multipart profile part, N.json: path,
query and headers) and exits."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "tests", "package"))
from ingest_server import IngestServer  # noqa: E402

out = sys.argv[1]
with IngestServer() as srv:
    print(srv.url, flush=True)
    sys.stdin.read()
    for i, r in enumerate(srv.requests):
        with open(os.path.join(out, "%d.profile" % i), "wb") as f:
            f.write(r.profile)
        with open(os.path.join(out, "%d.json" % i), "w") as f:
            json.dump({"path": r.path, "query": r.query, "headers": r.headers,
                       "filename": r.filename}, f)
