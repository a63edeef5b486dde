"""Helpers shared by the tests (imported as ``from helpers import ...``; pytest puts tests/ on
the path). Fixtures live in conftest.py."""

import numpy as np
import torch

# Tiny networks and few steps: tests check behaviour, benchmarks check accuracy and speed.
TINY = dict(
    n_rep_layers=2,
    rep_dim=16,
    n_head_layers=1,
    head_dim=16,
    n_iter=60,
    eval_every=20,
    batch_size=32,
    verbose=0,
    random_state=0,
    n_ensemble=1,  # one network: the tests check behaviour; ensembles are tested where named
)


def make_confounded(n=400, d=5, seed=0, effect_scale=1.0):
    """Confounded design with known tau(x) = effect_scale * (1 + x1): treatment depends on x0,
    the outcome on x0 and x2 (x0 is a confounder, x1 an effect modifier)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    p = 1.0 / (1.0 + np.exp(-1.5 * X[:, 0]))
    T = rng.binomial(1, p)
    tau = effect_scale * (1.0 + X[:, 1])
    mu0 = 2.0 * X[:, 0] + X[:, 2]
    Y = mu0 + T * tau + rng.normal(scale=0.5, size=n)
    return X, T, Y, tau


# Small stacked networks for the core's tests (``train_cfr``); tests override n_iter and the rest.
CORE_SMALL = dict(n_rep_layers=2, rep_dim=16, n_head_layers=1, head_dim=16, batch_size=32,
                  n_iter=60, eval_every=20, n_ensemble=1)


def core_data(n=200, seed=0):
    """Tensors for ``train_cfr``: x (n, 4), confounded 0/1 t, y with effect 1 + x1, and a random
    140 / n - 140 split into training and validation rows."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    t = (torch.rand(n, generator=g) < torch.sigmoid(x[:, 0])).long()
    y = x[:, 0] + t * (1 + x[:, 1]) + 0.1 * torch.randn(n, generator=g)
    perm = torch.randperm(n, generator=g)
    return x, t, y, perm[:140], perm[140:]


def sqrt_pehe(tau_hat, tau) -> float:
    """sqrt(PEHE): the root mean squared error of unit-level effects."""
    return float(np.sqrt(np.mean((np.asarray(tau_hat) - np.asarray(tau)) ** 2)))


def slope(x, tau_hat) -> float:
    """Least-squares slope of ``tau_hat`` on ``x``: 1 for effects 1 + x1 recovered, 0.5 for a fit
    with half the true slope, ~0 for an untrained network."""
    return float(np.polyfit(np.asarray(x, dtype=float), np.asarray(tau_hat, dtype=float), 1)[0])


def heads_effect(est, X_fit, X=None, *, T0=0, T1=1):
    """The heads' own effects ``h_T1 - h_T0`` at ``X`` (default ``X_fit``), without the doubly
    robust shift: with ``debias="aipw"`` every effect is shifted by one constant (the AIPW ATE
    minus the plug-in mean over the fitted units ``X_fit``), which makes ``ate()`` right whatever
    the heads learned; tests of the network itself take it off again. From the heads' potential
    outcomes (``predict_outcomes``; ``effect`` also blends in the pseudo-outcome regression)."""
    shift = (est.average_effect(T0=T0, T1=T1).estimate
             - est.average_effect(T0=T0, T1=T1, debiased=False).estimate)
    cats = list(est.fitted_.encoding.categories)
    outs = est.predict_outcomes(X_fit if X is None else X)
    return outs[cats.index(T1)] - outs[cats.index(T0)] - shift
