"""Evaluation metrics of Shalit, Johansson & Sontag (ICML 2017).

Continuous outcomes with known potential outcomes (IHDP, Sec. 5.1):

* :func:`sqrt_pehe` -- ``sqrt(mean((tau_hat - tau)^2))``, the root of the precision in estimation
  of heterogeneous effects (PEHE, Hill 2011);
* :func:`ate_error` -- ``|mean(tau_hat) - mean(tau)|``.

Binary outcomes with a randomized subsample (Jobs, Sec. 5.2), where ``e = 1`` marks the units of
the randomized trial:

* :func:`jobs_att` -- the true ATT from the randomized units,
  ``mean(y | t=1, e=1) - mean(y | t=0, e=1)``;
* :func:`att_error` -- ``|mean(tau_hat | t=1) - ATT|``;
* :func:`policy_risk` -- the risk ``1 - policy value`` of the policy ``pi(x) = 1[tau_hat(x) > lam]``
  estimated on the randomized units;
* :func:`policy_curve` -- the policy risk as a function of the share of units treated.

Model selection from observed data only (supplement C.1):

* :func:`nn_ite` / :func:`nn_pehe` -- the nearest-neighbour surrogate of the PEHE: the observed
  outcome of a unit's nearest neighbour (raw covariates, Euclidean distance) in the opposite arm
  stands in for its counterfactual outcome.
* :func:`r_loss` -- the R-loss of Nie & Wager (2021), from cross-fitted ``m(x) = E[y | x]`` and
  ``e(x) = P(t = 1 | x)``;
* :func:`dr_pseudo_outcome` / :func:`dr_loss` -- the squared distance to the doubly robust (AIPW)
  pseudo-outcome (Kennedy 2023), from cross-fitted ``mu0``, ``mu1`` and ``e``;
* :func:`cross_fit_nuisances` -- those nuisance functions, out of fold.

All functions take array-likes and return Python floats (or arrays / data frames where stated).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree
from . import _validation as V
from .nuisance import (aipw_scores, cross_fit_outcomes, cross_fit_propensity,
                       logistic_propensity_model)

__all__ = [
    "sqrt_pehe",
    "ate_error",
    "jobs_att",
    "att_error",
    "policy_value",
    "policy_risk",
    "policy_curve",
    "nn_ite",
    "nn_pehe",
    "Nuisances",
    "cross_fit_nuisances",
    "r_loss",
    "dr_pseudo_outcome",
    "dr_loss",
    "SELECTION_CRITERIA",
    "selection_scores",
]


def _binary(name: str, a, n: int) -> np.ndarray:
    arr = V.as_vector(name, a, n)
    if not np.isin(arr, (0.0, 1.0)).all():
        raise ValueError(f"{name} must contain only 0 and 1")
    return arr.astype(bool)


# ------------------------------------------------------------------------------------- IHDP
def sqrt_pehe(tau_true, tau_hat) -> float:
    """Root PEHE: ``sqrt(mean((tau_hat - tau_true)^2))`` (the paper's ``sqrt(eps_PEHE)``).

    Parameters
    ----------
    tau_true : array_like, shape (n,)
        True individual effects, e.g. the noiseless ``mu1 - mu0`` of IHDP.
    tau_hat : array_like, shape (n,)
        Estimated effects on the same units.

    Returns
    -------
    float

    Examples
    --------
    >>> sqrt_pehe([1.0, 2.0], [1.0, 4.0])  # sqrt((0 + 4) / 2)
    1.4142135623730951
    """
    tau_true = V.as_vector("tau_true", tau_true)
    tau_hat = V.as_vector("tau_hat", tau_hat, tau_true.shape[0])
    if tau_true.size == 0:
        raise ValueError("no units to evaluate")
    return float(np.sqrt(np.mean((tau_hat - tau_true) ** 2)))


def ate_error(tau_true, tau_hat) -> float:
    """Absolute error of the average effect: ``|mean(tau_hat) - mean(tau_true)|`` (eps_ATE).

    Parameters
    ----------
    tau_true, tau_hat : array_like, shape (n,)
        True and estimated individual effects on the same units.

    Returns
    -------
    float
    """
    tau_true = V.as_vector("tau_true", tau_true)
    tau_hat = V.as_vector("tau_hat", tau_hat, tau_true.shape[0])
    if tau_true.size == 0:
        raise ValueError("no units to evaluate")
    return float(abs(np.mean(tau_hat) - np.mean(tau_true)))


# ------------------------------------------------------------------------------------- Jobs
def jobs_att(y, t, e) -> float:
    """True ATT from the randomized units: ``mean(y | t=1, e=1) - mean(y | t=0, e=1)``.

    In the Jobs data every treated unit belongs to the randomized trial, so the randomized
    controls are a valid comparison group for the treated (Sec. 5.2).

    Parameters
    ----------
    y : array_like, shape (n,)
        Observed outcomes.
    t, e : array_like of 0/1, shape (n,)
        Treatment and randomized-trial indicators.

    Returns
    -------
    float
    """
    y = V.as_vector("y", y)
    t = _binary("t", t, y.shape[0])
    e = _binary("e", e, y.shape[0])
    treated, control = t & e, ~t & e
    if not treated.any() or not control.any():
        raise ValueError("the randomized units (e=1) must include treated and control units")
    return float(y[treated].mean() - y[control].mean())


def att_error(tau_hat, y, t, e) -> float:
    """``|mean(tau_hat | t=1) - ATT|`` with the ATT of :func:`jobs_att` (eps_ATT, Sec. 5.2).

    Parameters
    ----------
    tau_hat : array_like, shape (n,)
        Estimated effects of all evaluated units.
    y, t, e : array_like, shape (n,)
        Observed outcome, treatment and randomized-trial indicator of the same units.

    Returns
    -------
    float
    """
    y = V.as_vector("y", y)
    tau_hat = V.as_vector("tau_hat", tau_hat, y.shape[0])
    t = _binary("t", t, y.shape[0])
    return float(abs(tau_hat[t].mean() - jobs_att(y, t, e)))


def randomized_units(tau_hat, y, t, e):
    """``(tau_hat, y, t)`` of the randomized units (``e == 1``; all when ``e`` is None), checked."""
    y = V.as_vector("y", y)
    n = y.shape[0]
    tau_hat = V.as_vector("tau_hat", tau_hat, n)
    t = _binary("t", t, n)
    keep = np.ones(n, dtype=bool) if e is None else _binary("e", e, n)
    if not (t & keep).any() or not (~t & keep).any():
        raise ValueError("policy risk needs treated and control units among the randomized units")
    return tau_hat[keep], y[keep], t[keep]


def _value(treat: np.ndarray, y: np.ndarray, t: np.ndarray) -> float:
    """Policy value ``p(pi=1) E[y | pi=1, t=1] + p(pi=0) E[y | pi=0, t=0]`` (Sec. 5.2).

    A conditional mean over an empty group (e.g. the policy treats units but none of them was
    treated in the trial) counts as 0, as in the authors' evaluation code.
    """
    p_treat = treat.mean()
    m1 = y[treat & t].mean() if (treat & t).any() else 0.0
    m0 = y[~treat & ~t].mean() if (~treat & ~t).any() else 0.0
    return float(p_treat * m1 + (1.0 - p_treat) * m0)


def policy_value(tau_hat, y, t, e=None, threshold: float = 0.0) -> float:
    """Value of the policy ``pi(x) = 1[tau_hat(x) > threshold]`` on the randomized units.

    ``V(pi) = p(pi=1) * mean(y | pi=1, t=1) + p(pi=0) * mean(y | pi=0, t=0)``, where the shares
    and means are taken over the randomized units (``e = 1``; all units if ``e`` is None). In a
    randomized trial the treated units with ``pi = 1`` are an unbiased sample of what would
    happen under the policy, and likewise for the controls with ``pi = 0``.

    Parameters
    ----------
    tau_hat : array_like, shape (n,)
        Estimated effects (the policy treats units with ``tau_hat > threshold``).
    y : array_like, shape (n,)
        Observed outcomes (for Jobs: employed = 1).
    t : array_like of 0/1, shape (n,)
        Treatment.
    e : array_like of 0/1, shape (n,), optional
        1 for the units of the randomized trial; None treats every unit as randomized.
    threshold : float, default 0.0
        The policy's threshold ``lambda``.

    Returns
    -------
    float
    """
    tau_hat, y, t = randomized_units(tau_hat, y, t, e)
    return _value(tau_hat > threshold, y, t)


def policy_risk(tau_hat, y, t, e=None, threshold: float = 0.0) -> float:
    """Policy risk ``R_pol(pi) = 1 - V(pi)`` of ``pi(x) = 1[tau_hat(x) > threshold]`` (Sec. 5.2).

    See :func:`policy_value` for the estimator of ``V`` on randomized units. An empty group's
    conditional mean counts as 0 (authors' convention), which makes such policies look bad
    rather than undefined.

    Parameters
    ----------
    tau_hat, y, t, e, threshold
        As in :func:`policy_value`.

    Returns
    -------
    float

    Examples
    --------
    >>> # treat the two units with positive effect estimates
    >>> policy_risk([1, 1, -1, -1], y=[1, 0, 1, 1], t=[1, 1, 0, 1])
    0.25
    """
    return 1.0 - policy_value(tau_hat, y, t, e, threshold)


def policy_curve(tau_hat, y, t, e=None, n_points: int = 21) -> pd.DataFrame:
    """Policy risk as a function of the share of (randomized) units treated.

    The threshold is swept over the quantiles of ``tau_hat`` on the randomized units: for a share
    ``s``, the policy treats the ``round(s * m)`` randomized units with the largest estimated
    effects (``m`` = number of randomized units; ties broken by position). ``s = 0`` treats
    nobody, ``s = 1`` everybody.

    Parameters
    ----------
    tau_hat, y, t, e
        As in :func:`policy_value`.
    n_points : int, default 21
        Number of shares, evenly spaced on [0, 1].

    Returns
    -------
    pandas.DataFrame
        Columns ``share_treated`` (the realized share), ``threshold`` (the smallest effect among
        the treated units, ``inf`` when nobody is treated) and ``policy_risk``.
    """
    if int(n_points) < 2:
        raise ValueError("n_points must be at least 2")
    tau_hat, y, t = randomized_units(tau_hat, y, t, e)
    m = tau_hat.shape[0]
    order = np.argsort(-tau_hat, kind="stable")  # largest effect first
    rows = []
    for s in np.linspace(0.0, 1.0, int(n_points)):
        n_treat = int(np.floor(s * m + 0.5))
        treat = np.zeros(m, dtype=bool)
        treat[order[:n_treat]] = True
        thr = float(tau_hat[order[n_treat - 1]]) if n_treat > 0 else float("inf")
        rows.append((n_treat / m, thr, 1.0 - _value(treat, y, t)))
    return pd.DataFrame(rows, columns=["share_treated", "threshold", "policy_risk"])


# ------------------------------------------------------------------ nearest-neighbour surrogate
def nn_ite(x, y, t, *, x_ref=None, y_ref=None, t_ref=None) -> np.ndarray:
    """Nearest-neighbour stand-in for the individual effects (supplement C.1).

    For unit ``i`` let ``j(i)`` be its nearest neighbour (Euclidean distance on the raw
    covariates) among the reference units of the opposite arm. Its observed outcome replaces the
    unobserved counterfactual: ``ite_i = y_i - y_j(i)`` if ``t_i = 1`` and ``y_j(i) - y_i``
    otherwise. Only observed data are used.

    Parameters
    ----------
    x : array_like, shape (n, d)
        Covariates of the units to evaluate (not standardised: raw covariates as in the paper).
    y : array_like, shape (n,)
        Their observed outcomes.
    t : array_like of 0/1, shape (n,)
        Their treatments.
    x_ref, y_ref, t_ref : array_like, optional
        Units in which neighbours are looked up (all three or none). Default: the evaluated units
        themselves.

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    y = V.as_vector("y", y, x.shape[0])
    t = _binary("t", t, x.shape[0])
    refs = (x_ref, y_ref, t_ref)
    if all(r is None for r in refs):
        xr, yr, tr = x, y, t
    elif any(r is None for r in refs):
        raise ValueError("give all of x_ref, y_ref and t_ref, or none of them")
    else:
        xr = np.asarray(x_ref, dtype=float)
        if xr.ndim == 1:
            xr = xr[:, None]
        if xr.shape[1] != x.shape[1]:
            raise ValueError(f"x_ref has {xr.shape[1]} columns, x has {x.shape[1]}")
        yr = V.as_vector("y_ref", y_ref, xr.shape[0])
        tr = _binary("t_ref", t_ref, xr.shape[0])
    if not tr.any() or tr.all():
        raise ValueError("the reference units must contain both arms")
    ite = np.empty(x.shape[0])
    for arm in (True, False):
        own = t == arm
        if not own.any():
            continue
        other = tr != arm
        _, j = cKDTree(xr[other]).query(x[own], k=1)
        y_cf = yr[other][j]
        ite[own] = (y[own] - y_cf) if arm else (y_cf - y[own])
    return ite


def nn_pehe(tau_hat, x, y, t, *, x_ref=None, y_ref=None, t_ref=None) -> float:
    """Nearest-neighbour surrogate of root PEHE (supplement C.1), from observed data only.

    ``sqrt(mean((tau_hat - nn_ite)^2))`` with :func:`nn_ite`. Used for model selection on
    validation units when the true effects are unknown.

    Parameters
    ----------
    tau_hat : array_like, shape (n,)
        Estimated effects of the evaluated units.
    x, y, t, x_ref, y_ref, t_ref
        As in :func:`nn_ite`.

    Returns
    -------
    float
    """
    proxy = nn_ite(x, y, t, x_ref=x_ref, y_ref=y_ref, t_ref=t_ref)
    return sqrt_pehe(proxy, V.as_vector("tau_hat", tau_hat, proxy.shape[0]))


# ------------------------------------------------------------- R-loss and DR pseudo-outcome loss
class Nuisances(NamedTuple):
    """Out-of-fold nuisance predictions for each unit (arrays of shape (n,))."""

    e: np.ndarray  # propensity P(t = 1 | x), clipped to [clip, 1 - clip]
    m: np.ndarray  # outcome regression E[y | x] (both arms)
    mu0: np.ndarray  # E[y | x, t = 0]
    mu1: np.ndarray  # E[y | x, t = 1]


def cross_fit_nuisances(x, y, t, *, n_folds: int = 5, outcome_model=None, propensity_model=None,
                        clip: float = 0.01, random_state=None) -> Nuisances:
    """Cross-fitted nuisance functions for :func:`r_loss` and :func:`dr_loss`.

    The units are split into ``n_folds`` treatment-stratified folds
    (:func:`dowhy_cfr.nuisance.folds`); each fold's predictions come from models fitted on the
    other folds (Chernozhukov et al. 2018), so no unit's own outcome enters its nuisance values.
    Fitted per fold by the nuisance layer: ``e(x) = P(t=1 | x)``
    (:func:`~dowhy_cfr.nuisance.cross_fit_propensity`), ``mu0`` on the controls and ``mu1`` on
    the treated (:func:`~dowhy_cfr.nuisance.cross_fit_outcomes`); ``m(x) = E[y | x]`` is
    ``e mu1 + (1 - e) mu0``.

    Parameters
    ----------
    x : array_like, shape (n, d)
        Covariates.
    y : array_like, shape (n,)
        Observed outcomes.
    t : array_like of 0/1, shape (n,)
        Treatment.
    n_folds : int, default 5
    outcome_model : sklearn regressor, optional
        Default :func:`dowhy_cfr.nuisance.outcome_model` (histogram gradient boosting).
    propensity_model : sklearn classifier with ``predict_proba``, optional
        Default: standardised covariates, then ``LogisticRegression()`` (L2, C = 1).
    clip : float, default 0.01
        The propensity is clipped to ``[clip, 1 - clip]`` (the pseudo-outcome divides by it).
    random_state : int, optional
        Seed of the folds and of the models.

    Returns
    -------
    Nuisances
    """
    x = np.asarray(x, dtype=float)
    y = V.as_vector("y", y, x.shape[0])
    t = _binary("t", t, x.shape[0]).astype(int)
    if min(t.sum(), (1 - t).sum()) < n_folds:
        raise ValueError(f"each arm needs at least n_folds={n_folds} units for cross-fitting")
    seed = 0 if random_state is None else int(random_state)
    model = logistic_propensity_model() if propensity_model is None else propensity_model
    e = cross_fit_propensity(model, x, t, n_arms=2, cv=n_folds, random_state=seed,
                             min_propensity=0.0).e[:, 1]
    mu = cross_fit_outcomes(x, y, t, n_arms=2, cv=n_folds, random_state=seed,
                            model=outcome_model)
    e = np.clip(e, clip, 1 - clip)
    return Nuisances(e, e * mu[:, 1] + (1 - e) * mu[:, 0], mu[:, 0], mu[:, 1])


def r_loss(tau_hat, y, t, m, e) -> float:
    """R-loss of Nie & Wager (2021): ``mean(((y - m(x)) - (t - e(x)) tau_hat(x))^2)``.

    Robinson's decomposition ``y - m(x) = (t - e(x)) tau(x) + eps`` with ``E[eps | x, t] = 0``
    makes the true ``tau`` the minimiser of the expected loss over all functions, for any
    ``m`` and ``e`` equal to the true ``E[y | x]`` and ``P(t=1 | x)``; with cross-fitted
    estimates the minimiser is close to ``tau`` (quasi-oracle). Lower is better. The loss keeps
    the noise variance, so only differences between candidates on the same units are
    meaningful.

    Parameters
    ----------
    tau_hat : array_like, shape (n,)
        Candidate effects on the evaluated units.
    y, t : array_like, shape (n,)
        Observed outcomes and 0/1 treatments of those units.
    m, e : array_like, shape (n,)
        Out-of-fold ``E[y | x]`` and propensity (:func:`cross_fit_nuisances`).

    Returns
    -------
    float

    References
    ----------
    Nie, X. and Wager, S. (2021). Quasi-oracle estimation of heterogeneous treatment effects.
    Biometrika 108(2), 299-319.
    """
    y = V.as_vector("y", y)
    n = y.shape[0]
    tau_hat, m, e = (V.as_vector(k, v, n) for k, v in (("tau_hat", tau_hat), ("m", m), ("e", e)))
    t = _binary("t", t, n)
    return float(np.mean(((y - m) - (t - e) * tau_hat) ** 2))


def dr_pseudo_outcome(y, t, e, mu0, mu1) -> np.ndarray:
    """The doubly robust (AIPW) pseudo-outcome of each unit.

    ``phi = mu1(x) - mu0(x) + t (y - mu1(x)) / e(x) - (1 - t) (y - mu0(x)) / (1 - e(x))``.
    ``E[phi | x] = tau(x)`` when either the outcome models or the propensity are correct
    (Robins, Rotnitzky & Zhao 1994; the DR-learner of Kennedy 2023 regresses it on ``x``).

    Parameters
    ----------
    y, t : array_like, shape (n,)
        Observed outcomes and 0/1 treatments.
    e, mu0, mu1 : array_like, shape (n,)
        Out-of-fold propensity and arm-wise outcome regressions (:func:`cross_fit_nuisances`).

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    y = V.as_vector("y", y)
    n = y.shape[0]
    e, mu0, mu1 = (V.as_vector(k, v, n) for k, v in (("e", e), ("mu0", mu0), ("mu1", mu1)))
    t = _binary("t", t, n).astype(int)
    if not ((e > 0) & (e < 1)).all():
        raise ValueError("e must lie strictly between 0 and 1; clip the propensity")
    psi = aipw_scores(y, t, np.column_stack([mu0, mu1]), np.column_stack([1 - e, e]))
    return psi[:, 1] - psi[:, 0]


def dr_loss(tau_hat, y, t, e, mu0, mu1) -> float:
    """DR pseudo-outcome loss: ``mean((phi_DR - tau_hat(x))^2)`` with :func:`dr_pseudo_outcome`.

    Since ``E[phi | x] = tau(x)``, the expected loss is ``E[(tau_hat - tau)^2]`` (the PEHE) plus
    a term that does not depend on ``tau_hat`` (up to the nuisance errors): differences between
    candidates on the same units estimate differences of their PEHE (Kennedy 2023; Saito &
    Yasui 2020 compare such criteria). Lower is better.

    Parameters
    ----------
    tau_hat : array_like, shape (n,)
        Candidate effects on the evaluated units.
    y, t, e, mu0, mu1
        As in :func:`dr_pseudo_outcome`.

    Returns
    -------
    float

    References
    ----------
    Kennedy, E. H. (2023). Towards optimal doubly robust estimation of heterogeneous causal
    effects. Electronic Journal of Statistics 17(2), 3008-3049.
    """
    phi = dr_pseudo_outcome(y, t, e, mu0, mu1)
    return float(np.mean((phi - V.as_vector("tau_hat", tau_hat, phi.shape[0])) ** 2))


#: The criteria of :func:`selection_scores`, lower is better.
SELECTION_CRITERIA = ("nn_pehe", "r_loss", "dr_loss")


def selection_scores(tau_hat, units, x, y, t, nuisances: Nuisances) -> dict:
    """The three selection criteria of a candidate's effects, on its validation ``units``.

    ``nn_pehe`` (:func:`nn_pehe`, neighbours among all rows of ``x``), ``r_loss``
    (:func:`r_loss`) and ``dr_loss`` (:func:`dr_loss`), each evaluated on the rows ``units``
    only. None needs counterfactual outcomes.

    Parameters
    ----------
    tau_hat : array_like, shape (n,)
        The candidate's effects on all rows (only ``units`` are scored).
    units : array_like of int
        Rows to score (the candidate's validation units).
    x, y, t : array_like
        Raw covariates (n, d), outcomes and 0/1 treatments of all rows.
    nuisances : Nuisances
        Out-of-fold nuisance values of all rows (:func:`cross_fit_nuisances`).

    Returns
    -------
    dict
        ``{"nn_pehe": float, "r_loss": float, "dr_loss": float}``.
    """
    u = np.asarray(units)
    x = np.asarray(x, dtype=float)
    y, t, tau_hat = np.asarray(y, dtype=float), np.asarray(t), np.asarray(tau_hat, dtype=float)
    e, m, mu0, mu1 = (np.asarray(v)[u] for v in nuisances)
    return {"nn_pehe": nn_pehe(tau_hat[u], x[u], y[u], t[u], x_ref=x, y_ref=y, t_ref=t),
            "r_loss": r_loss(tau_hat[u], y[u], t[u], m, e),
            "dr_loss": dr_loss(tau_hat[u], y[u], t[u], e, mu0, mu1)}
