r"""Dose-response curves of a CFR/TARNet fitted on a continuous treatment, and EconML's effect
methods for it (:class:`DoseResponseMixin`, mixed into :class:`~dowhy_cfr.CFR`).

A fit on a continuous treatment ``T`` (``treatment="continuous"``, or ``"auto"`` with more than
20 distinct numeric values; ``docs/dose.md``) trains dose networks whose head is a spline
function of the dose (:mod:`dowhy_cfr.core.dose`). What the fitted estimator answers:

* ``effect(X, T0=t0, T1=t1)``: :math:`\hat\mu(x, t_1) - \hat\mu(x, t_0)` per row of X (T0 and T1
  scalars or one dose per row); ``effect_interval`` its members' jackknife interval.
* ``marginal_effect(T, X)``: the slope :math:`\partial_t \hat\mu(x, t)` at dose T (a central
  difference over 1 % of the dose range); ``marginal_effect_interval`` likewise.
* ``ate(X=None, T0=t0, T1=t1)`` / ``ate_interval``: the doubly robust contrast
  :math:`\hat\theta(t_1) - \hat\theta(t_0)` of the average dose-response over the fitted units
  (Kennedy et al. 2017; :mod:`dowhy_cfr.adrf`) with its analytic interval; with X, the mean of
  ``effect(X, ...)``.
* ``dose_response(X=None, t_grid=None)``: the curves on a grid of doses with pointwise
  intervals (:class:`DoseResponse`): X=None the doubly robust average curve over the fitted
  units with Kennedy et al.'s band; with X each row's curve with the members' jackknife band.
* ``const_marginal_effect`` and the other constant-effect methods: a clear error (the effect of
  a dose is not constant in the dose).

Every unit's curve is the ensemble's mean :math:`\frac1K\sum_k \hat\mu_k(x, t)` plus the doubly
robust correction of the average curve, :math:`\hat\theta(t) - \frac1n\sum_i \hat\mu(x_i, t)`
(a function of the dose alone), so that the curves' mean over the fitted units is the doubly
robust average curve -- as the binary path shifts every unit's effect to the AIPW ATE.
Doses outside the range seen at fit are refused with a ValueError (no extrapolation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from econml.utilities import Summary
from scipy.stats import t as student_t

from .covariates import EncodedX
from .debiased import AverageEffect
from .inference import CONSTANT_DOSE_EFFECT, flat_doses, jackknife_stderr

__all__ = ["DoseResponse", "DoseResponseMixin"]

_CATEGORICAL_ONLY = ("{name} is for a categorical (binary or multi-arm) treatment; this estimator "
                     "was fitted on a continuous one: use {instead}")


@dataclass(frozen=True)
class DoseResponse:
    """Dose-response curves with pointwise ``1 - alpha`` intervals (``CFR.dose_response``).

    Attributes
    ----------
    t : ndarray (P,)
        The doses.
    estimate, lower, upper, stderr : ndarray (P,) or (m, P)
        The average curve (``kind="average"``) or one curve per row of X
        (``kind="individual"``), the interval's bounds and the standard errors.
    kind : {"average", "individual"}
    method : str
        Where the curve and its band come from (doubly robust / plug-in; Kennedy et al.'s
        sandwich or the members' jackknife).
    alpha : float
    bandwidth : float or None
        The local linear smoother's bandwidth of the doubly robust average curve: in dose
        units on the range scale, in rank units on the rank scale (``dose_scale``).
    """

    t: np.ndarray
    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    stderr: np.ndarray
    kind: str
    method: str
    alpha: float
    bandwidth: float | None = None

    def to_frame(self) -> pd.DataFrame:
        """One row per dose (and unit): ``unit`` (individual curves), ``dose``, ``estimate``,
        ``lower``, ``upper``, ``stderr``."""
        if self.kind == "average":
            return pd.DataFrame({"dose": self.t, "estimate": self.estimate, "lower": self.lower,
                                 "upper": self.upper, "stderr": self.stderr})
        m, p = self.estimate.shape
        return pd.DataFrame({"unit": np.repeat(np.arange(m), p), "dose": np.tile(self.t, m),
                             "estimate": self.estimate.ravel(), "lower": self.lower.ravel(),
                             "upper": self.upper.ravel(), "stderr": self.stderr.ravel()})

    def plot(self, ax=None, **kwargs):
        """The curve(s) with their bands (:func:`dowhy_cfr.plotting.plot_dose_response`)."""
        from .plotting import plot_dose_response

        return plot_dose_response(self, ax=ax, **kwargs)


def _check_alpha(alpha) -> float:
    if not 0 < float(alpha) < 1:
        raise ValueError(f"alpha={alpha!r} must be in (0, 1), e.g. 0.05 for 95% intervals")
    return float(alpha)


class DoseResponseMixin:
    """EconML's effect methods and ``dose_response`` for a continuous treatment; every method
    leaves a categorical fit to the next class of the estimator (module docstring)."""

    def _dose_fit(self):
        """The fitted state if the treatment is continuous, else None."""
        fitted = self.__dict__.get("fitted_")
        return fitted if fitted is not None and fitted.continuous else None

    def _shape_y(self, out):
        return out[:, None] if self._d_y else out

    def _doses(self, fitted, T0, T1):
        """The scalar doses of an average contrast, checked."""
        fitted.encoding.check_labels(T0, T1)
        if np.ndim(T0) or np.ndim(T1):
            raise ValueError("with X=None, T0 and T1 must be single doses (the contrast of the "
                             "average dose-response); pass X for one dose per row")
        return float(T1), float(T0)

    def _average_curve(self, fitted, points) -> np.ndarray:
        stage = fitted.dose
        return stage.adrf(points).estimate if stage.debiased else stage.plugin(points)

    # ------------------------------------------------------------------ EconML's methods
    def effect(self, X=None, *, T0=0, T1=1):
        r"""EconML's ``effect``; for a continuous treatment :math:`\hat\mu(x, T1) -
        \hat\mu(x, T0)` per row of X (X=None: the doubly robust contrast of the average curve,
        shape (1,))."""
        fitted = self._dose_fit()
        if fitted is None:
            return super().effect(X, T0=T0, T1=T1)
        if X is None:
            t1, t0 = self._doses(fitted, T0, T1)
            return self._shape_y(np.atleast_1d(self.ate(None, T0=t0, T1=t1)))
        X, T0, T1 = flat_doses(*self._expand_treatments(X, T0, T1))
        return self._shape_y(fitted.dose_curves(X, T1) - fitted.dose_curves(X, T0))

    def marginal_effect(self, T, X=None):
        r"""EconML's ``marginal_effect``; for a continuous treatment the slope
        :math:`\partial_t \hat\mu(x, t)` at dose T of each row's curve (X=None: of the average
        curve), by a central difference over 1 % of the dose range."""
        fitted = self._dose_fit()
        if fitted is None:
            return super().marginal_effect(T, X)
        X, T = flat_doses(*self._expand_treatments(X, T))
        lo, hi = fitted.encoding.difference_points(T)
        if X is None:
            slope = (self._average_curve(fitted, hi) - self._average_curve(fitted, lo)) / (hi - lo)
        else:
            slope = (fitted.dose_curves(X, hi) - fitted.dose_curves(X, lo)) / (hi - lo)
        return self._shape_y(slope)

    def marginal_effect_interval(self, T, X=None, *, alpha=0.05):
        if self._dose_fit() is None:
            return super().marginal_effect_interval(T, X, alpha=alpha)
        return self._use_inference_method("marginal_effect_interval", T, X, alpha=alpha)

    def marginal_effect_inference(self, T, X=None):
        if self._dose_fit() is None:
            return super().marginal_effect_inference(T, X)
        return self._use_inference_method("marginal_effect_inference", T, X)

    def const_marginal_ate(self, X=None):
        if self._dose_fit() is not None:
            raise NotImplementedError(CONSTANT_DOSE_EFFECT)
        return super().const_marginal_ate(X)

    def ate(self, X=None, *, T0=0, T1=1):
        r"""EconML's ``ate``; for a continuous treatment with X=None the doubly robust contrast
        :math:`\hat\theta(T1) - \hat\theta(T0)` of the average dose-response over the fitted
        units (the plug-in with ``debias=None``), with X the mean of ``effect(X, T0, T1)``."""
        fitted = self._dose_fit()
        if fitted is None:
            return super().ate(X, T0=T0, T1=T1)
        if X is not None:
            return np.mean(self.effect(X, T0=T0, T1=T1), axis=0)
        t1, t0 = self._doses(fitted, T0, T1)
        value = self.average_effect("ate", T0=t0, T1=t1,
                                    debiased=fitted.dose.debiased).estimate
        return np.full(self._d_y, value) if self._d_y else np.float64(value)

    def marginal_ate(self, T, X=None):
        if self._dose_fit() is None:
            return super().marginal_ate(T, X)
        return np.mean(self.marginal_effect(T, X), axis=0)

    def average_effect(self, target="ate", *, T0=0, T1=1, debiased=True) -> AverageEffect:
        """As for a categorical treatment; for a continuous one ``target="ate"`` only: the
        contrast of the average curve between doses ``T1`` and ``T0`` over the fitted units,
        doubly robust with its standard error (or the plug-in, ``debiased=False``)."""
        fitted = self._dose_fit()
        if fitted is None:
            return super().average_effect(target, T0=T0, T1=T1, debiased=debiased)
        if str(target).lower() != "ate":
            raise ValueError(f"target={target!r}: for a continuous treatment the average effect "
                             f"is over all fitted units ('ate'); 'att'/'atc' (the units at one "
                             f"level) have no meaning for a dose")
        t1, t0 = self._doses(fitted, T0, T1)
        stage = fitted.dose
        if debiased:
            if not stage.debiased:
                raise ValueError("the estimator was fitted with debias=None; use "
                                 "average_effect(..., debiased=False) or refit with "
                                 "debias='aipw'")
            return stage.contrast(t1, t0)
        plugin = float(np.diff(stage.plugin([t0, t1]))[0])
        return AverageEffect("ate", plugin, float("nan"), plugin, len(stage.y), "plugin")

    def summary(self, T=None, *, alpha=0.05, value=0, decimals=3, feature_names=None,
                treatment_names=None, output_names=None):
        r"""As for a categorical treatment (one row per average effect); for a continuous one the
        average dose-response over the fitted units at a few doses, and each dose's contrast
        with the median dose, as an EconML ``Summary``.

        ``T``: the doses to report (default the 10th, 25th, 50th, 75th and 90th percentiles of
        the training doses). The first table is the average curve :math:`\hat\theta(t)` with its
        pointwise ``1 - alpha`` band (:meth:`dose_response`); the second, for every reported
        dose but the median, the contrast :math:`\hat\theta(t) - \hat\theta(t_{50})` with the
        interval of ``ate_interval(T0=t50, T1=t)`` and the t-test of ``contrast == value``.
        """
        fitted = self._dose_fit()
        if fitted is None:
            return super().summary(T, alpha=alpha, value=value, decimals=decimals,
                                   feature_names=feature_names,
                                   treatment_names=treatment_names, output_names=output_names)
        alpha = _check_alpha(alpha)
        doses, labels = _summary_doses(fitted, T)
        curve = self.dose_response(t_grid=doses, alpha=alpha)
        reference = float(fitted.encoding.quantiles[1])
        rows, stubs = [], []
        for dose, label in zip(doses, labels):
            if dose == reference:
                continue
            res = self.average_effect("ate", T0=reference, T1=dose,
                                      debiased=fitted.dose.debiased)
            with np.errstate(divide="ignore", invalid="ignore"):  # the plug-in: NaN stderr
                rows.append([res.estimate, res.stderr, (res.estimate - value) / res.stderr,
                             res.pvalue(value), *res.interval(alpha)])
            stubs.append(f"{label} - t50")
        output = self.cate_output_names(output_names)[0]
        n = len(fitted.dose.y)
        smry = Summary()
        smry.add_table(np.column_stack([curve.estimate, curve.stderr, curve.lower,
                                        curve.upper]).round(decimals),
                       ["point_estimate", "stderr", "ci_lower", "ci_upper"], labels,
                       f"Average dose-response E[{output}(t)] over the {n} fitted units")
        if rows:
            smry.add_table(np.array(rows, dtype=float).round(decimals),
                           ["point_estimate", "stderr", "zstat", "pvalue", "ci_lower",
                            "ci_upper"], stubs,
                           f"Contrasts with the median dose t50 = {reference:.4g}")
        smry.add_extra_txt(_dose_summary_text(fitted, curve, alpha))
        return smry

    # ------------------------------------------------------------------ categorical-only methods

    def best_linear_projection(self, *args, **kwargs):
        if self._dose_fit() is not None:
            raise ValueError(_CATEGORICAL_ONLY.format(name="best_linear_projection",
                                                      instead="dose_response(X)"))
        return super().best_linear_projection(*args, **kwargs)

    def individual_effect(self, X=None, W=None):
        if self._dose_fit() is not None:
            raise ValueError(_CATEGORICAL_ONLY.format(
                name="individual_effect", instead="effect(X, T0=t0, T1=t1) or dose_response(X)"))
        return super().individual_effect(X, W)

    def predict_outcomes(self, X=None, W=None):
        if self._dose_fit() is not None:
            raise ValueError(_CATEGORICAL_ONLY.format(name="predict_outcomes",
                                                      instead="dose_response(X, t_grid=...)"))
        return super().predict_outcomes(X, W)

    # ------------------------------------------------------------------ the curves
    def dose_response(self, X=None, t_grid=None, *, alpha=0.05) -> DoseResponse:
        r"""Dose-response curves on the doses ``t_grid`` with pointwise ``1 - alpha`` intervals.

        Parameters
        ----------
        X : array-like, optional
            None: the average dose-response :math:`\theta(t) = E[Y(t)]` over the fitted units,
            doubly robust (Kennedy et al. 2017) with the sandwich band of its local linear
            smoother (``docs/dose.md``), or the plug-in mean of the units' curves with
            ``debias=None`` (band: the members' jackknife). Rows of X: each row's curve
            :math:`\hat\mu(x, t)` (the members' mean plus the average curve's doubly robust
            correction) with the members' jackknife band (K-fold members; ``docs/inference.md``
            says what it covers: the variance of the heads, not their bias).
        t_grid : array-like of doses, optional
            Default: 50 doses from the 5th to the 95th percentile of the training doses (even
            on the dose's scale, ``dose_scale``). Doses outside the training range raise a
            ValueError.
        alpha : float, default 0.05

        Returns
        -------
        DoseResponse
            ``t``, ``estimate``, ``lower``, ``upper``, ``stderr`` ((P,) or (m, P)); ``to_frame()``,
            ``plot()``.
        """
        fitted = self._dose_fit()
        if fitted is None:
            self._check_fitted()
            raise ValueError("dose_response is for a continuous treatment; this estimator was "
                             "fitted on a categorical one: use effect(X, T0=..., T1=...) for "
                             "each arm (or refit with treatment='continuous' for a dose)")
        alpha = _check_alpha(alpha)
        grid = fitted.encoding.default_grid() if t_grid is None else np.asarray(t_grid, float)
        if grid.ndim != 1 or len(grid) == 0:
            raise ValueError(f"t_grid must be a 1-D sequence of doses; got shape {grid.shape}")
        fitted.encoding.check_labels(grid)
        if X is None:
            return self._average_response(fitted, grid, alpha)
        curves = fitted.dose_curves(X, grid, grid=True)
        members = fitted.dose_curves(X, grid, grid=True, members=True)
        return _jackknife_response(grid, curves, members, "individual", alpha,
                                   fitted.folds_as_members)

    def _average_response(self, fitted, grid, alpha) -> DoseResponse:
        stage = fitted.dose
        if stage.debiased:
            res = stage.adrf(grid)
            half = student_t.ppf(1 - alpha / 2, res.df) * res.stderr  # df inf: normal
            return DoseResponse(grid, res.estimate, res.estimate - half, res.estimate + half,
                                res.stderr, "average", "doubly robust (Kennedy et al. 2017): "
                                "local linear fit of the weighted residuals; band: sandwich "
                                "variance plus the members' jackknife, Student's t", alpha,
                                res.h)
        members = fitted.dose_curves(EncodedX(stage.x), grid, grid=True,  # already encoded
                                     members=True).mean(1)  # (K, P)
        return _jackknife_response(grid, stage.plugin(grid), members, "average", alpha,
                                   fitted.folds_as_members, method="plug-in (debias=None)")


#: The percentiles of the training doses that ``summary()`` reports by default.
SUMMARY_PERCENTILES = (10, 25, 50, 75, 90)


def _summary_doses(fitted, T) -> tuple[np.ndarray, list[str]]:
    """The doses of a dose fit's ``summary(T)`` and their row labels (tied percentiles once)."""
    if T is None:
        doses = np.percentile(fitted.dose.dose, SUMMARY_PERCENTILES)
        # the median exactly as the contrasts' reference holds it
        doses[SUMMARY_PERCENTILES.index(50)] = fitted.encoding.quantiles[1]
        labels = [f"t = {d:.4g} (p{p})" for d, p in zip(doses, SUMMARY_PERCENTILES)]
    else:
        doses = np.asarray(T, dtype=float).ravel()
        if doses.size == 0 or not np.isfinite(doses).all():
            raise ValueError(f"summary(T=...): T must hold one or more finite doses; got {T!r}")
        labels = [f"t = {d:.4g}" for d in doses]
    fitted.encoding.check_labels(doses)
    _, first = np.unique(doses, return_index=True)
    keep = np.sort(first)
    return doses[keep], [labels[i] for i in keep]


def _dose_summary_text(fitted, curve: DoseResponse, alpha: float) -> list[str]:
    dose = fitted.dose.dose
    lines = [fitted.effect_description(),
             f"Doses seen at fit: {len(dose)} from {dose.min():.4g} to {dose.max():.4g} "
             f"(5th-95th percentiles {fitted.encoding.quantiles[0]:.4g}-"
             f"{fitted.encoding.quantiles[2]:.4g}). Average curve: {curve.method}"
             + ("" if curve.bandwidth is None else f", bandwidth {curve.bandwidth:.3g} "
                f"{'in dose units' if fitted.dose.knots_t is None else 'on the rank scale'}")
             + f"; pointwise {1 - alpha:.0%} intervals."]
    if fitted.dose.debiased:
        lines.append(f"Contrasts: theta(t) - theta(t50), doubly robust, the influence function "
                     f"and the members' jackknife, Student's t (Satterthwaite's degrees of "
                     f"freedom); generalised propensity: {fitted.dose.gps_model}. Each unit's "
                     f"curve: dose_response(X); the whole average curve: dose_response().")
    else:
        lines.append("Contrasts: the plug-in, without a standard error (debias=None); refit with "
                     "debias='aipw' (the default) for their intervals.")
    return lines


def _jackknife_response(grid, estimate, members, kind, alpha, jackknife: bool,
                        method="members' mean") -> DoseResponse:
    """Curves with the members' jackknife band (t quantiles, K - 1 degrees of freedom); NaN
    bands where the members are not K-fold bagged."""
    k = members.shape[0]
    if jackknife:
        stderr = jackknife_stderr(members)
        half = student_t.ppf(1 - alpha / 2, k - 1) * stderr
        method += f", members' jackknife band ({k} K-fold members)"
    else:
        stderr = half = np.full(np.shape(estimate), np.nan)
        method += " (no band: the members are not K-fold bagged)"
    return DoseResponse(grid, estimate, estimate - half, estimate + half, stderr, kind, method,
                        alpha)
