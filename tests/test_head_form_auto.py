"""head_form="auto": separate heads and Robinson's form trained in one stack, the form whose
members have the lower factual loss on their folds kept, or both averaged where the two losses
are within 5 % (docs/parameters.md, items 42 and 45)."""

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import TINY, make_confounded

from dowhy_cfr import CFR, TARNet
from dowhy_cfr.core import predict


@pytest.fixture(scope="module")
def data():
    X, T, Y, tau = make_confounded(n=400, seed=7)
    return X, T, Y


@pytest.fixture(scope="module")
def auto(data):
    X, T, Y = data
    return CFR(**TINY, head_form="auto", alpha=0.2).fit(Y, T, X=X)


def test_the_choice_is_the_lower_fold_loss_and_gives_that_forms_own_fit(data, auto):
    """The chosen candidate is the form with the lower mean fold loss; the fit is the one
    ``head_form=<chosen>`` gives alone (the same seeds and folds; Robinson's at alpha 0), to
    float rounding, and the other form's fit has the other loss."""
    X, T, Y = data
    scores = auto.head_form_scores_
    assert list(scores.head_form) == ["separate", "robinson"]
    assert scores.selected.sum() == 1
    chosen = scores.loc[scores.selected, "head_form"].item()
    assert scores.loc[scores.selected, "fold_loss"].item() == scores.fold_loss.min()
    assert auto.head_form_ == chosen
    alone = {form: CFR(**TINY, head_form=form, alpha=0.2 if form == "separate" else 0.0)
             .fit(Y, T, X=X) for form in ("separate", "robinson")}
    for form, est in alone.items():
        loss = float(np.nanmean(est.fitted_.members.kept_val_loss()))
        assert loss == pytest.approx(scores.set_index("head_form").fold_loss[form], rel=1e-3)
    np.testing.assert_allclose(auto.effect(X), alone[chosen].effect(X), atol=1e-3)
    assert auto.alpha_ == pytest.approx(alone[chosen].alpha_)
    assert (auto.fitted_.levels is not None) == (chosen == "robinson")
    assert "head_form='auto'" in auto.summary().as_text()


def test_both_choices_happen_and_each_keeps_its_form():
    """Two outcomes on the same units, each fit choosing by its own losses (measured, seed 0:
    an exponential control and a linear treated outcome, separate 0.115 against Robinson's
    0.165; two arms' different periodic outcomes, 0.815 against 0.767): both forms are chosen,
    and each fitted network computes its own form."""
    rng = np.random.default_rng(0)
    n = 600
    X = rng.normal(size=(n, 4))
    T = rng.binomial(1, 1 / (1 + np.exp(-2 * X[:, 0])))
    noise = 0.3 * rng.normal(size=n)
    kw = {**TINY, "n_iter": 200}
    outcomes = {"separate": np.exp(X[:, 0]) * (1 - T) + X[:, 1] * T + noise,
                "robinson": (1 - T) * np.sin(3 * X[:, 0]) + T * np.cos(3 * X[:, 0]) + noise}
    for expected, y in outcomes.items():
        est = TARNet(**kw, head_form="auto").fit(y, T, X=X)
        assert est.head_form_ == expected
        assert est.fitted_.members.net.robinson == (expected == "robinson")
        assert est.fitted_.config.head_form == expected


def test_save_and_load_keep_the_chosen_form(auto, data, tmp_path):
    X, _, _ = data
    loaded = CFR.load(auto.save(tmp_path / "a.cfr"))
    assert loaded.head_form_ == auto.head_form_ and loaded.head_form == "auto"
    np.testing.assert_array_equal(loaded.effect(X), auto.effect(X))
    assert loaded.head_form_scores_ is None  # not saved, as alpha_scores_


def test_fit_stacked_chooses_per_dataset_as_fit_does(data):
    """fit_stacked with the fit's seeds: each data set's own choice and fit (float rounding)."""
    X, T, Y = data
    est = TARNet(**TINY, head_form="auto")
    ys = [Y, Y + 0.5 * T]
    fits = est.fit_stacked(ys, [T, T], X=X, seeds="fit")
    for y, fitted in zip(ys, fits):
        alone = TARNet(**TINY, head_form="auto").fit(y, T, X=X)
        assert fitted.head_form_ == alone.head_form_
        np.testing.assert_allclose(fitted.effect(X), alone.effect(X), atol=1e-3)


def test_what_auto_refuses_and_where_it_takes_separate_heads(data):
    X, T, Y = data
    with pytest.raises(ValueError, match="alpha a number"):
        CFR(**TINY, head_form="auto", alpha="auto").fit(Y, T, X=X)
    with pytest.raises(ValueError, match="effect_penalty"):
        CFR(**TINY, head_form="auto", effect_penalty=3.0).fit(Y, T, X=X)
    from dowhy_cfr.selection import random_search

    with pytest.raises(ValueError, match="search head_form"):
        random_search(1, Y, T, X, train=np.arange(300), val=np.arange(300, 400),
                      space={"rep_dim": [8]}, fixed={**TINY, "head_form": "auto"},
                      refit=False)
    # a stream has no propensities: separate heads
    chunks = [(Y[:150], T[:150], X[:150]), (Y[150:300], T[150:300], X[150:300])]
    est = CFR(**TINY, head_form="auto").fit_chunks(chunks, validation=(Y[300:], T[300:],
                                                                       X[300:]))
    assert est.head_form_ == "separate"
    # a dose's head is its own
    dose = np.random.default_rng(1).uniform(0, 1, len(Y))
    est = TARNet(**TINY, head_form="auto").fit(Y + np.sin(3 * dose), dose, X=X)
    assert est.fitted_.continuous and est.head_form_scores_ is None
    assert np.isfinite(est.effect(X[:3], T0=0.2, T1=0.8)).all()


def test_three_arms(data):
    X, _, Y = data
    T = np.random.default_rng(5).integers(0, 3, len(Y))
    est = TARNet(**TINY, head_form="auto").fit(Y, T, X=X)
    assert isinstance(est.head_form_scores_, pd.DataFrame)
    mu = est.predict_outcomes(X[:4])
    np.testing.assert_allclose(mu[2] - mu[0], est.effect(X[:4], T0=0, T1=2), atol=1e-9)


FIVE = {**TINY, "n_ensemble": 5}  # K-fold members: the jackknife's intervals


@pytest.fixture(scope="module")
def averaged(data):
    """The same fit with the forms' fold losses taken as close (every difference within the
    share): both forms kept, averaged."""
    from dowhy_cfr import fitting

    X, T, Y = data
    mp = pytest.MonkeyPatch()
    mp.setattr(fitting, "AUTO_AVERAGE_WITHIN", 10.0)
    try:
        return CFR(**FIVE, head_form="auto", alpha=0.2).fit(Y, T, X=X)
    finally:
        mp.undo()


def test_close_fold_losses_keep_both_forms_and_average_them(data, averaged):
    """Within AUTO_AVERAGE_WITHIN each member is the mean of its two networks: the heads'
    effects are the mean of the two forms' own fits' (the doubly robust shift is linear in the
    outcomes, so it averages too), the five members keep the K-fold jackknife, and the fit says
    what it kept."""
    X, T, Y = data
    scores = averaged.head_form_scores_
    assert scores.selected.all() and list(scores.weight) == [0.5, 0.5]
    assert averaged.head_form_ == "auto"
    members = averaged.fitted_.members
    assert members.paired and members.n_models == 5 and members.net.n_models == 10
    alone = [CFR(**FIVE, head_form=form, alpha=alpha).fit(Y, T, X=X)
             for form, alpha in (("separate", 0.2), ("robinson", 0.0))]
    for a, loss in zip(alone, scores.fold_loss):
        assert np.nanmean(a.fitted_.members.kept_val_loss()) == pytest.approx(loss, rel=1e-3)
    mean = (alone[0].individual_effect(X) + alone[1].individual_effect(X)) / 2
    np.testing.assert_allclose(averaged.individual_effect(X), mean, atol=1e-3)
    # neither form alone: the average differs from each by more than the rounding
    assert min(np.abs(averaged.individual_effect(X) - a.individual_effect(X)).max()
               for a in alone) > 1e-2
    assert averaged.ate() == pytest.approx((alone[0].ate() + alone[1].ate()) / 2, abs=1e-3)
    lo, hi = averaged.effect_interval(X[:20])
    assert np.all(lo < hi) and np.isfinite(lo).all()
    mu = averaged.predict_outcomes(X[:5])
    np.testing.assert_allclose(mu[1] - mu[0], averaged.individual_effect(X[:5]).ravel(),
                               atol=1e-9)
    assert "average of separate heads and Robinson's form" in averaged.summary().as_text()


def test_save_and_load_keep_both_forms(averaged, data, tmp_path):
    X, _, _ = data
    loaded = CFR.load(averaged.save(tmp_path / "b.cfr"))
    assert loaded.head_form_ == "auto" and loaded.fitted_.members.paired
    np.testing.assert_array_equal(loaded.effect(X), averaged.effect(X))
    np.testing.assert_array_equal(loaded.predict_outcomes(X[:7]), averaged.predict_outcomes(X[:7]))


def test_fit_stacked_averages_as_fit_does(data, monkeypatch):
    """The stacked path keeps both forms per data set as fit does (one fit path), and a paired
    member's representation is its separate network's, trained and at its start."""
    from dowhy_cfr import fitting

    monkeypatch.setattr(fitting, "AUTO_AVERAGE_WITHIN", 10.0)
    X, T, Y = data
    ys = [Y, Y + 0.5 * T]
    fits = TARNet(**TINY, head_form="auto").fit_stacked(ys, [T, T], X=X, seeds="fit")
    for y, fitted in zip(ys, fits):
        alone = TARNet(**TINY, head_form="auto").fit(y, T, X=X)
        assert fitted.head_form_ == alone.head_form_ == "auto"
        np.testing.assert_allclose(fitted.effect(X), alone.effect(X), atol=1e-3)
    fit = fits[0].fitted_
    xw = fit.features(X[:50])
    phi = fit.representation(xw, 0)
    sep = fit.members.net.select([0], "separate")
    _, own = predict(sep, torch.as_tensor(xw, dtype=torch.float32), representation=True)
    np.testing.assert_allclose(phi, own[0].double().numpy(), atol=1e-6)
    assert fit.representation(xw, 0, at_init=True).shape == phi.shape
