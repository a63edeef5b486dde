"""Saving and loading the fitted state of CFR/TARNet estimators without pickled code.

It writes a :class:`~dowhy_cfr.fitted.FittedCFR` with the estimator's class name and parameters
(the estimator's ``save``/``load`` call it; this module does not import the estimator). A saved
model is one zip file holding

* ``model.json`` -- format version, estimator class, constructor parameters, the core
  configuration and the fitted preprocessing (covariate and outcome standardisation, treatment
  categories, column names, EconML's shape bookkeeping);
* ``arrays.npz`` -- the network weights and the remaining numeric state, written by
  ``numpy.savez`` and read back with ``allow_pickle=False``.

Only JSON and plain numeric arrays are read back, so loading a file cannot execute code. A
final-stage model (used when ``W`` was given at fit) is saved as its scikit-learn class name and
parameters plus the data it was fitted on, and refitted on load -- deterministic for
scikit-learn's estimators with a fixed ``random_state``. The debiased stage (the fitted units'
outcomes, arms, outcome predictions, propensities and the units whose propensity was clipped)
is saved as arrays; a ``model_propensity`` other than the default is saved as its name(s) or
scikit-learn class and parameters, a dict of them under their keys (it is only used at fit).
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .core import CFRConfig, CFRNet, DoseNet
from .covariates import Columns, Preprocessing
from .fitted import DebiasedStage, DoseStage, FinalStage, FittedCFR, FittedMembers
from .treatment import DoseEncoding, TreatmentEncoding
from .fitting import fit_blend
from .nuisance import LinearPropensity
from .tabular import FeatureScaler, TableEncoder

FORMAT_VERSION = 4  # 2: the fitted units' X block, the final stage's shift, encoders, scaler;
#: 3: the blend stage (version 2 files load as fitted, without one); 4: continuous treatments
#: (the dose encoding and the dose stage; versions 2 and 3 load as categorical fits)
READABLE_VERSIONS = (2, 3, 4)
#: The arrays of a dose stage (:class:`~dowhy_cfr.fitted.DoseStage`), None ones left out.
_DOSE_ARRAYS = ("x", "y", "dose", "grid", "curves", "mu", "plugin_curve", "member_curves",
                "rho", "weights", "basis_mean", "basis")


def _jsonable(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"cannot store {type(v).__name__} {v!r} in JSON")


def _model_spec(model):
    """JSON description of an sklearn estimator: class path and parameters."""
    cls = type(model)
    if not cls.__module__.startswith("sklearn."):
        raise TypeError(
            f"save() stores the final-stage model as scikit-learn class + parameters; "
            f"{cls.__module__}.{cls.__qualname__} is not from scikit-learn. Use pickle instead."
        )
    return {"class": f"{cls.__module__}.{cls.__qualname__}",
            "params": _jsonable(model.get_params(deep=False))}


def _propensity_spec(spec):
    """JSON of a ``model_propensity``: None, a name, a classifier's spec, a list of these, or a
    dict of named classifiers (``{"candidates": {name: spec}}``)."""
    if spec is None or isinstance(spec, str):
        return spec
    if isinstance(spec, (list, tuple)):
        return [_propensity_spec(s) for s in spec]
    if isinstance(spec, dict):
        return {"candidates": {str(k): _model_spec(m) for k, m in spec.items()}}
    return _model_spec(spec)


def _propensity_from_spec(spec):
    if spec is None or isinstance(spec, str):
        return spec
    if isinstance(spec, list):
        return [_propensity_from_spec(s) for s in spec]
    if "candidates" in spec:
        return {k: _model_from_spec(m) for k, m in spec["candidates"].items()}
    return _model_from_spec(spec)


def _model_from_spec(spec):
    module, _, name = spec["class"].rpartition(".")
    if not module.startswith("sklearn."):
        raise ValueError(f"refusing to import {spec['class']!r}: only scikit-learn classes")
    return getattr(importlib.import_module(module), name)(**spec["params"])


def _put(arrays: dict, prefix: str, obj):
    """The JSON state of a fitted encoder or scaler (``to_state``), its arrays put into
    ``arrays`` under ``prefix/``; None for None."""
    if obj is None:
        return None
    state, obj_arrays = obj.to_state()
    arrays.update({f"{prefix}/{k}": v for k, v in obj_arrays.items()})
    return state


def _get(state: dict, arrays: dict, prefix: str, cls):
    """The object :func:`_put` saved under ``prefix`` (None if none was)."""
    if state.get(prefix) is None:
        return None
    own = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith(prefix + "/")}
    return cls.from_state(state[prefix], own)


def save(path, class_name: str, params: dict, fitted: FittedCFR, econml_state: dict) -> Path:
    """Write ``fitted`` with the estimator's class name, parameters and EconML's bookkeeping."""
    path = Path(path)
    params = dict(params)
    if params.get("random_state") is not None and not isinstance(params["random_state"],
                                                                  (int, np.integer)):
        raise TypeError(f"save() stores random_state as an int or None; this estimator has "
                        f"random_state={params['random_state']!r}: set an int seed "
                        f"(est.set_params(random_state=0)) before fitting, or None")
    model_final = params.pop("model_final")
    model_propensity = params.pop("model_propensity", None)
    members, pre, cols = fitted.members, fitted.preprocessing, fitted.columns
    arrays = {}
    state = {
        "format_version": FORMAT_VERSION,
        "class": class_name,
        "params": _jsonable(params),
        "model_final": None if model_final is None else _model_spec(model_final),
        "model_propensity": _propensity_spec(model_propensity),
        "debiased": None,
        "config": _jsonable(fitted.config.to_dict()),
        "loss": pre.loss,
        "n_x": cols.n_x,
        "n_w": cols.n_w,
        "x_columns": cols.x_names,
        "w_columns": cols.w_names,
        "n_arms": fitted.encoding.n_arms,
        "categories": None if fitted.continuous else _jsonable(fitted.encoding.categories),
        "dose_encoding": None if not fitted.continuous else _jsonable(
            dataclasses.asdict(fitted.encoding)),
        "d_y": _jsonable(list(econml_state["_d_y"])),
        "d_t": _jsonable(list(econml_state["_d_t"])),
        "d_t_in": _jsonable(list(econml_state["_d_t_in"])),
        "input_names": _jsonable(econml_state.get("_input_names")),
        "seeds": _jsonable(members.seeds),
        "n_iter_run": members.n_iter,
        "n_models": members.net.n_models,
        # head_form="auto" kept both forms: member j averages networks j and n_models / 2 + j
        "paired": members.paired,
        "member_dose_knots": None if members.dose_knots is None else [
            None if k is None else [list(k[0]), list(k[1])] for k in members.dose_knots],
        "d_in": int(members.net.rep_weights[0].shape[1]),
        "final_stage": None,
        "scaler": _put(arrays, "scaler", pre.scaler),
        "x_encoder": _put(arrays, "x_encoder", cols.x_encoder),
        "w_encoder": _put(arrays, "w_encoder", cols.w_encoder),
    }
    arrays.update({
        "y_mean": pre.y_mean,
        "y_scale": pre.y_scale,
        "tau_fit_mean": fitted.tau_fit_mean,
        "best_iteration": members.best_iteration,
    })
    for col in members.history.columns:
        arrays[f"history/{col}"] = members.history[col].to_numpy()
    for i, p in enumerate(members.net.parameters()):
        arrays[f"param/{i}"] = p.detach().cpu().numpy()
    if fitted.final is not None:
        proto = fitted.final.models[0] if model_final is None else model_final
        state["final_stage"] = _model_spec(proto)
        arrays["final/x"] = fitted.final.x
        arrays["final/tau"] = fitted.final.tau
        arrays["final/shift"] = fitted.final.shift
        if fitted.final.member_tau is not None:
            arrays["final/member_tau"] = fitted.final.member_tau
    if fitted.blend is not None:
        blend = fitted.blend
        state["blend_stage"] = {"model": _model_spec(blend.model)}
        arrays["blend/train"] = blend.train
    if fitted.dose is not None:
        dose = fitted.dose
        state["dose_stage"] = {"h": dose.h, "gps_model": dose.gps_model}
        arrays.update({f"dose/{k}": getattr(dose, k) for k in _DOSE_ARRAYS
                       if getattr(dose, k) is not None})
    if fitted.levels is not None:  # head_form="robinson": the outcomes' level at new units
        arrays["levels/coef"] = fitted.levels.coef
        arrays["levels/intercept"] = fitted.levels.intercept
    stage = fitted.debiased
    if stage is not None:
        state["debiased"] = {"has_e": stage.e is not None,
                             "propensity_model": stage.propensity_model,
                             "min_propensity": stage.min_propensity}
        for name in ("x", "y", "arms", "mu", "mu_plugin", "e", "arm_shift", "clipped"):
            if getattr(stage, name) is not None:
                arrays[f"debiased/{name}"] = getattr(stage, name)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model.json", json.dumps(state, indent=1))
        zf.writestr("arrays.npz", buf.getvalue())
    return path


def _read(path: Path):
    if not path.exists():
        raise FileNotFoundError(f"no saved model at {path}")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a saved dowhy_cfr model (not a zip file); models are "
                         f"written by CFR.save")
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        if not {"model.json", "arrays.npz"} <= names:
            raise ValueError(f"{path} is not a dowhy_cfr model file (model.json/arrays.npz missing)")
        state = json.loads(zf.read("model.json"))
        arrays = dict(np.load(io.BytesIO(zf.read("arrays.npz")), allow_pickle=False))
    if state.get("format_version") not in READABLE_VERSIONS:
        raise ValueError(f"{path} was saved in model format version "
                         f"{state.get('format_version')!r}; this version of dowhy_cfr reads "
                         f"versions {READABLE_VERSIONS}: refit the model and save it again")
    return state, arrays


def _members(state, arrays, config: CFRConfig) -> FittedMembers:
    network = DoseNet if state.get("dose_encoding") else CFRNet
    paired = bool(state.get("paired", False))
    if paired:  # separate heads, then as many in Robinson's form
        config = dataclasses.replace(config, head_form="robinson")
    net = network.from_config(config, state["d_in"], [0] * state["n_models"],
                              n_arms=state["n_arms"])
    with torch.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(torch.from_numpy(arrays[f"param/{i}"]))
    if paired:
        half = state["n_models"] // 2
        net.robinson_models = torch.arange(state["n_models"]) >= half
    net.eval()
    history = pd.DataFrame({k.split("/", 1)[1]: v for k, v in arrays.items()
                            if k.startswith("history/")})
    knots = state.get("member_dose_knots")  # None: saved before members had scales of their own
    knots = None if knots is None else tuple(
        None if k is None else (tuple(k[0]), tuple(k[1])) for k in knots)
    return FittedMembers(net, state["seeds"], arrays["best_iteration"], history,
                         state["n_iter_run"], dose_knots=knots)


def _levels(arrays) -> LinearPropensity | None:
    """The propensity that places the outcomes of Robinson's heads (None: other heads)."""
    if "levels/coef" not in arrays:
        return None
    return LinearPropensity(arrays["levels/coef"], arrays["levels/intercept"])


def _debiased(state, arrays):
    spec = state.get("debiased")
    if spec is None:
        return None
    a = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("debiased/")}
    clip, clipped = spec.get("min_propensity"), a.get("clipped")
    if a.get("e") is not None and clipped is None:  # saved before the clipped units were kept:
        # a clipped propensity equals the clip exactly
        clip = state["params"].get("min_propensity") if clip is None else clip
        clipped = None if clip is None else (a["e"] <= clip).any(axis=1)
    return DebiasedStage(a["x"], a["y"], a["arms"], a["mu"], a["mu_plugin"], a.get("e"),
                         a["arm_shift"], spec.get("propensity_model"), clipped, clip)


def _blend(state, arrays, stage):
    """The blend stage over the saved doubly robust ``stage`` (its regressions refitted on first
    use: deterministic, from the members' seeds)."""
    spec = state.get("blend_stage")
    if spec is None:
        return None
    return fit_blend(arrays["blend/train"], _model_from_spec(spec["model"]),
                     list(state["seeds"]), stage)


def _dose_encoding(spec: dict) -> DoseEncoding:
    knots = [tuple(float(v) for v in spec.get(k, ())) for k in ("knots_t", "knots_u")]
    return DoseEncoding(float(spec["t_min"]), float(spec["t_max"]),
                        tuple(float(q) for q in spec["quantiles"]), int(spec["n_strata"]), *knots)


def _dose_stage(state, arrays, encoding):
    """The dose stage, its scale's knots from the dose encoding (saved once, there)."""
    spec = state.get("dose_stage")
    if spec is None:
        return None
    a = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("dose/")}
    knots = [np.asarray(k, dtype=float) if k else None
             for k in (encoding.knots_t, encoding.knots_u)]
    return DoseStage(**{k: a.get(k) for k in _DOSE_ARRAYS}, h=spec["h"],
                     gps_model=spec["gps_model"], knots_t=knots[0], knots_u=knots[1])


def load(path):
    """``(class name, constructor parameters, FittedCFR, EconML's bookkeeping)`` of a saved
    model; the estimator builds itself from them."""
    state, arrays = _read(Path(path))
    params = dict(state["params"])
    if state["model_final"] is not None:
        params["model_final"] = _model_from_spec(state["model_final"])
    if state.get("model_propensity") is not None:
        params["model_propensity"] = _propensity_from_spec(state["model_propensity"])
    # models saved before feature_scaling / ema_decay / alpha_units / ipm_max_units / ipm_every /
    # dose_scale existed were trained without them: load them as they were (they refit as they
    # were fitted)
    old = {"feature_scaling": False, "ema_decay": 0.0, "alpha_units": None,
           "ipm_max_units": None, "ipm_every": 1, "dose_scale": "range"}
    for name, value in old.items():
        if name != "alpha_units" or "alpha" in params:  # TARNet has no alpha_units
            params.setdefault(name, value)
    # the training record: a model saved before lr_warmup existed trained without one (its
    # parameters keep "auto", so that a refit follows today's rule, as for the fast start)
    config = CFRConfig(**{**old, "lr_warmup": 0, **state["config"]})
    pre = Preprocessing(state["loss"], _get(state, arrays, "scaler", FeatureScaler), arrays["y_mean"],
                        arrays["y_scale"])
    columns = Columns(state["n_x"], state["n_w"], state["x_columns"], state["w_columns"],
                      _get(state, arrays, "x_encoder", TableEncoder),
                      _get(state, arrays, "w_encoder", TableEncoder))
    stage = _debiased(state, arrays)
    final = None
    if state["final_stage"] is not None:
        models = FinalStage.fit(_model_from_spec(state["final_stage"]), arrays["final/x"],
                                arrays["final/tau"]).models
        final = FinalStage(arrays["final/x"], arrays["final/tau"], models, arrays["final/shift"],
                           arrays["final/member_tau"] if "final/member_tau" in arrays else None)
    encoding = (TreatmentEncoding.of_categories(state["categories"])
                if not state.get("dose_encoding") else _dose_encoding(state["dose_encoding"]))
    fitted = FittedCFR(config, encoding, columns, pre, _members(state, arrays, config),
                       arrays["tau_fit_mean"], final, stage, blend=_blend(state, arrays, stage),
                       dose=_dose_stage(state, arrays, encoding), levels=_levels(arrays))
    econml_state = {"_d_y": tuple(state["d_y"]), "_d_t": tuple(state["d_t"]),
                    "_d_t_in": tuple(state["d_t_in"])}
    if state["input_names"] is not None:
        econml_state["_input_names"] = state["input_names"]
    return state["class"], params, fitted, econml_state
