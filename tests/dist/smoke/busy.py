"""The aarch64 smoke test's Python app (tests/dist/smoke.py): profiles a
busy loop of 2 s of CPU, labelled, into the folder argv[1]."""
import sys
import time

import pyroscope
import pyroscope._native as native

print(native.__file__)
pyroscope.configure(application_name="smoke", output_dir=sys.argv[1], upload_interval="1s")
with pyroscope.tag_wrapper({"endpoint": "/smoke"}):
    end = time.process_time() + 2.0
    while time.process_time() < end:
        sum(range(10000))
pyroscope.shutdown()
