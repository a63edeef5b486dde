"""DoWhy's re-estimating refuters for CFR/TARNet estimates, every simulation in one stacked training.

DoWhy's ``placebo_treatment_refuter``, ``data_subset_refuter``, ``bootstrap_refuter``,
``random_common_cause`` and ``dummy_outcome_refuter`` re-estimate the effect once per simulation
(100 by default), each time fitting a new estimator. For CFR that is 100 trainings per refuter.
After ``import dowhy_cfr`` the same calls::

    model.refute_estimate(estimand, estimate, method_name="placebo_treatment_refuter")
    dowhy.causal_refuters.refute_estimate(df, estimand, estimate,
                                          refuters=[refute_placebo_treatment, ...])

train all simulations of a CFR/TARNet estimate as one stack (one per distinct data shape), and
return DoWhy's own :class:`~dowhy.causal_refuter.CausalRefutation` (or list of them), built by
DoWhy's own refuter function with DoWhy's significance test. Any other estimate goes to DoWhy
unchanged.

How: record, train, replay
--------------------------
The refuter function of DoWhy is run twice with the same random state (``numpy``'s global
state, Python's ``random`` and a ``RandomState`` passed as ``random_state``):

1. *record*: DoWhy draws every simulation's data (permuted or random placebo, subset,
   resample with noise, random common cause, dummy outcome -- DoWhy's own code) and calls
   ``fit`` on a copy of the adapter; the copy only records the data CFR would be fitted on.
2. *train*: the recorded datasets are trained together with :meth:`CFR.fit_stacked` (datasets
   of one shape form one stack), with the original estimate's seeds and step budget (below).
3. *replay*: DoWhy runs again from the same random state, draws the same data (checked), and
   each ``fit`` takes its network from the stack; ``estimate_effect`` is the adapter's own (the
   same code, target units and arms as the original estimate), and DoWhy computes the result
   and its p-value as always. If a replayed dataset differs from the recorded one (a random
   source outside the states above), the refutation falls back to DoWhy's per-simulation loop
   with a warning.

Comparable re-estimates (a CFR fit is stochastic)
-------------------------------------------------
``seeds``: ``"original"`` trains every simulation with the original estimate's network seeds,
so a re-estimate differs from the original only through the refuter's data (DoWhy's loop does
the same for an estimator with an int ``random_state``). ``"spread"`` gives every simulation
fresh seeds (from a generator seeded by the original seeds), so the re-estimates carry the
seed-to-seed spread of the estimator itself. ``"auto"`` (default) is ``"spread"`` for
``random_common_cause`` -- the extra input column changes the network's shape, so the original
seed no longer gives the original initial weights and one fixed seed would compare one
initialisation with another -- and for an estimator with ``random_state=None``, whose copies
DoWhy's loop refits with fresh seeds; ``"original"`` for the others. See
``docs/refutation.md``.

``steps``: ``"fitted"`` (default) trains every simulation for the number of steps the original
fit's early stopping selected (its ``best_iteration_``), keeping the best validation checkpoint
within them and skipping the patience tail -- on unchanged data this reproduces the original
network -- and cross-fits each simulation's propensities with the model family the original
fit's propensity selection kept (``propensity_model_``: by default the logistic regression or
the boosting), instead of fitting every candidate again; ``"early_stopping"`` runs the
estimator's own schedule, stopping and propensity selection (what DoWhy's loop runs); an int,
that many steps (with the original's propensity family). Either way a simulation refits the alpha the original selected
(``alpha_``, under ``alpha="auto"``).

DoWhy's calls cannot carry these options; set them with :func:`stacking_options`, or call
:func:`refute_stacked` (our own name) directly. ``n_jobs`` is ignored (the stack replaces
joblib's processes). The refutation gets an extra attribute ``stacking`` (a dict: simulations,
stacks, steps, seeds, seconds, the re-estimates).

Every option of the five refuters is stacked, including dummy-outcome transformations with
estimators (one stack per distinct validation-set size) and bootstrap noise on chosen columns.
Refitting DoWhy's way (one training per simulation) remains available: leave the
``stacking_options(enabled=False)`` context, or call :func:`dowhy_refuter` (the unwrapped
DoWhy function).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import logging
import random
import time
import types
import warnings

import numpy as np
import pandas as pd
from sklearn.base import clone

from .nuisance import propensity_candidates
from .dowhy_adapter import CFREstimator, in_data_order

__all__ = ["REFUTERS", "refute_stacked", "stacking_options", "stacking_enabled", "dowhy_refuter",
           "is_cfr_estimate", "check_placebo_treatment", "explain", "refute_all",
           "family_verdict", "explain_family"]

#: DoWhy method names -> (module in ``dowhy.causal_refuters``, refuter function name).
REFUTERS = {
    "placebo_treatment_refuter": ("placebo_treatment_refuter", "refute_placebo_treatment"),
    "data_subset_refuter": ("data_subset_refuter", "refute_data_subset"),
    "bootstrap_refuter": ("bootstrap_refuter", "refute_bootstrap"),
    "random_common_cause": ("random_common_cause", "refute_random_common_cause"),
    "dummy_outcome_refuter": ("dummy_outcome_refuter", "refute_dummy_outcome"),
}
_SEED_HIGH = 2**31 - 1
_RATIO_REFUTERS = ("placebo_treatment_refuter", "dummy_outcome_refuter")  # ideal new effect: 0
_OPTIONS = {"enabled": True, "steps": "fitted", "seeds": "auto"}
_logger = logging.getLogger(__name__)


class ReplayMismatch(RuntimeError):
    """The replayed simulation's data differ from the recorded ones."""


# ----------------------------------------------------------------------------- options
@contextlib.contextmanager
def stacking_options(*, enabled=None, steps=None, seeds=None):
    """Set how DoWhy's refuters treat CFR estimates inside a ``with`` block.

    Parameters
    ----------
    enabled : bool, optional
        False: DoWhy's own per-simulation loop (one training per simulation).
    steps : {"fitted", "early_stopping"} or int, optional
        Training steps of every simulation (see the module docstring).
    seeds : {"auto", "original", "spread"}, optional
        Network seeds of the simulations (see the module docstring).
    """
    new = {k: v for k, v in (("enabled", enabled), ("steps", steps), ("seeds", seeds))
           if v is not None}
    _check_options(new.get("steps", _OPTIONS["steps"]), new.get("seeds", _OPTIONS["seeds"]))
    old = dict(_OPTIONS)
    _OPTIONS.update(new)
    try:
        yield dict(_OPTIONS)
    finally:
        _OPTIONS.clear()
        _OPTIONS.update(old)


def _check_options(steps, seeds):
    if seeds not in ("auto", "original", "spread"):
        raise ValueError(f"seeds={seeds!r} is invalid: use 'auto', 'original' or 'spread'")
    if isinstance(steps, str):
        if steps not in ("fitted", "early_stopping"):
            raise ValueError(f"steps={steps!r} is invalid: use 'fitted', 'early_stopping' or a "
                             f"positive number of steps")
    elif isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps={steps!r} is invalid: use 'fitted', 'early_stopping' or a "
                         f"positive number of steps")


def stacking_enabled() -> bool:
    """Whether DoWhy's refuters stack CFR estimates now (:func:`stacking_options`)."""
    return bool(_OPTIONS["enabled"])


def is_cfr_estimate(estimate) -> bool:
    """Whether ``estimate`` (a DoWhy CausalEstimate) comes from ``backdoor.cfr``/``tarnet``."""
    return isinstance(getattr(estimate, "estimator", None), CFREstimator)


def dowhy_refuter(method_name: str):
    """DoWhy's own (unwrapped) refuter function of ``method_name``."""
    if method_name not in REFUTERS:
        raise ValueError(f"method_name={method_name!r} is not one of {sorted(REFUTERS)}")
    module, func = REFUTERS[method_name]
    current = getattr(importlib.import_module(f"dowhy.causal_refuters.{module}"), func)
    return getattr(current, "__dowhy_cfr_original__", current)  # the wrapper keeps it


# ----------------------------------------------------------------------------- the session
class _Session:
    """Recorded datasets of one refutation, then the fitted estimators replayed in order."""

    def __init__(self):
        self.records: list = []  # (y, t, x, columns)
        self.fits: list | None = None
        self.position = 0
        self.values: list = []

    @property
    def replaying(self) -> bool:
        return self.fits is not None

    def take(self, y, t, x, columns):
        """Record one dataset (record pass) or return its fitted estimator (replay pass)."""
        if not self.replaying:
            self.records.append((y, t, x, tuple(columns)))
            return len(self.records) - 1
        if self.position >= len(self.records):
            raise ReplayMismatch("more simulations were replayed than recorded")
        ry, rt, rx, rcols = self.records[self.position]
        if (rcols != tuple(columns) or not np.array_equal(ry, y) or not np.array_equal(rt, t)
                or not np.array_equal(rx, x)):
            raise ReplayMismatch(f"simulation {self.position} drew other data when replayed")
        self.position += 1
        return self.fits[self.position - 1]


class _Capture:
    """Stands in for the CFR inside ``CFREstimator.fit``: keeps what it would be fitted on."""

    def fit(self, Y, T, *, X, **_):
        self.data = (np.asarray(Y, dtype=float), np.asarray(T), np.asarray(X, dtype=float),
                     list(X.columns))
        return self


class _StackedAdapter(CFREstimator):
    """The adapter DoWhy's refuter loop works with during a stacked refutation: ``fit`` runs the
    adapter's own bookkeeping, then records the data (or takes the replayed network)."""

    _session: _Session

    def get_new_estimator_object(self, identified_estimand, test_significance=False,
                                 evaluate_effect_strength=False, confidence_intervals=None):
        session, fitted = self._session, self.estimator
        self._session, self.estimator = None, None  # neither is copied
        try:
            new = super().get_new_estimator_object(identified_estimand, test_significance,
                                                   evaluate_effect_strength, confidence_intervals)
        finally:
            self._session, self.estimator = session, fitted
        new._session, new.estimator = session, fitted
        new._confidence_intervals = False  # the refuters only use the value
        return new

    def fit(self, data, effect_modifier_names=None, **fit_params):
        capture = _Capture()
        self.estimator = capture
        super().fit(data, effect_modifier_names)  # no EconML inference: only values are used
        self._slot = self._session.take(*capture.data)
        if self._session.replaying:
            self.estimator = self._slot
        return self

    def estimate_effect(self, data, treatment_value=1, control_value=0, target_units=None, **kw):
        if not self._session.replaying:
            return types.SimpleNamespace(value=float(self._slot))  # placeholder, discarded
        estimate = super().estimate_effect(data, treatment_value, control_value, target_units)
        self._session.values.append(estimate.value)
        return estimate


def _session_estimate(estimate, session):
    """A shallow copy of ``estimate`` whose estimator is a recording copy of its adapter."""
    adapter = copy.copy(estimate.estimator)
    adapter.__class__ = _StackedAdapter
    adapter._session = session
    out = copy.copy(estimate)
    out.estimator = adapter
    return out


# ----------------------------------------------------------------------------- training
def _step_budget(est, steps):
    if steps == "fitted":
        return {"n_iter": max(1, int(np.max(est.best_iteration_))), "patience": None}
    if steps == "early_stopping":
        return {}
    return {"n_iter": int(steps), "patience": None}


def _seed_matrix(est, n_sims: int, seeds: str) -> np.ndarray:
    """(n_sims, n_members) network seeds: the original's, or fresh ones per simulation."""
    original = np.asarray(est.seeds_, dtype=np.int64)
    if seeds == "original":
        return np.tile(original, (n_sims, 1))
    rng = np.random.default_rng([int(s) for s in original] + [0x5EED])
    return rng.integers(0, _SEED_HIGH, size=(n_sims, len(original)))


def _train_records(estimate, records, steps, seeds) -> tuple[list, int, dict]:
    """Fitted CFRs for the recorded datasets, one stack per distinct shape/columns."""
    est = estimate.estimator.estimator
    # the refuters use only the values (doubly robust averages), which the blend of the unit-level
    # effects leaves as they are: the simulations skip it
    params = {"n_ensemble": len(est.seeds_), "verbose": 0, "final_blend": False,
              **_step_budget(est, steps)}
    if isinstance(est.alpha, (str, list, tuple)):  # alpha="auto" or a grid: refit the choice
        params["alpha"] = est.alpha_
    candidates = propensity_candidates(est.model_propensity)
    if steps != "early_stopping" and est.debias is not None and len(candidates) > 1:
        params["model_propensity"] = candidates[est.propensity_model_]  # the one the fit kept
    template = clone(est).set_params(**params)
    seed_matrix = _seed_matrix(est, len(records), seeds)
    groups: dict = {}
    for i, (_, _, x, cols) in enumerate(records):
        groups.setdefault((x.shape, cols), []).append(i)
    fits = [None] * len(records)
    for (_, cols), idx in groups.items():
        xs = [pd.DataFrame(records[i][2], columns=list(cols)) for i in idx]
        members = template.fit_stacked([records[i][0] for i in idx],
                                       [records[i][1] for i in idx], X=xs,
                                       seeds=seed_matrix[idx])
        for i, m in zip(idx, members):
            fits[i] = m
    return fits, len(groups), params


# ----------------------------------------------------------------------------- the refutation
class _RandomStates:
    """Everything a refuter draws from (numpy's and Python's global states, a ``RandomState``
    or ``Generator`` passed as ``random_state``), saved so that the refuter can run again from
    the same state."""

    def __init__(self, kwargs):
        self.global_states = (np.random.get_state(), random.getstate())
        self.random_state = kwargs.get("random_state")
        self.saved = copy.deepcopy(self.random_state)

    def arguments(self, kwargs, *, last: bool):
        """``kwargs`` for one more run: globals restored; a RandomState or Generator argument
        copied from its saved state (the caller's own object, reset to that state, for the
        ``last`` run, as DoWhy would use it)."""
        np.random.set_state(self.global_states[0])
        random.setstate(self.global_states[1])
        if isinstance(self.random_state, np.random.RandomState):
            if not last:
                return {**kwargs, "random_state": copy.deepcopy(self.saved)}
            self.random_state.set_state(self.saved.get_state())
        elif isinstance(self.random_state, np.random.Generator):
            if not last:
                return {**kwargs, "random_state": copy.deepcopy(self.saved)}
            self.random_state.bit_generator.state = self.saved.bit_generator.state
        return kwargs


def _quiet():
    """Silence DoWhy's logging and warnings for the record pass (its result is discarded)."""
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    log = logging.getLogger("dowhy")
    level = log.level
    log.setLevel(logging.CRITICAL)
    stack.callback(log.setLevel, level)
    return stack


def _bootstrap_variables_in_data_order(kwargs: dict, estimate) -> dict:
    """``kwargs`` of DoWhy's bootstrap refuter with the variables it adds noise to listed in the
    data's column order.

    DoWhy adds the noise to its chosen variables one after the other, in the order of the
    estimand's adjustment set, which it builds from a set: that order changes with Python's hash
    seed, i.e. from one process to the next, and with it which column gets which noise draws,
    so that ``random_seed`` did not reproduce the refutation in a new session. The default
    ``required_variables=True`` (all of them) and a list of variables to leave out
    (``["-x1", ...]``) become the same variables in the data's column order; a list of
    variables to use keeps the caller's order; an int (a random choice by Python's ``random``,
    which ``random_seed`` does not seed) is left to DoWhy."""
    required = kwargs.get("required_variables", True)
    if required is not True and not (isinstance(required, list)
                                     and all(str(v).startswith("-") for v in required)):
        return kwargs
    estimand = kwargs["target_estimand"]
    chosen = set(list(estimand.get_adjustment_set() or []) +
                 list(estimand.instrumental_variables or []) +
                 list(getattr(estimate.estimator, "_effect_modifier_names", None) or []))
    dropped = set() if required is True else {str(v)[1:] for v in required}
    if not dropped <= chosen or not chosen - dropped:
        return kwargs  # DoWhy's own error, or nothing to noise (as DoWhy does it)
    return {**kwargs, "required_variables": in_data_order(kwargs["data"], chosen - dropped)}


def refute_stacked(method_name: str, data: pd.DataFrame, target_estimand, estimate, *,
                   steps=None, seeds=None, **kwargs):
    """Run DoWhy's refuter ``method_name`` on a CFR/TARNet estimate, all simulations stacked.

    Parameters
    ----------
    method_name : str
        One of :data:`REFUTERS` (DoWhy's method names).
    data, target_estimand, estimate
        As for DoWhy's refuter functions (``estimate`` from ``backdoor.cfr``/``tarnet``).
    steps : {"fitted", "early_stopping"} or int, optional
        Steps per simulation (default: :func:`stacking_options`' value, ``"fitted"``).
    seeds : {"auto", "original", "spread"}, optional
        Network seeds of the simulations (default ``"auto"``; see the module docstring).
    **kwargs
        DoWhy's arguments of that refuter (``num_simulations``, ``random_state``, ...).

    Returns
    -------
    CausalRefutation or list of them
        DoWhy's result, with an extra ``stacking`` dict.
    """
    steps = _OPTIONS["steps"] if steps is None else steps
    seeds = _OPTIONS["seeds"] if seeds is None else seeds
    _check_options(steps, seeds)
    if not is_cfr_estimate(estimate):
        raise TypeError(f"refute_stacked needs an estimate of backdoor.cfr/backdoor.tarnet; got "
                        f"one of {type(getattr(estimate, 'estimator', None)).__name__}. Use "
                        f"DoWhy's refuters for other estimators.")
    if method_name == "placebo_treatment_refuter":
        check_placebo_treatment(data, target_estimand, kwargs.get("placebo_type"))
    if seeds == "auto":
        seeds = _auto_seeds(method_name, estimate.estimator.estimator)
    refuter = dowhy_refuter(method_name)
    kwargs = {**kwargs, "data": data, "target_estimand": target_estimand, "n_jobs": 1}
    if method_name == "bootstrap_refuter":
        kwargs = _bootstrap_variables_in_data_order(kwargs, estimate)
    start, states = time.perf_counter(), _RandomStates(kwargs)
    session = _Session()
    with _quiet():
        refuter(estimate=_session_estimate(estimate, session),
                **states.arguments(kwargs, last=False))
    session.fits, n_stacks, params = _train_records(estimate, session.records, steps, seeds)
    try:
        result = refuter(estimate=_session_estimate(estimate, session),
                         **states.arguments(kwargs, last=True))
    except ReplayMismatch as exc:
        warnings.warn(f"{method_name}: {exc}; running DoWhy's per-simulation loop instead",
                      RuntimeWarning, stacklevel=2)
        return refuter(estimate=estimate, **states.arguments(kwargs, last=True))
    info = {"simulations": len(session.records), "stacks": n_stacks,
            "steps": params.get("n_iter", "early_stopping"), "seeds": seeds,
            "seconds": time.perf_counter() - start, "estimates": np.asarray(session.values)}
    for res in result if isinstance(result, list) else [result]:
        res.stacking = info
    return result


def _auto_seeds(method_name: str, est) -> str:
    """``seeds="auto"``: "spread" for ``random_common_cause`` (the extra column changes the
    network's shape, so the original seed no longer gives the original initial weights) and for
    an estimator with ``random_state=None`` (DoWhy's loop then draws fresh seeds for every
    simulation); "original" otherwise (DoWhy's loop refits a seeded estimator with its seed)."""
    if method_name == "random_common_cause" or est.random_state is None:
        return "spread"
    return "original"


def check_placebo_treatment(data: pd.DataFrame, target_estimand, placebo_type) -> None:
    """ValueError with the fix where DoWhy's placebo refuter cannot draw a usable placebo: for a
    float treatment column its random placebo is drawn from a normal distribution (on 0/1 data
    all one value); string and categorical columns break inside DoWhy."""
    permute = getattr(placebo_type, "value", placebo_type) == "permute"  # str or DoWhy's enum
    if not isinstance(data, pd.DataFrame):
        return  # DoWhy's own error
    for name in getattr(target_estimand, "treatment_variable", None) or []:
        if name not in data:
            continue
        col = data[name]
        if pd.api.types.is_float_dtype(col) and not permute:
            raise ValueError(
                f"placebo_treatment_refuter: DoWhy draws the random placebo of the float "
                f"treatment column {name!r} from a normal distribution with standard deviation "
                f"0 (every unit gets 0), which is no treatment CFR can fit; pass "
                f"placebo_type='permute' (a permuted treatment: for a dose, the same doses "
                f"shuffled), or for a 0/1 treatment store {name!r} as int or bool (e.g. "
                f"df[{name!r}] = df[{name!r}].astype(int))")
        if not (pd.api.types.is_bool_dtype(col) or pd.api.types.is_numeric_dtype(col)):
            raise ValueError(
                f"placebo_treatment_refuter: DoWhy cannot draw a placebo for the "
                f"{col.dtype} treatment column {name!r}; encode it as 0/1 int or bool "
                f"(e.g. df[{name!r}] = (df[{name!r}] == 'treated').astype(int))")


# ----------------------------------------------------------------------------- reading a result
_MEANING = {
    "placebo_treatment_refuter": (
        "effect of a random placebo treatment",
        "the effect vanishes when the treatment is replaced by a random one",
        "a random placebo treatment still shows an effect: the estimate may not come from the "
        "treatment"),
    "data_subset_refuter": (
        "mean re-estimate on random subsets",
        "the estimate is what random subsets of the units give",
        "the estimate is unlike those of random subsets: it rests on particular units"),
    "bootstrap_refuter": (
        "mean re-estimate on resamples with noisy covariates",
        "the estimate is what resamples with measurement noise give",
        "the estimate is unlike those of resamples with noisy covariates"),
    "random_common_cause": (
        "mean re-estimate with a random common cause added",
        "an irrelevant extra confounder does not move the estimate beyond its seed spread",
        "an irrelevant extra confounder moves the estimate"),
    "dummy_outcome_refuter": (
        "effect on a dummy outcome (true effect 0)",
        "no effect is found where there is none",
        "an effect is found on an outcome that has none"),
}


def refute_all(model, estimand, estimate, refuters=tuple(REFUTERS), *, simulations=100,
                 seed=0, callback=None) -> pd.DataFrame:
    """Run DoWhy's refuters through ``model.refute_estimate(..., num_simulations=simulations,
    random_seed=seed)``, one after the other; returns one row per refuter (wall and CPU
    seconds of this process -- the CPU time does not grow with other processes' load -- stacks,
    the new effect relative to the estimate -- ``new / estimate`` for the placebo and dummy
    outcome, ``new / estimate - 1`` for the others --, the standard deviation of the
    re-estimates ``sim_sd`` (stacked runs) and DoWhy's p-value; the first result of
    refuters returning a list). ``callback(name, refutation, seconds)`` after each.

    The last two columns read the refuters as one family (:func:`family_verdict`): ``p_holm``,
    Holm's adjusted p-value, and ``significant_holm``, whether it is below 0.05.

    ``random_seed`` (DoWhy seeds numpy's global state) rather than an int ``random_state``: with
    an int ``random_state`` DoWhy's subset and bootstrap refuters draw the same rows in every
    simulation."""
    rows = []
    for name in refuters:
        start, cpu = time.perf_counter(), time.process_time()
        res = model.refute_estimate(estimand, estimate, method_name=name,
                                    num_simulations=simulations, random_seed=seed)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        if callback is not None:
            callback(name, res, seconds)
        first = res[0] if isinstance(res, list) else res
        stacking = getattr(first, "stacking", {})
        new = float(first.new_effect)
        rel = new / estimate.value if name in _RATIO_REFUTERS else new / estimate.value - 1
        rows.append(dict(refuter=name, seconds=round(seconds, 1), cpu_seconds=round(cpu, 1),
                         simulations=stacking.get("simulations", simulations),
                         stacks=stacking.get("stacks", simulations),
                         steps=stacking.get("steps", "dowhy"), seeds=stacking.get("seeds", "-"),
                         estimate=round(float(estimate.value), 4), new_effect=round(new, 4),
                         relative=round(rel, 4),
                         sim_sd=round(float(np.std(stacking["estimates"])), 4)
                         if "estimates" in stacking else float("nan"),
                         p_value=float(first.refutation_result["p_value"]),
                         significant=bool(first.refutation_result["is_statistically_significant"])))
    table = pd.DataFrame(rows)
    if len(table):
        family = family_verdict(dict(zip(table["refuter"], table["p_value"])))
        table["p_holm"] = family["p_holm"].to_numpy()
        table["significant_holm"] = family["fails_family"].to_numpy()
    return table


def explain(method_name: str, refutation, estimate_value: float,
            half_width: float | None = None) -> str:
    """One line saying what a refutation of ``method_name`` means (used by the demo).

    The size is relative to the original estimate: ``new_effect / estimate`` for the placebo
    and dummy-outcome refuters (ideally 0), ``new_effect / estimate - 1`` for the others
    (ideally 0); the verdict is DoWhy's significance test at its level (p < 0.05 fails).
    ``half_width``, the half-width of the estimate's own 95 % interval, adds how large a
    failing re-estimate's shift is against it: DoWhy tests the estimate against the spread of
    the simulations, which for the re-estimating refuters can be far narrower than the
    estimate's uncertainty, so a significant shift may still be small (``docs/refutation.md``).
    """
    what, good, bad = _MEANING[method_name]
    result = refutation[0] if isinstance(refutation, list) else refutation
    p = float(result.refutation_result["p_value"])
    significant = bool(result.refutation_result["is_statistically_significant"])
    new = float(result.new_effect)
    if method_name in _RATIO_REFUTERS:
        size = f"{new:+.3f} = {new / estimate_value:+.1%} of the estimate"
        fails = significant and new != 0
        shift = new
    else:
        size = f"{new:.3f} ({new / estimate_value - 1:+.1%} vs the estimate)"
        fails = significant
        shift = new - estimate_value
    verdict = f"FAILS: {bad}" if fails else f"passes: {good}"
    if fails and half_width is not None and half_width > 0:
        verdict += (f" (a shift of {abs(shift):.3f}, {abs(shift) / half_width:.0%} of the "
                    f"estimate's 95 % interval half-width {half_width:.3f})")
    if fails and method_name not in _RATIO_REFUTERS:
        verdict += _fresh_seeds_caveat(getattr(result, "stacking", {}), estimate_value)
    return f"{method_name}: {what} {size}, p = {p:.2g} -> {verdict}"


def _fresh_seeds_caveat(stacking: dict, estimate_value: float) -> str:
    """For a failing re-estimate whose simulations had fresh network seeds (``seeds="spread"``):
    where the original lies among them, and that its own seeds' luck fails the test too."""
    sims = np.asarray(stacking.get("estimates", ()), dtype=float)
    if stacking.get("seeds") != "spread" or len(sims) < 2 or not np.std(sims) > 0:
        return ""
    z = (estimate_value - sims.mean()) / sims.std(ddof=1)
    return (f"; the simulations had fresh network seeds, and the estimate lies {z:+.1f} sd of "
            f"theirs from their mean: an original seed whose estimate is atypical fails this "
            f"test as well -- refit with other random_state values to tell the two apart")


def family_verdict(p_values, alpha: float = 0.05) -> pd.DataFrame:
    """DoWhy's refuters read as one family of tests: Holm's step-down adjustment of their
    p-values (Holm 1979; ``statsmodels.stats.multitest.multipletests(method="holm")``).

    Each refuter's test rejects at ``alpha`` on its own, so with five of them and nothing wrong
    at least one rejects in about one run in four (``1 - 0.95**5 = 23 %`` for independent
    tests). Holm's adjustment keeps the chance of any false rejection among them at ``alpha``
    (for any dependence between the tests) and rejects at least what Bonferroni would.

    Parameters
    ----------
    p_values : mapping or pandas.Series
        Refuter name -> DoWhy's p-value (``refutation_result["p_value"]``). NaN p-values (a
        refuter without a test) are left out of the family.
    alpha : float, default 0.05
        The family-wise error rate (DoWhy's per-test level is 0.05).

    Returns
    -------
    pandas.DataFrame
        Indexed by refuter: ``p_value``, ``p_holm`` (the adjusted p-value, NaN where the p-value
        is), ``fails_alone`` (``p_value <= alpha``, DoWhy's per-test verdict) and
        ``fails_family`` (``p_holm <= alpha``).

    Examples
    --------
    >>> family_verdict({"placebo": 0.03, "subset": 0.4, "bootstrap": 0.6})["p_holm"].round(2)
    placebo      0.09
    subset       0.80
    bootstrap    0.80
    Name: p_holm, dtype: float64
    """
    from statsmodels.stats.multitest import multipletests

    if not 0 < float(alpha) < 1:
        raise ValueError(f"alpha={alpha!r} must be in (0, 1), e.g. 0.05")
    p = pd.Series(p_values, dtype=float)
    if ((p < 0) | (p > 1)).any():
        raise ValueError(f"p_values must lie in [0, 1]; got {p[(p < 0) | (p > 1)].to_dict()}")
    held = p.notna()
    adjusted = pd.Series(np.nan, index=p.index)
    if held.any():
        adjusted[held] = multipletests(p[held].to_numpy(), alpha=alpha, method="holm")[1]
    return pd.DataFrame({"p_value": p, "p_holm": adjusted, "fails_alone": p <= alpha,
                         "fails_family": adjusted <= alpha})


def explain_family(p_values, alpha: float = 0.05) -> str:
    """Two lines for the demo: the refuters' family-wise verdict (:func:`family_verdict`,
    Holm) and what it means next to the per-test verdicts."""
    table = family_verdict(p_values, alpha)
    k, alone = int(table["p_value"].notna().sum()), table.index[table["fails_alone"]].tolist()
    failing = table[table["fails_family"]]
    if len(failing):
        verdict = "FAILS: " + ", ".join(f"{name} (Holm p = {row.p_holm:.2g})"
                                        for name, row in failing.iterrows())
    elif alone:
        verdict = (f"passes: no refuter fails once the {k} tests are read together "
                   f"(smallest Holm p = {table['p_holm'].min():.2g}; "
                   f"{', '.join(alone)} failed alone)")
    else:
        verdict = "passes: no refuter fails, alone or together"
    chance = 1 - (1 - alpha) ** k
    return (f"All {k} refuters together (Holm, family-wise level {alpha:.0%}): {verdict}\n"
            f"  (each test alone fails in {alpha:.0%} of runs when nothing is wrong, so at least "
            f"one of {k} fails in about {chance:.0%} of runs by chance -- for independent tests; "
            f"Holm's reading keeps that chance at {alpha:.0%} for any dependence)")
