"""Saving and loading fitted CFR/TARNet estimators without pickled code.

A saved model is one zip file holding

* ``model.json`` -- format version, estimator class, constructor parameters, the core
  configuration and the fitted preprocessing (covariate and outcome standardisation, treatment
  categories, column names, EconML's shape bookkeeping);
* ``arrays.npz`` -- the network weights and the remaining numeric state, written by
  ``numpy.savez`` and read back with ``allow_pickle=False``.

Only JSON and plain numeric arrays are read back, so loading a file cannot execute code. A
final-stage model (used when ``W`` was given at fit) is saved as its scikit-learn class name and
parameters plus the data it was fitted on, and refitted on load -- deterministic for
scikit-learn's estimators with a fixed ``random_state``.
"""

from __future__ import annotations

import importlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch

FORMAT_VERSION = 1


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


def _model_from_spec(spec):
    module, _, name = spec["class"].rpartition(".")
    if not module.startswith("sklearn."):
        raise ValueError(f"refusing to import {spec['class']!r}: only scikit-learn classes")
    return getattr(importlib.import_module(module), name)(**spec["params"])


def save(est, path) -> Path:
    est._check_fitted()
    path = Path(path)
    params = est.get_params(deep=False)
    model_final = params.pop("model_final")
    state = {
        "format_version": FORMAT_VERSION,
        "class": type(est).__name__,
        "params": _jsonable(params),
        "model_final": None if model_final is None else _model_spec(model_final),
        "config": _jsonable(est.config_.to_dict()),
        "loss": est.loss_,
        "n_x": est._n_x,
        "n_w": est._n_w,
        "x_columns": est._x_columns,
        "w_columns": est._w_columns,
        "n_arms": est._n_arms,
        "categories": _jsonable(list(est.transformer.categories_[0])),
        "d_y": _jsonable(list(est._d_y)),
        "d_t": _jsonable(list(est._d_t)),
        "d_t_in": _jsonable(list(est._d_t_in)),
        "input_names": _jsonable(getattr(est, "_input_names", None)),
        "seeds": _jsonable(est.seeds_),
        "n_iter_run": est.n_iter_,
        "n_models": est._net.n_models,
        "d_in": int(est._net.rep_weights[0].shape[1]),
        "final_stage": None,
    }
    arrays = {
        "x_mean": est._x_mean,
        "x_scale": est._x_scale,
        "y_mean": est._y_mean,
        "y_scale": est._y_scale,
        "tau_fit_mean": est._tau_fit_mean,
        "best_iteration": est.best_iteration_,
    }
    for col in est.history_.columns:
        arrays[f"history/{col}"] = est.history_[col].to_numpy()
    for i, p in enumerate(est._net.parameters()):
        arrays[f"param/{i}"] = p.detach().cpu().numpy()
    if est.model_final_ is not None:
        if model_final is None:
            state["final_stage"] = _model_spec(est.model_final_[0])
        else:
            state["final_stage"] = _model_spec(model_final)
        arrays["final/x"] = est._final_x
        arrays["final/tau"] = est._final_tau
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model.json", json.dumps(state, indent=1))
        zf.writestr("arrays.npz", buf.getvalue())
    return path


def load(cls, path):
    from .core import CFRConfig, CFRNet
    from econml.utilities import one_hot_encoder

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no saved model at {path}")
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        if not {"model.json", "arrays.npz"} <= names:
            raise ValueError(f"{path} is not a dowhy_cfr model file (model.json/arrays.npz missing)")
        state = json.loads(zf.read("model.json"))
        arrays = dict(np.load(io.BytesIO(zf.read("arrays.npz")), allow_pickle=False))
    if state.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"unsupported model format version {state.get('format_version')!r}")
    from . import estimator as estimator_module

    saved_cls = getattr(estimator_module, state["class"])
    if not issubclass(saved_cls, cls) and not issubclass(cls, saved_cls):
        raise TypeError(f"{path} holds a {state['class']}, not a {cls.__name__}")
    params = dict(state["params"])
    if state["model_final"] is not None:
        params["model_final"] = _model_from_spec(state["model_final"])
    est = saved_cls(**params)

    config = CFRConfig(**state["config"])
    est.config_ = config
    est.loss_ = state["loss"]
    est._n_x, est._n_w = state["n_x"], state["n_w"]
    est._x_columns, est._w_columns = state["x_columns"], state["w_columns"]
    est.n_features_in_ = est._n_x + est._n_w
    est._n_arms = state["n_arms"]
    cats = state["categories"]
    cats = np.asarray(cats, dtype=object if any(isinstance(c, str) for c in cats) else None)
    est.transformer = one_hot_encoder(categories=[cats], drop="first")
    est.transformer.fit(cats.reshape(-1, 1))
    est._d_y = tuple(state["d_y"])
    est._d_t = tuple(state["d_t"])
    est._d_t_in = tuple(state["d_t_in"])
    if state["input_names"] is not None:
        est._input_names = state["input_names"]
    est.seeds_ = state["seeds"]
    est.n_iter_ = state["n_iter_run"]
    est._x_mean, est._x_scale = arrays["x_mean"], arrays["x_scale"]
    est._y_mean, est._y_scale = arrays["y_mean"], arrays["y_scale"]
    est._tau_fit_mean = arrays["tau_fit_mean"]
    est.best_iteration_ = arrays["best_iteration"]
    est.history_ = pd.DataFrame({k.split("/", 1)[1]: v for k, v in arrays.items()
                                 if k.startswith("history/")})
    est._device = torch.device("cpu")
    net = CFRNet(state["d_in"], [0] * state["n_models"], n_arms=est._n_arms,
                 n_rep_layers=config.n_rep_layers, rep_dim=config.rep_dim,
                 n_head_layers=config.n_head_layers, head_dim=config.head_dim,
                 normalization=config.normalization, weight_init=config.weight_init)
    with torch.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(torch.from_numpy(arrays[f"param/{i}"]))
    net.eval()
    est._net = net
    est.model_final_ = None
    if state["final_stage"] is not None:
        est._final_x, est._final_tau = arrays["final/x"], arrays["final/tau"]
        proto = _model_from_spec(state["final_stage"])
        from sklearn.base import clone

        est.model_final_ = [clone(proto).fit(est._final_x, est._final_tau[:, j])
                            for j in range(est._final_tau.shape[1])]
    est._inference = None
    return est
