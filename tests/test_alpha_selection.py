"""alpha="auto": selection of alpha from a grid in one stack, by a criterion without
counterfactuals (dowhy_cfr.fitting.select_alpha and the criteria of dowhy_cfr.metrics)."""

import numpy as np
import pytest
from helpers import TINY, make_confounded

from dowhy_cfr import CFR
from dowhy_cfr.core import ALPHA_GRID
from dowhy_cfr.datasets.synthetic import simulate
from dowhy_cfr.fitting import ALPHA_CRITERION
from dowhy_cfr.metrics import (cross_fit_nuisances, dr_loss, dr_pseudo_outcome, r_loss,
                               selection_scores)


@pytest.fixture(scope="module")
def confounded():
    return make_confounded(n=400)


@pytest.fixture(scope="module")
def auto_fit(confounded):
    X, T, Y, _ = confounded
    return CFR(alpha="auto", **TINY).fit(Y, T, X=X)


def test_auto_picks_from_the_grid_and_sets_the_fitted_attributes(auto_fit):
    est = auto_fit
    assert est.alpha == "auto"  # the parameter is stored unchanged
    scores = est.alpha_scores_
    assert scores["alpha"].tolist() == list(ALPHA_GRID)
    assert {"nn_pehe", "r_loss", "dr_loss", "selected"} <= set(scores.columns)
    assert scores["selected"].sum() == 1
    best = scores.loc[scores[ALPHA_CRITERION].idxmin(), "alpha"]
    assert est.alpha_ == best == scores.loc[scores["selected"], "alpha"].item()
    assert est.config_.alpha == est.alpha_
    assert est.fitted_.members.n_models == 1  # only the selected alpha's ensemble is kept
    assert np.isfinite(scores[["nn_pehe", "r_loss", "dr_loss"]].to_numpy()).all()


def test_selected_ensemble_equals_a_plain_fit_with_that_alpha(confounded):
    """The stacked search trains each candidate as it would train alone (same seeds)."""
    X, T, Y, _ = confounded
    kw = dict(TINY, n_ensemble=2)
    est = CFR(alpha=[0.0, 0.3], **kw).fit(Y, T, X=X)
    assert est.fitted_.members.n_models == 2 and len(est.alpha_scores_) == 2
    plain = CFR(alpha=est.alpha_, **kw).fit(Y, T, X=X)
    np.testing.assert_allclose(est.effect(X[:50]), plain.effect(X[:50]), atol=1e-4)
    assert est.seeds_ == plain.seeds_


def test_fixed_alpha_has_alpha_but_no_scores(confounded):
    X, T, Y, _ = confounded
    est = CFR(alpha=0.1, **TINY).fit(Y, T, X=X)
    assert est.alpha_ == 0.1 and est.alpha_scores_ is None


def test_auto_scores_a_propensity_of_one(confounded):
    """A propensity model that gives some units a treated probability of exactly 1 (a tree
    that separates the arms): the criteria still score every candidate (the scores bound e
    within the clip on both sides; it raised in the doubly robust loss before)."""
    from sklearn.tree import DecisionTreeClassifier

    X, T, Y, _ = confounded
    est = CFR(alpha="auto", model_propensity=DecisionTreeClassifier(max_depth=None),
              **TINY).fit(Y, T, X=X)
    assert np.isfinite(est.alpha_scores_[["r_loss", "dr_loss"]].to_numpy()).all()
    assert est.alpha_ in ALPHA_GRID


@pytest.mark.parametrize("alpha, match", [
    ("best", "'auto'"), ([0.1], "at least two"), ([0.1, -1.0], ">= 0"),
    ([0.1, float("nan")], "finite"), ([0.1, 0.1], "repeats"), ([0.1, "a"], "numbers"),
])
def test_bad_grid_raises_a_clear_error(confounded, alpha, match):
    X, T, Y, _ = confounded
    with pytest.raises(ValueError, match="alpha=") as info:
        CFR(alpha=alpha, **TINY).fit(Y, T, X=X)
    assert match in str(info.value)


def test_grid_needs_a_binary_treatment_and_plain_fit(confounded):
    X, T, Y, _ = confounded
    T3 = np.where(X[:, 3] > 0.5, 2, T)
    with pytest.raises(ValueError, match="binary treatment"):
        CFR(alpha="auto", **TINY).fit(Y, T3, X=X)
    with pytest.raises(ValueError, match="CFR.fit only"):
        CFR(alpha="auto", **TINY).fit_stacked([Y, Y], T, X=X)


@pytest.fixture(scope="module")
def design_d():
    """Design D (nonlinear effect, confounded), n = 4000, with cross-fitted nuisances."""
    a = simulate("D", 4000, random_state=0)
    return a, cross_fit_nuisances(a.x, a.y, a.t, random_state=0)


def test_r_loss_and_dr_loss_are_lowest_at_the_true_effect(design_d):
    """Measured margins (seed 0, cross-fitted nuisances): the alternatives below are worse than
    the true tau by 0.013-0.020 (R-loss; 0.35 for the constant) and 0.05-0.08 (DR-loss; 1.7)."""
    a, nu = design_d
    alternatives = {"shrunk": 0.8 * a.tau, "stretched": 1.2 * a.tau,
                    "shifted": a.tau + 0.3, "constant": np.full_like(a.tau, a.tau.mean())}
    r_true = r_loss(a.tau, a.y, a.t, nu.m, nu.e)
    dr_true = dr_loss(a.tau, a.y, a.t, nu.e, nu.mu0, nu.mu1)
    for name, tau in alternatives.items():
        assert r_loss(tau, a.y, a.t, nu.m, nu.e) > r_true + 0.003, name
        assert dr_loss(tau, a.y, a.t, nu.e, nu.mu0, nu.mu1) > dr_true + 0.02, name


def test_dr_pseudo_outcome_is_unbiased_with_true_nuisances():
    a = simulate("A", 20000, random_state=1)
    # true nuisances: mu_t = b + (t - 0.5) tau
    phi = dr_pseudo_outcome(a.y, a.t, a.e, a.b - 0.5 * a.tau, a.b + 0.5 * a.tau)
    assert abs(phi.mean() - a.tau.mean()) < 0.05  # measured 0.01; the ATE is about 0.5


def test_cross_fit_nuisances_shapes_and_clipping(design_d):
    a, nu = design_d
    assert all(v.shape == (4000,) for v in nu)
    assert nu.e.min() >= 0.01 and nu.e.max() <= 0.99
    # the outcome model explains part of the outcome: measured mean squared error 1.55, against
    # 1.39 for the true E[y | x] and 1.91 for the mean (var(y))
    m_true = a.b + (a.e - 0.5) * a.tau
    mse = np.mean((a.y - nu.m) ** 2)
    assert mse < 0.9 * np.var(a.y) and mse < 1.2 * np.mean((a.y - m_true) ** 2)
    scores = selection_scores(a.tau, np.arange(1000), a.x, a.y, a.t, nu)
    assert set(scores) == {"nn_pehe", "r_loss", "dr_loss"}


@pytest.mark.parametrize("bad, match", [
    (dict(e=np.ones(4000)), "strictly between"),
])
def test_dr_pseudo_outcome_rejects_unclipped_propensity(design_d, bad, match):
    a, nu = design_d
    args = dict(y=a.y, t=a.t, e=nu.e, mu0=nu.mu0, mu1=nu.mu1)
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        dr_pseudo_outcome(**args)


def test_stacked_bootstrap_refits_the_selected_alpha(confounded):
    from dowhy_cfr import CFRBootstrapInference

    X, T, Y, _ = confounded
    est = CFR(alpha=[0.0, 0.2], **dict(TINY, n_iter=40)).fit(
        Y, T, X=X, inference=CFRBootstrapInference(3, random_state=0))
    replicas = est._inference._est._instances
    assert [r.alpha_ for r in replicas] == [est.alpha_] * 3
    lo, hi = est.ate_interval(X)
    assert lo <= hi


def test_save_and_load_keep_the_selected_alpha(auto_fit, confounded, tmp_path):
    X = confounded[0]
    loaded = CFR.load(auto_fit.save(tmp_path / "auto.zip"))
    assert loaded.alpha == "auto" and loaded.alpha_ == auto_fit.alpha_
    assert loaded.alpha_scores_ is None  # the scores are not saved
    np.testing.assert_array_equal(loaded.effect(X[:5]), auto_fit.effect(X[:5]))


def test_plots_name_the_selected_alpha(auto_fit):
    import matplotlib

    matplotlib.use("Agg")
    from dowhy_cfr.plotting import plot_history

    fig = plot_history(auto_fit)  # alpha="auto" is no number: the title shows alpha_
    assert f"alpha={auto_fit.alpha_:g}" in fig.get_suptitle()
