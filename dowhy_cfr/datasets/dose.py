r"""Continuous-treatment (dose) benchmark designs with known dose-response curves.

Two designs of the VCNet paper (Nie, Ye, Liu & Nicolae, ICLR 2021, Sec. 5.1), used again by
ADMIT (Wang et al., NeurIPS 2022), as the authors' published code generates them
(lushleaf/varying-coefficient-net-with-functional-tr: ``data/simu1.py`` and
``ihdp_generate_data.py``, read, not copied; the constants below were checked against it):

``vcnet``
    :math:`x \sim U[0, 1]^6`; :math:`\tilde t = \frac{10 \sin(\max(x_1, x_2, x_3)) +
    \max(x_3, x_4, x_5)^3}{1 + (x_1 + x_5)^2} + \sin(0.5 x_3)(1 + e^{x_4 - 0.5 x_3}) + x_3^2 +
    2 \sin(x_4) + 2 x_5 - 6.5 + N(0, 0.5^2)`, :math:`t = 1 / (1 + e^{-\tilde t})`;
    :math:`y = \cos(2\pi(t - 0.5))\,\big(t^2 + \frac{4 \max(x_1, x_6)^3}{1 + 2 x_3^2}
    \sin(x_4)\big) + N(0, 0.5^2)`. 500 training and 200 test units, as in the paper; the
    true average curve is the mean of :math:`\mu(x, t)` over 100,000 draws of :math:`x`.
``ihdp``
    the 747 units' 25 IHDP covariates with the six continuous ones in their own units, as the
    authors' csv holds them (EconML's ``sim.csv``, :func:`dowhy_cfr.datasets.ihdp_covariates`
    with ``standardized=False``; not the standardised columns of the npci files), each
    scaled as the authors' code does, :math:`(x - \min x) / \max x`; with :math:`\bar x_{S_1}`
    the mean of the ten columns 4 and 7-15 (0-based 3, 6-14), :math:`\bar x_{S_2}` of columns
    16-25, and :math:`c` the mean of :math:`\bar x_{S_1}` over the units (the code centres both
    groups at it): :math:`\tilde t = \frac{x_1}{1 + x_2} + \frac{\max(x_3, x_5, x_6)}{0.2 +
    \min(x_3, x_5, x_6)} + \tanh(5(\bar x_{S_2} - c)) - 2 + N(0, 0.5^2)`, :math:`t = 1 / (1 +
    e^{-2 \tilde t})`; :math:`y = \frac{\sin(3\pi t)}{1.2 - t}\big(1.5 \tanh(5(\bar x_{S_1} -
    c)) + \frac{0.5\, e^{0.2(x_1 - x_6)}}{0.1 + \min(x_2, x_3, x_5)}\big) + N(0, 0.5^2)` (the
    code's active setting). 471 units train, the other 276 test (the paper's split, at
    random); the true average curve is the mean of :math:`\mu(x_i, t)` over all 747 units.

The papers score the average curve on the test units' own doses, with the truth averaged over
the test units (the authors' ``utils/eval.py``); here on a fixed grid,
the doses between the 5th and the 95th percentile of the design's dose
distribution (the papers integrate over the whole range; the tails, with few units, are where
every method extrapolates, and the estimators here refuse doses beyond the training range).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .ihdp import ihdp_covariates

__all__ = ["DOSE_DESIGNS", "DoseData", "simulate_dose", "dose_outcome", "dose_logit"]

#: The designs of :func:`simulate_dose`.
DOSE_DESIGNS = ("vcnet", "ihdp")
_GRID_POINTS = 33
_NOISE = 0.5
#: The sd of the dose logit's noise, on the scale of :func:`dose_logit` (IHDP's code adds
#: N(0, 0.5^2) before doubling the logit).
_DOSE_NOISE = {"vcnet": 0.5, "ihdp": 1.0}
_S1 = [3, *range(6, 15)]
_IHDP_TRAIN = 471


@dataclass(frozen=True)
class DoseData:
    """One simulated data set of a dose design.

    ``x``, ``t``, ``y``: training covariates, doses and outcomes; ``x_test``: test covariates;
    ``grid`` (G,): the scoring doses; ``adrf`` (G,): the true average dose-response on the
    grid (population); ``curves_test`` (m, G): the test units' true curves
    :math:`\\mu(x, t)`; ``t_ref``: the reference dose of the level-free effect curves (the
    median dose)."""

    design: str
    x: np.ndarray
    t: np.ndarray
    y: np.ndarray
    x_test: np.ndarray
    grid: np.ndarray
    adrf: np.ndarray
    curves_test: np.ndarray
    t_ref: float

    def outcome(self, t, x) -> np.ndarray:
        """The design's noiseless outcome :math:`\\mu(x, t)` (broadcast over rows of x)."""
        return dose_outcome(self.design, t, x)


def dose_logit(design: str, x: np.ndarray) -> np.ndarray:
    """The noiseless logit of the dose, :math:`\\tilde t(x)` (module docstring)."""
    if design == "vcnet":
        x1, x2, x3, x4, x5, _ = x.T
        peak = np.maximum.reduce([x3, x4, x5])
        return ((10 * np.sin(np.maximum.reduce([x1, x2, x3])) + peak ** 3) / (1 + (x1 + x5) ** 2) + np.sin(0.5 * x3) * (1 + np.exp(x4 - 0.5 * x3))
                + x3 ** 2 + 2 * np.sin(x4) + 2 * x5 - 6.5)
    c = _ihdp_centre()
    hi = np.maximum.reduce([x[:, 2], x[:, 4], x[:, 5]])
    lo = np.minimum.reduce([x[:, 2], x[:, 4], x[:, 5]])
    return 2 * (x[:, 0] / (1 + x[:, 1]) + hi / (0.2 + lo)
                + np.tanh(5 * (x[:, 15:25].mean(1) - c)) - 2)


def dose_outcome(design: str, t, x: np.ndarray) -> np.ndarray:
    """The noiseless outcome :math:`\\mu(x, t)` of a design (module docstring)."""
    t = np.asarray(t, dtype=float)
    if design == "vcnet":
        return np.cos(2 * np.pi * (t - 0.5)) * (
            t ** 2 + 4 * np.maximum(x[:, 0], x[:, 5]) ** 3 / (1 + 2 * x[:, 2] ** 2)
            * np.sin(x[:, 3]))
    c = _ihdp_centre()
    low = np.minimum.reduce([x[:, 1], x[:, 2], x[:, 4]])
    return np.sin(3 * np.pi * t) / (1.2 - t) * (
        1.5 * np.tanh(5 * (x[:, _S1].mean(1) - c))
        + 0.5 * np.exp(0.2 * (x[:, 0] - x[:, 5])) / (0.1 + low))


@lru_cache(maxsize=1)
def _ihdp_x() -> np.ndarray:
    x = ihdp_covariates(standardized=False)  # the authors' csv: covariates in their own units
    top = x.max(0)
    return (x - x.min(0)) / np.where(top != 0, top, 1.0)


@lru_cache(maxsize=1)
def _ihdp_centre() -> float:
    return float(_ihdp_x()[:, _S1].mean(1).mean())


@lru_cache(maxsize=2)
def _population(design: str):
    """The population of covariates the true average curve averages over, the scoring grid
    (5th-95th percentile of the dose) and the true curve on it."""
    rng = np.random.default_rng(20210507)
    x = rng.uniform(size=(100_000, 6)) if design == "vcnet" else _ihdp_x()
    reps = 1 if design == "vcnet" else 200  # IHDP: 747 units, 200 draws of the dose noise each
    logits = np.concatenate([dose_logit(design, x) + rng.normal(scale=_DOSE_NOISE[design],
                                                                size=len(x))
                             for _ in range(reps)])
    t = 1 / (1 + np.exp(-logits))
    lo, mid, hi = np.quantile(t, [0.05, 0.5, 0.95])
    grid = np.linspace(lo, hi, _GRID_POINTS)
    adrf = np.array([dose_outcome(design, np.full(len(x), g), x).mean() for g in grid])
    return grid, adrf, float(mid)


def simulate_dose(design: str, seed: int = 0, *, n_train: int = 500,
                  n_test: int = 200) -> DoseData:
    """One data set of ``design`` (:data:`DOSE_DESIGNS`; module docstring), seeded.

    ``vcnet``: ``n_train`` and ``n_test`` fresh units; ``ihdp``: the 747 units split 471 / 276
    at random, as the authors' code (``n_train``/``n_test`` are ignored)."""
    if design not in DOSE_DESIGNS:
        raise ValueError(f"design={design!r} is unknown; choose from {DOSE_DESIGNS}")
    rng = np.random.default_rng([seed, 47])
    if design == "vcnet":
        x_all = rng.uniform(size=(n_train + n_test, 6))
        train = np.arange(n_train)
    else:
        x_all = _ihdp_x()
        train = np.sort(rng.permutation(len(x_all))[:_IHDP_TRAIN])
    test = np.setdiff1d(np.arange(len(x_all)), train)
    logit = dose_logit(design, x_all[train]) + rng.normal(scale=_DOSE_NOISE[design],
                                                          size=len(train))
    t = 1 / (1 + np.exp(-logit))
    y = dose_outcome(design, t, x_all[train]) + rng.normal(scale=_NOISE, size=len(train))
    grid, adrf, t_ref = _population(design)
    x_test = x_all[test]
    curves = np.stack([dose_outcome(design, np.full(len(x_test), g), x_test) for g in grid], 1)
    return DoseData(design, x_all[train], t, y, x_test, grid, adrf, curves, t_ref)
