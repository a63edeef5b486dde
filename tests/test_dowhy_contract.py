"""Contract tests: the behaviour of DoWhy that dowhy_cfr's integration relies on
(dowhy_cfr.registration). Each fails with a message naming what changed, so that a new DoWhy
version that breaks an assumption is caught here rather than as a wrong refutation."""

import inspect
import random
import warnings

import numpy as np
import pandas as pd
import pytest
from dowhy import CausalModel
from dowhy.causal_estimators import get_class_object

import dowhy_cfr
from dowhy_cfr import registration
from dowhy_cfr import stacked_refuters as sr

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def test_dowhy_has_everything_the_wrappers_rely_on():
    assert registration.contract_problems() == [], \
        "DoWhy's API changed: dowhy_cfr.registration's wrappers need updating"


def test_dowhy_resolves_estimator_modules_by_name_and_capwords_class():
    """backdoor.cfr -> module dowhy.causal_estimators.cfr_estimator, class CfrEstimator."""
    assert get_class_object("cfr_estimator") is dowhy_cfr.CFREstimator
    assert get_class_object("tarnet_estimator") is dowhy_cfr.TARNetEstimator


def test_dowhy_resolves_refuters_by_module_and_capwords_class():
    from dowhy.causal_refuters import get_class_object as refuter_class

    assert refuter_class("representation_balance") is dowhy_cfr.RepresentationBalance


def test_the_refuter_classes_call_the_module_functions_that_are_wrapped():
    """DoWhy's refuter classes look their function up as a module global at call time: the
    dispatcher installed there is what they run."""
    from dowhy.causal_refuter import CausalRefuter

    for name, (module_name, func) in sr.REFUTERS.items():
        module = __import__(f"dowhy.causal_refuters.{module_name}", fromlist=[func])
        assert hasattr(getattr(module, func), "__dowhy_cfr_original__"), name
        classes = [c for c in vars(module).values() if isinstance(c, type)
                   and issubclass(c, CausalRefuter) and c.__module__ == module.__name__]
        assert any(f"{func}(" in inspect.getsource(c.refute_estimate) for c in classes), \
            f"{name}'s refuter class no longer calls the module function {func}"


def test_the_adapter_uses_econml_wrapper_hooks_that_exist():
    from dowhy.causal_estimators.econml import Econml

    for hook in ("_encode", "_set_effect_modifiers", "reset_encoders",
                 "get_new_estimator_object", "_estimate_confidence_intervals"):
        assert hasattr(Econml, hook), f"DoWhy's Econml wrapper lost {hook}"


def _linear_estimate():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=200)})
    df["t"] = (rng.random(200) < 1 / (1 + np.exp(-df["x"]))).astype(int)
    df["y"] = df["x"] + df["t"] + rng.normal(size=200)
    model = CausalModel(data=df, treatment="t", outcome="y", common_causes=["x"])
    estimand = model.identify_effect(proceed_when_unidentifiable=True)
    return df, estimand, model.estimate_effect(estimand,
                                               method_name="backdoor.linear_regression")


@pytest.mark.parametrize("name", list(sr.REFUTERS))
def test_refuters_draw_only_from_the_states_the_replay_restores(name):
    """The stacked replay runs DoWhy's refuter twice from the same numpy and Python global
    states and random_state: it must then draw the same data. Run from other global states it
    must draw other data (else the test could not tell)."""
    df, estimand, estimate = _linear_estimate()
    fn = sr.dowhy_refuter(name)
    kwargs = dict(data=df, target_estimand=estimand, estimate=estimate, num_simulations=3)
    if name == "placebo_treatment_refuter":
        kwargs["treatment_names"] = ["t"]
    if name == "dummy_outcome_refuter":
        kwargs.update(treatment_name="t", outcome_name="y", required_variables=True)

    def run(seed):
        np.random.seed(seed)
        random.seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fn(**kwargs)
        res = res[0] if isinstance(res, list) else res
        return float(res.new_effect)

    first, again, other = run(1), run(1), run(2)
    assert first == again, f"{name} draws from a source the replay does not restore"
    assert first != other, f"{name} no longer draws from numpy's or Python's global state"


def test_the_unobserved_common_cause_refuter_calls_the_module_functions_that_are_wrapped(
        monkeypatch):
    """DoWhy's AddUnobservedCommonCause looks its sensitivity functions up as module globals at
    call time, passing the estimate: the dispatchers installed there are what it runs."""
    import importlib
    import types

    module = importlib.import_module(registration.SENSITIVITY_MODULE)
    df, estimand, estimate = _linear_estimate()
    for name, method in (("sensitivity_non_parametric_partial_r2", "non-parametric-partial-R2"),
                         ("sensitivity_simulation", "direct-simulation")):
        assert hasattr(getattr(module, name), "__dowhy_cfr_original__"), name
        calls, result = [], types.SimpleNamespace(add_refuter=lambda refuter: None)
        monkeypatch.setattr(module, name, lambda *a, **k: calls.append((a, k)) or result)
        refuter = module.AddUnobservedCommonCause(df, identified_estimand=estimand,
                                                  estimate=estimate, simulation_method=method)
        assert refuter.refute_estimate() is result and len(calls) == 1, name
        args, kwargs = calls[0]
        assert any(a is estimate for a in (*args, *kwargs.values())), name


@pytest.mark.skipif(int(pd.__version__.split(".")[0]) < 3, reason="a pandas >= 3 behaviour")
def test_dowhys_direct_simulation_still_fails_on_a_bool_treatment():
    """Why a CFR estimate on a bool treatment gets a ValueError before DoWhy's direct simulation
    (dowhy_cfr.dowhy_sensitivity.direct_simulation): DoWhy writes 0/1 into the bool column, which
    pandas >= 3 refuses. If this test fails, DoWhy or pandas changed and the check can go."""
    df, estimand, _ = _linear_estimate()
    df["t"] = df["t"].astype(bool)
    model = CausalModel(data=df, treatment="t", outcome="y", common_causes=["x"])
    estimand = model.identify_effect(proceed_when_unidentifiable=True)
    estimate = model.estimate_effect(estimand, method_name="backdoor.linear_regression",
                                     treatment_value=True, control_value=False)
    import importlib

    module = importlib.import_module(registration.SENSITIVITY_MODULE)
    fn = module.sensitivity_simulation.__dowhy_cfr_original__
    with pytest.raises(TypeError, match="for dtype 'bool'"):
        fn(df, estimand, estimate, ["t"], ["y"], kappa_t=0.01, kappa_y=0.02)


def test_a_dowhy_without_the_contract_is_left_unchanged(monkeypatch):
    """If DoWhy lacks what the wrappers rely on, register() warns, registers the names only and
    wraps nothing."""
    monkeypatch.setattr(registration, "contract_problems", lambda: ["something"])
    calls = []
    monkeypatch.setattr(registration, "_wrap_refuters", lambda: calls.append(1) or {})
    with pytest.warns(RuntimeWarning, match="lacks what dowhy_cfr's integration relies on"):
        done = registration.register()
    assert all(done.values()) and calls == []
