"""Options must change the fitted network (or the doubly robust stage) in the expected direction.

Each test fits the default and the option with the same seed and data and checks the difference
through the public API. An option that was silently ignored (e.g. dropped on its way to the
core's configuration) gives identical fits and fails here. Margins were measured on data/model
seeds 0-3 (the tests use seed 0); the figures are next to each assertion.
"""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from dowhy_cfr import CFR
from helpers import TINY, make_confounded

#: the network alone: no doubly robust stage (its propensity cross-fitting costs time here)
PLAIN = {**TINY, "debias": None}


@pytest.fixture(scope="module")
def data():
    return make_confounded(n=300, seed=0)


def _moved(est, X):
    """Mean distance of the trained representation from the same network's at initialisation."""
    return float(np.linalg.norm(est.transform(X) - est.representation_at_init(X), axis=1).mean())


def test_lr_decay_slows_the_training(data):
    """lr_decay=0.3 every 10 steps: the learning rate is lr * 0.3^6 at step 60, and the
    representation moves less from its initialisation. Measured mean ||Phi - Phi_init||: 1.15 vs
    1.37 without decay (ratio 0.84; at the former learning rate 1e-3 0.72, seeds 0-3 0.72-0.85)."""
    X, T, Y, _ = data
    params = {**PLAIN, "lr_decay_steps": 10}
    plain = CFR(**{**params, "lr_decay": 1.0}).fit(Y, T, X=X)
    decayed = CFR(**{**params, "lr_decay": 0.3}).fit(Y, T, X=X)
    lr = decayed.history_.groupby("step")["learning_rate"].first()
    base = decayed.config_.learning_rate  # "auto" resolved: 2e-3 at these batches
    assert base == pytest.approx(2e-3)
    assert lr.iloc[-1] == pytest.approx(base * 0.3 ** 6)
    assert plain.history_["learning_rate"].eq(base).all()
    assert _moved(decayed, X) < 0.9 * _moved(plain, X)
    np.testing.assert_array_equal(  # same seed: the same network at initialisation
        decayed.representation_at_init(X[:5]), plain.representation_at_init(X[:5]))


def _unbalanced(n=400, seed=0):
    """About 17% treated, a nonlinear treated outcome (the treated head has work to do)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    T = rng.binomial(1, 1 / (1 + np.exp(-(X[:, 0] - 1.8))))
    Y = X[:, 0] + np.sin(2 * X[:, 2]) + T * (1 + X[:, 1] ** 2) + rng.normal(scale=0.3, size=n)
    return X, T, Y


def _factual_mse_ratio(est, X, T, Y):
    """Mean squared factual error of the treated units over that of the control units."""
    mu0, mu1 = est.predict_outcomes(X)
    return np.mean((Y - mu1)[T == 1] ** 2) / np.mean((Y - mu0)[T == 0] ** 2)


def test_reweight_sample_false_gives_the_minority_arm_less_weight():
    """Algorithm 1's weights w_i = t_i / (2u) + (1 - t_i) / (2(1 - u)) give the 18% treated units
    the weight of half the data; without them the treated head fits its units worse relative to
    the control head. Measured treated / control factual MSE after 150 steps: 3.42 with the
    weights, 4.67 without (seeds 0-3: 1.84-3.42 vs 3.57-4.67, ratio of the two 1.25-1.94)."""
    X, T, Y = _unbalanced()
    assert 0.1 < T.mean() < 0.25
    params = {**PLAIN, "n_iter": 150}
    weighted = CFR(**params).fit(Y, T, X=X)
    unweighted = CFR(**{**params, "reweight_sample": False}).fit(Y, T, X=X)
    assert _factual_mse_ratio(unweighted, X, T, Y) > 1.1 * _factual_mse_ratio(weighted, X, T, Y)


def test_normalization_none_keeps_the_representations_length(data):
    """"divide" puts every Phi(x) on the unit sphere; "none" does not (measured ||Phi|| 0.40-1.05,
    mean 0.70, after 60 steps at the default learning rate), and the effects differ."""
    X, T, Y, _ = data
    divided = CFR(**PLAIN).fit(Y, T, X=X)
    plain = CFR(**{**PLAIN, "normalization": "none"}).fit(Y, T, X=X)
    np.testing.assert_allclose(np.linalg.norm(divided.transform(X), axis=1), 1.0, rtol=1e-5)
    norms = np.linalg.norm(plain.transform(X), axis=1)
    assert np.abs(norms - 1).mean() > 0.15 and norms.std() > 0.05
    assert np.abs(plain.effect(X) - divided.effect(X)).max() > 1e-3


def test_rep_weight_decay_shrinks_the_representation(data):
    """With the representation's weights penalised too (weight_decay 1.0, unnormalised Phi),
    Phi(x) varies less across units: measured sum over dimensions of sd(Phi) 0.0044 vs 0.0075
    without (ratio 0.59; seeds 0-2: 0.36-0.59)."""
    X, T, Y, _ = data
    params = {**PLAIN, "normalization": "none", "weight_decay": 1.0}
    heads_only = CFR(**params).fit(Y, T, X=X)
    both = CFR(**{**params, "rep_weight_decay": True}).fit(Y, T, X=X)
    spread = {k: e.transform(X).std(0).sum() for k, e in (("heads", heads_only), ("both", both))}
    assert spread["both"] < 0.8 * spread["heads"]


class _TruePropensity(ClassifierMixin, BaseEstimator):
    """The true propensity of make_confounded, sigmoid(1.5 x0), whatever it is fitted on."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, X):
        p = 1 / (1 + np.exp(-1.5 * np.asarray(X)[:, 0]))
        return np.c_[1 - p, p]

    def predict(self, X):
        return self.predict_proba(X).argmax(1)


def test_model_propensity_is_the_one_used(data):
    """A given classifier replaces the default's selection, and its probabilities (clipped at
    min_propensity) are the ones in the AIPW average (weights normalised per arm): the ATE
    computed by hand from the heads' predictions (in-sample, cross_fit=False) and
    sigmoid(1.5 x0) matches. The network is the
    default's (the same plug-in); the doubly robust ATE is not."""
    X, T, Y, _ = data
    params = {**TINY, "cross_fit": False}
    default = CFR(**params).fit(Y, T, X=X)
    given = CFR(**{**params, "model_propensity": _TruePropensity()}).fit(Y, T, X=X)
    assert given.propensity_model_ == "_TruePropensity"
    assert default.propensity_model_ in ("logistic", "boosting")
    assert given.average_effect(debiased=False).estimate == pytest.approx(
        default.average_effect(debiased=False).estimate, rel=1e-12)
    mu0, mu1 = CFR(**PLAIN).fit(Y, T, X=X).predict_outcomes(X)  # the same network, unshifted
    e1 = np.clip(1 / (1 + np.exp(-1.5 * X[:, 0])), 0.05, 1)
    e0 = np.clip(1 - 1 / (1 + np.exp(-1.5 * X[:, 0])), 0.05, 1)
    w1, w0 = T / e1, (1 - T) / e0  # each arm's weights normalised (Hajek's form)
    aipw = (np.mean(mu1 - mu0) + np.sum(w1 * (Y - mu1)) / w1.sum()
            - np.sum(w0 * (Y - mu0)) / w0.sum())
    assert given.ate() == pytest.approx(aipw, rel=1e-9)
    assert abs(given.ate() - default.ate()) > 1e-3
