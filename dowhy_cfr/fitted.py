"""The fitted state of a CFR/TARNet estimator, in small objects that every fit path builds.

A fitted :class:`~dowhy_cfr.CFR` holds one :class:`FittedCFR` (``est.fitted_``), made of

* :class:`~dowhy_cfr.treatment.TreatmentEncoding` -- the treatment categories (the first is the
  control) and the arm index of a treatment label; for a continuous treatment
  :class:`~dowhy_cfr.treatment.DoseEncoding`, the dose range and the dose strata
  (:mod:`dowhy_cfr.treatment`);
* :class:`~dowhy_cfr.covariates.Columns` -- the covariate blocks ``X`` and ``W`` seen at fit
  (sizes, column names, encoders), and :class:`~dowhy_cfr.covariates.Preprocessing` --
  scaling of the covariates and, per member, standardisation of the outcome, and the way back
  from the networks' outputs to the outcome scale (:mod:`dowhy_cfr.covariates`);
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

from . import _validation as V
from .adrf import ADRF, BANDWIDTH_GRID, adrf, local_linear, loocv_bandwidth, weighted_residuals
from .core import CFRConfig, CFRNet, DoseNet, TrainResult, predict
from .core.dose import predict_dose, predict_dose_grid
from .core.training import derive_seeds
from .covariates import Columns, EncodedX, Preprocessing
from .debiased import AverageEffect, average_effect, jackknife_stderr, plugin_effect
from .nuisance import HETEROGENEITY_LEVEL, HeterogeneityTest, LinearPropensity, fit_per_arm
from .treatment import DoseEncoding, TreatmentEncoding

__all__ = ["FittedMembers", "FinalStage", "BlendStage", "regressions_at", "DebiasedStage",
           "FittedCFR", "history_frame", "member_outputs", "effects_of", "DoseStage",
           "member_dose_outputs", "seen_rows"]



def seen_rows(train_rows, val_rows, stopped_on_others=None) -> list:
    """The units each member saw, trained or early-stopped on: its training rows, and its
    validation rows unless it stopped by the others' objectives (a K-fold member's validation
    rows are its fold, which it never sees). One array per member."""
    others = ((False,) * len(train_rows) if stopped_on_others is None else stopped_on_others)
    return [train if other else np.concatenate([train, val])
            for train, val, other in zip(train_rows, val_rows, others)]


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
    def paired(self) -> bool:
        """Whether ``head_form="auto"`` kept both forms (a network of both,
        :attr:`~dowhy_cfr.core.CFRNet.robinson_models`): member j is the average of networks j
        (separate heads) and K + j (Robinson's), trained on the same units; seeds,
        best_iteration and history are the 2K networks', the rows the K members'."""
        return self.net.robinson_models is not None

    @property
    def n_models(self) -> int:
        """The number of members (each two networks where ``paired``)."""
        return self.net.n_models // 2 if self.paired else self.net.n_models

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
        return loss.reindex(range(self.net.n_models)).to_numpy(dtype=float, copy=True)

    def select(self, members: list, head_form=None) -> "FittedMembers":
        """Only the given members, renumbered 0, 1, ...; ``head_form``: the form they trained
        in, from a stack of both (:meth:`~dowhy_cfr.core.CFRNet.select`), or one per member:
        K separate members then K Robinson ones trained on the same units make K ``paired``
        members (``head_form="auto"`` keeping both forms)."""
        if self.paired:
            raise ValueError("members of both head forms cannot be selected again")
        net = self.net.select(members, head_form)
        own = members[:len(members) // 2] if net.robinson_models is not None else members
        h = self.history[self.history["member"].isin(members)].copy()
        h["member"] = h["member"].map({j: i for i, j in enumerate(members)})
        rows = [None if r is None else r[own].copy() for r in (self.train_rows, self.val_rows)]
        others = None if self.stopped_on_others is None else self.stopped_on_others[own]
        knots = None if self.dose_knots is None else tuple(self.dose_knots[j] for j in members)
        return FittedMembers(net, [self.seeds[j] for j in members],
                             self.best_iteration[members].copy(), h.reset_index(drop=True),
                             self.n_iter, rows[0], rows[1], None, others, knots)

    def dose_scale(self, encoding: "DoseEncoding", doses) -> np.ndarray:
        """The doses ``doses`` (P,) on every member's scale, the network's input: (K, P) --
        each member's own rank scale where it has one
        (:func:`~dowhy_cfr.treatment.member_dose_knots`), else the encoding's
        (:meth:`DoseEncoding.scale`) for all."""
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
    ``knots_u``: the dose encoding's rank scale (:func:`~dowhy_cfr.treatment.dose_knots`), on
    which the curves are interpolated and the average curve's correction smoothed (None: the
    range scale, on which that is the doses' own units)."""

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
    basis_mean: np.ndarray | None = None  # W at fit: the curves' projection on X (G,)
    basis: np.ndarray | None = None  # and its principal curves (r, G)

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
        r"""The doubly robust :math:`\hat\theta(t_1) - \hat\theta(t_0)` over the fitted units,
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

    def projected_curves(self, scores: np.ndarray, doses, *, grid: bool) -> np.ndarray:
        r"""The curves of a fit with W at the rows' principal-curve ``scores`` (..., m, r):
        :math:`\bar\mu(t) + \sum_j s_j \phi_j(t)` on the stage's grid (``basis_mean``,
        ``basis``), interpolated linearly on the dose's scale at one dose per row (``doses``
        (m,) -> (..., m)) or, with ``grid``, at every dose for every row ((P,) -> (..., m, P))."""
        on_grid = self.basis_mean + scores @ self.basis  # (..., m, G)
        u_grid = self.u(self.grid)
        u = self.u(doses)
        i = np.clip(np.searchsorted(u_grid, u, side="right") - 1, 0, len(u_grid) - 2)
        step = u_grid[i + 1] - u_grid[i]
        f = np.clip((u - u_grid[i]) / np.where(step > 0, step, 1.0), 0.0, 1.0)
        if grid:
            return on_grid[..., i] * (1 - f) + on_grid[..., i + 1] * f
        rows = np.arange(on_grid.shape[-2])
        return on_grid[..., rows, i] * (1 - f) + on_grid[..., rows, i + 1] * f


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
        (:meth:`DoseStage.shift`); with W at fit, ``model_final``'s projection of the units'
        curves on X (:func:`dowhy_cfr.fitting.dose_final_stage`) in place of the networks'.
        ``members=True``: each member's, unshifted (K, ...)."""
        x = X.array if isinstance(X, EncodedX) else self.columns.block("X", X)
        doses = np.asarray(doses, dtype=float)
        if self.final is not None:  # W at fit: model_final's projection of the curves on X
            scores = self.final.member_predictions(x) if members else None
            if scores is None:
                scores = self.final.predict(x)[None]  # (1, m, r)
            out = self.dose.projected_curves(scores, doses, grid=grid)
        else:
            scaled = self.members.dose_scale(self.encoding, doses)  # (K, m) or (K, P)
            out = member_dose_outputs(self.members.net, self.preprocessing,
                                      self.preprocessing.x(x), scaled, grid=grid)
        return out if members else out.mean(0) + self.dose.shift(doses)

    def features(self, X, W=None) -> np.ndarray:
        """Standardised network input of new units."""
        return self.preprocessing.x(self.columns.stack(X, W))

    def outputs(self, xw_std: np.ndarray) -> np.ndarray:
        """Per-member, per-arm predictions on the outcome scale: (K, n_arms, n)."""
        e = None if self.levels is None else self.levels.predict(xw_std)
        return member_outputs(self.members, self.preprocessing, xw_std, e)

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
            ", chosen by head_form='auto' (the members' factual loss on their folds: " +
            ", ".join(f"{r.head_form} {r.fold_loss:.4g}" for r in scores.itertuples()) + ")")
        if form == "auto":  # both kept: their fold losses within AUTO_AVERAGE_WITHIN
            chosen = chosen.replace("chosen by", "kept by")
            return (f"Heads: each member the average of separate heads and Robinson's form "
                    f"(mu_t(x) = m(x) + (t - e(x)) d(x)), both{chosen}.")
        if form == "robinson":
            return (f"Heads: Robinson's form (mu_t(x) = m(x) + (t - e(x)) d(x), so h1 - h0 = "
                    f"d){chosen}.")
        if form == "effect":
            return "Heads: a mean and an effect head, mu_t(x) = m(x) + (t - 1/2) d(x)."
        return f"Heads: separate, the paper's{chosen}." if chosen else ""

    def _effect_sentence(self) -> str:
        if self.continuous:
            correction = ("" if self.dose is None or not self.dose.debiased else
                          ", each curve plus the doubly robust correction of the average curve "
                          "(Kennedy et al. 2017), a function of the dose alone")
            if self.final is not None:
                return (f"Effect model: dose curves projected on X. effect(x, t0, t1) = "
                        f"mu(x, t1) - mu(x, t0), mu(x, t) model_final's regression on X of the "
                        f"dose networks' curves mu(x, w, t) (spline heads on Phi(x, w); "
                        f"{len(self.dose.basis)} principal curves on a grid of doses), the "
                        f"members' mean{correction}; the average curve: dose_response().")
            return (f"Effect model: dose curves. effect(x, t0, t1) = mu(x, t1) - mu(x, t0), "
                    f"mu(x, t) the dose networks' curve (spline heads on Phi(x)), the members' "
                    f"mean{correction}; the average curve: dose_response().")
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
            config = self.config  # both forms kept: member j's Phi is its separate network's
            if config.head_form == "auto":
                config = dataclasses.replace(config, head_form="separate")
            net = type(net).from_config(config, xw_std.shape[1], init_seed,
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


def member_outputs(members: FittedMembers, preprocessing: Preprocessing, xw_std: np.ndarray,
                   e: np.ndarray | None = None) -> np.ndarray:
    """Per-member, per-arm predictions of a stack on the outcome scale: (K, n_arms, n); ``e``
    (n, n_arms): the rows' propensities, which place the outcomes of ``head_form="robinson"``
    (:func:`~dowhy_cfr.core.network.predict`). ``paired`` members: the mean of each member's
    two networks."""
    raw = predict(members.net, torch.as_tensor(xw_std, dtype=torch.float32),
                  e=None if e is None else torch.as_tensor(e, dtype=torch.float32))
    out = preprocessing.outputs(raw.double().cpu().numpy())
    k = members.n_models
    return 0.5 * (out[:k] + out[k:]) if members.paired else out


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
