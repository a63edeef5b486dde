"""CFR and TARNet as DoWhy estimation methods.

After ``import dowhy_cfr`` a :class:`dowhy.CausalModel` with a backdoor estimand accepts::

    model.estimate_effect(estimand, method_name="backdoor.cfr")     # documented primary name
    model.estimate_effect(estimand, method_name="backdoor.tarnet")
    model.estimate_effect(estimand, method_name="cfr")              # bare names: "backdoor." implied
    model.estimate_effect(estimand, method_name="tarnet")
    model.estimate_effect(estimand, method_name="backdoor.dowhy_cfr.CFREstimator")  # no import needed

and EconML's DoWhy wrapper works: ``CFR(...).dowhy.fit(Y, T, X=..., W=...)``.

How the names are registered
----------------------------
DoWhy 0.14 has no plug-in registry. :mod:`dowhy_cfr.registration`, run on ``import dowhy_cfr``,
makes every change to DoWhy in one place: alias modules for the method names, the bare names, and
the stacked refuters (see there and ``docs/dowhy.md``). This module changes nothing in DoWhy.

What the adapter does
---------------------
* The representation sees every confounder. DoWhy's EconML wrapper would pass the effect
  modifiers as ``X`` and the backdoor set as ``W``; CFR then reports ``CATE(x)`` through a
  final-stage regression on ``X`` alone. This adapter instead passes the union of the effect
  modifiers and the backdoor (adjustment) set -- each variable once, in data-column order -- as
  CFR's ``X``, so the effects are CFR's ``effect(X)`` of every covariate (by default the heads
  blended with a doubly robust regression on them: ``effect_model_``), not ``model_final``'s.
* ``estimate.cate_estimates`` holds the effects ``effect(x_i)`` of the target units
  (shape ``(m, 1)`` as in DoWhy's EconML wrapper; their row labels are in
  ``estimate.cate_index``). For ``target_units`` "ate", "att" and "atc" on the fitted data,
  ``estimate.value`` is the doubly robust (AIPW) estimate of :meth:`CFR.average_effect`
  (CFR's default ``debias="aipw"``; see ``docs/debiased.md``): for "ate" it equals the mean of
  ``cate_estimates`` (the effects are shifted to make it so), for "att"/"atc" it is the doubly
  robust ATT/ATC, which can differ from the mean of the shifted unit effects over those units.
  Otherwise (other target units, new data, ``debias=None``) the value is the mean of
  ``cate_estimates``. ``print(estimate)`` ends with the fit's effect model: what the effects
  are (the heads blended with a doubly robust regression and its weight ``lam``, or a constant
  where a calibration test does not show that the effect varies; :attr:`CFR.effect_model_`,
  :attr:`CFR.blend_test_`).
* ``target_units``: ``"ate"`` (all units), ``"att"`` (units with ``T == treatment_value``),
  ``"atc"`` (units with ``T == control_value``), a callable returning a boolean mask over the rows
  of the data (DoWhy's semantics), or a DataFrame of units, which must hold every covariate
  column (effect modifiers *and* backdoor variables: the effect depends on all of them). DoWhy's
  EconML wrapper silently treats the strings as "ate"; this adapter does not.
* One treatment variable, binary or multi-valued: ``treatment_value`` and ``control_value`` pick
  the two arms compared (``"att"`` means the units at ``treatment_value``).
* A continuous treatment (a dose; CFR's ``treatment="auto"`` takes a numeric column with more
  than 20 distinct values as one, or pass ``init_params={"treatment": "continuous"}``):
  ``treatment_value`` and ``control_value`` are two doses within the range of the data, and
  ``estimate.value`` is the doubly robust contrast of the average dose-response,
  theta(t1) - theta(t0) (:meth:`CFR.ate` with ``T0``, ``T1``; ``docs/dose.md``), with its
  analytic interval; ``cate_estimates`` hold the units' mu(x, t1) - mu(x, t0).
  ``target_units`` "att"/"atc" (the units at one level) have no meaning for a dose and raise;
  "ate", a callable or a DataFrame work.
* ``method_params={"init_params": {...}, "fit_params": {...}}``: ``init_params`` go to
  :class:`~dowhy_cfr.CFR` / :class:`~dowhy_cfr.TARNet` (``verbose`` defaults to 0 here),
  ``fit_params`` to ``fit`` (only ``inference``). Other keys are DoWhy's estimator arguments
  (``num_simulations``, ``confidence_level``, ...).
* ``confidence_intervals=True`` needs no configuration: CFR's default inference ("auto") gives
  the normal interval of the doubly robust ATE/ATT/ATC with its influence-function standard
  error (``estimate.get_confidence_intervals()``, ``estimate.get_standard_error()``,
  ``estimate.test_stat_significance()``), at no extra cost -- also on demand, for an estimate
  made without ``confidence_intervals=True`` (as DoWhy's own estimators). With
  ``fit_params={"inference": "bootstrap"}`` (or a ``BootstrapInference``; every bootstrap sample
  trains a network) it is EconML's ``ate_interval`` over the target units and per-unit
  intervals are in ``estimate.cate_intervals``.
  ``confidence_intervals="bootstrap"`` uses DoWhy's own resampling bootstrap instead
  (``method_params={"num_simulations": ...}``; also one network per simulation).
* Through EconML's ``est.dowhy`` the same holds: ``X`` and ``W`` both become CFR's ``X``, so
  ``est.dowhy.effect`` takes ``np.hstack([X, W])``.
"""

from __future__ import annotations

import copy
import importlib
from typing import Any

import numpy as np
import pandas as pd
from dowhy.causal_estimator import CausalEstimate, CausalEstimator
from dowhy.causal_estimators.econml import Econml
from dowhy.utils.api import parse_state

from .debiased import AverageEffect
from .estimator import CFR, TARNet
from .inference import CFRAIPWInference, DoseInference

__all__ = ["CFREstimator", "TARNetEstimator", "CFRCausalEstimate", "BARE_METHOD_NAMES",
           "normalize_method_name", "in_data_order"]

#: Bare method names accepted by ``CausalModel.estimate_effect`` (case-insensitive).
BARE_METHOD_NAMES = {"cfr": "backdoor.cfr", "tarnet": "backdoor.tarnet"}

_TARGET_STRINGS = ("ate", "att", "atc")
_FIT_PARAM_NAMES = ("inference",)
_ESTIMATOR_KWARG = "dowhy_cfr_estimator"
_NO_INTERVALS = (
    "this CFR adapter has made no estimate yet: call estimate_effect first; its intervals are "
    "then those of the estimate (analytic intervals of the doubly robust ATE/ATT/ATC by default)."
)
_NO_INFERENCE = (
    "this CFR was fitted without inference (debias=None, or fit_params={'inference': None}), so "
    "its estimate has no analytic interval, standard error or p-value. Refit with "
    "debias='aipw' (the default) for those of the doubly robust ATE/ATT/ATC, or with "
    "method_params={'fit_params': {'inference': 'bootstrap'}}; or use DoWhy's resampling "
    "bootstrap with method='bootstrap' (trains num_simulations networks)."
)
_NO_ANALYTIC = (
    "the default (analytic) CFR intervals are those of the doubly robust ATE, ATT and ATC over "
    "the fitted units (target_units='ate', 'att' or 'atc' on the data the model was fitted on), "
    "and over other units those of the K-fold bagged members (n_ensemble >= 2, the default), "
    "which this fit does not have; or fit with method_params={'fit_params': {'inference': "
    "'bootstrap'}} for the interval of the mean effect over other units."
)


# ----------------------------------------------------------------------------- helpers
def normalize_method_name(method_name):
    """``"cfr"``/``"tarnet"`` (any case) -> ``"backdoor.cfr"``/``"backdoor.tarnet"``; any other
    name unchanged."""
    if isinstance(method_name, str) and "." not in method_name:
        return BARE_METHOD_NAMES.get(method_name.strip().lower(), method_name)
    return method_name


def _resolve_dotted(name: str):
    """``"dowhy_cfr.estimator.CFR"`` / ``"dowhy_cfr.TARNetEstimator"`` -> (adapter, model)."""
    module_name, _, attr = name.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ImportError(f"{name!r} is not an estimator of dowhy_cfr") from exc
    if isinstance(obj, type) and issubclass(obj, CFREstimator):
        return obj, obj._default_model
    if isinstance(obj, type) and issubclass(obj, CFR):
        adapter = TARNetEstimator if issubclass(obj, TARNet) else CFREstimator
        return adapter, obj
    raise ImportError(f"{name!r} names neither a CFR/TARNet estimator nor a dowhy_cfr adapter; "
                      f"use method_name='backdoor.cfr' or 'backdoor.tarnet'")


def _single_value(value, what):
    vals = parse_state(value) if isinstance(value, (list, str, int, float, dict)) else [value]
    if len(vals) != 1:
        raise ValueError(f"{what}={value!r}: give a single treatment level (for several arms, "
                         f"estimate each arm against the control separately)")
    return vals[0]


def _build_model(adapter: str, model_cls, init_params, fit_params, kwargs):
    """The CFR/TARNet of the adapter's arguments (``verbose`` defaults to 0), or a clear error."""
    if not isinstance(init_params, dict):
        raise TypeError(f"method_params['init_params'] must be a dict of CFR arguments; got "
                        f"{type(init_params).__name__}")
    if fit_params is not None and not isinstance(fit_params, dict):
        raise TypeError(f"method_params['fit_params'] must be a dict; got "
                        f"{type(fit_params).__name__}")
    for key, value in kwargs.items():
        if key == _ESTIMATOR_KWARG and isinstance(value, str):
            _, model_cls = _resolve_dotted(value)
        elif key.endswith("_estimator") and isinstance(value, str):
            continue  # DoWhy records the dotted name of third-party estimators
        elif key in init_params:
            continue  # DoWhy also unpacks init_params into the constructor for "backdoor.cfr"
        else:
            raise TypeError(
                f"{adapter} got an unexpected argument {key!r}. Put CFR arguments "
                f"in method_params={{'init_params': {{...}}}} and fit arguments in "
                f"method_params={{'fit_params': {{...}}}}"
            )
    try:
        return model_cls(**{"verbose": 0, **init_params})
    except TypeError as exc:
        raise TypeError(f"invalid init_params for {model_cls.__name__}: {exc}") from exc


def _arm_pair(categories: list, treatment_value, control_value):
    """The single treatment and control levels compared, checked against the fitted levels."""
    t1 = _single_value(treatment_value, "treatment_value")
    t0 = _single_value(control_value, "control_value")

    def index(v, what):
        for i, c in enumerate(categories):
            if c == v:
                return i
        raise ValueError(f"{what}={v!r} is not one of the treatment levels {categories}")

    if index(t1, "treatment_value") == index(t0, "control_value"):
        raise ValueError(f"treatment_value and control_value are the same level ({t1!r})")
    return t1, t0


def _dose_pair(encoding, treatment_value, control_value):
    """The two doses compared, checked: numbers within the fitted range, not equal."""
    t1 = _single_value(treatment_value, "treatment_value")
    t0 = _single_value(control_value, "control_value")
    for value, what in ((t1, "treatment_value"), (t0, "control_value")):
        try:
            encoding.check_labels([value])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what}={value!r}: {exc}") from None
    if float(t1) == float(t0):
        raise ValueError(f"treatment_value and control_value are the same dose ({t1!r}); give "
                         f"two doses to compare, e.g. the 25th and 75th percentiles")
    return float(t1), float(t0)


def _target_mask(data, target_units, treatment, t1, t0) -> np.ndarray:
    """Boolean mask of the target units among the rows of ``data`` (``treatment``: column)."""
    n = len(data)
    if isinstance(target_units, str):
        key = target_units.lower()
        if key not in _TARGET_STRINGS:
            raise ValueError(f"target_units={target_units!r} is not supported; use 'ate', "
                             f"'att', 'atc', a DataFrame or a callable")
        if key == "ate":
            return np.ones(n, dtype=bool)
        level = t1 if key == "att" else t0
        mask = np.asarray(data[treatment].to_numpy() == level, dtype=bool)
        if not mask.any():
            raise ValueError(f"target_units={target_units!r}: no unit has treatment {level!r}")
        return mask
    if callable(target_units):
        cond = target_units(data)
        if isinstance(cond, pd.DataFrame):  # DoWhy keeps a row if its first column is kept
            cond = cond.iloc[:, 0]
        cond = np.asarray(cond)
        if cond.shape != (n,) or cond.dtype != bool:
            raise TypeError(f"a target_units callable must return a boolean mask over the {n} "
                            f"rows of the data; got dtype {cond.dtype} and shape {cond.shape}")
        if not cond.any():
            raise ValueError("the target_units callable selected no unit")
        return cond
    raise TypeError(f"target_units must be 'ate', 'att', 'atc', a DataFrame or a callable; "
                    f"got {type(target_units).__name__}")


def _check_fit_request(estimand, fit_params: dict, model_name: str, econml_intervals: bool):
    """Clear errors for an estimand or fit arguments CFR cannot serve."""
    method = estimand.identifier_method
    if method is not None and not (method.startswith("backdoor") or method == "general_adjustment"):
        raise ValueError(
            f"CFR/TARNet adjust for confounders (backdoor adjustment); the estimand was "
            f"requested with identifier {method!r}. Use method_name='backdoor.cfr'."
        )
    unknown = sorted(set(fit_params) - set(_FIT_PARAM_NAMES))
    if unknown:
        raise TypeError(f"unknown fit_params {unknown} for {model_name}; "
                        f"the only fit parameter is 'inference'")
    if econml_intervals and "inference" in fit_params and fit_params["inference"] is None:
        raise ValueError(
            "confidence_intervals=True needs inference for CFR, but fit_params has "
            "inference=None: leave it out (the default 'auto' gives analytic intervals of the "
            "doubly robust ATE/ATT/ATC), pass 'bootstrap' (100 samples, each trains a network), "
            "or use confidence_intervals='bootstrap' for DoWhy's resampling bootstrap."
        )
    if len(estimand.treatment_variable) != 1 or len(estimand.outcome_variable) != 1:
        raise ValueError(f"CFR needs one treatment variable and one outcome; got treatments "
                         f"{estimand.treatment_variable} and outcomes "
                         f"{estimand.outcome_variable}. Estimate each treatment (and outcome) "
                         f"in its own model, or combine the treatments into one categorical "
                         f"treatment column (one arm per combination)")


def _adjustment_set(estimand, data: pd.DataFrame) -> list:
    """The backdoor set in data-column order; every column of the estimand must be in ``data``."""
    adjustment = list(estimand.get_adjustment_set() or [])
    missing = [c for c in adjustment + list(estimand.treatment_variable)
               + list(estimand.outcome_variable) if c not in data.columns]
    if missing:
        raise ValueError(f"columns {missing} of the estimand are not in the data")
    return in_data_order(data, adjustment)


def in_data_order(data: pd.DataFrame, names) -> list:
    """``names`` in the order of the data's columns (DoWhy hands them over as sets, whose order
    changes between interpreter runs: ordered, fits are reproducible)."""
    position = {c: i for i, c in enumerate(data.columns)}
    return sorted(names, key=lambda c: position.get(c, len(position)))


class CFRCausalEstimate(CausalEstimate):
    """DoWhy's :class:`~dowhy.causal_estimator.CausalEstimate` whose text (``print(estimate)``)
    also says what the fitted CFR's ``effect(X)`` -- ``estimate.cate_estimates`` -- is: its
    ``effect_model_`` ("blend" with its ``lam``, "constant", "heads", "model_final")."""

    def __str__(self):
        text = super().__str__()
        fitted = getattr(getattr(self, "_estimator_object", None), "fitted_", None)
        if fitted is None:
            return text
        return f"{text}\n## Effect model\n{fitted.effect_description()}\n"


# ----------------------------------------------------------------------------- the adapter
class _Queries:
    """The query methods of DoWhy's EconML wrapper (used by DoWhy's refuters and interpreters)
    for a CFR adapter: the intervals of the last estimate, and effects, intervals and inference
    for the rows of a DataFrame, comparing the arms of the last estimate."""

    def _interval_source(self):
        """What the intervals of the last estimate come from: its :class:`AverageEffect` (default
        inference) or ``(X, T0, T1)`` of the target units (EconML inference); ValueError saying
        why there is none."""
        if self._interval_inputs is None:
            raise ValueError(self._no_interval_reason or _NO_INTERVALS)
        return self._interval_inputs

    def _estimate_confidence_intervals(self, confidence_level=None, method=None, **kwargs):
        """The interval of ``estimate.value``: the doubly robust estimate's normal interval
        (default inference), or EconML's bootstrap interval of the mean effect over the target
        units: (lower, upper). Computed on demand (DoWhy's ``get_confidence_intervals``)."""
        self._interval_source()
        level = self.confidence_level if confidence_level is None else confidence_level
        if isinstance(self._interval_inputs, AverageEffect):
            return tuple(float(v) for v in self._interval_inputs.interval(1 - level))
        X, t0, t1 = self._interval_inputs
        lb, ub = self.estimator.ate_interval(X, T0=t0, T1=t1, alpha=1 - level)
        return float(np.squeeze(lb)), float(np.squeeze(ub))

    def _estimate_std_error(self, method=None, **kwargs):
        """Influence-function standard error of the doubly robust estimate (default inference),
        or the standard deviation of the bootstrap replicates' mean effect."""
        if isinstance(self._interval_source(), AverageEffect):
            return float(self._interval_inputs.stderr)
        X, t0, t1 = self._interval_inputs
        try:
            std = self.estimator._inference.ate_std(X, T0=t0, T1=t1)
        except AttributeError as exc:
            raise TypeError(f"standard errors for CFR need bootstrap inference; got "
                            f"{type(self.estimator._inference).__name__}") from exc
        return float(np.squeeze(std))

    def _test_significance(self, estimate_value, method=None, **kwargs):
        """``{"p_value": p}`` of the z-test of a zero effect: the doubly robust estimate's
        (default inference), or that of EconML's ``ate_inference`` over the target units."""
        source = self._interval_source()
        if isinstance(source, AverageEffect):
            return {"p_value": source.pvalue()}
        X, t0, t1 = source
        return {"p_value": float(np.squeeze(
            self.estimator.ate_inference(X, T0=t0, T1=t1).pvalue()))}

    def _current_arms(self):
        return self._arms(getattr(self, "_treatment_value", 1), getattr(self, "_control_value", 0))

    def effect(self, df: pd.DataFrame, *args, **kwargs) -> np.ndarray:
        """Unit-level effects for the rows of ``df`` (all covariate columns), shape (m, 1)."""
        t1, t0 = self._current_arms()
        return np.asarray(self.estimator.effect(self._covariates(df), T0=t0, T1=t1),
                          dtype=float).reshape(-1, 1)

    def effect_interval(self, df: pd.DataFrame, *args, **kwargs):
        """Per-unit bootstrap intervals ``(lower, upper)``, each (m, 1), for the rows of ``df``."""
        t1, t0 = self._current_arms()
        lb, ub = self.estimator.effect_interval(self._covariates(df), T0=t0, T1=t1,
                                                alpha=1 - self.confidence_level)
        return np.reshape(lb, (-1, 1)), np.reshape(ub, (-1, 1))

    def effect_inference(self, df: pd.DataFrame, *args, **kwargs):
        """EconML inference results for the unit-level effects of the rows of ``df``."""
        t1, t0 = self._current_arms()
        return self.estimator.effect_inference(self._covariates(df), T0=t0, T1=t1)

    def effect_tt(self, df: pd.DataFrame, treatment_value, *args, **kwargs):
        """Effect of the treatment each unit received (0 for control units), a Series."""
        eff = self.effect(df).ravel()
        t1 = _single_value(treatment_value, "treatment_value")
        treated = (df[self._target_estimand.treatment_variable[0]] == t1).to_numpy()
        return pd.Series(np.where(treated, eff, 0.0), index=df.index)

    def shap_values(self, df: pd.DataFrame, *args, **kwargs):
        return self.estimator.shap_values(self._covariates(df).values, *args, **kwargs)


class CFREstimator(_Queries, Econml):
    """DoWhy ``CausalEstimator`` for :class:`~dowhy_cfr.CFR` (``method_name="backdoor.cfr"``).

    Normally created by ``CausalModel.estimate_effect``; see the module docstring for the method
    names, ``target_units``, ``method_params`` and intervals. It subclasses DoWhy's EconML
    wrapper (:class:`dowhy.causal_estimators.econml.Econml`), so DoWhy's refuters treat it like
    any EconML estimate.

    Parameters
    ----------
    identified_estimand : IdentifiedEstimand
        A backdoor (or general adjustment) estimand.
    init_params : dict, optional
        Constructor arguments of :class:`~dowhy_cfr.CFR` (``verbose`` defaults to 0).
    fit_params : dict, optional
        Accepted for DoWhy's ``method_params`` convention; DoWhy passes them to :meth:`fit`.
    test_significance, evaluate_effect_strength, confidence_intervals, num_null_simulations, \
num_simulations, sample_size_fraction, confidence_level, need_conditional_estimates, \
num_quantiles_to_discretize_cont_cols
        As in :class:`dowhy.causal_estimator.CausalEstimator`.

    Attributes
    ----------
    estimator : CFR or TARNet
        The EconML estimator (fitted by :meth:`fit`).
    """

    _default_model = CFR

    def __new__(cls, *args, **kwargs):
        # "backdoor.dowhy_cfr.TARNetEstimator" reaches the class registered for the package
        # (this one); build the adapter the dotted name asks for.
        name = kwargs.get(_ESTIMATOR_KWARG)
        adapter = _resolve_dotted(name)[0] if isinstance(name, str) else cls
        return super().__new__(adapter if issubclass(adapter, cls) else cls)

    def __init__(
        self,
        identified_estimand,
        init_params: dict | None = None,
        fit_params: dict | None = None,
        test_significance=False,
        evaluate_effect_strength: bool = False,
        confidence_intervals=False,
        num_null_simulations: int = CausalEstimator.DEFAULT_NUMBER_OF_SIMULATIONS_STAT_TEST,
        num_simulations: int = CausalEstimator.DEFAULT_NUMBER_OF_SIMULATIONS_CI,
        sample_size_fraction: int = CausalEstimator.DEFAULT_SAMPLE_SIZE_FRACTION,
        confidence_level: float = CausalEstimator.DEFAULT_CONFIDENCE_LEVEL,
        need_conditional_estimates="auto",
        num_quantiles_to_discretize_cont_cols: int = CausalEstimator.NUM_QUANTILES_TO_DISCRETIZE_CONT_COLS,
        **kwargs,
    ):
        init_params = {} if init_params is None else init_params
        model = _build_model(type(self).__name__, self._default_model, init_params, fit_params,
                             kwargs)
        self.init_params = dict(init_params)
        self.fit_params = dict(fit_params or {})
        super().__init__(
            identified_estimand, econml_estimator=model, test_significance=test_significance,
            evaluate_effect_strength=evaluate_effect_strength,
            confidence_intervals=confidence_intervals, num_null_simulations=num_null_simulations,
            num_simulations=num_simulations, sample_size_fraction=sample_size_fraction,
            confidence_level=confidence_level, need_conditional_estimates=need_conditional_estimates,
            num_quantiles_to_discretize_cont_cols=num_quantiles_to_discretize_cont_cols,
        )
        self._interval_inputs = self._no_interval_reason = None
        self.effect_intervals = None

    # ------------------------------------------------------------------ checks
    def _uses_econml_intervals(self) -> bool:
        ci = self._confidence_intervals
        return bool(ci) and not (isinstance(ci, str) and ci == "bootstrap")

    # ------------------------------------------------------------------ fit
    def fit(self, data: pd.DataFrame, effect_modifier_names=None, **fit_params):
        """Fit CFR on ``data``; its covariates are the effect modifiers and the backdoor set.

        ``fit_params`` (DoWhy's ``method_params["fit_params"]``) go to the EconML ``fit``; the
        only one is ``inference``.
        """
        estimand = self._target_estimand
        _check_fit_request(estimand, fit_params, type(self.estimator).__name__,
                           self._uses_econml_intervals())
        self.reset_encoders()
        if effect_modifier_names is not None:
            effect_modifier_names = in_data_order(data, parse_state(effect_modifier_names))
        self._set_effect_modifiers(data, effect_modifier_names)
        self._econml_fit_params = fit_params
        self._fit_params = fit_params

        adjustment = _adjustment_set(estimand, data)
        self._observed_common_causes_names = adjustment
        self._observed_common_causes = (
            self._encode(data[adjustment], "observed_common_causes") if adjustment else None)
        self._covariate_names = in_data_order(data, set(self._effect_modifier_names)
                                               | set(adjustment))
        if not self._covariate_names:
            raise ValueError("CFR needs covariates to learn a representation, but the estimand has "
                             "neither backdoor variables nor effect modifiers. Give the model its "
                             "confounders or effect modifiers (common_causes=..., "
                             "effect_modifiers=...); without any, a difference in means "
                             "(e.g. method_name='backdoor.linear_regression') estimates the "
                             "effect")
        self.estimating_instrument_names = []
        self._estimating_instruments = None
        self.symbolic_estimator = self.construct_symbolic_estimator(estimand)

        Y = data[estimand.outcome_variable[0]]
        T = data[estimand.treatment_variable[0]]
        self.estimator.fit(Y, T, X=self._covariates(data), **fit_params)
        self._interval_inputs = self._no_interval_reason = None
        self.effect_intervals = None
        return self

    @property
    def covariate_names(self) -> list:
        """The columns CFR's representation sees: effect modifiers and backdoor variables."""
        return list(self._covariate_names)

    def _covariates(self, df: pd.DataFrame) -> pd.DataFrame:
        """The encoded covariate block (CFR's ``X``) of the rows of ``df``."""
        missing = [c for c in self._covariate_names if c not in df.columns]
        if missing:
            raise ValueError(
                f"columns {missing} are missing; CFR's effect tau(x, w) is a function of all "
                f"covariates its representation saw: {self._covariate_names} (effect modifiers "
                f"and backdoor variables)"
            )
        return self._encode(df[self._covariate_names], "cfr_covariates")

    # ------------------------------------------------------------------ target units
    def _arms(self, treatment_value, control_value):
        encoding = self.estimator.fitted_.encoding
        if encoding.continuous:
            return _dose_pair(encoding, treatment_value, control_value)
        return _arm_pair(encoding.categories, treatment_value, control_value)

    def _target(self, data, target_units, t1, t0):
        """(covariates, row labels) of the target units."""
        if isinstance(target_units, pd.DataFrame):
            if len(target_units) == 0:
                raise ValueError("the target_units DataFrame has no rows")
            return self._covariates(target_units), target_units.index
        if (self.estimator.fitted_.continuous and isinstance(target_units, str)
                and target_units.lower() in ("att", "atc")):
            raise ValueError(f"target_units={target_units!r} selects the units at one treatment "
                             f"level; a continuous treatment (a dose) has no such group: use "
                             f"'ate', a callable or a DataFrame of units")
        mask = _target_mask(data, target_units, self._target_estimand.treatment_variable[0], t1, t0)
        return self._covariates(data.iloc[np.flatnonzero(mask)]), data.index[mask]

    # ------------------------------------------------------------------ estimate
    def estimate_effect(self, data: pd.DataFrame, treatment_value: Any = 1, control_value: Any = 0,
                        target_units=None, **_):
        """Effect of ``treatment_value`` vs ``control_value`` on ``target_units`` (default "ate").

        ``estimate.value`` is the mean of the unit-level effects ``estimate.cate_estimates``
        over the target units.
        """
        if target_units is None:
            target_units = "ate"
        self._target_units = target_units
        self._treatment_value = treatment_value
        self._control_value = control_value
        t1, t0 = self._arms(treatment_value, control_value)
        X, index = self._target(data, target_units, t1, t0)
        cate = np.asarray(self.estimator.effect(X, T0=t0, T1=t1), dtype=float).reshape(-1, 1)
        average = self._debiased_average(data, target_units, t1, t0)
        value = float(cate.mean()) if average is None else average.estimate

        # kept for intervals, standard errors and p-values on demand
        self._interval_inputs, self._no_interval_reason = self._interval_inputs_of(
            average, X, t0, t1)
        self.effect_intervals = None
        cate_intervals = None
        if self._uses_econml_intervals():
            self._interval_source()  # the reason as an error where there are none
            if not isinstance(self._interval_inputs, AverageEffect):
                lb, ub = self.estimator.effect_interval(X, T0=t0, T1=t1,
                                                        alpha=1 - self.confidence_level)
                cate_intervals = (np.reshape(lb, (-1, 1)), np.reshape(ub, (-1, 1)))
            self.effect_intervals = self._estimate_confidence_intervals(self.confidence_level)

        estimand = self._target_estimand
        estimate = CFRCausalEstimate(
            data=data, treatment_name=estimand.treatment_variable,
            outcome_name=estimand.outcome_variable, estimate=value, control_value=control_value,
            treatment_value=treatment_value, target_estimand=estimand,
            realized_estimand_expr=self.symbolic_estimator, cate_estimates=cate, cate_index=index,
            effect_intervals=self.effect_intervals, cate_intervals=cate_intervals,
            _estimator_object=self.estimator,
        )
        # DoWhy's refuters re-estimate with estimate.estimator._target_units; CausalModel reuses
        # one cached estimator for fit_estimator=False calls, so a later "atc" estimate would
        # change what an earlier "att" estimate is refuted for. Each estimate therefore keeps a
        # shallow snapshot (sharing the fitted CFR) with its own target units and values.
        estimate.add_estimator(copy.copy(self))
        return estimate

    def _interval_inputs_of(self, average, X, t0, t1):
        """``(source, None)`` of the estimate's intervals, or ``(None, why there are none)``."""
        inference = self.estimator._inference
        if isinstance(inference, (CFRAIPWInference, DoseInference)):
            if average is not None:
                return average, None
            # other target units: the members' jackknife of the mean effect over them
            return ((X, t0, t1), None) if X is not None and inference.pointwise else (
                None, _NO_ANALYTIC)
        if inference is None:
            return None, _NO_INFERENCE
        return (X, t0, t1), None

    def _debiased_average(self, data, target_units, t1, t0):
        """The doubly robust average (:meth:`CFR.average_effect`) for the target strings "ate",
        "att", "atc" when ``data`` holds the fitted units and the estimator debiases; else None
        (then ``estimate.value`` is the mean of the unit-level effects)."""
        fitted = self.estimator.fitted_
        stage = fitted.dose if fitted.continuous else fitted.debiased
        debiased = stage is not None and (stage.debiased if fitted.continuous
                                          else stage.e is not None)
        if (not isinstance(target_units, str) or not debiased or len(data) != len(stage.y)
                or not stage.is_fitted_x(self._covariates(data).to_numpy(dtype=float))):
            return None
        return self.estimator.average_effect(target_units.lower(), T0=t0, T1=t1)

    def construct_symbolic_estimator(self, estimand):
        expr = "b: " + ", ".join(estimand.outcome_variable) + "~"
        expr += "+".join(estimand.treatment_variable + list(self._observed_common_causes_names))
        expr += " | " + ",".join(self._effect_modifier_names)
        return expr


class TARNetEstimator(CFREstimator):
    """DoWhy ``CausalEstimator`` for :class:`~dowhy_cfr.TARNet` (``method_name="backdoor.tarnet"``).

    Same parameters as :class:`CFREstimator`; ``init_params`` must not contain ``alpha`` or
    ``alpha_units``.
    """

    _default_model = TARNet
