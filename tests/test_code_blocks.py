"""Every Python code block of the README and of the documentation runs, as it stands.

A reader pastes a block into a fresh interpreter, so each block must be self-contained: its
imports, and data from an installed package or generated in the block. Blocks are the fenced
```` ```python ```` blocks of ``README.md`` and of every page of ``docs/`` (other fences --
``bash``, ``text``, ``{eval-rst}`` -- are not Python).

* The README's blocks run each in a fresh interpreter (a subprocess), exactly as pasted.
* The pages' blocks run in this process, each in a fresh namespace (a name the block does not
  define is a ``NameError``) and in a fresh temporary directory (files a block writes do not
  reach the next). Imported modules stay loaded between blocks, so a block that uses what
  ``import dowhy_cfr`` registers with DoWhy must import ``dowhy_cfr`` itself: checked by text.

The blocks keep training short (small ``n_iter``, small networks) where they are about the API,
and say so; the whole file takes about 80 s (one torch thread). ``--tb=short`` shows the failing
block's own line (file names are ``README.md:<line>`` and ``docs/<page>.md:<line>``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```\s*$",
                   re.MULTILINE | re.DOTALL)
#: what ``import dowhy_cfr`` registers with DoWhy: a block using it must import the package
REGISTERED = ("backdoor.cfr", "backdoor.tarnet", "representation_balance")


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """``(first line of the code, source)`` of each ```` ```python ```` block of a markdown file."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for m in FENCE.finditer(text):
        if m.group("info").strip().lower() not in ("python", "py", "python3"):
            continue
        line = text.count("\n", 0, m.start()) + 2
        blocks.append((line, textwrap.dedent(m.group("body"))))
    return blocks


def _cases(paths):
    return [pytest.param(path, line, src, id=f"{path.relative_to(ROOT)}:{line}")
            for path in paths for line, src in python_blocks(path)]


README_BLOCKS = _cases([ROOT / "README.md"])
PAGE_BLOCKS = _cases(sorted(DOCS.glob("*.md")))


def _env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg",
                PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


def test_blocks_found():
    # the README has the EconML and the DoWhy example; the guide pages have theirs
    assert len(README_BLOCKS) >= 2
    pages = {p.values[0].name for p in PAGE_BLOCKS}
    assert {"getting_started.md", "workflow.md", "tabular.md", "saving.md"} <= pages


@pytest.mark.parametrize("path, line, src", README_BLOCKS)
def test_readme_block_runs_in_a_fresh_interpreter(path, line, src, tmp_path):
    script = tmp_path / "block.py"
    # torch's threads: one, as on a busy 2-core machine; the block itself is run unchanged
    script.write_text("import torch; torch.set_num_threads(1)\n" + src, encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (
        f"README.md, block at line {line}, failed in a fresh interpreter:\n{result.stderr[-3000:]}")


@pytest.mark.parametrize("path, line, src", PAGE_BLOCKS)
def test_docs_block_runs(path, line, src, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    if any(name in src for name in REGISTERED):
        assert re.search(r"^\s*(import dowhy_cfr|from dowhy_cfr\b)", src, re.MULTILINE), (
            f"{path.name}:{line} uses DoWhy names registered by dowhy_cfr but does not import it")
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(1)
    code = compile(src, f"{path.relative_to(ROOT)}:{line}", "exec")
    try:
        exec(code, {"__name__": "__main__"})
    finally:
        plt.close("all")


def test_fence_parser_finds_python_blocks_only(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nx = 1\n```\n\n```bash\nls\n```\n\n"
                    "* item\n\n  ```python\n  y = 2\n  ```\n", encoding="utf-8")
    assert python_blocks(page) == [(4, "x = 1\n"), (14, "y = 2\n")]


def test_a_block_with_an_undefined_name_fails(tmp_path):
    # the README's former DoWhy example: `df` defined nowhere in the block
    page = tmp_path / "page.md"
    page.write_text("```python\nfrom dowhy import CausalModel\nCausalModel(data=df, "
                    "treatment='t', outcome='y')\n```\n", encoding="utf-8")
    (line, src), = python_blocks(page)
    with pytest.raises(NameError, match="'df' is not defined"):
        exec(compile(src, "page.md", "exec"), {"__name__": "__main__"})
