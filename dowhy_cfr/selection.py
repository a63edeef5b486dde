"""Hyper-parameter selection for CFR from observed data only (Shalit et al. 2017, Sec. 5 and
supplement C.1).

:func:`random_search` draws candidate configurations from the supplement's search ranges, trains
every candidate on the training units (early stopping on the validation units, as in the
authors' code), and scores it on the validation units by a criterion that needs no
counterfactuals:

* continuous outcomes: the nearest-neighbour PEHE surrogate (:func:`dowhy_cfr.metrics.nn_pehe`,
  supplement C.1), neighbours looked up among the training and validation units;
* binary outcomes: the policy risk on the validation units (:func:`dowhy_cfr.metrics.policy_risk`),
  restricted to the randomized units when ``e`` is given (Jobs);
* on request, for either: the R-loss of Nie & Wager (2021) (:func:`dowhy_cfr.metrics.r_loss`) or
  the doubly robust pseudo-outcome loss (:func:`dowhy_cfr.metrics.dr_loss`), with nuisance models
  cross-fitted once on the training and validation units
  (:func:`dowhy_cfr.metrics.cross_fit_nuisances`).

Test units are never passed in: the function only receives index arrays of the training and
validation units and reads no other rows of ``X``, ``Y``, ``T`` or ``e``.

Candidates that share an architecture (everything but ``alpha`` and ``weight_decay``) are trained
together in one stacked pass of the fit path (:func:`dowhy_cfr.fitting.train_members`, with the
preprocessing of ``CFR.fit``) with per-member ``alpha`` / ``weight_decay``; the search draws ``per_architecture`` alphas for every architecture it draws so
that this K-stacking applies.

Search ranges
-------------
:data:`PAPER_SPACE` is the supplement's table of hyper-parameter ranges as we read it:
``alpha`` in ``{10^(k/2) : k = -10, ..., 6}``, 1-3 representation and 1-3 head layers, widths
{20, 50, 100, 200} for each, batch size {100, 200, 500, 700}. :data:`DEFAULT_SPACE` is the same
except that ``alpha`` stops at ``10^(2/2) = 10``: our ``alpha`` multiplies the IPM against the
squared loss of the *standardised* outcome, and larger values collapse the representation (see
:class:`dowhy_cfr.CFR`). Batch sizes larger than the training set are clamped to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import _validation as V
from . import fitting
from . import plans as P
from .core import TrainingDivergedError
from .metrics import cross_fit_nuisances, dr_loss, nn_pehe, policy_risk, r_loss
from .nuisance import sklearn_seed

__all__ = ["PAPER_SPACE", "DEFAULT_SPACE", "SearchResult", "random_search"]

#: The supplement's hyper-parameter ranges.
PAPER_SPACE: dict[str, list] = {
    "alpha": [10 ** (k / 2) for k in range(-10, 7)],
    "n_rep_layers": [1, 2, 3],
    "n_head_layers": [1, 2, 3],
    "rep_dim": [20, 50, 100, 200],
    "head_dim": [20, 50, 100, 200],
    "batch_size": [100, 200, 500, 700],
}
#: Default search space: :data:`PAPER_SPACE` with alpha <= 10 (see the module docstring).
DEFAULT_SPACE: dict[str, list] = dict(PAPER_SPACE, alpha=[10 ** (k / 2) for k in range(-10, 3)])

_PER_MODEL = ("alpha", "weight_decay")  # may differ within one stacked pass
METRICS = ("nn_pehe", "policy_risk", "r_loss", "dr_loss")  # the criteria, lower is better


@dataclass
class SearchResult:
    """Outcome of :func:`random_search`.

    Attributes
    ----------
    results : pandas.DataFrame
        One row per candidate, best first: the sampled hyper-parameters, ``score`` (lower is
        better; ``inf`` if training diverged), ``group`` (candidates of one stacked pass) and
        ``best_step`` (early-stopping checkpoint).
    best_params : dict
        Sampled hyper-parameters of the best candidate (merge with ``fixed`` to rebuild it).
    best_score : float
    metric : str
        ``"nn_pehe"`` or ``"policy_risk"``.
    best_estimator : CFR or None
        ``CFR(**fixed, **best_params)`` refitted on the training + validation units (its own
        internal validation split does the early stopping), if ``refit=True``.
    """

    results: pd.DataFrame
    best_params: dict
    best_score: float
    metric: str
    best_estimator: Any = None
    fixed: dict = field(default_factory=dict)


def _indices(name: str, idx, n: int) -> np.ndarray:
    arr = np.asarray(idx)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be a non-empty 1-D array of integer row indices")
    if arr.min() < 0 or arr.max() >= n:
        raise ValueError(f"{name} must index rows 0..{n - 1}")
    if np.unique(arr).size != arr.size:
        raise ValueError(f"{name} contains repeated indices")
    return arr.astype(np.int64)


def _sample(space: dict, rng: np.random.Generator, n_candidates: int, per_architecture: int):
    """Draw architectures, then ``per_architecture`` (alpha, weight_decay) settings for each."""
    arch_keys = [k for k in space if k not in _PER_MODEL]
    model_keys = [k for k in space if k in _PER_MODEL]
    groups = []
    left = n_candidates
    while left > 0:
        arch = {k: space[k][int(rng.integers(len(space[k])))] for k in arch_keys}
        k = min(per_architecture, left)
        members = []
        for key in model_keys:
            values = space[key]
            pick = rng.choice(len(values), size=k, replace=k > len(values))
            for j in range(k):
                if len(members) <= j:
                    members.append({})
                members[j][key] = values[int(pick[j])]
        if not members:
            members = [{} for _ in range(k)]
        groups.append((arch, members))
        left -= k
    return groups


def random_search(
    n_candidates: int,
    Y,
    T,
    X,
    *,
    train,
    val,
    e=None,
    space: dict | None = None,
    per_architecture: int = 4,
    fixed: dict | None = None,
    metric: str = "auto",
    refit: bool = True,
    random_state: int | None = None,
    progress: bool = False,
) -> SearchResult:
    """Random hyper-parameter search for :class:`dowhy_cfr.CFR`, selected on validation units.

    Parameters
    ----------
    n_candidates : int
        Number of configurations to train.
    Y : array_like, shape (n,)
        Outcomes (0/1 outcomes are trained with log-loss and scored by policy risk).
    T : array_like of 0/1, shape (n,)
        Treatment.
    X : array_like, shape (n, d)
        Covariates (raw; standardised internally with the statistics of ``train`` + ``val``).
    train, val : array_like of int
        Disjoint row indices of the training and validation units. No other row is read.
    e : array_like of 0/1, shape (n,), optional
        Randomized-trial indicator; the policy risk (binary outcomes) uses the validation units
        with ``e = 1``. Default: all validation units.
    space : dict, optional
        Lists of values per hyper-parameter (any :class:`~dowhy_cfr.CFR` parameter of the core
        configuration). Default :data:`DEFAULT_SPACE`. Keys also in ``fixed`` are not searched.
    per_architecture : int, default 4
        Candidates per sampled architecture; they differ in ``alpha`` / ``weight_decay`` and train
        in one stacked pass.
    fixed : dict, optional
        Other :class:`~dowhy_cfr.CFR` parameters, e.g. ``{"ipm": "mmd2_lin", "n_iter": 1000}``.
    metric : {"auto", "nn_pehe", "policy_risk", "r_loss", "dr_loss"}, default "auto"
        Selection criterion; "auto" uses policy risk for 0/1 outcomes and nn-PEHE otherwise.
        ``"r_loss"`` and ``"dr_loss"`` first cross-fit the nuisance models (propensity, outcome
        regressions; :func:`dowhy_cfr.metrics.cross_fit_nuisances`) on the training and
        validation units, once for all candidates.
    refit : bool, default True
        Refit the best configuration on ``train`` + ``val`` with :class:`~dowhy_cfr.CFR`.
    random_state : int, optional
        Seed of the sampling, the initial weights and the mini-batches.
    progress : bool, default False
        Show a progress bar over the stacked passes.

    Returns
    -------
    SearchResult

    Examples
    --------
    >>> import numpy as np
    >>> from dowhy_cfr.selection import random_search
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)); T = rng.binomial(1, 0.4, 300)
    >>> Y = X[:, 0] + T * (1 + X[:, 1]) + rng.normal(scale=0.1, size=300)
    >>> res = random_search(4, Y, T, X, train=np.arange(200), val=np.arange(200, 270),
    ...                     fixed={"n_iter": 100}, refit=False, random_state=0)
    >>> len(res.results)
    4
    """
    from .estimator import CFR

    V.check_int("n_candidates", n_candidates, 1)
    V.check_int("per_architecture", per_architecture, 1)
    if fitting.treatment_kind(CFR(**dict(fixed or {})), T) == "continuous":
        raise NotImplementedError("random_search scores binary treatments (policy risk, "
                                  "nearest-neighbour PEHE); T is continuous (a dose): compare "
                                  "fits on held-out data with dose_response instead")
    x, y, t, train, val, e_val = _search_data(Y, T, X, train, val, e)
    binary = bool(np.isin(y, (0.0, 1.0)).all()) and np.unique(y).size == 2
    if metric == "auto":
        metric = "policy_risk" if binary else "nn_pehe"
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is invalid: choose 'auto' or one of "
                         f"{', '.join(map(repr, METRICS))}")
    fixed = dict(fixed or {})
    space = dict(DEFAULT_SPACE if space is None else space)
    base_params = CFR(**fixed).get_params()
    unknown = [k for k in space if k not in fitting.CONFIG_FIELDS]
    if unknown:
        raise ValueError(f"cannot search {unknown}: searchable are {sorted(fitting.CONFIG_FIELDS)}")
    space = {k: list(v) for k, v in space.items() if k not in fixed}
    rng = np.random.default_rng(random_state)
    groups = _sample(space, rng, int(n_candidates), int(per_architecture))

    # the training and validation units only (training first), prepared as CFR.fit prepares
    n_tr = train.size
    positions = (np.arange(n_tr), np.arange(n_tr, x.shape[0]))
    score = _scorer(metric, x, y, t, positions[1], e_val, random_state)
    rows, sampled = [], []  # per candidate: result row, sampled hyper-parameters
    for g, (arch, members) in enumerate(_progress(groups, progress)):
        params = {**base_params, **arch, "verbose": 0}
        if params.get("head_form") == "auto":
            raise ValueError("head_form='auto' chooses the form within a fit; a random search "
                             "compares forms itself: search head_form over ['separate', "
                             "'robinson'], or fix one")
        if params["batch_size"] != "auto":  # "auto" resolves to at most the training units
            params["batch_size"] = int(min(params["batch_size"], n_tr))
        settings = fitting.FitSettings.of(CFR(**params))
        data, _ = fitting.with_unit_propensity(settings, fitting.prepare(settings, y, t, x),
                                               0 if random_state is None else random_state)
        alphas = [m.get("alpha", settings.config_params["alpha"]) for m in members]
        taus, best = _train_group(settings, data, positions, members, rng)
        for j, m in enumerate(members):
            sampled.append({**arch, **m})
            row = {"candidate": len(rows), "group": g, **arch, **m}
            if "alpha" not in m:
                row["alpha"] = alphas[j]
            if taus is None or not np.isfinite(taus[j]).all():
                row.update(score=np.inf, best_step=-1)
            else:
                row.update(score=score(taus[j]), best_step=int(best[j]))
            rows.append(row)

    results = pd.DataFrame(rows).sort_values("score", kind="stable").reset_index(drop=True)
    best = results.iloc[0]
    if not np.isfinite(best["score"]):
        raise TrainingDivergedError("every candidate diverged; narrow the search space")
    best_params = {k: V.plain(v) for k, v in sampled[int(best["candidate"])].items()}
    if "batch_size" in best_params:
        best_params["batch_size"] = int(min(best_params["batch_size"], train.size))
    estimator = None
    if refit:
        kw = {**fixed, **best_params}
        kw.setdefault("random_state", random_state)
        estimator = CFR(**kw).fit(y, t, X=x)
    return SearchResult(results=results, best_params=best_params,
                        best_score=float(best["score"]), metric=metric,
                        best_estimator=estimator, fixed=fixed)


def _search_data(Y, T, X, train, val, e):
    """The rows of the training + validation units (training first) and the validation units'
    randomized-trial indicator; no other row of ``X``, ``Y``, ``T`` or ``e`` is read."""
    x_all = np.asarray(X, dtype=float)
    if x_all.ndim != 2:
        raise ValueError(f"X must be 2-D; got shape {x_all.shape}")
    n = x_all.shape[0]
    train = _indices("train", train, n)
    val = _indices("val", val, n)
    if np.intersect1d(train, val).size:
        raise ValueError("train and val must be disjoint")
    units = np.concatenate([train, val])
    x = x_all[units]
    y = np.asarray(Y, dtype=float).reshape(-1)
    t = np.asarray(T, dtype=float).reshape(-1)
    if y.shape[0] != n or t.shape[0] != n:
        raise ValueError("Y, T and X must have the same number of rows")
    y, t = y[units], t[units]
    if not np.isfinite(x).all() or not np.isfinite(y).all():
        raise ValueError("X and Y must be finite on the training and validation units")
    if not np.isin(t, (0.0, 1.0)).all():
        raise ValueError("T must be 0/1")
    e_val = None if e is None else np.asarray(e, dtype=float).reshape(-1)[val]
    return x, y, t, train, val, e_val


def _progress(groups, progress: bool):
    if not progress:
        return groups
    from tqdm.auto import tqdm

    return tqdm(groups, desc="random search", leave=False)


def _train_group(settings, data, positions, members, rng):
    """Train one architecture's candidates in one stacked pass of the fit path (per-member alpha
    and weight decay, the fixed training/validation split); their effects on the validation
    units (K, n_val) and best steps, or (None, None) when every candidate diverged."""
    tr_pos, va_pos = positions
    plans = [P.MemberPlan(seed, split=(tr_pos, va_pos), params=dict(m), ensemble=i)
             for i, (seed, m) in enumerate(zip(P.draw_seeds(rng, len(members)), members))]
    try:
        trained = fitting.train_members(settings, plans, datasets=[data], on_failure="flag")
    except TrainingDivergedError:
        return None, None
    mu = trained.outputs(data.xw[va_pos])  # (K, 2, n_val)
    tau = mu[:, 1] - mu[:, 0]
    tau[trained.failed] = np.nan
    return tau, trained.members.best_iteration


def _scorer(metric, x, y, t, va_pos, e_val, random_state):
    """The criterion as a function of a candidate's effects on the validation units."""
    if metric == "nn_pehe":
        # supplement C.1: neighbours (raw covariates) among the training + validation units
        return lambda tau: nn_pehe(tau, x[va_pos], y[va_pos], t[va_pos], x_ref=x, y_ref=y,
                                   t_ref=t)
    if metric == "policy_risk":
        return lambda tau: policy_risk(tau, y[va_pos], t[va_pos], e_val)
    seed = None if random_state is None else sklearn_seed(random_state)
    e, m, mu0, mu1 = (v[va_pos] for v in cross_fit_nuisances(x, y, t, random_state=seed))
    yv, tv = y[va_pos], t[va_pos]
    if metric == "r_loss":
        return lambda tau: r_loss(tau, yv, tv, m, e)
    return lambda tau: dr_loss(tau, yv, tv, e, mu0, mu1)
