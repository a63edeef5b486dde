"""The fitted state of a CFR/TARNet estimator, in small objects that every fit path builds.

A fitted :class:`~dowhy_cfr.CFR` holds one :class:`FittedCFR` (``est.fitted_``), made of

* :class:`TreatmentEncoding` -- the treatment categories (the first is the control) and the arm
  index of a treatment label;
* :class:`Columns` -- the covariate blocks ``X`` and ``W`` seen at fit (sizes, column names);
* :class:`Preprocessing` -- standardisation of the covariates and, per member, of the outcome,
  and the way back from the networks' outputs to the outcome scale;
* :class:`FittedMembers` -- the trained networks with each member's seed, kept step, history and
  training/validation units;
* :class:`FinalStage` -- the regression of the unit-level effects on ``X`` when ``W`` was given;
* :class:`DebiasedStage` -- the fitted units' outcomes, outcome predictions and cross-fitted
  propensities behind the doubly robust averages (:mod:`dowhy_cfr.debiased`), and the shift that
  makes the mean effect over the fitted units equal the AIPW ATE.

The one fit path (:mod:`dowhy_cfr.fitting`) builds these objects, each once, and assembles the
:class:`FittedCFR` at its end; :mod:`dowhy_cfr._io` saves and loads them, and the estimator only
holds them. Nothing here imports the estimator.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from econml.utilities import one_hot_encoder
from sklearn.base import clone

from . import _validation as V
from .core import CFRConfig, CFRNet, TrainResult, predict
from .core.training import derive_seeds
from .debiased import AverageEffect, average_effect, plugin_effect

__all__ = ["TreatmentEncoding", "Columns", "Preprocessing", "FittedMembers", "FinalStage",
           "DebiasedStage", "FittedCFR", "encode_treatment", "standardize", "history_frame",
           "plain", "member_outputs", "effects_of", "MAX_ARMS"]

#: More distinct treatment values than this are taken for a continuous treatment (an error).
MAX_ARMS = 20


def plain(v):
    """numpy scalar -> Python scalar, for readable messages and clean dicts."""
    return v.item() if isinstance(v, np.generic) else v


def _arms_of_onehot(onehot) -> np.ndarray:
    onehot = np.asarray(onehot)
    return (onehot @ np.arange(1, onehot.shape[1] + 1)).round().astype(np.int64)


def _nonzero(scale) -> np.ndarray:
    scale = np.asarray(scale, dtype=float)
    return np.where(scale > 0, scale, 1.0)


def standardize(a: np.ndarray) -> np.ndarray:
    """Columns of ``a`` to mean 0 and standard deviation 1 (constant columns: divided by 1)."""
    return (a - a.mean(0)) / _nonzero(a.std(0))


# ----------------------------------------------------------------------------- treatment
@dataclass
class TreatmentEncoding:
    """The treatment categories as EconML's one-hot encoder (first category dropped) holds them.

    Arm ``0`` is the first category (the control), arm ``a`` the ``a``-th other category.
    """

    transformer: Any

    @classmethod
    def of_categories(cls, categories) -> "TreatmentEncoding":
        """The encoding of the given categories, in that order (the first is the control)."""
        cats = list(categories)
        values = np.asarray(cats, dtype=object if any(isinstance(c, str) for c in cats) else None)
        transformer = one_hot_encoder(categories=[values], drop="first")
        transformer.fit(values.reshape(-1, 1))
        return cls(transformer)

    @property
    def categories(self) -> list:
        return list(self.transformer.categories_[0])

    @property
    def n_arms(self) -> int:
        return len(self.transformer.categories_[0])

    def check_labels(self, *Ts) -> None:
        """ValueError naming the values of ``Ts`` that are not fitted categories."""
        cats = self.categories
        for T in Ts:
            values = pd.unique(pd.Series(np.asarray(T, dtype=object).ravel()))
            unknown = [v for v in values if v not in cats]
            if unknown:
                raise ValueError(
                    f"treatment value(s) {[plain(u) for u in unknown]} are not among the fitted "
                    f"treatment categories {[plain(c) for c in cats]}; pass "
                    f"T0={plain(cats[0])!r}, T1={plain(cats[1])!r} (to effect, ate, ate_interval, "
                    f"average_effect or best_linear_projection)"
                )

    def arms(self, t) -> np.ndarray:
        """Arm index (0 = control) of each treatment label in ``t``."""
        try:
            onehot = self.transformer.transform(np.asarray(t).reshape(-1, 1))
        except ValueError as exc:
            raise ValueError(f"the treatment has levels the estimator did not see at fit: "
                             f"{exc}") from exc
        return _arms_of_onehot(onehot)


def encode_treatment(t_raw: np.ndarray, categories="auto") -> tuple[TreatmentEncoding, np.ndarray]:
    """Fit the encoding to the treatment labels ``t_raw`` (1-D); returns it and the arms."""
    uniq = pd.unique(pd.Series(t_raw, dtype=object)) if t_raw.dtype == object else np.unique(t_raw)
    if len(uniq) < 2:
        raise ValueError(f"T has a single value ({plain(uniq[0])!r}); CFR needs treated and control "
                         f"units")
    if len(uniq) > MAX_ARMS:
        raise ValueError(
            f"T has {len(uniq)} distinct values; CFR treats T as categorical (one outcome head "
            f"per arm). A continuous treatment is not supported: discretise it first."
        )
    auto = isinstance(categories, str) and categories == "auto"
    transformer = one_hot_encoder(categories="auto" if auto else [categories], drop="first")
    try:
        onehot = transformer.fit_transform(t_raw.reshape(-1, 1))
    except ValueError as exc:
        raise ValueError(f"T does not match categories={categories!r}: {exc}. categories lists "
                         f"every value of T once, control arm first; numeric levels must be "
                         f"given in increasing order (to make another level the control, "
                         f"relabel T, e.g. as strings)") from exc
    encoding = TreatmentEncoding(transformer)
    arms = _arms_of_onehot(onehot)
    present = np.bincount(arms, minlength=encoding.n_arms)
    if (present == 0).any():
        missing = [plain(c) for c, n in zip(encoding.categories, present) if n == 0]
        raise ValueError(f"treatment categories {missing} have no units in T")
    return encoding, arms


# ----------------------------------------------------------------------------- covariates
@dataclass
class Columns:
    """The covariate blocks seen at fit: ``n_x`` columns of X and ``n_w`` of W, and their names
    when they were DataFrames."""

    n_x: int
    n_w: int
    x_names: list | None = None
    w_names: list | None = None

    @property
    def n_features(self) -> int:
        return self.n_x + self.n_w

    def block(self, name: str, A, n_rows: int | None = None):
        """``A`` as a float array, checked against the block ``name`` ("X" or "W") of the fit."""
        n_expected = self.n_x if name == "X" else self.n_w
        names_expected = self.x_names if name == "X" else self.w_names
        if n_expected == 0:
            if A is not None:
                raise ValueError(f"{name} was not used at fit; pass {name}=None")
            return None
        if A is None:
            raise ValueError(f"{name} with {n_expected} column(s) is required (it was used at fit)")
        arr = V.as_2d_float(name, A)
        if arr.shape[1] != n_expected:
            raise ValueError(f"{name} has {arr.shape[1]} columns but the estimator was fitted "
                             f"with {n_expected}")
        got = V.column_names(A)
        if names_expected is not None and got is not None and got != names_expected:
            raise ValueError(f"{name}'s columns {got} differ from those seen at fit "
                             f"{names_expected} (names and order must match)")
        if n_rows is not None and arr.shape[0] != n_rows:
            raise ValueError(f"{name} has {arr.shape[0]} rows, X has {n_rows}; they must match")
        return arr

    def stack(self, X, W) -> np.ndarray:
        """The raw network input ``[X | W]`` of new units, checked against the fit."""
        x = self.block("X", X)
        w = self.block("W", W, None if x is None else x.shape[0])
        return np.hstack([a for a in (x, w) if a is not None])


# ----------------------------------------------------------------------------- preprocessing
@dataclass
class Preprocessing:
    """Standardisation of the covariates and of each member's outcome, and the way back.

    The networks see ``(x - x_mean) / x_scale`` and are trained on ``(y - y_mean[k]) /
    y_scale[k]`` (squared loss) or on the 0/1 outcome itself (log-loss: ``y_mean = 0``,
    ``y_scale = 1`` and outputs are logits).
    """

    loss: str
    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: np.ndarray  # (K,)
    y_scale: np.ndarray  # (K,)

    @classmethod
    def from_moments(cls, loss, x_mean, x_std, y_mean, y_std) -> "Preprocessing":
        """From covariate means/standard deviations and per-member outcome ones (arrays (K,))."""
        y_mean = np.atleast_1d(np.asarray(y_mean, dtype=float))
        if loss != "mse":
            y_mean, y_std = np.zeros_like(y_mean), np.ones_like(y_mean)
        return cls(loss, np.asarray(x_mean, dtype=float), _nonzero(x_std), y_mean,
                   _nonzero(np.atleast_1d(y_std)))

    @classmethod
    def fit(cls, loss: str, xw: np.ndarray, y: np.ndarray, rows: np.ndarray) -> "Preprocessing":
        """Covariate statistics over all rows of ``xw``; member k's outcome statistics over its
        units ``rows[k]`` of ``y[k]`` (shapes (K, n) and (K, m)).

        ``xw`` of shape (K, n, d) gives member k its own covariates ``xw[k]`` and statistics
        (``x_mean``/``x_scale`` of shape (K, d)), as k's own fit would standardise them."""
        y_used = np.take_along_axis(y, rows, axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            moments = xw.mean(-2), xw.std(-2), y_used.mean(1), y_used.std(1)
        for name, m in zip(("X/W", "X/W", "Y", "Y"), moments):
            if not np.all(np.isfinite(m)):
                raise ValueError(f"{name} values are too large to standardise (their mean or "
                                 f"standard deviation overflows float64); rescale {name}, e.g. "
                                 f"to other units")
        return cls.from_moments(loss, *moments)

    def x(self, xw: np.ndarray) -> np.ndarray:
        if self.x_mean.ndim == 2:  # per-member covariates (K, n, d) of a stacked training
            return (xw - self.x_mean[:, None]) / self.x_scale[:, None]
        return (xw - self.x_mean) / self.x_scale

    def x_tensor(self, xw: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(self.x(xw), dtype=torch.float32)

    def y(self, y: np.ndarray) -> np.ndarray:
        """Each member's training target: (K, n) from outcomes (K, n) or one shared (n,)."""
        return (y - self.y_mean[:, None]) / self.y_scale[:, None]

    def outputs(self, raw: np.ndarray) -> np.ndarray:
        """Network outputs (K, n_arms, n) on the outcome scale (probabilities for log-loss)."""
        if self.loss == "logloss":
            return 1.0 / (1.0 + np.exp(-raw))
        return raw * self.y_scale[:, None, None] + self.y_mean[:, None, None]

    def select(self, members: list) -> "Preprocessing":
        """The given members; with per-member covariate statistics they must share them."""
        x_mean, x_scale = self.x_mean, self.x_scale
        if x_mean.ndim == 2:
            first = members[0]
            if not all(np.array_equal(x_mean[j], x_mean[first])
                       and np.array_equal(x_scale[j], x_scale[first]) for j in members):
                raise ValueError("members trained on different covariates cannot form one fit")
            x_mean, x_scale = x_mean[first].copy(), x_scale[first].copy()
        return dataclasses.replace(self, x_mean=x_mean, x_scale=x_scale,
                                   y_mean=self.y_mean[members].copy(),
                                   y_scale=self.y_scale[members].copy())


# ----------------------------------------------------------------------------- members
_HISTORY_COLUMNS = ("train_loss", "train_imbalance", "val_loss", "val_imbalance", "val_objective")


def history_frame(hist: dict) -> pd.DataFrame:
    """The core's history arrays as one row per evaluation and member (a member's rows end when
    it stops)."""
    frames = []
    for m in range(hist["val_loss"].shape[1]):
        keep = ~np.isnan(hist["val_loss"][:, m])
        cols = {"step": hist["step"], "member": m}
        cols.update({c: hist[c][:, m] for c in _HISTORY_COLUMNS})
        cols["learning_rate"] = hist["learning_rate"]
        frames.append(pd.DataFrame(cols)[keep])
    return pd.concat(frames, ignore_index=True)


@dataclass
class FittedMembers:
    """The ``K`` trained networks (``net``) and, per member, what produced them."""

    net: CFRNet
    seeds: list
    best_iteration: np.ndarray  # (K,) step of the kept checkpoint
    history: pd.DataFrame
    n_iter: int  # steps run
    train_rows: np.ndarray | None = None  # (K, m) training units of each member (None: unknown)
    val_rows: np.ndarray | None = None  # (K, m') validation units
    result: TrainResult | None = None  # the core's full result (not saved)

    @classmethod
    def from_result(cls, result: TrainResult, seeds, train_rows=None, val_rows=None):
        return cls(result.net, [int(s) for s in seeds], result.best_step.copy(),
                   history_frame(result.history), int(result.n_steps), train_rows, val_rows,
                   result)

    @property
    def n_models(self) -> int:
        return self.net.n_models

    def select(self, members: list) -> "FittedMembers":
        """Only the given members, renumbered 0, 1, ..."""
        h = self.history[self.history["member"].isin(members)].copy()
        h["member"] = h["member"].map({j: i for i, j in enumerate(members)})
        rows = [None if r is None else r[members].copy() for r in (self.train_rows, self.val_rows)]
        return FittedMembers(self.net.select(members), [self.seeds[j] for j in members],
                             self.best_iteration[members].copy(), h.reset_index(drop=True),
                             self.n_iter, rows[0], rows[1], None)


# ----------------------------------------------------------------------------- final stage
@dataclass(frozen=True)
class FinalStage:
    """Regression of the unit-level effects ``tau`` (n, n_arms - 1) on ``x``, one model per arm,
    and the constant ``shift`` (n_arms - 1,) added to its predictions so that their mean over
    the fitted units is the doubly robust average effect (0 with ``debias=None``)."""

    x: np.ndarray
    tau: np.ndarray
    models: list
    shift: np.ndarray

    @classmethod
    def fit(cls, model, x: np.ndarray, tau: np.ndarray, theta=None) -> "FinalStage":
        """Fit one clone of ``model`` per arm; ``theta``: the average effects the predictions'
        mean over ``x`` is shifted to (None: no shift)."""
        models = [clone(model).fit(x, tau[:, j]) for j in range(tau.shape[1])]
        raw = np.column_stack([m.predict(x) for m in models])
        shift = np.zeros(tau.shape[1]) if theta is None else np.asarray(theta) - raw.mean(0)
        return cls(x, tau, models, shift)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The shifted effects of the rows of ``x``: (m, n_arms - 1)."""
        return np.column_stack([m.predict(x) for m in self.models]) + self.shift


# ----------------------------------------------------------------------------- debiased stage
@dataclass(frozen=True)
class DebiasedStage:
    """The fitted units and what the doubly robust averages over them need
    (:mod:`dowhy_cfr.debiased`).

    ``x`` is the X block of the fitted units (the record that tells whether an ``X`` passed to
    ``ate_interval`` is them), ``y`` and ``arms`` their outcomes and arms. ``mu`` are the outcome
    predictions the AIPW corrections use (out-of-fold when the members are cross-fitting folds),
    ``mu_plugin`` the ensemble's in-sample predictions (the plug-in); ``e`` the cross-fitted
    propensities (None: ``debias=None``). ``arm_shift`` (per arm) is added to the heads' potential
    outcomes: the AIPW estimate of ``E[Y(a)]`` minus the heads' mean over the fitted units, so that
    the mean effect over them is the AIPW ATE (zero with ``debias=None``). ``propensity_model``
    names the propensity model used (:func:`~dowhy_cfr.nuisance.cross_fit_propensity`).
    """

    x: np.ndarray  # (n, n_x)
    y: np.ndarray  # (n,)
    arms: np.ndarray  # (n,)
    mu: np.ndarray  # (n, n_arms)
    mu_plugin: np.ndarray  # (n, n_arms)
    e: np.ndarray | None  # (n, n_arms); None with debias=None
    arm_shift: np.ndarray  # (n_arms,)
    propensity_model: str | None = None  # None with debias=None

    @property
    def shift(self) -> np.ndarray:
        """The shift of each non-control arm's effect vs control: (n_arms - 1,)."""
        return self.arm_shift[1:] - self.arm_shift[0]

    @property
    def theta(self) -> np.ndarray:
        """The average effect of each non-control arm vs control over the fitted units (AIPW,
        or the plug-in with ``debias=None``): (n_arms - 1,)."""
        means = self.mu_plugin.mean(0) + self.arm_shift
        return means[1:] - means[0]

    def is_fitted_x(self, x: np.ndarray) -> bool:
        """Whether the X block ``x`` (checked, float) is the fitted units', row for row."""
        return x.shape == self.x.shape and bool(np.array_equal(x, self.x))

    def average(self, target: str, a1: int, a0: int, debiased: bool = True) -> AverageEffect:
        """The AIPW (``debiased``) or plug-in average effect of arm ``a1`` vs ``a0``."""
        if debiased:
            return average_effect(self.y, self.arms, self.mu, self.e, a1=a1, a0=a0,
                                  target=target, mu_plugin=self.mu_plugin)
        plugin, n_units = plugin_effect(self.arms, self.mu_plugin, a1=a1, a0=a0, target=target)
        return AverageEffect(str(target).lower(), plugin, float("nan"), plugin, n_units, "plugin")


# ----------------------------------------------------------------------------- the whole
@dataclass(frozen=True)
class FittedCFR:
    """Everything a fitted CFR/TARNet predicts with, assembled once at the end of a fit.

    ``tau_fit_mean`` is the average effect over the fitted units (what ``effect`` gives with
    ``X=None``), ``final`` the final stage (W given), ``debiased`` the fitted units' doubly robust
    stage (None for chunked fits), ``alpha_scores`` the candidates' scores of ``alpha="auto"``.
    """

    config: CFRConfig
    encoding: TreatmentEncoding
    columns: Columns
    preprocessing: Preprocessing
    members: FittedMembers
    tau_fit_mean: np.ndarray
    final: FinalStage | None = None
    debiased: DebiasedStage | None = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    alpha_scores: pd.DataFrame | None = None  # alpha="auto": the candidates' scores (not saved)

    def features(self, X, W=None) -> np.ndarray:
        """Standardised network input of new units."""
        return self.preprocessing.x(self.columns.stack(X, W))

    def outputs(self, xw_std: np.ndarray) -> np.ndarray:
        """Per-member, per-arm predictions on the outcome scale: (K, n_arms, n)."""
        return member_outputs(self.members.net, self.preprocessing, xw_std)

    def tau(self, xw_std: np.ndarray) -> np.ndarray:
        """Ensemble-mean effect of each non-control arm vs control: (n, n_arms - 1)."""
        return effects_of(self.outputs(xw_std).mean(0))

    def potential_outcomes(self, xw_std: np.ndarray) -> np.ndarray:
        """The reported potential outcomes (n_arms, n): ensemble mean plus the debiasing shift."""
        out = self.outputs(xw_std).mean(0)
        return out if self.debiased is None else out + self.debiased.arm_shift[:, None]

    def unit_effects(self, xw_std: np.ndarray) -> np.ndarray:
        """The reported unit-level effects ``tau(x, w)`` (heads, plus the debiasing shift)."""
        shift = 0.0 if self.debiased is None else self.debiased.shift
        return self.tau(xw_std) + shift

    def cate(self, X) -> np.ndarray:
        """The reported ``CATE(x)`` of the X block: the heads' effects, or ``model_final``'s when
        W was given, plus the debiasing shift; (m, n_arms - 1)."""
        if self.final is not None:
            return self.final.predict(self.columns.block("X", X))
        return self.unit_effects(self.features(X))

    def representation(self, xw_std: np.ndarray, member: int, *, at_init: bool = False):
        """``Phi`` of one member (m, rep_dim): trained, or the same network before training."""
        member = V.check_int("member", member, 0, self.members.n_models)
        net = self.members.net
        if at_init:
            init_seed = derive_seeds([self.members.seeds[member]])[0]
            net = CFRNet.from_config(self.config, xw_std.shape[1], init_seed,
                                     n_arms=self.encoding.n_arms)
            member = 0
        _, phi = predict(net, torch.as_tensor(xw_std, dtype=torch.float32), representation=True)
        return phi[member].double().cpu().numpy()


def member_outputs(net: CFRNet, preprocessing: Preprocessing, xw_std: np.ndarray) -> np.ndarray:
    """Per-member, per-arm predictions of a stack on the outcome scale: (K, n_arms, n)."""
    raw = predict(net, torch.as_tensor(xw_std, dtype=torch.float32))
    return preprocessing.outputs(raw.double().cpu().numpy())


def effects_of(outcomes: np.ndarray) -> np.ndarray:
    """Each non-control arm's effect vs control from potential outcomes (n_arms, n): (n, n_arms-1)."""
    return (outcomes[1:] - outcomes[0:1]).T
