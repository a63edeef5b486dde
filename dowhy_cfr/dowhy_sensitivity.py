"""DoWhy's ``add_unobserved_common_cause`` refuter on a CFR estimate.

After ``import dowhy_cfr``::

    model.refute_estimate(estimand, estimate, method_name="add_unobserved_common_cause",
                          simulation_method="non-parametric-partial-R2",
                          partial_r2_confounder_treatment=0.05, partial_r2_confounder_outcome=0.05)

on a ``backdoor.cfr``/``backdoor.tarnet`` estimate returns a :class:`CFRSensitivityAnalyzer`: a
DoWhy ``NonParametricSensitivityAnalyzer`` (same attributes, ``results`` table, robustness values,
``plot()`` and printout) whose bounds come from the CFR estimate's own doubly robust stage -- the
numbers of :meth:`CFR.sensitivity_interval <dowhy_cfr.CFR.sensitivity_interval>` and
:meth:`CFR.robustness_value <dowhy_cfr.CFR.robustness_value>` (:mod:`dowhy_cfr.sensitivity`),
with ``partial_r2_confounder_outcome`` as ``c_y`` and ``partial_r2_confounder_treatment`` as
``c_t``. DoWhy's own analyzer would refit its own outcome regression and Riesz representer (a grid
search over forests), bound DoWhy's estimate of the *ATE of a binary 0/1 treatment* with them
whatever the estimate's target units and arms, and fail without strengths; this one

* bounds the estimate itself: its target units ("ate", "att", "atc") and its arms
  (``treatment_value`` vs ``control_value``, also of a multi-valued treatment);
* uses the fit's nuisances (the heads' outcome predictions and the cross-fitted propensity), so
  it costs nothing and agrees with the estimator's methods;
* solves the robustness values exactly (DoWhy's analyzer steps through 0, 0.01, ..., and checks
  the lower bound only) and works without strengths (robustness values only; ``results`` None).

DoWhy's meaning of ``significance_level`` is kept: the confidence bounds are one-sided at level
``1 - significance_level`` (``sensitivity_interval(alpha=2 * significance_level)``), and
``RV_alpha`` is ``robustness_value(alpha=2 * significance_level)``.

DoWhy's own analysis still runs where it is asked for: with ``benchmark_common_causes`` (its
benchmarks refit its nuisances without the named covariates), ``g_s_estimator_list``,
``alpha_s_estimator_list`` (or their parameter lists) or ``plugin_reisz=True``; that analysis bounds
the ATE of a binary 0/1 treatment only, so other CFR estimates get a ValueError saying so.

``simulation_method="direct-simulation"`` is DoWhy's (it refits CFR once per simulated
confounder strength); under pandas >= 3 DoWhy's simulation writes 0/1 into the treatment column,
which fails for a bool column, so a CFR estimate on a bool treatment gets a ValueError with the
fix first. ``"linear-partial-R2"`` and ``"e-value"`` need DoWhy's linear/GLM regression estimators
(DoWhy raises NotImplementedError for any other estimator).

:mod:`dowhy_cfr.registration` routes DoWhy's functions here; this module changes nothing in DoWhy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from dowhy.causal_refuters.non_parametric_sensitivity_analyzer import (
    NonParametricSensitivityAnalyzer)

from .sensitivity import (SensitivityParams, confounding_bias, robustness_value,
                          sensitivity_interval, sensitivity_params)

__all__ = ["CFRSensitivityAnalyzer", "DOWHY_REFIT_OPTIONS", "non_parametric_partial_r2",
           "direct_simulation", "estimate_params"]

#: The arguments of DoWhy's ``sensitivity_non_parametric_partial_r2`` that ask for DoWhy's own
#: analysis (which refits its nuisance models); ``plugin_reisz=True`` too.
DOWHY_REFIT_OPTIONS = ("benchmark_common_causes", "alpha_s_estimator_list",
                       "alpha_s_estimator_param_list", "g_s_estimator_list",
                       "g_s_estimator_param_list")
_TARGETS = ("ate", "att", "atc")


def _one_value(value, name: str):
    values = np.ravel(np.asarray(value, dtype=object))
    if len(values) != 1:
        raise ValueError(f"the sensitivity analysis compares two arms; the estimate's {name} is "
                         f"{value!r}: estimate with a single {name}")
    return values[0]


def estimate_params(estimate) -> tuple[SensitivityParams, str]:
    """The :class:`~dowhy_cfr.sensitivity.SensitivityParams` of a CFR ``estimate`` (a DoWhy
    CausalEstimate of ``backdoor.cfr``/``tarnet``) from its fit's doubly robust stage, for the
    estimate's target units and arms; and a description ("ATT of t=1 vs 0").

    ValueError where the estimate is not a doubly robust ATE/ATT/ATC over the fitted units.
    """
    adapter = estimate.estimator
    cfr = adapter.estimator
    target = getattr(adapter, "_target_units", "ate")  # the attribute DoWhy's refuters read
    target = "ate" if target is None else target
    if not (isinstance(target, str) and target.lower() in _TARGETS):
        raise ValueError(f"the sensitivity analysis bounds the doubly robust ATE, ATT or ATC over "
                         f"the fitted units; this estimate's target_units is {target!r}: estimate "
                         f"with target_units='ate', 'att' or 'atc'")
    target = target.lower()
    stage = getattr(getattr(cfr, "fitted_", None), "debiased", None)
    if stage is None or stage.e is None:
        raise ValueError("the CFR estimate has no doubly robust stage (debias=None, or a fit "
                         "without its fitted units): estimate with CFR's default "
                         "debias='aipw' (method_params={'init_params': {'debias': 'aipw'}})")
    encoding = cfr.fitted_.encoding
    t1 = _one_value(estimate.treatment_value, "treatment_value")
    t0 = _one_value(estimate.control_value, "control_value")
    encoding.check_labels([t1], [t0])
    a1, a0 = (int(encoding.arms([v])[0]) for v in (t1, t0))
    params = sensitivity_params(stage.y, stage.arms, stage.mu, stage.e, a1=a1, a0=a0,
                                target=target)
    if not np.isclose(params.theta, estimate.value, rtol=1e-9, atol=1e-12):
        raise ValueError(
            f"the estimate's value {estimate.value:.6g} is not the doubly robust {target.upper()} "
            f"over the fitted units ({params.theta:.6g}): it was estimated on other data than "
            f"the fit's. The sensitivity bounds are for the doubly robust average over the "
            f"fitted units; estimate on the data the model was fitted on")
    treatment = estimate.target_estimand.treatment_variable[0]
    return params, f"{target.upper()} of {treatment}={t1!r} vs {t0!r}"


def _one_sided(significance_level) -> float:
    """EconML's two-sided ``alpha`` whose lower bound is DoWhy's one-sided bound at level
    ``1 - significance_level``."""
    level = float(significance_level)
    if not 0 < level < 0.5:
        raise ValueError(f"significance_level={significance_level!r} is invalid: use a level in "
                         f"(0, 0.5), e.g. 0.05 (one-sided confidence bounds)")
    return 2 * level


class CFRSensitivityAnalyzer(NonParametricSensitivityAnalyzer):
    """DoWhy's non-parametric sensitivity analysis of a CFR estimate, from its doubly robust stage.

    What DoWhy's :class:`~dowhy.causal_refuters.non_parametric_sensitivity_analyzer.\
NonParametricSensitivityAnalyzer` holds -- ``theta_s``, ``sigma_2``, ``nu_2``, ``S2``,
    ``r2yu_tw``, ``r2tu_w``, ``results``, ``RV``, ``RV_alpha``, ``plot()``, the printout -- with
    the numbers of :mod:`dowhy_cfr.sensitivity` (module docstring). Created by
    ``model.refute_estimate(..., method_name="add_unobserved_common_cause",
    simulation_method="non-parametric-partial-R2")``.

    Parameters
    ----------
    estimate : CausalEstimate of ``backdoor.cfr`` / ``backdoor.tarnet``
    effect_strength_treatment, effect_strength_outcome : float, array or None
        ``c_t`` and ``c_y`` (DoWhy's ``partial_r2_confounder_treatment`` and
        ``partial_r2_confounder_outcome``), both or neither; arrays: ``results`` holds their
        largest values, ``plot()`` draws the grid.
    significance_level : float in (0, 0.5), default 0.05
        One-sided level of the confidence bounds, as DoWhy's.

    Attributes
    ----------
    params : dowhy_cfr.sensitivity.SensitivityParams
    target : str, e.g. "ATE of t=1 vs 0"
    """

    def __init__(self, estimate, *, effect_strength_treatment=None, effect_strength_outcome=None,
                 significance_level=0.05):
        self.params, self.target = estimate_params(estimate)
        self._alpha = _one_sided(significance_level)
        super().__init__(estimator=estimate.estimator, theta_s=self.params.theta,
                         significance_level=float(significance_level),
                         effect_strength_treatment=effect_strength_treatment,
                         effect_strength_outcome=effect_strength_outcome)

    def check_sensitivity(self, plot=True):
        """The bounds at the given strengths (``results``) and the robustness values ``RV``
        (of the estimate) and ``RV_alpha`` (of the one-sided confidence bound); ``plot=True``
        draws DoWhy's contour plot. Returns self."""
        p = self.params
        self.theta_s = self.point_estimate = p.theta
        self.standard_error = p.stderr
        self.sigma_2, self.nu_2 = p.sigma2, p.nu2
        self.S2, self.S = p.sigma2 * p.nu2, p.scale
        self.r2yu_tw, self.r2tu_w = self.effect_strength_outcome, self.effect_strength_treatment
        self.results = None
        if self.r2yu_tw is not None:  # DoWhy's table: the largest strengths given
            self.results = pd.DataFrame(self.perform_benchmarking(
                r2yu_tw=float(np.max(self.r2yu_tw)), r2tu_w=float(np.max(self.r2tu_w)),
                significance_level=self.significance_level, is_partial_linear=False), index=[0])
        self.RV = self.calculate_robustness_value(alpha=None, is_partial_linear=False)
        self.RV_alpha = self.calculate_robustness_value(alpha=self.significance_level,
                                                        is_partial_linear=False)
        if plot:
            self.plot()
        return self

    def plot(self, *args, **kwargs):
        """DoWhy's contour plot of the bounds (DoWhy's arguments): over the strengths given where
        an axis has two or more, else over DoWhy's grid of [0, 0.99) (DoWhy's own plot fails on
        a single strength)."""
        names = ("effect_strength_treatment", "effect_strength_outcome", "r2tu_w", "r2yu_tw")
        saved = {name: getattr(self, name) for name in names}
        grids = [_grid(saved["effect_strength_treatment"]), _grid(saved["effect_strength_outcome"])]
        for name, grid in zip(names, grids * 2):
            setattr(self, name, grid)
        try:
            return super().plot(*args, **kwargs)
        finally:
            for name, value in saved.items():
                setattr(self, name, value)

    def get_confidence_levels(self, r2yu_tw, r2tu_w, significance_level, is_partial_linear):
        """``(lower, upper, bias)`` at ``c_y = r2yu_tw``, ``c_t = r2tu_w`` (``rho = 1``): the
        bounds on the estimate (``significance_level=None``) or the one-sided confidence bounds."""
        c_y, c_t = float(r2yu_tw), float(r2tu_w)
        bias = confounding_bias(self.params, c_y=c_y, c_t=c_t)
        if significance_level is None:
            lower, upper = sensitivity_interval(self.params, c_y=c_y, c_t=c_t,
                                                interval_type="theta")
        else:
            lower, upper = sensitivity_interval(self.params, alpha=_one_sided(significance_level),
                                                c_y=c_y, c_t=c_t)
        return lower, upper, bias

    def calculate_robustness_value(self, alpha, is_partial_linear):
        """The exact robustness value of the estimate (``alpha=None``) or of its one-sided
        confidence bound at level ``1 - alpha`` (:func:`dowhy_cfr.sensitivity.robustness_value`)."""
        if alpha is None:
            return robustness_value(self.params, interval_type="theta")
        return robustness_value(self.params, alpha=_one_sided(alpha))

    def __str__(self):
        p = self.params
        return (super().__str__()
                + f"(CFR's doubly robust stage: {self.target} over {p.n_units} units, "
                  f"sigma^2 = {p.sigma2:.4g}, nu^2 = {p.nu2:.4g}. 'The treatment' above is the "
                  f"Riesz representer of the estimate: see docs/sensitivity.md.)\n")


def _grid(strengths):
    """The sorted strengths of a plot axis, or None (DoWhy's grid) for fewer than two."""
    if strengths is None or np.size(strengths) < 2:
        return None
    return np.sort(np.ravel(np.asarray(strengths, dtype=float)))


def _check_dowhy_refit(estimate, options: list) -> None:
    """ValueError where DoWhy's own (refitting) analysis cannot bound this CFR estimate."""
    adapter = estimate.estimator
    target = getattr(adapter, "_target_units", "ate")
    cats = [c.item() if isinstance(c, np.generic) else c
            for c in adapter.estimator.fitted_.encoding.categories]
    binary = len(cats) == 2 and cats[0] in (0, False) and cats[1] in (1, True)
    t1, t0 = estimate.treatment_value, estimate.control_value
    if (isinstance(target, str) and target.lower() == "ate" and binary
            and np.ndim(t1) == 0 and np.ndim(t0) == 0 and t1 == cats[1] and t0 == cats[0]):
        return
    raise ValueError(
        f"{', '.join(options)} ask(s) for DoWhy's own non-parametric analysis, which refits "
        f"its nuisance models and bounds the ATE of a binary 0/1 treatment (1 vs 0) only; this "
        f"CFR estimate is for target_units={target!r}, arms {t1!r} vs {t0!r} of {cats}. "
        f"Leave out {', '.join(options)}: the analysis "
        f"then uses CFR's doubly robust stage, which bounds the ATE, ATT or ATC of any two arms")


def non_parametric_partial_r2(call_dowhy, arguments: dict):
    """DoWhy's ``sensitivity_non_parametric_partial_r2`` for a CFR estimate (``arguments``: its
    arguments by name, defaults included; ``call_dowhy()`` runs DoWhy's own): a
    :class:`CFRSensitivityAnalyzer`, or DoWhy's analysis where its options ask for it."""
    refit = [k for k in DOWHY_REFIT_OPTIONS if arguments.get(k) is not None]
    refit += ["plugin_reisz=True"] if arguments.get("plugin_reisz") else []
    if refit:
        _check_dowhy_refit(arguments["estimate"], refit)
        return call_dowhy()
    analyzer = CFRSensitivityAnalyzer(arguments["estimate"],
                                      effect_strength_treatment=arguments.get("kappa_t"),
                                      effect_strength_outcome=arguments.get("kappa_y"))
    return analyzer.check_sensitivity(plot=bool(arguments.get("plot_estimate", True)))


def direct_simulation(call_dowhy, arguments: dict):
    """DoWhy's ``sensitivity_simulation`` for a CFR estimate: a ValueError with the fix for a bool
    treatment column under pandas >= 3 (DoWhy writes 0/1 into it), else DoWhy's simulation."""
    data = arguments.get("data")
    if isinstance(data, pd.DataFrame) and int(pd.__version__.split(".")[0]) >= 3:
        names = (arguments.get("treatment_name")
                 or getattr(arguments.get("target_estimand"), "treatment_variable", None) or [])
        for name in [names] if isinstance(names, str) else list(names):
            if name in data and pd.api.types.is_bool_dtype(data[name]):
                raise ValueError(
                    f"add_unobserved_common_cause (direct-simulation): DoWhy 0.14 writes 0/1 "
                    f"into the treatment column, which pandas >= 3 refuses for the bool column "
                    f"{name!r}. Store it as int before building the CausalModel "
                    f"(df[{name!r}] = df[{name!r}].astype(int)) and estimate with "
                    f"treatment_value=1, control_value=0; or use "
                    f"simulation_method='non-parametric-partial-R2'")
    return call_dowhy()
