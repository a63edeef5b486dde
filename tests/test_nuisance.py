"""The nuisance layer: folds (grouped by unit), the cross-fitted propensity and outcome
regressions, and the doubly robust scores that every stage shares."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import log_loss

from dowhy_cfr import nuisance
from dowhy_cfr.debiased import aipw_terms
from dowhy_cfr.metrics import dr_pseudo_outcome
from dowhy_cfr.nuisance import (aipw_scores, arm_log_loss, boosting_propensity_model,
                                cross_fit_outcomes, cross_fit_propensity, folds)
from dowhy_cfr.plans import ensemble


def test_cross_fit_propensity_is_out_of_fold_and_clipped():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 2))
    arms = (x[:, 0] + 0.1 * rng.normal(size=300) > 0).astype(int)  # nearly separable
    e = cross_fit_propensity(None, x, arms, n_arms=2, cv=5, random_state=0, min_propensity=0.05).e
    assert e.shape == (300, 2) and e.min() >= 0.05
    assert np.mean(e[np.arange(300), arms] > 0.5) > 0.9  # informative
    with pytest.raises(TypeError, match="predict_proba"):
        cross_fit_propensity(LinearRegression(), x, arms, n_arms=2)


def test_cross_fit_propensity_records_the_clipped_units():
    """``clipped`` marks the units whose out-of-fold propensity of some arm was below the clip
    (recomputed here from the unclipped out-of-fold probabilities of the same folds)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    arms = (rng.random(400) < 1 / (1 + np.exp(-3 * x[:, 0]))).astype(int)  # poor overlap
    prop = cross_fit_propensity(LogisticRegression(), x, arms, n_arms=2, random_state=0,
                                min_propensity=0.05)
    splits = folds(arms, 5, nuisance.sklearn_seed(0))
    raw = nuisance._out_of_fold_proba(LogisticRegression(), x, arms, splits, 2)
    by_hand = (raw[:, 0] < 0.05) | (raw[:, 1] < 0.05)
    np.testing.assert_array_equal(prop.clipped, by_hand)
    assert 0.1 < prop.clipped_share == by_hand.mean() < 0.6  # measured 0.30
    # a clipped unit's propensity is the clip exactly, an unclipped one's is above it
    assert np.all((prop.e == 0.05).any(1) == prop.clipped)
    sub = prop.subset(np.arange(50))
    np.testing.assert_array_equal(sub.clipped, prop.clipped[:50])
    assert cross_fit_propensity(LogisticRegression(), x, arms, n_arms=2,
                                min_propensity=0.001).clipped_share < prop.clipped_share


def test_clipped_warning_above_the_threshold_names_the_fixes():
    assert nuisance.clipped_warning(None, 0.05) is None
    assert nuisance.clipped_warning(nuisance.CLIPPED_WARN_SHARE, 0.05) is None
    message = nuisance.clipped_warning(0.25, 0.05)
    for words in ("25%", "min_propensity=0.05", "overlap", "trim", "lower min_propensity"):
        assert words in message


def test_cross_fit_propensity_names_the_model_it_kept():
    """The default keeps the candidate with the lower out-of-fold log-loss and says which: on a
    propensity that is logistic in x the logistic model, on a checkerboard the boosting."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(600, 2))
    logistic = rng.random(600) < 1 / (1 + np.exp(-x[:, 0]))
    checker = rng.random(600) < np.where(x[:, 0] * x[:, 1] > 0, 0.9, 0.1)
    for arms, kept in ((logistic, "logistic"), (checker, "boosting")):
        e, name, _ = cross_fit_propensity(None, x, arms.astype(int), n_arms=2)
        assert name == kept
        np.testing.assert_array_equal(e, cross_fit_propensity(None, x, arms.astype(int),
                                                              n_arms=2).e)
    name = cross_fit_propensity(LogisticRegression(), x, logistic.astype(int), n_arms=2).model
    assert name == "LogisticRegression"


def test_arm_log_loss_scores_the_clipped_propensity_of_the_received_arm():
    proba = np.array([[0.2, 0.8], [0.7, 0.3], [0.01, 0.99]])
    arms = np.array([1, 0, 0])
    assert arm_log_loss(proba[:2], arms[:2]) == pytest.approx(log_loss(arms[:2], proba[:2]))
    clipped = np.clip(proba, 0.05, 1.0)  # the last row no longer sums to one
    assert arm_log_loss(clipped, arms) == pytest.approx(-np.log([0.8, 0.7, 0.05]).mean())
    assert arm_log_loss(clipped, arms.astype(bool)) == arm_log_loss(clipped, arms)


def test_default_candidates_are_compared_on_floored_not_clipped_propensities(monkeypatch):
    """The default keeps the candidate whose out-of-fold propensities have the lower log-loss
    with every probability floored at SELECTION_FLOOR (not clipped at ``min_propensity``), and
    returns that candidate's propensities clipped at ``min_propensity``."""
    seen = []

    def spy(proba, arms):
        seen.append(proba)
        return arm_log_loss(proba, arms)

    monkeypatch.setattr(nuisance, "arm_log_loss", spy)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 2))
    arms = (2 * x[:, 0] + 0.3 * rng.normal(size=300) > 0).astype(int)
    e, name, _ = cross_fit_propensity(None, x, arms, n_arms=2, min_propensity=0.1)
    assert len(seen) == 2
    assert all(p.min() >= nuisance.SELECTION_FLOOR for p in seen)
    assert any(p.min() < 0.1 for p in seen)  # the comparison saw below the clip
    scores = {k: arm_log_loss(p, arms) for k, p in zip(("logistic", "boosting"), seen)}
    assert name == min(scores, key=scores.get)
    kept = seen[("logistic", "boosting").index(name)]
    np.testing.assert_array_equal(e, np.clip(kept, 0.1, 1.0))


class _ColumnProba(ClassifierMixin, BaseEstimator):
    """A 'classifier' whose P(T = 1 | x) is column ``column`` of x: propensities set by hand."""

    def __init__(self, column=0):
        self.column = column

    def fit(self, x, arms):
        self.classes_ = np.unique(arms)
        return self

    def predict_proba(self, x):
        p1 = np.asarray(x)[:, self.column]
        return np.column_stack([1 - p1, p1])


def test_an_overconfident_candidate_loses_although_the_clip_would_hide_it():
    """Candidate 0 is right on most units but gives 0.002 to the arm 30 units received (what
    a misspecified logistic regression does in the tails); candidate 1 is vaguer everywhere
    but never that wrong. Clipped at 0.05, candidate 0 has the lower log-loss; floored at
    0.001 it has the higher, and the default comparison keeps candidate 1."""
    rng = np.random.default_rng(1)
    n = 600
    arms = np.r_[np.ones(n // 2, int), np.zeros(n // 2, int)]
    sharp = np.where(arms == 1, 0.9, 0.1)
    sharp[:30] = 0.002  # treated units given P(T = 1) = 0.002
    vague = np.where(arms == 1, 0.75, 0.25)
    x = np.column_stack([sharp, vague, rng.normal(size=n)])
    raw = {0: np.column_stack([1 - sharp, sharp]), 1: np.column_stack([1 - vague, vague])}
    clipped = {k: arm_log_loss(np.clip(p, 0.05, 1), arms) for k, p in raw.items()}
    floored = {k: arm_log_loss(np.clip(p, nuisance.SELECTION_FLOOR, 1), arms)
               for k, p in raw.items()}
    assert clipped[0] < clipped[1] and floored[1] < floored[0]
    e, name, clipped_rows = cross_fit_propensity([_ColumnProba(0), _ColumnProba(1)], x, arms,
                                                 n_arms=2, min_propensity=0.05)
    assert name == "_ColumnProba_2"  # the second candidate (a repeated class is numbered)
    np.testing.assert_allclose(e[:, 1], vague)
    assert not clipped_rows.any()


def test_boosting_candidate_keeps_small_data_propensities_off_the_clip():
    """Leaves of 40 units and an L2 penalty: on 400 units with a strong logistic confounder the
    boosting candidate puts far fewer units below 0.02 than unregularised depth-3 boosting
    (measured: 1.8% against 7.7% of the units over these three data sets)."""
    below = {"candidate": [], "unregularised": []}
    for seed in (1, 2, 3):
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(400, 4))
        arms = (rng.random(400) < 1 / (1 + np.exp(-2 * x[:, 0]))).astype(int)
        for key, model in (("candidate", boosting_propensity_model(0)),
                           ("unregularised", HistGradientBoostingClassifier(
                               max_depth=3, max_iter=100, random_state=0))):
            p = cross_fit_propensity(model, x, arms, n_arms=2, min_propensity=1e-9).e
            below[key].append(np.mean(p < 0.02))
    assert np.mean(below["candidate"]) < np.mean(below["unregularised"]) / 2


def test_cross_fitting_members_leave_their_own_fold_out():
    """K-fold bagged members: member j trains on the units outside fold j; fold j is its
    validation split, read only by the other members' stopping (``stop_on_others``), so every
    unit is left out by exactly one member; the folds are stratified by arm."""
    arms = np.repeat([0, 1], [43, 58])
    plans = ensemble([3, 4, 5, 6, 7], arms, cross_fit=True)
    left_out = [p.split[1] for p in plans]
    assert np.array_equal(np.sort(np.concatenate(left_out)), np.arange(101))  # each unit once
    for p, fold in zip(plans, left_out):
        assert p.stop_on_others and len(fold) in (20, 21)
        assert np.array_equal(np.sort(np.concatenate(p.split)), np.arange(101))
        assert abs(arms[fold].mean() - arms.mean()) < 0.06  # stratified


def test_grouped_folds_keep_every_group_in_one_fold():
    """Copies of one unit (a bootstrap resample) never sit on both sides of a split; without
    groups they do (the leak the grouped folds prevent)."""
    rng = np.random.default_rng(0)
    units = rng.choice(200, size=200)  # a bootstrap resample: 200 rows, ~127 distinct units
    arms = (units % 3 == 0).astype(int)
    straddle = {True: 0, False: 0}
    for grouped in (True, False):
        for fit_rows, pred_rows in folds(arms, 5, seed=1, groups=units if grouped else None):
            straddle[grouped] += np.intersect1d(units[fit_rows], units[pred_rows]).size
    assert straddle[True] == 0
    assert straddle[False] > 20  # measured: 97 shared units over the 5 folds


def test_grouped_cross_fitting_members_leave_whole_units_out():
    units = np.repeat(np.arange(60), 2)  # every unit twice
    arms = (units % 2).astype(int)
    for p in ensemble([0, 1, 2], arms, cross_fit=True, groups=units):
        train, fold = p.split
        assert np.intersect1d(units[train], units[fold]).size == 0


def test_grouped_propensity_has_no_in_sample_advantage():
    """On a resample with duplicated units, the ungrouped out-of-fold boosting reaches a log-loss
    below the true propensity's (it has seen copies of the predicted units); grouped folds do
    not (the leak of issue #29, defect 1: 0.489 against the truth's 0.586)."""
    rng = np.random.default_rng(3)
    n = 600
    x = rng.normal(size=(n, 4))
    p = 1 / (1 + np.exp(-x[:, 0]))
    t = (rng.random(n) < p).astype(int)
    rows = rng.choice(n, size=n)
    xs, ts, ps = x[rows], t[rows], p[rows]
    truth = -np.mean(np.log(np.where(ts == 1, ps, 1 - ps)))
    model = boosting_propensity_model(0)
    leak = arm_log_loss(cross_fit_propensity(model, xs, ts, n_arms=2, min_propensity=1e-3).e, ts)
    fair = arm_log_loss(cross_fit_propensity(model, xs, ts, n_arms=2, min_propensity=1e-3,
                                             groups=rows).e, ts)
    assert leak < truth < fair  # measured: leak 0.547, truth 0.578, grouped 0.634


def test_cross_fit_outcomes_are_out_of_fold_arm_regressions():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(400, 3))
    arms = rng.integers(0, 2, 400)
    y = np.where(arms == 1, 2 * x[:, 0], -x[:, 1]) + 0.1 * rng.normal(size=400)
    mu = cross_fit_outcomes(x, y, arms, n_arms=2, model=LinearRegression())
    assert np.corrcoef(mu[:, 1], 2 * x[:, 0])[0, 1] > 0.99
    assert np.corrcoef(mu[:, 0], -x[:, 1])[0, 1] > 0.99
    # out of fold: a unit's own noise does not enter its prediction
    resid = y - mu[np.arange(400), arms]
    assert np.var(resid) > 0.009  # in-sample least squares would leave (1 - 4/400) * 0.01


def test_one_doubly_robust_score_for_averages_and_metrics():
    rng = np.random.default_rng(4)
    n = 50
    y, arms = rng.normal(size=n), rng.integers(0, 2, n)
    mu, e1 = rng.normal(size=(n, 2)), rng.uniform(0.1, 0.9, n)
    e = np.column_stack([1 - e1, e1])
    psi = aipw_scores(y, arms, mu, e)
    a, _ = aipw_terms(y, arms, mu, e, a1=1, a0=0, target="ate")
    np.testing.assert_allclose(a, psi[:, 1] - psi[:, 0])
    np.testing.assert_allclose(dr_pseudo_outcome(y, arms, e1, mu[:, 0], mu[:, 1]), a)


def test_propensity_candidates_take_a_dict_of_named_classifiers():
    """A dict gives the candidates under its keys; an empty dict or a value without
    ``predict_proba`` gets a clear error naming the argument."""
    models = nuisance.default_gps_models(0)
    assert list(nuisance.propensity_candidates(models)) == ["logistic", "boosting"]
    with pytest.raises(ValueError, match="model_propensity"):
        nuisance.propensity_candidates({})
    with pytest.raises(TypeError, match=r"model_propensity\['ols'\]"):
        nuisance.propensity_candidates({"ols": LinearRegression()})


def test_generalised_propensity_boosting_stops_early():
    """A continuous treatment's GPS selects between the logistic regression and boosting that
    stops early (eight dose intervals: eight trees a round); the binary propensity stops early
    only above 10,000 units (scikit-learn's "auto"). Where the dose depends on x through a
    checkerboard the boosting is kept, and its early stop changes the propensities (so the
    default is not the fixed-round model)."""
    assert nuisance.default_gps_models(0)["boosting"].get_params()["early_stopping"] is True
    # the binary candidate: scikit-learn's "auto", early stopping above 10,000 units only
    assert boosting_propensity_model(0).get_params()["early_stopping"] == "auto"
    rng = np.random.default_rng(3)
    x = rng.normal(size=(600, 2))
    dose = np.where(x[:, 0] * x[:, 1] > 0, 1.0, -1.0) + 0.5 * rng.normal(size=600)
    gps = nuisance.cross_fit_gps(None, x, dose, random_state=0)
    assert gps.model == "boosting"
    np.testing.assert_array_equal(gps.proba,
                                  nuisance.cross_fit_gps("auto", x, dose, random_state=0).proba)
    fixed = {"logistic": nuisance.logistic_propensity_model(),
             "boosting": boosting_propensity_model(None)}
    fixed_gps = nuisance.cross_fit_gps(fixed, x, dose, random_state=0)
    assert fixed_gps.model == "boosting"
    assert np.abs(gps.proba - fixed_gps.proba).max() > 1e-3
