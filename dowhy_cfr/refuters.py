"""Representation-balance refuter: how balanced are treated and control in CFR's representation?

Theorem 1 of Shalit, Johansson & Sontag (2017) bounds the error of the individual effects by the
factual error plus an integral probability metric (IPM) between the treated and the control
distributions *of the representation* ``Phi``. CFR minimises that IPM during training; TARNet
(``alpha = 0``) does not. This refuter reports the IPM for a fitted CFR/TARNet estimate so the
user can see how much of the bound's imbalance term is left.

Usage (after ``import dowhy_cfr``)::

    res = model.refute_estimate(estimand, estimate, method_name="representation_balance",
                                n_permutations=100, random_state=0)
    print(res)            # table + verdict
    res.to_frame()        # one row per IPM
    res.passed            # the rule below

or with DoWhy's functional API::

    from dowhy.causal_refuters import refute_estimate
    refute_estimate(df, estimand, estimate, refuters=[refute_representation_balance])

Which units
-----------
By default (``units="validation"``) the units the network did **not** train on: the validation
(early-stopping) split of the analysed member (``est.fitted_.members.val_rows``) and, for K-fold
bagged members, the fold it left out (``data`` must be the data the estimate was fitted on).
Training minimised the imbalance of the training units, so a test on them leans towards
"balanced"; their Wasserstein figures are reported only as a labelled extra
(``result.training_units``), not used by the rule. ``units="all"``: every row of ``data`` (e.g.
held-out data you pass); ``units="training"``: the training units.

What is reported
----------------
For each IPM (``"mmd2_lin"``, ``"mmd2_rbf"`` and ``"wass"`` by default -- computed by the very
functions the training objective uses, :func:`dowhy_cfr.core.ipm.imbalance`, with the fitted
estimator's ``wass_lambda`` / ``wass_iterations``):

``input_space``
    imbalance of the covariates CFR received (effect modifiers and backdoor variables), each
    standardised to mean 0 and standard deviation 1 over the analysed units -- the network's
    input;
``before_training``
    imbalance of the representation of the *same network* at initialisation (same seed, before
    any step: :meth:`CFR.representation_at_init`);
``after_training``
    imbalance of the trained representation (:meth:`CFR.transform`);
``reduction``
    ``1 - after_training / before_training``: the share of the initial representation's imbalance
    removed by training;
``p_value``
    permutation test of the remaining imbalance: the treatment labels are permuted
    ``n_permutations`` times (seeded by ``random_state``) within the trained representation and
    ``p = (1 + #{permuted IPM >= observed IPM}) / (1 + n_permutations)``. A large p means the
    remaining imbalance is what random group assignment of the same points gives.

Multi-valued treatments: as in training (``core.training.arm_imbalance``), each IPM is the mean
over the arms ``a >= 1`` of ``IPM(arm a, control)``, and the permutations permute the arm labels.

Scales: the three columns live in different spaces. ``input_space`` is measured on standardised
raw covariates (distances grow with the number of covariates); the representations are on the
unit sphere for ``normalization="divide"`` (the default) and unbounded otherwise. Compare
``after_training`` with ``before_training`` -- the same network, the same kind of space -- which is
what ``reduction`` does; do not compare either with ``input_space``.

RBF bandwidth: the training default ``rbf_sigma = 0.1`` is meaningless for, e.g., 25
standardised covariates (every kernel value would be ~0). By default (``rbf_sigma="median"``)
each space gets the median heuristic: ``sigma`` is the median Euclidean distance between two
distinct analysed units *in that space* (all units, both arms; 1.0 if that median is 0), so the
kernel ``exp(-||a - b||^2 / sigma^2)`` adapts to each space's scale. A number instead applies the
same ``sigma`` in all three spaces. The bandwidths used are reported (``result.rbf_sigma``).

Pass/fail rule
--------------
The estimate **passes** if the trained representation's Wasserstein imbalance is

* not significant against permuted treatment labels (permutation ``p > significance_level``,
  default 0.05), **or**
* at least ``min_reduction`` (default 0.8, i.e. 80 %) below the same network's imbalance at
  initialisation.

The first clause passes a representation whose remaining imbalance is what a random split of the
same points gives (including data without confounding); the second passes a large reduction even
when the sample is big enough for the test to detect a small remainder. The threshold is high
because training also contracts the representation, which lowers the Wasserstein distance even
without any balancing; the measurements behind it are in ``docs/balance.md``.

With ``n_permutations=0`` no test is run (p-values are NaN) and only the reduction clause applies;
with fewer than ``1/significance_level - 1`` permutations the test cannot reject (a warning says
so). Passing is about the bound's imbalance term only: a representation that has collapsed (too
large an ``alpha``) is perfectly balanced and useless for prediction, so read the check together
with the factual fit. Failing is a warning about the bound, not proof that the estimate is wrong.

Large data: every IPM here costs O(n^2) memory and time (the Wasserstein O(n_t n_c)); above
``max_units`` (default 2000) a stratified random subsample of that size (seeded) is analysed.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import torch
from dowhy.causal_estimators.econml import Econml
from dowhy.causal_refuter import CausalRefutation, CausalRefuter

from . import _validation as V
from .core.dose import interval_imbalance
from .core.ipm import IPM_NAMES, imbalance, pairwise_sq_dists
from .core.training import arm_imbalance
from .dowhy_adapter import CFREstimator
from .estimator import CFR
from .covariates import standardize

__all__ = [
    "DEFAULT_IPMS",
    "RepresentationBalance",
    "RepresentationBalanceResult",
    "refute_representation_balance",
    "representation_balance",
    "DoseBalanceResult",
    "dose_balance",
    "distance_correlation",
    "DOSE_MIN_REDUCTION",
]

DEFAULT_IPMS = ("mmd2_lin", "mmd2_rbf", "wass")
_SPACES = ("input_space", "before_training", "after_training")
_COLUMNS = ("input_space", "before_training", "after_training", "reduction", "p_value")
_RULE_IPM = "wass"
_UNITS_LABEL = {"validation": "validation units: not trained on",
                "training": "training units: their imbalance was minimised",
                "all": "all units given"}
# elements per stacked (K, n_t, n_c) block when evaluating Wasserstein permutations in batches
_BLOCK_ELEMENTS = 4_000_000
# the floor under the RBF kernel's exponent in dowhy_cfr.core.ipm (exp(-80) ~ 1.8e-35)
_EXP_FLOOR = -80.0


# ----------------------------------------------------------------------------- result
class RepresentationBalanceResult(CausalRefutation):
    """Result of the representation-balance refuter (a DoWhy ``CausalRefutation``).

    Attributes
    ----------
    input_space, before_training, after_training, reduction, p_value : dict
        ``{ipm: value}`` for each IPM (see the module docstring).
    passed : bool
        The verdict of :attr:`rule`.
    rule : str
        The pass/fail rule in words.
    rbf_sigma : dict
        ``{space: sigma}`` bandwidths used for ``mmd2_rbf``.
    null_distribution : dict
        ``{ipm: array}`` permuted-label IPMs in the trained representation.
    n_units, n_treated, n_control, n_permutations, member, random_state : int
    units : str
        The units analysed: "validation" (not trained on; the default), "training" or "all".
    training_units : dict or None
        With ``units="validation"``: the Wasserstein ``before_training``, ``after_training``,
        ``reduction`` and ``p_value`` on the member's training units -- a labelled extra that
        the rule does not use (training minimised that imbalance).
    estimator_name : str
        "CFR" or "TARNet".
    training_ipm : str
        The IPM the estimator was trained with (``alpha`` weighs it; 0 for TARNet).
    alpha : float
    refutation_result : dict
        DoWhy's convention: ``p_value`` (Wasserstein), ``is_statistically_significant`` and
        ``passed``.
    """

    #: The row of the table the pass/fail rule reads, and the refutation's title.
    rule_metric = _RULE_IPM
    title = "Refute: Representation balance (IPM, treated vs control)"

    def __init__(self, estimated_effect, table: pd.DataFrame, *, passed: bool, rule: str,
                 rbf_sigma: dict, null_distribution: dict, info: dict):
        super().__init__(estimated_effect, estimated_effect, refutation_type=self.title)
        self._table = table
        for col in _COLUMNS:
            setattr(self, col, {ipm: float(table.loc[ipm, col]) for ipm in table.index})
        self.passed = bool(passed)
        self.rule = rule
        self.rbf_sigma = dict(rbf_sigma)
        self.null_distribution = {k: np.asarray(v) for k, v in null_distribution.items()}
        self.significance_level = info["significance_level"]
        self.min_reduction = info["min_reduction"]
        for key in ("n_units", "n_treated", "n_control", "arm_sizes", "n_permutations", "member",
                    "random_state", "estimator_name", "training_ipm", "alpha", "subsampled",
                    "units", "training_units"):
            setattr(self, key, info[key])
        p = self.p_value.get(self.rule_metric, float("nan"))
        self.add_significance_test_results({
            "p_value": p,
            "is_statistically_significant": bool(p < self.significance_level),
            "passed": self.passed,
        })

    def to_frame(self) -> pd.DataFrame:
        """One row per IPM; columns input_space, before_training, after_training, reduction,
        p_value."""
        return self._table.copy()

    @property
    def ipms(self) -> list:
        return list(self._table.index)

    def summary(self) -> str:
        """One line: the verdict and the numbers behind it."""
        p = self.p_value.get(_RULE_IPM, float("nan"))
        red = self.reduction.get(_RULE_IPM, float("nan"))
        verdict = "PASSED" if self.passed else "FAILED"
        return (f"{verdict}: Wasserstein imbalance after training {self.after_training[_RULE_IPM]:.4g} "
                f"(before training {self.before_training[_RULE_IPM]:.4g}, reduction "
                f"{_fmt_pct(red)}, permutation p = {_fmt_p(p)})")

    def _shown_table(self) -> pd.DataFrame:
        """The table with its numbers formatted for printing (4 significant digits, the
        reduction as a percentage, the p-values as :func:`_fmt_p`)."""
        table = self._table
        shown = pd.DataFrame(index=table.index)
        for col in _SPACES:
            shown[col] = table[col].map(lambda v: f"{v:.4g}")
        shown["reduction"] = table["reduction"].map(_fmt_pct)
        shown["p_value"] = table["p_value"].map(_fmt_p)
        return shown

    def __str__(self) -> str:
        shown = self._shown_table()
        sig = ", ".join(f"{k} {v:.3g}" for k, v in self.rbf_sigma.items())
        sub = f" (random subsample of {self.n_units})" if self.subsampled else ""
        lines = [
            self.refutation_type,
            f"Estimator: {self.estimator_name} (training ipm={self.training_ipm!r}, "
            f"alpha={self.alpha:g}); ensemble member {self.member}",
            f"Estimated effect: {self.estimated_effect}  (not re-estimated by this check)",
            f"Units: {self.n_units}{sub} ({_UNITS_LABEL[self.units]}), "
            + (f"{self.n_treated} treated / {self.n_control} control; " if len(self.arm_sizes) == 2
               else f"arm sizes {self.arm_sizes} (first = control; IPMs averaged over each arm "
                    f"vs control, as in training); ")
            + f"{self.n_permutations} permutations (random_state={self.random_state})",
            "",
            shown.to_string(),
            "",
            f"RBF bandwidth sigma per space: {sig}",
            "Columns are on different scales (standardised covariates vs. the representation); "
            "compare after_training with before_training (same network), as 'reduction' does.",
            f"Rule: {self.rule}",
            f"Result: {self.summary()}",
        ]
        if self.training_units is not None:
            t = self.training_units
            lines.append(
                f"Extra, not used by the rule -- training units ({t['n_units']}; training "
                f"minimised their imbalance, so their p may lean towards balance): Wasserstein "
                f"after training {t['after_training']:.4g}, reduction "
                f"{_fmt_pct(t['reduction'])}, permutation p = {_fmt_p(t['p_value'])}")
        return "\n".join(lines) + "\n"

    __repr__ = __str__

    def interpret(self, method_name=None, **kwargs):
        """Print the table and the verdict (DoWhy's ``interpret`` for this refuter)."""
        print(self)


def _fmt_pct(v) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{100 * v:.1f}%"


def _fmt_p(v) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.3g}"


# ----------------------------------------------------------------------------- inputs
def _fitted_inputs(estimate, data: pd.DataFrame):
    """(cfr, X, W, treatment column name) for a CFR/TARNet estimate, or a clear error."""
    if estimate is None:
        raise ValueError("representation_balance needs an estimate; got None")
    est_obj = getattr(estimate, "estimator", None)
    if est_obj is None:
        raise TypeError(
            f"representation_balance needs a CausalEstimate from CFR or TARNet "
            f"(model.estimate_effect(..., method_name='backdoor.cfr')); got "
            f"{type(estimate).__name__} without an estimator"
        )
    if isinstance(est_obj, CFREstimator):
        cfr = est_obj.estimator
        X, W = est_obj._covariates(data), None
    elif isinstance(est_obj, Econml) and isinstance(getattr(est_obj, "estimator", None), CFR):
        # a CFR passed to DoWhy's own EconML wrapper: effect modifiers as X, common causes as W
        cfr = est_obj.estimator
        X = W = None
        if est_obj._effect_modifier_names:
            X = est_obj._encode(data[est_obj._effect_modifier_names], "effect_modifiers")
        if est_obj._observed_common_causes_names:
            W = est_obj._encode(data[est_obj._observed_common_causes_names],
                                "observed_common_causes")
    else:
        inner = getattr(est_obj, "estimator", None)
        what = type(est_obj).__name__ + (f" wrapping {type(inner).__name__}" if inner is not None
                                         and not isinstance(inner, (str, type(None))) else "")
        raise TypeError(
            f"representation_balance applies to CFR/TARNet estimates only (method_name="
            f"'backdoor.cfr' or 'backdoor.tarnet'); this estimate comes from {what}, which has "
            f"no learned representation"
        )
    if getattr(cfr, "fitted_", None) is None:
        raise ValueError("the estimate's CFR estimator is not fitted")
    tname = est_obj._target_estimand.treatment_variable[0]
    if tname not in data.columns:
        raise ValueError(f"treatment column {tname!r} is not in the data")
    return cfr, X, W, tname


def _arm_ipm(z: torch.Tensor, arms: np.ndarray, n_arms: int, ipm: str, sigma: float, cfg) -> float:
    """The training objective's imbalance over the arms (``core.training.arm_imbalance``)."""
    kw = dict(cfg.ipm_kwargs(), ipm=ipm, rbf_sigma=sigma)
    return float(arm_imbalance(z, torch.as_tensor(arms), n_arms, kw))


def _median_distance(z: torch.Tensor) -> float:
    """Median Euclidean distance between distinct units (1.0 if it is 0)."""
    d2 = pairwise_sq_dists(z.unsqueeze(0), z.unsqueeze(0))[0]
    iu = torch.triu_indices(z.shape[0], z.shape[0], offset=1)
    dist = torch.sqrt(d2[iu[0], iu[1]]).numpy()
    med = float(np.median(dist)) if dist.size else 0.0
    return med if med > 0 and math.isfinite(med) else 1.0


# ----------------------------------------------------------------------------- computation
def representation_balance(
    estimate,
    data: pd.DataFrame | None = None,
    *,
    ipms=DEFAULT_IPMS,
    n_permutations: int = 100,
    random_state: int | None = 0,
    member: int = 0,
    rbf_sigma="median",
    significance_level: float = 0.05,
    min_reduction: float | None = None,
    max_units: int = 2000,
    units: str = "validation",
) -> RepresentationBalanceResult:
    """Imbalance between treated and control, before/after CFR's representation (see module doc).

    Parameters
    ----------
    estimate : CausalEstimate
        From ``method_name="backdoor.cfr"`` / ``"backdoor.tarnet"`` (or a CFR in DoWhy's
        EconML wrapper).
    data : DataFrame, optional
        Units to analyse; default: the data the estimate was computed on.
    ipms : sequence of str
        IPMs to report (``dowhy_cfr.core.ipm.IPM_NAMES``); must include ``"wass"`` (the rule).
    n_permutations : int, default 100
        Permutations of the treatment labels for the p-values (0: no test).
    random_state : int or None, default 0
        Seed of the permutations (and of the subsample above ``max_units``).
    member : int, default 0
        Ensemble member whose representation is analysed.
    rbf_sigma : "median" or float, default "median"
        Bandwidth of ``mmd2_rbf``: the median heuristic per space, or one value for all spaces.
    significance_level : float, default 0.05
    min_reduction : float, optional
        See the pass/fail rule in the module docstring; default 0.8 (for a continuous
        treatment :data:`DOSE_MIN_REDUCTION`, the reduction of the distance correlation:
        :func:`dose_balance`).
    max_units : int, default 2000
        Analyse a stratified random subsample of this size when there are more units.
    units : {"validation", "training", "all"}, default "validation"
        Which rows of ``data`` are analysed. ``"validation"``: the member's validation units,
        which the network did not train on (``data`` must be the data it was fitted on); the
        same figures on its training units -- whose imbalance training minimised -- are added
        as a labelled extra (``result.training_units``). ``"all"``: every row, e.g. held-out
        data you pass. A fit that kept no split (a loaded model, ``fit_chunks``) falls back to
        ``"all"`` with a warning.
    """
    if data is None:
        data = getattr(estimate, "_data", None)
        if data is None:
            raise ValueError("no data: pass the DataFrame the estimate was computed on")
    if not isinstance(data, pd.DataFrame):
        raise TypeError(f"data must be a pandas DataFrame; got {type(data).__name__}")
    ipms = [ipms] if isinstance(ipms, str) else list(ipms)
    bad = [m for m in ipms if m not in IPM_NAMES]
    if bad or not ipms:
        raise ValueError(f"unknown ipms {bad}; choose from {IPM_NAMES}")
    if _RULE_IPM not in ipms:
        raise ValueError(f"ipms must include {_RULE_IPM!r}: the pass/fail rule uses it")
    if not 0 < significance_level < 1:
        raise ValueError(f"significance_level={significance_level!r} must be in (0, 1)")
    min_reduction_default = min_reduction is None
    min_reduction = 0.8 if min_reduction is None else min_reduction
    if not 0 <= min_reduction <= 1:
        raise ValueError(f"min_reduction={min_reduction!r} must be in [0, 1]")
    n_permutations = V.check_int("n_permutations", n_permutations, 0)
    if 0 < n_permutations and 1.0 / (n_permutations + 1) > significance_level:
        warnings.warn(
            f"with n_permutations={n_permutations} the smallest possible p-value is "
            f"{1 / (n_permutations + 1):.3g} > significance_level={significance_level:g}: the "
            f"test can never reject; use at least {math.ceil(1 / significance_level) - 1}",
            UserWarning, stacklevel=2)
    max_units = V.check_int("max_units", max_units, 4)
    member = V.check_int("member", member, 0)
    if not (rbf_sigma == "median" if isinstance(rbf_sigma, str)
            else isinstance(rbf_sigma, (int, float)) and rbf_sigma > 0):
        raise ValueError(f"rbf_sigma={rbf_sigma!r} is invalid: 'median' or a positive number")

    cfr, X, W, tname = _fitted_inputs(estimate, data)
    if cfr.fitted_.continuous:
        return dose_balance(estimate, data, n_permutations=n_permutations,
                            random_state=random_state, member=member,
                            significance_level=significance_level,
                            min_reduction=(DOSE_MIN_REDUCTION if min_reduction_default
                                           else min_reduction),
                            max_units=max_units, units=units)
    fitted = cfr.fitted_
    n_models = fitted.members.n_models
    if member >= n_models:
        raise ValueError(f"member={member} but the estimator has {n_models} ensemble member(s)")
    arms_all = fitted.encoding.arms(data[tname])
    n_arms = fitted.encoding.n_arms
    rng = np.random.default_rng(random_state)
    unit_rows, units = _unit_rows(fitted.members, units, member, len(arms_all))
    n_all = len(unit_rows)
    rows = _subsample(unit_rows, arms_all, n_arms, max_units, rng)
    arms = arms_all[rows]
    counts = np.bincount(arms, minlength=n_arms)
    if (counts == 0).any():
        raise ValueError(f"the analysed units must contain every treatment arm; arm sizes "
                         f"{counts.tolist()}")
    X_all, W_all = X, W
    X = None if X is None else X.iloc[rows]
    W = None if W is None else W.iloc[rows]

    blocks = [np.asarray(b, dtype=float) for b in (X, W) if b is not None]
    spaces = {
        "input_space": standardize(np.hstack(blocks)),
        "before_training": cfr.representation_at_init(X, W, member=member),
        "after_training": cfr.transform(X, W, member=member),
    }
    cfg = fitted.config
    sigmas = {}
    table = pd.DataFrame(index=pd.Index(ipms, name="ipm"), columns=list(_COLUMNS), dtype=float)
    nulls = {}
    with torch.no_grad():
        for space, z in spaces.items():
            zt = torch.as_tensor(np.asarray(z, dtype=np.float64))
            sigmas[space] = _median_distance(zt) if rbf_sigma == "median" else float(rbf_sigma)
            for ipm in ipms:
                table.loc[ipm, space] = _arm_ipm(zt, arms, n_arms, ipm, sigmas[space], cfg)
            if space == "after_training":
                perms = (np.stack([rng.permutation(arms) for _ in range(n_permutations)])
                         if n_permutations else np.zeros((0, len(arms)), dtype=np.int64))
                for ipm in ipms:
                    if n_arms == 2:
                        nulls[ipm] = _permuted(zt, perms == 1, ipm, sigmas[space], cfg)
                    else:
                        nulls[ipm] = np.array([_arm_ipm(zt, pa, n_arms, ipm, sigmas[space], cfg)
                                               for pa in perms])
    extra = None
    if units == "validation":  # after the main permutations: they do not depend on it
        train_rows = _subsample(np.unique(fitted.members.train_rows[member]), arms_all, n_arms,
                                max_units, rng)
        extra = _training_units_figure(cfr, X_all, W_all, train_rows, arms_all, n_arms, member,
                                       n_permutations, rbf_sigma, rng)
    for ipm in ipms:
        before, after = table.loc[ipm, "before_training"], table.loc[ipm, "after_training"]
        table.loc[ipm, "reduction"] = 1.0 - after / before if before > 0 else float("nan")
        table.loc[ipm, "p_value"] = (
            (1.0 + np.sum(nulls[ipm] >= after)) / (1.0 + n_permutations)
            if n_permutations else float("nan"))

    p = table.loc[_RULE_IPM, "p_value"]
    red = table.loc[_RULE_IPM, "reduction"]
    passed = _verdict(p, red, significance_level, min_reduction)
    rule = (f"pass if the trained representation's Wasserstein imbalance is not significant "
            f"against permuted treatment labels (permutation p > {significance_level:g}) or is "
            f"at least {100 * min_reduction:g}% below the same network's imbalance at "
            f"initialisation")
    info = dict(
        n_units=int(len(arms)), n_treated=int((arms > 0).sum()), n_control=int(counts[0]),
        arm_sizes={str(c): int(k) for c, k in zip(fitted.encoding.categories, counts)},
        n_permutations=n_permutations, member=member, random_state=random_state,
        estimator_name=type(cfr).__name__,
        training_ipm=cfg.ipm, alpha=float(cfg.alpha), subsampled=bool(n_all > max_units),
        significance_level=significance_level, min_reduction=min_reduction, units=units,
        training_units=extra,
    )
    return RepresentationBalanceResult(
        getattr(estimate, "value", None), table, passed=passed, rule=rule, rbf_sigma=sigmas,
        null_distribution=nulls, info=info)


def _unit_rows(members, units, member: int, n: int):
    """(rows of the data analysed, the ``units`` actually used)."""
    if units not in ("validation", "training", "all"):
        raise ValueError(f"units={units!r} is invalid: use 'validation' (units the network did "
                         f"not train on), 'training' or 'all'")
    if units == "all":
        return np.arange(n), units
    if members.val_rows is None or members.train_rows is None:
        warnings.warn("this fit kept no training/validation split (a loaded model or "
                      "fit_chunks): analysing all units, including those the network trained "
                      "on; pass held-out data with units='all' instead", UserWarning, stacklevel=3)
        return np.arange(n), "all"
    fitted_rows = np.unique(np.concatenate([*members.train_rows, *members.val_rows]))
    if len(fitted_rows) != n or fitted_rows[-1] != n - 1:
        raise ValueError(f"units={units!r} needs the data the estimate was fitted on ({n} rows "
                         f"given, {len(fitted_rows)} fitted); for other data use units='all'")
    trained = np.unique(members.train_rows[member])
    if units == "training":
        return trained, units
    return np.setdiff1d(np.arange(n), trained), units  # every unit the network did not train on


def _subsample(rows: np.ndarray, arms_all: np.ndarray, n_arms: int, max_units: int, rng):
    """``rows``, or a stratified random subsample of ``max_units`` of them (arms keep shares)."""
    if len(rows) <= max_units:
        return rows
    groups = [rows[arms_all[rows] == a] for a in range(n_arms)]
    sizes = [max(2, int(round(max_units * len(g) / len(rows)))) for g in groups[1:]]
    sizes = [max_units - sum(sizes)] + sizes
    return np.sort(np.concatenate([rng.choice(g, min(k, len(g)), replace=False)
                                   for g, k in zip(groups, sizes)]))


def _training_units_figure(cfr, X, W, rows, arms_all, n_arms, member, n_permutations,
                           rbf_sigma, rng) -> dict:
    """The rule's Wasserstein figures on the member's *training* units (a labelled extra: the
    network minimised this imbalance there, so its p-value leans towards balance)."""
    cfg = cfr.fitted_.config
    Xr = None if X is None else X.iloc[rows]
    Wr = None if W is None else W.iloc[rows]
    arms = arms_all[rows]
    with torch.no_grad():
        before = torch.as_tensor(cfr.representation_at_init(Xr, Wr, member=member),
                                 dtype=torch.float64)
        after = torch.as_tensor(cfr.transform(Xr, Wr, member=member), dtype=torch.float64)
        sigma = _median_distance(after) if rbf_sigma == "median" else float(rbf_sigma)
        ipm_before = _arm_ipm(before, arms, n_arms, _RULE_IPM, sigma, cfg)
        ipm_after = _arm_ipm(after, arms, n_arms, _RULE_IPM, sigma, cfg)
        perms = [rng.permutation(arms) for _ in range(n_permutations)]
        if not perms:
            null = np.zeros(0)
        elif n_arms == 2:
            null = _permuted(after, np.stack(perms) == 1, _RULE_IPM, sigma, cfg)
        else:
            null = np.array([_arm_ipm(after, pa, n_arms, _RULE_IPM, sigma, cfg) for pa in perms])
    p = (1.0 + np.sum(null >= ipm_after)) / (1.0 + n_permutations) if n_permutations \
        else float("nan")
    return {"n_units": int(len(rows)), "before_training": ipm_before,
            "after_training": ipm_after,
            "reduction": 1.0 - ipm_after / ipm_before if ipm_before > 0 else float("nan"),
            "p_value": float(p)}


def _verdict(p: float, reduction: float, significance_level: float, min_reduction: float) -> bool:
    """The pass/fail rule (module docstring): not significant, or reduced enough."""
    return bool((np.isfinite(p) and p > significance_level)
                or (np.isfinite(reduction) and reduction >= min_reduction))


def _permuted(z: torch.Tensor, perms: np.ndarray, ipm: str, sigma: float, cfg) -> np.ndarray:
    """The IPM of ``z`` under each label vector in ``perms`` (B, n).

    The MMDs use closed forms in which only the labels change -- the group-mean difference for
    ``mmd2_lin`` and quadratic forms of one kernel matrix for ``mmd2_rbf`` -- identical to
    :func:`dowhy_cfr.core.ipm.mmd2_lin` / :func:`~dowhy_cfr.core.ipm.mmd2_rbf` up to float
    rounding (the tests check this). The Wasserstein distances call the core function on stacked
    blocks of permutations.
    """
    if len(perms) == 0:
        return np.zeros(0)
    tp = torch.as_tensor(perms, dtype=z.dtype)  # (B, n), 1 = treated
    cp = 1.0 - tp
    n_t = float(perms[0].sum())
    n_c = float(perms.shape[1] - n_t)
    if ipm == "mmd2_lin":
        diff = (tp / n_t - cp / n_c) @ z  # (B, r): mean_t - mean_c
        return diff.pow(2).sum(1).numpy()
    if ipm == "mmd2_rbf":
        d2 = pairwise_sq_dists(z.unsqueeze(0), z.unsqueeze(0))[0]
        kern = torch.exp((-d2 / (sigma * sigma)).clamp_min(_EXP_FLOOR))  # as in core.ipm
        diag = torch.diagonal(kern)
        kt = kern @ tp.T  # (n, B)
        tkt = (tp.T * kt).sum(0)
        tkc = (cp.T * kt).sum(0)
        ckc = kern.sum() - 2.0 * tkc - tkt
        s_tt = tkt - tp @ diag
        s_cc = ckc - cp @ diag
        out = (s_tt / max(n_t * (n_t - 1), 1.0) + s_cc / max(n_c * (n_c - 1), 1.0)
               - 2.0 * tkc / max(n_t * n_c, 1.0))
        return out.numpy()
    per_block = max(1, _BLOCK_ELEMENTS // int(max(n_t * n_c, 1)))
    out = []
    for start in range(0, len(perms), per_block):
        tb = torch.as_tensor(perms[start:start + per_block])
        zs = z.unsqueeze(0).expand(tb.shape[0], -1, -1)
        out.append(imbalance(zs, tb, ipm=ipm, rbf_sigma=sigma, wass_lambda=cfg.wass_lambda,
                             wass_iterations=cfg.wass_iterations).numpy())
    return np.concatenate(out)


# ----------------------------------------------------------------------------- continuous T
#: The dose balance refuter's pass threshold on the reduction of the distance correlation
#: between the representation and the dose (docs/balance.md, "Continuous treatments").
DOSE_MIN_REDUCTION = 0.5


class DoseBalanceResult(RepresentationBalanceResult):
    """The representation-balance refuter's result for a continuous treatment: the dependence
    between the representation and the dose (:func:`dose_balance`). Rows: ``dcor`` (distance
    correlation, the rule's metric) and ``interval_wass`` (the training's interval IPM between
    dose strata, :func:`dowhy_cfr.core.dose.interval_imbalance`); ``n_treated``/``n_control``
    hold the units and 0, ``arm_sizes`` the dose strata's sizes."""

    rule_metric = "dcor"
    title = "Refute: Representation balance (dependence between the representation and the dose)"

    def summary(self) -> str:
        p, red = self.p_value["dcor"], self.reduction["dcor"]
        verdict = "PASSED" if self.passed else "FAILED"
        return (f"{verdict}: distance correlation between the representation and the dose after "
                f"training {self.after_training['dcor']:.4g} (before training "
                f"{self.before_training['dcor']:.4g}, reduction {_fmt_pct(red)}, permutation "
                f"p = {_fmt_p(p)})")

    def __str__(self) -> str:
        shown = self._shown_table()
        sub = f" (random subsample of {self.n_units})" if self.subsampled else ""
        return "\n".join([
            self.title,
            f"Estimator: {self.estimator_name} (training ipm={self.training_ipm!r} between dose "
            f"strata, alpha={self.alpha:g}); ensemble member {self.member}",
            f"Estimated effect: {self.estimated_effect}  (not re-estimated by this check)",
            f"Units: {self.n_units}{sub} ({_UNITS_LABEL[self.units]}); "
            f"{self.n_permutations} permutations of the dose (random_state={self.random_state})",
            "", shown.to_string(), "",
            "dcor: distance correlation (0 = independent); interval_wass: the training's "
            "Wasserstein IPM between each dose stratum and the others. Compare after_training "
            "with before_training (same network), as 'reduction' does.",
            f"Rule: {self.rule}", f"Result: {self.summary()}"]) + "\n"

    __repr__ = __str__


def _centred_distances(z: np.ndarray) -> np.ndarray:
    """The double-centred Euclidean distance matrix of the rows of ``z`` (n, d) (Szekely et al.
    2007): ``a_ij - a_i. - a_.j + a_..``."""
    zt = torch.as_tensor(z, dtype=torch.float64).reshape(len(z), -1).unsqueeze(0)
    d = torch.sqrt(pairwise_sq_dists(zt, zt)[0]).numpy()
    return d - d.mean(0, keepdims=True) - d.mean(1, keepdims=True) + d.mean()


def distance_correlation(a: np.ndarray, b: np.ndarray) -> float:
    r"""The (V-statistic) distance correlation of Szekely, Rizzo & Bakirov (2007) between the
    rows of ``a`` (n, p) and of ``b`` (n, q): :math:`\mathrm{dCov}^2(a, b) /
    \sqrt{\mathrm{dVar}^2(a)\, \mathrm{dVar}^2(b)}` under a square root, in [0, 1], 0 exactly
    when the two are independent (in the population)."""
    A, B = _centred_distances(a), _centred_distances(b)
    denom = np.sqrt((A * A).mean() * (B * B).mean())
    return float(np.sqrt(max((A * B).mean(), 0.0) / denom)) if denom > 0 else 0.0


def _permuted_dcor(z: np.ndarray, dose: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """Distance correlations of ``z`` with each permutation (rows of ``perms``) of ``dose``:
    one centred matrix of each, the dose's permuted."""
    A, B = _centred_distances(z), _centred_distances(dose)
    scale = np.sqrt((A * A).mean() * (B * B).mean())
    out = np.array([(A * B[np.ix_(p, p)]).mean() for p in perms])
    return np.sqrt(np.maximum(out, 0.0) / scale) if scale > 0 else np.zeros(len(perms))


def dose_balance(estimate, data: pd.DataFrame, *, n_permutations: int = 100,
                 random_state: int | None = 0, member: int = 0,
                 significance_level: float = 0.05, min_reduction: float = DOSE_MIN_REDUCTION,
                 max_units: int = 2000, units: str = "validation") -> DoseBalanceResult:
    r"""The representation-balance check for a CFR/TARNet estimate of a continuous treatment
    (:func:`representation_balance` calls it for such estimates).

    A balanced representation is one whose distribution does not depend on the dose: the
    interval IPM of the training objective (:mod:`dowhy_cfr.core.dose`) is small for every
    partition of the dose range when :math:`\Phi(X)` is independent of :math:`T`. The check
    measures that dependence on the units the analysed member did not train on (by default)
    with the distance correlation :math:`\mathrm{dCor}(\Phi, T)` (Szekely, Rizzo & Bakirov
    2007; 0 for independence, any dependence shows, no bandwidth to choose), in the covariates
    (standardised), the same network's representation at initialisation and after training,
    and with a permutation p-value of the trained one (the doses permuted
    ``n_permutations`` times: ``p = (1 + #{permuted >= observed}) / (1 + n_permutations)``).
    The interval IPM itself (Wasserstein, the units' dose strata) is reported beside it.

    The rule (as for a binary treatment): **passes** if the trained representation's
    dependence on the dose is not significant (p > ``significance_level``) or is at least
    ``min_reduction`` below the initial one (default :data:`DOSE_MIN_REDUCTION`, measured in
    ``docs/balance.md``). Other arguments as :func:`representation_balance`.
    """
    cfr, X, W, tname = _fitted_inputs(estimate, data)
    fitted = cfr.fitted_
    if member >= fitted.members.n_models:
        raise ValueError(f"member={member} but the estimator has {fitted.members.n_models} "
                         f"ensemble member(s)")
    dose_all = np.asarray(data[tname], dtype=float)
    strata_all = fitted.encoding.arms(dose_all)
    n_strata = fitted.encoding.n_strata
    rng = np.random.default_rng(random_state)
    unit_rows, units = _unit_rows(fitted.members, units, member, len(dose_all))
    rows = _subsample(unit_rows, strata_all, n_strata, max_units, rng)
    dose = dose_all[rows]
    strata = fitted.encoding.arms(dose)
    X = None if X is None else X.iloc[rows]
    W = None if W is None else W.iloc[rows]
    blocks = [np.asarray(b, dtype=float) for b in (X, W) if b is not None]
    spaces = {"input_space": standardize(np.hstack(blocks)),
              "before_training": cfr.representation_at_init(X, W, member=member),
              "after_training": cfr.transform(X, W, member=member)}
    cfg = fitted.config
    kw = dict(cfg.ipm_kwargs(), ipm="wass")
    table = pd.DataFrame(index=pd.Index(["dcor", "interval_wass"], name="metric"),
                         columns=list(_COLUMNS), dtype=float)
    with torch.no_grad():
        for space, z in spaces.items():
            table.loc["dcor", space] = distance_correlation(z, dose)
            zt = torch.as_tensor(np.asarray(z, dtype=np.float64)).unsqueeze(0)
            table.loc["interval_wass", space] = float(interval_imbalance(
                zt, torch.as_tensor(strata).unsqueeze(0), n_strata, kw)[0])
    perms = np.stack([rng.permutation(len(dose)) for _ in range(n_permutations)]) \
        if n_permutations else np.zeros((0, len(dose)), dtype=np.int64)
    null = _permuted_dcor(spaces["after_training"], dose, perms)
    for metric in table.index:
        before, after = table.loc[metric, "before_training"], table.loc[metric, "after_training"]
        table.loc[metric, "reduction"] = 1.0 - after / before if before > 0 else float("nan")
    table.loc["dcor", "p_value"] = ((1.0 + np.sum(null >= table.loc["dcor", "after_training"]))
                                    / (1.0 + n_permutations) if n_permutations else float("nan"))
    passed = _verdict(table.loc["dcor", "p_value"], table.loc["dcor", "reduction"],
                      significance_level, min_reduction)
    rule = (f"pass if the trained representation's distance correlation with the dose is not "
            f"significant against permuted doses (permutation p > {significance_level:g}) or is "
            f"at least {100 * min_reduction:g}% below the same network's at initialisation")
    info = dict(n_units=int(len(dose)), n_treated=int(len(dose)), n_control=0,
                arm_sizes={f"stratum {j + 1}": int(c)
                           for j, c in enumerate(np.bincount(strata, minlength=n_strata))},
                n_permutations=n_permutations, member=member, random_state=random_state,
                estimator_name=type(cfr).__name__, training_ipm=cfg.ipm, alpha=float(cfg.alpha),
                subsampled=bool(len(unit_rows) > max_units), significance_level=significance_level,
                min_reduction=min_reduction, units=units, training_units=None)
    return DoseBalanceResult(getattr(estimate, "value", None), table, passed=passed, rule=rule,
                             rbf_sigma={}, null_distribution={"dcor": null}, info=info)


# ----------------------------------------------------------------------------- DoWhy refuters
_REFUTER_PARAMS = ("ipms", "n_permutations", "random_state", "member", "rbf_sigma",
                   "significance_level", "min_reduction", "max_units", "units")
# arguments DoWhy itself passes to or handles for every refuter
_DOWHY_COMMON = ("random_seed", "n_jobs", "verbose", "show_progress_bar")


def refute_representation_balance(data: pd.DataFrame, target_estimand=None, estimate=None,
                                  treatment_name=None, outcome_name=None, **kwargs):
    """Functional form for ``dowhy.causal_refuters.refute_estimate(..., refuters=[...])``.

    Takes DoWhy's refuter keywords; the options of :func:`representation_balance` are read from
    ``kwargs`` (``random_seed`` is used when ``random_state`` is not given); other keywords, meant
    for other refuters of the same call, are ignored as DoWhy's own refuters do.
    """
    params = {k: kwargs[k] for k in _REFUTER_PARAMS if k in kwargs}
    if "random_state" not in params and kwargs.get("random_seed") is not None:
        params["random_state"] = kwargs["random_seed"]
    return representation_balance(estimate, data, **params)


class RepresentationBalance(CausalRefuter):
    """``model.refute_estimate(estimand, estimate, method_name="representation_balance", ...)``.

    Keyword arguments are those of :func:`representation_balance` (``random_seed`` stands in
    for ``random_state``). See the module docstring for what is reported and the rule.
    """

    interpret_method = None

    def __init__(self, data, identified_estimand, estimate, **kwargs):
        unknown = sorted(set(kwargs) - set(_REFUTER_PARAMS) - set(_DOWHY_COMMON))
        if unknown:
            raise TypeError(f"representation_balance got unexpected argument(s) {unknown}; "
                            f"valid: {list(_REFUTER_PARAMS)}")
        _fitted_inputs(estimate, data)  # fail early with a clear error
        random_seed = kwargs.get("random_seed")
        super().__init__(data, identified_estimand=identified_estimand, estimate=estimate,
                         **kwargs)
        self._params = {k: kwargs[k] for k in _REFUTER_PARAMS if k in kwargs}
        if "random_state" not in self._params and random_seed is not None:
            self._params["random_state"] = random_seed

    def refute_estimate(self, show_progress_bar=False):
        result = representation_balance(self._estimate, self._data, **self._params)
        result.add_refuter(self)
        return result
