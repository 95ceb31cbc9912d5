"""The aarch64 smoke test's Python app (tests/dist/smoke.py): profiles 2 s
of CPU in busy(), with a thread tag and a context label, into the folder argv[1]. Prints the module
it imported, then a few stats as JSON."""
import json
import sys
import time

import pyroscope
import pyroscope._native as native


def busy(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        sum(range(10000))


print(native.__file__)
pyroscope.configure(application_name="smoke", output_dir=sys.argv[1], upload_interval="1s")
# Both kinds of label: a thread tag, and context labels (tag_wrapper), which
# the sampler reads through pn_safe_read; qemu-user has no process_vm_readv
# (ENOSYS), so there they prove its fallback.
pyroscope.add_thread_tag("endpoint", "/smoke")
with pyroscope.tag_wrapper({"route": "/ctx"}):
    busy(2.0)
st = pyroscope.stats()
print(json.dumps({k: st[k] for k in ("samples", "walk_errors", "context_labels_enabled")}))
pyroscope.shutdown()
