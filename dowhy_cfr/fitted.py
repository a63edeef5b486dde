"""The fitted state of a CFR/TARNet estimator, in small objects that every fit path builds.

A fitted :class:`~dowhy_cfr.CFR` holds one :class:`FittedCFR` (``est.fitted_``), made of

* :class:`TreatmentEncoding` -- the treatment categories (the first is the control) and the arm
  index of a treatment label; for a continuous treatment :class:`DoseEncoding`, the dose range
  and the dose strata;
* :class:`Columns` -- the covariate blocks ``X`` and ``W`` seen at fit (sizes, column names);
* :class:`Preprocessing` -- standardisation of the covariates and, per member, of the outcome,
  and the way back from the networks' outputs to the outcome scale;
* :class:`FittedMembers` -- the trained networks with each member's seed, kept step, history and
  training/validation units;
* :class:`FinalStage` -- the regression of the unit-level effects on ``X`` when ``W`` was given;
* :class:`BlendStage` -- without ``W``: the regressions of the doubly robust pseudo-outcomes on
  ``X`` fitted on each member's training units, and their blend with the heads' effects;
* :class:`DebiasedStage` -- the fitted units' outcomes, outcome predictions and cross-fitted
  propensities behind the doubly robust averages (:mod:`dowhy_cfr.debiased`), and the shift that
  makes the mean effect over the fitted units equal the AIPW ATE;
* :class:`DoseStage` -- for a continuous treatment, the same for the doubly robust average
  dose-response (:mod:`dowhy_cfr.adrf`): out-of-fold outcome curves, the generalised propensity,
  the pseudo-outcomes and the bandwidth.

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

from . import _validation as V
from .adrf import ADRF, BANDWIDTH_GRID, adrf, local_linear, loocv_bandwidth, weighted_residuals
from .core import CFRConfig, CFRNet, DoseNet, TrainResult, dose_strata, predict
from .core.dose import predict_dose, predict_dose_grid
from .tabular import FeatureScaler, TableEncoder
from .core.training import derive_seeds
from .debiased import AverageEffect, average_effect, jackknife_stderr, plugin_effect
from .nuisance import HETEROGENEITY_LEVEL, HeterogeneityTest, LinearPropensity, fit_per_arm

__all__ = ["TreatmentEncoding", "Columns", "Preprocessing", "FittedMembers", "FinalStage",
           "BlendStage", "regressions_at",
           "DebiasedStage", "FittedCFR", "encode_treatment", "standardize", "history_frame",
           "plain", "member_outputs", "effects_of", "EncodedX", "MAX_ARMS", "MIN_DOSE_VALUES",
           "TREATMENT_KINDS", "DoseEncoding", "DoseStage", "member_dose_outputs", "dose_knots",
           "member_dose_knots", "seen_rows",
           "DOSE_KNOTS", "DOSE_RANK_OUTSIDE", "rank_scale"]

#: ``treatment="auto"``: a treatment with more distinct values than this is continuous (if
#: numeric), one with at most this many categorical (one head per level).
MAX_ARMS = 20
#: ``treatment="continuous"`` needs at least this many distinct doses: the default spline has
#: five coefficient sets, and a column with fewer values is a categorical treatment passed as
#: continuous by mistake.
MIN_DOSE_VALUES = 5
#: The knots of a dose's rank scale (:func:`dose_knots`): the doses at this many evenly spaced
#: ranks, the deciles (ours, measured: docs/parameters.md, item 34). Every training dose as a knot
#: (the empirical distribution function itself) made the scale exactly invariant to re-expressing
#: the dose, but its jagged steps are noise in the network's input: on the IHDP dose design (30
#: data sets, the doses ranked) the average curve's error was 0.029 with every dose a knot, 0.025
#: with 51 knots, 0.022 with 21, 0.017 with 11 (the population's own scale: 0.014), the band's
#: coverage 0.88, 0.89, 0.92, 0.94 (0.96); 6 knots lost on skewed re-expressions of the dose.
DOSE_KNOTS = 11
#: ``dose_scale="auto"`` takes the rank scale where the median dose lies outside this part of the
#: range, as a share of it (ours, measured: docs/parameters.md, item 33). The two dose designs'
#: medians lie at 0.43-0.68 of their ranges, where scaling by the range was the more accurate;
#: monotone re-expressions of their doses put them at 0.06-0.35 or 0.78-0.90, where the range's
#: scale lost up to 13 times the average curve's error and the rank scale none.
DOSE_RANK_OUTSIDE = (0.25, 0.75)
#: The values of the estimator's ``treatment`` parameter.
TREATMENT_KINDS = ("auto", "categorical", "continuous")


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
    continuous = False

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

    def check_labels(self, *Ts, n_rows: int | None = None) -> None:
        """ValueError naming the values of ``Ts`` that are not fitted categories, or a ``T0``
        / ``T1`` with neither one value nor ``n_rows`` (``_validation.check_treatment_rows``;
        a marginal effect's ``T`` only gives EconML its shape here)."""
        V.check_treatment_rows(Ts if len(Ts) == 2 else (), n_rows)
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


def encode_treatment(t_raw: np.ndarray, categories="auto", treatment: str = "auto",
                     n_strata: int = 4, *, dose_scale: str = "auto") -> tuple:
    """Fit the encoding to the treatment values ``t_raw`` (1-D); returns it and each unit's
    arm (categorical) or dose stratum (continuous: :class:`DoseEncoding`).

    ``treatment="auto"``: categorical up to :data:`MAX_ARMS` distinct values, continuous above
    (numeric values only); ``"categorical"`` / ``"continuous"`` force the kind."""
    if treatment not in TREATMENT_KINDS:
        raise ValueError(f"treatment={treatment!r} is invalid: use 'auto' (categorical up to "
                         f"{MAX_ARMS} distinct values, else continuous), 'categorical' or "
                         f"'continuous'")
    uniq = pd.unique(pd.Series(t_raw, dtype=object)) if t_raw.dtype == object else np.unique(t_raw)
    numeric = t_raw.dtype != object and (np.issubdtype(t_raw.dtype, np.number)
                                         or np.issubdtype(t_raw.dtype, np.bool_))
    if treatment == "continuous" or (treatment == "auto" and len(uniq) > MAX_ARMS and numeric):
        return DoseEncoding.fit(t_raw, len(uniq), categories, n_strata, dose_scale)
    if len(uniq) < 2:
        raise ValueError(f"T has a single value ({plain(uniq[0])!r}); CFR needs treated and control "
                         f"units")
    if len(uniq) > MAX_ARMS:
        hint = ("For a dose, price or other continuous treatment pass treatment='continuous' "
                "(or leave treatment='auto')." if numeric else
                "Non-numeric labels cannot be a continuous treatment: merge levels.")
        raise ValueError(
            f"T has {len(uniq)} distinct values; as a categorical treatment CFR has one outcome "
            f"head per level (at most {MAX_ARMS}). {hint}"
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


def dose_knots(dose: np.ndarray, max_knots: int | None = None) -> tuple[tuple, tuple]:
    """The knots of the doses' rank scale: the doses at up to ``max_knots`` (default
    :data:`DOSE_KNOTS`) evenly spaced ranks -- the smallest, the largest and order statistics
    between (all of them up to that many units) -- and the mean rank of each knot's units (a
    value shared by many units -- the zeros of a dose that is often 0 -- sits at the middle of
    its ranks), rescaled so that the smallest dose is at 0 and the largest at 1. Linear between
    the knots, the scale is the doses' distribution function at the knots, continuous and
    increasing, and the doses' own units between them. A monotone re-expression of the dose
    moves no knot's position (the knots are doses, their positions ranks); between knots it
    bends the scale only as much as it bends the dose within one tenth of the units."""
    s = np.sort(np.asarray(dose, dtype=float))
    picks = np.round(np.linspace(0, len(s) - 1, min(max_knots or DOSE_KNOTS, len(s))))
    t = np.unique(s[picks.astype(int)])
    u = (np.searchsorted(s, t, "left") + np.searchsorted(s, t, "right") - 1) / 2.0
    u = (u - u[0]) / max(u[-1] - u[0], 1e-300)
    return tuple(float(v) for v in t), tuple(float(v) for v in u)


def seen_rows(train_rows, val_rows, stopped_on_others=None) -> list:
    """The units each member saw, trained or early-stopped on: its training rows, and its
    validation rows unless it stopped by the others' objectives (a K-fold member's validation
    rows are its fold, which it never sees). One array per member."""
    others = ((False,) * len(train_rows) if stopped_on_others is None else stopped_on_others)
    return [train if other else np.concatenate([train, val])
            for train, val, other in zip(train_rows, val_rows, others)]


def member_dose_knots(encodings: list, seen_doses: list) -> tuple | None:
    """Each member's rank scale, from the doses of the units it saw (``seen_doses``, one array
    per member, with the encoding of its data in ``encodings``: a K-fold member's training
    units, not its fold; a member without cross-fitting also its own validation units):
    :func:`dose_knots` of those doses, the first and last knot moved to the fitted range's ends
    (every member maps the whole range onto [0, 1]); None for a member whose encoding uses the
    range, and None where all do. The members' scales differ by the units each left out, so
    their delete-a-group jackknife -- the band of the average curve -- carries the knots'
    sampling variance, which one scale shared by all members hides (docs/parameters.md,
    item 35)."""
    out = []
    for enc, dose in zip(encodings, seen_doses):
        if not enc.knots_t:
            out.append(None)
            continue
        t, u = dose_knots(dose)
        out.append(((enc.t_min,) + t[1:-1] + (enc.t_max,), u))
    return None if all(k is None for k in out) else tuple(out)


def rank_scale(dose: np.ndarray, dose_scale: str = "auto") -> bool:
    """Whether ``dose_scale`` (``CFRConfig.dose_scale``) puts the doses on the rank scale:
    ``"rank"`` always, ``"range"`` never, ``"auto"`` where the median dose lies outside the
    middle half of the range (:data:`DOSE_RANK_OUTSIDE`), i.e. where scaling by the range would
    crowd half of the units into a quarter of it or less (docs/parameters.md, item 33)."""
    if dose_scale != "auto":
        return dose_scale == "rank"
    span = float(dose.max() - dose.min())
    position = (float(np.median(dose)) - float(dose.min())) / span if span > 0 else 0.5
    return not DOSE_RANK_OUTSIDE[0] <= position <= DOSE_RANK_OUTSIDE[1]


@dataclass(frozen=True)
class DoseEncoding:
    """A continuous treatment (a dose): its range at fit, the scale by which doses are mapped
    to [0, 1] for the network and the dose stage -- the range, or the rank scale
    (:func:`dose_knots`) where ``dose_scale`` asks for it (:func:`rank_scale`) -- quantiles for
    default grids, and the number of equal-count dose strata.

    The rank scale makes the fit nearly invariant to a monotone re-expression of the dose (mg or
    log-mg, dollars or log-dollars): the heads' splines and the average curve's smoothing see
    which tenth of the training doses a dose lies in, and where within it in the given units,
    so a skewed dose spreads over the splines' pieces instead of crowding into the first
    (docs/parameters.md, items 33 and 34). ``knots_t`` is empty where the range is used (and in fits
    saved before the rank scale existed).

    The strata (:func:`~dowhy_cfr.core.dose.dose_strata`) take the place of arms where the fit
    stratifies: cross-fitting folds, validation splits, mini-batches, and the interval IPM;
    ``n_arms`` is their number. Doses outside ``[t_min, t_max]`` are refused
    (:meth:`check_labels`): the splines of the heads and the generalised propensity know
    nothing beyond the doses seen at fit."""

    t_min: float
    t_max: float
    quantiles: tuple  # the doses' 5 %, 50 % and 95 % quantiles at fit
    n_strata: int
    knots_t: tuple = ()  # the rank scale's knots (dose_knots); (): the range scale
    knots_u: tuple = ()
    continuous = True
    transformer = None

    @classmethod
    def fit(cls, t_raw: np.ndarray, n_unique: int, categories, n_strata: int,
            dose_scale: str = "auto"):
        """The encoding of the doses ``t_raw`` (checked) and their strata; ``dose_scale``:
        :func:`rank_scale`."""
        if not (isinstance(categories, str) and categories == "auto"):
            raise ValueError(f"categories={categories!r} applies to a categorical treatment; a "
                             f"continuous treatment takes categories='auto'")
        try:
            dose = np.asarray(t_raw, dtype=float)
        except (TypeError, ValueError):
            raise TypeError("treatment='continuous' needs a numeric T (a dose); T has "
                            "non-numeric values: pass treatment='categorical'") from None
        V.check_finite("T", dose)
        if n_unique < max(MIN_DOSE_VALUES, n_strata):
            raise ValueError(
                f"T has only {n_unique} distinct values {sorted(plain(v) for v in np.unique(dose))}"
                f"; a continuous treatment (dose-response curves) needs at least "
                f"{max(MIN_DOSE_VALUES, n_strata)}. For a treatment with a few levels pass "
                f"treatment='categorical' (or leave treatment='auto')")
        q = tuple(float(v) for v in np.quantile(dose, [0.05, 0.5, 0.95]))
        knots = dose_knots(dose) if rank_scale(dose, dose_scale) else ()
        enc = cls(float(dose.min()), float(dose.max()), q, int(n_strata), *knots)
        return enc, dose_strata(dose, n_strata)

    @property
    def n_arms(self) -> int:
        """The number of dose strata (the "arms" of the stratified batches and folds)."""
        return self.n_strata

    @property
    def categories(self) -> list:
        """The strata's labels (for messages)."""
        return [f"dose stratum {j + 1} of {self.n_strata}" for j in range(self.n_strata)]

    def scale(self, dose, knots: tuple | None = None) -> np.ndarray:
        """Doses on the encoding's scale in [0, 1]: the network's input (the rank scale where
        ``knots_t`` is set, else the range), or on the rank scale of a member's own ``knots``
        (``(knots_t, knots_u)``, :func:`member_dose_knots`) where given."""
        dose = np.asarray(dose, dtype=float)
        if knots is not None:
            return np.interp(dose, *knots)
        if not self.knots_t:
            return (dose - self.t_min) / max(self.t_max - self.t_min, 1e-300)
        return np.interp(dose, self.knots_t, self.knots_u)

    def unscale(self, u) -> np.ndarray:
        """The doses at positions ``u`` in [0, 1] of the scale (:meth:`scale`'s inverse)."""
        u = np.asarray(u, dtype=float)
        if not self.knots_t:
            return self.t_min + u * (self.t_max - self.t_min)
        return np.interp(u, self.knots_u, self.knots_t)

    def check_labels(self, *Ts, n_rows: int | None = None) -> None:
        """ValueError/TypeError naming doses of ``Ts`` that are not numbers within the fitted
        range (extrapolation is refused: docs/dose.md), or a wrong number of them (``n_rows``)."""
        V.check_treatment_rows(Ts, n_rows)
        for T in Ts:
            try:
                values = np.asarray(T, dtype=float).ravel()
            except (TypeError, ValueError):
                raise TypeError(f"doses must be numbers; got {T!r}") from None
            if not np.isfinite(values).all():
                raise ValueError("doses must be finite numbers; got NaN or infinity")
            tol = 1e-9 * max(1.0, abs(self.t_max - self.t_min))
            outside = values[(values < self.t_min - tol) | (values > self.t_max + tol)]
            if outside.size:
                raise ValueError(
                    f"dose(s) {sorted(set(plain(v) for v in outside))[:5]} are outside the range "
                    f"of the training doses [{self.t_min:.6g}, {self.t_max:.6g}]: the dose-"
                    f"response curves are not extrapolated. Use doses within the range -- "
                    f"preferably between the 5th and 95th percentiles "
                    f"[{self.quantiles[0]:.6g}, {self.quantiles[2]:.6g}], where the data are "
                    f"dense -- or clip them (np.clip(T, {self.t_min:.6g}, {self.t_max:.6g}))")

    def arms(self, t) -> np.ndarray:
        """The equal-count dose strata of the doses ``t`` among themselves."""
        return dose_strata(np.asarray(t, dtype=float), self.n_strata)

    def difference_points(self, t) -> tuple[np.ndarray, np.ndarray]:
        """The doses 1 % of the scale below and above ``t`` (within the range; one-sided at its
        ends) of the difference that ``marginal_effect`` takes."""
        u = self.scale(np.asarray(t, dtype=float))
        return self.unscale(np.clip(u - 0.01, 0.0, 1.0)), self.unscale(np.clip(u + 0.01, 0.0, 1.0))

    def stage_grid(self, n_points: int) -> np.ndarray:
        """``n_points`` doses evenly spaced on the scale from the smallest to the largest
        training dose: where the dose stage evaluates every unit's curve."""
        return self.unscale(np.linspace(0.0, 1.0, n_points))

    def default_grid(self, n_points: int = 50) -> np.ndarray:
        """``n_points`` doses from the 5th to the 95th percentile of the training doses, evenly
        spaced on the dose's scale (on the rank scale: denser where the doses are)."""
        ends = self.scale([self.quantiles[0], self.quantiles[2]])
        return self.unscale(np.linspace(ends[0], ends[1], n_points))


# ----------------------------------------------------------------------------- covariates
@dataclass
class Columns:
    """The covariate blocks seen at fit: ``n_x`` encoded columns of X and ``n_w`` of W, the
    input column names when they were DataFrames, and each block's
    :class:`~dowhy_cfr.tabular.TableEncoder` (categorical, string and bool columns one-hot
    encoded, missing values imputed with indicators; None: numbers taken as they are)."""

    n_x: int
    n_w: int
    x_names: list | None = None
    w_names: list | None = None
    x_encoder: TableEncoder | None = None
    w_encoder: TableEncoder | None = None

    @classmethod
    def fit(cls, X, W) -> tuple["Columns", np.ndarray | None, np.ndarray | None]:
        """The blocks of a fit's ``X`` and ``W`` (either may be None) and their encoded
        matrices."""
        encoders, blocks = [], []
        for name, A in (("X", X), ("W", W)):
            if A is None:
                encoders.append(None)
                blocks.append(None)
                continue
            enc = TableEncoder().fit(_as_table(name, A))
            encoders.append(enc)
            blocks.append(enc.transform(_as_table(name, A)))
        widths = [0 if b is None else b.shape[1] for b in blocks]
        return (cls(widths[0], widths[1], V.column_names(X), V.column_names(W), *encoders),
                *blocks)

    @property
    def n_features(self) -> int:
        """The number of input columns of X and W (before encoding)."""
        return sum(n if enc is None else enc.n_features_in_ for n, enc in
                   ((self.n_x, self.x_encoder), (self.n_w, self.w_encoder)))

    def block(self, name: str, A, n_rows: int | None = None):
        """``A`` encoded as at fit (a float array), checked against the block ``name`` ("X" or
        "W") of the fit."""
        encoder = self.x_encoder if name == "X" else self.w_encoder
        n_encoded = self.n_x if name == "X" else self.n_w
        names_expected = self.x_names if name == "X" else self.w_names
        if n_encoded == 0:
            if A is not None:
                raise ValueError(f"{name} was not used at fit; pass {name}=None")
            return None
        n_expected = n_encoded if encoder is None else encoder.n_features_in_
        if A is None:
            raise ValueError(f"{name} with {n_expected} column(s) is required (it was used at fit)")
        table = _as_table(name, A)
        if table.shape[1] != n_expected:
            raise ValueError(f"{name} has {table.shape[1]} columns but the estimator was fitted "
                             f"with {n_expected}")
        got = V.column_names(A)
        if names_expected is not None and got is not None and got != names_expected:
            raise ValueError(f"{name}'s columns {got} differ from those seen at fit "
                             f"{names_expected} (names and order must match)")
        arr = V.as_2d_float(name, table) if encoder is None else encoder.transform(table)
        if n_rows is not None and arr.shape[0] != n_rows:
            raise ValueError(f"{name} has {arr.shape[0]} rows, X has {n_rows}; they must match")
        return arr

    def stack(self, X, W) -> np.ndarray:
        """The encoded network input ``[X | W]`` of new units, checked against the fit."""
        x = self.block("X", X)
        w = self.block("W", W, None if x is None else x.shape[0])
        return np.hstack([a for a in (x, w) if a is not None])


class EncodedX:
    """The X block of new units already encoded (:meth:`Columns.block`), as the estimator hands
    it from EconML's treatment expansion to ``const_marginal_effect``."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.shape = array.shape


def _as_table(name: str, A):
    """``A`` as a DataFrame (a Series becomes one column; the caller's object, never written
    to) or a 2-D array (lists and 1-D arrays become columns)."""
    if isinstance(A, pd.Series):
        return A.to_frame()
    if isinstance(A, pd.DataFrame):
        if A.shape[0] == 0:
            raise ValueError(f"{name} is empty (0 rows); fit needs data")
        return A
    try:
        arr = np.asarray(A)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise TypeError(f"{name} could not be converted to an array: {exc}") from exc
    arr = V.as_columns(name, arr)
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (0 rows); fit needs data")
    return arr


# ----------------------------------------------------------------------------- preprocessing
@dataclass
class Preprocessing:
    """Scaling of the covariates and standardisation of each member's outcome, and the way back.

    The networks see ``scaler.transform(xw)`` (:class:`~dowhy_cfr.tabular.FeatureScaler`:
    ``"standard"``, ``"robust"`` or ``"quantile"``; one per member when members train on their
    own covariates) and are trained on ``(y - y_mean[k]) / y_scale[k]`` (squared loss) or on the
    0/1 outcome itself (log-loss: ``y_mean = 0``, ``y_scale = 1`` and outputs are logits).
    """

    loss: str
    scaler: FeatureScaler | list
    y_mean: np.ndarray  # (K,)
    y_scale: np.ndarray  # (K,)

    @property
    def x_mean(self) -> np.ndarray:
        """The covariates' centres (the means under ``"standard"`` scaling)."""
        return self.scaler.center_

    @property
    def x_scale(self) -> np.ndarray:
        """The covariates' scales (the standard deviations under ``"standard"`` scaling)."""
        return self.scaler.scale_

    @classmethod
    def from_moments(cls, loss, x_mean, x_std, y_mean, y_std) -> "Preprocessing":
        """Standard scaling from covariate means/standard deviations and per-member outcome ones
        (arrays (K,)), e.g. statistics computed over chunks or workers."""
        y_mean = np.atleast_1d(np.asarray(y_mean, dtype=float))
        if loss != "mse":
            y_mean, y_std = np.zeros_like(y_mean), np.ones_like(y_mean)
        scaler = FeatureScaler.standard_from_moments(np.asarray(x_mean, dtype=float),
                                                     np.asarray(x_std, dtype=float))
        return cls(loss, scaler, y_mean, _nonzero(np.atleast_1d(y_std)))

    @classmethod
    def fit(cls, loss: str, xw: np.ndarray, y: np.ndarray, rows: np.ndarray,
            scaling: str = "standard") -> "Preprocessing":
        """The covariate scaler fitted on all rows of ``xw``; member k's outcome statistics over
        its units ``rows[k]`` of ``y[k]`` (shapes (K, n) and (K, m)).

        ``xw`` of shape (K, n, d) gives member k its own covariates ``xw[k]`` and scaler, as
        k's own fit would scale them."""
        y_used = np.take_along_axis(y, rows, axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            moments = y_used.mean(1), y_used.std(1)
        if not all(np.all(np.isfinite(m)) for m in moments):
            raise ValueError("Y values are too large to standardise (their mean or standard "
                             "deviation overflows float64); rescale Y, e.g. to other units")
        try:
            scaler = ([FeatureScaler(scaling).fit(x) for x in xw] if xw.ndim == 3
                      else FeatureScaler(scaling).fit(xw))
        except ValueError as exc:
            if "too large" not in str(exc):
                raise
            raise ValueError("X/W values are too large to standardise (their mean or standard "
                             "deviation overflows float64); rescale X/W, e.g. to other "
                             "units") from None
        y_mean, y_std = moments
        if loss != "mse":
            y_mean, y_std = np.zeros_like(y_mean), np.ones_like(y_mean)
        return cls(loss, scaler, y_mean, _nonzero(y_std))

    def x(self, xw: np.ndarray) -> np.ndarray:
        """The network input of covariates ``xw``: (n, d), or (K, n, d) for per-member
        covariates (each with its member's scaler)."""
        if isinstance(self.scaler, list):
            return np.stack([sc.transform(x) for sc, x in zip(self.scaler, xw)])
        return self.scaler.transform(xw)

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

    def dose_outputs(self, raw: np.ndarray) -> np.ndarray:
        """Dose networks' outputs (K, ...) on the outcome scale (probabilities for log-loss)."""
        if self.loss == "logloss":
            return 1.0 / (1.0 + np.exp(-raw))
        shape = (-1,) + (1,) * (raw.ndim - 1)
        return raw * self.y_scale.reshape(shape) + self.y_mean.reshape(shape)

    def select(self, members: list) -> "Preprocessing":
        """The given members; with per-member scalers they must share one."""
        scaler = self.scaler
        if isinstance(scaler, list):
            first = scaler[members[0]]
            if not all(np.array_equal(scaler[j].center_, first.center_)
                       and np.array_equal(scaler[j].scale_, first.scale_) for j in members):
                raise ValueError("members trained on different covariates cannot form one fit")
            scaler = first
        return dataclasses.replace(self, scaler=scaler, y_mean=self.y_mean[members].copy(),
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
    # (K,) members that stopped by the others' validation objectives, not their own (K-fold)
    stopped_on_others: np.ndarray | None = None
    # a dose on the rank scale: each member's own knots ((knots_t, knots_u) per member,
    # member_dose_knots); None: the members share the encoding's scale
    dose_knots: tuple | None = None

    @classmethod
    def from_result(cls, result: TrainResult, seeds, train_rows=None, val_rows=None,
                    stopped_on_others=None):
        return cls(result.net, [int(s) for s in seeds], result.best_step.copy(),
                   history_frame(result.history), int(result.n_steps), train_rows, val_rows,
                   result, stopped_on_others)

    @property
    def n_models(self) -> int:
        return self.net.n_models

    def seen_mask(self, n_units: int) -> np.ndarray:
        """(K, n_units) bool: whether member j saw unit i, trained or early-stopped on it (needs
        ``train_rows`` and ``val_rows``; the validation units of a member that stopped by the
        others' objectives are not its own criterion). A unit member j did not see is out of
        fold for it: for K-fold bagged members, the j-th fold."""
        mask = np.zeros((self.n_models, n_units), dtype=bool)
        for j, rows in enumerate(seen_rows(self.train_rows, self.val_rows,
                                           self.stopped_on_others)):
            mask[j, rows] = True
        return mask

    def scoring_rows(self, member: int, n_units: int) -> np.ndarray:
        """The units to score ``member`` on: those it never saw (its fold, for K-fold bagged
        members), else its early-stopping units (a member that saw every unit)."""
        unseen = np.flatnonzero(~self.seen_mask(n_units)[member])
        return unseen if len(unseen) else self.val_rows[member]

    def on_units(self, units: np.ndarray) -> "FittedMembers":
        """The same members with their training/validation rows given as positions among
        ``units`` (rows of a larger table, all of which the members' rows are among)."""
        position = np.full(int(np.max(units)) + 1, -1)
        position[units] = np.arange(len(units))
        return dataclasses.replace(self, train_rows=position[self.train_rows],
                                   val_rows=position[self.val_rows])

    def kept_val_loss(self) -> np.ndarray:
        """(K,) each member's factual validation loss at its kept step (``best_iteration``;
        NaN where not recorded): for a K-fold member, on its fold, which neither trained it nor
        stopped it."""
        h = self.history
        at = h[h["step"].to_numpy() == np.asarray(self.best_iteration)[h["member"].to_numpy()]]
        loss = at.groupby("member")["val_loss"].first()
        return loss.reindex(range(self.n_models)).to_numpy(dtype=float, copy=True)

    def select(self, members: list, head_form: str | None = None) -> "FittedMembers":
        """Only the given members, renumbered 0, 1, ...; ``head_form``: the form they trained
        in, from a stack of both (:meth:`~dowhy_cfr.core.CFRNet.select`)."""
        h = self.history[self.history["member"].isin(members)].copy()
        h["member"] = h["member"].map({j: i for i, j in enumerate(members)})
        rows = [None if r is None else r[members].copy() for r in (self.train_rows, self.val_rows)]
        others = None if self.stopped_on_others is None else self.stopped_on_others[members]
        knots = None if self.dose_knots is None else tuple(self.dose_knots[j] for j in members)
        return FittedMembers(self.net.select(members, head_form),
                             [self.seeds[j] for j in members],
                             self.best_iteration[members].copy(), h.reset_index(drop=True),
                             self.n_iter, rows[0], rows[1], None, others, knots)

    def dose_scale(self, encoding: "DoseEncoding", doses) -> np.ndarray:
        """The doses ``doses`` (P,) on every member's scale, the network's input: (K, P) --
        each member's own rank scale where it has one (:func:`member_dose_knots`), else the
        encoding's (:meth:`DoseEncoding.scale`) for all."""
        doses = np.asarray(doses, dtype=float).reshape(-1)
        knots = (None,) * self.n_models if self.dose_knots is None else self.dose_knots
        return np.stack([encoding.scale(doses, k) for k in knots])


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
    member_tau: np.ndarray | None = None  # (K, n, n_arms - 1): each member's unit-level effects
    _member_models: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def fit(cls, model, x: np.ndarray, tau: np.ndarray, theta=None,
            member_tau=None) -> "FinalStage":
        """Fit one clone of ``model`` per arm; ``theta``: the average effects the predictions'
        mean over ``x`` is shifted to (None: no shift)."""
        models = fit_per_arm(model, x, tau)
        raw = np.column_stack([m.predict(x) for m in models])
        shift = np.zeros(tau.shape[1]) if theta is None else np.asarray(theta) - raw.mean(0)
        return cls(x, tau, models, shift, member_tau)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The shifted effects of the rows of ``x``: (m, n_arms - 1)."""
        return np.column_stack([m.predict(x) for m in self.models]) + self.shift

    def member_predictions(self, x: np.ndarray) -> np.ndarray | None:
        """``model_final`` refitted to each member's unit-level effects (fitted once, on first
        use), at the rows of ``x``: (K, m, n_arms - 1), unshifted; None without ``member_tau``.
        Their spread around their mean is the members' jackknife of the final stage."""
        if self.member_tau is None:
            return None
        if not self._member_models:
            for k, tau in enumerate(self.member_tau):
                self._member_models[k] = fit_per_arm(self.models[0], self.x, tau)
        return np.stack([np.column_stack([m.predict(x) for m in self._member_models[k]])
                         for k in range(len(self.member_tau))])


@dataclass(frozen=True)
class BlendStage:
    r"""The effect reported without ``W``: the heads' effects blended with a regression of the
    doubly robust pseudo-outcomes on ``X``,

    .. math:: \hat\tau(x) = a\,\bar h(x) + b\,\frac1K \sum_j g_j(x) + c,

    where :math:`\bar h = \bar h_1 - \bar h_0` is the members' mean effect, :math:`g_j` (one
    regressor per treated arm) was fitted to the pseudo-outcomes :math:`\psi_{ia} - \psi_{i0}`
    (:func:`~dowhy_cfr.nuisance.aipw_scores`: out-of-fold heads, cross-fitted propensities;
    Kennedy's DR-learner) on the units member ``j`` saw (trained or early-stopped on: every unit
    outside fold j), and :math:`c` (``shift``) makes the mean over the fitted units the doubly
    robust average effect. The weights ``(a, b)`` are
    :math:`(\lambda, 1 - \lambda)` by the R-loss of Nie & Wager (2021) of the out-of-fold
    effects, or (0, 0) where the calibration test of the mix's out-of-fold effects (``test``,
    :func:`~dowhy_cfr.nuisance.heterogeneity_test`) does not show that tau varies
    (:func:`~dowhy_cfr.nuisance.blend_weights`; ``docs/parameters.md``, item 9). The fit path
    builds it (:func:`dowhy_cfr.fitting.blend_stage`); this object only holds and applies it.

    For the members' jackknife of the pointwise intervals, member ``j``'s effect is its own
    blend :math:`a h_j + b g_j` (unshifted: only the spread counts). Where the constant effect
    is chosen, member ``j``'s effect is ``deleted[j]``, :math:`\hat\theta_{(-j)}`, the mean of
    the pseudo-outcomes over the units it saw (the average effect with fold j deleted), and
    the mix the constant beat, ``mix_weights`` (its :math:`(\lambda, 1 - \lambda)`) and
    ``mix_shift``, is kept (:meth:`mix_members`): the pointwise intervals then hold both
    candidates' (``docs/inference.md``).

    ``train`` (K, n) bool: the units member ``j`` saw (:meth:`FittedMembers.seen_mask`), on
    which regressor ``j`` is fitted; ``model`` the unfitted regressor (saved with the model: a
    loaded model refits the regressions, deterministically from the members' seeds); ``models``
    K lists of fitted regressors, one per treated arm.
    """

    train: np.ndarray
    model: Any
    models: list
    weights: np.ndarray  # (2,): (lam, 1 - lam), or (0, 0) for a constant effect
    shift: np.ndarray  # (n_arms - 1,)
    deleted: np.ndarray  # (K, n_arms - 1): the pseudo-outcomes' mean over member j's units
    mix_weights: np.ndarray  # (2,): (lam, 1 - lam) of the mix, also where a constant was chosen
    mix_shift: np.ndarray  # (n_arms - 1,): the mix's shift to the doubly robust average effect
    test: HeterogeneityTest  # the calibration test of the mix's out-of-fold effects

    @property
    def constant(self) -> bool:
        """Whether a constant effect was chosen (weights (0, 0))."""
        return not np.any(self.weights)

    @property
    def lam(self) -> float:
        """The heads' weight lam of the mix chosen by the R-loss (where a constant effect is
        reported: of the mix that the constant beat)."""
        return float(self.mix_weights[0])

    def mix_members(self, x: np.ndarray, member_heads: np.ndarray) -> np.ndarray:
        """Each member's mix ``lam * h_j + (1 - lam) * g_j`` (K, m, n_arms - 1) at the X block
        ``x``, unshifted, whether or not a constant effect was chosen."""
        return self.mix_weights[0] * member_heads + self.mix_weights[1] * self.regressions(x)

    def regressions(self, x: np.ndarray) -> np.ndarray:
        """Each member's regression at the rows of ``x``: (K, m, n_arms - 1)."""
        return regressions_at(self.models, x)

    def mix(self, heads: np.ndarray, regs: np.ndarray) -> np.ndarray:
        """``a * heads + b * regs`` (unshifted)."""
        return self.weights[0] * heads + self.weights[1] * regs

    def predict(self, x: np.ndarray, heads: np.ndarray) -> np.ndarray:
        """The reported effects (m, n_arms - 1) at the X block ``x`` given the members' mean
        effect ``heads`` there."""
        return self.mix(heads, self.regressions(x).mean(0)) + self.shift

    def member_predictions(self, x: np.ndarray, member_heads: np.ndarray) -> np.ndarray:
        r"""Each member's effects (K, m, n_arms - 1) at the X block ``x`` from its heads'
        effects there, ``member_heads`` (K, m, n_arms - 1): its blend, unshifted, or where the
        constant is chosen its :math:`\hat\theta_{(-j)}` at every row. Their spread is the
        members' jackknife."""
        if self.constant:
            return np.repeat(self.deleted[:, None, :], len(x), axis=1)
        return self.mix(member_heads, self.regressions(x))


def regressions_at(models: list, x: np.ndarray) -> np.ndarray:
    """K lists of per-arm regressors evaluated at the rows of ``x``: (K, m, n_arms - 1)."""
    return np.stack([np.column_stack([m.predict(x) for m in arms]) for arms in models])


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
    names the propensity model used (:func:`~dowhy_cfr.nuisance.cross_fit_propensity`);
    ``clipped`` (n,) bool marks the units whose propensity of some arm was clipped at
    ``min_propensity`` (None: not recorded; ``clipped_share`` their share).
    """

    x: np.ndarray  # (n, n_x)
    y: np.ndarray  # (n,)
    arms: np.ndarray  # (n,)
    mu: np.ndarray  # (n, n_arms)
    mu_plugin: np.ndarray  # (n, n_arms)
    e: np.ndarray | None  # (n, n_arms); None with debias=None
    arm_shift: np.ndarray  # (n_arms,)
    propensity_model: str | None = None  # None with debias=None
    clipped: np.ndarray | None = None  # (n,) bool; None with debias=None
    min_propensity: float | None = None  # the clip; None with debias=None

    @property
    def clipped_share(self) -> float | None:
        """The share of the fitted units whose propensity of some arm was clipped at
        ``min_propensity`` (None with ``debias=None`` or where not recorded)."""
        return None if self.clipped is None else float(np.mean(self.clipped))

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


# ----------------------------------------------------------------------------- dose stage
@dataclass(frozen=True)
class DoseStage:
    r"""A continuous treatment's fitted units and what the doubly robust average dose-response
    over them needs (:mod:`dowhy_cfr.adrf`).

    ``x``, ``y``, ``dose``: the fitted units' X block, outcomes and doses. ``grid`` (G,) spans
    the dose range; ``curves`` (n, G) are the units' outcome curves
    :math:`\hat\mu(x_i, t)` on it and ``mu`` (n,) their predictions at their own doses, both
    out of fold when the members are cross-fitting folds (else the ensemble's);
    ``plugin_curve`` (G,) is the ensemble's mean curve over the fitted units (the plug-in
    average). With the doubly robust stage (``debias="aipw"``): the stabilised GPS
    ``weights``, the weighted residuals ``rho`` the average curve's correction smooths, the
    bandwidth ``h`` (leave-one-out cross-validated, times ``undersmooth``) and the
    generalised propensity's model name; None without it (``debias=None``). ``knots_t``,
    ``knots_u``: the dose encoding's rank scale (:func:`dose_knots`), on which the curves are
    interpolated and the average curve's correction smoothed (None: the range scale, on which
    that is the doses' own units)."""

    x: np.ndarray
    y: np.ndarray
    dose: np.ndarray
    grid: np.ndarray
    curves: np.ndarray
    mu: np.ndarray
    plugin_curve: np.ndarray
    member_curves: np.ndarray | None = None
    rho: np.ndarray | None = None
    weights: np.ndarray | None = None
    h: float | None = None
    gps_model: str | None = None
    knots_t: np.ndarray | None = None
    knots_u: np.ndarray | None = None

    @classmethod
    def of(cls, x, y, dose, grid, curves, mu, plugin_curve, member_curves=None, gps=None, *,
           max_weight: float, undersmooth: float, knots=(None, None)) -> "DoseStage":
        """The stage of the fitted units; with ``gps`` (:class:`~dowhy_cfr.nuisance.GPS`) the
        weighted residuals and the bandwidth. ``member_curves`` (K, G): the K-fold members'
        mean curves over the fitted units (None: the members are not K-fold bagged);
        ``knots``: the rank scale's ``(knots_t, knots_u)``."""
        knots = tuple(None if k is None else np.asarray(k, dtype=float) for k in knots)
        stage = cls(x, y, dose, grid, curves, mu, plugin_curve, member_curves, knots_t=knots[0],
                    knots_u=knots[1])
        if gps is None:
            return stage
        weights = gps.weights(dose, max_weight)
        rho = weighted_residuals(y, mu, weights)
        u_grid = stage.u(grid)
        span = max(float(u_grid[-1] - u_grid[0]), 1e-300)
        h, _ = loocv_bandwidth(stage.u(dose), rho, [span * b for b in BANDWIDTH_GRID])
        return dataclasses.replace(stage, rho=rho, weights=weights, h=h * undersmooth,
                                   gps_model=gps.model)

    def u(self, doses) -> np.ndarray:
        """Doses on the scale the curves are interpolated and smoothed on: the rank scale, or
        the doses themselves on the range scale (linear in them)."""
        doses = np.asarray(doses, dtype=float)
        if self.knots_t is None:
            return doses
        return np.interp(doses, self.knots_t, self.knots_u)

    @property
    def debiased(self) -> bool:
        return self.rho is not None

    def plugin(self, points) -> np.ndarray:
        """The plug-in average curve (the ensemble's mean over the fitted units) at ``points``."""
        return np.interp(self.u(points), self.u(self.grid), self.plugin_curve)

    def adrf(self, points) -> ADRF:
        """The doubly robust average dose-response at ``points`` (:func:`dowhy_cfr.adrf.adrf`)
        with its standard errors: the influence function's and the members' jackknife of the
        network's average curve, added in quadrature (:meth:`member_stderr`; the module
        docstring of :mod:`dowhy_cfr.adrf` says why). Needs ``debias="aipw"``."""
        if not self.debiased:
            raise ValueError("the estimator was fitted with debias=None: it has the plug-in "
                             "average curve only (no doubly robust one, no band); refit with "
                             "debias='aipw'")
        res = adrf(self.u(points), self.u(self.dose), self.rho, self.h, self.u(self.grid),
                   self.curves)
        members = self.member_stderr(points)
        return res._replace(points=np.atleast_1d(np.asarray(points, dtype=float)),
                            stderr=np.sqrt(res.stderr ** 2 + members ** 2),
                            df=self.satterthwaite(res.stderr, members))

    def satterthwaite(self, influence_se, member_se):
        r"""Welch-Satterthwaite degrees of freedom of :math:`\sqrt{se_{IF}^2 + se_{jk}^2}`: the
        influence function's part with infinitely many, the members' jackknife with K - 1 (as
        the members' own intervals), :math:`\nu = (K - 1)(1 + se_{IF}^2 / se_{jk}^2)^2`;
        infinite without K-fold members. On 40 VCNet data sets the band's coverage of the
        true curve was 0.907 with normal quantiles, 0.936 with these (docs/dose.md has the
        current figures)."""
        influence_se, member_se = np.asarray(influence_se, float), np.asarray(member_se, float)
        if self.member_curves is None:
            return np.full(member_se.shape, np.inf)
        k = len(self.member_curves)
        with np.errstate(divide="ignore", invalid="ignore"):
            df = (k - 1) * (1 + influence_se ** 2 / member_se ** 2) ** 2
        return np.where(member_se > 0, df, np.inf)

    def member_points(self, points) -> np.ndarray | None:
        """The K-fold members' mean curves over the fitted units at ``points``: (K, P)."""
        if self.member_curves is None:
            return None
        u, u_grid = self.u(points), self.u(self.grid)
        return np.stack([np.interp(u, u_grid, c) for c in self.member_curves])

    def member_stderr(self, points, contrast: bool = False) -> np.ndarray:
        """The members' delete-a-group jackknife standard error of the network's average curve
        at ``points`` (with ``contrast``, of the difference between the first and the second
        point); zeros when the members are not K-fold bagged."""
        values = self.member_points(points)
        if values is None:
            return np.zeros(1 if contrast else np.size(points))
        if contrast:
            values = values[:, :1] - values[:, 1:2]
        return jackknife_stderr(values)

    def shift(self, points) -> np.ndarray:
        """The doubly robust correction of the average curve at ``points``: the DR estimate
        minus the plug-in (0 with ``debias=None``); added to every unit's curve, it makes their
        mean over the fitted units the DR curve."""
        points = np.asarray(points, dtype=float)
        if not self.debiased:
            return np.zeros(points.shape)
        uniq, inverse = np.unique(points.ravel(), return_inverse=True)
        theta = (np.interp(self.u(uniq), self.u(self.grid), self.curves.mean(0))
                 + local_linear(self.u(uniq), self.u(self.dose), self.rho, self.h)[0])
        return (theta - self.plugin(uniq))[inverse].reshape(points.shape)

    def contrast(self, t1: float, t0: float) -> AverageEffect:
        r"""The doubly robust :math:`\hat	heta(t_1) - \hat	heta(t_0)` over the fitted units,
        with the standard error of the difference of the two local linear estimates (their
        influence terms subtracted unit by unit); the plug-in difference as ``plugin``."""
        res = self.adrf([t1, t0])
        diff = res.phi[:, 0] - res.phi[:, 1]
        influence = np.sqrt(np.sum(diff ** 2)) / len(diff)
        members = self.member_stderr([t1, t0], contrast=True)[0]
        plugin = self.plugin([t1, t0])
        return AverageEffect("ate", float(res.estimate[0] - res.estimate[1]),
                             float(np.hypot(influence, members)), float(plugin[0] - plugin[1]),
                             len(diff), df=float(self.satterthwaite(influence, members)))

    def is_fitted_x(self, x: np.ndarray) -> bool:
        """Whether the X block ``x`` is the fitted units', row for row."""
        return x.shape == self.x.shape and bool(np.array_equal(x, self.x))


# ----------------------------------------------------------------------------- the whole
@dataclass(frozen=True)
class FittedCFR:
    """Everything a fitted CFR/TARNet predicts with, assembled once at the end of a fit.

    ``tau_fit_mean`` is the average effect over the fitted units (what ``effect`` gives with
    ``X=None``), ``final`` the final stage (W given), ``debiased`` the fitted units' doubly robust
    stage (None for chunked fits), ``alpha_scores`` the candidates' scores of ``alpha="auto"``
    (``head_form_scores`` those of ``head_form="auto"``),
    ``levels`` (``head_form="robinson"``) the propensity that places the heads' outcomes at the
    units they are asked about (:class:`~dowhy_cfr.nuisance.LinearPropensity`; the effects do
    not depend on it; the fitted units' own doubly robust stage used their cross-fitted ones).
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
    blend: BlendStage | None = None  # without W: the heads blended with the DR regression
    dose: DoseStage | None = None  # a continuous treatment: the dose-response stage
    levels: LinearPropensity | None = None  # head_form="robinson": e(x) of the outcomes' level
    # head_form="auto": the candidate forms' fold losses and the one chosen (not saved)
    head_form_scores: pd.DataFrame | None = None

    @property
    def continuous(self) -> bool:
        """Whether the treatment is continuous (a dose; :class:`DoseEncoding`)."""
        return self.encoding.continuous

    @property
    def propensity_model(self) -> str | None:
        """The name of the (generalised) propensity model used (None without one)."""
        if self.dose is not None:
            return self.dose.gps_model
        return None if self.debiased is None else self.debiased.propensity_model

    def dose_curves(self, X, doses, *, grid: bool = False, members: bool = False) -> np.ndarray:
        """Outcomes of the X block ``X`` (m rows) at one dose per row (``doses`` (m,) -> (m,)),
        or with ``grid=True`` at every dose of ``doses`` (P,) for every row (-> (m, P)): the
        ensemble mean plus the doubly robust shift of the average curve
        (:meth:`DoseStage.shift`). ``members=True``: each member's, unshifted (K, ...)."""
        x = X.array if isinstance(X, EncodedX) else self.columns.block("X", X)
        doses = np.asarray(doses, dtype=float)
        scaled = self.members.dose_scale(self.encoding, doses)  # (K, m) or (K, P)
        out = member_dose_outputs(self.members.net, self.preprocessing, self.preprocessing.x(x),
                                  scaled, grid=grid)
        return out if members else out.mean(0) + self.dose.shift(doses)

    def features(self, X, W=None) -> np.ndarray:
        """Standardised network input of new units."""
        return self.preprocessing.x(self.columns.stack(X, W))

    def outputs(self, xw_std: np.ndarray) -> np.ndarray:
        """Per-member, per-arm predictions on the outcome scale: (K, n_arms, n)."""
        e = None if self.levels is None else self.levels.predict(xw_std)
        return member_outputs(self.members.net, self.preprocessing, xw_std, e)

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
        """The reported ``CATE(x)`` of the X block: the heads' effects blended with the doubly
        robust regression (:class:`BlendStage`, without W), or ``model_final``'s when W was
        given, plus the debiasing shift; (m, n_arms - 1)."""
        x = X.array if isinstance(X, EncodedX) else self.columns.block("X", X)
        if self.final is not None:
            return self.final.predict(x)
        if self.blend is not None:
            return self.blend.predict(x, self.tau(self.preprocessing.x(x)))
        return self.unit_effects(self.preprocessing.x(x))

    @property
    def folds_as_members(self) -> bool:
        """Whether the members are K-fold bagged (``cross_fit``, K >= 2): member j left out the
        j-th fold, which makes their spread a delete-a-group jackknife."""
        return self.members.n_models >= 2 and self.config.cross_fit in (True, "auto")

    def member_potential_outcomes(self, X) -> np.ndarray | None:
        """Each member's potential outcomes at the X block, (K, n_arms, m), for the members'
        jackknife. Without W at fit the heads' plus the debiasing shift, or, with the blend
        stage, each member's blend (:meth:`BlendStage.member_predictions`); with W,
        ``model_final`` refitted to each member's unit-level effects; these two relative to the
        control arm (whose entry is 0), unshifted. None with W where the fit kept no members'
        effects (one member, or a model saved before they were kept)."""
        x = X.array if isinstance(X, EncodedX) else self.columns.block("X", X)
        if self.final is not None:
            effects = self.final.member_predictions(x)  # (K, m, n_arms - 1)
            if effects is None:
                return None
        else:
            out = self.outputs(self.preprocessing.x(x))
            if self.blend is None:
                shift = 0.0 if self.debiased is None else self.debiased.arm_shift[None, :, None]
                return out + shift
            effects = self.blend.member_predictions(x, np.stack([effects_of(o) for o in out]))
        return _with_control(effects)

    def rejected_mix(self, X) -> tuple[np.ndarray, np.ndarray] | None:
        """Where the blend reported a constant effect: the mix it beat at the X block, as its
        effects (n_arms, m) with the mix's shift and each member's (K, n_arms, m), unshifted,
        both relative to the control arm (whose entry is 0); None otherwise."""
        if self.effect_model != "constant" or self.blend is None:
            return None
        x = X.array if isinstance(X, EncodedX) else self.columns.block("X", X)
        out = self.outputs(self.preprocessing.x(x))
        members = _with_control(self.blend.mix_members(
            x, np.stack([effects_of(o) for o in out])))
        return members.mean(0) + np.r_[0.0, self.blend.mix_shift][:, None], members

    @property
    def effect_model(self) -> str:
        """What ``effect(X)`` reports: ``"heads"`` (the heads' effects), ``"blend"`` (blended
        with the doubly robust regression), ``"constant"`` (the average effect at every x:
        chosen by the blend, or X=None at fit) or ``"model_final"`` (W at fit)."""
        if self.final is not None:
            return "model_final"
        if self.columns.n_x == 0 or (self.blend is not None and self.blend.constant):
            return "constant"
        return "heads" if self.blend is None else "blend"

    def effect_description(self) -> str:
        """One paragraph saying what ``effect(X)`` is for this fit (``summary()``, DoWhy's
        estimate), and the heads' form where it is not the paper's."""
        return " ".join(filter(None, [self._effect_sentence(), self.heads_description()]))

    def heads_description(self) -> str:
        """The heads' form where not the paper's, and the choice of ``head_form="auto"``."""
        form = self.config.head_form
        scores = self.head_form_scores
        chosen = "" if scores is None else (
            " chosen by head_form='auto' (the members' factual loss on their folds: " +
            ", ".join(f"{r.head_form} {r.fold_loss:.4g}" for r in scores.itertuples()) + ")")
        if form == "robinson":
            return (f"Heads: Robinson's form, mu_t(x) = m(x) + (t - e(x)) d(x), so h1 - h0 = d"
                    f"{chosen}.")
        if form == "effect":
            return "Heads: a mean and an effect head, mu_t(x) = m(x) + (t - 1/2) d(x)."
        return f"Heads: separate (the paper's){chosen}." if chosen else ""

    def _effect_sentence(self) -> str:
        shifted = ("" if self.debiased is None or self.debiased.e is None else
                   " + c, c making their mean over the fitted units the doubly robust ATE")
        heads = "h1(Phi(x)) - h0(Phi(x))"
        model = self.effect_model
        if model == "model_final":
            return (f"Effect model: model_final. effect(x) = model_final's regression of the "
                    f"heads' unit-level effects on X{shifted}.")
        if model == "heads":
            return f"Effect model: heads. effect(x) = {heads}, the members' mean{shifted}."
        if self.blend is None:
            return "Effect model: constant. effect() is the average effect (X=None at fit)."
        lam, test = self.blend.lam, self.blend.test
        mix = f"{lam:.2f} * [{heads}] + {1 - lam:.2f} * g(x)"
        g = ("g: a boosted regression of the doubly robust pseudo-outcomes on X (a DR-learner), "
             "lam chosen by the out-of-fold R-loss")
        calibration = (f"the calibration slope of the blend's out-of-fold effects is "
                       f"{test.kappa:.2f} (z = {test.z:.2f}, one-sided p = {test.pvalue:.3g})")
        if model == "blend":
            return (f"Effect model: blend, lam = {lam:.2f}. effect(x) = {mix}{shifted}; {g}; "
                    f"{calibration}: tau varies.")
        return (f"Effect model: constant. effect(x) is the doubly robust ATE at every x: "
                f"{calibration}, which does not show at the {HETEROGENEITY_LEVEL:g} level that "
                f"tau varies along the blend {mix} ({g}). The heads' own effects: "
                f"individual_effect(X) or final_blend=False; heterogeneity: "
                f"best_linear_projection(X).")

    def representation(self, xw_std: np.ndarray, member: int, *, at_init: bool = False):
        """``Phi`` of one member (m, rep_dim): trained, or the same network before training."""
        member = V.check_int("member", member, 0, self.members.n_models)
        net = self.members.net
        if at_init:
            init_seed = derive_seeds([self.members.seeds[member]])[0]
            net = type(net).from_config(self.config, xw_std.shape[1], init_seed,
                                        n_arms=self.encoding.n_arms)
            member = 0
        x = torch.as_tensor(xw_std, dtype=torch.float32)
        if isinstance(net, DoseNet):  # its forward needs doses; Phi does not
            with torch.no_grad():
                phi = net.representation(x.unsqueeze(0).expand(net.n_models, -1, -1))
        else:
            _, phi = predict(net, x, representation=True)
        return phi[member].double().cpu().numpy()


def _with_control(effects: np.ndarray) -> np.ndarray:
    """Members' effects (K, m, n_arms - 1) as outcomes relative to the control arm (K, n_arms, m),
    the control's entry 0."""
    zeros = np.zeros((effects.shape[0], 1, effects.shape[1]))
    return np.concatenate([zeros, np.moveaxis(effects, 2, 1)], axis=1)


def member_outputs(net: CFRNet, preprocessing: Preprocessing, xw_std: np.ndarray,
                   e: np.ndarray | None = None) -> np.ndarray:
    """Per-member, per-arm predictions of a stack on the outcome scale: (K, n_arms, n); ``e``
    (n, n_arms): the rows' propensities, which place the outcomes of ``head_form="robinson"``
    (:func:`~dowhy_cfr.core.network.predict`)."""
    raw = predict(net, torch.as_tensor(xw_std, dtype=torch.float32),
                  e=None if e is None else torch.as_tensor(e, dtype=torch.float32))
    return preprocessing.outputs(raw.double().cpu().numpy())


def member_dose_outputs(net: DoseNet, preprocessing: Preprocessing, xw_std: np.ndarray,
                        scaled, *, grid: bool = False) -> np.ndarray:
    """Every member's outcome on the outcome scale at the scaled doses ``scaled`` (K, P), each
    member's on its own scale (:meth:`FittedMembers.dose_scale`): one dose per row (P = m ->
    (K, m)) or, with ``grid=True``, every dose for every row (-> (K, m, P))."""
    x = torch.as_tensor(xw_std, dtype=torch.float32)
    scaled = torch.as_tensor(np.asarray(scaled, dtype=float))
    raw = predict_dose_grid(net, x, scaled) if grid else predict_dose(net, x, scaled)
    return preprocessing.dose_outputs(raw.double().cpu().numpy())


def effects_of(outcomes: np.ndarray) -> np.ndarray:
    """Each non-control arm's effect vs control from potential outcomes (n_arms, n): (n, n_arms-1)."""
    return (outcomes[1:] - outcomes[0:1]).T
