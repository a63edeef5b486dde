"""Sensitivity to an omitted confounder (dowhy_cfr.sensitivity): EconML's DRLearner numbers, a
simulated hidden confounder of known strength, the ATT/ATC Riesz representers, input errors."""

import warnings

import numpy as np
import pytest
from econml.dr import DRLearner
from helpers import TINY, make_confounded
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import KFold

from dowhy_cfr import CFR
from dowhy_cfr.datasets import HiddenConfounder
from dowhy_cfr.debiased import aipw_terms, average_effect
from dowhy_cfr.sensitivity import (SensitivityParams, riesz_representer, robustness_value,
                                   sensitivity_interval, sensitivity_params, sensitivity_summary)

SCENARIOS = [dict(), dict(c_y=0.2, c_t=0.1, rho=0.5), dict(c_y=0.01, c_t=0.3, rho=-1.0),
             dict(alpha=0.1, interval_type="theta"), dict(c_y=0.0, c_t=0.0)]
NULLS = [dict(), dict(interval_type="theta"), dict(null_hypothesis=0.5, alpha=0.1),
         dict(null_hypothesis=2.0, interval_type="theta")]


# ----------------------------------------------------------------------------- EconML's numbers
def _drlearner_data(n, n_arms, seed):
    """Two covariates; arm k's logit 1.5 k x0 (propensities reach EconML's clip); effect
    0.5 k (1 + x1)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    logits = np.column_stack([1.5 * k * X[:, 0] for k in range(n_arms)])
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    T = (rng.random(n)[:, None] > np.cumsum(p, 1)).sum(1)
    Y = X[:, 0] + X[:, 1] + 0.5 * T * (1 + X[:, 1]) + rng.normal(size=n)
    return X, T, Y


def _out_of_fold_nuisances(X, T, Y, folds, n_arms, min_propensity):
    """DRLearner's nuisances, refitted here: the regression on [X, one-hot T without arm 0]
    predicted at each arm, the propensities clipped to [min_propensity, 1 - min_propensity]."""
    dummies = np.eye(n_arms)[:, 1:]
    mu, e = np.empty((len(Y), n_arms)), np.empty((len(Y), n_arms))
    for train, test in folds:
        reg = LinearRegression().fit(np.hstack([X[train], dummies[T[train]]]), Y[train])
        for a in range(n_arms):
            mu[test, a] = reg.predict(np.hstack([X[test], np.tile(dummies[a], (len(test), 1))]))
        e[test] = LogisticRegression().fit(X[train], T[train]).predict_proba(X[test])
    return mu, np.clip(e, min_propensity, 1 - min_propensity)


@pytest.mark.parametrize("n_arms", [2, 3])
def test_matches_econml_drlearner(n_arms):
    X, T, Y = _drlearner_data(400, n_arms, seed=0)
    folds = list(KFold(3, shuffle=True, random_state=0).split(X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DRLearner(model_propensity=LogisticRegression(), model_regression=LinearRegression(),
                        cv=folds, min_propensity=0.05, random_state=0).fit(Y, T, X=X)
    mu, e = _out_of_fold_nuisances(X, T, Y, folds, n_arms, 0.05)
    assert np.mean(e == 0.05) > 0.02  # the clip is in play (measured: 4.5% and 17% of entries)
    for arm in range(1, n_arms):
        params = sensitivity_params(Y, T, mu, e, a1=arm, a0=0)
        for kw in SCENARIOS:  # measured: equal to 2e-16
            assert sensitivity_interval(params, **kw) == pytest.approx(
                est.sensitivity_interval(T=arm, **kw), abs=1e-10, rel=1e-10)
        for kw in NULLS:  # EconML bisects until the bound is within 1e-6 of the null;
            # measured: at most 1.7e-6 apart (this module solves to 1e-14)
            assert robustness_value(params, **kw) == pytest.approx(
                est.robustness_value(T=arm, **kw), abs=1e-5)
        smry = str(est.sensitivity_summary(T=arm, c_y=0.1, c_t=0.2))
        ours = sensitivity_summary(params, c_y=0.1, c_t=0.2)
        for value in ours.to_frame().iloc[0]:
            assert f"{value:.3f}".rstrip("0").rstrip(".") in smry


def test_params_are_the_aipw_estimate_and_its_stderr():
    """theta and its standard error are debiased.average_effect's, for every target and pair."""
    X, T, Y = _drlearner_data(300, 3, seed=1)
    mu, e = _out_of_fold_nuisances(X, T, Y, list(KFold(2).split(X)), 3, 0.01)
    for target in ("ate", "att", "atc"):
        for a1, a0 in ((1, 0), (2, 1), (0, 2)):
            params = sensitivity_params(Y, T, mu, e, a1=a1, a0=a0, target=target)
            ref = average_effect(Y, T, mu, e, a1=a1, a0=a0, target=target)
            assert params.theta == pytest.approx(ref.estimate, rel=1e-12)
            assert params.stderr == pytest.approx(ref.stderr, rel=1e-12)
            assert params.n_units == ref.n_units


def test_swapping_the_arms():
    """ATE(a0 vs a1) = -ATE(a1 vs a0) and ATC(a0 vs a1) = -ATT(a1 vs a0), with the same scales."""
    X, T, Y = _drlearner_data(300, 3, seed=2)
    mu, e = _out_of_fold_nuisances(X, T, Y, list(KFold(2).split(X)), 3, 0.01)
    for target, swapped in (("ate", "ate"), ("att", "atc"), ("atc", "att")):
        p = sensitivity_params(Y, T, mu, e, a1=2, a0=1, target=target)
        q = sensitivity_params(Y, T, mu, e, a1=1, a0=2, target=swapped)
        assert q.theta == pytest.approx(-p.theta, rel=1e-12)
        assert (q.sigma2, q.nu2) == pytest.approx((p.sigma2, p.nu2), rel=1e-12)
        lo, hi = sensitivity_interval(p, c_y=0.1, c_t=0.1)
        assert sensitivity_interval(q, c_y=0.1, c_t=0.1) == pytest.approx((-hi, -lo), rel=1e-10)


@pytest.mark.parametrize("target", ["ate", "att", "atc"])
def test_representer_reproduces_the_aipw_terms(target):
    """theta = mean(m(W, mu) + alpha (y - mu_t)): the representer is the AIPW estimate's."""
    X, T, Y = _drlearner_data(200, 3, seed=3)
    mu, e = _out_of_fold_nuisances(X, T, Y, list(KFold(2).split(X)), 3, 0.01)
    alpha, _ = riesz_representer(T, e, a1=2, a0=0, target=target)
    weight = {"ate": np.ones(len(T)), "att": T == 2, "atc": T == 0}[target]
    m_mu = weight * (mu[:, 2] - mu[:, 0]) / weight.mean()
    a, b = aipw_terms(Y, T, mu, e, a1=2, a0=0, target=target)
    np.testing.assert_allclose(m_mu + alpha * (Y - mu[np.arange(len(T)), T]), a / b.mean(),
                               rtol=1e-12, atol=1e-12)


def test_robustness_value_closed_form_and_bisection_agree():
    """The 'theta' robustness value's closed form is the root of the bound (as for 'ci')."""
    X, T, Y = _drlearner_data(300, 2, seed=4)
    mu, e = _out_of_fold_nuisances(X, T, Y, list(KFold(2).split(X)), 2, 0.01)
    params = sensitivity_params(Y, T, mu, e)
    for null in (0.0, -1.0, 3.0):
        r = robustness_value(params, null_hypothesis=null, interval_type="theta")
        assert 0 < r < 1
        lo, hi = sensitivity_interval(params, c_y=r, c_t=r, interval_type="theta")
        assert min(abs(lo - null), abs(hi - null)) < 1e-10
        r_ci = robustness_value(params, null_hypothesis=null)
        lo, hi = sensitivity_interval(params, c_y=r_ci, c_t=r_ci)
        assert min(abs(lo - null), abs(hi - null)) < 1e-10
        assert r_ci < r  # the confidence bound reaches the null first
    assert robustness_value(params, null_hypothesis=params.theta) == 0.0


# ----------------------------------------------------------------------------- a hidden confounder
# X ~ N(0, 1), U ~ Bernoulli(0.3) hidden; P(T = 1 | X, U) = expit(0.3 + 0.5 X + 2 (U - 0.3));
# Y = (1 + X / 2) T + X + U + N(0, 1) (dowhy_cfr.datasets.HiddenConfounder(gamma=2, delta=1)). The
# short nuisances (given X only) are exact: the propensity e(x) = E[P(T = 1 | x, U)] and
# g(t, x) = (1 + x/2) t + x + P(U = 1 | t, x).
DESIGN = HiddenConfounder(gamma=2.0, delta=1.0)


def _representer(t, e, target, p1):
    if target == "ate":
        return t / e - (1 - t) / (1 - e)
    if target == "att":
        return (t - (1 - t) * e / (1 - e)) / p1
    return (t * (1 - e) / e - (1 - t)) / (1 - p1)


def _confounded_sample(n, seed):
    """Outcomes, arms and the exact short nuisances of n units of the design above."""
    d = DESIGN.sample(n, seed)
    return d["y"], d["t"], d["mu"], d["e"]


POP = {target: DESIGN.truth(target) for target in ("ate", "att", "atc")}


@pytest.mark.parametrize("target", ["ate", "att", "atc"])
def test_bias_identity_with_the_representers(target):
    """long - short = E[(g_s - g)(alpha_s - alpha)] and E[(alpha_s - alpha)^2] = E[alpha_s^2] -
    E[alpha^2] hold exactly with this module's representers (Theorem 1 of the paper; a wrong ATT or
    ATC representer, e.g. e/(1-e) replaced by (1-e)/e, breaks both by > 0.1)."""
    pop = POP[target]
    y, t, mu, e = _confounded_sample(1_000, seed=0)
    alpha, _ = riesz_representer(t, e, target=target)  # the module's is the one checked here
    np.testing.assert_allclose(alpha, _representer(t, e[:, 1], target, t.mean()), rtol=1e-12)
    assert pop["long"] - pop["short"] == pytest.approx(pop["cross"], abs=1e-10)
    assert pop["da2"] == pytest.approx(pop["nu2_gain"], abs=1e-10)
    # the confounder is strong and not fully adversarial (measured: bias -0.36/-0.35/-0.36,
    # c_y 0.152, c_t 0.240/0.445/0.221, rho -0.73/-0.44/-0.77 for ATE/ATT/ATC)
    assert pop["long"] - pop["short"] < -0.3 and 0.1 < pop["c_y"] < 0.2
    assert 0.2 < pop["c_t"] < 0.5 and -0.8 < pop["rho"] < -0.4
    # the bound with the confounder's own c_y, c_t and |rho| is the bias itself
    bound = abs(pop["rho"]) * np.sqrt(pop["c_y"] * pop["c_t"] / (1 - pop["c_t"])
                                      * pop["sigma2"] * pop["nu2"])
    assert bound == pytest.approx(pop["short"] - pop["long"], rel=1e-9)


@pytest.mark.parametrize("target", ["ate", "att", "atc"])
def test_hidden_confounder_bounds(target):
    pop = POP[target]
    params = sensitivity_params(*_confounded_sample(20_000, seed=0), target=target)
    se = np.sqrt(np.diag(params.cov))
    z = (np.array([params.theta, params.sigma2, params.nu2])
         - [pop["short"], pop["sigma2"], pop["nu2"]]) / se
    assert np.all(np.abs(z) < 4)  # measured: |z| <= 1.17
    strength = dict(c_y=pop["c_y"], c_t=pop["c_t"])
    # at the confounder's strength (rho = 1, the default) the bounds cover the causal effect
    # (measured margins of the lower bound: 0.149, 0.467, 0.128 for ATE/ATT/ATC)
    lo, hi = sensitivity_interval(params, **strength, interval_type="theta")
    assert lo < pop["long"] - 0.1 and hi > pop["short"]
    # with its |rho| too the bound touches it (measured: 0.017, 0.016, 0.020 below; se 0.016-0.017)
    lo, _ = sensitivity_interval(params, **strength, rho=abs(pop["rho"]), interval_type="theta")
    assert lo == pytest.approx(pop["long"], abs=3 * se[0])
    # at a quarter of the strength the confidence bounds exclude it (measured: lower bound
    # 0.20, 0.15, 0.20 above it)
    lo, _ = sensitivity_interval(params, c_y=pop["c_y"] / 4, c_t=pop["c_t"] / 4)
    assert lo > pop["long"] + 0.1
    # a confounder with c_y = c_t = max(c_y, c_t) would reach the effect, so the robustness
    # value is below that (measured: 0.141, 0.136, 0.140 for 'theta'; 0.129, 0.124, 0.128 'ci')
    rv = robustness_value(params, null_hypothesis=pop["long"], interval_type="theta")
    assert pop["c_y"] / 2 < rv < max(pop["c_y"], pop["c_t"])
    assert robustness_value(params, null_hypothesis=pop["long"]) < rv


@pytest.mark.parametrize("target", ["ate", "att", "atc"])
def test_covariance_and_coverage_over_replications(target):
    """Over 200 data sets of 2,000 units: the estimated variances of (theta, sigma^2, nu^2) match
    their spread (without the ATT/ATC ratio term nu^2's is 4-7 times too large), and the confidence
    bound at the confounder's c_y, c_t, |rho| (whose bound is the bias) covers the causal effect
    at about 1 - alpha/2 = 97.5%."""
    pop, est, var, covered = POP[target], [], [], []
    for seed in range(200):
        params = sensitivity_params(*_confounded_sample(2_000, seed=1_000 + seed), target=target)
        est.append([params.theta, params.sigma2, params.nu2])
        var.append(np.diag(params.cov))
        lo, hi = sensitivity_interval(params, c_y=pop["c_y"], c_t=pop["c_t"], rho=abs(pop["rho"]))
        covered.append(lo <= pop["long"] <= hi)
    ratio = np.var(est, axis=0) / np.mean(var, axis=0)
    assert np.all((0.75 < ratio) & (ratio < 1.35))  # measured: 0.89-1.13
    assert np.mean(covered) >= 0.93  # measured: 0.965, 0.97, 0.96 for ATE/ATT/ATC


# ----------------------------------------------------------------------------- a fitted CFR
def test_on_a_fitted_cfr():
    X, T, Y, _ = make_confounded(n=300, seed=5)
    est = CFR(**TINY).fit(Y, T, X=X)
    stage = est.fitted_.debiased
    params = sensitivity_params(stage.y, stage.arms, stage.mu, stage.e)
    ref = est.average_effect("ate")
    assert params.theta == pytest.approx(ref.estimate, rel=1e-10)
    assert params.stderr == pytest.approx(ref.stderr, rel=1e-10)
    lo, hi = sensitivity_interval(params, c_y=0.0, c_t=0.0)
    assert (lo, hi) == pytest.approx(ref.interval(0.05), rel=1e-10)
    assert "Robustness Value (CI)" in str(sensitivity_summary(params))


def test_cfr_bounds_against_a_hidden_confounder_of_known_strength():
    """One CFR fit (small network) on 2,000 units of the design above with two noise covariates
    (scripts/sensitivity_table.py runs the full table): its sigma^2 and nu^2 are near the exact
    ones, its bounds at the confounder's c_y, c_t contain the causal effect, and its confidence
    bounds at a quarter of that strength do not."""
    design = HiddenConfounder(gamma=2.0, delta=1.0, n_noise=2)
    d = design.sample(2_000, seed=1)
    est = CFR(n_rep_layers=2, rep_dim=32, n_head_layers=1, head_dim=32, n_iter=400, eval_every=20,
              verbose=0, random_state=0).fit(d["y"], d["t"], X=d["x"])
    for target in ("ate", "att"):
        truth = design.truth(target)
        params = est.sensitivity_params(target=target)
        # measured: sigma^2 1.187 vs 1.179; nu^2 4.231 vs 4.242 (ATE), 4.375 vs 4.477 (ATT)
        assert params.sigma2 == pytest.approx(truth["sigma2"], rel=0.1)
        assert params.nu2 == pytest.approx(truth["nu2"], rel=0.1)
        lo, hi = est.sensitivity_interval(c_y=truth["c_y"], c_t=truth["c_t"],
                                          interval_type="theta", target=target)
        assert lo < truth["long"] - 0.1 and hi > truth["short"]  # measured: 0.161, 0.488 below
    quarter = HiddenConfounder(gamma=2.0, delta=1.0).truth("ate")
    lo, _ = est.sensitivity_interval(c_y=quarter["c_y"] / 4, c_t=quarter["c_t"] / 4)
    assert lo > 1.0 + 0.05  # the causal ATE is 1; measured: 0.121 above


# ----------------------------------------------------------------------------- the estimator's API
class _GivenOutcomes(BaseEstimator, RegressorMixin):
    """A DRLearner ``model_regression`` that returns given predictions ``mu`` (n, n_arms): its input
    is ``[X, one-hot T without the control]`` with X the unit's row number."""

    def __init__(self, mu=None):
        self.mu = mu

    def fit(self, X, y, **kwargs):
        return self

    def predict(self, X):
        X = np.asarray(X)
        onehot = X[:, 1:]
        arms = (onehot @ np.arange(1, onehot.shape[1] + 1)).round().astype(int)
        return self.mu[X[:, 0].astype(int), arms]


class _GivenPropensities(BaseEstimator, ClassifierMixin):
    """A DRLearner ``model_propensity`` that returns given propensities ``e`` (n, n_arms)."""

    def __init__(self, e=None):
        self.e = e

    def fit(self, X, y, **kwargs):
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, X):
        return self.e[np.asarray(X)[:, 0].astype(int)]

    def predict(self, X):  # DRLearner scores its nuisance models
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def _drlearner_on(stage, T):
    """EconML's DRLearner whose nuisances are the CFR stage's ``mu`` and ``e`` (its propensity
    clip, 1e-6, leaves CFR's clipped propensities unchanged)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DRLearner(model_propensity=_GivenPropensities(stage.e),
                         model_regression=_GivenOutcomes(stage.mu), cv=2,
                         random_state=0).fit(stage.y, T, X=np.arange(len(T))[:, None])


def _three_arm_data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    logits = np.c_[np.zeros(n), X[:, 0], -X[:, 0]]
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    arm = (rng.random(n)[:, None] > np.cumsum(p, 1)).sum(1)
    Y = X[:, 0] + 0.5 * X[:, 2] + np.select([arm == 1, arm == 2], [1 + X[:, 1], -1], 0)
    return X, np.array(["ctrl", "drugA", "drugB"])[arm], Y + rng.normal(scale=0.5, size=n)


@pytest.fixture(scope="module")
def binary_fit():
    """Cross-fitting members: the stage's out-of-fold mu differs from the in-sample mu_plugin."""
    X, T, Y, _ = make_confounded(n=300, seed=5)
    return CFR(**{**TINY, "n_ensemble": 2, "cross_fit": True}).fit(Y, T, X=X), T


@pytest.fixture(scope="module")
def three_arm_fit():
    X, T, Y = _three_arm_data()
    return CFR(**TINY).fit(Y, T, X=X), T


@pytest.mark.parametrize("fit, levels",
                         [("binary_fit", [1]), ("three_arm_fit", ["drugA", "drugB"])])
def test_estimator_matches_econml_drlearner_on_the_same_nuisances(fit, levels, request):
    """End to end: CFR's methods and EconML's DRLearner fed CFR's own mu and e give the same
    bounds (measured: equal to 4e-16) and robustness values (EconML bisects to 1e-6 in the bound;
    measured: at most 7.6e-6 apart, relative 3.6e-5; the target was 5%). With the in-sample
    mu_plugin instead of the stage's out-of-fold mu the bounds differ by 0.04."""
    est, T = request.getfixturevalue(fit)
    stage = est.fitted_.debiased
    if fit == "binary_fit":
        assert np.abs(stage.mu - stage.mu_plugin).max() > 0.1  # the out-of-fold mu is used
    dr = _drlearner_on(stage, T)
    for level in levels:
        for kw in SCENARIOS:
            assert est.sensitivity_interval(level, **kw) == pytest.approx(
                dr.sensitivity_interval(level, **kw), rel=1e-9, abs=1e-12)
        for kw in NULLS:
            ours, theirs = est.robustness_value(level, **kw), dr.robustness_value(level, **kw)
            assert ours == pytest.approx(theirs, abs=5e-5)
            assert abs(ours - theirs) <= 0.05 * theirs
        smry = str(dr.sensitivity_summary(level, c_y=0.1, c_t=0.2))
        for value in est.sensitivity_summary(level, c_y=0.1, c_t=0.2).to_frame().iloc[0]:
            assert f"{value:.3f}".rstrip("0").rstrip(".") in smry


def test_estimator_methods_are_the_functions_on_its_stage(three_arm_fit):
    est, _ = three_arm_fit
    stage = est.fitted_.debiased
    for level, arm in (("drugA", 1), ("drugB", 2)):
        for target in ("ate", "att", "atc"):
            params = sensitivity_params(stage.y, stage.arms, stage.mu, stage.e, a1=arm, a0=0,
                                        target=target)
            got = est.sensitivity_params(level, target=target)
            assert (got.target, got.a1, got.a0, got.theta, got.sigma2, got.nu2, got.n_units) == (
                params.target, params.a1, params.a0, params.theta, params.sigma2, params.nu2,
                params.n_units)
            np.testing.assert_array_equal(got.cov, params.cov)
            assert params.theta == pytest.approx(
                est.average_effect(target, T0="ctrl", T1=level).estimate, rel=1e-12)
            kw = dict(c_y=0.1, c_t=0.05, rho=0.5, alpha=0.1)
            assert est.sensitivity_interval(level, target=target, **kw) == \
                sensitivity_interval(params, **kw)
            assert est.robustness_value(level, 0.5, target=target) == \
                robustness_value(params, null_hypothesis=0.5)
            assert est.sensitivity_summary(level, target=target, decimals=2).to_frame().equals(
                sensitivity_summary(params, decimals=2).to_frame())
    # positional arguments in EconML's order
    assert est.sensitivity_interval("drugB", 0.1, 0.2, 0.3, 0.5, "theta") == sensitivity_interval(
        est.sensitivity_params("drugB"), alpha=0.1, c_y=0.2, c_t=0.3, rho=0.5,
        interval_type="theta")
    assert est.robustness_value("drugA", 0.3, 0.1, "theta") == robustness_value(
        est.sensitivity_params("drugA"), null_hypothesis=0.3, alpha=0.1, interval_type="theta")


def test_estimator_errors(three_arm_fit):
    est, _ = three_arm_fit
    with pytest.raises(ValueError, match=r"T='ctrl' is the control .*'drugA', 'drugB'"):
        est.robustness_value("ctrl")
    with pytest.raises(ValueError, match=r"T=1 is not a fitted treatment level: .*'drugA'"):
        est.sensitivity_interval()  # EconML's default T=1 is no level of this fit
    with pytest.raises(ValueError, match=r"T=\['drugA'\] is not a fitted"):
        est.sensitivity_summary(["drugA"])
    with pytest.raises(ValueError, match="target='ato'"):
        est.sensitivity_interval("drugA", target="ato")
    with pytest.raises(ValueError, match="c_t=1.5"):
        est.sensitivity_interval("drugA", c_t=1.5)
    X, T, Y, _ = make_confounded(n=200, seed=1)
    with pytest.raises(ValueError, match="debias=None.*refit with debias='aipw'"):
        CFR(**{**TINY, "debias": None}).fit(Y, T, X=X).robustness_value()
    chunked = CFR(**TINY).fit_chunks([(Y[:150], T[:150], X[:150])],
                                     validation=(Y[150:], T[150:], X[150:]))
    with pytest.raises(ValueError, match="fit_chunks.*refit with fit"):
        chunked.sensitivity_summary()
    with pytest.raises(ValueError, match="not fitted"):
        CFR().sensitivity_interval()


# ----------------------------------------------------------------------------- input errors
@pytest.fixture(scope="module")
def small():
    X, T, Y = _drlearner_data(100, 2, seed=6)
    mu, e = _out_of_fold_nuisances(X, T, Y, list(KFold(2).split(X)), 2, 0.01)
    return Y, T, mu, e


@pytest.mark.parametrize("kw, match", [
    (dict(c_y=1.0), r"c_y=1.0 .*\[0, 1\)"), (dict(c_y=-0.1), "c_y=-0.1"),
    (dict(c_t=1.0), r"c_t=1.0 .*Riesz"), (dict(rho=1.5), r"rho=1.5 .*\[-1, 1\]"),
    (dict(alpha=0.0), r"alpha=0.0 .*\(0, 1\)"), (dict(alpha=1.5), "alpha=1.5"),
    (dict(interval_type="CI"), "interval_type='CI' .*'ci'.*'theta'"),
])
def test_interval_argument_errors(small, kw, match):
    params = sensitivity_params(*small)
    with pytest.raises(ValueError, match=match):
        sensitivity_interval(params, **kw)


def test_other_argument_errors(small):
    y, arms, mu, e = small
    params = sensitivity_params(y, arms, mu, e)
    with pytest.raises(ValueError, match="interval_type='bogus'"):
        robustness_value(params, interval_type="bogus")
    with pytest.raises(ValueError, match="alpha=2"):
        robustness_value(params, alpha=2)
    with pytest.raises(ValueError, match="null_hypothesis=nan"):
        robustness_value(params, null_hypothesis=float("nan"))
    with pytest.raises(ValueError, match="decimals"):
        sensitivity_summary(params, decimals=-1)
    with pytest.raises(ValueError, match="c_t=2"):
        sensitivity_summary(params, c_t=2)
    bad = SensitivityParams("ate", 1, 0, 1.0, 1.0, -0.5, np.eye(3), 100)
    with pytest.raises(ValueError, match="nu2=-0.5 .*min_propensity"):
        sensitivity_interval(bad)
    with pytest.raises(ValueError, match="target='ato'"):
        sensitivity_params(y, arms, mu, e, target="ato")
    with pytest.raises(ValueError, match="a1 and a0 must be different"):
        sensitivity_params(y, arms, mu, e, a1=0, a0=0)
    with pytest.raises(ValueError, match="a1=2 is invalid"):
        sensitivity_params(y, arms, mu, e, a1=2)
    with pytest.raises(ValueError, match="arms must hold integer arm indices in 0..1"):
        sensitivity_params(y, arms + 0.5, mu, e)
    with pytest.raises(ValueError, match=r"e must hold propensities in \(0, 1\]"):
        sensitivity_params(y, arms, mu, np.where(e > 0.5, e, 0.0))
    with pytest.raises(ValueError, match="e must have mu's shape"):
        sensitivity_params(y, arms, mu, e[:, :1])
    with pytest.raises(ValueError, match="y has 99 entries"):
        sensitivity_params(y[1:], arms, mu, e)
    with pytest.raises(ValueError, match="y contains NaN"):
        sensitivity_params(np.where(arms == 1, np.nan, y), arms, mu, e)
    with pytest.raises(ValueError, match="no units at the arm"):
        sensitivity_params(y, np.zeros_like(arms), mu, e, target="att")


def test_inputs_are_not_modified(small):
    copies = [a.copy() for a in small]
    sensitivity_params(*small, target="att")
    riesz_representer(small[1], small[3], target="atc")
    for before, after in zip(copies, small):
        np.testing.assert_array_equal(before, after)
