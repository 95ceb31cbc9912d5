"""setup.py checks for the C headers it needs before compiling anything, and
names the Debian packages to install (the compiler's own error names none)."""

import os
import stat
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def test_missing_header_fails_early_with_the_apt_get_line(tmp_path):
    # A compiler that cannot find curl/curl.h (or Python.h), and is
    # otherwise the real one: stands for a machine without those packages.
    real_cc = os.environ.get("CC", "cc")
    fake = tmp_path / "cc-without-curl"
    fake.write_text(f"""#!/bin/sh
for a in "$@"; do
  case "$a" in *.c) if grep -qE 'curl/curl.h|Python.h' "$a"; then
    echo "fatal error: header not found" >&2; exit 1; fi;; esac
done
exec {real_cc} "$@"
""")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "CC": str(fake)}
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_clib", "-b", str(tmp_path / "b"),
                        "-t", str(tmp_path / "t")], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode != 0
    assert "sudo apt-get install python3-dev libcurl4-openssl-dev\n" in r.stderr, r.stderr
    # Stopped before compiling the core.
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").rglob("*.o"))


def test_headers_present_pass_the_check():
    r = subprocess.run([sys.executable, "-c", "import runpy, sys\n"
                        "sys.argv = ['setup.py', '--name']\n"
                        "print(runpy.run_path('setup.py')['missing_packages']())"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout
