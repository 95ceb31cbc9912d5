"""Interpreters on this machine that the tests compare against."""

import glob
import os
import shutil


def older_python():
    """A CPython older than 3.10 (which we refuse), or None."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for v in ("3.9", "3.8", "3.7"):
        found = sorted(glob.glob(os.path.join(root, "versions", v + ".*", "bin", "python")))
        if found:
            return found[-1]
        if shutil.which("python" + v):
            return shutil.which("python" + v)
    return None
