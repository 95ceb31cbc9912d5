"""Interpreters on this machine that the tests compare against."""

import glob
import os
import shutil
import sysconfig


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


# The interpreter running the tests is a free-threaded build (3.13t: no GIL,
# so gil_only is treated as False and every thread is sampled).
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
