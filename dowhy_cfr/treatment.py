"""The treatment as the networks see it: the arms of a categorical treatment, or a continuous
treatment's doses on a scale of [0, 1] with their strata.

* :class:`TreatmentEncoding` -- the treatment categories (the first is the control) and the arm
  index of a treatment label (:func:`encode_treatment` chooses it, or :class:`DoseEncoding`);
* :class:`DoseEncoding` -- a continuous treatment: the dose range, its scale (the range, or the
  ranks through :func:`dose_knots`; :func:`rank_scale`) and the dose strata that take the place
  of arms in the stratified batches; :func:`member_dose_knots` gives K-fold members scales of
  their own.

Part of a fit's state (:mod:`dowhy_cfr.fitted`); nothing here trains or imports the estimator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from econml.utilities import one_hot_encoder

from . import _validation as V
from ._validation import plain
from .core import dose_strata

__all__ = ["TreatmentEncoding", "DoseEncoding", "encode_treatment", "dose_knots",
           "member_dose_knots", "rank_scale", "MAX_ARMS", "MIN_DOSE_VALUES", "TREATMENT_KINDS",
           "DOSE_KNOTS", "DOSE_RANK_OUTSIDE"]

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


def _arms_of_onehot(onehot) -> np.ndarray:
    onehot = np.asarray(onehot)
    return (onehot @ np.arange(1, onehot.shape[1] + 1)).round().astype(np.int64)


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
