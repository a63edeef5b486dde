"""Hyper-parameter search: protocol (never reads test units), stacking, selection criteria."""

import numpy as np
import pytest
import torch

from dowhy_cfr import CFR
from dowhy_cfr.selection import DEFAULT_SPACE, PAPER_SPACE, random_search

FIXED = dict(n_iter=40, eval_every=10, verbose=0)
SPACE = {"alpha": [0.01, 0.1, 1.0], "n_rep_layers": [1, 2], "rep_dim": [8, 16],
         "n_head_layers": [1], "head_dim": [8], "batch_size": [32, 64]}


@pytest.fixture(autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _data(n=240, seed=0, binary=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    T = rng.binomial(1, 1 / (1 + np.exp(-X[:, 0]))).astype(float)
    mu = X[:, 0] + T * (1 + X[:, 1])
    Y = (mu + rng.normal(size=n) > 0.5).astype(float) if binary else mu + 0.1 * rng.normal(size=n)
    perm = rng.permutation(n)
    return X, T, Y, perm[:140], perm[140:200], perm[200:]


def test_search_never_reads_test_units():
    X, T, Y, train, val, test = _data()
    X1, Y1, T1 = X.copy(), Y.copy(), T.copy()
    X1[test], Y1[test], T1[test] = np.nan, np.nan, 7.0  # poison the test units
    res = random_search(4, Y1, T1, X1, train=train, val=val, space=SPACE, per_architecture=2,
                        fixed=FIXED, refit=True, random_state=0)
    assert np.isfinite(res.results["score"]).all()
    assert res.metric == "nn_pehe"
    # the refitted estimator saw exactly train + val
    assert isinstance(res.best_estimator, CFR)
    assert np.isfinite(res.best_estimator.effect(X[test])).all()
    # other test values give exactly the same search
    X2, Y2 = X.copy(), Y.copy()
    X2[test] += 100.0
    Y2[test] = -Y2[test]
    res2 = random_search(4, Y2, T, X2, train=train, val=val, space=SPACE, per_architecture=2,
                         fixed=FIXED, refit=False, random_state=0)
    np.testing.assert_allclose(res2.results["score"], res.results["score"], rtol=1e-6)
    assert res2.best_params == res.best_params


def test_candidates_of_one_architecture_share_a_stack():
    X, T, Y, train, val, _ = _data()
    res = random_search(6, Y, T, X, train=train, val=val, space=SPACE, per_architecture=3,
                        fixed=FIXED, refit=False, random_state=1)
    assert len(res.results) == 6 and res.results["group"].nunique() == 2
    for _, g in res.results.groupby("group"):
        assert g[["n_rep_layers", "rep_dim", "batch_size"]].nunique().max() == 1
        assert g["alpha"].nunique() == 3  # distinct alphas within a stack
    assert res.best_score == res.results["score"].min()
    assert set(res.best_params) == set(SPACE)
    assert isinstance(res.best_params["rep_dim"], int)


def test_binary_outcome_selects_by_policy_risk_on_randomized_units():
    X, T, Y, train, val, _ = _data(binary=True)
    e = np.ones(len(Y))
    e[val[:20]] = 0  # some validation units are not randomized
    res = random_search(2, Y, T, X, train=train, val=val, e=e, space=SPACE, per_architecture=2,
                        fixed=FIXED, refit=False, random_state=0)
    assert res.metric == "policy_risk"
    assert ((res.results["score"] >= 0) & (res.results["score"] <= 1)).all()
    # e is honoured: the same candidates scored on all validation units score otherwise
    every = random_search(2, Y, T, X, train=train, val=val, space=SPACE, per_architecture=2,
                          fixed=FIXED, refit=False, random_state=0)
    assert not np.allclose(np.sort(every.results["score"]), np.sort(res.results["score"]))


def test_fixed_parameters_are_not_searched():
    X, T, Y, train, val, _ = _data()
    res = random_search(2, Y, T, X, train=train, val=val, space=SPACE, per_architecture=2,
                        fixed=dict(FIXED, rep_dim=12, ipm="mmd2_lin"), refit=True,
                        random_state=0)
    assert "rep_dim" not in res.best_params and "rep_dim" not in res.results
    # the fixed values reach the refit ...
    best = res.best_estimator
    assert best.rep_dim == 12 and best.config_.ipm == "mmd2_lin"
    assert best.transform(X[:3]).shape == (3, 12)
    # ... and the search's own training: another fixed width, other scores (measured, data
    # seeds 0-3: rep_dim 12 vs 8 scores differ by 0.0002-0.06)
    other = random_search(2, Y, T, X, train=train, val=val, space=SPACE, per_architecture=2,
                          fixed=dict(FIXED, rep_dim=8, ipm="mmd2_lin"), refit=False,
                          random_state=0)
    assert np.abs(np.sort(other.results["score"]) - np.sort(res.results["score"])).max() > 1e-6


@pytest.mark.parametrize("head_form", ["separate", "robinson"])
def test_a_space_without_the_batch_size_keeps_its_auto(head_form):
    """``batch_size="auto"`` (the default) when the space does not search it: the candidates
    train at the automatic batch (the search once took min("auto", n) and raised a TypeError),
    Robinson's heads with the search units' cross-fitted propensities."""
    X, T, Y, train, val, _ = _data()
    res = random_search(2, Y, T, X, train=train, val=val, space={"alpha": [0.0, 0.05]},
                        per_architecture=2, fixed=dict(FIXED, head_form=head_form),
                        refit=False, random_state=0)
    assert np.isfinite(res.results["score"]).all() and len(res.results) == 2


def test_input_checks():
    X, T, Y, train, val, _ = _data()
    with pytest.raises(ValueError, match="disjoint"):
        random_search(1, Y, T, X, train=train, val=train[:5], fixed=FIXED)
    with pytest.raises(ValueError, match="cannot search"):
        random_search(1, Y, T, X, train=train, val=val, space={"colour": [1]}, fixed=FIXED)
    with pytest.raises(ValueError, match="metric"):
        random_search(1, Y, T, X, train=train, val=val, metric="mse", fixed=FIXED)


def test_search_spaces():
    # supplement: alpha in {10^(k/2)}, k = -10..6; 1-3 layers; widths 20-200
    assert PAPER_SPACE["alpha"][0] == pytest.approx(1e-5)
    assert PAPER_SPACE["alpha"][-1] == pytest.approx(1e3)
    assert len(PAPER_SPACE["alpha"]) == 17
    assert max(DEFAULT_SPACE["alpha"]) == pytest.approx(10.0)
    assert PAPER_SPACE["rep_dim"] == [20, 50, 100, 200]


@pytest.mark.parametrize("metric", ["r_loss", "dr_loss"])
def test_r_loss_and_dr_loss_prefer_a_trained_candidate_and_read_no_test_unit(metric):
    """A candidate stopped after one step (effects ~0) against trained ones, on data with
    effects 1 + x1: both orthogonal criteria must rank a trained candidate first, with nuisance
    models cross-fitted on the training and validation units only (test rows are poisoned)."""
    X, T, Y, train, val, test = _data(n=400, seed=3)
    train, val = np.concatenate([train, test[:100]]), val
    X1, Y1 = X.copy(), Y.copy()
    X1[test[100:]], Y1[test[100:]] = np.nan, np.nan
    space = {"n_iter": [1, 300], "rep_dim": [16], "n_rep_layers": [1], "n_head_layers": [1],
             "head_dim": [8], "batch_size": [64], "alpha": [0.01]}
    res = random_search(4, Y1, T, X1, train=train, val=val, space=space, per_architecture=1,
                        fixed=dict(eval_every=10, verbose=0), metric=metric, refit=False,
                        random_state=0)
    assert res.metric == metric and np.isfinite(res.results["score"]).all()
    assert set(res.results["n_iter"]) == {1, 300}
    assert res.best_params["n_iter"] == 300
    worst_trained = res.results.loc[res.results["n_iter"] == 300, "score"].max()
    assert worst_trained < res.results.loc[res.results["n_iter"] == 1, "score"].min()
