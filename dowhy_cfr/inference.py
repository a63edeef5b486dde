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

import numpy as np
import pandas as pd
from econml.inference import BootstrapInference, PopulationSummaryResults
from econml.inference._inference import Inference
from econml.inference._bootstrap import BootstrapEstimator
from econml.utilities import filter_none_kwargs
from sklearn.base import clone

from . import _validation as V
from . import fitting
from .debiased import AverageEffect, aipw_terms, best_linear_projection
from .nuisance import Propensity

__all__ = ["CFRBootstrapInference", "CFRAIPWInference", "AverageEffectsMixin"]

_POINTWISE = ("{name} is not available with inference='aipw' (the default): it gives analytic "
              "intervals for the average effects over the fitted units only (ate_interval, "
              "ate_inference, average_effect) and for how the effect varies with covariates "
              "(best_linear_projection). For pointwise intervals fit with "
              "inference='bootstrap'.")
_OTHER_UNITS = ("inference='aipw' (the default) gives the interval of the average effect over the "
                "fitted units only: call ate_interval() with X=None or with the X passed to fit. "
                "For other units fit with inference='bootstrap'.")


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
        unit-level effects) does not give; where the effect is close to linear it is also the
        more accurate CATE (``docs/debiased.md``, "The best linear projection").

        Parameters
        ----------
        Z : array-like (n_units, q), DataFrame or Series, optional
            Covariates of the fitted units, one row per unit in the order given to ``fit``: columns
            of X or W, or other unit-level variables. None: the intercept alone.
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
    ATC. Pointwise intervals (``effect_interval``) are not available: the AIPW correction is for
    averages; fit with ``inference="bootstrap"`` for them.
    """

    #: No pointwise (``effect_interval``) intervals: the AIPW correction is for averages.
    pointwise = False

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

    def _check_units(self, X):
        fitted = self._est.fitted_
        if X is None:
            return
        if fitted.columns.n_x == 0 or not fitted.debiased.is_fitted_x(
                fitted.columns.block("X", X)):
            raise ValueError(_OTHER_UNITS)

    def ate_inference(self, X=None, *, T0=0, T1=1):
        self._check_units(X)
        res = self._est.average_effect("ate", T0=T0, T1=T1)
        pred = np.array([res.estimate]) if X is None else np.asarray(
            self._est.effect(X, T0=T0, T1=T1), dtype=float)
        # pred_stderr: zeros so that summary() prints the mean's rows; there are no pointwise ones
        return PopulationSummaryResults(pred=pred, pred_stderr=np.zeros_like(pred),
                                        mean_pred_stderr=res.stderr, d_t=1, d_y=self.d_y)

    def ate_interval(self, X=None, *, T0=0, T1=1, alpha=0.05):
        return self.ate_inference(X, T0=T0, T1=T1).conf_int_mean(alpha=alpha)

    def const_marginal_ate_inference(self, X=None):
        self._check_units(X)
        cats = self._est.fitted_.encoding.categories
        res = [self._est.average_effect("ate", T0=cats[0], T1=c) for c in cats[1:]]
        pred = np.array([[r.estimate for r in res]]) if X is None else np.asarray(
            self._est.const_marginal_effect(X), dtype=float)
        stderr = np.array([r.stderr for r in res])
        single = len(res) == 1 and not self._est._d_t_in
        pred = pred.reshape(len(pred), -1)[:, 0] if single else pred
        return PopulationSummaryResults(
            pred=pred, pred_stderr=np.zeros_like(pred),
            mean_pred_stderr=stderr[0] if single else stderr, d_t=self.d_t, d_y=self.d_y)

    def const_marginal_ate_interval(self, X=None, *, alpha=0.05):
        return self.const_marginal_ate_inference(X).conf_int_mean(alpha=alpha)

    def marginal_ate_inference(self, T, X=None):
        return self.const_marginal_ate_inference(X)

    def marginal_ate_interval(self, T, X=None, *, alpha=0.05):
        return self.const_marginal_ate_interval(X, alpha=alpha)

    def __getattr__(self, name):
        if name.startswith(("effect_", "const_marginal_effect_", "marginal_effect_")):
            raise NotImplementedError(_POINTWISE.format(name=name))
        raise AttributeError(name)

_BOOTSTRAP_TYPES = ("percentile", "pivot", "normal")


class _StackedBootstrapEstimator(BootstrapEstimator):
    """EconML's BootstrapEstimator whose replicas come from one stacked CFR training."""

    def __init__(self, wrapped, n_bootstrap_samples, bootstrap_type, random_state,
                 n_steps=None):
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

    def fit(self, Y, T, *, X=None, W=None):
        """The replicas (:func:`dowhy_cfr.fitting.bootstrap`), with the fit's alpha and
        propensity; ``n_steps``: that many steps each, without early stopping (None: as the
        estimator)."""
        est = self._wrapped
        template = clone(est)
        if fitting.alpha_grid(est.alpha) is not None:  # the replicas refit the chosen alpha
            template.set_params(alpha=est.alpha_)
        if self._n_steps is not None:
            template.set_params(n_iter=int(self._n_steps), patience=None)
        base = est.random_state if self._random_state is None else self._random_state
        stage = est.fitted_.debiased
        propensity = None if stage.e is None else Propensity(stage.e, stage.propensity_model)
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
    verbose : int, default 0
        Unused; kept for signature compatibility with ``BootstrapInference``.

    Examples
    --------
    >>> from dowhy_cfr import CFR, CFRBootstrapInference
    >>> est = CFR(n_iter=500).fit(Y, T, X=X, inference=CFRBootstrapInference(50))  # doctest: +SKIP
    >>> lo, hi = est.effect_interval(X, alpha=0.1)  # doctest: +SKIP
    """

    def __init__(self, n_bootstrap_samples=100, bootstrap_type="pivot", random_state=None,
                 replica_steps="fitted", verbose=0):
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
        super().__init__(n_bootstrap_samples=n_bootstrap_samples, n_jobs=1,
                         bootstrap_type=bootstrap_type, verbose=verbose)
        self.n_bootstrap_samples = n_bootstrap_samples
        self.bootstrap_type = bootstrap_type
        self.random_state = random_state
        self.replica_steps = replica_steps

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
                                         self._bootstrap_type, self.random_state, n_steps)
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
        pred = np.atleast_1d(wrapped.ate(X, T0=T0, T1=T1)) if X is None else np.asarray(
            wrapped.effect(X, T0=T0, T1=T1), dtype=float)
        return PopulationSummaryResults(pred=pred, pred_stderr=np.zeros_like(pred),
                                        mean_pred_stderr=self.ate_stderr(X, T0=T0, T1=T1),
                                        d_t=1, d_y=self.d_y)

    def const_marginal_ate_interval(self, X=None, *, alpha=0.05):
        """The ``bootstrap_type`` interval of each arm's average effect, from the replicas."""
        return self._est.const_marginal_ate_interval(X, lower=100 * alpha / 2,
                                                     upper=100 * (1 - alpha / 2))
