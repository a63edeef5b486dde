"""Synthetic designs (Nie & Wager 2021, A-D, and design E) and the synthetic / coverage commands."""

import numpy as np
import pandas as pd
import pytest
import torch

from dowhy_cfr.benchmarks import main
from dowhy_cfr.benchmarks.synthetic import (
    ROW_COLUMNS,
    interval_coverage,
    parse_designs,
    parse_methods,
    summarize_synthetic,
)
from dowhy_cfr.datasets.synthetic import DESIGNS, simulate

TINY = ["--tiny", "--n-iter", "10", "--n-test", "100", "--no-progress"]


@pytest.fixture(autouse=True)
def restore_threads():
    old = torch.get_num_threads()
    yield
    torch.set_num_threads(old)


def _relu(z):
    return np.maximum(z, 0.0)


# ------------------------------------------------------------------------------ generators
def test_design_a_formulas():
    data = simulate("A", 2000, random_state=0)
    x = data.x
    assert x.shape == (2000, 6) and data.w is None
    assert x.min() >= 0 and x.max() <= 1
    s = np.sin(np.pi * x[:, 0] * x[:, 1])
    np.testing.assert_allclose(data.b, s + 2 * (x[:, 2] - 0.5) ** 2 + x[:, 3] + 0.5 * x[:, 4])
    np.testing.assert_allclose(data.e, np.clip(s, 0.1, 0.9))
    assert data.e.min() == pytest.approx(0.1) and data.e.max() <= 0.9
    np.testing.assert_allclose(data.tau, (x[:, 0] + x[:, 1]) / 2)


def test_designs_b_c_d_formulas():
    b = simulate("B", 500, random_state=1)
    np.testing.assert_allclose(b.e, 0.5)
    np.testing.assert_allclose(b.tau, b.x[:, 0] + np.log1p(np.exp(b.x[:, 1])))
    first = np.maximum(np.maximum(b.x[:, 0] + b.x[:, 1], b.x[:, 2]), 0)
    np.testing.assert_allclose(b.b, first + _relu(b.x[:, 3] + b.x[:, 4]))
    c = simulate("C", 500, random_state=1)
    np.testing.assert_array_equal(c.tau, 1.0)
    np.testing.assert_allclose(c.e, 1 / (1 + np.exp(c.x[:, 1] + c.x[:, 2])))
    np.testing.assert_allclose(c.b, 2 * np.log1p(np.exp(c.x[:, :3].sum(1))))
    d = simulate("D", 500, random_state=1)
    u, v = _relu(d.x[:, :3].sum(1)), _relu(d.x[:, 3] + d.x[:, 4])
    np.testing.assert_allclose(d.tau, u - v)
    np.testing.assert_allclose(d.b, (u + v) / 2)
    np.testing.assert_allclose(d.e, 1 / (1 + np.exp(-d.x[:, 0]) + np.exp(-d.x[:, 1])))


def test_outcome_model_and_design_e_separates_w_from_x():
    data = simulate("E", 3000, sigma=0.0, random_state=2)
    assert data.x.shape == (3000, 3) and data.w.shape == (3000, 3)
    np.testing.assert_allclose(data.y, data.b + (data.t - 0.5) * data.tau)  # sigma = 0
    np.testing.assert_allclose(data.tau, data.x[:, 0] + np.log1p(np.exp(data.x[:, 1])))
    assert data.e.min() >= 0.1 and data.e.max() <= 0.9
    # W confounds: treated units have larger w1 + w2; X does not drive treatment
    t = data.t.astype(bool)
    assert (data.w[t, :2].sum(1).mean() - data.w[~t, :2].sum(1).mean()) > 0.5
    assert abs(data.x[t, 0].mean() - data.x[~t, 0].mean()) < 0.15
    # noise sd: residual of the true mean function with sigma = 2
    noisy = simulate("E", 3000, sigma=2.0, random_state=2)
    assert np.std(noisy.y - noisy.b - (noisy.t - 0.5) * noisy.tau) == pytest.approx(2.0, rel=0.06)


def test_simulate_is_deterministic_and_validates():
    a, b = simulate("D", 50, random_state=7), simulate("D", 50, random_state=7)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.t, b.t)
    assert not np.array_equal(a.y, simulate("D", 50, random_state=8).y)
    assert set(np.unique(a.t)) <= {0, 1}
    with pytest.raises(ValueError, match="design='F'"):
        simulate("F", 10)
    with pytest.raises(ValueError, match="d=4"):
        simulate("A", 10, d=4)
    with pytest.raises(ValueError, match="d=5"):
        simulate("E", 10, d=5)


# ------------------------------------------------------------------------------ metrics
def test_interval_coverage_by_hand():
    cov, width = interval_coverage([0.0, 1.0, 2.0], [-1.0, 1.5, 1.0], [1.0, 2.0, 3.0])
    assert cov == pytest.approx(2 / 3) and width == pytest.approx((2 + 0.5 + 2) / 3)
    assert interval_coverage(1.0, 0.5, 1.0) == (1.0, 0.5)  # closed interval
    assert all(np.isnan(interval_coverage(1.0, np.nan, np.nan)))


def test_quartile_coverage_by_hand():
    """Coverage and width within each quartile of the true τ (ranked; q1 the smallest)."""
    from dowhy_cfr.benchmarks.synthetic import QUARTILE_COLUMNS, quartile_coverage

    truth = np.array([5.0, 1.0, 7.0, 3.0, 2.0, 8.0, 4.0, 6.0])  # quartiles {1,2} {3,4} {5,6} {7,8}
    lower = truth - np.array([1, 1, 1, 1, 1, 1, 1, 1]) * [0.5, 0.5, -0.1, 0.5, -0.2, 0.5, 0.5, 2]
    upper = truth + 1.0
    out = quartile_coverage(truth, lower, upper)
    assert list(out) == QUARTILE_COLUMNS
    # q1 = units 1 (covered) and 2 (lower 2.2 > 2: missed); q4 = units 7 (lower 7.1) and 8
    assert out["tau_coverage_q1"] == 0.5 and out["tau_width_q1"] == pytest.approx((1.5 + 0.8) / 2)
    assert out["tau_coverage_q2"] == 1.0 and out["tau_coverage_q3"] == 1.0
    assert out["tau_coverage_q4"] == 0.5 and out["tau_width_q4"] == pytest.approx((0.9 + 1.5) / 2)
    # uneven sizes: 9 units -> 3, 2, 2, 2; no interval or a constant tau -> NaN
    assert quartile_coverage(np.arange(9.0), -1.0, 9.0)["tau_width_q1"] == 10.0
    assert all(np.isnan(v) for v in quartile_coverage(truth, np.nan, np.nan).values())
    assert all(np.isnan(v) for v in quartile_coverage(np.ones(8), 0.0, 2.0).values())


def test_width_error_rank_by_hand():
    """Spearman's correlation between widths and absolute errors: +1 when the widest intervals
    sit on the largest errors, -1 when on the smallest; NaN without information."""
    from scipy.stats import spearmanr

    from dowhy_cfr.benchmarks.synthetic import width_error_rank

    truth = np.zeros(5)
    estimate = np.array([0.1, -0.4, 0.2, 0.5, -0.3])  # errors 0.1 0.4 0.2 0.5 0.3
    half = np.array([1.0, 4.0, 2.0, 5.0, 3.0])
    assert width_error_rank(truth, estimate, -half, half) == pytest.approx(1.0)
    assert width_error_rank(truth, estimate, half - 6, 6 - half) == pytest.approx(-1.0)
    rng = np.random.default_rng(0)
    tau, est, w = rng.normal(size=(3, 50))
    assert width_error_rank(tau, est, est - np.abs(w), est + np.abs(w)) == pytest.approx(
        spearmanr(2 * np.abs(w), np.abs(est - tau))[0])
    assert np.isnan(width_error_rank(truth, estimate, -1.0, 1.0))  # one width: no ranking
    assert np.isnan(width_error_rank(truth, estimate, np.nan, np.nan))  # no intervals
    assert np.isnan(width_error_rank(truth, truth, -half, half))  # no error to rank


def test_coverage_run_reports_quartiles_recomputed_by_hand():
    """The coverage command's per-run quartile columns, recomputed from the same fit
    (LinearDML, seeded) on the same test units."""
    from scipy.stats import spearmanr

    from dowhy_cfr.benchmarks.synthetic import make_estimator, run_data, run_one

    settings = dict(n_iter=None, tiny=True, d=6, sigma=1.0, n_test=200, alpha=0.1,
                    cfr_inference="auto", threads=1)
    row = run_one("B", 300, 1, "LinearDML", settings)
    train, test = run_data("B", 300, 1, n_test=200)
    est = make_estimator("LinearDML", seed=1, settings=settings).fit(train.y, train.t, X=train.x)
    lo, hi = (np.ravel(a) for a in est.effect_interval(test.x, alpha=0.1))
    q4 = np.argsort(test.tau, kind="stable")[150:]
    assert row["tau_coverage_q4"] == pytest.approx(
        np.mean((lo[q4] <= test.tau[q4]) & (test.tau[q4] <= hi[q4])))
    assert row["tau_width_q4"] == pytest.approx(np.mean(hi[q4] - lo[q4]))
    assert np.mean([row[f"tau_coverage_q{q}"] for q in range(1, 5)]) == pytest.approx(
        row["tau_coverage"])
    tau_hat = np.ravel(est.effect(test.x))
    assert row["tau_width_rank"] == pytest.approx(
        spearmanr(hi - lo, np.abs(tau_hat - test.tau))[0])


def test_summary_coverage_and_monte_carlo_se():
    raw = pd.DataFrame({c: np.nan for c in ROW_COLUMNS}, index=range(5))
    raw["design"], raw["n"], raw["method"], raw["error"] = "A", 100, "M", ""
    raw["seed"] = range(5)
    raw["ate_covered"] = [1.0, 1.0, 0.0, 1.0, np.nan]
    raw["ate_abs_error"] = [0.1, 0.2, 0.3, 0.4, 0.5]
    raw.loc[4, "error"] = "RuntimeError: boom"
    raw.loc[0, "error"] = np.nan  # as read back from a CSV: no error
    s = summarize_synthetic(raw).iloc[0]
    assert s["runs"] == 4 and s["failed"] == 1
    assert s["ate_covered_mean"] == pytest.approx(0.75)
    assert s["ate_coverage_mc_se"] == pytest.approx(np.sqrt(0.75 * 0.25 / 4))
    assert s["ate_abs_error_mean"] == pytest.approx(0.25)  # the failed run is left out


def test_parsers_name_bad_values():
    assert parse_designs("a,E") == ["A", "E"]
    assert parse_methods("cfr,lineardml") == ["CFR", "LinearDML"]
    with pytest.raises(Exception, match="unknown design 'F'"):
        parse_designs("A,F")


def test_cli_rejects_bad_arguments(capsys):
    for argv, name in ((["synthetic", "--designs", "Z"], "--designs"),
                       (["synthetic", "--methods", "OLS-9"], "--methods"),
                       (["coverage", "--n", "abc"], "--n")):
        with pytest.raises(SystemExit):
            main(argv)
        assert name in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--d"):
        main(["synthetic", "--d", "3", "--designs", "A"] + TINY)


# ------------------------------------------------------------------------------ commands
def test_synthetic_end_to_end(tmp_path, capsys):
    assert main(["synthetic", "--n", "200", "--seeds", "0", "--designs", "A,E",
                 "--methods", "CFR,LinearDML,TLearner", "--out", str(tmp_path)] + TINY) == 0
    raw = pd.read_csv(tmp_path / "synthetic_raw.csv", keep_default_na=False,
                      na_values=["", "nan"])
    assert list(raw.columns) == ROW_COLUMNS
    assert len(raw) == 2 * 3 and (raw["error"].isna() | (raw["error"] == "")).all()
    assert np.isfinite(raw[["pehe", "ate", "ate_true", "ate_abs_error", "time_s"]]).all().all()
    np.testing.assert_allclose(raw["ate_abs_error"], (raw["ate"] - raw["ate_true"]).abs())
    dml = raw[raw["method"] == "LinearDML"]
    assert (dml["ate_lower"] < dml["ate_upper"]).all()
    assert dml["ate_covered"].isin([0.0, 1.0]).all()
    assert dml["tau_coverage"].between(0, 1).all()
    np.testing.assert_allclose(dml["ate_width"], dml["ate_upper"] - dml["ate_lower"])
    assert raw.loc[raw["method"] == "TLearner", "ate_covered"].isna().all()  # no inference
    # the truth is the training units' mean tau: design A's is near E[(x1 + x2) / 2] = 0.5
    assert raw.loc[raw["design"] == "A", "ate_true"].between(0.4, 0.6).all()
    summary = pd.read_csv(tmp_path / "synthetic_summary.csv")
    assert {"pehe_mean", "ate_abs_error_mean", "ate_covered_mean", "ate_width_mean",
            "tau_coverage_mean", "time_s_mean"} <= set(summary.columns)
    md = (tmp_path / "synthetic.md").read_text()
    assert "| design | n | method |" in md and "√PEHE" in md
    assert "| E | 200 | CFR |" in capsys.readouterr().out


def test_projection_method_is_cfrs_fit_with_a_linear_cate(tmp_path):
    """CFR-projection: the same network as CFR (same seed), so the same doubly robust ATE and
    interval; its CATE is linear in x (the projection), the heads' is not."""
    assert main(["synthetic", "--n", "200", "--seeds", "0", "--designs", "B",
                 "--methods", "CFR,CFR-projection", "--out", str(tmp_path)] + TINY) == 0
    raw = pd.read_csv(tmp_path / "synthetic_raw.csv").set_index("method")
    cfr, proj = raw.loc["CFR"], raw.loc["CFR-projection"]
    assert proj["ate"] == pytest.approx(cfr["ate"], rel=1e-9)
    assert (proj["ate_lower"], proj["ate_upper"]) == pytest.approx(
        (cfr["ate_lower"], cfr["ate_upper"]), rel=1e-9)
    assert np.isfinite(proj["pehe"]) and proj["pehe"] != cfr["pehe"]
    assert np.isnan(proj["tau_coverage"])


def test_coverage_command_with_cfr_bootstrap(tmp_path):
    assert main(["coverage", "--datasets", "3", "--n", "200", "--designs", "C",
                 "--cfr-inference", "bootstrap:3", "--out", str(tmp_path)] + TINY) == 0
    raw = pd.read_csv(tmp_path / "coverage_raw.csv")
    assert sorted(raw["method"].unique()) == ["CFR", "CausalForestDML", "DRLearner", "LinearDML"]
    assert sorted(raw["seed"].unique()) == [0, 1, 2]
    np.testing.assert_allclose(raw["ate_true"], 1.0)  # design C: tau = 1
    assert raw["ate_covered"].isin([0.0, 1.0]).all()  # every method, CFR included, has one
    expected = (raw["ate_lower"] <= 1.0) & (1.0 <= raw["ate_upper"])
    np.testing.assert_array_equal(raw["ate_covered"].astype(bool), expected)
    summary = pd.read_csv(tmp_path / "coverage_summary.csv").set_index("method")
    means = raw.groupby("method")["ate_covered"].mean()
    np.testing.assert_allclose(summary.loc[means.index, "ate_covered_mean"], means)
    md = (tmp_path / "coverage.md").read_text()
    assert "ATE coverage" in md and "τ(x) cov. Q1" in md and "Q4 width" in md
    # design C's tau is constant: no quartiles, for any method
    assert raw[[f"tau_coverage_q{q}" for q in range(1, 5)]].isna().all().all()


def test_failed_fit_is_recorded_not_fatal(tmp_path, capsys):
    assert main(["synthetic", "--n", "100", "--seeds", "0", "--designs", "C",
                 "--methods", "CFR,TLearner", "--cfr-inference", "no-such-inference",
                 "--out", str(tmp_path)] + TINY) == 0
    raw = pd.read_csv(tmp_path / "synthetic_raw.csv").set_index("method")
    assert "no-such-inference" in raw.loc["CFR", "error"]
    assert np.isnan(raw.loc["CFR", "pehe"]) and np.isfinite(raw.loc["TLearner", "pehe"])
    assert "1 of 2 fits failed" in capsys.readouterr().err
    summary = pd.read_csv(tmp_path / "synthetic_summary.csv").set_index("method")
    assert summary.loc["CFR", "runs"] == 0 and summary.loc["CFR", "failed"] == 1


def test_pointwise_interval_of_a_method_without_one_is_nan():
    """A peer without ``effect_interval`` (or one that raises EconML's "no inference" errors)
    gets NaN intervals, not a failed run."""
    from dowhy_cfr.benchmarks.synthetic import pointwise_interval

    x = np.zeros((3, 2))
    assert all(np.isnan(v) for v in pointwise_interval(None, x, 0.05))

    def no_inference(x, alpha):
        raise AttributeError("no inference")

    assert all(np.isnan(v) for v in pointwise_interval(no_inference, x, 0.05))
    lo, hi = pointwise_interval(lambda x, alpha: (np.zeros(3), np.ones(3)), x, 0.05)
    assert lo.shape == (3,) and np.all(hi == 1)
