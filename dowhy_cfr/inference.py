"""Inference for CFR: analytic intervals of the doubly robust average effects, and a bootstrap
that trains every replica in one stacked pass.

:class:`CFRAIPWInference` (``fit(..., inference="auto")``, the default) reads the influence
functions of the AIPW averages that every fit computes (:mod:`dowhy_cfr.debiased`): ``ate_interval``
and ``ate_inference`` for the fitted units cost nothing. :class:`AverageEffectsMixin` gives the
estimator ``average_effect`` (ATE, ATT, ATC over the fitted units) and ``ate()`` without X.

EconML's generic :class:`econml.inference.BootstrapInference` clones the estimator and refits it
once per replica. For a neural network that means ``n_bootstrap_samples`` full trainings.
:class:`CFRBootstrapInference` instead draws the (treatment-stratified) resamples up front and
trains all replicas as one ``K``-model stack with the core's vectorised training, then hands the
fitted replicas to EconML's own ``BootstrapEstimator``. Everything downstream --
``effect_interval``, ``effect_inference(...).summary_frame()``, ``ate_interval``,
``const_marginal_effect_interval``; ``"percentile"``, ``"pivot"`` and ``"normal"`` intervals -- is
EconML's code, unchanged.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd
from econml.inference import (BootstrapInference, EmpiricalInferenceResults,
                              NormalInferenceResults, PopulationSummaryResults)
from econml.inference._inference import Inference
from econml.inference._bootstrap import BootstrapEstimator
from econml.utilities import Summary, filter_none_kwargs
from scipy.stats import norm
from scipy.stats import t as student_t
from sklearn.base import clone

from . import _validation as V
from . import fitting
from .debiased import TARGETS, AverageEffect, aipw_terms, best_linear_projection, jackknife_stderr
from .fitted import effects_of
from .nuisance import CLIPPED_WARN_SHARE, Propensity

__all__ = ["CFRBootstrapInference", "CFRAIPWInference", "AverageEffectsMixin", "AverageSummary",
           "jackknife_stderr", "DoseInference", "CONSTANT_DOSE_EFFECT", "flat_doses"]

_POINTWISE = ("{name} under inference='aipw' (the default) reads the spread of the K-fold bagged "
              "ensemble members (a delete-a-group jackknife, docs/inference.md); {why}. Refit with "
              "n_ensemble >= 2 and cross_fit='auto' (the defaults), or with "
              "inference='bootstrap'.")
_OTHER_UNITS = ("inference='aipw' (the default) gives the interval of the average effect over the "
                "fitted units (ate_interval() with X=None or the X passed to fit), and over other "
                "units from the K-fold bagged members, which this fit does not have (n_ensemble "
                ">= 2, cross_fit). For other units fit with inference='bootstrap'.")


_CONSTANT = ("effect(X) of this fit is a constant, the doubly robust ATE at every x: the "
             "calibration test of the out-of-fold effects of the blend of the heads and the "
             "doubly robust regression (lam = {lam:.2f}) did not show that the effect varies "
             "(slope {kappa:.2f}, one-sided p = {p:.2g}; blend_test_, effect_model_). Its "
             "pointwise intervals therefore hold both the constant's and the blend's at each x "
             "(docs/inference.md). If the "
             "effect may vary: fit with final_blend=False (the heads' own effects) or read "
             "individual_effect(X); test the heterogeneity with best_linear_projection(X); "
             "TARNet() or a lower alpha keep more of it in the representation.")


def _user_stacklevel() -> int:
    """The ``stacklevel`` of a warning issued by the caller that names the first frame outside
    this package and EconML (the user's call, however EconML routed it)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in (
            "dowhy_cfr", "econml"):
        frame, level = frame.f_back, level + 1
    return level


def _replicas(inference) -> list | None:
    """The fitted bootstrap replicas (CFRs) of a bootstrap inference, else None."""
    if isinstance(inference, BootstrapInference) and "_est" in vars(inference):
        return list(inference._est._instances)
    return None


def _t_bounds(point, stderr, alpha: float, df: int):
    """``point -+ t_{df, 1 - alpha/2} * stderr``: the members' jackknife interval."""
    q = student_t.ppf(1 - alpha / 2, df)
    return point - q * stderr, point + q * stderr


class AverageSummary(PopulationSummaryResults):
    """EconML's population summary of an average effect, shaped as EconML's estimators shape
    theirs (the mean has the outcome's shape: a scalar for ``Y`` of shape (n,), (1,) for
    (n, 1)), plus :meth:`summary_frame`, the mean's rows as a DataFrame."""

    def summary_frame(self, alpha=None, value=None, decimals=None, output_names=None,
                      treatment_names=None) -> pd.DataFrame:
        """The rows of the first table of :meth:`summary` (one per outcome and treated arm):
        ``mean_point``, ``stderr_mean``, ``zstat``, ``pvalue``, ``ci_mean_lower``,
        ``ci_mean_upper``, indexed by outcome ``Y`` and treatment ``T`` names.

        Parameters
        ----------
        alpha : float, optional
            Interval at level ``1 - alpha`` (default the results' ``alpha``, 0.05).
        value : float, optional
            The null value of the z-test (default the results' ``value``, 0).
        decimals : int, optional
            Rounding (default the results' ``decimals``, 3).
        output_names, treatment_names : list of str, optional
            Row names (default those of the estimator, else ``Y0``, ``T0``, ...).
        """
        alpha = self.alpha if alpha is None else alpha
        value = self.value if value is None else value
        decimals = self.decimals if decimals is None else decimals
        lower, upper = self.conf_int_mean(alpha=alpha)
        columns = {"mean_point": self.mean_point, "stderr_mean": self.stderr_mean,
                   "zstat": self.zstat(value=value), "pvalue": self.pvalue(value=value),
                   "ci_mean_lower": lower, "ci_mean_upper": upper}
        outputs = output_names or self.output_names or [f"Y{i}" for i in range(self.d_y)]
        treatments = (treatment_names or self.treatment_names
                      or [f"T{i}" for i in range(self._d_t)])
        index = pd.MultiIndex.from_product([list(outputs), list(treatments)], names=["Y", "T"])
        size = len(index)
        frame = pd.DataFrame({k: np.broadcast_to(np.asarray(v, dtype=float).ravel(), (size,))
                              for k, v in columns.items()}, index=index)
        return frame.round(decimals)


class _JackknifeSummary(AverageSummary):
    """EconML's population summary whose mean's interval and p-value use Student's t with
    ``df = K - 1`` (the members' jackknife of an average over given units)."""

    def __init__(self, *args, df: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.df = float(df)

    def conf_int_mean(self, *, alpha=None):
        alpha = self.alpha if alpha is None else alpha
        return _t_bounds(self.mean_point, self.stderr_mean, alpha, self.df)

    def pvalue(self, *, value=None):
        value = self.value if value is None else value
        return 2 * student_t.sf(np.abs(self.zstat(value=value)), self.df)


def _arm_summary(est, X, estimates, stderrs, df=None) -> AverageSummary:
    """EconML's population summary of each treated arm's average effect (``const_marginal_ate``,
    shape ``d_y + d_t`` as EconML's discrete-treatment estimators): the arms' averages over the
    fitted units (X None) or the pointwise effects at X, with the given standard errors of the
    mean."""
    shape = tuple(est._d_y) + tuple(est._d_t)
    pred = (np.reshape(estimates, (1,) + shape) if X is None
            else np.asarray(est.const_marginal_effect(X), dtype=float))
    # pred_stderr: zeros so that summary() prints the mean's rows
    args = dict(pred=pred, pred_stderr=np.zeros_like(pred),
                mean_pred_stderr=np.reshape(stderrs, shape), d_t=shape[-1],
                d_y=est._d_y[0] if est._d_y else 1, output_names=est.cate_output_names(),
                treatment_names=est.cate_treatment_names())
    return AverageSummary(**args) if df is None else _JackknifeSummary(**args, df=df)


def _ate_summary(est, pred, pred_stderr, mean_stderr, df=None) -> AverageSummary:
    """EconML's population summary of one average effect (``ate_inference``): ``pred`` the
    average itself (X None) or the effects at the rows of X, shaped ``(m,) + d_y`` as
    ``effect(X)``; the standard error of the mean shaped ``d_y`` (a scalar for ``Y`` of shape
    (n,)), as EconML's ``conf_int_mean`` indexes it."""
    d_y = tuple(est._d_y)
    pred = np.reshape(np.asarray(pred, dtype=float), (-1,) + d_y)
    stderr = np.asarray(pred_stderr, dtype=float)
    stderr = np.full(pred.shape, float(stderr)) if stderr.ndim == 0 else stderr.reshape(pred.shape)
    args = dict(pred=pred, pred_stderr=stderr,
                mean_pred_stderr=np.reshape(np.asarray(mean_stderr, dtype=float), d_y),
                d_t=1, d_y=d_y[0] if d_y else 1, output_names=est.cate_output_names())
    return AverageSummary(**args) if df is None else _JackknifeSummary(**args, df=df)


def _per_row(value, pred):
    """An offset or factor of EconML's ``translate``/``scale`` shaped to broadcast against
    ``pred`` (m, ...): a pandas Series, or a 1-D array numpy would not broadcast, with one entry
    per row is aligned with the rows (EconML's rule aligns it with the last axis, which for a
    discrete treatment holds the treated arms)."""
    arr = np.asarray(value)
    shape = np.shape(pred)
    if (arr.ndim == 1 and len(shape) > 1 and len(arr) == shape[0]
            and (isinstance(value, pd.Series) or len(arr) != shape[-1])):
        return arr.reshape((-1,) + (1,) * (len(shape) - 1))
    return arr


class _RowEmpiricalResults(EmpiricalInferenceResults):
    """Bootstrap results whose ``translate``/``scale`` take one value per row (:func:`_per_row`)."""

    def translate(self, other):
        super().translate(_per_row(other, self.pred))

    def scale(self, factor):
        super().scale(_per_row(factor, self.pred))


class _RowNormalResults(NormalInferenceResults):
    """Normal bootstrap results whose ``translate``/``scale`` take one value per row."""

    def translate(self, offset):
        super().translate(_per_row(offset, self.pred))

    def scale(self, factor):
        super().scale(_per_row(factor, self.pred))


class _JackknifeResults(_RowNormalResults):
    """Pointwise results of the members' jackknife: the standard error is the jackknife's, the
    intervals and p-values use Student's t with ``df = K - 1`` degrees of freedom (K members)."""

    def __init__(self, *args, df: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.df = float(df)

    def conf_int(self, alpha=0.05):
        return _t_bounds(self.point_estimate, self.stderr, alpha, self.df)

    def pvalue(self, value=0):
        return 2 * student_t.sf(np.abs(self.zstat(value)), self.df)


class _ChoiceResults(_JackknifeResults):
    """Pointwise results where the blend reported a constant effect: the point estimate and
    ``const_stderr`` are the constant's (the members' fold-deleted averages), ``mix_pred`` and
    ``mix_stderr`` the jackknife of the blend it beat. The interval at each x is the smallest
    one holding both candidates' t intervals; the p-value the larger of their two (the interval
    excludes a value exactly where both do); ``stderr`` the larger of the two."""

    def __init__(self, *args, df: int, mix_pred, mix_stderr, **kwargs):
        super().__init__(*args, df=df, **kwargs)
        self.const_stderr = np.copy(self.pred_stderr)
        self.mix_pred, self.mix_stderr = np.copy(mix_pred), np.copy(mix_stderr)
        self.pred_stderr = np.maximum(self.const_stderr, self.mix_stderr)

    def conf_int(self, alpha=0.05):
        lo, hi = _t_bounds(self.point_estimate, self.const_stderr, alpha, self.df)
        mix_lo, mix_hi = _t_bounds(self.mix_pred, self.mix_stderr, alpha, self.df)
        return np.minimum(lo, mix_lo), np.maximum(hi, mix_hi)

    def pvalue(self, value=0):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.maximum(*(2 * student_t.sf(np.abs(point - value) / se, self.df) for point, se
                                in ((self.point_estimate, self.const_stderr),
                                    (self.mix_pred, self.mix_stderr))))

    def translate(self, offset):
        super().translate(offset)
        self.mix_pred = self.mix_pred + _per_row(offset, self.mix_pred)

    def scale(self, factor):
        super().scale(factor)
        factor = _per_row(factor, self.mix_pred)
        self.mix_pred = self.mix_pred * factor
        self.mix_stderr, self.const_stderr = (v * np.abs(factor) for v in
                                              (self.mix_stderr, self.const_stderr))


def _portable(res):
    """EconML's bootstrap inference results as the classes above, without the local function
    EconML's ``BootstrapEstimator`` attaches as ``fname_transformer`` (the identity for effects),
    so that they can be pickled."""
    names = dict(feature_names=res.feature_names, output_names=res.output_names,
                 treatment_names=res.treatment_names)
    if isinstance(res, EmpiricalInferenceResults):
        return _RowEmpiricalResults(res.d_t, res.d_y, res.pred, res.pred_dist, res.inf_type,
                                    None, **names)
    if isinstance(res, NormalInferenceResults):
        return _RowNormalResults(res.d_t, res.d_y, res.pred, res.pred_stderr,
                                 res.mean_pred_stderr, res.inf_type, None, **names)
    return res


def _clipped_line(stage) -> list:
    """The summary's line on the clipped propensities (none without a recorded share)."""
    share = None if stage is None else stage.clipped_share
    if share is None:
        return []
    clip = "min_propensity" if stage.min_propensity is None else \
        f"min_propensity={stage.min_propensity:g}"
    line = (f"Propensities: {share:.1%} of the fitted units had an estimated propensity below "
            f"{clip} for some arm, clipped to it (clipped_share_).")
    if share > CLIPPED_WARN_SHARE:
        line += (f" Above {CLIPPED_WARN_SHARE:.0%}: limited overlap, the averages lean on the "
                 f"outcome model there; check overlap, trim the sample or lower min_propensity.")
    return [line]


def _one_label(T, name):
    values = np.unique(np.asarray(T, dtype=object).ravel())
    if len(values) != 1:
        raise ValueError(f"{name} must be a single treatment level for an average effect; got "
                         f"{len(values)} different values")
    return values[0]


class AverageEffectsMixin:
    """``average_effect`` and ``ate()`` over the fitted units (mixed into :class:`~dowhy_cfr.CFR`)."""

    def average_effect(self, target="ate", *, T0=0, T1=1, debiased=True) -> AverageEffect:
        """Average effect of ``T1`` vs ``T0`` over the fitted units, with its standard error.

        Parameters
        ----------
        target : {"ate", "att", "atc"}
            All fitted units, the units at ``T1`` ("att") or at ``T0`` ("atc").
        T0, T1 : treatment labels (default 0 and 1)
        debiased : bool, default True
            True: the doubly robust (AIPW) estimate with its influence-function standard error
            (:mod:`dowhy_cfr.debiased`). False: the plug-in mean of the heads' unit-level effects
            ``tau(x_i, w_i)`` over the target's units (no shift; with W these are the unit-level
            effects, not ``model_final``'s), without a standard error.

        Returns
        -------
        dowhy_cfr.debiased.AverageEffect
            ``estimate``, ``stderr``, ``interval(alpha)``, ``pvalue()``, ``plugin``, ``n_units``.
        """
        stage, a1, a0 = self._debiased_arms(T0, T1, debiased, "average_effect(..., debiased=False)")
        return stage.average(target, a1, a0, debiased)

    def best_linear_projection(self, Z=None, *, T0=0, T1=1, alpha=0.05) -> pd.DataFrame:
        """How the effect of ``T1`` vs ``T0`` varies with covariates ``Z`` of the fitted units.

        The least-squares fit of the units' doubly robust effect scores on ``Z`` (centred): the
        best linear approximation of the effect in ``Z``, with sandwich standard errors and normal
        intervals (Semenova & Chernozhukov 2021; GRF's ``best_linear_projection``;
        :func:`dowhy_cfr.debiased.best_linear_projection`). The intercept is the doubly robust
        ATE. A summary of heterogeneity with valid intervals, which ``effect(X)`` (the heads'
        effects blended with a regression, or a constant) does not give; where the effect is
        close to linear it is also the more accurate CATE (``docs/inference.md``, "How the
        effect varies").

        Parameters
        ----------
        Z : array-like, DataFrame or Series, optional
            Covariates of the fitted units, shape (n, q): one row per unit in the order given to
            ``fit``, columns of X or W or other unit-level variables. None: the intercept alone.
        T0, T1 : treatment labels (default 0 and 1)
        alpha : float, default 0.05
            Intervals at level ``1 - alpha``.

        Returns
        -------
        pandas.DataFrame
            One row per coefficient ("intercept", then Z's columns): ``estimate``, ``stderr``,
            ``ci_lower``, ``ci_upper``, ``pvalue`` (of a zero coefficient).

        Examples
        --------
        >>> est = CFR(random_state=0).fit(Y, T, X=X)         # doctest: +SKIP
        >>> est.best_linear_projection(X[:, [0, 1]])          # doctest: +SKIP
        """
        stage, a1, a0 = self._debiased_arms(T0, T1, True, "effect(X)")
        if not 0 < float(alpha) < 1:
            raise ValueError(f"alpha={alpha!r} must be in (0, 1), e.g. 0.05")
        z = None if Z is None else V.as_2d_float("Z", Z)
        if z is not None and len(z) != len(stage.y):
            raise ValueError(f"Z has {len(z)} rows; it needs one row per fitted unit "
                             f"({len(stage.y)}), in the order given to fit")
        names = [] if z is None else (V.column_names(Z) or (
            [str(Z.name)] if isinstance(Z, pd.Series) and Z.name is not None
            else [f"Z{j}" for j in range(z.shape[1])]))
        psi, _ = aipw_terms(stage.y, stage.arms, stage.mu, stage.e, a1=a1, a0=a0, target="ate")
        return best_linear_projection(psi, z, names, float(alpha))

    def _debiased_arms(self, T0, T1, debiased: bool, instead: str):
        """The fitted debiased stage and the arm indices of ``T1`` and ``T0``; ValueError where
        there is none (``instead``: what to use then)."""
        fitted = self._check_fitted()
        stage = fitted.debiased
        if stage is None:
            raise ValueError("this fit kept no fitted units (fit_chunks or an older save); refit "
                             "with fit(Y, T, X=...) for average effects")
        if debiased and stage.e is None:
            raise ValueError(f"the estimator was fitted with debias=None; use {instead} or "
                             f"refit with debias='aipw'")
        fitted.encoding.check_labels([T0], [T1])
        a1, a0 = (int(fitted.encoding.arms([_one_label(v, n)])[0])
                  for v, n in ((T1, "T1"), (T0, "T0")))
        if a1 == a0:
            raise ValueError(f"T0 and T1 are the same treatment level ({T0!r})")
        return stage, a1, a0

    def ate(self, X=None, *, T0=0, T1=1):
        """The mean of ``effect(X, T0=T0, T1=T1)`` over the rows of X (EconML's contract).

        ``X=None`` (for an estimator fitted with X): the average effect over the fitted units,
        which is the mean of ``effect`` over them: the doubly robust ATE (the heads' plug-in mean
        with ``debias=None``).
        """
        fitted = self._check_fitted()
        stage = fitted.debiased
        if X is not None or fitted.columns.n_x == 0 or stage is None:
            return super().ate(X, T0=T0, T1=T1)
        value = self.average_effect("ate", T0=T0, T1=T1, debiased=stage.e is not None).estimate
        return np.full(self._d_y, value) if self._d_y else np.float64(value)

    def marginal_ate(self, T, X=None):
        """The mean of ``marginal_effect(T, X)`` over the rows of X; ``X=None``: each arm's
        average effect vs control over the fitted units (:meth:`const_marginal_ate`)."""
        if X is None:
            return self.const_marginal_ate(None)
        return super().marginal_ate(T, X)

    def summary(self, T=None, *, alpha=0.05, value=0, decimals=3, feature_names=None,
                treatment_names=None, output_names=None) -> Summary:
        """The average effects over the fitted units with their intervals, as an EconML summary.

        One row per average (ATE, ATT, ATC; ``"ATE|T_b"`` etc. with several treated arms) of each
        treated arm vs the control arm (``T``: that arm only, as EconML's discrete-treatment
        estimators' ``summary(T)``): ``point_estimate``, ``stderr``, ``zstat`` and ``pvalue``
        of the z-test of ``effect == value``, and the normal ``1 - alpha`` interval ``ci_lower``,
        ``ci_upper`` (the columns of EconML's ``summary_frame``). EconML's linear estimators
        summarise their final-stage coefficients; CFR has no linear final stage, so its summary
        is of the average effects, whose intervals are valid (pointwise ones need the
        bootstrap).

        Its text also says what ``effect(X)`` reports (``effect_model_``, ``blend_lambda_``).

        The estimates are those of :meth:`average_effect` (doubly robust with ``debias="aipw"``,
        the plug-in with ``debias=None``); the standard errors those of the fitted inference:
        the influence function's (``inference="auto"``/"aipw") or the standard deviation of the
        bootstrap replicas' averages (``inference="bootstrap"``, each replica averaging over its
        own resample).

        Parameters
        ----------
        T : treatment label, optional
            A treated arm: its rows only (default every treated arm). The first positional
            argument, as in EconML's discrete-treatment estimators; give ``alpha`` by keyword.
        alpha : float, default 0.05
            Intervals at level ``1 - alpha``.
        value : float, default 0
            The null value of the z-tests.
        decimals : int, default 3
            Rounding.
        feature_names : list of str, optional
            Accepted as EconML's ``summary`` accepts it; unused (no coefficient table).
        treatment_names, output_names : list of str, optional
            Names of the treated arms and of the outcome (default those seen at fit).

        Returns
        -------
        econml.utilities.Summary
            ``print(est.summary())``; ``summary.tables[0].data`` holds the header and the rows.
        """
        if not 0 < float(alpha) < 1:
            raise ValueError(f"alpha={alpha!r} must be in (0, 1), e.g. 0.05")
        rows, labels, source = self._average_rows(treatment_names, self._summary_arms(T))
        estimate, stderr = np.array(rows).T
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (estimate - value) / stderr
        half = norm.ppf(1 - alpha / 2) * stderr
        table = np.column_stack([estimate, stderr, z, 2 * norm.sf(np.abs(z)), estimate - half,
                                 estimate + half]).round(decimals)
        output = self.cate_output_names(output_names)[0]
        smry = Summary()
        smry.add_table(table, ["point_estimate", "stderr", "zstat", "pvalue", "ci_lower",
                               "ci_upper"], labels,
                       f"Average effects on {output} over the {len(self.fitted_.debiased.y)} "
                       f"fitted units")
        smry.add_extra_txt([f"ATE: all fitted units; ATT/ATC: the units at the treated/control "
                            f"arm. Standard errors: {source}; normal {1 - alpha:.0%} intervals.",
                            self.fitted_.effect_description()]
                           + _clipped_line(self.fitted_.debiased))
        return smry

    def _summary_arms(self, T) -> list | None:
        """The treated arms (categories) ``summary(T)`` reports: ``[T]``, or None for all;
        ValueError naming the choices for anything else."""
        if T is None:
            return None
        cats = self._check_fitted().encoding.categories
        label = _one_label([T], "T") if np.ndim(T) == 0 else _one_label(T, "T")
        if label in cats[1:]:
            return [cats[cats.index(label)]]
        treated = [V.plain(c) for c in cats[1:]]
        why = ("is the control arm" if label == cats[0] else "is not a fitted treatment level")
        raise ValueError(f"summary(T={V.plain(label)!r}): T {why}; T selects the treated arm to "
                         f"summarise against the control {V.plain(cats[0])!r} (as EconML's "
                         f"summary(T)), one of {treated}, or None for all. Pass the interval "
                         f"level by keyword: summary(alpha=...)")

    def _average_rows(self, treatment_names=None, arms=None):
        """``(estimate, stderr)`` per treated arm (``arms``: these only) and target, their row
        labels and where the standard errors come from; ValueError without an inference for
        the averages."""
        stage = self._check_fitted().debiased
        replicas = _replicas(getattr(self, "_inference", None))
        debiased = stage is not None and stage.e is not None
        if stage is None or (replicas is None and not debiased):
            raise ValueError("summary() needs standard errors of the average effects over the "
                             "fitted units: fit with fit(Y, T, X=...) and debias='aipw' (the "
                             "default) or inference='bootstrap'")
        cats = self.fitted_.encoding.categories
        names = self.cate_treatment_names(treatment_names)
        rows, labels = [], []
        for arm, name in zip(cats[1:], names):
            if arms is not None and arm not in arms:
                continue
            for target in TARGETS:
                res = self.average_effect(target, T0=cats[0], T1=arm, debiased=debiased)
                stderr = res.stderr if replicas is None else float(np.std(
                    [r.average_effect(target, T0=cats[0], T1=arm, debiased=debiased).estimate
                     for r in replicas]))
                rows.append((res.estimate, stderr))
                labels.append(target.upper() if len(cats) == 2 else f"{target.upper()}|{name}")
        source = ("the influence function of the AIPW estimates" if replicas is None else
                  f"standard deviation over {len(replicas)} bootstrap replicas")
        return rows, labels, source

    def const_marginal_ate(self, X=None):
        """The mean of ``const_marginal_effect(X)`` over the rows of X; ``X=None``: each arm's
        average effect vs control over the fitted units (as :meth:`ate`)."""
        fitted = self._check_fitted()
        stage = fitted.debiased
        if X is not None or fitted.columns.n_x == 0 or stage is None:
            return super().const_marginal_ate(X)
        cats = fitted.encoding.categories
        values = np.array([self.average_effect("ate", T0=cats[0], T1=c,
                                               debiased=stage.e is not None).estimate
                           for c in cats[1:]])
        return np.reshape(values, tuple(self._d_y) + tuple(self._d_t))


class CFRAIPWInference(Inference):
    """Analytic intervals of CFR's doubly robust average effects (``inference="auto"``/"aipw").

    ``ate_interval(X)``, ``ate_inference(X)`` (an EconML ``PopulationSummaryResults``) and
    ``const_marginal_ate_interval(X)`` are those of the AIPW ATE over the fitted units -- X must
    be None or the X given to ``fit``. The standard error is the influence function's
    (:func:`dowhy_cfr.debiased.average_effect`); ``est.average_effect("att")`` gives the ATT and
    ATC.

    Pointwise intervals (``effect_interval``, ``effect_inference``,
    ``const_marginal_effect_interval``/``_inference``) of the CATE ``tau(x)`` come from the
    members: with ``n_ensemble = K >= 2`` K-fold bagged members (the default), member j left out
    fold j, so the members' effects at x are the leave-one-fold-out estimates of a
    delete-a-group jackknife. The standard error is
    ``sqrt((K - 1) / K * sum_j (tau_j(x) - mean_j tau_j(x))^2)`` and the interval
    ``effect(x) +- t_{K-1, 1 - alpha/2} * stderr``. It is an interval for ``tau(x)`` (not for a
    unit's ``Y(1) - Y(0)``), it costs no training, and it covers the variance of the estimate,
    not its bias: where the networks smooth over a jump or extrapolate, it under-covers
    (coverage measured in ``docs/inference.md``). With W at fit the effects are
    ``model_final``'s regression of the unit-level effects on X; its jackknife refits
    ``model_final`` to each member's unit-level effects (K extra fits, on first use). Where the
    blend reported a constant effect (``effect_model_ == "constant"``) they warn and give at each
    x the smallest interval that holds the constant's and the rejected blend's t intervals
    (``docs/inference.md``, "After a constant choice").
    """

    @property
    def pointwise(self) -> bool:
        """Whether ``effect_interval`` works: K-fold bagged members (K >= 2) and X at fit."""
        fitted = self._est.fitted_
        return (fitted.folds_as_members and fitted.columns.n_x > 0
                and (fitted.final is None or fitted.final.member_tau is not None))

    @classmethod
    def default_for(cls, estimator):
        """The fitted inference of an estimator with a debiased stage, else None."""
        stage = estimator.fitted_.debiased
        return None if stage is None or stage.e is None else cls().fit(estimator)

    def fit(self, estimator, *args, **kwargs):
        stage = getattr(getattr(estimator, "fitted_", None), "debiased", None)
        if stage is None or stage.e is None:
            raise ValueError("inference='aipw' needs a CFR fitted with debias='aipw' (the "
                             "default); use inference='bootstrap' otherwise")
        self._est = estimator
        self.d_t = estimator._d_t[0] if estimator._d_t else 1
        self.d_y = estimator._d_y[0] if estimator._d_y else 1
        return self

    def _fitted_units(self, X) -> bool:
        """Whether X is None or the fitted units' X (the doubly robust averages); False for
        other units (the members' jackknife of the mean, where the fit has one)."""
        fitted = self._est.fitted_
        if X is None:
            return True
        if fitted.columns.n_x == 0:
            raise ValueError(_OTHER_UNITS)
        if fitted.debiased.is_fitted_x(fitted.columns.block("X", X)):
            return True
        if not self.pointwise:
            raise ValueError(_OTHER_UNITS)
        return False

    def ate_inference(self, X=None, *, T0=0, T1=1):
        """The doubly robust ATE over the fitted units (X None or theirs) with its influence
        function's standard error; over other units, the mean of ``effect(X)`` with the
        members' jackknife standard error of that mean (t quantiles)."""
        if not self._fitted_units(X):
            pred, effects = self._member_effects(X, T0, T1, "ate_inference")
            return _ate_summary(self._est, pred, jackknife_stderr(effects),
                                jackknife_stderr(effects.mean(1)), df=len(effects) - 1)
        res = self._est.average_effect("ate", T0=T0, T1=T1)
        pred = res.estimate if X is None else self._est.effect(X, T0=T0, T1=T1)
        # pred_stderr: zeros so that summary() prints the mean's rows; there are no pointwise ones
        return _ate_summary(self._est, pred, 0.0, res.stderr)

    def ate_interval(self, X=None, *, T0=0, T1=1, alpha=0.05):
        return self.ate_inference(X, T0=T0, T1=T1).conf_int_mean(alpha=alpha)

    def ate_std(self, X=None, *, T0=0, T1=1):
        """The standard error of ``ate(X)`` (:meth:`ate_inference`'s)."""
        return self.ate_inference(X, T0=T0, T1=T1).stderr_mean

    def const_marginal_ate_inference(self, X=None):
        if not self._fitted_units(X):
            _, effects = self._arm_effects(X, "const_marginal_ate_inference")  # (K, m, d_t)
            return _arm_summary(self._est, X, None, jackknife_stderr(effects.mean(1)),
                                df=len(effects) - 1)
        cats = self._est.fitted_.encoding.categories
        res = [self._est.average_effect("ate", T0=cats[0], T1=c) for c in cats[1:]]
        return _arm_summary(self._est, X, [r.estimate for r in res], [r.stderr for r in res])

    def const_marginal_ate_interval(self, X=None, *, alpha=0.05):
        return self.const_marginal_ate_inference(X).conf_int_mean(alpha=alpha)

    def marginal_ate_inference(self, T, X=None):
        return self.const_marginal_ate_inference(X)

    def marginal_ate_interval(self, T, X=None, *, alpha=0.05):
        return self.const_marginal_ate_interval(X, alpha=alpha)

    # ------------------------------------------------------------------ pointwise
    def _member_outcomes(self, X, name: str) -> np.ndarray:
        """The members' potential outcomes at X, (K, n_arms, m); NotImplementedError naming
        the fix where the fit has no jackknife members."""
        fitted = self._est.fitted_
        if fitted.columns.n_x == 0:
            raise ValueError(f"{name} needs X: the estimator was fitted with X=None; use "
                             f"ate_interval() for the average effect")
        if X is None:
            raise ValueError(f"{name} needs the units' X (pass X=...)")
        if not fitted.folds_as_members:
            why = (f"this fit has {fitted.members.n_models} member(s)" +
                   ("" if fitted.members.n_models < 2 else " trained with cross_fit=False"))
            raise NotImplementedError(_POINTWISE.format(name=name, why=why))
        outcomes = fitted.member_potential_outcomes(X)
        if outcomes is None:
            why = "this model was saved without its members' effects for model_final (W)"
            raise NotImplementedError(_POINTWISE.format(name=name, why=why))
        return outcomes

    def _results(self, pred, effects, d_t, mix=None):
        """The jackknife results of ``pred`` from the members' ``effects`` (K, ...); with
        ``mix`` (its point and members' effects, where the blend reported a constant) the
        results that hold both candidates (:class:`_ChoiceResults`)."""
        est = self._est
        names = dict(feature_names=est.cate_feature_names(), output_names=est.cate_output_names())
        if d_t is not None:
            names["treatment_names"] = est.cate_treatment_names()
        shape, df = np.shape(pred), len(effects) - 1
        args = (d_t, self.d_y, pred, np.reshape(jackknife_stderr(effects), shape), None,
                "effect", None)
        if mix is None:
            return _JackknifeResults(*args, df=df, **names)
        return _ChoiceResults(*args, df=df, mix_pred=np.reshape(mix[0], shape),
                              mix_stderr=np.reshape(jackknife_stderr(mix[1]), shape), **names)

    def _rejected_mix(self, X):
        """Where ``effect(X)`` is the constant the blend chose: the blend it beat at X (its
        potential outcomes (n_arms, m) and its members' (K, n_arms, m)), with a warning that
        says so; None otherwise."""
        fitted = self._est.fitted_
        mix = fitted.rejected_mix(X)
        if mix is not None:
            warnings.warn(_CONSTANT.format(lam=fitted.blend.lam, kappa=fitted.blend.test.kappa,
                                           p=fitted.blend.test.pvalue), UserWarning,
                          stacklevel=_user_stacklevel())
        return mix

    def _arm_effects(self, X, name: str):
        """``const_marginal_effect(X)`` and each member's (K, m, d_t)."""
        outcomes = self._member_outcomes(X, name)
        pred = np.asarray(self._est.const_marginal_effect(X), dtype=float)
        return pred, np.stack([effects_of(member) for member in outcomes])

    def _arm_pair(self, m: int, T0, T1):
        """The arms ``(a1, a0)`` of ``T1`` and ``T0`` for each of ``m`` rows."""
        encoding = self._est.fitted_.encoding
        return (np.broadcast_to(encoding.arms(np.asarray(T, dtype=object).ravel()), (m,))
                for T in (T1, T0))

    def _member_effects(self, X, T0, T1, name: str):
        """``effect(X, T0, T1)`` and each member's (K, m)."""
        outcomes = self._member_outcomes(X, name)
        pred = np.asarray(self._est.effect(X, T0=T0, T1=T1), dtype=float)  # checks the labels
        rows = np.arange(outcomes.shape[-1])
        a1, a0 = self._arm_pair(len(rows), T0, T1)
        return pred, outcomes[:, a1, rows] - outcomes[:, a0, rows]

    def const_marginal_effect_inference(self, X):
        pred, effects = self._arm_effects(X, "const_marginal_effect_inference")
        mix = self._rejected_mix(X)
        if mix is not None:
            mix = effects_of(mix[0]), np.stack([effects_of(member) for member in mix[1]])
        return self._results(pred, effects, self.d_t, mix)

    def const_marginal_effect_interval(self, X, *, alpha=0.05):
        return self.const_marginal_effect_inference(X).conf_int(alpha=alpha)

    def effect_inference(self, X, *, T0=0, T1=1):
        pred, effects = self._member_effects(X, T0, T1, "effect_inference")
        mix = self._rejected_mix(X)
        if mix is not None:
            rows = np.arange(len(effects[0]))
            a1, a0 = self._arm_pair(len(rows), T0, T1)
            mix = mix[0][a1, rows] - mix[0][a0, rows], mix[1][:, a1, rows] - mix[1][:, a0, rows]
        return self._results(pred, effects, None, mix)

    def effect_interval(self, X, *, T0=0, T1=1, alpha=0.05):
        return self.effect_inference(X, T0=T0, T1=T1).conf_int(alpha=alpha)

    def marginal_effect_inference(self, T, X):
        """As :meth:`const_marginal_effect_inference` (a discrete treatment's marginal effect
        does not depend on T)."""
        return self.const_marginal_effect_inference(X)

    def marginal_effect_interval(self, T, X, *, alpha=0.05):
        return self.const_marginal_effect_interval(X, alpha=alpha)

_BOOTSTRAP_TYPES = ("percentile", "pivot", "normal")


class _StackedBootstrapEstimator(BootstrapEstimator):
    """EconML's BootstrapEstimator whose replicas come from one stacked CFR training."""

    def __init__(self, wrapped, n_bootstrap_samples, bootstrap_type, random_state,
                 n_steps=None, members=1):
        # no clones are made here: the replicas are built in fit
        self._instances = []
        self._n_bootstrap_samples = n_bootstrap_samples
        self._n_jobs = 1
        self._verbose = 0
        self._compute_means = False
        self._bootstrap_type = bootstrap_type
        self._wrapped = wrapped
        self._random_state = random_state
        self._n_steps = n_steps
        self._members = members

    def fit(self, Y, T, *, X=None, W=None):
        """The replicas (:func:`dowhy_cfr.fitting.bootstrap`), with the fit's alpha and
        propensity; ``n_steps``: that many steps each, without early stopping (None: as the
        estimator); ``members``: networks per replica (1, or "fit": the estimator's)."""
        est = self._wrapped
        template = clone(est)
        if self._members == 1:
            template.set_params(n_ensemble=1, cross_fit=False)
        if fitting.alpha_grid(est.alpha) is not None:  # the replicas refit the chosen alpha
            template.set_params(alpha=est.alpha_)
        if self._n_steps is not None:
            template.set_params(n_iter=int(self._n_steps), patience=None)
        base = est.random_state if self._random_state is None else self._random_state
        stage = est.fitted_.debiased
        propensity = (None if stage.e is None else
                      Propensity(stage.e, stage.propensity_model, stage.clipped))
        fits = fitting.bootstrap(template, Y, T, X, W, self._n_bootstrap_samples, base,
                                 propensity=propensity)
        self._instances = [clone(template)._set_fitted(f, Y, T, X) for f in fits]
        return self


class CFRBootstrapInference(BootstrapInference):
    """Bootstrap intervals for :class:`~dowhy_cfr.CFR` from one stacked training of all replicas.

    Each replica draws its own stratified training/validation split of the units and network
    seed, then resamples each side with replacement within each treatment arm (so every replica
    keeps the arms' sizes and no unit is on both sides). This is what ``inference="bootstrap"``
    gives a CFR.

    Parameters
    ----------
    n_bootstrap_samples : int, default 100
        Number of replicas (all trained together).
    bootstrap_type : {"pivot", "percentile", "normal"}, default "pivot"
        How intervals are formed from the replicas (EconML's definitions).
    random_state : int, RandomState or None, default None
        Seed of the resamples and the replicas' networks. None derives it from the estimator's
        ``random_state`` (so a seeded estimator gives reproducible intervals).
    replica_steps : {"fitted", "early_stopping"} or int, default "fitted"
        How long each replica trains. ``"fitted"``: the number of steps the estimator's own early
        stopping selected (``best_iteration_``, the largest over ``n_ensemble`` members), with
        no early stopping of its own -- the stopping time is treated as a tuning parameter chosen
        on the full data, as for any bootstrap of a tuned procedure. The replicas then skip the
        ``patience`` evaluations past the best step that the estimator needed to find it, which
        makes 100 replicas several times cheaper (see docs/inference.md). ``"early_stopping"``:
        every replica runs the estimator's schedule and early stopping on its own validation
        split (the stopping time's own variability enters the intervals). An int: that many steps.
    replica_members : 1 or "fit", default 1
        Networks per replica. 1: each replica is one network, so its estimates vary at least as
        much as the estimator's average of ``n_ensemble`` members, and the intervals err on the
        wide side; 100 replicas cost about 7 default fits on IHDP. ``"fit"``: the estimator's
        own ``n_ensemble`` members per replica (the same estimator resampled), about 40 default
        fits.
    verbose : int, default 0
        Unused; kept for signature compatibility with ``BootstrapInference``.

    Examples
    --------
    >>> from dowhy_cfr import CFR, CFRBootstrapInference
    >>> est = CFR(n_iter=500).fit(Y, T, X=X, inference=CFRBootstrapInference(50))  # doctest: +SKIP
    >>> lo, hi = est.effect_interval(X, alpha=0.1)  # doctest: +SKIP
    """

    def __init__(self, n_bootstrap_samples=100, bootstrap_type="pivot", random_state=None,
                 replica_steps="fitted", replica_members=1, verbose=0):
        V.check_int("n_bootstrap_samples", n_bootstrap_samples, 2)
        if bootstrap_type not in _BOOTSTRAP_TYPES:
            raise ValueError(f"bootstrap_type={bootstrap_type!r} is invalid: choose one of "
                             f"{_BOOTSTRAP_TYPES}")
        if not (isinstance(replica_steps, str) and replica_steps in ("fitted", "early_stopping")):
            try:
                V.check_int("replica_steps", replica_steps, 1)
            except ValueError:
                raise ValueError(f"replica_steps={replica_steps!r} is invalid: use 'fitted', "
                                 f"'early_stopping' or a positive number of steps") from None
        if not (replica_members == 1 or (isinstance(replica_members, str)
                                         and replica_members == "fit")):
            raise ValueError(f"replica_members={replica_members!r} is invalid: use 1 (one network "
                             f"per replica) or 'fit' (the estimator's n_ensemble members)")
        super().__init__(n_bootstrap_samples=n_bootstrap_samples, n_jobs=1,
                         bootstrap_type=bootstrap_type, verbose=verbose)
        self.n_bootstrap_samples = n_bootstrap_samples
        self.bootstrap_type = bootstrap_type
        self.random_state = random_state
        self.replica_steps = replica_steps
        self.replica_members = replica_members

    def fit(self, estimator, *args, **kwargs):
        if not hasattr(estimator, "fitted_"):
            raise TypeError(
                f"CFRBootstrapInference works with dowhy_cfr's CFR/TARNet, not "
                f"{type(estimator).__name__}; use econml.inference.BootstrapInference instead"
            )
        if self.replica_steps == "fitted":
            n_steps = max(1, int(np.max(estimator.best_iteration_)))
        elif self.replica_steps == "early_stopping":
            n_steps = None
        else:
            n_steps = int(self.replica_steps)
        est = _StackedBootstrapEstimator(estimator, self._n_bootstrap_samples,
                                         self._bootstrap_type, self.random_state, n_steps,
                                         self.replica_members)
        est.fit(*args, **filter_none_kwargs(**kwargs))
        self._est = est
        self._d_t = estimator._d_t
        self._d_y = estimator._d_y
        self.d_t = self._d_t[0] if self._d_t else 1
        self.d_y = self._d_y[0] if self._d_y else 1

    # The average effects' intervals come from the replicas' own averages (EconML's generic
    # Inference would bound them by the pointwise variances instead, far too wide).
    def ate_interval(self, X=None, *, T0=0, T1=1, alpha=0.05):
        """The ``bootstrap_type`` interval of ``ate(X)`` from the replicas' ``ate(X)`` (X=None:
        each replica's average effect over its own resample of the fitted units)."""
        return self._est.ate_interval(X, T0=T0, T1=T1, lower=100 * alpha / 2,
                                      upper=100 * (1 - alpha / 2))

    def ate_stderr(self, X=None, *, T0=0, T1=1):
        """The standard deviation of the replicas' ``ate(X)``."""
        return self._est.ate_std(X, T0=T0, T1=T1)

    def ate_inference(self, X=None, *, T0=0, T1=1):
        """EconML's population summary of ``ate(X)`` with the replicas' standard deviation as
        its standard error (normal intervals; ``ate_interval`` uses ``bootstrap_type``)."""
        wrapped = self._est._wrapped
        pred = (wrapped.ate(X, T0=T0, T1=T1) if X is None
                else wrapped.effect(X, T0=T0, T1=T1))
        return _ate_summary(wrapped, pred, 0.0, self.ate_stderr(X, T0=T0, T1=T1))

    def const_marginal_ate_interval(self, X=None, *, alpha=0.05):
        """The ``bootstrap_type`` interval of each arm's average effect, from the replicas."""
        return self._est.const_marginal_ate_interval(X, lower=100 * alpha / 2,
                                                     upper=100 * (1 - alpha / 2))

    def const_marginal_ate_inference(self, X=None):
        """EconML's population summary of each arm's average effect, with the standard deviation
        of the replicas' ``const_marginal_ate(X)`` as its standard error (X=None: each replica
        averages over its own resample of the fitted units)."""
        wrapped = self._est._wrapped
        return _arm_summary(wrapped, X, wrapped.const_marginal_ate(None) if X is None else None,
                            self._est.const_marginal_ate_std(X))

    def marginal_ate_inference(self, T, X=None):
        """As :meth:`const_marginal_ate_inference` (a discrete treatment's marginal effect is
        each arm's effect vs control)."""
        return self.const_marginal_ate_inference(X)

    def marginal_ate_interval(self, T, X=None, *, alpha=0.05):
        return self.const_marginal_ate_interval(X, alpha=alpha)

    # Pointwise results: EconML's, as picklable classes whose translate/scale take one value per
    # row (a pandas Series over the rows of X).
    def effect_inference(self, *args, **kwargs):
        return _portable(self._est.effect_inference(*args, **kwargs))

    def const_marginal_effect_inference(self, *args, **kwargs):
        return _portable(self._est.const_marginal_effect_inference(*args, **kwargs))

    def marginal_effect_inference(self, *args, **kwargs):
        return _portable(self._est.marginal_effect_inference(*args, **kwargs))


class DoseInference(Inference):
    r"""Intervals of a CFR/TARNet fitted on a continuous treatment (the default inference of
    such a fit).

    * ``ate_interval(X=None, T0=t0, T1=t1)`` / ``ate_inference``: the doubly robust contrast of
      the average dose-response over the fitted units, :math:`\hat\theta(t_1) -
      \hat\theta(t_0)` (Kennedy et al. 2017, :mod:`dowhy_cfr.adrf`), with the standard error of
      the difference of the two local linear estimates and of the members' average curves;
      Student's t intervals with Satterthwaite's degrees of freedom
      (:meth:`dowhy_cfr.fitted.DoseStage.contrast`). For other units X:
      the mean of ``effect(X, T0, T1)`` with the members' jackknife standard error of that mean.
    * ``effect_interval`` / ``effect_inference`` (:math:`\mu(x, t_1) - \mu(x, t_0)`) and
      ``marginal_effect_interval`` / ``_inference`` (:math:`\partial_t \mu(x, t)`): the members'
      delete-a-group jackknife, as for a binary treatment (:class:`CFRAIPWInference`): the
      members are the K-fold bagged networks, the interval is Student's t with K - 1 degrees
      of freedom. It covers the variance of the heads' curves, not their bias, and not the
      variance of the doubly robust shift of the average curve added to every unit's curve.
    * ``const_marginal_*``: a dose's effect is not constant in the dose; a clear error names
      ``effect``, ``marginal_effect`` and ``dose_response``.
    """

    @classmethod
    def default_for(cls, estimator):
        return cls().fit(estimator)

    @property
    def pointwise(self) -> bool:
        """Whether ``effect_interval`` works: K-fold bagged members (K >= 2)."""
        return self._est.fitted_.folds_as_members

    def fit(self, estimator, *args, **kwargs):
        if not getattr(getattr(estimator, "fitted_", None), "continuous", False):
            raise ValueError("DoseInference is the inference of a continuous treatment; this "
                             "estimator was fitted on a categorical one")
        self._est = estimator
        self.d_y = estimator._d_y[0] if estimator._d_y else 1
        return self

    def _members(self, name: str):
        fitted = self._est.fitted_
        if not fitted.folds_as_members:
            why = (f"this fit has {fitted.members.n_models} member(s)" +
                   ("" if fitted.members.n_models < 2 else " trained with cross_fit=False"))
            raise NotImplementedError(_POINTWISE.format(name=name, why=why)
                                      .replace(", or with inference='bootstrap'", ""))
        return fitted

    def _results(self, pred, stderr):
        est = self._est
        return _JackknifeResults(None, self.d_y, pred, np.reshape(stderr, np.shape(pred)), None,
                                 "effect", None, df=est.fitted_.members.n_models - 1,
                                 feature_names=est.cate_feature_names(),
                                 output_names=est.cate_output_names())

    def _member_effects(self, X, T0, T1, name):
        """``effect(X, T0, T1)`` (m,) and each member's (K, m), X as the estimator encodes it."""
        fitted = self._members(name)
        pred = np.asarray(self._est.effect(X, T0=T0, T1=T1), dtype=float)
        X, T0, T1 = flat_doses(*self._est._expand_treatments(X, T0, T1))
        if X is None:
            raise ValueError(f"{name} needs the units' X (pass X=...)")
        members = fitted.dose_curves(X, T1, members=True) - fitted.dose_curves(X, T0, members=True)
        return pred, members

    def effect_inference(self, X=None, *, T0=0, T1=1):
        pred, members = self._member_effects(X, T0, T1, "effect_inference")
        return self._results(pred, jackknife_stderr(members))

    def effect_interval(self, X=None, *, T0=0, T1=1, alpha=0.05):
        return self.effect_inference(X, T0=T0, T1=T1).conf_int(alpha=alpha)

    def marginal_effect_inference(self, T, X=None):
        fitted = self._members("marginal_effect_inference")
        pred = np.asarray(self._est.marginal_effect(T, X), dtype=float)
        X, T = flat_doses(*self._est._expand_treatments(X, T))
        if X is None:
            raise ValueError("marginal_effect_inference needs the units' X (pass X=...)")
        lo, hi = fitted.encoding.difference_points(T)
        members = (fitted.dose_curves(X, hi, members=True)
                   - fitted.dose_curves(X, lo, members=True)) / (hi - lo)
        return self._results(pred, jackknife_stderr(members))

    def marginal_effect_interval(self, T, X=None, *, alpha=0.05):
        return self.marginal_effect_inference(T, X).conf_int(alpha=alpha)

    def ate_inference(self, X=None, *, T0=0, T1=1):
        """The doubly robust contrast of the average curve over the fitted units (X None or
        theirs); over other units the mean effect with the members' jackknife (t quantiles)."""
        fitted = self._est.fitted_
        stage = fitted.dose
        if X is None or stage.is_fitted_x(fitted.columns.block("X", X)):
            t1, t0 = _dose_pair(fitted, T0, T1)
            res = stage.contrast(t1, t0)
            pred = np.array([res.estimate]) if X is None else np.asarray(
                self._est.effect(X, T0=T0, T1=T1), dtype=float)
            args = dict(pred=pred, pred_stderr=np.zeros_like(pred), mean_pred_stderr=res.stderr,
                        d_t=1, d_y=self.d_y)
            if np.isinf(res.df):
                return PopulationSummaryResults(**args)
            return _JackknifeSummary(**args, df=res.df)  # Student's t, Satterthwaite's df
        pred, members = self._member_effects(X, T0, T1, "ate_inference")
        return _JackknifeSummary(pred=pred, pred_stderr=jackknife_stderr(members),
                                 mean_pred_stderr=float(jackknife_stderr(members.mean(1))),
                                 d_t=1, d_y=self.d_y, df=len(members) - 1)

    def ate_interval(self, X=None, *, T0=0, T1=1, alpha=0.05):
        return self.ate_inference(X, T0=T0, T1=T1).conf_int_mean(alpha=alpha)

    def ate_std(self, X=None, *, T0=0, T1=1):
        return self.ate_inference(X, T0=T0, T1=T1).stderr_mean

    def _constant(self, *args, **kwargs):
        raise NotImplementedError(CONSTANT_DOSE_EFFECT)

    const_marginal_effect_inference = const_marginal_effect_interval = _constant
    const_marginal_ate_inference = const_marginal_ate_interval = _constant

    def marginal_ate_inference(self, T, X=None):
        return self.marginal_effect_inference(T, X).population_summary()

    def marginal_ate_interval(self, T, X=None, *, alpha=0.05):
        return self.marginal_ate_inference(T, X).conf_int_mean(alpha=alpha)


#: The message of the constant-marginal-effect methods on a continuous treatment.
CONSTANT_DOSE_EFFECT = (
    "a continuous treatment's effect is not constant in the dose, so const_marginal_effect (and "
    "its intervals and averages) has no value here: use effect(X, T0=t0, T1=t1) for the change "
    "from dose t0 to t1, marginal_effect(T, X) for the slope of each unit's curve at dose T, or "
    "dose_response(X, t_grid=...) for the curves")


def flat_doses(X, *Ts):
    """EconML's expanded ``(X, *Ts)`` with each dose array one-dimensional (a one-column T at
    fit makes EconML expand scalar doses to (m, 1))."""
    return (X, *(np.asarray(T, dtype=float).reshape(-1) for T in Ts))


def _dose_pair(fitted, T0, T1) -> tuple[float, float]:
    """The single doses ``T1``, ``T0`` of an average contrast, checked against the range."""
    fitted.encoding.check_labels([T0], [T1])
    return float(_one_label(T1, "T1")), float(_one_label(T0, "T0"))
