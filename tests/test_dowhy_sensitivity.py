"""DoWhy's add_unobserved_common_cause refuter on CFR estimates (dowhy_cfr.dowhy_sensitivity):
the non-parametric partial-R2 analysis from the CFR estimate's doubly robust stage, DoWhy's own
analysis where asked for, the direct simulation."""

import warnings

import matplotlib
import numpy as np
import pandas as pd
import pytest
from dowhy import CausalModel
from dowhy.causal_refuter import CausalRefutation
from dowhy.causal_refuters.non_parametric_sensitivity_analyzer import (
    NonParametricSensitivityAnalyzer)
from sklearn.linear_model import LinearRegression, LogisticRegression

import dowhy_cfr  # noqa: F401  (registers the routing)
from dowhy_cfr.dowhy_sensitivity import CFRSensitivityAnalyzer
from dowhy_cfr.sensitivity import sensitivity_params
from helpers import TINY, make_confounded

matplotlib.use("Agg")
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
NP = "non-parametric-partial-R2"


def _model(df, treatment="t"):
    covariates = [c for c in df.columns if c.startswith("x")]
    model = CausalModel(data=df, treatment=treatment, outcome="y", common_causes=covariates)
    return model, model.identify_effect(proceed_when_unidentifiable=True)


def _refute(model, estimand, estimate, method=NP, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.refute_estimate(estimand, estimate, method_name="add_unobserved_common_cause",
                                     simulation_method=method, plot_estimate=False, **kwargs)


@pytest.fixture(scope="module")
def binary():
    X, T, Y, _ = make_confounded(n=300, seed=5)
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]).assign(t=T, y=Y)
    model, estimand = _model(df)
    ate = model.estimate_effect(estimand, method_name="backdoor.cfr",
                                method_params={"init_params": TINY})
    att = model.estimate_effect(estimand, method_name="backdoor.cfr", target_units="att",
                                fit_estimator=False)
    return model, estimand, ate, att


@pytest.mark.parametrize("target", ["ate", "att"])
def test_bounds_come_from_the_estimates_own_stage(binary, target):
    model, estimand, ate, att = binary
    estimate = {"ate": ate, "att": att}[target]
    cfr = estimate.estimator.estimator
    res = _refute(model, estimand, estimate, partial_r2_confounder_treatment=0.05,
                  partial_r2_confounder_outcome=0.04)
    assert isinstance(res, CFRSensitivityAnalyzer)
    assert isinstance(res, NonParametricSensitivityAnalyzer)  # what DoWhy's users expect
    assert res.theta_s == pytest.approx(estimate.value, rel=1e-12)
    # the estimator's numbers; DoWhy's one-sided level 0.05 is EconML's two-sided alpha 0.1
    assert res.RV == cfr.robustness_value(interval_type="theta", target=target)
    assert res.RV_alpha == cfr.robustness_value(alpha=0.1, target=target)
    row = res.results.iloc[0]
    assert (row["lower_ate_bound"], row["upper_ate_bound"]) == pytest.approx(
        cfr.sensitivity_interval(c_y=0.04, c_t=0.05, interval_type="theta", target=target))
    assert (row["lower_confidence_bound"], row["upper_confidence_bound"]) == pytest.approx(
        cfr.sensitivity_interval(c_y=0.04, c_t=0.05, alpha=0.1, target=target))
    assert row["bias"] == pytest.approx(estimate.value - row["lower_ate_bound"])
    assert f"{target.upper()} of t=1 vs 0" in str(res)
    assert "Robustness Value" in str(res)


def test_att_and_ate_get_their_own_bounds(binary):
    """DoWhy's own analysis bounds the ATE whatever the target units; here each estimate its own
    (measured: robustness values 0.192 and 0.187), each the estimator's for its target."""
    model, estimand, ate, att = binary
    rv = [_refute(model, estimand, e).RV for e in (ate, att)]
    assert abs(rv[0] - rv[1]) > 1e-3
    cfr = att.estimator.estimator
    assert rv == [cfr.robustness_value(interval_type="theta", target=t) for t in ("ate", "att")]


def test_without_strengths_gives_the_robustness_values(binary):
    """DoWhy's own analyzer fails without strengths (TypeError); this one gives the robustness
    values and no results table."""
    model, estimand, ate, _ = binary
    res = _refute(model, estimand, ate)
    assert res.results is None
    assert 0 < res.RV_alpha < res.RV < 1


def test_strength_grids_and_the_plot(binary):
    model, estimand, ate, _ = binary
    res = _refute(model, estimand, ate, partial_r2_confounder_treatment=[0.01, 0.05, 0.1],
                  partial_r2_confounder_outcome=[0.02, 0.04, 0.08])
    cfr = ate.estimator.estimator
    assert res.results.iloc[0]["lower_ate_bound"] == pytest.approx(
        cfr.sensitivity_interval(c_y=0.08, c_t=0.1, interval_type="theta")[0])  # the largest
    res.plot()  # DoWhy's contour plot over the given grid, with these bounds
    res.plot(plot_type="bias")
    # DoWhy's default plot_estimate=True with one strength per axis (DoWhy's own plot fails
    # there: TypeError), and an array with a number
    for c_t in (0.05, [0.05, 0.1]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = model.refute_estimate(estimand, ate, method_name="add_unobserved_common_cause",
                                        simulation_method=NP, partial_r2_confounder_treatment=c_t,
                                        partial_r2_confounder_outcome=0.04)
        assert res.results.iloc[0]["r2tu_w"] == np.max(c_t)
        assert res.effect_strength_treatment == c_t  # restored after the plot


def test_a_pair_of_arms_of_a_multivalued_treatment():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(450, 3))
    arm = rng.integers(0, 3, 450)
    y = X[:, 0] + np.select([arm == 1, arm == 2], [1.0, 2.0 + X[:, 1]], 0) + rng.normal(size=450)
    df = pd.DataFrame(X, columns=["x0", "x1", "x2"]).assign(t=arm, y=y)
    model, estimand = _model(df)
    estimate = model.estimate_effect(estimand, method_name="backdoor.cfr", treatment_value=2,
                                     control_value=1, target_units="atc",
                                     method_params={"init_params": TINY})
    res = _refute(model, estimand, estimate)
    stage = estimate.estimator.estimator.fitted_.debiased
    ref = sensitivity_params(stage.y, stage.arms, stage.mu, stage.e, a1=2, a0=1, target="atc")
    assert (res.params.a1, res.params.a0, res.params.target) == (2, 1, "atc")
    assert (res.sigma_2, res.nu_2, res.theta_s) == (ref.sigma2, ref.nu2, ref.theta)
    assert res.theta_s == pytest.approx(estimate.value, rel=1e-12)


def test_dowhys_own_analysis_where_asked_for(binary):
    """Benchmarks and DoWhy's nuisance options run DoWhy's analysis (refitting its nuisances):
    for the binary ATE only."""
    model, estimand, ate, att = binary
    own = dict(g_s_estimator_list=[LinearRegression()], g_s_estimator_param_list=[{}],
               alpha_s_estimator_list=[LogisticRegression()],
               alpha_s_estimator_param_list=[{"C": [1.0]}], plugin_reisz=True)
    res = _refute(model, estimand, ate, partial_r2_confounder_treatment=0.05,
                  partial_r2_confounder_outcome=0.05, **own)
    assert type(res) is NonParametricSensitivityAnalyzer
    assert res.theta_s == ate.value
    with pytest.raises(ValueError, match=r"benchmark_common_causes ask\(s\) for DoWhy's own .*"
                                         r"binary 0/1 treatment.*target_units='att'"):
        _refute(model, estimand, att, benchmark_common_causes=["x0"],
                effect_fraction_on_treatment=1.0)


def test_estimates_without_a_doubly_robust_average(binary):
    model, estimand, ate, _ = binary
    custom = model.estimate_effect(estimand, method_name="backdoor.cfr", fit_estimator=False,
                                   target_units=lambda df: df["x0"] > 0)
    with pytest.raises(ValueError, match="target_units='ate', 'att' or 'atc'"):
        _refute(model, estimand, custom)
    X, T, Y, _ = make_confounded(n=200, seed=2)
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]).assign(t=T, y=Y)
    model2, estimand2 = _model(df)
    plain = model2.estimate_effect(estimand2, method_name="backdoor.cfr",
                                   method_params={"init_params": {**TINY, "debias": None}})
    with pytest.raises(ValueError, match="no doubly robust stage .*debias='aipw'"):
        _refute(model2, estimand2, plain)


def test_direct_simulation_refits_cfr_and_explains_a_bool_treatment(binary):
    model, estimand, ate, _ = binary
    res = _refute(model, estimand, ate, method="direct-simulation",
                  effect_strength_on_treatment=0.01, effect_strength_on_outcome=0.02)
    assert isinstance(res, CausalRefutation) and np.isfinite(res.new_effect)
    X, T, Y, _ = make_confounded(n=200, seed=3)
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]).assign(
        t=T.astype(bool), y=Y)
    model2, estimand2 = _model(df)
    est = model2.estimate_effect(estimand2, method_name="backdoor.cfr", treatment_value=True,
                                 control_value=False, method_params={"init_params": TINY})
    if int(pd.__version__.split(".")[0]) >= 3:  # DoWhy's simulation breaks there (contract test)
        with pytest.raises(ValueError, match=r"bool column 't'.*astype\(int\)"):
            _refute(model2, estimand2, est, method="direct-simulation",
                    effect_strength_on_treatment=0.01, effect_strength_on_outcome=0.02)
        # the functional API gets the check too, also with the function imported before
        from dowhy.causal_refuters import refute_estimate, sensitivity_simulation

        original = sensitivity_simulation.__dowhy_cfr_original__
        with pytest.raises(ValueError, match="bool column 't'"):
            refute_estimate(df, estimand2, est, refuters=[original],
                            effect_strength_on_treatment=0.01, effect_strength_on_outcome=0.02)
    # the non-parametric analysis reads the stage: a bool treatment is no problem there
    assert _refute(model2, estimand2, est).RV > 0
