"""The documentation builds with Sphinx without a single warning (``sphinx-build -W``).

Needs the ``docs`` extra (``pip install -e ".[docs]"``: sphinx, myst-parser, sphinx-rtd-theme);
skipped without it. The API pages import the package (autodoc), so a broken docstring shows up
here as a warning.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.slow
def test_sphinx_build_without_warnings(tmp_path):
    for module in ("sphinx", "myst_parser", "sphinx_rtd_theme"):
        pytest.importorskip(module, reason=f'{module} is not installed (pip install -e ".[docs]")')
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
           "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, (
        f"sphinx-build -W failed (exit {result.returncode}):\n{result.stderr}\n{result.stdout}")
    assert (tmp_path / "html" / "index.html").exists()
    assert (tmp_path / "html" / "api.html").exists()
