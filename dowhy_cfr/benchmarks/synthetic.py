"""Synthetic benchmark: Nie & Wager (2021) designs A-D and design E, where ``tau(x)`` is known.

Commands (see ``docs/benchmarks.md``):

``synthetic``
    per (design, n, seed, method): fit on ``n`` simulated units
    (:func:`dowhy_cfr.datasets.synthetic.simulate`), then measure root PEHE on ``--n-test``
    fresh units of the same design, the ATE error on the training units (estimated ``ate(X)``
    minus the training units' mean ``tau``), the 95% ATE interval (lower, upper, covered,
    width), the coverage and mean width of pointwise ``tau(x)`` intervals on the test units,
    and the wall seconds of the fit.
``coverage``
    the same runs over many simulated data sets (default 200) for the methods that have
    intervals, summarised as interval coverage with its Monte Carlo standard error.

Intervals are whatever the fitted estimator's ``ate_interval`` / ``effect_interval`` return; a
method without intervals (an EconML metalearner fitted without inference, a CFR fitted with
``inference=None``) gets NaN. CFR is fitted with ``--cfr-inference`` (default "auto": CFR's
analytic intervals of the doubly robust ATE, see ``docs/debiased.md``; CFR has no pointwise
interval then, so its tau(x) columns are NaN unless ``--cfr-inference bootstrap``).

Methods use only the estimators' public API: ``fit(Y, T, X=X, W=W, inference=...)``,
``effect``, ``ate``, ``ate_interval``, ``effect_interval``. On design E the methods that take
``W`` (CFR/TARNet and the DML/DR learners) get ``X`` as effect modifiers and ``W`` as controls;
the T- and X-learner take no ``W`` and are fitted and evaluated on ``[X, W]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from ..datasets.synthetic import DESIGNS, SyntheticData, population_ate, simulate
from . import report
from ._runner import TaskPool, add_threads_argument, chunks, progress_bar
from .methods import parse_cfr_params

__all__ = ["SYNTHETIC_METHODS", "EXTRA_PEERS", "CFR_FAMILY", "INTERVAL_METHODS", "ROW_COLUMNS",
           "QUARTILE_COLUMNS", "ProjectionCATE", "interval_coverage", "quartile_coverage",
           "width_error_rank",
           "pointwise_interval", "make_estimator",
           "cfr_inference", "run_data", "run_one", "run_synthetic", "summarize_synthetic", "synthetic_markdown", "add_parsers",
           "run_command"]

#: Methods of the synthetic benchmark, in table order.
SYNTHETIC_METHODS = ("CFR", "TARNet", "CFR-paper", "CFR-ens5", "CFR-plugin", "CFR-cf5", "CFR-cf2",
                     "CFR-projection", "LinearDML", "CausalForestDML", "DRLearner", "XLearner",
                     "TLearner")
#: dowhy_cfr estimators.
#: ``CFR-paper``: the paper's IHDP configuration (``CFR(**PAPER_IHDP)``: one network of 3 x 200
#: and 3 x 100 units, alpha 0.05; the defaults before issue 30);
#: ``CFR-plugin``: ``CFR(debias=None)`` (the heads' plug-in effects, no analytic intervals);
#: ``CFR-cf5``/``CFR-cf2``: five/two members as cross-fitting folds (``n_ensemble=5|2,
#: cross_fit=True``); ``CFR-projection``: the default CFR with its best linear projection on X
#: as the CATE (:class:`ProjectionCATE`).
CFR_FAMILY = ("CFR", "TARNet", "CFR-paper", "CFR-ens5", "CFR-plugin", "CFR-cf5", "CFR-cf2",
              "CFR-projection")
#: Peers :func:`make_estimator` also builds (used by the realistic benchmark):
#: ``SLearner(overall_model=GBR)`` and stochtree's Bayesian causal forest (:class:`.methods.BCF`).
EXTRA_PEERS = ("SLearner", "BCF")
#: Methods with (analytic or forest) intervals without extra options; the default of ``coverage``.
INTERVAL_METHODS = ("LinearDML", "CausalForestDML", "DRLearner")
#: Methods whose ``fit`` takes ``W`` (the others see ``[X, W]`` as X on design E).
_TAKES_W = CFR_FAMILY + INTERVAL_METHODS
#: Columns of the per-run CSV.
#: Coverage and mean width of the pointwise tau(x) intervals within each quartile of the true
#: tau on the test units (:func:`quartile_coverage`; q1: the smallest effects, q4: the largest).
QUARTILE_COLUMNS = [f"tau_{what}_q{q}" for q in range(1, 5) for what in ("coverage", "width")]
ROW_COLUMNS = ["design", "n", "seed", "method", "pehe", "ate", "ate_true", "ate_sample", "ate_error",
               "ate_abs_error", "ate_lower", "ate_upper", "ate_covered", "ate_width",
               "tau_coverage", "tau_width", *QUARTILE_COLUMNS, "tau_width_rank", "time_s",
               "error"]
_METRICS = ["ate_abs_error", "pehe", "ate_covered", "ate_width", "tau_coverage", "tau_width",
            *QUARTILE_COLUMNS, "tau_width_rank", "time_s"]


# ------------------------------------------------------------------------------ methods
def _gb_regressor(seed: int, tiny: bool):
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(n_estimators=10 if tiny else 100, max_depth=3,
                                     random_state=seed)


def _gb_classifier(seed: int, tiny: bool):
    from sklearn.ensemble import GradientBoostingClassifier

    return GradientBoostingClassifier(n_estimators=10 if tiny else 100, max_depth=3,
                                      random_state=seed)


class ProjectionCATE:
    """Benchmark method ``CFR-projection``: a CFR whose CATE is its doubly robust best linear
    projection on X (:meth:`dowhy_cfr.CFR.best_linear_projection`),
    tau_hat(x) = beta_0 + (x - mean of the fitted X) @ beta; the ATE and its interval are the
    CFR's (beta_0 is its AIPW ATE). No pointwise intervals."""

    def __init__(self, cfr):
        self.cfr = cfr

    def fit(self, Y, T, *, X, W=None, inference="auto"):
        self.cfr.fit(Y, T, X=X, W=W, inference=inference)
        self.projection_ = self.cfr.best_linear_projection(X)  # the table, intervals included
        self.x_mean_ = np.asarray(X, dtype=float).mean(0)
        return self

    def effect(self, X):
        beta = self.projection_["estimate"].to_numpy()
        return beta[0] + (np.asarray(X, dtype=float) - self.x_mean_) @ beta[1:]

    def ate(self, X):
        return float(np.mean(self.effect(X)))

    def ate_interval(self, X, alpha=0.05):
        return self.cfr.ate_interval(X, alpha=alpha)

    def effect_interval(self, X, alpha=0.05):
        raise NotImplementedError("CFR-projection has no pointwise intervals")


def _cfr(method: str, seed: int, settings: dict):
    from ..estimator import CFR, TARNet
    from .methods import TINY_NET

    kw: dict = dict(random_state=seed, verbose=0)
    if settings["tiny"]:
        kw.update(TINY_NET)
    if settings["n_iter"] is not None:
        kw["n_iter"] = int(settings["n_iter"])
    # candidate defaults (the realistic benchmark's --cfr-params); TARNet has no alpha
    kw.update({k: v for k, v in (settings.get("cfr_params") or {}).items()
               if not (method == "TARNet" and k == "alpha")})
    if method == "TARNet":
        return TARNet(**kw)
    if method == "CFR-paper":
        from ..core import PAPER_IHDP

        return CFR(**{**kw, **PAPER_IHDP})
    if method == "CFR-ens5":
        return CFR(**{**kw, "n_ensemble": 5})
    if method == "CFR-plugin":
        return CFR(**{**kw, "debias": None})
    if method in ("CFR-cf5", "CFR-cf2"):
        return CFR(**{**kw, "n_ensemble": int(method[-1]), "cross_fit": True})
    if method == "CFR-projection":
        return ProjectionCATE(CFR(**kw))
    return CFR(**kw)


def make_estimator(method: str, *, seed: int, settings: dict):
    """An unfitted estimator by table name: ``SYNTHETIC_METHODS`` or ``EXTRA_PEERS``
    (choices in ``docs/benchmarks.md``).

    ``settings``: ``tiny`` (small networks and forests), ``n_iter`` (CFR steps or None) and
    optionally ``cfr_params`` (keyword arguments for every CFR-family estimator; ``alpha`` is
    left out for TARNet, ``n_ensemble``/``debias``/``cross_fit`` of the named variants win).
    """
    tiny = settings["tiny"]
    if method in CFR_FAMILY:
        return _cfr(method, seed, settings)
    if method == "LinearDML":
        from econml.dml import LinearDML

        return LinearDML(model_y=_gb_regressor(seed, tiny), model_t=_gb_classifier(seed, tiny),
                         discrete_treatment=True, cv=2, random_state=seed)
    if method == "CausalForestDML":
        from econml.dml import CausalForestDML

        return CausalForestDML(model_y=_gb_regressor(seed, tiny),
                               model_t=_gb_classifier(seed, tiny), discrete_treatment=True,
                               n_estimators=12 if tiny else 100, cv=2, n_jobs=1,
                               random_state=seed)
    if method == "DRLearner":
        from econml.dr import DRLearner

        return DRLearner(model_propensity=_gb_classifier(seed, tiny),
                         model_regression=_gb_regressor(seed, tiny), min_propensity=0.01,
                         cv=2, random_state=seed)
    if method == "XLearner":
        from econml.metalearners import XLearner

        return XLearner(models=_gb_regressor(seed, tiny),
                        propensity_model=_gb_classifier(seed, tiny))
    if method == "TLearner":
        from econml.metalearners import TLearner

        return TLearner(models=_gb_regressor(seed, tiny))
    if method == "SLearner":
        from econml.metalearners import SLearner

        return SLearner(overall_model=_gb_regressor(seed, tiny))
    if method == "BCF":
        from .methods import BCF

        return BCF(random_state=seed, tiny=tiny)
    raise ValueError(f"unknown method {method!r}; choose from "
                     f"{', '.join(SYNTHETIC_METHODS + EXTRA_PEERS)}")


def cfr_inference(spec: str | None, seed: int):
    """The ``inference`` argument of ``CFR.fit`` for ``--cfr-inference``.

    ``"none"``/None -> None; ``"bootstrap"`` or ``"bootstrap:B"`` -> a seeded
    ``CFRBootstrapInference(B)`` (B = 100 by default); any other string is passed to ``fit``
    unchanged (e.g. an inference name the estimator adds later).
    """
    if spec is None or str(spec).lower() == "none":
        return None
    name, _, count = str(spec).partition(":")
    if name.lower() == "bootstrap":
        from .. import CFRBootstrapInference

        return CFRBootstrapInference(int(count) if count else 100, random_state=seed)
    return spec


def _features(method: str, x, w):
    """``(X, W)`` as the method is fitted and evaluated on them."""
    if w is None or method in _TAKES_W:
        return x, w
    return np.hstack([x, w]), None


def _fit(est, method: str, y, t, x, w, settings: dict, seed: int):
    if method in CFR_FAMILY:
        return est.fit(y, t, X=x, W=w, inference=cfr_inference(settings["cfr_inference"], seed))
    if method in ("XLearner", "TLearner"):
        return est.fit(y, t, X=x)
    return est.fit(y, t, X=x, W=w)


# ------------------------------------------------------------------------------ metrics
def interval_coverage(truth, lower, upper) -> tuple[float, float]:
    """Share of ``truth`` inside ``[lower, upper]`` and the mean width ``upper - lower``.

    Parameters
    ----------
    truth, lower, upper : array_like, broadcastable to one shape

    Returns
    -------
    coverage, width : float
        NaN (both) when any bound is missing (NaN), i.e. the method has no interval.

    Examples
    --------
    >>> interval_coverage([0.0, 1.0, 2.0], [-1.0, 1.5, 1.0], [1.0, 2.0, 3.0])
    (0.6666666666666666, 1.5)
    """
    truth, lower, upper = np.broadcast_arrays(*(np.asarray(a, dtype=float)
                                                for a in (truth, lower, upper)))
    if truth.size == 0 or np.isnan(lower).any() or np.isnan(upper).any():
        return float("nan"), float("nan")
    covered = (lower <= truth) & (truth <= upper)
    return float(covered.mean()), float(np.mean(upper - lower))


def _constant(values: np.ndarray) -> bool:
    """Whether ``values`` do not vary beyond float rounding (their range at most 1e-12 of their
    largest magnitude, or of 1)."""
    return bool(np.ptp(values) <= 1e-12 * max(1.0, float(np.abs(values).max())))


def _per_unit(bound, shape) -> np.ndarray:
    """An interval bound (a scalar or one value per unit) as floats of the units' ``shape``."""
    bound = np.asarray(bound, dtype=float)
    return np.broadcast_to(bound.reshape(-1) if bound.ndim else bound, shape)


def quartile_coverage(truth, lower, upper) -> dict:
    """Coverage and mean width of pointwise intervals within each quartile of the true effects.

    The units are ranked by ``truth`` (ties in their given order) and split into four groups of
    (nearly) equal size; q1 holds the smallest effects, q4 the largest. Intervals that cover on
    average can still miss the extremes of tau(x), where an estimate shrunk towards the mean is
    biased; the outer quartiles show it.

    Parameters
    ----------
    truth : array_like of shape (m,)
        The true effects of the units.
    lower, upper : array_like
        The intervals, broadcastable to (m,) (NaN: the method has none).

    Returns
    -------
    dict
        ``tau_coverage_q1``, ``tau_width_q1``, ..., ``tau_width_q4`` (:data:`QUARTILE_COLUMNS`);
        all NaN for a method without intervals, for fewer than 4 units, or where tau is
        constant (its quartiles are not defined).

    Examples
    --------
    >>> out = quartile_coverage([1, 2, 3, 4, 5, 6, 7, 8], 0.5, 6.5)
    >>> out["tau_coverage_q1"], out["tau_coverage_q4"], out["tau_width_q4"]
    (1.0, 0.0, 6.0)
    """
    out = dict.fromkeys(QUARTILE_COLUMNS, float("nan"))
    truth = np.asarray(truth, dtype=float).reshape(-1)
    if truth.size < 4 or _constant(truth):
        return out
    lower, upper = (_per_unit(a, truth.shape) for a in (lower, upper))
    for q, rows in enumerate(np.array_split(np.argsort(truth, kind="stable"), 4), start=1):
        cov, width = interval_coverage(truth[rows], lower[rows], upper[rows])
        out[f"tau_coverage_q{q}"], out[f"tau_width_q{q}"] = cov, width
    return out


def width_error_rank(truth, estimate, lower, upper) -> float:
    """Do the pointwise intervals say where the errors are? Spearman's rank correlation, over
    the units, between an interval's width and the estimate's absolute error there.

    1: the widest intervals sit where the errors are largest; 0: the widths say nothing about
    which units are estimated worse (a band of one width, or widths that follow noise). An
    interval can cover 95 % of the units at any value of it: coverage says the widths are large
    enough on average, this says whether they are large in the right places.

    Parameters
    ----------
    truth, estimate : array_like of shape (m,)
        The true and the estimated effects of the units.
    lower, upper : array_like
        The intervals, broadcastable to (m,).

    Returns
    -------
    float
        NaN for a method without intervals (a NaN bound), fewer than 3 units, or widths or
        errors that do not vary (a constant effect's intervals, an exact estimate).

    Examples
    --------
    >>> width_error_rank([0.0, 0.0, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4], [-1, -2, -3, -4], [1, 2, 3, 4])
    1.0
    """
    from scipy.stats import spearmanr

    truth = np.asarray(truth, dtype=float).reshape(-1)
    error = np.abs(np.asarray(estimate, dtype=float).reshape(-1) - truth)
    lower, upper = (_per_unit(a, truth.shape) for a in (lower, upper))
    width = upper - lower
    if truth.size < 3 or np.isnan(width).any() or _constant(width) or np.ptp(error) == 0:
        return float("nan")
    return float(spearmanr(width, error)[0])


def pointwise_interval(fn, x, alpha: float):
    """``fn(x, alpha=alpha)`` as two float arrays, or NaN when the method has no interval
    (``fn`` None; EconML raises AttributeError when ``inference`` is None; other errors
    propagate)."""
    if fn is None:
        return np.nan, np.nan
    try:
        lo, hi = fn(x, alpha=alpha)
    except (AttributeError, NotImplementedError):
        return np.nan, np.nan
    return (np.asarray(lo, dtype=float).reshape(-1), np.asarray(hi, dtype=float).reshape(-1))


def _data_seed(design: str, n: int, seed: int, stream: int) -> list[int]:
    """Seed of the training (stream 0) or test (stream 1) units of one run."""
    return [int(seed), DESIGNS.index(design), int(n), int(stream)]


def run_data(design: str, n: int, seed: int, *, d: int = 6, sigma: float = 1.0,
             n_test: int = 1000) -> tuple[SyntheticData, SyntheticData]:
    """The training units (``n``) and fresh test units (``n_test``) of the benchmark run
    ``(design, n, seed)``: what :func:`run_one` fits and evaluates on."""
    train = simulate(design, n, d=d, sigma=sigma, random_state=_data_seed(design, n, seed, 0))
    test = simulate(design, n_test, d=d, sigma=sigma, random_state=_data_seed(design, n, seed, 1))
    return train, test


def _empty_row(design, n, seed, method) -> dict:
    row = {c: np.nan for c in ROW_COLUMNS}
    row.update(design=design, n=int(n), seed=int(seed), method=method, error="")
    return row


def run_one(design: str, n: int, seed: int, method: str, settings: dict) -> dict:
    """Simulate one data set, fit one method, return its row (see ``ROW_COLUMNS``).

    Parameters
    ----------
    design, n, seed : the data set (training units from ``seed``, ``settings["n_test"]`` test
        units from an independent stream of the same seed)
    method : one of ``SYNTHETIC_METHODS``
    settings : dict with ``n_iter``, ``tiny``, ``d``, ``sigma``, ``n_test``, ``alpha`` (interval
        level 1 - alpha), ``cfr_inference``, ``threads``

    Returns
    -------
    dict
        A failed fit gives a row of NaN with the exception in ``error``.
    """
    row = _empty_row(design, n, seed, method)
    train, test = run_data(design, n, seed, d=settings["d"], sigma=settings["sigma"],
                           n_test=settings["n_test"])
    x, w = _features(method, train.x, train.w)
    x_test, _ = _features(method, test.x, test.w)
    try:
        with _limits(settings.get("threads", 1)), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = make_estimator(method, seed=seed, settings=settings)
            start = time.perf_counter()
            _fit(est, method, train.y, train.t, x, w, settings, seed)
            row["time_s"] = time.perf_counter() - start
            row.update(_metrics(est, x, x_test, train.tau, test.tau, settings["alpha"],
                                population_ate(design)))
    except Exception as exc:  # noqa: BLE001 - one failed fit must not end a long run
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return row


#: CFR-family methods whose data sets can train in one stack (``--stack``).
_STACKABLE = ("CFR", "TARNet", "CFR-paper", "CFR-ens5", "CFR-plugin", "CFR-cf5", "CFR-cf2")


def stackable(method: str, settings: dict) -> bool:
    """Whether ``method``'s data sets train in stacks of ``settings["stack"]``: CFR-family
    methods with the default, analytic or no inference."""
    return (settings.get("stack", 1) > 1 and method in _STACKABLE
            and str(settings["cfr_inference"]).lower() in ("auto", "aipw", "none"))


def run_stack(design: str, n: int, seeds: list, method: str, settings: dict) -> list[dict]:
    """:func:`run_one` for several data sets of one (design, n, method) at once: one
    ``CFR.fit_stacked`` pass in which data set ``s`` trains with the network seeds that
    ``CFR(random_state=s).fit`` draws (so its fit is that fit, up to float rounding). ``time_s``
    is the stack's time divided by the number of data sets."""
    from ..plans import draw_seeds

    rows = [_empty_row(design, n, s, method) for s in seeds]
    data = [run_data(design, n, s, d=settings["d"], sigma=settings["sigma"],
                     n_test=settings["n_test"]) for s in seeds]
    try:
        with _limits(settings.get("threads", 1)), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = make_estimator(method, seed=seeds[0], settings=settings)
            member_seeds = [draw_seeds(s, est.n_ensemble) for s in seeds]
            start = time.perf_counter()
            fits = est.fit_stacked([tr.y for tr, _ in data], [tr.t for tr, _ in data],
                                   X=[tr.x for tr, _ in data],
                                   W=None if data[0][0].w is None else [tr.w for tr, _ in data],
                                   seeds=member_seeds)
            seconds = (time.perf_counter() - start) / len(seeds)
            for row, fit, (train, test) in zip(rows, fits, data):
                row["time_s"] = seconds
                row.update(_metrics(fit, train.x, test.x, train.tau, test.tau,
                                    settings["alpha"], population_ate(design)))
    except Exception as exc:  # noqa: BLE001 - one failed stack must not end a long run
        for row in rows:
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return rows


def _run_task(design, n, seeds, method, settings) -> list[dict]:
    """One task of :func:`run_synthetic`: a stack of data sets, or one (design, n, seed)."""
    if isinstance(seeds, list):
        return run_stack(design, n, seeds, method, settings)
    return [run_one(design, n, seeds, method, settings)]


def _metrics(est, x, x_test, tau_train, tau_test, alpha: float, ate_true: float) -> dict:
    """Accuracy and intervals of a fitted ``est``: √PEHE on the test units; the ATE, its error
    and its interval's coverage against the population ATE ``ate_true`` (``ate_sample``: the
    mean of tau over the training units)."""
    tau_hat = np.asarray(est.effect(x_test), dtype=float).reshape(-1)
    ate = float(np.asarray(est.ate(x), dtype=float).reshape(-1)[0])
    lo, hi = pointwise_interval(est.ate_interval, x, alpha)
    covered, width = interval_coverage(ate_true, lo, hi)
    tau_lo, tau_hi = pointwise_interval(getattr(est, "effect_interval", None), x_test, alpha)
    tau_cov, tau_width = interval_coverage(tau_test, tau_lo, tau_hi)
    return dict(pehe=float(np.sqrt(np.mean((tau_hat - tau_test) ** 2))), ate=ate,
                ate_true=ate_true, ate_sample=float(np.mean(tau_train)),
                ate_error=ate - ate_true, ate_abs_error=abs(ate - ate_true),
                ate_lower=float(np.ravel(lo)[0]), ate_upper=float(np.ravel(hi)[0]),
                ate_covered=covered, ate_width=width, tau_coverage=tau_cov, tau_width=tau_width,
                tau_width_rank=width_error_rank(tau_test, tau_hat, tau_lo, tau_hi),
                **quartile_coverage(tau_test, tau_lo, tau_hi))


def _limits(threads: int):
    """Limit BLAS/OpenMP threads (sklearn's gradient boosting, numpy) while fitting; 0 = no
    limit."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=int(threads) if int(threads) > 0 else None)


# ------------------------------------------------------------------------------ summaries
def _succeeded(error: pd.Series) -> pd.Series:
    """Rows without an error message (empty string or NaN, as read back from a CSV)."""
    return error.isna() | (error.astype(str) == "")


def summarize_synthetic(raw: pd.DataFrame) -> pd.DataFrame:
    """Per (design, n, method): run count, failures and the mean of each metric.

    Coverage is the mean of ``ate_covered`` over runs with an interval, with its Monte Carlo
    standard error ``sqrt(p (1 - p) / runs)``; ``*_se`` columns are standard errors over runs;
    ``tau_coverage_q1_mean`` ... ``tau_width_q4_mean``: the τ(x) intervals within each quartile
    of the true τ (:func:`quartile_coverage`), averaged over runs.
    """
    rows = []
    for (design, n, method), g in raw.groupby(["design", "n", "method"], sort=False):
        ok = g[_succeeded(g["error"])]
        row = dict(design=design, n=int(n), method=method, runs=len(ok),
                   failed=len(g) - len(ok))
        for m in _METRICS:  # a raw file from before a metric existed: NaN
            v = ok[m].to_numpy(dtype=float) if m in ok else np.array([])
            v = v[~np.isnan(v)]
            row[f"{m}_mean"] = float(v.mean()) if v.size else np.nan
            row[f"{m}_se"] = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else np.nan
        p, k = row["ate_covered_mean"], ok["ate_covered"].notna().sum()
        row["ate_coverage_mc_se"] = float(np.sqrt(p * (1 - p) / k)) if k else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def _cell(mean, se=np.nan, digits: int = 3) -> str:
    if np.isnan(mean):
        return "—"
    return f"{mean:.{digits}f}" if np.isnan(se) else f"{mean:.{digits}f} ± {se:.{digits}f}"


def _quartile_cells(r) -> list:
    """τ(x) coverage and width in the outer quartiles of τ (Q1, Q4) of a summary row (— where
    the summary predates them or τ is constant)."""
    return [_cell(r.get(f"tau_{what}_q{q}_mean", np.nan), digits=2 if what == "coverage" else 3)
            for q in (1, 4) for what in ("coverage", "width")]


def synthetic_markdown(summary: pd.DataFrame, *, coverage: bool = False) -> str:
    """Markdown table of :func:`summarize_synthetic` (mean ± s.e. over runs; — = no interval).

    ``coverage=True`` puts the interval columns first, with Monte Carlo standard errors, and
    the τ(x) coverage and width within the lowest (Q1) and highest (Q4) quartile of the true
    τ on the test units (— where τ is constant, as on design C).
    """
    if coverage:
        header = ["design", "n", "method", "runs", "ATE coverage", "ATE width",
                  "τ(x) coverage", "τ(x) width", "τ(x) cov. Q1", "Q1 width", "τ(x) cov. Q4",
                  "Q4 width", "width~error rank", "|ATE error|", "s / fit"]
    else:
        header = ["design", "n", "method", "runs", "|ATE error|", "√PEHE", "ATE coverage",
                  "ATE width", "τ(x) coverage", "s / fit"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, r in summary.iterrows():
        runs = f"{r['runs']}" + (f" ({r['failed']} failed)" if r["failed"] else "")
        cov = _cell(r["ate_covered_mean"], r["ate_coverage_mc_se"] if coverage else np.nan, 2)
        common = [str(r["design"]), str(r["n"]), str(r["method"]), runs]
        if coverage:
            cells = [cov, _cell(r["ate_width_mean"]), _cell(r["tau_coverage_mean"], digits=2),
                     _cell(r["tau_width_mean"]), *_quartile_cells(r),
                     _cell(r.get("tau_width_rank_mean", np.nan), digits=2),
                     _cell(r["ate_abs_error_mean"]), _cell(r["time_s_mean"], digits=1)]
        else:
            cells = [_cell(r["ate_abs_error_mean"], r["ate_abs_error_se"]),
                     _cell(r["pehe_mean"], r["pehe_se"]), cov, _cell(r["ate_width_mean"]),
                     _cell(r["tau_coverage_mean"], digits=2), _cell(r["time_s_mean"], digits=1)]
        lines.append("| " + " | ".join(common + cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ runner
def run_synthetic(designs, sizes, seeds, methods, *, settings: dict, progress: bool = True,
                  workers: int = 1, threads: int = 1, coverage: bool = False):
    """Run every (design, n, seed, method) and summarise.

    Parameters
    ----------
    designs : list of str (``DESIGNS``); sizes : list of int (training units n);
    seeds : list of int (data sets); methods : list of str (``SYNTHETIC_METHODS``)
    settings : dict, see :func:`run_one`
    progress : bool, show a tqdm bar
    workers, threads : worker processes and torch threads in each
        (:class:`~dowhy_cfr.benchmarks._runner.TaskPool`; ``workers=1`` runs inline)
    coverage : bool, lay the markdown out for interval coverage (the ``coverage`` command)

    Returns
    -------
    raw : pandas.DataFrame (``ROW_COLUMNS``), summary : pandas.DataFrame, markdown : str
    """
    settings = dict(settings, threads=threads)
    tasks = []
    for d in designs:
        for n in sizes:
            for m in methods:
                if stackable(m, settings):
                    tasks += [(d, int(n), [int(s) for s in chunk], m, settings)
                              for chunk in chunks(list(seeds), settings["stack"])]
                else:
                    tasks += [(d, int(n), int(s), m, settings) for s in seeds]
    start = time.perf_counter()
    bar = progress_bar(len(tasks), "synthetic", progress)
    try:
        with TaskPool(workers, threads) as pool:
            rows = [r for rs in pool.map(_run_task, tasks, lambda i, _: bar.update(1))
                    for r in rs]
    finally:
        bar.close()
    wall = time.perf_counter() - start
    raw = pd.DataFrame(rows, columns=ROW_COLUMNS)
    _report_failures(raw)
    summary = summarize_synthetic(raw)
    what = "interval coverage" if coverage else "synthetic designs"
    md = [f"## Nie & Wager (2021) {what}: designs {','.join(designs)}, n = "
          f"{','.join(map(str, sizes))}, {len(seeds)} data set(s) each, mean ± s.e. over data "
          f"sets", "", synthetic_markdown(summary, coverage=coverage), "",
          f"Wall time {wall:.0f} s, {workers} worker process(es), {threads} torch thread(s).",
          "", _settings_line(settings)]
    return raw, summary, "\n".join(md)


def _report_failures(raw: pd.DataFrame) -> None:
    failed = raw[~_succeeded(raw["error"])]
    if len(failed):
        import sys

        first = failed.iloc[0]
        print(f"warning: {len(failed)} of {len(raw)} fits failed (left out of the summary); "
              f"first: {first['method']} on design {first['design']}, n={first['n']}, seed "
              f"{first['seed']}: {first['error']}", file=sys.stderr)


def _settings_line(settings: dict) -> str:
    n_iter = report.n_iter_label(settings["n_iter"])
    return (f"Settings: d={settings['d']}, sigma={settings['sigma']}, "
            f"{settings['n_test']} test units, intervals at {1 - settings['alpha']:.0%}, "
            f"CFR n_iter={n_iter}, tiny={settings['tiny']}, "
            f"cfr_inference={settings['cfr_inference']}. ATE error and coverage against the "
            f"population ATE; "
            f"√PEHE on the test units; — = the method returned no interval.")


# ------------------------------------------------------------------------------ CLI
def parse_methods(value: str) -> list[str]:
    """``--methods``: comma-separated ``SYNTHETIC_METHODS`` or ``EXTRA_PEERS`` (any case), or
    ``all`` (the ``SYNTHETIC_METHODS``)."""
    if value.strip().lower() == "all":
        return list(SYNTHETIC_METHODS)
    return report.parse_choices(value, SYNTHETIC_METHODS + EXTRA_PEERS, "method")


def parse_designs(value: str) -> list[str]:
    """``--designs``: comma-separated letters of ``DESIGNS`` or ``all``."""
    return report.parse_choices(value, DESIGNS, "design")


def parse_sizes(value: str) -> list[int]:
    """``--n``: comma-separated positive integers, e.g. ``500,2000``."""
    try:
        sizes = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a list of integers") from None
    if not sizes or min(sizes) < 20:
        raise argparse.ArgumentTypeError(f"{value!r}: give sample sizes of at least 20")
    return sizes


def parse_seeds(value: str) -> list[int]:
    """``--seeds``: ``0-3``, ``0,2,5-9`` (non-negative)."""
    try:
        seeds = report.parse_range(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: seeds must be >= 0")
    return seeds


def _alpha(value: str) -> float:
    a = float(value)
    if not 0 < a < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not in (0, 1)")
    return a


def _positive(value: str) -> int:
    k = int(value)
    if k < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive integer")
    return k


def _options(p: argparse.ArgumentParser):
    p.add_argument("--designs", type=parse_designs, default=list(DESIGNS),
                   help="comma-separated designs or 'all' (default A,B,C,D,E)")
    p.add_argument("--n", type=parse_sizes, default=[2000],
                   help="comma-separated training sizes, e.g. 500,2000,10000 (default 2000)")
    p.add_argument("--d", type=int, default=6, help="number of covariates (default 6)")
    p.add_argument("--sigma", type=float, default=1.0, help="noise sd (default 1)")
    p.add_argument("--n-test", type=_positive, default=1000,
                   help="fresh test units for √PEHE and τ(x) coverage (default 1000)")
    p.add_argument("--alpha", type=_alpha, default=0.05,
                   help="intervals at level 1 - alpha (default 0.05)")
    p.add_argument("--cfr-inference", default="auto",
                   help="inference passed to CFR/TARNet fit: 'auto' (default: analytic "
                        "intervals of the doubly robust ATE), 'none' (no intervals), 'bootstrap' or "
                        "'bootstrap:B' (CFRBootstrapInference with B replicas), or another name "
                        "the estimator accepts")
    p.add_argument("--n-iter", type=int, default=None,
                   help="training steps of CFR/TARNet (default: the estimator's 'auto')")
    p.add_argument("--tiny", action="store_true",
                   help="tiny networks, 10-tree boosting, 12-tree forests (smoke tests)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="directory for <command>_raw.csv, <command>_summary.csv, <command>.md")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--workers", type=int, default=1,
                   help="worker processes, each with --threads threads (default 1: inline)")
    p.add_argument("--cfr-params", type=parse_cfr_params, default={},
                   help='JSON object of keyword arguments for every CFR-family estimator, e.g. '
                        '\'{"batch_size": 256}\'')
    p.add_argument("--stack", type=_positive, default=1,
                   help="CFR-family data sets trained together in one CFR.fit_stacked pass, "
                        "each with the seeds of its own fit (default 1: one fit per data set)")
    add_threads_argument(p)


def add_parsers(sub) -> None:
    """Register the ``synthetic`` and ``coverage`` subcommands on ``sub`` (argparse)."""
    p = sub.add_parser("synthetic", help="Nie & Wager (2021) designs A-D and E: PEHE, ATE "
                                         "error, intervals, time")
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-3"),
                   help="data sets per (design, n), e.g. 0-3 (default) or 0,2,5-9")
    p.add_argument("--methods", type=parse_methods, default=list(SYNTHETIC_METHODS),
                   help="comma-separated methods or 'all' (default): "
                        + ", ".join(SYNTHETIC_METHODS))
    _options(p)

    p = sub.add_parser("coverage", help="coverage and width of 95%% intervals over many "
                                        "simulated data sets")
    p.add_argument("--datasets", type=_positive, default=200,
                   help="simulated data sets per (design, n): seeds 0..N-1 (default 200)")
    p.add_argument("--methods", type=parse_methods, default=None,
                   help="comma-separated methods (default: " + ",".join(INTERVAL_METHODS)
                        + ", plus CFR unless --cfr-inference is 'none')")
    _options(p)


def run_command(args) -> str:
    """Run ``synthetic`` or ``coverage`` from parsed arguments; write files; return markdown."""
    settings = dict(n_iter=args.n_iter, tiny=args.tiny, d=args.d, sigma=args.sigma,
                    n_test=args.n_test, alpha=args.alpha, cfr_inference=args.cfr_inference,
                    stack=args.stack, cfr_params=args.cfr_params)
    for design in args.designs:  # fail fast on bad --d / --sigma, naming the argument
        try:
            simulate(design, 2, d=args.d, sigma=args.sigma, random_state=0)
        except ValueError as exc:
            raise SystemExit(f"error: argument --d/--sigma: {exc}") from None
    coverage = args.command == "coverage"
    if coverage:
        seeds = list(range(args.datasets))
        methods = args.methods or (list(INTERVAL_METHODS) + (
            [] if str(args.cfr_inference).lower() == "none" else ["CFR"]))
    else:
        seeds, methods = args.seeds, args.methods
    raw, summary, md = run_synthetic(args.designs, args.n, seeds, methods, settings=settings,
                                     progress=not args.no_progress, workers=args.workers,
                                     threads=args.threads, coverage=coverage)
    report.write_outputs(args.out, args.command, raw, summary, md)
    return md
