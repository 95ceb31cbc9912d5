"""The README's Python snippets run as pasted: each ```python block is
taken from README.md itself (so the two cannot drift) and run in a fresh
interpreter in an empty folder. A block without an import continues an
earlier one (a fragment): it must at least compile."""
import os
import re
import subprocess
import sys

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "README.md")


def blocks(lang):
    with open(README, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"^```%s\n(.*?)^```" % lang, text, re.S | re.M)


PY = blocks("python")


def test_the_readme_has_python_snippets():
    assert len([b for b in PY if re.search(r"^import |^from ", b, re.M)]) >= 2


@pytest.mark.parametrize("n", range(len(PY)))
def test_python_snippet_runs_as_pasted(n, tmp_path):
    code = PY[n]
    if not re.search(r"^import |^from ", code, re.M):
        compile(code, f"README python block {n + 1}", "exec")
        return
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYROSCOPE_", "OTEL_"))}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"block {n + 1}:\n{code}\nstderr:\n{r.stderr[-3000:]}"
    m = re.search(r'output_dir="([^"]+)"', code)
    if m:  # the profiles it promises are there
        assert any(p.endswith(".pb.gz") for p in os.listdir(tmp_path / m.group(1))), code
