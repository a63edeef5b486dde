"""Simulated designs with known effects: Nie & Wager (2021) setups A-D and a design E with
separate confounders.

Nie & Wager, "Quasi-oracle estimation of heterogeneous treatment effects", Biometrika 108(2),
2021, Section 6. Every design draws covariates ``X``, a baseline ``b(x)``, a propensity ``e(x)``
and an effect ``tau(x)``, then

    T ~ Bernoulli(e(x)),    Y = b(x) + (T - 0.5) tau(x) + sigma * eps,    eps ~ N(0, 1),

so ``E[Y(1) - Y(0) | x] = tau(x)``. With ``trim_eta(p) = min(max(p, eta), 1 - eta)``:

``A`` (difficult baseline, simple effect)
    X ~ U[0, 1]^d; b = sin(pi x1 x2) + 2 (x3 - 0.5)^2 + x4 + 0.5 x5;
    e = trim_0.1(sin(pi x1 x2)); tau = (x1 + x2) / 2.
``B`` (randomized trial)
    X ~ N(0, I_d); b = max(x1 + x2, x3, 0) + max(x4 + x5, 0); e = 0.5;
    tau = x1 + log(1 + exp(x2)).
``C`` (strong confounding, constant effect)
    X ~ N(0, I_d); b = 2 log(1 + exp(x1 + x2 + x3)); e = 1 / (1 + exp(x2 + x3)); tau = 1.
``D`` (unrelated treated and control arms)
    X ~ N(0, I_d); b = (max(x1 + x2 + x3, 0) + max(x4 + x5, 0)) / 2;
    e = 1 / (1 + exp(-x1) + exp(-x2)); tau = max(x1 + x2 + x3, 0) - max(x4 + x5, 0).
``E`` (this package's design: confounders ``W`` separate from effect modifiers ``X``)
    X ~ N(0, I_{d_x}) and W ~ N(0, I_{d_w}) independent, ``d_x = d // 2``, ``d_w = d - d_x``;
    b = 2 log(1 + exp(w1 + w2)) + max(w3, 0); e = trim_0.1(1 / (1 + exp(-(w1 + w2))));
    tau = x1 + log(1 + exp(x2)). ``W`` drives both T and Y but not the effect; ``X`` only the
    effect. Because X and W are independent, ``E[Y(1) - Y(0) | X = x] = tau(x)``: an estimator
    fitted as ``fit(Y, T, X=X, W=W)`` targets exactly ``tau``. Ignoring ``W`` biases the estimate.

The paper runs d in {6, 12} and sigma in {0.5, 1, 2, 4}; the defaults here are d = 6, sigma = 1.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["DESIGNS", "SyntheticData", "simulate", "design_functions", "trim", "population_ate"]

#: Design names, in order.
DESIGNS = ("A", "B", "C", "D", "E")
_MIN_D = {"A": 5, "B": 5, "C": 3, "D": 5, "E": 6}


class SyntheticData(NamedTuple):
    """One simulated data set. ``w`` is None except for design E."""

    x: np.ndarray  # (n, d_x) effect modifiers (designs A-D: all covariates)
    w: np.ndarray | None  # (n, d_w) separate confounders (design E only)
    t: np.ndarray  # (n,) 0/1 treatment, int
    y: np.ndarray  # (n,) observed outcome
    tau: np.ndarray  # (n,) true effect tau(x)
    e: np.ndarray  # (n,) true propensity
    b: np.ndarray  # (n,) true baseline b(x)
    design: str


def trim(p, eta: float = 0.1) -> np.ndarray:
    """``trim_eta(p) = min(max(p, eta), 1 - eta)``."""
    return np.clip(np.asarray(p, dtype=float), eta, 1.0 - eta)


def _softplus(z):
    return np.logaddexp(0.0, z)


def _relu(z):
    return np.maximum(z, 0.0)


def _design_a(x, w):
    s = np.sin(np.pi * x[:, 0] * x[:, 1])
    b = s + 2.0 * (x[:, 2] - 0.5) ** 2 + x[:, 3] + 0.5 * x[:, 4]
    return b, trim(s, 0.1), (x[:, 0] + x[:, 1]) / 2.0


def _design_b(x, w):
    b = np.maximum.reduce([x[:, 0] + x[:, 1], x[:, 2], np.zeros(len(x))]) + _relu(x[:, 3] + x[:, 4])
    return b, np.full(len(x), 0.5), x[:, 0] + _softplus(x[:, 1])


def _design_c(x, w):
    b = 2.0 * _softplus(x[:, 0] + x[:, 1] + x[:, 2])
    e = 1.0 / (1.0 + np.exp(x[:, 1] + x[:, 2]))
    return b, e, np.ones(len(x))


def _design_d(x, w):
    u, v = _relu(x[:, 0] + x[:, 1] + x[:, 2]), _relu(x[:, 3] + x[:, 4])
    e = 1.0 / (1.0 + np.exp(-x[:, 0]) + np.exp(-x[:, 1]))
    return (u + v) / 2.0, e, u - v


def _design_e(x, w):
    b = 2.0 * _softplus(w[:, 0] + w[:, 1]) + _relu(w[:, 2])
    e = trim(1.0 / (1.0 + np.exp(-(w[:, 0] + w[:, 1]))), 0.1)
    return b, e, x[:, 0] + _softplus(x[:, 1])


_FUNCTIONS = {"A": _design_a, "B": _design_b, "C": _design_c, "D": _design_d, "E": _design_e}


def _softplus_normal_mean(scale: float = 1.0) -> float:
    """``E[log(1 + exp(s Z))]``, Z ~ N(0, 1), by 80-point Gauss-Hermite quadrature."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    return float(np.sum(weights * _softplus(scale * nodes)) / np.sqrt(2.0 * np.pi))


def population_ate(design: str) -> float:
    """The population average effect ``E[tau(X)]`` of a design (any ``d``, ``sigma``).

    A: ``E[(x1 + x2) / 2] = 1/2`` (uniform covariates); B and E: ``E[x1 + softplus(x2)] =
    E[softplus(Z)]`` (quadrature); C: 1; D: ``E[max(Z_3, 0)] - E[max(Z_2, 0)]`` with
    ``Z_k ~ N(0, k)``, i.e. ``(sqrt(3) - sqrt(2)) / sqrt(2 pi)``. What an interval of the ATE
    should cover, as opposed to the mean of ``tau`` over the sampled units.
    """
    design = _check_design(design)
    if design == "A":
        return 0.5
    if design == "C":
        return 1.0
    if design == "D":
        return float((np.sqrt(3.0) - np.sqrt(2.0)) / np.sqrt(2.0 * np.pi))
    return _softplus_normal_mean()


def design_functions(design: str):
    """``f(x, w) -> (b, e, tau)`` of a design (``w`` is ignored except by design E)."""
    return _FUNCTIONS[_check_design(design)]


def _check_design(design: str) -> str:
    key = str(design).strip().upper()
    if key not in _FUNCTIONS:
        raise ValueError(f"design={design!r} is unknown: choose from {', '.join(DESIGNS)}")
    return key


def _covariates(design: str, n: int, d: int, rng) -> tuple[np.ndarray, np.ndarray | None]:
    if design == "A":
        return rng.uniform(0.0, 1.0, size=(n, d)), None
    if design == "E":
        d_x = d // 2
        return rng.standard_normal((n, d_x)), rng.standard_normal((n, d - d_x))
    return rng.standard_normal((n, d)), None


def simulate(design: str, n: int, *, d: int = 6, sigma: float = 1.0,
             random_state=None) -> SyntheticData:
    """Draw ``n`` units from a design (see the module docstring).

    Parameters
    ----------
    design : {"A", "B", "C", "D", "E"}
    n : int
        Number of units (>= 1).
    d : int, default 6
        Number of covariates (A-D: at least 5, 3 for C; E: split into ``d // 2`` effect modifiers
        X and ``d - d // 2`` confounders W, at least 6 in all).
    sigma : float, default 1.0
        Noise standard deviation.
    random_state : int, numpy Generator or None
        Seed or generator; a fixed seed gives identical data.

    Returns
    -------
    SyntheticData
    """
    design = _check_design(design)
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n={n!r} is invalid: use a positive integer")
    min_d = _MIN_D[design]
    if int(d) != d or d < min_d:
        raise ValueError(f"d={d!r} is too small for design {design}: use d >= {min_d}")
    if not sigma >= 0:
        raise ValueError(f"sigma={sigma!r} is invalid: use a number >= 0")
    rng = np.random.default_rng(random_state)
    x, w = _covariates(design, int(n), int(d), rng)
    b, e, tau = _FUNCTIONS[design](x, w)
    t = (rng.uniform(size=int(n)) < e).astype(int)
    y = b + (t - 0.5) * tau + sigma * rng.standard_normal(int(n))
    return SyntheticData(x=x, w=w, t=t, y=y, tau=tau, e=e, b=b, design=design)
