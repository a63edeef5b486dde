"""Every change dowhy_cfr makes to DoWhy, in one place (run once on ``import dowhy_cfr``).

DoWhy 0.14 has no plug-in registry for estimators or refuters, so five things are put in place
(and a sixth for the duration of a dummy-outcome refutation of a CFR estimate):

1. **Method names.** DoWhy resolves ``method_name="backdoor.<name>"`` by importing the module
   ``dowhy.causal_estimators.<name>_estimator`` and taking its class ``CapWords(<name>)``
   (a refuter ``<name>`` likewise from ``dowhy.causal_refuters.<name>``). Small alias modules
   for ``cfr``, ``tarnet``, ``dowhy_cfr`` and the refuter ``representation_balance`` are put
   into :data:`sys.modules`; nothing is written to disk and a real DoWhy module of the same
   name is never shadowed.
2. **Bare names.** ``CausalModel.estimate_effect`` splits ``method_name`` at its first dot, so
   ``"cfr"`` alone fails; it is wrapped once so that ``"cfr"``/``"tarnet"`` become
   ``"backdoor.cfr"``/``"backdoor.tarnet"`` (every other call passes through unchanged).
3. **Stacked refuters.** DoWhy's five re-estimating refuter functions
   (:data:`dowhy_cfr.stacked_refuters.REFUTERS`) are module globals that DoWhy's refuter classes
   call; each is replaced by a dispatcher that sends CFR estimates to
   :func:`dowhy_cfr.stacked_refuters.refute_stacked` and everything else to DoWhy's function.
4. **Sensitivity analysis.** ``add_unobserved_common_cause``'s module functions
   ``sensitivity_non_parametric_partial_r2`` and ``sensitivity_simulation``
   (:data:`SENSITIVITY`), which DoWhy's refuter class calls, are replaced by dispatchers that send
   CFR estimates to :mod:`dowhy_cfr.dowhy_sensitivity` (the bounds from CFR's doubly robust
   stage; a clear error for a bool treatment in the direct simulation) and everything else to
   DoWhy's function.
5. **The functional API.** ``dowhy.causal_refuters.refute_estimate(..., refuters=[...])``
   swaps DoWhy's refuter functions (and ``sensitivity_simulation``) for the dispatchers, also
   those a user imported before ``import dowhy_cfr``.
6. **Writable dummy outcomes.** While DoWhy's dummy-outcome refuter runs on a CFR estimate
   (stacked or DoWhy's own loop), its ``process_data`` gets and returns writable copies of the
   outcome arrays (:func:`writable_dummy_outcomes`): under pandas 3 DoWhy's outcome array
   (``Series.values``) is read-only, and DoWhy permutes it and adds the true effect to it in
   place ("assignment destination is read-only", "output array is read-only").

What these rely on is checked by :func:`contract_problems` before anything is changed: a DoWhy
whose functions are missing or have other signatures gets a warning and is left unchanged, and
the tests (``tests/test_dowhy_contract.py``) check the behaviour the stacked replay relies on
(how DoWhy names modules and classes, and that its refuters draw random numbers only from
numpy's and Python's global states and their ``random_state``), so that they fail loudly on a
DoWhy version that changed it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import sys
import types
import warnings

import numpy as np
from dowhy import CausalModel

from . import dowhy_sensitivity
from .dowhy_adapter import CFREstimator, TARNetEstimator, normalize_method_name
from .refuters import RepresentationBalance
from .stacked_refuters import (REFUTERS, check_placebo_treatment, is_cfr_estimate, refute_stacked,
                               stacking_enabled)

__all__ = ["ALIASES", "SENSITIVITY", "SENSITIVITY_MODULE", "register", "register_alias",
           "contract_problems", "writable_dummy_outcomes"]

#: Alias modules: module name -> (attribute, class).
ALIASES = {
    "dowhy.causal_estimators.cfr_estimator": ("CfrEstimator", CFREstimator),
    "dowhy.causal_estimators.tarnet_estimator": ("TarnetEstimator", TARNetEstimator),
    "dowhy.causal_estimators.dowhy_cfr": ("DowhyCfr", CFREstimator),
    "dowhy.causal_refuters.representation_balance": ("RepresentationBalance",
                                                     RepresentationBalance),
}
#: The parameters of DoWhy's refuter functions that the dispatchers read.
_REFUTER_PARAMETERS = ("data", "target_estimand", "estimate")
#: DoWhy's module of the ``add_unobserved_common_cause`` refuter.
SENSITIVITY_MODULE = "dowhy.causal_refuters.add_unobserved_common_cause"
#: Its functions that CFR estimates are routed away from: name -> (what CFR estimates get,
#: the parameters it reads).
SENSITIVITY = {
    "sensitivity_non_parametric_partial_r2": (
        dowhy_sensitivity.non_parametric_partial_r2,
        ("estimate", "kappa_t", "kappa_y", "plot_estimate", "plugin_reisz",
         *dowhy_sensitivity.DOWHY_REFIT_OPTIONS)),
    "sensitivity_simulation": (dowhy_sensitivity.direct_simulation,
                               ("data", "target_estimand", "estimate", "treatment_name")),
}
#: DoWhy's dummy-outcome transformation function and its parameters.
_PROCESS_DATA = ("dowhy.causal_refuters.dummy_outcome_refuter", "process_data",
                 ["outcome_name", "X_train", "outcome_train", "X_validation",
                  "outcome_validation", "transformation_list"])


def register_alias(module_name: str, attr: str, cls, doc: str) -> bool:
    """Put a module ``module_name`` with ``attr = cls`` into :data:`sys.modules` for DoWhy's
    name lookup (idempotent). A real module of that name is never shadowed: then False."""
    existing = sys.modules.get(module_name)
    if existing is not None:
        if getattr(existing, "__dowhy_cfr_alias__", False):
            setattr(existing, attr, cls)
            return True
        return False  # a real module of that name is loaded: leave it alone
    try:
        if importlib.util.find_spec(module_name) is not None:
            return False  # DoWhy ships a real module of that name: never shadow it
    except (ImportError, ValueError):
        pass
    alias = types.ModuleType(module_name, doc)
    alias.__dowhy_cfr_alias__ = True
    setattr(alias, attr, cls)
    sys.modules[module_name] = alias
    return True


def _refuter_function(method_name: str):
    module_name, func = REFUTERS[method_name]
    module = importlib.import_module(f"dowhy.causal_refuters.{module_name}")
    return module, func, getattr(module, func, None)


def contract_problems() -> list[str]:
    """What of DoWhy's API the registration relies on and this DoWhy lacks (empty: all there)."""
    problems = []
    params = inspect.signature(CausalModel.estimate_effect).parameters
    if list(params)[1:3] != ["identified_estimand", "method_name"]:
        problems.append("CausalModel.estimate_effect(identified_estimand, method_name, ...)")
    for name in REFUTERS:
        try:
            _, func, fn = _refuter_function(name)
        except ImportError:
            problems.append(f"module dowhy.causal_refuters.{REFUTERS[name][0]}")
            continue
        original = getattr(fn, "__dowhy_cfr_original__", fn)
        if original is None or not set(_REFUTER_PARAMETERS) <= set(
                inspect.signature(original).parameters):
            problems.append(f"{func}({', '.join(_REFUTER_PARAMETERS)}, ...)")
    try:
        module = importlib.import_module(SENSITIVITY_MODULE)
    except ImportError:
        module = None
    for name, (_, needed) in SENSITIVITY.items():
        fn = getattr(module, name, None)
        original = getattr(fn, "__dowhy_cfr_original__", fn)
        if original is None or not set(needed) <= set(inspect.signature(original).parameters):
            problems.append(f"add_unobserved_common_cause.{name}({', '.join(needed)}, ...)")
    try:
        api = importlib.import_module("dowhy.causal_refuters.refute_estimate")
        if "refuters" not in inspect.signature(api.refute_estimate).parameters:
            problems.append("refute_estimate(..., refuters=...)")
    except (ImportError, AttributeError):
        problems.append("dowhy.causal_refuters.refute_estimate.refute_estimate")
    return problems


def _writable(a):
    return None if a is None else np.array(a, copy=True)


@contextlib.contextmanager
def writable_dummy_outcomes():
    """For the duration: DoWhy's dummy-outcome ``process_data`` works on writable copies of the
    outcome arrays and returns a writable array (DoWhy then adds the true effect to it in place).
    Does nothing where DoWhy's function is missing or has other parameters."""
    module_name, attr, params = _PROCESS_DATA
    module = importlib.import_module(module_name)
    original = getattr(module, attr, None)
    if (original is None or hasattr(original, "__dowhy_cfr_original__")
            or list(inspect.signature(original).parameters) != params):
        yield
        return

    @functools.wraps(original)
    def process_data(outcome_name, X_train, outcome_train, X_validation, outcome_validation,
                     transformation_list):
        return _writable(original(outcome_name, X_train, _writable(outcome_train), X_validation,
                                  _writable(outcome_validation), transformation_list))

    process_data.__dowhy_cfr_original__ = original
    setattr(module, attr, process_data)
    try:
        yield
    finally:
        setattr(module, attr, original)


def _wrap_estimate_effect() -> None:
    original = CausalModel.estimate_effect
    if getattr(original, "__dowhy_cfr_wrapper__", False):
        return

    @functools.wraps(original)
    def estimate_effect(self, identified_estimand, method_name=None, *args, **kwargs):
        return original(self, identified_estimand, normalize_method_name(method_name),
                        *args, **kwargs)

    estimate_effect.__dowhy_cfr_wrapper__ = True
    CausalModel.estimate_effect = estimate_effect


def _dispatcher(method_name: str, original):
    """DoWhy's refuter function ``original``, stacked for CFR estimates."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def refuter(*args, **kwargs):
        try:
            bound = signature.bind_partial(*args, **kwargs).arguments
        except TypeError:
            return original(*args, **kwargs)
        if not is_cfr_estimate(bound.get("estimate")):
            return original(*args, **kwargs)
        with (writable_dummy_outcomes() if method_name == "dummy_outcome_refuter"
              else contextlib.nullcontext()):
            if not stacking_enabled():
                if method_name == "placebo_treatment_refuter":  # DoWhy's own loop, same trap
                    check_placebo_treatment(bound.get("data"), bound.get("target_estimand"),
                                            bound.get("placebo_type"))
                return original(*args, **kwargs)
            extra = bound.pop("_", {})  # DoWhy's functions swallow unknown keywords
            return refute_stacked(method_name, **{**extra, **bound})

    refuter.__dowhy_cfr_original__ = original
    return refuter


def _wrap_refuters() -> dict:
    """Replace DoWhy's refuter functions by dispatchers (idempotent); {original id: wrapper}."""
    package = importlib.import_module("dowhy.causal_refuters")
    swap = {}
    for name in REFUTERS:
        module, func, current = _refuter_function(name)
        original = getattr(current, "__dowhy_cfr_original__", current)
        wrapped = current if current is not original else _dispatcher(name, original)
        setattr(module, func, wrapped)  # the refuter classes call this module global
        setattr(package, func, wrapped)
        swap[id(original)] = wrapped
    return swap


def _sensitivity_dispatcher(original, replacement):
    """DoWhy's sensitivity function ``original``; CFR estimates go to ``replacement(call_dowhy,
    arguments)`` (``arguments``: by name, with the defaults; ``call_dowhy()`` runs DoWhy's)."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def sensitivity(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)
        if not is_cfr_estimate(bound.arguments.get("estimate")):
            return original(*args, **kwargs)
        bound.apply_defaults()
        return replacement(functools.partial(original, *args, **kwargs), dict(bound.arguments))

    sensitivity.__dowhy_cfr_original__ = original
    return sensitivity


def _wrap_sensitivity() -> dict:
    """Replace the functions of :data:`SENSITIVITY` by dispatchers (idempotent), in DoWhy's
    module (the refuter class calls these globals) and package; {original id: wrapper}."""
    module = importlib.import_module(SENSITIVITY_MODULE)
    package = importlib.import_module("dowhy.causal_refuters")
    swap = {}
    for name, (replacement, _) in SENSITIVITY.items():
        current = getattr(module, name)
        original = getattr(current, "__dowhy_cfr_original__", current)
        wrapped = current if current is not original else _sensitivity_dispatcher(original,
                                                                                  replacement)
        setattr(module, name, wrapped)
        if hasattr(package, name):
            setattr(package, name, wrapped)
        swap[id(original)] = wrapped
    return swap


def _wrap_functional_api(swap: dict) -> None:
    """DoWhy's ``refute_estimate(..., refuters=[...])`` with its refuter functions replaced by
    the dispatchers (also the functions a user imported before ``import dowhy_cfr``)."""
    module = importlib.import_module("dowhy.causal_refuters.refute_estimate")
    original = module.refute_estimate
    if getattr(original, "__dowhy_cfr_wrapper__", False):
        return

    @functools.wraps(original)
    def refute_estimate(*args, refuters=module.ALL_REFUTERS, **kwargs):
        refuters = [swap.get(id(r), r) for r in refuters]
        return original(*args, refuters=refuters, **kwargs)

    refute_estimate.__dowhy_cfr_wrapper__ = True
    module.refute_estimate = refute_estimate
    importlib.import_module("dowhy.causal_refuters").refute_estimate = refute_estimate


def register() -> dict:
    """Make every change to DoWhy (idempotent; run on ``import dowhy_cfr``).

    Returns ``{alias module name: registered?}`` (False: a real module of that name exists and
    was left alone). If DoWhy lacks what the wrappers rely on (:func:`contract_problems`), only
    the aliases are registered, with a warning naming what is missing.
    """
    done = {name: register_alias(name, attr, cls,
                                 f"Alias registered by dowhy_cfr for DoWhy's name lookup; the "
                                 f"class is {cls.__module__}.{cls.__name__}.")
            for name, (attr, cls) in ALIASES.items()}
    problems = contract_problems()
    if problems:
        warnings.warn(f"this DoWhy version lacks what dowhy_cfr's integration relies on "
                      f"({'; '.join(problems)}): the bare method names, the stacked "
                      f"refuters and the sensitivity routing are off, DoWhy runs unchanged. "
                      f"dowhy_cfr is tested with "
                      f"DoWhy 0.14.", RuntimeWarning, stacklevel=2)
        return done
    _wrap_estimate_effect()
    _wrap_functional_api({**_wrap_refuters(), **_wrap_sensitivity()})
    return done
