"""The one fit path of CFR/TARNet.

Every fit reads as one pipeline, each stage entered once::

    validate -> preprocess -> plan and train the members -> choose -> nuisances
             -> average effects -> final stage (or blend) -> FittedCFR

* **validate**: :meth:`FitSettings.of` checks the estimator's parameters once; :func:`prepare`
  checks and encodes the data (:class:`FitData`).
* **plan and train**: a list of :class:`~dowhy_cfr.plans.MemberPlan` (one network, an ensemble,
  cross-fitting folds, alpha candidates, datasets, bootstrap replicas, random-search candidates,
  a stream) is trained by :func:`train_members`, the only caller of
  :func:`dowhy_cfr.core.train_cfr` (besides the distributed workers' own, through it).
* **choose**: ``alpha="auto"`` keeps the candidate with the best validation R-loss
  (:func:`select_alpha`), from the nuisance layer's nuisances.
* **nuisances**: the cross-fitted propensity of the nuisance layer
  (:func:`dowhy_cfr.nuisance.cross_fit_propensity`), once per dataset; for a continuous
  treatment the generalised propensity score (:func:`dowhy_cfr.nuisance.cross_fit_gps`)
  (:func:`nuisance_of` dispatches).
* **average effects**: :func:`debiased_stage`, the AIPW stage over the fitted units; for a
  continuous treatment :func:`dose_stage`, the doubly robust average dose-response.
* **final stage**: :func:`final_stage`, ``model_final`` on X when W was given; without W,
  :func:`blend_stage`, the heads blended with a doubly robust regression on X.

A continuous treatment (``treatment="continuous"``, or ``"auto"`` with more than 20 numeric
values) takes the same path: :func:`prepare` encodes it as a :class:`~dowhy_cfr.fitted.
DoseEncoding` with equal-count dose strata in place of arms (folds, splits and batches are
stratified by them), :func:`train_members` trains dose networks (``train_cfr(..., dose=...)``),
and :func:`assemble` builds the dose stage instead of the AIPW and final stages.

The entry points :func:`fit`, :func:`fit_stacked` and :func:`bootstrap` (and
:mod:`dowhy_cfr.streaming`, :mod:`dowhy_cfr.distributed`, :mod:`dowhy_cfr.selection`) only
build plans and call these stages; every stage returns a new object.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.utils import check_random_state

from . import _validation as V
from . import plans as P
from .core import ALPHA_GRID, CFRConfig, TrainingDivergedError, train_cfr
from .adrf import UNDERSMOOTH
from .covariates import Columns, Preprocessing
from .fitted import (BlendStage, DebiasedStage, DoseStage, FinalStage, FittedCFR, FittedMembers,
                     effects_of, member_dose_outputs, member_outputs, regressions_at, seen_rows)
from .metrics import SELECTION_CRITERIA, Nuisances, selection_scores
from .nuisance import (Propensity, aipw_scores, blend_weights, clipped_warning,
                       cross_fit_dr_learner, cross_fit_gps, cross_fit_outcomes,
                       cross_fit_propensity, held_out_mean, heterogeneity_test,
                       linear_propensity, propensity_candidates, sklearn_seed,
                       unit_propensities, weighted_residual_level)
from .treatment import TreatmentEncoding, encode_treatment, member_dose_knots

__all__ = ["CONFIG_FIELDS", "ALPHA_CRITERION", "FitSettings", "FitData", "Trained",
           "alpha_grid", "resolve_device", "show_progress", "resolve_loss", "prepare",
           "train_members", "propensity_of", "select_alpha", "debiased_stage", "final_stage",
           "blend_stage", "fit_blend", "BLEND_MODEL", "assemble", "fit", "fit_stacked", "bootstrap",
           "out_of_fold", "StreamSource", "nuisance_of", "gps_of", "dose_stage", "DOSE_GRID",
           "dose_final_stage", "DOSE_PROJECTION_VARIANCE", "DOSE_PROJECTION_MAX_CURVES",
           "treatment_kind", "robinson_heads", "with_unit_propensity", "ROBINSON_MAX_ALPHA",
           "warn_robinson_alpha", "auto_head_form", "head_form_plans", "choose_head_forms",
           "robinson_alpha", "AUTO_HEAD_FORMS", "AUTO_ROBINSON_ALPHA",
           "AUTO_AVERAGE_WITHIN"]

#: The estimator parameters that are fields of the core's :class:`~dowhy_cfr.core.CFRConfig`
#: (``loss`` is resolved from the data; ``max_eval_units`` keeps the core's default).
CONFIG_FIELDS = tuple(f for f in CFRConfig.__dataclass_fields__ if f not in ("loss", "max_eval_units"))

#: The criterion ``alpha="auto"`` selects by (see ``docs/parameters.md``, "Choosing alpha
#: without ground truth"): one of :data:`dowhy_cfr.metrics.SELECTION_CRITERIA`.
ALPHA_CRITERION = "r_loss"
#: Doses in the grid on which every fitted unit's outcome curve is evaluated for the doubly
#: robust average dose-response (:mod:`dowhy_cfr.adrf`; linear interpolation between them).
#: The curves are smooth in the dose (splines of degree 2 through ELU layers); the evaluations
#: cost K * n * DOSE_GRID head passes (docs/parameters.md, item 17).
DOSE_GRID = 32


# ============================================================================== validate
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


@dataclass(frozen=True)
class FitSettings:
    """The estimator's parameters, checked once: what every stage of a fit reads."""

    config_params: dict  # CONFIG_FIELDS -> value (alpha: a number, the first candidate of a grid)
    alpha_grid: list | None
    loss: str
    n_ensemble: int
    cross_fit: bool
    debias: str | None
    model_propensity: object
    min_propensity: float
    cv: int
    model_final: object
    final_blend: bool
    categories: object
    treatment: str
    random_state: object
    device: torch.device
    verbose: int

    @classmethod
    def of(cls, est, **overrides) -> "FitSettings":
        """The checked settings of estimator ``est``; ``overrides``: config fields to replace
        (e.g. ``n_iter`` and ``patience`` of bootstrap replicas)."""
        params = {f: getattr(est, f) for f in CONFIG_FIELDS if hasattr(est, f)}
        params.update(overrides)
        grid = alpha_grid(params.get("alpha", 0.0))
        if grid is not None:
            params["alpha"] = grid[0]
        params["cross_fit"] = _cross_fit(params.get("cross_fit", False),
                                         params.get("n_ensemble", 1))
        CFRConfig(**params).validate()
        _check_second_stages(est)
        return cls(params, grid, est.loss, V.check_int("n_ensemble", est.n_ensemble, 1),
                   _cross_fit(est.cross_fit, est.n_ensemble), est.debias, est.model_propensity,
                   float(est.min_propensity), int(est.cv), est.model_final,
                   bool(est.final_blend), est.categories,
                   getattr(est, "treatment", "auto"), est.random_state,
                   resolve_device(est.device), est.verbose)

    def config(self, loss: str, alpha: float | None = None) -> CFRConfig:
        """The core configuration for ``loss`` (and the member alpha ``alpha``)."""
        params = dict(self.config_params) if alpha is None else {**self.config_params,
                                                                   "alpha": float(alpha)}
        return CFRConfig(loss=loss, **params).validate()


def _cross_fit(cross_fit, n_ensemble: int) -> bool:
    """``cross_fit="auto"``: the members are cross-fitting folds when there are at least two."""
    return n_ensemble >= 2 if cross_fit == "auto" else bool(cross_fit)


def _check_second_stages(est) -> None:
    """ValueError/TypeError naming the invalid parameter of the stages after training: the
    debiasing (``debias``, ``cross_fit``, ``min_propensity``, ``cv``) and ``model_final``."""
    if est.debias not in ("aipw", None):
        raise ValueError(f"debias={est.debias!r} is invalid: use 'aipw' (doubly robust averages) "
                         f"or None (the plug-in mean of the heads' effects)")
    if not (isinstance(est.cross_fit, (bool, np.bool_)) or est.cross_fit == "auto"):
        raise TypeError(f"cross_fit must be True, False or 'auto'; got {est.cross_fit!r}")
    if est.cross_fit is True and V.check_int("n_ensemble", est.n_ensemble, 1) < 2:
        raise ValueError("cross_fit=True uses the n_ensemble members as cross-fitting folds; set "
                         "n_ensemble >= 2 (e.g. n_ensemble=5) or cross_fit=False")
    if not 0 < float(est.min_propensity) < 0.5:
        raise ValueError(f"min_propensity={est.min_propensity!r} must be in (0, 0.5), e.g. 0.01")
    V.check_int("cv", est.cv, 2)
    if not isinstance(est.final_blend, (bool, np.bool_)):
        raise TypeError(f"final_blend must be True or False; got {est.final_blend!r}")
    if est.model_final is not None and not (hasattr(est.model_final, "fit")
                                            and hasattr(est.model_final, "predict")):
        raise TypeError(f"model_final must be a scikit-learn regressor with fit and predict "
                        f"(e.g. sklearn.linear_model.LassoCV()) or None; got "
                        f"{est.model_final!r}")
    propensity_candidates(est.model_propensity)  # a clear error for an invalid one


# ============================================================================== preprocess
@dataclass(frozen=True)
class FitData:
    """One validated, encoded dataset: ``xw = [X | W]`` (n, d) raw, arm indices, outcomes,
    the column blocks, the treatment encoding and optional unit groups."""

    xw: np.ndarray
    arms: np.ndarray
    y: np.ndarray
    columns: Columns
    encoding: TreatmentEncoding
    groups: np.ndarray | None = None
    dose: np.ndarray | None = None  # a continuous treatment's doses (``arms``: their strata)
    # head_form="robinson": the units' propensities (n, n_arms) the heads are centred at
    # (with_unit_propensity)
    e: np.ndarray | None = None

    def subset(self, rows: np.ndarray) -> "FitData":
        """The rows ``rows`` (may repeat)."""
        return dataclasses.replace(self, xw=self.xw[rows], arms=self.arms[rows], y=self.y[rows],
                                   groups=None if self.groups is None else self.groups[rows],
                                   dose=None if self.dose is None else self.dose[rows],
                                   e=None if self.e is None else self.e[rows])


def prepare(settings: FitSettings, Y, T, X, W=None, groups=None) -> FitData:
    """Validated and encoded data of a fit (``xw = [X | W]``)."""
    if X is None and W is None:
        raise ValueError("X is required: CFR needs covariates -- pass them as X (confounders "
                         "and effect modifiers), or as W with X=None for average effects only")
    if np.ndim(Y) == 2 and np.shape(Y)[1] > 1:
        raise ValueError(f"Y must be a single outcome; got {np.shape(Y)[1]} columns. Fit one "
                         f"estimator per outcome.")
    if np.ndim(T) == 2 and np.shape(T)[1] > 1:
        raise ValueError(f"T must be a single column; got {np.shape(T)[1]} treatment columns. "
                         f"CFR has one outcome head per level of one treatment: combine several "
                         f"treatments into one categorical treatment (one level per combination)")
    y = V.as_1d("Y", Y)
    try:
        y = y.astype("float64")
    except (TypeError, ValueError) as exc:
        raise TypeError("Y must be numeric; encode a categorical outcome as 0/1") from exc
    V.check_finite("Y", y)
    t_raw = V.as_1d("T", T)
    columns, x, w = Columns.fit(X, W)
    g = None if groups is None else V.as_1d("groups", groups)
    V.check_same_length(Y=y, T=t_raw, X=x, W=w, groups=g)
    dose_params = {k: settings.config_params.get(k, getattr(CFRConfig(), k))
                   for k in ("dose_strata", "dose_scale")}
    encoding, arms = encode_treatment(t_raw, settings.categories, settings.treatment,
                                      dose_params["dose_strata"],
                                      dose_scale=dose_params["dose_scale"])
    xw = np.hstack([a for a in (x, w) if a is not None])
    codes = None if g is None else pd.factorize(pd.Series(g, dtype=object))[0]
    dose = t_raw.astype(float) if encoding.continuous else None
    return FitData(xw, arms, y, columns, encoding, codes, dose)


def treatment_kind(est, T) -> str:
    """"continuous" or "categorical": what ``est.fit`` makes of the treatment ``T`` (the rule
    of :func:`~dowhy_cfr.treatment.encode_treatment`; errors are left to the fit)."""
    try:
        t = V.as_1d("T", T)
        encoding, _ = encode_treatment(t, getattr(est, "categories", "auto"),
                                       getattr(est, "treatment", "auto"),
                                       getattr(est, "dose_strata", CFRConfig().dose_strata))
    except (TypeError, ValueError):
        return "categorical"
    return "continuous" if encoding.continuous else "categorical"


# ============================================================================== train
@dataclass(frozen=True)
class Trained:
    """The members of one stacked training, in plan order, and what they share."""

    members: FittedMembers
    preprocessing: Preprocessing
    config: CFRConfig
    failed: np.ndarray  # (K,) members whose training diverged before any checkpoint

    def subset(self, idx: list, head_form=None, alpha: float | None = None) -> "Trained":
        """Only the members ``idx`` (renumbered 0, 1, ...); ``head_form`` ("separate" or
        "robinson") and ``alpha``: the form and penalty they trained with, where a stack of both
        forms (``head_form="auto"``) trained them (None: the stack's); one form per member:
        both forms kept, as paired members (:meth:`~dowhy_cfr.fitted.FittedMembers.select`;
        the configuration stays ``"auto"``'s)."""
        config = self.config
        if isinstance(head_form, str):
            config = dataclasses.replace(config, head_form=head_form,
                                         alpha=config.alpha if alpha is None else alpha)
        members = self.members.select(idx, head_form)
        failed = self.failed[idx]
        if members.paired:  # a member failed where either of its networks did
            failed = failed[:members.n_models] | failed[members.n_models:]
        return Trained(members, self.preprocessing.select(idx), config, failed)

    def outputs(self, xw: np.ndarray, e: np.ndarray | None = None) -> np.ndarray:
        """Every member's predictions of the raw covariates ``xw``: (K, n_arms, n); ``e`` the
        rows' propensities for ``head_form="robinson"`` (:func:`with_unit_propensity`)."""
        return member_outputs(self.members, self.preprocessing, self.preprocessing.x(xw), e)


@dataclass(frozen=True)
class StreamSource:
    """Training data read as a stream of mini-batches (:mod:`dowhy_cfr.streaming`):
    ``batch_source() -> (x, t, y)`` standardised, the arms' shares of the training data
    (K, n_arms), the validation data ``(y, arms, xw)`` raw, the preprocessing and encoding, and
    ``hooks`` for :func:`~dowhy_cfr.core.train_cfr` (``model_wrapper``, ``gather_ipm``)."""

    batch_source: object
    arm_shares: np.ndarray
    validation: tuple
    preprocessing: Preprocessing
    encoding: TreatmentEncoding
    hooks: dict = dataclasses.field(default_factory=dict)


def train_members(settings: FitSettings, plans: list, *, datasets: list | None = None,
                  stream: StreamSource | None = None, on_failure: str = "raise",
                  progress: bool | None = None) -> Trained:
    """Train the members ``plans`` in one stacked pass: the one training function.

    In memory, member k trains on ``datasets[plans[k].dataset]`` (a :class:`FitData`; datasets
    sharing one ``xw`` array share the covariates), on the units of its plan split into
    training and validation by its seed, or on its fixed split. With ``stream`` the members
    share the stream's mini-batches and its validation data. Members whose training diverges
    before any checkpoint: ``on_failure="raise"`` raises, ``"drop"`` leaves them out with a
    warning (ensemble members: the others still make an ensemble), ``"flag"`` keeps them,
    flagged in ``failed`` (candidates of a selection).
    """
    progress = show_progress(settings.verbose) if progress is None else progress
    if stream is not None:
        return _survivors(_train_stream(settings, plans, stream, progress), on_failure)
    k = len(plans)
    per = [datasets[p.dataset] for p in plans]
    encoding = per[0].encoding
    y = np.stack([d.y for d in per])
    arms = np.stack([d.arms for d in per])
    shared = all(d.xw is per[0].xw for d in per)
    xw = per[0].xw if shared else np.stack([d.xw for d in per])
    loss = resolve_loss(settings.loss, y)
    config = settings.config(loss, plans[0].params.get("alpha"))
    rows, train_rows, val_rows = _member_rows(plans, per, config)
    pre = Preprocessing.fit(loss, xw, y, rows, config.scaling)
    _clamp_batch_size(config, train_rows.shape[1])
    config = config.resolve(train_rows.shape[1], continuous=per[0].dose is not None)
    x = pre.x_tensor(xw)
    knots, dose = None, None
    if per[0].dose is not None:  # each member's dose scale, from the units it sees
        seen = seen_rows(train_rows, val_rows, [p.stop_on_others for p in plans])
        knots = member_dose_knots([d.encoding for d in per],
                                  [d.dose[r] for d, r in zip(per, seen)])
        own = knots or (None,) * k
        dose = torch.as_tensor(np.stack([d.encoding.scale(d.dose, kn) for d, kn in zip(per, own)]),
                               dtype=torch.float32)
    propensity = None
    if robinson_heads(settings, per[0]):
        if any(d.e is None for d in per):
            raise ValueError("head_form='robinson' trains with the units' propensities: attach "
                             "them first (fitting.with_unit_propensity)")
        propensity = torch.as_tensor(np.stack([d.e for d in per]), dtype=torch.float32)
    result = train_cfr(
        x if x.ndim == 3 else x.unsqueeze(0).expand(k, -1, -1),
        torch.as_tensor(arms, dtype=torch.long), torch.as_tensor(pre.y(y), dtype=torch.float32),
        train_idx=torch.as_tensor(train_rows), val_idx=torch.as_tensor(val_rows), config=config,
        seeds=[p.seed for p in plans], n_arms=encoding.n_arms, per_model_data=True,
        device=settings.device, progress=progress, count_shares=_data_shares(per, encoding),
        ensembles=[p.ensemble for p in plans],
        stop_on_others=[p.stop_on_others for p in plans], dose=dose, propensity=propensity,
        **_per_member(plans, config))
    members = dataclasses.replace(FittedMembers.from_result(
        result, [p.seed for p in plans], train_rows, val_rows,
        np.array([p.stop_on_others for p in plans])), dose_knots=knots)
    return _survivors(Trained(members, pre, config, np.asarray(result.failed, dtype=bool)),
                      on_failure)


def _data_shares(per: list, encoding: TreatmentEncoding) -> np.ndarray:
    """Each member's batch arm shares: its data set's (K, n_arms), not its training units' --
    the members of one data set then share one batch shape (:func:`core.train_cfr`'s
    ``count_shares``)."""
    return np.stack([np.bincount(d.arms, minlength=encoding.n_arms) / len(d.arms) for d in per])


def _per_member(plans, config: CFRConfig) -> dict:
    """The per-member hyper-parameters of the plans, as :func:`train_cfr`'s overrides; the
    candidates of ``head_form="auto"`` (:func:`head_form_plans`) as ``head_forms``, Robinson's
    without the penalty (:func:`robinson_alpha`)."""
    out = {name: [p.params.get(name, getattr(config, name)) for p in plans]
           for name in P.PER_MEMBER if name != "head_form" and any(name in p.params for p in plans)}
    forms = [p.params.get("head_form") for p in plans]
    if any(forms):
        out["head_forms"] = [form or config.head_form for form in forms]
        alphas = out.get("alpha", [config.alpha] * len(plans))
        capped = robinson_alpha(config)
        out["alpha"] = [min(a, capped) if form == "robinson" else a
                        for a, form in zip(alphas, out["head_forms"])]
    return out


def _member_rows(plans, per, config: CFRConfig):
    """``(rows, train_rows, val_rows)``, each (K, m): the units of every member, split."""
    rows, train, val = [], [], []
    for p, d in zip(plans, per):
        if p.split is not None:
            tr, va = (np.asarray(r) for r in p.split)
            _check_split_arms(d.arms, tr, va, d.encoding, p.stop_on_others)
        else:
            units = np.arange(len(d.y)) if p.rows is None else np.asarray(p.rows)
            _check_arm_sizes(d.arms[units], d.encoding, config.val_fraction)
            tr, va = P.split_units(d.arms, units, p.seed, config.val_fraction, d.groups)
        rows.append(np.concatenate([tr, va]))
        train.append(tr)
        val.append(va)
    train, val = _common_size(train, plans), _common_size(val, plans)
    return np.concatenate([train, val], axis=1), train, val


def _common_size(unit_sets: list, plans) -> np.ndarray:
    """The members' unit sets as (K, m), m the smallest size: larger sets (grouped splits)
    keep m of their units at random (seeded by the member)."""
    m = min(len(r) for r in unit_sets)
    return np.stack([r if len(r) == m else np.sort(np.random.default_rng(
        sklearn_seed(p.seed)).choice(r, m, replace=False)) for r, p in zip(unit_sets, plans)])


def _check_arm_sizes(arms: np.ndarray, encoding: TreatmentEncoding, val_fraction: float):
    counts = np.bincount(arms, minlength=encoding.n_arms)
    n_val_min = np.ceil(counts * val_fraction)
    too_small = (counts < 2) | (n_val_min < 1) | (counts - n_val_min < 1)
    if too_small.any():
        label = V.plain(encoding.categories[int(np.argmax(too_small))])
        raise ValueError(f"treatment arm {label!r} has only {counts[too_small].min()} unit(s); "
                         f"at least 2 are needed to split it into training and validation "
                         f"(val_fraction={val_fraction})")


def _check_split_arms(arms: np.ndarray, train: np.ndarray, val: np.ndarray,
                      encoding: TreatmentEncoding, kfold: bool) -> None:
    """A member's fixed split must hold every arm in both parts. A K-fold member's (``kfold``:
    trained on the other folds, validated on its own) cannot where an arm has fewer units than
    there are folds."""
    n_arms = encoding.n_arms
    for part, rows in (("training", train), ("validation", val)):
        absent = np.setdiff1d(np.arange(n_arms), arms[rows])
        if absent.size == 0:
            continue
        a = int(absent[0])
        count = int(np.sum(arms == a))
        what = (f"dose stratum {a}" if encoding.continuous else
                f"treatment arm {V.plain(encoding.categories[a])!r}")
        if not kfold:
            raise ValueError(f"{what} has only {count} unit(s), and a member's {part} units "
                             f"hold none of them: give every arm at least a few units")
        raise ValueError(
            f"{what} has only {count} unit(s), and a member's {part} units hold none of them: "
            f"the K-fold members (cross_fit='auto') each leave out one fold, so every arm needs "
            f"at least as many units as there are members (n_ensemble, default 5). Give the "
            f"rare arm more units, merge it with another level, or fit members on random "
            f"splits instead (cross_fit=False)")


def _clamp_batch_size(config: CFRConfig, n_train: int) -> None:
    """Clamp ``config.batch_size`` (with a warning) to a training split smaller than it."""
    if config.batch_size != "auto" and config.batch_size > n_train:
        warnings.warn(f"batch_size={config.batch_size} is larger than the training split "
                      f"({n_train} units); using batch_size={n_train}", UserWarning, stacklevel=4)
        config.batch_size = n_train


def _train_stream(settings: FitSettings, plans, stream: StreamSource, progress) -> Trained:
    """:func:`train_members` on a stream: every member draws the stream's mini-batches."""
    y_val, arms_val, x_val = stream.validation
    pre, seeds = stream.preprocessing, [p.seed for p in plans]
    config = settings.config(pre.loss)
    if config.head_form == "auto":  # a stream gives no propensities for Robinson's form
        config = dataclasses.replace(config, head_form="separate")
    val_idx = np.stack([np.random.default_rng(s).permutation(len(y_val)) for s in seeds])
    result = train_cfr(
        pre.x_tensor(x_val), torch.as_tensor(arms_val),
        torch.as_tensor(pre.y(y_val)[0], dtype=torch.float32), train_idx=None,
        val_idx=torch.as_tensor(val_idx), config=config, seeds=seeds,
        n_arms=stream.encoding.n_arms, batch_source=stream.batch_source,
        arm_shares=torch.as_tensor(stream.arm_shares), device=settings.device,
        ensembles=[p.ensemble for p in plans], progress=progress, **stream.hooks)
    members = FittedMembers.from_result(result, seeds)
    return Trained(members, pre, config, np.asarray(result.failed, dtype=bool))


def _survivors(trained: Trained, on_failure: str) -> Trained:
    """Apply the ``on_failure`` policy of :func:`train_members`."""
    failed = np.flatnonzero(trained.failed).tolist()
    if not failed or on_failure == "flag":
        return trained
    k = len(trained.failed)
    message = (f"the training of member(s) {failed} of {k} diverged before any checkpoint was "
               f"kept; lower learning_rate, alpha or weight_decay, or check the inputs for "
               f"extreme values")
    if on_failure != "drop":
        raise TrainingDivergedError(message)
    warnings.warn(message + "; the ensemble goes on without them.", RuntimeWarning, stacklevel=4)
    return trained.subset([j for j in range(k) if j not in failed])


# ============================================================================== nuisances
def propensity_of(settings: FitSettings, data: FitData, seed: int,
                  model=None) -> Propensity:
    """The cross-fitted propensity of the fitted units (the nuisance layer), seeded by the
    first member's seed; ``model`` replaces ``model_propensity`` (e.g. the family a fit kept)."""
    return cross_fit_propensity(settings.model_propensity if model is None else model, data.xw,
                                data.arms, n_arms=data.encoding.n_arms, cv=settings.cv,
                                random_state=seed, min_propensity=settings.min_propensity,
                                groups=data.groups)


def gps_of(settings: FitSettings, data: FitData, seed: int, model=None):
    """The cross-fitted generalised propensity score of a continuous treatment's fitted units
    (:func:`~dowhy_cfr.nuisance.cross_fit_gps`), seeded by the first member's seed."""
    return cross_fit_gps(settings.model_propensity if model is None else model, data.xw,
                         data.dose, cv=settings.cv, random_state=seed,
                         min_propensity=settings.min_propensity, groups=data.groups)


def nuisance_of(settings: FitSettings, data: FitData, seed: int, model=None):
    """The fitted units' treatment nuisance: the propensity (categorical treatment) or the
    generalised propensity score (continuous)."""
    if data.dose is not None:
        return gps_of(settings, data, seed, model)
    return propensity_of(settings, data, seed, model)


def robinson_heads(settings: FitSettings, data: FitData) -> bool:
    """Whether some of the fit's heads take Robinson's form (``head_form="robinson"``, or the
    candidates of ``"auto"``; a categorical treatment, a dose's head is its own): the training
    then needs the units' propensities."""
    return settings.config_params.get("head_form") in ("robinson", "auto") and data.dose is None


def auto_head_form(settings: FitSettings, data: FitData) -> bool:
    """Whether the fit chooses its heads' form (``head_form="auto"``, a categorical treatment):
    both forms train in one stack (:func:`head_form_plans`), and :func:`choose_head_forms`
    keeps one, or both averaged."""
    return settings.config_params.get("head_form") == "auto" and data.dose is None


#: The candidates of ``head_form="auto"``, in candidate order (:func:`head_form_plans`).
AUTO_HEAD_FORMS = ("separate", "robinson")
#: The balance penalty of ``head_form="auto"``'s Robinson candidates. 0 (TARNet's Robinson heads)
#: chose as 0.05 did on 69 realistic data sets and IHDP 1-30 (held-out heads -0.023 against
#: separate heads at either; development -0.007 against -0.005), and those members stop sooner
#: and skip the IPM (``docs/parameters.md``, item 43).
AUTO_ROBINSON_ALPHA = 0.0


def head_form_plans(plans: list) -> list:
    """``plans`` once per form of :data:`AUTO_HEAD_FORMS` (candidate-major,
    :func:`dowhy_cfr.plans.variants`): the candidates of ``head_form="auto"``."""
    return P.variants(plans, [{"head_form": form} for form in AUTO_HEAD_FORMS])


def robinson_alpha(config: CFRConfig) -> float:
    """The penalty of ``head_form="auto"``'s Robinson candidates: the fit's ``alpha`` capped at
    :data:`AUTO_ROBINSON_ALPHA` (0: no penalty, so that candidate trains as TARNet's Robinson
    heads; ``config``: resolved at the members' size)."""
    return min(float(config.alpha), AUTO_ROBINSON_ALPHA)


#: ``head_form="auto"`` keeps both forms, each member the average of its two networks, where
#: their mean fold losses differ by at most this share of the separate heads' (else the form of
#: the lower loss alone). At 0.05, against the choice alone: held-out heads' sqrt(PEHE) -0.012,
#: development -0.012, IHDP 1-40 unchanged (there the Robinson form's loss was 10 % to 22-fold
#: higher on every realization; ``docs/parameters.md``, item 45).
AUTO_AVERAGE_WITHIN = 0.05


def choose_head_forms(trained: Trained, n_groups: int) -> list:
    """``head_form="auto"``: for each of the ``n_groups`` ensembles of a stack of both forms
    (:func:`head_form_plans`; candidate c's ensemble g holds members ``(c * n_groups + g) * E``
    to ``+ E``), the candidates' mean factual loss on their members' own validation units at
    their kept step (:meth:`~dowhy_cfr.fitted.FittedMembers.kept_val_loss`; a K-fold member's
    fold, which neither trained it nor stopped it). Where the two means differ by at most
    :data:`AUTO_AVERAGE_WITHIN` of the separate heads' the members of both forms are kept, as
    paired members averaging their two networks (the members of a fold where either form
    diverged dropped); else those of the form of the lower loss. Returns ``(Trained, table)``
    pairs: the members kept, and the candidates' losses and weights."""
    e = trained.members.n_models // (len(AUTO_HEAD_FORMS) * n_groups)
    losses = trained.members.kept_val_loss()
    losses[trained.failed] = np.nan
    capped = robinson_alpha(trained.config)
    out = []
    for g in range(n_groups):
        idx = [[(c * n_groups + g) * e + i for i in range(e)]
               for c in range(len(AUTO_HEAD_FORMS))]
        scores = [float(np.nanmean(losses[i])) if np.isfinite(losses[i]).any() else np.inf
                  for i in idx]
        best = int(np.argmin(scores))
        if not np.isfinite(scores[best]):
            raise TrainingDivergedError("the training of both head forms diverged; lower "
                                        "learning_rate or weight_decay, or check the inputs")
        pairs = [(a, b) for a, b in zip(*idx) if not (trained.failed[a] or trained.failed[b])]
        if pairs and abs(scores[1] - scores[0]) <= AUTO_AVERAGE_WITHIN * scores[0]:
            weights = [0.5, 0.5]
            chosen = [a for a, _ in pairs] + [b for _, b in pairs]
            kept = trained.subset(chosen, [AUTO_HEAD_FORMS[0]] * len(pairs)
                                  + [AUTO_HEAD_FORMS[1]] * len(pairs))
        else:
            weights = [float(c == best) for c in range(len(scores))]
            form = AUTO_HEAD_FORMS[best]
            kept = trained.subset([k for k in idx[best] if not trained.failed[k]], form,
                                  capped if form == "robinson" else None)
        table = pd.DataFrame({"head_form": AUTO_HEAD_FORMS, "fold_loss": scores,
                              "selected": [w > 0 for w in weights], "weight": weights})
        out.append((kept, table))
    return out


#: ``head_form="robinson"`` with an ``alpha`` above this warns: the balance penalty removes from
#: Phi the direction of the propensity, which the mean head m = E[Y | x] needs (measured:
#: ``docs/parameters.md``, item 41; at 0.2 the held-out designs' heads +0.035, at 0.05 -0.017
#: against separate heads at 0.2).
ROBINSON_MAX_ALPHA = 0.05


def warn_robinson_alpha(settings: FitSettings, stacklevel: int) -> None:
    """A UserWarning where ``head_form="robinson"`` trains with a balance penalty above
    :data:`ROBINSON_MAX_ALPHA` (the largest of an alpha grid's candidates); ``"auto"`` trains its
    Robinson candidates without the penalty instead (:func:`robinson_alpha`)."""
    alpha = max(settings.alpha_grid or [settings.config_params.get("alpha", 0.0)])
    if settings.config_params.get("head_form") == "robinson" and alpha > ROBINSON_MAX_ALPHA:
        warnings.warn(f"head_form='robinson' with alpha={alpha:g}: the balance penalty removes "
                      f"from the representation the direction of the propensity, which the mean "
                      f"head m(x) = E[Y | x] needs, and the heads lose (docs/parameters.md, item "
                      f"41); use alpha <= {ROBINSON_MAX_ALPHA:g}, or "
                      f"TARNet(head_form='robinson')", UserWarning, stacklevel=stacklevel)


def with_unit_propensity(settings: FitSettings, data: FitData, seed: int,
                         propensity: Propensity | None = None):
    """``(data, propensity)`` with the units' propensities attached (``data.e``,
    :func:`~dowhy_cfr.nuisance.unit_propensities`) where the heads take Robinson's form:
    ``propensity`` if given (the fit's own, e.g. for bootstrap replicas), else cross-fitted
    now (:func:`nuisance_of`, seeded by ``seed``). Other fits: both as given."""
    if not robinson_heads(settings, data):
        return data, propensity
    if propensity is None:
        propensity = nuisance_of(settings, data, seed)
    return dataclasses.replace(data, e=unit_propensities(propensity)), propensity


# ============================================================================== choose
def select_alpha(settings: FitSettings, trained: Trained, data: FitData, propensity: Propensity,
                 n_members: int):
    """``alpha="auto"`` (or a grid): the members of the alpha with the best validation score,
    and the table of scores.

    Candidate g's member j is ``g * n_members + j`` (:func:`dowhy_cfr.plans.candidates`). Each
    member is scored on the units it never saw (its fold; else its validation units,
    :meth:`~dowhy_cfr.fitted.FittedMembers.scoring_rows`) by the criteria of
    :func:`dowhy_cfr.metrics.selection_scores`, with the fit's cross-fitted propensity and
    out-of-fold arm-wise outcome regressions of the nuisance layer; an alpha's score is the mean
    over its members, and :data:`ALPHA_CRITERION` decides (ties: the first in the grid).
    """
    grid = settings.alpha_grid
    out = trained.outputs(data.xw, data.e)
    tau = out[:, 1] - out[:, 0]
    seed = trained.members.seeds[0]
    mu = cross_fit_outcomes(data.xw, data.y, data.arms, n_arms=2, cv=settings.cv,
                            random_state=seed, groups=data.groups)
    # the clip bounds each arm's probability below only: a treated probability of 1 (a unit
    # no control resembles) is bounded by the control's clip too, as the scores need 0 < e < 1
    e1 = np.clip(propensity.e[:, 1], settings.min_propensity, 1 - settings.min_propensity)
    nuisances = Nuisances(e1, e1 * mu[:, 1] + (1 - e1) * mu[:, 0], mu[:, 0], mu[:, 1])
    rows = []
    for k in range(len(tau)):
        scores = (dict.fromkeys(SELECTION_CRITERIA, np.inf) if trained.failed[k] else
                  selection_scores(tau[k], trained.members.scoring_rows(k, len(data.y)),
                                   data.xw, data.y, data.arms, nuisances))
        rows.append({"alpha": grid[k // n_members], "member": k % n_members, **scores})
    table = pd.DataFrame(rows).groupby("alpha", sort=False)[list(SELECTION_CRITERIA)].mean()
    best = int(np.argmin(table[ALPHA_CRITERION].to_numpy()))
    if not np.isfinite(table[ALPHA_CRITERION].iloc[best]):
        raise TrainingDivergedError("the training of every alpha candidate diverged; lower "
                                    "learning_rate or weight_decay, or check the inputs")
    chosen = [k for k in range(best * n_members, (best + 1) * n_members)
              if not trained.failed[k]]
    selected = trained.subset(chosen)
    selected = dataclasses.replace(selected, config=dataclasses.replace(selected.config,
                                                                        alpha=grid[best]))
    return selected, table.reset_index().assign(selected=lambda d: d.index == best)


# ============================================================================== average effects
def out_of_fold(outputs: np.ndarray, members: FittedMembers) -> np.ndarray:
    """Per unit, the mean prediction (n, n_arms) of the members that never saw it, neither
    trained nor early-stopped on it (``outputs``: (K, n_arms, n)); NaN where every member saw
    the unit."""
    return held_out_mean(np.moveaxis(outputs, 2, 1), members.seen_mask(outputs.shape[2]))


def debiased_stage(data: FitData, outputs: np.ndarray, members: FittedMembers,
                   propensity: Propensity | None, *, cross_fit: bool,
                   min_propensity: float | None = None) -> DebiasedStage:
    """The fitted units' doubly robust stage: outcome predictions (out-of-fold for cross-fitting
    members; with a propensity, each arm's shifted by its weighted mean residual,
    :func:`~dowhy_cfr.nuisance.weighted_residual_level`: the AIPW estimator with normalised
    weights), the propensity (and its clip ``min_propensity``, with the units it clipped), and
    the shift that makes the heads' mean effect the AIPW one (``propensity=None``:
    ``debias=None``, no shift)."""
    mu_plugin = outputs.mean(0).T
    mu = mu_plugin
    if cross_fit and members.train_rows is not None:
        oof = out_of_fold(outputs, members)
        mu = np.where(np.isnan(oof), mu_plugin, oof)
    x = data.xw[:, :data.columns.n_x]
    if propensity is None:
        return DebiasedStage(x, data.y, data.arms, mu, mu_plugin, None,
                             np.zeros(data.encoding.n_arms))
    mu = mu + weighted_residual_level(data.y, data.arms, mu, propensity.e)  # Hajek's weights
    # the AIPW E[Y(a)]: with the weighted residuals summing to zero, the mean of the shifted mu
    arm_means = mu.mean(0)
    return DebiasedStage(x, data.y, data.arms, mu, mu_plugin, propensity.e,
                         arm_means - mu_plugin.mean(0), propensity.model, propensity.clipped,
                         min_propensity)


# ============================================================================== final stage
def final_stage(settings: FitSettings, data: FitData, outputs: np.ndarray, stage: DebiasedStage,
                seed: int) -> FinalStage | None:
    """``model_final`` (default: gradient boosting seeded by the first member) fitted to the
    heads' unit-level effects on X, when both X and W were given; its predictions are shifted
    to the stage's average effect when debiasing."""
    n_x = data.columns.n_x
    if data.columns.n_w == 0 or n_x == 0:
        return None
    model = settings.model_final
    if model is None:
        model = HistGradientBoostingRegressor(random_state=sklearn_seed(seed))
    theta = stage.theta if stage.e is not None else None
    member_tau = np.stack([effects_of(o) for o in outputs]) if len(outputs) > 1 else None
    return FinalStage.fit(model, data.xw[:, :n_x], effects_of(outputs.mean(0)), theta,
                          member_tau)


#: The regression of :func:`blend_stage` (``model_final=None``): shallow boosting that stops when
#: a fifth of its units stop improving, on 63 bins per column (measured: ``docs/parameters.md``,
#: items 9 and 14).
BLEND_MODEL = HistGradientBoostingRegressor(max_depth=2, learning_rate=0.05, max_iter=300,
                                            min_samples_leaf=40, early_stopping=True,
                                            validation_fraction=0.2, n_iter_no_change=20,
                                            max_bins=63)


def blend_stage(settings: FitSettings, data: FitData, members: FittedMembers,
                stage: DebiasedStage, *, cross_fit: bool) -> BlendStage | None:
    """Without W, with ``final_blend``, the doubly robust stage and K-fold members: the heads
    blended with regressions of the pseudo-outcomes on X (:class:`~dowhy_cfr.fitted.BlendStage`).
    None otherwise."""
    n_x = data.columns.n_x
    if (not settings.final_blend or data.columns.n_w or n_x == 0 or stage.e is None
            or not cross_fit or members.train_rows is None or members.n_models < 2):
        return None
    model = BLEND_MODEL if settings.model_final is None else settings.model_final
    return fit_blend(members.seen_mask(len(data.y)), model, list(members.seeds), stage)


def fit_blend(train: np.ndarray, model, seeds: list, stage: DebiasedStage) -> BlendStage:
    """The blend of the heads' effects with the DR-learner over the fitted units of ``stage``:
    regressor j of the pseudo-outcomes fitted on member j's units ``train[j]``
    (:func:`~dowhy_cfr.nuisance.cross_fit_dr_learner`), the weights chosen by the R-loss of the
    out-of-fold effects and the calibration test of their variation
    (:func:`~dowhy_cfr.nuisance.blend_weights`, :func:`~dowhy_cfr.nuisance.heterogeneity_test`),
    and the shift that makes the mean over the fitted units the AIPW average effect; where a
    constant effect is chosen, also the mix it beat (its weights and shift: the intervals
    account for the choice). Deterministic given the seeds (a loaded model refits it)."""
    scores = aipw_scores(stage.y, stage.arms, stage.mu, stage.e)
    pseudo = scores[:, 1:] - scores[:, :1]
    models = cross_fit_dr_learner(model, stage.x, pseudo, train, seeds)
    regs = regressions_at(models, stage.x)
    oof = (stage.y, stage.arms, stage.mu, stage.e, effects_of(stage.mu.T),
           held_out_mean(regs, train))
    weights = blend_weights(*oof)
    mix = weights if np.any(weights) else blend_weights(*oof, constant=False)
    test = heterogeneity_test(*oof[:4], mix[0] * oof[4] + mix[1] * oof[5])
    mixed = mix[0] * effects_of(stage.mu_plugin.T) + mix[1] * regs.mean(0)
    mix_shift = stage.theta - mixed.mean(0)
    shift = mix_shift if np.any(weights) else stage.theta
    deleted = np.stack([pseudo[rows].mean(0) for rows in train])
    return BlendStage(train, model, models, weights, shift, deleted, mix, mix_shift, test)


def dose_stage(settings: FitSettings, data: FitData, trained: Trained, gps, *,
               cross_fit: bool) -> tuple[DoseStage, np.ndarray]:
    """The fitted units' dose-response stage: every unit's outcome curve on a grid of
    :data:`DOSE_GRID` doses over the range and at its own dose (out of fold for cross-fitting
    members), the ensemble's mean curve, and with ``gps`` (``debias="aipw"``) the doubly
    robust pseudo-outcomes of Kennedy et al. (2017) and their bandwidth
    (:meth:`~dowhy_cfr.fitted.DoseStage.of`); and each member's curves of every fitted unit on
    the grid, (K, n, G)."""
    members, pre, enc = trained.members, trained.preprocessing, data.encoding
    grid = enc.stage_grid(DOSE_GRID)
    x_std = pre.x(data.xw)
    own = member_dose_outputs(members.net, pre, x_std,
                              members.dose_scale(enc, data.dose))  # (K, n)
    curves = member_dose_outputs(members.net, pre, x_std, members.dose_scale(enc, grid),
                                 grid=True)  # (K, n, G)
    mu, mu_curves = own.mean(0), curves.mean(0)
    plugin_curve = mu_curves.mean(0)
    if cross_fit and members.train_rows is not None:
        mask = members.seen_mask(len(data.y))
        oof = held_out_mean(np.concatenate([own[:, :, None], curves], 2), mask)
        missing = np.isnan(oof[:, 0])
        mu = np.where(missing, mu, oof[:, 0])
        mu_curves = np.where(missing[:, None], mu_curves, oof[:, 1:])
    folds = cross_fit and members.train_rows is not None and members.n_models >= 2
    stage = DoseStage.of(data.xw[:, :data.columns.n_x], data.y, data.dose, grid, mu_curves, mu,
                         plugin_curve, curves.mean(1) if folds else None, gps,
                         max_weight=1.0 / settings.min_propensity, undersmooth=UNDERSMOOTH,
                         knots=(enc.knots_t or None, enc.knots_u or None))
    return stage, curves


#: The projection of the units' curves on X when W was given (:func:`dose_final_stage`): the
#: principal curves kept explain this share of the curves' variance about their mean curve,
#: at most :data:`DOSE_PROJECTION_MAX_CURVES` of them (each is one ``model_final`` regression).
DOSE_PROJECTION_VARIANCE = 0.999
DOSE_PROJECTION_MAX_CURVES = 6


def dose_final_stage(settings: FitSettings, data: FitData, stage: DoseStage,
                     curves: np.ndarray, seed: int) -> tuple[DoseStage, FinalStage] | None:
    r"""With W and X at fit, a continuous treatment's final stage: the units' curves
    :math:`\hat\mu(x_i, w_i, t)` on the stage's grid (``curves``: each member's, (K, n, G))
    projected on X, :math:`E[\hat\mu(X, W, t) \mid X = x]`, as EconML's DML final stage
    projects the effect on X. The members' mean curves are written as their mean curve plus
    their leading principal curves (:data:`DOSE_PROJECTION_VARIANCE`), ``model_final``
    (default: :data:`BLEND_MODEL`'s shallow, early-stopped boosting seeded by the first
    member; measured against scikit-learn's default boosting in ``docs/dose.md``, "W")
    regresses each unit's scores on X, shifted so that the projected curves' mean over the
    fitted units is the networks' mean curve (the doubly robust correction of the average curve
    is added on top, as without W); each member's own curves, on the same principal curves,
    give the members' jackknife. None without W or without X. Returns the stage with its
    ``basis_mean``/``basis`` and the :class:`~dowhy_cfr.fitted.FinalStage` of the scores."""
    n_x = data.columns.n_x
    if data.columns.n_w == 0 or n_x == 0:
        return None
    mean_curves = curves.mean(0)  # (n, G)
    basis_mean = mean_curves.mean(0)
    _, sv, vt = np.linalg.svd(mean_curves - basis_mean, full_matrices=False)
    share = np.cumsum(sv ** 2) / max(float(np.sum(sv ** 2)), 1e-300)
    r = min(int(np.searchsorted(share, DOSE_PROJECTION_VARIANCE)) + 1,
            DOSE_PROJECTION_MAX_CURVES, len(sv))
    basis = vt[:r]  # (r, G), orthonormal rows
    model = settings.model_final
    if model is None:  # the W-driven level of every curve is noise to this regression
        model = clone(BLEND_MODEL).set_params(random_state=sklearn_seed(seed))
    member_scores = (curves - basis_mean) @ basis.T if len(curves) > 1 else None  # (K, n, r)
    final = FinalStage.fit(model, data.xw[:, :n_x], (mean_curves - basis_mean) @ basis.T,
                           np.zeros(r), member_scores)
    return dataclasses.replace(stage, basis_mean=basis_mean, basis=basis), final


def assemble(settings: FitSettings, trained: Trained, data: FitData,
             propensity: Propensity | None, *, cross_fit: bool | None = None,
             alpha_scores=None, head_form_scores=None) -> FittedCFR:
    """The :class:`FittedCFR` of trained members on the fitted units ``data``: the average
    effects and the final stage, computed once (a continuous treatment: the dose stage;
    ``propensity`` is then its generalised propensity score)."""
    members, pre = trained.members, trained.preprocessing
    if data.dose is not None:
        cross_fit = settings.cross_fit if cross_fit is None else cross_fit
        stage, curves = dose_stage(settings, data, trained, propensity, cross_fit=cross_fit)
        projection = dose_final_stage(settings, data, stage, curves, members.seeds[0])
        final = None if projection is None else projection[1]
        stage = stage if projection is None else projection[0]
        return FittedCFR(trained.config, data.encoding, data.columns, pre, members,
                         np.zeros(0), final, None, settings.device, alpha_scores, None, stage)
    outputs = trained.outputs(data.xw, data.e)
    cross_fit = settings.cross_fit if cross_fit is None else cross_fit
    stage = debiased_stage(data, outputs, members, propensity, cross_fit=cross_fit,
                           min_propensity=settings.min_propensity)
    final = final_stage(settings, data, outputs, stage, members.seeds[0])
    blend = None if final else blend_stage(settings, data, members, stage, cross_fit=cross_fit)
    levels = None  # Robinson's heads: the propensity that places the outcomes at other units
    if data.e is not None:
        levels = linear_propensity(pre.x(data.xw), data.arms, data.encoding.n_arms)
    return FittedCFR(trained.config, data.encoding, data.columns, pre, members, stage.theta,
                     final, stage, settings.device, alpha_scores, blend, None, levels,
                     head_form_scores)


# ============================================================================== entry points
@contextlib.contextmanager
def _beside(fn, *args, device: torch.device | None = None):
    """Run ``fn(*args)`` in a second thread while the block runs (the propensity cross-fit
    beside the networks' training); yields the future (None when ``fn`` is None). Errors
    surface at ``future.result()``. The two overlap only while both release Python's lock:
    scikit-learn's boosting grows its trees largely in Python, so on wide tables they mostly
    take turns (1,500 units x 199 columns: the training took 1.22 s beside the boosted
    propensity, 0.71 s alone, the propensity 0.54 s alone; ``docs/parameters.md``, item 12).

    On the CPU the block trains with one torch thread (torch's own setting comes back
    afterwards): the default networks' matrices are too small to split between cores, and a
    second torch thread competing with the cross-fit for the other core slowed a default fit by
    a half (n = 4,000, 199 columns, 2 cores: 5.5 s against 3.8 s; ``docs/parameters.md``,
    "Threads")."""
    if fn is None:
        yield None
        return
    with ThreadPoolExecutor(max_workers=1) as pool, _torch_threads(1, device):
        yield pool.submit(fn, *args)


@contextlib.contextmanager
def _torch_threads(n: int, device: torch.device | None):
    """At most ``n`` torch intra-op threads for the block on the CPU (none changed elsewhere)."""
    before = torch.get_num_threads()
    if (device is not None and device.type != "cpu") or before <= n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def fit(est, Y, T, X, W=None, groups=None) -> FittedCFR:
    """What ``est.fit(Y, T, X=X, W=W)`` stores: ``n_ensemble`` networks trained together (the
    cross-fitting folds when ``est.cross_fit``; the best alpha's when ``est.alpha`` is a grid),
    the doubly robust stage and the final stage."""
    settings = FitSettings.of(est)
    data = prepare(settings, Y, T, X, W, groups)
    seeds = P.draw_seeds(settings.random_state, settings.n_ensemble)
    plans = P.ensemble(seeds, data.arms, cross_fit=settings.cross_fit, groups=data.groups)
    grid = settings.alpha_grid
    if grid is not None:
        if data.dose is not None:
            raise ValueError(f"alpha={est.alpha!r} (selection) is for a binary treatment; for a "
                             f"continuous treatment give a number")
        if data.encoding.n_arms != 2:
            raise ValueError(f"alpha={est.alpha!r} (selection) needs a binary treatment; T has "
                             f"{data.encoding.n_arms} arms: give a number")
        plans = P.candidates(plans, "alpha", grid)
    auto = auto_head_form(settings, data)
    if auto:
        _check_auto_head_form(settings)
        plans = head_form_plans(plans)
    need_propensity = settings.debias is not None or grid is not None
    on_failure = "drop" if grid is None else "flag"
    if robinson_heads(settings, data):  # the heads train with the propensities: first
        warn_robinson_alpha(settings, stacklevel=6)
        data, propensity = with_unit_propensity(settings, data, seeds[0])
        with _torch_threads(1, settings.device):
            trained = train_members(settings, plans, datasets=[data], on_failure=on_failure)
    else:
        with _beside(nuisance_of if need_propensity else None, settings, data, seeds[0],
                     device=settings.device) as future:
            trained = train_members(settings, plans, datasets=[data], on_failure=on_failure)
        propensity = future.result() if need_propensity else None
    scores = forms = None
    if grid is not None:
        trained, scores = select_alpha(settings, trained, data, propensity, len(seeds))
    if auto:
        (trained, forms), = choose_head_forms(trained, 1)
        data = _in_form(data, trained)
    fitted = assemble(settings, trained, data, propensity if settings.debias else None,
                      alpha_scores=scores, head_form_scores=forms)
    _warn_clipped([fitted], settings.min_propensity, stacklevel=5)
    return fitted


def _check_auto_head_form(settings: FitSettings) -> None:
    """``head_form="auto"`` trains both forms as candidates of one stack: with one ``alpha``, and
    the separate candidate's heads as the paper's (``effect_penalty`` is Robinson's alone)."""
    if settings.alpha_grid is not None:
        raise ValueError("head_form='auto' chooses the heads' form with one alpha; give alpha a "
                         "number, or choose the form yourself (head_form='separate' or "
                         "'robinson') with alpha='auto'")
    if float(settings.config_params.get("effect_penalty", 1.0)) != 1.0:
        raise ValueError("effect_penalty is for head_form='effect' or 'robinson'; with "
                         "head_form='auto' leave it at 1.0")


def _in_form(data: FitData, trained: Trained) -> FitData:
    """``data`` for the members chosen by ``head_form="auto"``: the units' propensities kept
    where they are in Robinson's form (they place its outcomes), dropped for separate heads."""
    return (data if trained.config.head_form in ("robinson", "auto")
            else dataclasses.replace(data, e=None))


def _warn_clipped(fits: list, min_propensity: float, stacklevel: int) -> None:
    """One UserWarning where the clipped share of a fit (of any of ``fits``, the datasets of a
    stacked fit) exceeds :data:`~dowhy_cfr.nuisance.CLIPPED_WARN_SHARE`."""
    shares = [f.debiased.clipped_share for f in fits if f.debiased is not None]
    over = [s for s in shares if clipped_warning(s, min_propensity)]
    if not over:
        return
    message = clipped_warning(max(over), min_propensity)
    if len(fits) > 1:
        message = f"{len(over)} of {len(fits)} datasets, the largest share: " + message
    warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)


def fit_stacked(est, Y, T, X, W=None, units=None, seeds=None):
    """One :class:`FittedCFR` per dataset ``(Y[k], T[k], X[k], W[k])`` (see ``CFR.fit_stacked``),
    all trained in one stacked pass; also returns ``(Y[0], T[0], X[0])`` for EconML's
    bookkeeping.

    ``seeds``: None draws ``n_ensemble`` seeds per dataset from ``est.random_state``; ``"fit"``
    gives every dataset the seeds ``est.fit`` draws (its ``n_ensemble`` members), so
    dataset k's fit is what ``est.fit`` on it alone gives; or K (x n_ensemble) explicit seeds.
    """
    settings = FitSettings.of(est)
    if settings.alpha_grid is not None:
        raise ValueError(f"alpha={est.alpha!r} (selection from a grid) is supported by CFR.fit "
                         f"only; give a number here, e.g. the alpha_ a fit selected")
    ys, ts, xs, ws = _stacked_inputs(Y, T, X, W)
    k, e = len(ys), settings.n_ensemble
    member_seeds = _stacked_seeds(settings, seeds, k, e)
    data = [prepare(settings, *a) for a in zip(ys, ts, xs, ws)]
    if len({d.encoding.continuous for d in data}) > 1:
        raise ValueError("the datasets' treatments are of different kinds (categorical in some, "
                         "continuous in others); pass treatment='continuous' or 'categorical'")
    if not data[0].encoding.continuous and any(
            list(d.encoding.categories) != list(data[0].encoding.categories) for d in data):
        raise ValueError("the datasets' treatments have different levels; fit_stacked needs the "
                         "same levels in every dataset (pass categories=[...] to the estimator)")
    data = _shared_covariates(data, xs, ws, units)
    rows = _check_units(units, k, len(data[0].y))
    if settings.cross_fit:
        plans = [p for j, d in enumerate(data) for p in P.ensemble(
            member_seeds[j * e:(j + 1) * e], d.arms, cross_fit=True, dataset=j,
            units=None if rows is None else rows[j])]
    else:
        plans = P.datasets(member_seeds, e, units=rows)
    propensities = _PropensityCache(settings)
    if any(robinson_heads(settings, d) for d in data):  # the heads train with them: first
        warn_robinson_alpha(settings, stacklevel=4)
        data = [with_unit_propensity(settings, d, member_seeds[j * e],
                                     propensities.get(d, member_seeds[j * e]))[0]
                for j, d in enumerate(data)]
    auto = auto_head_form(settings, data[0])
    if auto:
        _check_auto_head_form(settings)
        plans = head_form_plans(plans)
    trained = train_members(settings, plans, datasets=data)
    chosen = choose_head_forms(trained, k) if auto else None
    fits = []
    for j, d in enumerate(data):
        if auto:
            members, forms = chosen[j]
            d = _in_form(d, members)
        else:
            members, forms = trained.subset(list(range(j * e, (j + 1) * e))), None
        used = d if rows is None else d.subset(rows[j])
        if rows is not None:  # the members' units as positions among the dataset's units
            members = dataclasses.replace(members, members=members.members.on_units(rows[j]))
        prop = propensities.get(used, member_seeds[j * e]) if settings.debias else None
        fits.append(assemble(settings, members, used, prop, head_form_scores=forms))
    _warn_clipped(fits, settings.min_propensity, stacklevel=3)
    return fits, (ys[0], ts[0], xs[0])


class _PropensityCache:
    """Cross-fitted propensities shared by datasets with the same units, treatments and seed
    (e.g. the simulations of DoWhy's dummy-outcome refuter): cross-fitted once."""

    def __init__(self, settings: FitSettings):
        self.settings, self.entries = settings, []

    def get(self, data: FitData, seed: int) -> Propensity:
        treatment = data.arms if data.dose is None else data.dose
        for (xw, t, s), prop in self.entries:
            if s == seed and (xw is data.xw or np.array_equal(xw, data.xw)) \
                    and np.array_equal(t, treatment):
                return prop
        prop = nuisance_of(self.settings, data, seed)
        self.entries.append(((data.xw, treatment, seed), prop))
        return prop


def _shared_covariates(data: list, xs, ws, units) -> list:
    """Datasets given one shared X/W share one covariate array (the stack then shares it)."""
    if all(x is xs[0] for x in xs) and all(w is ws[0] for w in ws):
        return [dataclasses.replace(d, xw=data[0].xw) for d in data]
    shapes = {d.xw.shape for d in data}
    if len(shapes) != 1 or units is not None:
        raise ValueError(f"per-dataset X must all have one shape (got {sorted(shapes)}) and "
                         f"cannot be combined with units")
    return data


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


def _stacked_seeds(settings: FitSettings, seeds, k: int, e: int) -> list[int]:
    """The ``k * e`` member seeds of fit_stacked (dataset j: members ``j*e .. j*e+e-1``)."""
    if seeds is None:
        return P.draw_seeds(settings.random_state, k * e)
    if isinstance(seeds, str):
        if seeds != "fit":
            raise ValueError(f"seeds={seeds!r} is invalid: use None, 'fit' or K seeds")
        return P.draw_seeds(settings.random_state, e) * k
    arr = np.asarray(seeds, dtype=np.int64).reshape(k, -1)
    if arr.shape[1] != e:
        raise ValueError(f"seeds must hold K={k} x n_ensemble={e} seeds; got {np.size(seeds)}")
    return [int(s) for s in arr.ravel()]


def _bootstrap_rng(random_state) -> np.random.Generator:
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return np.random.default_rng([int(random_state), 0xB0075])  # not the estimator's stream
    return np.random.default_rng(check_random_state(random_state).randint(0, P.SEED_HIGH))


def bootstrap(est, Y, T, X, W, n_replicas: int, random_state, *, propensity) -> list[FittedCFR]:
    """``n_replicas`` fits of ``est``, each on a resample of the units drawn with replacement
    within each treatment arm -- all in one stacked pass (:func:`dowhy_cfr.plans.bootstrap`).

    With ``n_ensemble = E`` every replica is itself an ensemble of E networks (K = B * E); its
    members train on the replica's units (no cross-fitting). ``propensity``: the fit's own
    cross-fitted propensity (or None with ``debias=None``); each replica's doubly robust stage
    uses it for its units. The propensity is a nuisance of an orthogonal score, whose estimation
    error does not enter the ATE's first-order variance (Chernozhukov et al. 2018), so the
    replicas keep it fixed, as the multiplier bootstrap of double machine learning does: this
    leaves no copy of a unit on both sides of a cross-fitting split, and costs nothing.
    """
    settings = FitSettings.of(est)
    data = prepare(settings, Y, T, X, W)
    rng = _bootstrap_rng(random_state)
    if robinson_heads(settings, data):  # the fit's own propensities (else cross-fitted now)
        seed = 0 if propensity is not None else P.draw_seeds(rng, 1)[0]
        data, _ = with_unit_propensity(settings, data, seed, propensity)
    e = settings.n_ensemble
    val_fraction = settings.config_params.get("val_fraction", CFRConfig().val_fraction)
    plans = P.bootstrap(data.arms, n_replicas, e, rng, val_fraction)
    auto = auto_head_form(settings, data)
    trained = train_members(settings, head_form_plans(plans) if auto else plans,
                            datasets=[data])
    chosen = choose_head_forms(trained, n_replicas) if auto else None
    replicas = []
    for b in range(n_replicas):
        rows = np.concatenate(plans[b * e].split)
        prop = None if propensity is None else propensity.subset(rows)
        members = chosen[b][0] if auto else trained.subset(list(range(b * e, (b + 1) * e)))
        replicas.append(assemble(settings, members, _in_form(data, members).subset(rows), prop,
                                 cross_fit=False))
    return replicas
