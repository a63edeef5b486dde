"""head_form="robinson": the heads in Robinson's form, Y = m(x) + (T - e(x)) tau(x), with the
fit's cross-fitted propensities (docs/parameters.md, item 41; docs/tuning.md)."""

import warnings

import numpy as np
import pytest
from helpers import TINY, make_confounded, sqrt_pehe

from dowhy_cfr import CFR, TARNet


def _baseline_confounds(n, seed):
    """A baseline with a threshold in the confounder and an effect simpler than it: the design
    where separate heads fit the threshold differently on the two arms (regularisation-induced
    confounding, Hahn, Murray & Carvalho 2020)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    T = rng.binomial(1, 1 / (1 + np.exp(-1.5 * X[:, 0])))
    mu0 = 2.0 * (X[:, 0] > 0) + np.sin(2 * X[:, 1]) + X[:, 0] ** 2
    tau = 1 + 0.5 * X[:, 2]
    return X, T, mu0 + T * tau + rng.normal(size=n), tau


@pytest.mark.slow
def test_robinson_heads_beat_separate_heads_where_the_baseline_confounds():
    """TARNet's heads on six data sets of n = 1,000 (2,000 test units each), default training.
    Measured: Robinson's 0.265, 0.246, 0.366, 0.382, 0.353, 0.344 (mean 0.326) against
    separate heads' 0.304, 0.340, 0.370, 0.368, 0.423, 0.391 (0.366); trained one step,
    Robinson's mean 0.55."""
    separate, robinson = [], []
    for seed in range(6):
        X, T, Y, _ = _baseline_confounds(1000, seed)
        Xt, _, _, tau = _baseline_confounds(2000, 100 + seed)
        for heads, form in ((separate, "separate"), (robinson, "robinson")):
            est = TARNet(head_form=form, random_state=seed, verbose=0).fit(Y, T, X=X)
            heads.append(sqrt_pehe(est.individual_effect(Xt), tau))
    assert np.mean(robinson) < 0.36
    assert np.mean(robinson) < np.mean(separate) - 0.01


@pytest.fixture(scope="module")
def fitted():
    X, T, Y, tau = make_confounded(n=400, seed=3)
    est = TARNet(**{**TINY, "n_ensemble": 3}, head_form="robinson").fit(Y, T, X=X)
    return est, X, T, Y


def test_effects_are_the_effect_heads_and_levels_use_the_linear_propensity(fitted):
    """The effect does not depend on the propensities; the potential outcomes' level at the
    units asked about uses the fit's logistic propensity of them (``fitted_.levels``)."""
    est, X, T, _ = fitted
    fit = est.fitted_
    mu0, mu1 = est.predict_outcomes(X)
    np.testing.assert_allclose(mu1 - mu0, est.individual_effect(X), atol=1e-9)
    xw = fit.features(X)
    e = fit.levels.predict(xw)
    assert e.shape == (len(X), 2) and np.allclose(e.sum(1), 1)
    assert np.corrcoef(e[:, 1], X[:, 0])[0, 1] > 0.8  # the treatment follows x0
    out = fit.outputs(xw)  # (K, 2, n): the same heads at e = 1/2 move both arms alike
    from dowhy_cfr.fitted import member_outputs

    half = member_outputs(fit.members, fit.preprocessing, xw, np.full((len(X), 2), 0.5))
    np.testing.assert_allclose(out[:, 1] - out[:, 0], half[:, 1] - half[:, 0], atol=1e-5)
    assert np.abs(out[:, 0] - half[:, 0]).max() > 1e-3
    # the doubly robust stage used the units' cross-fitted propensities: the blend's scores
    assert fit.debiased.e is not None and fit.config.head_form == "robinson"


def test_save_and_load_keep_robinson_heads(fitted, tmp_path):
    est, X, _, _ = fitted
    loaded = CFR.load(est.save(tmp_path / "r.cfr"))
    assert isinstance(loaded, TARNet)
    np.testing.assert_array_equal(loaded.effect(X), est.effect(X))
    for a, b in zip(loaded.predict_outcomes(X), est.predict_outcomes(X)):
        np.testing.assert_array_equal(a, b)
    assert loaded.ate_interval() == est.ate_interval()


def test_fit_stacked_gives_each_dataset_its_own_fit():
    """fit_stacked with the fit's seeds reproduces each data set's own fit (up to the float
    rounding of batched kernels), its propensities cross-fitted before the stack trains."""
    X, T, Y, _ = make_confounded(n=300, seed=4)
    est = TARNet(**TINY, head_form="robinson")
    fits = est.fit_stacked([Y, Y + 0.5 * T], [T, T], X=X, seeds="fit")
    alone = TARNet(**TINY, head_form="robinson").fit(Y + 0.5 * T, T, X=X)
    np.testing.assert_allclose(fits[1].effect(X), alone.effect(X), atol=1e-4)
    assert float(fits[1].ate()) - float(fits[0].ate()) == pytest.approx(0.5, abs=0.1)


def test_three_arms_and_the_alpha_warning():
    X, _, Y, _ = make_confounded(n=300, seed=5)
    T = np.random.default_rng(5).integers(0, 3, len(Y))
    est = TARNet(**TINY, head_form="robinson").fit(Y, T, X=X)
    assert est.effect(X[:4], T0=0, T1=2).shape == (4,)
    mu = est.predict_outcomes(X[:4])
    np.testing.assert_allclose(mu[2] - mu[0], est.effect(X[:4], T0=0, T1=2), atol=1e-9)
    with pytest.warns(UserWarning, match="alpha <= 0.05"):
        CFR(**TINY, head_form="robinson", alpha=0.2).fit(Y, T, X=X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        CFR(**TINY, head_form="robinson", alpha=0.05).fit(Y, T, X=X)


def test_streams_and_doses():
    """A stream has no propensities to give: a ValueError naming the fix. A dose's head is its
    own, whatever the form."""
    X, T, Y, _ = make_confounded(n=300, seed=6)
    chunks = [(Y[:150], T[:150], X[:150]), (Y[150:250], T[150:250], X[150:250])]
    with pytest.raises(ValueError, match="head_form='separate'"):
        CFR(**TINY, head_form="robinson").fit_chunks(chunks, validation=(Y[250:], T[250:],
                                                                         X[250:]))
    dose = np.random.default_rng(6).uniform(0, 1, len(Y))
    est = TARNet(**TINY, head_form="robinson").fit(Y + np.sin(3 * dose), dose, X=X)
    assert est.fitted_.continuous and est.fitted_.levels is None
    assert np.isfinite(est.effect(X[:3], T0=0.2, T1=0.8)).all()
