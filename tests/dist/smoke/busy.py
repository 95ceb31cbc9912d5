"""The aarch64 smoke test's Python app (tests/dist/smoke.py): profiles 2 s
of CPU in busy(), with a label, into the folder argv[1]. Prints the module
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
# A thread tag, not tag_wrapper: context labels are read with
# process_vm_readv, which qemu-user does not implement (ENOSYS), so under
# emulation they switch themselves off (context_labels_enabled 0).
pyroscope.add_thread_tag("endpoint", "/smoke")
busy(2.0)
st = pyroscope.stats()
print(json.dumps({k: st[k] for k in ("samples", "walk_errors", "context_labels_enabled")}))
pyroscope.shutdown()
