r"""Sensitivity of the doubly robust average effects to an omitted confounder.

The AIPW averages of :mod:`dowhy_cfr.debiased` assume that the covariates X contain every common
cause of treatment and outcome. If a confounder :math:`U` is missing, they estimate the *short*
parameter :math:`\theta` (defined with :math:`g(T, X) = E[Y \mid T, X]`) instead of the *long* one
:math:`\theta_s` (with :math:`g_s(T, X, U) = E[Y \mid T, X, U]`), the causal effect.
Chernozhukov, Cinelli, Newey, Sharma & Syrgkanis [1] bound the gap with two numbers the data
identify and three the analyst chooses.

Every target here is a linear functional of the regression, :math:`\theta = E[m(W, g)]`, with a
Riesz representer :math:`\alpha(T, X)`, :math:`E[m(W, f)] = E[\alpha f]` for every :math:`f(T, X)`
(:func:`riesz_representer`). For arms :math:`a_1` vs :math:`a_0`, with :math:`t_a = 1[T = a]`,
:math:`e_a(x) = P(T = a \mid x)`, :math:`p_1 = P(T = a_1)`, :math:`p_0 = P(T = a_0)`:

.. math::

    \text{ATE:}\quad m(W, g) = g(a_1, X) - g(a_0, X), \qquad
        \alpha = \frac{t_{a_1}}{e_{a_1}} - \frac{t_{a_0}}{e_{a_0}},

    \text{ATT:}\quad m(W, g) = \frac{t_{a_1}}{p_1}\,(g(a_1, X) - g(a_0, X)), \qquad
        \alpha = \frac{1}{p_1}\Big(t_{a_1} - t_{a_0}\frac{e_{a_1}}{e_{a_0}}\Big),

    \text{ATC:}\quad m(W, g) = \frac{t_{a_0}}{p_0}\,(g(a_1, X) - g(a_0, X)), \qquad
        \alpha = \frac{1}{p_0}\Big(t_{a_1}\frac{e_{a_0}}{e_{a_1}} - t_{a_0}\Big) .

(For the ATT, :math:`E[\alpha f] = E[e_{a_1}(X)(f(a_1, X) - f(a_0, X))] / p_1 = E[m(W, f)]`; in
the binary case :math:`\alpha = t/p_1 - (1 - t)\,e/(p_1 (1 - e))`, [1].) The AIPW estimate
:math:`\theta = E[m(W, g) + \alpha (Y - g)]` of :func:`~dowhy_cfr.debiased.aipw_terms` is this
representation. With :math:`U` the same holds with :math:`g_s` and the long representer
:math:`\alpha_s(T, X, U)` (propensities given X and U), and ([1])

.. math::

    \theta_s - \theta = E[(g_s - g)(\alpha_s - \alpha)], \qquad
    |\theta_s - \theta|^2 = \rho^2\, \frac{c_t}{1 - c_t}\, c_y\; \sigma^2 \nu^2 ,

    \sigma^2 = E[(Y - g)^2], \quad \nu^2 = E[\alpha^2], \quad
    c_y = \frac{E[(g_s - g)^2]}{E[(Y - g)^2]}, \quad
    c_t = 1 - \frac{E[\alpha^2]}{E[\alpha_s^2]} = \frac{E[(\alpha_s - \alpha)^2]}{E[\alpha_s^2]}, \quad
    \rho = \mathrm{Cor}(g_s - g, \alpha_s - \alpha) .

* :math:`c_y` is the share of the residual variation of the outcome (given T and X) that U explains
  (the nonparametric partial :math:`R^2` of U with Y);
* :math:`c_t` is the share of the long Riesz representer's variation that U creates; for the ATE of a
  binary treatment it measures how much U sharpens the propensity (its gain in
  :math:`E[1/(e(1 - e))]`), an analogue of the partial :math:`R^2` of U with T;
* :math:`\rho \in [-1, 1]` is the correlation of the two errors; :math:`|\rho| = 1` (the default)
  is the adversarial worst case.

:math:`\sigma^2` and :math:`\nu^2` are estimated with Neyman-orthogonal scores ([1];
as EconML's ``DRLearner``): :math:`\hat\sigma^2 = \frac1n\sum_i 1[t_i \in \{a_0, a_1\}](y_i -
\hat\mu_{t_i}(x_i))^2` (units at other arms, where :math:`\alpha = \alpha_s = 0`, play no part) and
:math:`\hat\nu^2 = \frac1n\sum_i 2 m(W_i, \hat\alpha) - \hat\alpha_i^2` (:math:`E[m(W, \alpha)] =
E[\alpha^2]`). The bounds of :func:`sensitivity_interval` are
:math:`\theta_\pm = \hat\theta \pm |\rho|\sqrt{c_y\, c_t / (1 - c_t)}\,\sqrt{\hat\sigma^2\hat\nu^2}`,
and their confidence bounds :math:`\theta_- - z_{1-\alpha/2}\,\mathrm{se}(\theta_-)`,
:math:`\theta_+ + z_{1-\alpha/2}\,\mathrm{se}(\theta_+)` with standard errors by the delta method
from the joint influence functions of :math:`(\hat\theta, \hat\sigma^2, \hat\nu^2)`.
:func:`robustness_value` is the confounding strength :math:`c_y = c_t = r` (with :math:`\rho = 1`)
at which a bound reaches the null hypothesis (the robustness value of Cinelli & Hazlett [2]).

Numbers and meanings follow EconML 0.17's ``DRLearner.sensitivity_interval``,
``robustness_value`` and ``sensitivity_summary`` (the ATE, each arm against the control); the ATT
and ATC and any pair of arms are this module's extension of the same theory. ``docs/sensitivity.md``
explains how to read the results.

References
----------
* [1] V. Chernozhukov, C. Cinelli, W. Newey, A. Sharma, V. Syrgkanis. "Long story short: omitted
  variable bias in causal machine learning." NBER Working Paper 30302, 2022 (arXiv:2112.13398).
* [2] C. Cinelli, C. Hazlett. "Making sense of sensitivity: extending omitted variable bias."
  Journal of the Royal Statistical Society B 82(1), 2020 (the robustness value).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.stats import norm

from . import _validation as V
from .debiased import TARGETS, aipw_terms

__all__ = ["SensitivityParams", "SensitivitySummary", "SensitivityMixin", "riesz_representer",
           "sensitivity_params", "confounding_bias", "sensitivity_interval", "robustness_value",
           "sensitivity_summary"]

INTERVAL_TYPES = ("ci", "theta")

#: ``robustness_value`` solves for r in ``[0, 1 - RV_EDGE]``: ``c_t / (1 - c_t)`` is finite there.
RV_EDGE = 1e-12


@dataclass(frozen=True)
class SensitivityParams:
    r"""What the bounds need: the estimate, :math:`\hat\sigma^2`, :math:`\hat\nu^2` and their
    joint covariance (EconML's ``SensitivityParams(theta, sigma, nu, cov)``, whose ``sigma`` and
    ``nu`` are these squares).

    Attributes
    ----------
    target : {"ate", "att", "atc"}
    a1, a0 : int, the arms compared (effect of ``a1`` vs ``a0``)
    theta : float, the AIPW estimate (:func:`~dowhy_cfr.debiased.average_effect`'s)
    sigma2 : float, :math:`\hat\sigma^2`, the outcome regression's residual variance
    nu2 : float, :math:`\hat\nu^2`, the Riesz representer's second moment
    cov : array (3, 3), the estimated covariance of ``(theta, sigma2, nu2)`` (influence functions)
    n_units : int, the units the target averages over (all units for "ate")
    """

    target: str
    a1: int
    a0: int
    theta: float
    sigma2: float
    nu2: float
    cov: np.ndarray
    n_units: int

    @property
    def stderr(self) -> float:
        """Standard error of ``theta`` (that of :func:`~dowhy_cfr.debiased.average_effect`)."""
        return float(np.sqrt(self.cov[0, 0]))

    @property
    def scale(self) -> float:
        r""":math:`S = \sqrt{\hat\sigma^2 \hat\nu^2}`: the bias is at most
        :math:`|\rho|\sqrt{c_y c_t/(1 - c_t)}\, S`."""
        return float(np.sqrt(self.sigma2 * self.nu2))


def _check_target(target) -> str:
    key = str(target).lower()
    if key not in TARGETS:
        raise ValueError(f"target={target!r} is invalid: choose one of {TARGETS}")
    return key


def _check_arms_e(arms, e, a1, a0, name="e"):
    """Fresh int arms and float propensities, with shapes and values checked."""
    e = np.array(e, dtype=float)
    if e.ndim != 2 or e.shape[1] < 2:
        raise ValueError(f"{name} must be 2-D (n, n_arms) with n_arms >= 2; got shape "
                         f"{e.shape}")
    n, n_arms = e.shape
    arms = V.as_vector("arms", arms, n)
    V.check_finite("arms", arms)
    V.check_finite("e", e)
    if np.any(arms != np.round(arms)) or arms.min() < 0 or arms.max() >= n_arms:
        raise ValueError(f"arms must hold integer arm indices in 0..{n_arms - 1} (the columns of "
                         f"{name})")
    if np.any(e <= 0) or np.any(e > 1):
        raise ValueError("e must hold propensities in (0, 1]; clip them away from 0 "
                         "(e.g. np.clip(e, 0.01, 1)) before dividing by them")
    a1 = V.check_int("a1", a1, 0, n_arms)
    a0 = V.check_int("a0", a0, 0, n_arms)
    if a1 == a0:
        raise ValueError(f"a1 and a0 must be different arms; both are {a1}")
    return arms.astype(int), e, a1, a0


def _check_arrays(y, arms, mu, e, a1, a0):
    """Fresh float/int copies of the inputs, with shapes and values checked."""
    mu = np.array(mu, dtype=float)
    if mu.ndim != 2 or mu.shape[1] < 2:
        raise ValueError(f"mu must be 2-D (n, n_arms) with n_arms >= 2; got shape {mu.shape}")
    if np.shape(e) != mu.shape:
        raise ValueError(f"e must have mu's shape {mu.shape} (one propensity per unit and arm); "
                         f"got {np.shape(e)}")
    arms, e, a1, a0 = _check_arms_e(arms, e, a1, a0, name="mu")
    y = V.as_vector("y", y, len(mu))
    V.check_finite("y", y)
    V.check_finite("mu", mu)
    return y, arms, mu, e, a1, a0


def _unscaled_riesz(arms, e, a1, a0, target):
    r"""Per unit :math:`p\,\alpha_i` and :math:`p^2 m(W_i, \alpha)` (module docstring), with
    :math:`p` the share of the target's units (1 for the ATE)."""
    t1, t0 = (arms == a1).astype(float), (arms == a0).astype(float)
    e1, e0 = e[:, a1], e[:, a0]
    if target == "ate":
        return t1 / e1 - t0 / e0, 1 / e1 + 1 / e0
    if target == "att":  # alpha(a1, x) = 1, alpha(a0, x) = -e1 / e0 (times 1 / p1)
        return t1 - t0 * e1 / e0, t1 * (1 + e1 / e0)
    return t1 * e0 / e1 - t0, t0 * (e0 / e1 + 1)  # atc: alpha(a1, x) = e0 / e1, alpha(a0, x) = -1


def riesz_representer(arms, e, *, a1: int = 1, a0: int = 0,
                      target: str = "ate") -> tuple[np.ndarray, np.ndarray]:
    r"""The Riesz representer of the target and the functional applied to it, per unit.

    .. math::

        \text{ATE: } \alpha_i = \frac{t_{i a_1}}{e_{a_1}(x_i)} - \frac{t_{i a_0}}{e_{a_0}(x_i)},
        \quad
        \text{ATT: } \alpha_i = \frac{1}{\hat p_1}\Big(t_{i a_1}
            - t_{i a_0}\frac{e_{a_1}(x_i)}{e_{a_0}(x_i)}\Big),
        \quad
        \text{ATC: } \alpha_i = \frac{1}{\hat p_0}\Big(t_{i a_1}\frac{e_{a_0}(x_i)}{e_{a_1}(x_i)}
            - t_{i a_0}\Big),

    with :math:`t_{ia} = 1[t_i = a]` and :math:`\hat p_a` the share of units at arm :math:`a`;
    and :math:`m(W_i, \alpha) = \alpha(a_1, x_i) - \alpha(a_0, x_i)`, times
    :math:`t_{i a_1} / \hat p_1` (ATT) or :math:`t_{i a_0} / \hat p_0` (ATC). The mean of
    :math:`2 m(W, \alpha) - \alpha^2` is :math:`\hat\nu^2`.

    Parameters
    ----------
    arms : array (n,) of int in 0..n_arms-1; e : array (n, n_arms), the propensities
    a1, a0 : int, the arms compared; target : {"ate", "att", "atc"}

    Returns
    -------
    alpha, m_alpha : arrays (n,)
    """
    target = _check_target(target)
    arms, e, a1, a0 = _check_arms_e(arms, e, a1, a0)
    alpha, m_alpha = _unscaled_riesz(arms, e, a1, a0, target)
    p = _target_share(arms, a1, a0, target)
    return alpha / p, m_alpha / p**2


def _target_share(arms, a1, a0, target) -> float:
    share = {"ate": 1.0, "att": np.mean(arms == a1), "atc": np.mean(arms == a0)}[target]
    if share == 0:
        raise ValueError(f"no units at the arm that defines target={target!r}")
    return float(share)


def sensitivity_params(y, arms, mu, e, *, a1: int = 1, a0: int = 0,
                       target: str = "ate") -> SensitivityParams:
    r"""The estimate and the two scales of the omitted-variable bias, with their covariance.

    With the AIPW terms :math:`\hat\theta = \bar a / \bar b` (:func:`~dowhy_cfr.debiased.aipw_terms`;
    :math:`b = 1` for the ATE, the target arm's indicator otherwise), the residual terms
    :math:`s_i = 1[t_i \in \{a_0, a_1\}]\,(y_i - \hat\mu_{t_i}(x_i))^2` and the representer terms
    :math:`q_i = \bar b^2 (2 m(W_i, \hat\alpha) - \hat\alpha_i^2)` (:func:`riesz_representer`):

    .. math::

        \hat\sigma^2 = \bar s, \qquad \hat\nu^2 = \bar q / \bar b^2, \qquad
        \widehat{\mathrm{Cov}} = \frac{1}{n^2}\sum_i \varphi_i \varphi_i^\top,

        \varphi_i = \Big(\frac{a_i - \hat\theta b_i}{\bar b},\;
            s_i - \hat\sigma^2,\;
            \frac{q_i}{\bar b^2} - \hat\nu^2 - 2\hat\nu^2\,\frac{b_i - \bar b}{\bar b}\Big),

    the influence functions of the three ratios of means (for the ATE they are EconML's
    ``dr_sensitivity_values``).

    Parameters
    ----------
    y : array (n,), outcomes
    arms : array (n,) of int in 0..n_arms-1, the arm each unit received
    mu : array (n, n_arms), outcome predictions per arm (out-of-fold where they are)
    e : array (n, n_arms), propensities in (0, 1] (cross-fitted and clipped)
    a1, a0 : int, the arms compared (effect of ``a1`` vs ``a0``)
    target : {"ate", "att", "atc"}

    Returns
    -------
    SensitivityParams
    """
    target = _check_target(target)
    y, arms, mu, e, a1, a0 = _check_arrays(y, arms, mu, e, a1, a0)
    n = len(y)
    a, b = aipw_terms(y, arms, mu, e, a1=a1, a0=a0, target=target)
    b_mean = _target_share(arms, a1, a0, target)
    theta = a.mean() / b_mean
    pair = (arms == a1) | (arms == a0)
    s = np.where(pair, (y - mu[np.arange(n), arms]) ** 2, 0.0)
    alpha, m_alpha = _unscaled_riesz(arms, e, a1, a0, target)
    q = 2 * m_alpha - alpha**2
    sigma2, nu2 = s.mean(), q.mean() / b_mean**2
    phi = np.column_stack([(a - theta * b) / b_mean, s - sigma2,
                           q / b_mean**2 - nu2 - 2 * nu2 * (b - b_mean) / b_mean])
    cov = phi.T @ phi / n**2
    return SensitivityParams(target, a1, a0, float(theta), float(sigma2), float(nu2), cov,
                             int(round(b.sum())))


def _check_strengths(c_y, c_t, rho) -> None:
    for name, value, what in (("c_y", c_y, "residual outcome variation"),
                              ("c_t", c_t, "Riesz representer's variation")):
        if not 0 <= value < 1:
            raise ValueError(f"{name}={value!r} is invalid: it is the share of the {what} "
                             f"explained by the omitted confounder, in [0, 1) (e.g. 0.05)")
    if not -1 <= rho <= 1:
        raise ValueError(f"rho={rho!r} is invalid: it is a correlation, in [-1, 1] "
                         f"(1, the default, is the worst case)")


def _check_level(alpha, interval_type) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} is invalid: use a level in (0, 1), e.g. 0.05 for 95% "
                         f"confidence bounds")
    if interval_type not in INTERVAL_TYPES:
        raise ValueError(f"interval_type={interval_type!r} is invalid: use 'ci' (confidence "
                         f"bounds) or 'theta' (the bounds on the estimate alone)")


def _check_scales(params: SensitivityParams) -> None:
    if not (params.sigma2 > 0 and params.nu2 > 0):
        raise ValueError(
            f"sigma2={params.sigma2:.4g} and nu2={params.nu2:.4g} must be positive; a negative "
            f"nu2 (the debiased second moment of the Riesz representer) points to poorly "
            f"estimated propensities or weak overlap: check e, or raise min_propensity")


def confounding_bias(params: SensitivityParams, *, c_y: float = 0.05, c_t: float = 0.05,
                     rho: float = 1.0) -> float:
    r"""The largest omitted-variable bias of the scenario:
    :math:`|\rho| \sqrt{c_y\, c_t / (1 - c_t)}\, \sqrt{\hat\sigma^2 \hat\nu^2}` (
    Chernozhukov et al. 2022)."""
    _check_strengths(c_y, c_t, rho)
    _check_scales(params)
    return float(abs(rho) * np.sqrt(c_y * c_t / (1 - c_t)) * params.scale)


def _bounds(params, alpha, c_y, c_t, rho, interval_type):
    """``(lower, upper)`` without the argument checks (``robustness_value``'s inner loop)."""
    strength = abs(rho) * np.sqrt(c_y * c_t / (1 - c_t))
    sigma2, nu2 = params.sigma2, params.nu2
    bias = strength * np.sqrt(sigma2 * nu2)
    lower, upper = params.theta - bias, params.theta + bias
    if interval_type == "theta":
        return float(lower), float(upper)
    # delta method: d bias / d(sigma2, nu2) = strength / 2 * (sqrt(nu2/sigma2), sqrt(sigma2/nu2))
    grad = strength / 2 * np.array([np.sqrt(nu2 / sigma2), np.sqrt(sigma2 / nu2)])
    z = norm.ppf(1 - alpha / 2)
    out = []
    for sign, bound in ((-1, lower), (1, upper)):
        g = np.concatenate([[1.0], sign * grad])
        out.append(bound + sign * z * np.sqrt(max(g @ params.cov @ g, 0.0)))
    return float(out[0]), float(out[1])


def sensitivity_interval(params: SensitivityParams, *, alpha: float = 0.05, c_y: float = 0.05,
                         c_t: float = 0.05, rho: float = 1.0,
                         interval_type: str = "ci") -> tuple[float, float]:
    r"""Bounds on the effect if a confounder of the given strength was omitted.

    .. math::

        \theta_\pm = \hat\theta \pm |\rho| \sqrt{\frac{c_y\, c_t}{1 - c_t}}
            \sqrt{\hat\sigma^2 \hat\nu^2}

    (``interval_type="theta"``), or the confidence bounds :math:`\theta_- - z_{1-\alpha/2}
    \widehat{\mathrm{se}}(\theta_-)` and :math:`\theta_+ + z_{1-\alpha/2}
    \widehat{\mathrm{se}}(\theta_+)` (``"ci"``), the standard errors by the delta method from
    ``params.cov``: with ``c_y = c_t = 0`` they are the usual normal confidence interval. As
    EconML's ``sensitivity_interval``.

    Parameters
    ----------
    params : SensitivityParams, from :func:`sensitivity_params`
    alpha : float in (0, 1), the confidence bounds' level is 1 - alpha
    c_y : float in [0, 1), the share of the outcome's residual variation (given the treatment and
        the covariates) that the omitted confounder explains
    c_t : float in [0, 1), the share of the Riesz representer's variation that the omitted
        confounder creates (for the ATE: how much it sharpens the propensity)
    rho : float in [-1, 1], the correlation of the two errors; only ``|rho|`` matters (1: worst case)
    interval_type : {"ci", "theta"}

    Returns
    -------
    (lower, upper) : floats
    """
    _check_strengths(c_y, c_t, rho)
    _check_level(alpha, interval_type)
    _check_scales(params)
    return _bounds(params, alpha, c_y, c_t, rho, interval_type)


def robustness_value(params: SensitivityParams, *, null_hypothesis: float = 0.0,
                     alpha: float = 0.05, interval_type: str = "ci") -> float:
    r"""The confounding strength :math:`c_y = c_t = r` (:math:`\rho = 1`) at which the bound nearest
    to ``null_hypothesis`` reaches it; 0 if the interval covers it already without confounding.

    Larger is more robust: a confounder would have to explain a share ``r`` of the outcome's
    residual variation *and* of the Riesz representer's variation to move the estimate
    (``interval_type="theta"``) or its confidence bound (``"ci"``) to the null. For ``"theta"``,
    with :math:`k = (\hat\theta - \theta_0)^2 / (\hat\sigma^2 \hat\nu^2)`, it is
    :math:`r = (\sqrt{k^2 + 4k} - k) / 2`, the root of :math:`r^2 / (1 - r) = k`; for ``"ci"``
    it is found by Brent's method. As EconML's ``robustness_value`` (which bisects to
    :math:`10^{-6}` in the bound).

    Parameters
    ----------
    params : SensitivityParams, from :func:`sensitivity_params`
    null_hypothesis : float, the effect :math:`\theta_0` to reach (0: no effect)
    alpha : float in (0, 1), the level of the confidence bounds (``"ci"``)
    interval_type : {"ci", "theta"}

    Returns
    -------
    float in [0, 1)
    """
    _check_level(alpha, interval_type)
    _check_scales(params)
    if not np.isfinite(null_hypothesis):
        raise ValueError(f"null_hypothesis={null_hypothesis!r} must be a finite number")
    lower, upper = _bounds(params, alpha, 0.0, 0.0, 1.0, interval_type)
    if lower <= null_hypothesis <= upper:
        return 0.0
    if interval_type == "theta":
        k = (params.theta - null_hypothesis) ** 2 / params.scale**2
        return float((np.sqrt(k**2 + 4 * k) - k) / 2)
    side = 0 if lower > null_hypothesis else 1

    def gap(r):  # > 0 while the bound has not reached the null
        bound = _bounds(params, alpha, r, r, 1.0, "ci")[side]
        return (bound - null_hypothesis) * (1 if side == 0 else -1)

    if gap(1 - RV_EDGE) > 0:  # only a confounder explaining (almost) everything would do
        return 1 - RV_EDGE
    return float(brentq(gap, 0.0, 1 - RV_EDGE, xtol=1e-14, rtol=1e-14))


@dataclass(frozen=True)
class SensitivitySummary:
    """The bounds and robustness values of one scenario (:func:`sensitivity_summary`).

    ``str()`` prints EconML's two tables; ``to_frame()`` gives the numbers unrounded.
    """

    params: SensitivityParams
    c_y: float
    c_t: float
    rho: float
    alpha: float
    null_hypothesis: float
    ci_lower: float
    theta_lower: float
    theta_upper: float
    ci_upper: float
    rv_theta: float
    rv_ci: float
    decimals: int = 3

    def to_frame(self) -> pd.DataFrame:
        """One row: the bounds, the estimate and the robustness values."""
        return pd.DataFrame([{
            "CI Lower": self.ci_lower, "Theta Lower": self.theta_lower,
            "Theta": self.params.theta, "Theta Upper": self.theta_upper,
            "CI Upper": self.ci_upper, "Robustness Value (Theta)": self.rv_theta,
            "Robustness Value (CI)": self.rv_ci}])

    def __str__(self) -> str:
        p, d = self.params, self.decimals
        frame = self.to_frame().round(d)
        head = (f"Sensitivity Analysis Summary for c_y={self.c_y}, c_t={self.c_t}, rho={self.rho}"
                f" ({p.target.upper()}, arm {p.a1} vs {p.a0}, alpha={self.alpha})")
        rv = f"Robustness Values for null_hypothesis={self.null_hypothesis}"
        cols = list(frame.columns)
        return "\n".join([head, frame[cols[:5]].to_string(index=False), "", rv,
                          frame[cols[5:]].to_string(index=False)])

    def _repr_html_(self) -> str:
        return f"<pre>{self}</pre>"


def sensitivity_summary(params: SensitivityParams, *, null_hypothesis: float = 0.0,
                        alpha: float = 0.05, c_y: float = 0.05, c_t: float = 0.05,
                        rho: float = 1.0, decimals: int = 3) -> SensitivitySummary:
    """The bounds of :func:`sensitivity_interval` (both types) and the robustness values of
    :func:`robustness_value` (both types) of one scenario, as EconML's ``sensitivity_summary``.

    Parameters
    ----------
    params : SensitivityParams
    null_hypothesis, alpha, c_y, c_t, rho : as in :func:`sensitivity_interval` and
        :func:`robustness_value`
    decimals : int, the rounding of the printed tables

    Returns
    -------
    SensitivitySummary
    """
    decimals = V.check_int("decimals", decimals, 0)
    theta_lower, theta_upper = sensitivity_interval(params, alpha=alpha, c_y=c_y, c_t=c_t,
                                                    rho=rho, interval_type="theta")
    ci_lower, ci_upper = sensitivity_interval(params, alpha=alpha, c_y=c_y, c_t=c_t, rho=rho,
                                              interval_type="ci")
    rv = {kind: robustness_value(params, null_hypothesis=null_hypothesis, alpha=alpha,
                                 interval_type=kind) for kind in INTERVAL_TYPES}
    return SensitivitySummary(params, c_y, c_t, rho, alpha, null_hypothesis, ci_lower,
                              theta_lower, theta_upper, ci_upper, rv["theta"], rv["ci"], decimals)


# ----------------------------------------------------------------------------- the estimator's API
_NO_STAGE = ("this fit kept no fitted units (fit_chunks, or a model saved without them): the "
             "sensitivity analysis needs the doubly robust stage of fit(Y, T, X=...); refit "
             "with fit")
_NO_PROPENSITY = ("the estimator was fitted with debias=None, so it has no doubly robust stage "
                  "(no propensities) to bound: refit with debias='aipw' (the default) for the "
                  "sensitivity analysis")


class SensitivityMixin:
    """EconML 0.17's sensitivity analysis (``DRLearner.sensitivity_interval``,
    ``robustness_value``, ``sensitivity_summary``) for an estimator with a doubly robust stage.

    Mixed into :class:`~dowhy_cfr.CFR`; it reads the fitted units' outcomes, arms, outcome
    predictions and cross-fitted propensities (``fitted_.debiased``) and calls this module's
    functions. ``T`` is the treatment level compared with the control (the first category), as
    in EconML; ``target`` ("ate", "att", "atc") is this package's extension. The numbers bound
    :meth:`average_effect`'s doubly robust estimate (``est.ate()`` for the ATE).
    """

    def sensitivity_params(self, T=1, *, target: str = "ate") -> SensitivityParams:
        """The estimate, :math:`\\hat\\sigma^2`, :math:`\\hat\\nu^2` and their covariance for
        the effect of ``T`` vs the control over the fitted units
        (:func:`dowhy_cfr.sensitivity.sensitivity_params`)."""
        stage, a1 = self._sensitivity_stage(T)
        return sensitivity_params(stage.y, stage.arms, stage.mu, stage.e, a1=a1, a0=0,
                                  target=target)

    def sensitivity_interval(self, T=1, alpha=0.05, c_y=0.05, c_t=0.05, rho=1.,
                             interval_type="ci", *, target: str = "ate") -> tuple[float, float]:
        """Bounds on the effect of ``T`` vs the control if a confounder of the given strength was
        omitted (EconML's ``sensitivity_interval``; Chernozhukov et al. 2022).

        Parameters
        ----------
        T : treatment level, default 1
            The level compared with the control (the first category).
        alpha : float in (0, 1), default 0.05
            The confidence bounds (``"ci"``) are at level 1 - alpha (each end at 1 - alpha/2).
        c_y : float in [0, 1), default 0.05
            The share of the outcome's residual variation (given the treatment and the
            covariates) that the omitted confounder explains.
        c_t : float in [0, 1), default 0.05
            The share of the Riesz representer's variation that the confounder creates (for the
            ATE: how much it sharpens the propensity).
        rho : float in [-1, 1], default 1
            Correlation of the two errors; only ``|rho|`` matters (1: the worst case).
        interval_type : {"ci", "theta"}, default "ci"
            Confidence bounds, or the bounds on the estimate alone.
        target : {"ate", "att", "atc"}, default "ate"
            All fitted units, the units at ``T`` or the units at the control.

        Returns
        -------
        (lower, upper) : floats
        """
        return sensitivity_interval(self.sensitivity_params(T, target=target), alpha=alpha,
                                    c_y=c_y, c_t=c_t, rho=rho, interval_type=interval_type)

    def robustness_value(self, T=1, null_hypothesis=0, alpha=0.05, interval_type="ci", *,
                         target: str = "ate") -> float:
        """The confounding strength ``c_y = c_t = r`` (``rho = 1``) at which the bound nearest to
        ``null_hypothesis`` reaches it (EconML's ``robustness_value``); 0 if the interval covers
        it already. Larger is more robust: a confounder would have to explain a share ``r`` of
        the outcome's residual variation *and* of the Riesz representer's variation to move the
        estimate (``"theta"``) or its confidence bound (``"ci"``) to the null.

        Parameters
        ----------
        T : treatment level, default 1 (compared with the control)
        null_hypothesis : float, default 0
        alpha : float in (0, 1), default 0.05 (the level of the confidence bounds of ``"ci"``)
        interval_type : {"ci", "theta"}, default "ci"
        target : {"ate", "att", "atc"}, default "ate"

        Returns
        -------
        float in [0, 1)
        """
        return robustness_value(self.sensitivity_params(T, target=target),
                                null_hypothesis=null_hypothesis, alpha=alpha,
                                interval_type=interval_type)

    def sensitivity_summary(self, T=1, null_hypothesis=0, alpha=0.05, c_y=0.05, c_t=0.05,
                            rho=1., decimals=3, *, target: str = "ate") -> SensitivitySummary:
        """The bounds (both types) and robustness values (both types) of one scenario, as
        EconML's ``sensitivity_summary``; ``print()`` it for EconML's two tables, ``to_frame()``
        for the numbers. Parameters as in :meth:`sensitivity_interval` and
        :meth:`robustness_value`; ``decimals``: the rounding of the printed tables."""
        return sensitivity_summary(self.sensitivity_params(T, target=target),
                                   null_hypothesis=null_hypothesis, alpha=alpha, c_y=c_y,
                                   c_t=c_t, rho=rho, decimals=decimals)

    def _sensitivity_stage(self, T):
        """The fitted doubly robust stage and the arm index of ``T`` (ValueError naming the fix
        where there is none, or ``T`` is not a treated level)."""
        fitted = self._check_fitted()
        if fitted.continuous:
            raise NotImplementedError("the sensitivity bounds (Chernozhukov et al. 2022) are "
                                      "implemented for categorical treatments; this estimator "
                                      "was fitted on a continuous one (a dose)")
        stage = fitted.debiased
        if stage is None:
            raise ValueError(_NO_STAGE)
        if stage.e is None:
            raise ValueError(_NO_PROPENSITY)
        cats = list(fitted.encoding.categories)
        if np.ndim(T) != 0 or not any(_same_level(T, c) for c in cats):
            raise ValueError(f"T={T!r} is not a fitted treatment level: choose one of "
                             f"{[_plain(c) for c in cats[1:]]} (each is compared with the "
                             f"control {_plain(cats[0])!r}, the first category)")
        a1 = int(fitted.encoding.arms([T])[0])
        if a1 == 0:
            raise ValueError(f"T={T!r} is the control (the first category): choose a treated "
                             f"level, one of {[_plain(c) for c in cats[1:]]}")
        return stage, a1


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def _same_level(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False
