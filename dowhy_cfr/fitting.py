"""How a CFR/TARNet is fitted in memory: the steps every fit path shares.

:func:`fit` (``CFR.fit``), :func:`fit_stacked` (``CFR.fit_stacked``) and :func:`bootstrap`
(the replicas of :class:`~dowhy_cfr.CFRBootstrapInference`) check the inputs, encode the
treatment, draw the seeds, split, standardise and train through the same functions, and return
:class:`~dowhy_cfr.fitted.FittedCFR` objects; the estimator only stores them. The functions read
the estimator's parameters and never write to it. Chunked and distributed
training (:mod:`dowhy_cfr.streaming`, :mod:`dowhy_cfr.distributed`) reuse the helpers here.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings

import numpy as np
import pandas as pd
import torch
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.utils import check_random_state

from . import _validation as V
from .core import ALPHA_GRID, CFRConfig, TrainingDivergedError, train_cfr
from .debiased import aipw_potential_outcomes, cross_fit_propensity
from .fitted import (Columns, DebiasedStage, FittedCFR, FittedMembers, Preprocessing,
                     encode_treatment, fingerprint, plain, sklearn_seed)
from .metrics import SELECTION_CRITERIA, cross_fit_nuisances, selection_scores

__all__ = ["CONFIG_FIELDS", "ALPHA_CRITERION", "config_from", "alpha_grid", "resolve_device",
           "draw_seeds", "show_progress", "check_n_ensemble", "resolve_loss", "check_fit_inputs",
           "split", "train", "fit", "select_alpha", "fit_stacked", "bootstrap", "check_second_stages",
           "cross_fit_rows", "out_of_fold", "debias"]

#: The estimator parameters that are fields of the core's :class:`~dowhy_cfr.core.CFRConfig`
#: (``loss`` is resolved from the data; ``max_eval_units`` keeps the core's default).
CONFIG_FIELDS = tuple(f for f in CFRConfig.__dataclass_fields__ if f not in ("loss", "max_eval_units"))
_SEED_HIGH = 2**31 - 1


#: The criterion ``alpha="auto"`` selects by (see ``docs/parameters.md``, "Choosing alpha
#: without ground truth"): one of :data:`dowhy_cfr.metrics.SELECTION_CRITERIA`.
ALPHA_CRITERION = "r_loss"


def config_from(est, loss: str, alpha: float | None = None) -> CFRConfig:
    """The validated core configuration of the estimator's parameters, for ``loss`` (a core field
    the estimator has no parameter for keeps CFRConfig's default); ``alpha`` replaces the
    estimator's (needed when that is ``"auto"`` or a grid: only :func:`fit` selects alpha)."""
    params = {f: getattr(est, f) for f in CONFIG_FIELDS if hasattr(est, f)}
    if alpha is not None:
        params["alpha"] = alpha
    elif alpha_grid(params.get("alpha", 0.0)) is not None:
        raise ValueError(f"alpha={params['alpha']!r} (selection from a grid) is supported by "
                         f"CFR.fit only; give a number here, e.g. the alpha_ a fit selected")
    return CFRConfig(loss=loss, **params).validate()


def alpha_grid(alpha) -> list[float] | None:
    """The candidates of ``alpha``: None for a number (no selection), :data:`ALPHA_GRID` for
    ``"auto"``, the values of a list or tuple of numbers >= 0 (at least two, no repeats)."""
    if isinstance(alpha, str):
        if alpha != "auto":
            raise ValueError(f"alpha={alpha!r} is invalid: give a number >= 0, 'auto' or a list "
                             f"of numbers to select from")
        return list(ALPHA_GRID)
    if not isinstance(alpha, (list, tuple, np.ndarray)):
        return None  # a number: CFRConfig.validate checks it
    values = np.asarray(alpha, dtype=object).ravel().tolist()
    if len(values) < 2 or not all(
            isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, bool)
            and np.isfinite(a) and a >= 0 for a in values):
        raise ValueError(f"alpha={alpha!r} is invalid as a grid: give at least two finite "
                         f"numbers >= 0 to select from (or 'auto' for {list(ALPHA_GRID)})")
    if len(set(float(a) for a in values)) != len(values):
        raise ValueError(f"alpha={alpha!r} repeats a value; give each candidate once")
    return [float(a) for a in values]


def resolve_device(device) -> torch.device:
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r} is invalid: use 'cpu', 'cuda' (or 'cuda:0') or "
                         f"'auto'") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available; use 'cpu'")
    return dev


def draw_seeds(random_state, k: int) -> list[int]:
    """``k`` network seeds from a ``random_state`` (int, RandomState, None) or a Generator."""
    if isinstance(random_state, np.random.Generator):
        draws = random_state.integers(0, _SEED_HIGH, size=k)
    else:
        draws = check_random_state(random_state).randint(0, _SEED_HIGH, size=k)
    return [int(s) for s in draws]


def show_progress(verbose) -> bool:
    """``verbose``: 0 never, 1 in interactive sessions (terminal or notebook), 2 always."""
    if verbose is None or verbose <= 0:
        return False
    if verbose >= 2 or "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except Exception:  # pragma: no cover
        return False


def check_n_ensemble(est) -> int:
    return V.check_int("n_ensemble", est.n_ensemble, 1)


def resolve_loss(loss: str, y: np.ndarray | None = None, *, binary: bool | None = None) -> str:
    """"mse" or "logloss" for outcomes ``y`` (any shape) under the parameter ``loss``.

    "auto" gives log-loss when every outcome is 0 or 1 and both values occur; ``binary`` (every
    outcome is 0 or 1) stands in for ``y`` where only statistics of the data are known.
    """
    if binary is None:
        binary = bool(np.isin(y, (0.0, 1.0)).all())
        both_values = len(np.unique(y)) == 2
    else:
        both_values = True
    if loss == "auto":
        return "logloss" if binary and both_values else "mse"
    if loss == "logloss" and not binary:
        raise ValueError("loss='logloss' needs a binary outcome with values 0 and 1; Y has "
                         "other values. Use loss='mse' for a continuous outcome.")
    if loss not in ("mse", "logloss"):
        raise ValueError(f"loss={loss!r} is invalid: choose 'auto', 'mse' or 'logloss'")
    return loss


def check_fit_inputs(Y, T, X, W, categories="auto"):
    """Validated ``(xw, arms, y, columns, encoding)`` of a fit's inputs (``xw = [X | W]``)."""
    if X is None and W is None:
        raise ValueError("X is required (W alone is allowed only together with X=None "
                         "when you want an average effect); pass the covariates as X")
    y = V.as_1d("Y", Y)
    if isinstance(Y, (pd.DataFrame, np.ndarray)) and np.ndim(Y) == 2 and np.shape(Y)[1] > 1:
        raise ValueError(f"Y must be a single outcome; got {np.shape(Y)[1]} columns. Fit one "
                         f"estimator per outcome.")
    try:
        y = y.astype("float64")
    except (TypeError, ValueError) as exc:
        raise TypeError("Y must be numeric; encode a categorical outcome as 0/1") from exc
    V.check_finite("Y", y)
    t_raw = V.as_1d("T", T)
    x = V.as_2d_float("X", X, allow_none=True)
    w = V.as_2d_float("W", W, allow_none=True)
    V.check_same_length(Y=y, T=t_raw, X=x, W=w)
    columns = Columns(0 if x is None else x.shape[1], 0 if w is None else w.shape[1],
                      V.column_names(X), V.column_names(W))
    encoding, arms = encode_treatment(t_raw, categories)
    xw = np.hstack([a for a in (x, w) if a is not None])
    return xw, arms, y, columns, encoding


def split(arms: np.ndarray, rows: np.ndarray, seeds, config: CFRConfig, encoding):
    """Stratified training/validation split of each member's units ``rows[k]`` (arms (K, n))."""
    tr, va = [], []
    for k, s in enumerate(seeds):
        arms_k = arms[k][rows[k]]
        counts = np.bincount(arms_k, minlength=encoding.n_arms)
        n_val_min = np.ceil(counts * config.val_fraction)
        too_small = (counts < 2) | (n_val_min < 1) | (counts - n_val_min < 1)
        if too_small.any():
            label = plain(encoding.categories[int(np.argmax(too_small))])
            raise ValueError(
                f"treatment arm {label!r} has only {counts[too_small].min()} unit(s); at "
                f"least 2 are needed to split it into training and validation (val_fraction="
                f"{config.val_fraction})"
            )
        a, b = train_test_split(np.arange(len(arms_k)), test_size=config.val_fraction,
                                stratify=arms_k, random_state=sklearn_seed(s))
        tr.append(rows[k][a])
        va.append(rows[k][b])
    return np.stack(tr), np.stack(va)


def clamp_batch_size(config: CFRConfig, n_train: int) -> None:
    """Clamp ``config.batch_size`` (with a warning) to a training split smaller than it."""
    if config.batch_size > n_train:
        warnings.warn(
            f"batch_size={config.batch_size} is larger than the training split "
            f"({n_train} units); using batch_size={n_train}",
            UserWarning,
            stacklevel=4,
        )
        config.batch_size = n_train


def train(est, xw, arms, y, seeds, *, encoding, columns, rows=None, fixed_split=None,
          drop_failed=False, alpha=None) -> FittedCFR:
    """Train ``K = len(seeds)`` networks: member k on outcomes ``y[k]`` / arms ``arms[k]``
    (shape (K, n)) of the units ``rows[k]`` (default: all), sharing the covariates ``xw`` (n, d),
    or each on its own covariates ``xw[k]`` when ``xw`` has shape (K, n, d) (standardised per
    member, as its own fit would be).

    ``fixed_split = (train_rows, val_rows)`` (each (K, m)) fixes the training/validation units
    instead of splitting ``rows`` (the bootstrap resamples each side of a unit-level split).
    A member whose training diverged before any checkpoint is dropped with a warning if
    ``drop_failed`` (ensemble members: the others still make an ensemble), kept (with its
    initial weights, flagged in ``members.result.failed``) if ``drop_failed="keep"``, else an
    error. ``alpha``: one value per member (candidates of a selection), else the estimator's.
    """
    k = len(seeds)
    if fixed_split is not None:
        rows = np.concatenate(fixed_split, axis=1)
    elif rows is None:
        rows = np.tile(np.arange(xw.shape[-2]), (k, 1))
    loss = resolve_loss(est.loss, y)
    config = config_from(est, loss, None if alpha is None else float(alpha[0]))
    pre = Preprocessing.fit(loss, xw, y, rows)
    train_rows, val_rows = fixed_split or split(arms, rows, seeds, config, encoding)
    clamp_batch_size(config, train_rows.shape[1])
    device = resolve_device(est.device)
    x = pre.x_tensor(xw)
    result = train_cfr(
        x if x.ndim == 3 else x.unsqueeze(0).expand(k, -1, -1),
        torch.as_tensor(arms, dtype=torch.long),
        torch.as_tensor(pre.y(y), dtype=torch.float32),
        train_idx=torch.as_tensor(train_rows),
        val_idx=torch.as_tensor(val_rows),
        config=config,
        seeds=seeds,
        n_arms=encoding.n_arms,
        per_model_data=True,
        device=device,
        progress=show_progress(est.verbose),
        alpha=alpha,
    )
    members = FittedMembers.from_result(result, seeds, train_rows, val_rows)
    fitted = FittedCFR(config, encoding, columns, pre, members, device=device)
    failed = np.flatnonzero(result.failed).tolist()
    if not failed or drop_failed == "keep":
        return fitted
    message = (f"the training of member(s) {failed} of {k} diverged before any checkpoint was "
               f"kept; lower learning_rate, alpha or weight_decay, or check the inputs for "
               f"extreme values")
    if not drop_failed:
        raise TrainingDivergedError(message)
    warnings.warn(message + "; the ensemble goes on without them.", RuntimeWarning, stacklevel=4)
    return fitted.select([j for j in range(k) if j not in failed])


def check_second_stages(est) -> None:
    """ValueError/TypeError naming the invalid parameter of the stages after training: the
    debiasing (``debias``, ``cross_fit``, ``min_propensity``, ``cv``) and ``model_final``."""
    if est.debias not in ("aipw", None):
        raise ValueError(f"debias={est.debias!r} is invalid: use 'aipw' (doubly robust averages) "
                         f"or None (the plug-in mean of the heads' effects)")
    if not isinstance(est.cross_fit, (bool, np.bool_)):
        raise TypeError(f"cross_fit must be True or False; got {est.cross_fit!r}")
    if est.cross_fit and check_n_ensemble(est) < 2:
        raise ValueError("cross_fit=True uses the n_ensemble members as cross-fitting folds; set "
                         "n_ensemble >= 2 (e.g. n_ensemble=5) or cross_fit=False")
    if not 0 < float(est.min_propensity) < 0.5:
        raise ValueError(f"min_propensity={est.min_propensity!r} must be in (0, 0.5), e.g. 0.01")
    V.check_int("cv", est.cv, 2)
    if est.model_final is not None and not (hasattr(est.model_final, "fit")
                                            and hasattr(est.model_final, "predict")):
        raise TypeError(f"model_final must be a scikit-learn regressor with fit and predict "
                        f"(e.g. sklearn.linear_model.LassoCV()) or None; got "
                        f"{est.model_final!r}")


def cross_fit_rows(arms: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Training units (K, m) of ``k`` cross-fitting members: member j sees every unit outside the
    j-th of ``k`` treatment-stratified folds (folds of unequal size: a member whose complement is
    larger drops its excess units at random, so that all members have m units)."""
    folds = StratifiedKFold(k, shuffle=True, random_state=sklearn_seed(seed))
    rest = [tr for tr, _ in folds.split(np.zeros(len(arms)), arms)]
    return _common_size(rest, np.random.default_rng(sklearn_seed(seed)))


def _common_size(unit_sets, rng) -> np.ndarray:
    """The unit sets stacked as (K, m), m the smallest size: larger sets keep m units at random
    (sorted)."""
    m = min(len(r) for r in unit_sets)
    return np.stack([np.sort(rng.choice(r, m, replace=False)) if len(r) > m else r
                     for r in unit_sets])


def out_of_fold(outputs: np.ndarray, members: FittedMembers) -> np.ndarray:
    """Per unit, the mean prediction (n, n_arms) of the members that did not train or validate on
    it (``outputs``: (K, n_arms, n)); NaN where every member saw the unit."""
    seen = np.zeros((outputs.shape[0], outputs.shape[2]), dtype=bool)
    for j, rows in enumerate(np.concatenate([members.train_rows, members.val_rows], axis=1)):
        seen[j, rows] = True
    unseen = (~seen).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.einsum("kan,kn->na", outputs, unseen) / unseen.sum(0)[:, None])


def debias(est, fitted: FittedCFR, xw: np.ndarray, arms: np.ndarray, y: np.ndarray,
           propensities: dict | None = None, *, cross_fit: bool | None = None) -> FittedCFR:
    """Add the :class:`~dowhy_cfr.fitted.DebiasedStage` of the fitted units ``xw`` (raw), arms
    and outcomes to a summarised fit: cross-fitted propensities, AIPW ATE per arm, and the shift
    of the effects (``est.debias=None``: no propensities and no shift). Cross-fitted members
    (``est.cross_fit``) give each unit out-of-fold outcome predictions. ``propensities``: a dict
    shared by the fits of one call, so that datasets with the same units, treatments and seed
    (e.g. the simulations of DoWhy's dummy-outcome refuter) cross-fit the propensity once.
    ``cross_fit``: None follows ``est.cross_fit``; False uses in-sample predictions (bootstrap
    replicas: all their members train on the replica's units)."""
    outputs = fitted.outputs(fitted.preprocessing.x(xw))
    mu_plugin = outputs.mean(0).T
    mu = mu_plugin
    cross_fit = est.cross_fit if cross_fit is None else cross_fit
    if cross_fit and fitted.members.train_rows is not None:
        oof = out_of_fold(outputs, fitted.members)
        mu = np.where(np.isnan(oof), mu_plugin, oof)
    n_x, n_arms = fitted.columns.n_x, fitted.encoding.n_arms
    stage = DebiasedStage(y, arms, mu, mu_plugin, None, fingerprint(xw[:, :n_x]),
                          np.zeros(n_arms), np.zeros(n_arms - 1))
    fitted.debiased = stage
    if est.debias is None:
        return fitted
    propensities = {} if propensities is None else propensities
    key = (fingerprint(xw), fingerprint(arms), fitted.members.seeds[0])
    if key not in propensities:
        propensities[key] = cross_fit_propensity(
            est.model_propensity, xw, arms, n_arms=n_arms, cv=est.cv, return_model=True,
            random_state=fitted.members.seeds[0], min_propensity=float(est.min_propensity))
    stage.e, stage.propensity_model = propensities[key]
    arm_means = aipw_potential_outcomes(y, arms, mu, stage.e).mean(0)  # AIPW E[Y(a)]
    stage.arm_shift = arm_means - mu_plugin.mean(0)
    theta = arm_means[1:] - arm_means[0]
    if fitted.final is not None:
        stage.final_shift = theta - fitted.final.predict(xw[:, :n_x]).mean(0)
    fitted.tau_fit_mean = theta
    return fitted


def fit(est, Y, T, X, W=None) -> FittedCFR:
    """What ``est.fit(Y, T, X=X, W=W)`` stores: ``n_ensemble`` networks trained together (the
    cross-fitting folds when ``est.cross_fit``; the best alpha's when ``est.alpha`` is a grid),
    and the debiased stage (:func:`debias`)."""
    check_second_stages(est)
    grid = alpha_grid(est.alpha)
    xw, arms, y, columns, encoding = check_fit_inputs(Y, T, X, W, est.categories)
    k = check_n_ensemble(est)
    seeds = draw_seeds(est.random_state, k)
    rows = cross_fit_rows(arms, k, seeds[0]) if est.cross_fit else None
    if grid is not None:
        chosen = select_alpha(est, grid, xw, arms, y, seeds, encoding, columns, rows)
        return debias(est, chosen.summarise(xw, est.model_final), xw, arms, y)
    fitted = train(est, xw, np.tile(arms, (k, 1)), np.tile(y, (k, 1)), seeds,
                   encoding=encoding, columns=columns, rows=rows, drop_failed=True)
    return debias(est, fitted.summarise(xw, est.model_final), xw, arms, y)


def select_alpha(est, grid, xw, arms, y, seeds, encoding, columns, rows=None) -> FittedCFR:
    """``alpha="auto"`` (or a grid): the ensemble of the alpha with the best validation score.

    Every candidate alpha's ``E = len(seeds)`` members train in one stack of ``G * E`` networks;
    candidate g's member j has seed ``seeds[j]`` (so the same validation split and initial
    weights for every alpha). Each member is scored on its own validation units by the criteria
    of :func:`dowhy_cfr.metrics.selection_scores`, with nuisances cross-fitted on all units
    (:func:`dowhy_cfr.metrics.cross_fit_nuisances`); an alpha's score is the mean over its
    members, and :data:`ALPHA_CRITERION` decides. Ties go to the first in the grid. ``rows``
    (E, m): each member's units (cross-fitting folds), the same for every candidate.
    """
    if encoding.n_arms != 2:
        raise ValueError(f"alpha={est.alpha!r} (selection) needs a binary treatment; T has "
                         f"{encoding.n_arms} arms: give a number")
    g, e = len(grid), len(seeds)
    fitted = train(est, xw, np.tile(arms, (g * e, 1)), np.tile(y, (g * e, 1)), seeds * g,
                   encoding=encoding, columns=columns, drop_failed="keep",
                   rows=None if rows is None else np.tile(rows, (g, 1)),
                   alpha=np.repeat(grid, e).tolist())
    nuisances = cross_fit_nuisances(xw, y, arms, random_state=sklearn_seed(seeds[0]))
    out = fitted.outputs(fitted.preprocessing.x(xw))
    tau = out[:, 1] - out[:, 0]
    failed = fitted.members.result.failed
    rows = []
    for k in range(g * e):
        scores = (dict.fromkeys(SELECTION_CRITERIA, np.inf) if failed[k] else selection_scores(
            tau[k], fitted.members.val_rows[k], xw, y, arms, nuisances))
        rows.append({"alpha": grid[k // e], "member": k % e, **scores})
    table = pd.DataFrame(rows).groupby("alpha", sort=False)[list(SELECTION_CRITERIA)].mean()
    best = int(np.argmin(table[ALPHA_CRITERION].to_numpy()))
    if not np.isfinite(table[ALPHA_CRITERION].iloc[best]):
        raise TrainingDivergedError("the training of every alpha candidate diverged; lower "
                                    "learning_rate or weight_decay, or check the inputs")
    members = [k for k in range(best * e, (best + 1) * e) if not failed[k]]
    chosen = fitted.select(members)
    chosen.config = dataclasses.replace(chosen.config, alpha=grid[best])
    chosen.alpha_scores = table.reset_index().assign(selected=lambda d: d.index == best)
    return chosen


def _stacked_inputs(Y, T, X, W):
    """Per-dataset ``(ys, ts, xs, ws)`` lists of fit_stacked's arguments."""
    ys = [np.asarray(v) for v in Y] if isinstance(Y, (list, tuple)) else np.asarray(Y)
    if np.ndim(ys) != 2:
        raise ValueError(f"Y must have shape (K, n) for fit_stacked; got {np.shape(ys)}")
    k = len(ys)

    def per_dataset(name, a, shared_ndim):
        if a is None or (not isinstance(a, (list, tuple)) and np.ndim(a) == shared_ndim):
            return [a] * k
        if len(a) != k:
            raise ValueError(f"{name} has {len(a)} datasets but Y has {k}; give one {name} per "
                             f"dataset or a single shared {name}")
        return list(a)

    return ys, per_dataset("T", T, 1), per_dataset("X", X, 2), per_dataset("W", W, 2)


def _check_units(units, k: int, n: int):
    if units is None:
        return None
    rows = np.asarray(units)
    if rows.ndim != 2 or rows.shape[0] != k or not np.issubdtype(rows.dtype, np.integer):
        raise ValueError(f"units must be an integer array of shape (K={k}, m); got "
                         f"shape {rows.shape} and dtype {rows.dtype}")
    if rows.min() < 0 or rows.max() >= n:
        raise ValueError(f"units must index rows 0..{n - 1} of X")
    return rows


def _stacked_seeds(est, seeds, k: int, e: int) -> list[int]:
    """The ``k * e`` member seeds of fit_stacked (dataset j: members ``j*e .. j*e+e-1``)."""
    if seeds is None:
        if e != 1:
            raise ValueError("fit_stacked with seeds=None needs n_ensemble=1 (one network per "
                             "dataset); use seeds='fit' for ensembles")
        return draw_seeds(est.random_state, k)
    if isinstance(seeds, str):
        if seeds != "fit":
            raise ValueError(f"seeds={seeds!r} is invalid: use None, 'fit' or K seeds")
        return draw_seeds(est.random_state, e) * k
    arr = np.asarray(seeds, dtype=np.int64).reshape(k, -1)
    if arr.shape[1] != e:
        raise ValueError(f"seeds must hold K={k} x n_ensemble={e} seeds; got {np.size(seeds)}")
    return [int(s) for s in arr.ravel()]


def fit_stacked(est, Y, T, X, W=None, units=None, seeds=None):
    """One :class:`FittedCFR` per dataset ``(Y[k], T[k], X[k], W[k])`` (see ``CFR.fit_stacked``),
    all trained in one stacked pass; also returns ``(Y[0], T[0], X[0])`` for EconML's
    bookkeeping.

    ``seeds``: None draws one seed per dataset from ``est.random_state`` (``n_ensemble`` must be
    1); ``"fit"`` gives every dataset the seeds ``est.fit`` draws (its ``n_ensemble`` members), so
    dataset k's fit is what ``est.fit`` on it alone gives; or K (x n_ensemble) explicit seeds.
    """
    check_second_stages(est)
    ys, ts, xs, ws = _stacked_inputs(Y, T, X, W)
    k, e = len(ys), check_n_ensemble(est)
    member_seeds = _stacked_seeds(est, seeds, k, e)
    checked = [check_fit_inputs(*a, est.categories) for a in zip(ys, ts, xs, ws)]
    xw, _, _, columns, encoding = checked[0]
    if any(list(c[4].categories) != list(encoding.categories) for c in checked):
        raise ValueError("the datasets' treatments have different levels; fit_stacked needs the "
                         "same levels in every dataset (pass categories=[...] to the estimator)")
    shared_x = all(x is xs[0] for x in xs) and all(w is ws[0] for w in ws)
    if not shared_x:
        shapes = {c[0].shape for c in checked}
        if len(shapes) != 1 or units is not None:
            raise ValueError(f"per-dataset X must all have one shape (got {sorted(shapes)}) and "
                             f"cannot be combined with units")
        xw = np.repeat(np.stack([c[0] for c in checked]), e, axis=0)
    rows = _check_units(units, k, xw.shape[-2])
    member_rows = None if rows is None else np.repeat(rows, e, axis=0)
    if est.cross_fit:
        if rows is not None:
            raise ValueError("units cannot be combined with cross_fit=True in fit_stacked")
        member_rows = _stacked_folds([c[1] for c in checked], member_seeds, e)
    fitted = train(est, xw, np.repeat(np.stack([c[1] for c in checked]), e, axis=0),
                   np.repeat(np.stack([c[2] for c in checked]), e, axis=0), member_seeds,
                   encoding=encoding, columns=columns, rows=member_rows)
    fits, propensities = [], {}
    for j, (xw_j, arms_j, y_j, _, _) in enumerate(checked):
        used = slice(None) if rows is None else rows[j]
        member = fitted.select(list(range(j * e, (j + 1) * e))).summarise(xw_j[used],
                                                                          est.model_final)
        fits.append(debias(est, member, xw_j[used], arms_j[used], y_j[used], propensities))
    return fits, (ys[0], ts[0], xs[0])


def _stacked_folds(arms_per_dataset, member_seeds, e: int) -> np.ndarray:
    """The cross-fitting units (K * e, m) of fit_stacked: dataset j's folds as its own fit draws
    them (:func:`cross_fit_rows`), cut to the smallest m of all datasets where they differ."""
    folds = [cross_fit_rows(a, e, member_seeds[j * e]) for j, a in enumerate(arms_per_dataset)]
    return _common_size([r for f in folds for r in f],
                        np.random.default_rng(sklearn_seed(member_seeds[0])))


def resample_within_arms(units: np.ndarray, arms: np.ndarray, rng) -> np.ndarray:
    """Draw ``len(units)`` of ``units`` with replacement, keeping each arm's count (sorted)."""
    parts = [rng.choice(units[arms[units] == a], size=int((arms[units] == a).sum()))
             for a in np.unique(arms[units])]
    return np.sort(np.concatenate(parts))


def _bootstrap_rng(random_state) -> np.random.Generator:
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return np.random.default_rng([int(random_state), 0xB0075])  # not the estimator's stream
    return np.random.default_rng(check_random_state(random_state).randint(0, _SEED_HIGH))


def bootstrap(est, Y, T, X, W, n_replicas: int, random_state) -> list[FittedCFR]:
    """``n_replicas`` fits of ``est``, each on a resample of the units drawn with replacement
    within each treatment arm -- all in one stacked pass.

    With ``n_ensemble = E`` every replica is itself an ensemble of E networks (K = B * E). The
    *units* are split into training and validation first (the estimator's stratified split, with
    the replica's seed), then each side is resampled: resampling first would put copies of one
    unit on both sides, and the validation loss would reward memorising the training units.
    """
    xw, arms, y, columns, encoding = check_fit_inputs(Y, T, X, W, est.categories)
    rng = _bootstrap_rng(random_state)
    e = check_n_ensemble(est)
    seeds = draw_seeds(rng, n_replicas * e)
    config = config_from(est, resolve_loss(est.loss, y[None, :]))
    all_units = np.arange(len(arms))[None, :]
    train_rows, val_rows = [], []
    for b in range(n_replicas):
        tr, va = split(arms[None, :], all_units, [seeds[b * e]], config, encoding)
        train_rows.append(resample_within_arms(tr[0], arms, rng))
        val_rows.append(resample_within_arms(va[0], arms, rng))
    train_rows = np.repeat(np.stack(train_rows), e, axis=0)
    val_rows = np.repeat(np.stack(val_rows), e, axis=0)
    k = n_replicas * e
    fitted = train(est, xw, np.tile(arms, (k, 1)), np.tile(y, (k, 1)), seeds, encoding=encoding,
                   columns=columns, fixed_split=(train_rows, val_rows))
    rows = np.concatenate([train_rows, val_rows], axis=1)
    replicas = []
    for b in range(n_replicas):
        used = rows[b * e]
        replica = fitted.select(list(range(b * e, (b + 1) * e))).summarise(xw[used], est.model_final)
        replicas.append(debias(est, replica, xw[used], arms[used], y[used], cross_fit=False))
    return replicas

