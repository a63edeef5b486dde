r"""The doubly robust average dose-response function (ADRF) of a continuous treatment, with
pointwise intervals (Kennedy, Ma, McHugh & Small, JRSS-B 2017; Colangelo & Lee 2020).

For a continuous treatment (dose) :math:`A` the average dose-response is
:math:`\theta(a) = E[Y(a)] = \int \mu(x, a)\, dP(x)`, identified under no unmeasured
confounding and positivity of the conditional dose density :math:`\pi(a \mid x)`. With an
outcome model :math:`\hat\mu(x, a)` (the network's heads, out of fold) and a generalised
propensity score :math:`\hat\pi(a \mid x)` (:func:`dowhy_cfr.nuisance.cross_fit_gps`), Kennedy et
al. (2017, Eq. 6) regress the pseudo-outcome

.. math::

    \xi_i = \rho_i + \hat m(a_i), \qquad
    \rho_i = \frac{\hat\varpi(a_i)}{\hat\pi(a_i \mid x_i)}\,\big(y_i - \hat\mu(x_i, a_i)\big),
    \qquad \hat m(a) = \frac1n \sum_j \hat\mu(x_j, a),

on the dose by a local linear kernel smoother (:math:`\hat\varpi` the marginal dose density):
:math:`E[\xi \mid A = a] = \theta(a)` if either the outcome model or the GPS is correct. Here the
plug-in part :math:`\hat m` is not smoothed; only the weighted residuals are,

.. math:: \hat\theta(a) = \hat m(a) + \hat\beta_0(a), \qquad
    (\hat\beta_0, \hat\beta_1)(a) = \arg\min_\beta \sum_i K_h(a_i - a)\,
    \big(\rho_i - \beta_0 - \beta_1 (a_i - a)/h\big)^2,

the form of Colangelo & Lee's (2020) double debiased estimator with a local linear smoother in
place of their kernel average. :math:`E[\rho \mid A = a] = \theta(a) - \hat m(a)` is the bias of
the network's average curve, which is smooth where the network is good, whereas smoothing
:math:`\hat m(a_i)` as well carries the curvature of :math:`\theta` itself into the smoothing
bias: on the VCNet design (60 data sets, n = 500) smoothing :math:`\xi` at its cross-validated
bandwidth gave the average curve a mean squared error of 0.0051, smoothing :math:`\rho` 0.0044
(the plug-in's 0.0044; ``docs/dose.md``). :math:`h` minimises the leave-one-out risk of the
smoother of :math:`\rho` (:func:`loocv_bandwidth`; Kennedy et al., Sec. 3.5), times
:data:`UNDERSMOOTH`.

Intervals: the estimator's influence function at :math:`a`, per unit,

.. math::

    \varphi_i(a) = \hat\mu(x_i, a) - \hat m(a)
        + e_1^T \hat D^{-1} g_a(a_i) K_h(a_i - a)\big(\rho_i - g_a(a_i)^T\hat\beta\big),

with :math:`g_a(t) = (1, (t - a)/h)^T` and :math:`\hat D = P_n[g_a(A) K_h(A - a) g_a(A)^T]` (the
sandwich of the local linear fit, Kennedy et al. Theorem 2, and the average over the
population's covariates); its standard error is :math:`\sqrt{\sum_i \varphi_i(a)^2} / n`, and a
contrast :math:`\hat\theta(a_1) - \hat\theta(a_0)` has :math:`\sqrt{\sum_i (\varphi_i(a_1) -
\varphi_i(a_0))^2} / n`. That treats the nuisances as fixed, which is right to first order when
the correction removes the network's error -- a correct GPS and a small bandwidth. With a
coarse (binned) GPS and the cross-validated bandwidth it removes only part of it: on the VCNet
design the influence function's band covered the true curve at 0.66-0.87 of the grid points
whatever the bandwidth (0.71-0.79 with the true GPS, its weights capped), while the estimates
varied between data sets about as much as the members' delete-a-group jackknife of the
network's average curve says. The band therefore adds that jackknife variance, with Student's
t quantiles at the Welch-Satterthwaite degrees of freedom (the jackknife has K - 1;
:meth:`dowhy_cfr.fitted.DoseStage.adrf`): over 100 data sets of each dose design its coverage
is 0.960 (VCNet) and 0.977 (IHDP; ``docs/dose.md``). When it was chosen, on 40 VCNet data sets,
normal quantiles covered 0.907 and these 0.936.

References
----------
* [1] E. H. Kennedy, Z. Ma, M. D. McHugh, D. S. Small. "Non-parametric methods for doubly
  robust estimation of continuous treatment effects." JRSS-B 79(4), 1229-1245, 2017.
* [2] K. Colangelo, Y.-Y. Lee. "Double debiased machine learning nonparametric inference with
  continuous treatments." arXiv:2004.03036, 2020.
* [3] J. Fan, I. Gijbels. "Local Polynomial Modelling and Its Applications." Chapman & Hall,
  1996 (the local linear estimator and its leave-one-out risk).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["ADRF", "weighted_residuals", "local_linear", "loocv_bandwidth", "adrf",
           "BANDWIDTH_GRID", "UNDERSMOOTH"]

#: The bandwidth used is the leave-one-out cross-validated one times this factor (below 1:
#: undersmoothing, which shrinks the smoothing bias the intervals do not cover; measured on
#: the band's coverage, docs/parameters.md item 17).
UNDERSMOOTH = 1.0
#: Candidate bandwidths of :func:`loocv_bandwidth`, as multiples of the dose range.
BANDWIDTH_GRID = tuple(np.geomspace(0.04, 0.5, 14))
_SQRT_2PI = np.sqrt(2 * np.pi)


class ADRF(NamedTuple):
    """The average dose-response at ``points`` (P,): ``estimate`` and ``stderr`` (P,), each
    unit's influence term ``phi`` (n, P) (:func:`adrf`), the bandwidth ``h``, and the degrees
    of freedom ``df`` (P,) of the intervals (infinite: normal; finite where the standard error
    has a members' jackknife part, :meth:`dowhy_cfr.fitted.DoseStage.adrf`)."""

    points: np.ndarray
    estimate: np.ndarray
    stderr: np.ndarray
    phi: np.ndarray
    h: float
    df: np.ndarray | float = float("inf")


def weighted_residuals(y, mu_own, weights) -> np.ndarray:
    r""":math:`\rho_i = w_i (y_i - \hat\mu(x_i, a_i))` with the stabilised GPS weights
    :math:`w_i = \hat\varpi(a_i) / \hat\pi(a_i \mid x_i)` (module docstring)."""
    return np.asarray(weights, float) * (np.asarray(y, float) - np.asarray(mu_own, float))


def _kernel_moments(points, dose, h):
    """Gaussian kernel weights ``k`` (P, n) of the doses around each point, the scaled
    distances ``u`` (P, n) and the moments ``s0, s1, s2`` (P,) of :math:`\\hat D`."""
    u = (dose[None, :] - points[:, None]) / h
    k = np.exp(-0.5 * u * u) / (_SQRT_2PI * h)
    return k, u, k.mean(1), (k * u).mean(1), (k * u * u).mean(1)


def local_linear(points, dose, values, h: float):
    r"""The local linear regression of ``values`` on ``dose`` at ``points`` with bandwidth
    ``h`` (Gaussian kernel): the coefficients :math:`(\hat\beta_0, \hat\beta_1)` (each (P,)) of
    :math:`v \approx \beta_0 + \beta_1 (a - \text{point}) / h` weighted by
    :math:`K_h(a - \text{point})`; :math:`\hat\beta_0` is the fit at the point."""
    points = np.atleast_1d(np.asarray(points, dtype=float))
    k, u, s0, s1, s2 = _kernel_moments(points, np.asarray(dose, float), h)
    b0, b1 = (k * values).mean(1), (k * u * values).mean(1)
    det = s0 * s2 - s1 * s1
    return (s2 * b0 - s1 * b1) / det, (s0 * b1 - s1 * b0) / det


def loocv_bandwidth(dose, values, grid) -> tuple[float, np.ndarray]:
    r"""The bandwidth of ``grid`` minimising the leave-one-out risk of the local linear fit,
    :math:`\frac1n \sum_i \big((v_i - \hat\theta_h(a_i)) / (1 - W_{ii})\big)^2` with the
    smoother's diagonal :math:`W_{ii} = e_1^T \hat D(a_i)^{-1} e_1 K_h(0) / n` (exact for a
    linear smoother). Returns the bandwidth and the risk of each candidate (infinite where a
    dose is alone in its window: the leave-one-out fit is undefined there)."""
    dose, values = np.asarray(dose, float), np.asarray(values, float)
    n, risks = len(dose), []
    for h in grid:
        total = 0.0
        for start in range(0, n, 512):
            pts = dose[start:start + 512]
            k, u, s0, s1, s2 = _kernel_moments(pts, dose, h)
            with np.errstate(divide="ignore", invalid="ignore"):  # a lone dose: W_ii = 1
                det = s0 * s2 - s1 * s1
                fit = (s2 * (k * values).mean(1) - s1 * (k * u * values).mean(1)) / det
                w_ii = s2 / det / (_SQRT_2PI * h) / n
                total += np.sum(((values[start:start + 512] - fit) / (1.0 - w_ii)) ** 2)
        risks.append(total / n)
    # a bandwidth that leaves some dose alone in its window has no finite risk; if every one
    # does, the widest is taken
    risks = np.where(np.isfinite(risks), risks, np.inf)
    best = int(np.argmin(risks)) if np.isfinite(risks).any() else len(risks) - 1
    return float(np.asarray(grid)[best]), risks


def adrf(points, dose, rho, h: float, grid, curves) -> ADRF:
    r"""The doubly robust average dose-response at ``points`` with its influence terms and
    standard errors (module docstring).

    Parameters
    ----------
    points : (P,) doses; dose : (n,) the fitted units' doses
    rho : (n,) weighted residuals (:func:`weighted_residuals`); h : bandwidth
    grid : (G,) increasing doses; curves : (n, G) each unit's outcome curve
        :math:`\hat\mu(x_i, t)` on ``grid`` (out of fold), linearly interpolated between

    Returns
    -------
    ADRF
    """
    points = np.atleast_1d(np.asarray(points, dtype=float))
    dose, rho = np.asarray(dose, float), np.asarray(rho, float)
    n = len(dose)
    k, u, s0, s1, s2 = _kernel_moments(points, dose, h)
    det = s0 * s2 - s1 * s1
    b0, b1 = (k * rho).mean(1), (k * u * rho).mean(1)
    beta0, beta1 = (s2 * b0 - s1 * b1) / det, (s0 * b1 - s1 * b0) / det
    at_points = _interpolate(curves, grid, points)  # (n, P): mu(x_i, a)
    plugin = at_points.mean(0)
    resid = rho[None, :] - beta0[:, None] - beta1[:, None] * u  # (P, n)
    smoother = ((s2[:, None] - s1[:, None] * u) * k * resid / det[:, None]).T  # (n, P)
    phi = at_points - plugin[None, :] + smoother
    stderr = np.sqrt((phi ** 2).sum(0)) / n
    return ADRF(points, plugin + beta0, stderr, phi, float(h))


def _interpolate(curves: np.ndarray, grid: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Each row of ``curves`` (n, G), given on ``grid``, at ``points`` (P,) by linear
    interpolation (constant beyond the grid's ends): (n, P)."""
    grid = np.asarray(grid, float)
    pos = np.clip(np.searchsorted(grid, points, side="right") - 1, 0, len(grid) - 2)
    span = grid[pos + 1] - grid[pos]
    frac = np.clip((points - grid[pos]) / np.where(span > 0, span, 1.0), 0.0, 1.0)
    return curves[:, pos] * (1 - frac) + curves[:, pos + 1] * frac
