r"""Continuous-treatment benchmark (issue 47): ``python -m dowhy_cfr.benchmarks dose``.

Per (design, seed, method): fit on the design's training units
(:func:`dowhy_cfr.datasets.dose.simulate_dose`: the VCNet simulation and the IHDP dose design
of the VCNet paper), then score

``adrf_mise``
    the mean over the scoring grid (the doses between the 5th and 95th percentile) of the
    squared error of the estimated average dose-response :math:`\hat\theta(t)`, against the
    population curve (the VCNet paper's AMSE, on that grid);
``ite_mise``
    the mean over test units and grid of :math:`(\hat\mu(x_i, t) - \mu(x_i, t))^2` (the
    individual curves' MISE of DRNet and ADMIT, out of sample); NaN for the DML peers, which
    estimate effects, not levels;
``effect_mise``
    the same for the level-free effect curves :math:`\mu(x_i, t) - \mu(x_i, t_{ref})`, with
    :math:`t_{ref}` the median dose: every method has these (the DML peers as
    ``effect(x, T0=t_ref, T1=t)``);
``band_coverage``, ``band_width``
    the share of grid points where the 95 % band of the average curve covers the true curve,
    and its mean width (CFR/TARNet: ``dose_response()``; NaN where a method has no band);
``ite_coverage``, ``ite_coverage_outer``, ``ite_width``
    the share of (test unit, grid dose) pairs where the 95 % interval of the unit's curve
    (``dose_response(X)``: the members' jackknife) covers the true :math:`\mu(x_i, t)`, the same
    share among the pairs whose true value lies in the outer quartiles of all of them (where
    the curves are extreme and a smoothed estimate is most biased), and the mean width;
``time_s``, ``cpu_s``
    the wall seconds of the fit (with its doubly robust stage / nuisances) and the CPU seconds
    of this process during it (all its threads; unlike the wall time, not inflated by other
    processes on a shared machine).

Methods: ``CFR`` and ``TARNet`` (defaults, ``treatment="continuous"``; the doubly robust
average curve), ``CFR-plugin`` (``debias=None``: the networks' mean curve), ``GPS-DR``
(Kennedy et al. 2017's local linear regression of the pseudo-outcome with boosted nuisances:
an outcome model on covariates and dose, the binned GPS), EconML's ``LinearDML`` and
``CausalForestDML`` with a continuous T (an effect linear in the dose, :math:`\theta(x)(t_1 -
t_0)`; their average curve is :math:`\bar y + \frac1n\sum_i \hat\theta(x_i)(t - t_i)`), and
``LinearDML-spline`` (a cubic spline featurizer of the dose: effects nonlinear in it), all with
gradient-boosting nuisances. ``CFR-binary`` is a default binary CFR on the same units with the
dose split at its median: its time only, for the cost of a continuous fit against a binary one
of the same size (back to back in one process).

``--coverage`` runs only the methods with a band (default CFR) over ``--seeds`` and reports
the band's coverage by region of the grid (the central 50 % and the rest).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from ..datasets.dose import DOSE_DESIGNS, DoseData, simulate_dose
from . import report
from ._runner import add_threads_argument, progress_bar
from .methods import parse_cfr_params

__all__ = ["DOSE_METHODS", "ROW_COLUMNS", "run_one", "run_dose", "summarize_dose",
           "dose_markdown", "add_parser", "run_command", "gps_dr"]

#: The methods of the dose benchmark, in table order.
DOSE_METHODS = ("CFR", "TARNet", "CFR-plugin", "GPS-DR", "LinearDML", "LinearDML-spline",
                "CausalForestDML", "CFR-binary")
#: Columns of the per-run CSV.
ROW_COLUMNS = ["design", "seed", "method", "adrf_mise", "ite_mise", "effect_mise",
               "band_coverage", "band_coverage_central", "band_width", "ite_coverage",
               "ite_coverage_outer", "ite_width", "time_s", "cpu_s", "error"]
_METRICS = ["adrf_mise", "ite_mise", "effect_mise", "band_coverage", "band_width",
            "ite_coverage", "ite_coverage_outer", "ite_width", "time_s", "cpu_s"]


# ------------------------------------------------------------------------------ methods
def _gb(seed: int, tiny: bool):
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(n_estimators=10 if tiny else 100, max_depth=3,
                                     random_state=seed)


def _cfr(method: str, seed: int, settings: dict):
    from ..estimator import CFR, TARNet
    from .methods import TINY_NET

    kw: dict = dict(random_state=seed, verbose=0, treatment="continuous")
    if settings.get("tiny"):
        kw.update(TINY_NET)
    if settings.get("n_iter") is not None:
        kw["n_iter"] = int(settings["n_iter"])
    kw.update({k: v for k, v in (settings.get("cfr_params") or {}).items()
               if not (method == "TARNet" and k == "alpha")})
    if method == "TARNet":
        return TARNet(**kw)
    if method == "CFR-plugin":
        return CFR(**{**kw, "debias": None})
    if method == "CFR-binary":
        return CFR(**{**kw, "treatment": "auto"})
    return CFR(**kw)


def _dml(method: str, seed: int, tiny: bool):
    from econml.dml import CausalForestDML, LinearDML

    if method == "CausalForestDML":
        return CausalForestDML(model_y=_gb(seed, tiny), model_t=_gb(seed, tiny),
                               discrete_treatment=False, n_estimators=12 if tiny else 100,
                               cv=2, n_jobs=1, random_state=seed)
    featurizer, model_t = None, _gb(seed, tiny)
    if method == "LinearDML-spline":
        from sklearn.multioutput import MultiOutputRegressor
        from sklearn.preprocessing import SplineTransformer

        featurizer = SplineTransformer(n_knots=4, degree=3, include_bias=False)
        model_t = MultiOutputRegressor(model_t)  # one boosting per spline feature of T
    return LinearDML(model_y=_gb(seed, tiny), model_t=model_t, discrete_treatment=False,
                     treatment_featurizer=featurizer, cv=2, random_state=seed)


def gps_dr(data: DoseData, seed: int, tiny: bool = False):
    r"""The ``GPS-DR`` peer: Kennedy et al. (2017)'s doubly robust average curve -- the local
    linear regression of the pseudo-outcome :math:`\xi_i = \rho_i + \hat m(t_i)` on the dose at
    the leave-one-out bandwidth -- with a boosted outcome model on (covariates, dose) and the
    binned GPS (:func:`dowhy_cfr.nuisance.cross_fit_gps`), both cross-fitted; its individual
    curves from the outcome model refitted on all training units. Returns (average curve on
    the grid, test units' curves on the grid, their curves at ``t_ref``)."""
    from ..adrf import BANDWIDTH_GRID, local_linear, loocv_bandwidth, weighted_residuals
    from ..core import dose_strata
    from ..nuisance import cross_fit_dose_outcomes, cross_fit_gps

    x, t, y = data.x, data.t, data.y
    fit_grid = np.linspace(t.min(), t.max(), 32)
    strata = dose_strata(t, 4)
    model = _gb(seed, tiny)
    own, curves = cross_fit_dose_outcomes(x, y, t, strata, fit_grid, random_state=seed,
                                          model=model)
    gps = cross_fit_gps(None, x, t, random_state=seed)
    xi = weighted_residuals(y, own, gps.weights(t)) + np.interp(t, fit_grid, curves.mean(0))
    h, _ = loocv_bandwidth(t, xi, [np.ptp(t) * b for b in BANDWIDTH_GRID])
    average = local_linear(data.grid, t, xi, h)[0]
    full = model.fit(np.column_stack([x, t]), y)
    m = len(data.x_test)

    def at(doses):
        xt = np.column_stack([np.repeat(data.x_test, len(doses), 0), np.tile(doses, m)])
        return full.predict(xt).reshape(m, len(doses))

    return average, at(data.grid), at(np.array([data.t_ref]))[:, 0]


def run_one(data: DoseData, method: str, seed: int, settings: dict) -> dict:
    """Fit ``method`` on ``data`` and score it (module docstring): one row."""
    row = dict(design=data.design, seed=seed, method=method, error="")
    grid, truth, curves = data.grid, data.adrf, data.curves_test
    true_effect = curves - data.outcome(np.full(len(data.x_test), data.t_ref), data.x_test)[:, None]
    start, cpu = time.perf_counter(), time.process_time()
    band = None
    if method == "CFR-binary":
        est = _cfr(method, seed, settings).fit(data.y, (data.t > np.median(data.t)).astype(int),
                                                X=data.x)
        row["time_s"], row["cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
        return row
    if method in ("CFR", "TARNet", "CFR-plugin"):
        est = _cfr(method, seed, settings).fit(data.y, data.t, X=data.x)
        row["time_s"], row["cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
        avg = est.dose_response(t_grid=grid)
        average, band = avg.estimate, (avg.lower, avg.upper)
        units = est.dose_response(data.x_test, t_grid=grid)
        individual = units.estimate
        at_ref = est.dose_response(data.x_test, t_grid=[data.t_ref]).estimate[:, 0]
        row.update(_unit_coverage(units, curves))
    elif method == "GPS-DR":
        average, individual, at_ref = gps_dr(data, seed, settings.get("tiny", False))
        row["time_s"], row["cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
    else:
        est = _dml(method, seed, settings.get("tiny", False))
        column = method == "LinearDML-spline"  # a featurizer takes T as a column

        def doses(v, size):
            v = np.broadcast_to(np.asarray(v, dtype=float), (size,))
            return v.reshape(-1, 1) if column else v

        n, m = len(data.t), len(data.x_test)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(data.y, doses(data.t, n), X=data.x)
        row["time_s"], row["cpu_s"] = time.perf_counter() - start, time.process_time() - cpu
        average = np.array([np.mean(est.effect(data.x, T0=doses(data.t, n), T1=doses(g, n)))
                            for g in grid]) + data.y.mean()
        effects = np.column_stack([est.effect(data.x_test, T0=doses(data.t_ref, m),
                                              T1=doses(g, m)) for g in grid])
        individual, at_ref = None, None
    row["adrf_mise"] = float(np.mean((average - truth) ** 2))
    if individual is not None:
        row["ite_mise"] = float(np.mean((individual - curves) ** 2))
        effects = individual - at_ref[:, None]
    else:
        row["ite_mise"] = float("nan")
    row["effect_mise"] = float(np.mean((effects - true_effect) ** 2))
    if band is not None and np.isfinite(band[0]).all():
        covered = (band[0] <= truth) & (truth <= band[1])
        central = np.abs(np.arange(len(grid)) - (len(grid) - 1) / 2) <= (len(grid) - 1) / 4
        row.update(band_coverage=float(covered.mean()),
                   band_coverage_central=float(covered[central].mean()),
                   band_width=float(np.mean(band[1] - band[0])))
    return row


def _warm_up(settings: dict) -> None:
    """A few steps of a continuous and a binary fit, untimed: the first fit of a process pays
    one-time costs (imports, torch's kernels) that are no part of either kind."""
    data = simulate_dose("vcnet", 10**6, n_train=200, n_test=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method, t in (("CFR", data.t), ("CFR-binary", (data.t > 0.5).astype(int))):
            _cfr(method, 0, {**settings, "n_iter": 5}).fit(data.y, t, X=data.x)


def run_dose(designs, seeds, methods, *, settings: dict, progress: bool = True) -> pd.DataFrame:
    """Every (design, seed, method) run in one process, the methods of a data set back to back
    (so that their times are comparable); one row each (:data:`ROW_COLUMNS`)."""
    rows = []
    _warm_up(settings)
    bar = progress_bar(len(designs) * len(seeds) * len(methods), "dose", progress)
    for design in designs:
        for seed in seeds:
            data = simulate_dose(design, seed)
            for method in methods:
                try:
                    with warnings.catch_warnings():
                        warnings.filterwarnings("ignore", message="batch_size=")
                        rows.append(run_one(data, method, seed, settings))
                except Exception as exc:  # noqa: BLE001 - a failing run is a row, not a crash
                    rows.append(dict(design=design, seed=seed, method=method,
                                     error=f"{type(exc).__name__}: {exc}"))
                bar.update(1)
    bar.close()
    return pd.DataFrame(rows).reindex(columns=ROW_COLUMNS)


def _unit_coverage(units, curves: np.ndarray) -> dict:
    """The units' curves' intervals against the true curves ``curves`` (m, G): their coverage,
    over all pairs and over the outer quartiles of the true values, and their mean width."""
    if units.lower is None or not np.isfinite(units.lower).all():
        return {}
    covered = (units.lower <= curves) & (curves <= units.upper)
    low, high = np.quantile(curves, [0.25, 0.75])
    outer = (curves < low) | (curves > high)
    return dict(ite_coverage=float(covered.mean()), ite_coverage_outer=float(covered[outer].mean()),
                ite_width=float(np.mean(units.upper - units.lower)))


def summarize_dose(raw: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard error and median of each metric per (design, method)."""
    ok = raw[raw["error"].fillna("") == ""]
    parts = []
    for design, g in ok.groupby("design", sort=False):
        s = report.summarize(g, [m for m in _METRICS if g[m].notna().any()] + (
            ["band_coverage_central"] if g["band_coverage_central"].notna().any() else []))
        parts.append(s.assign(design=design))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def dose_markdown(summary: pd.DataFrame, raw: pd.DataFrame, settings: dict) -> str:
    """The tables: per design, one row per method, mean ± standard error over the data sets."""
    def cell(row, metric, digits=4):
        mean, se = row.get(f"{metric}_mean", np.nan), row.get(f"{metric}_se", np.nan)
        if pd.isna(mean):
            return "-"
        return f"{mean:.{digits}f}" if pd.isna(se) else f"{mean:.{digits}f} ± {se:.{digits}f}"

    lines = [f"Continuous treatments: {raw['seed'].nunique()} data set(s) per design; steps: "
             f"{report.n_iter_label(settings.get('n_iter'))}. Mean ± standard error over data "
             f"sets; ADRF = average dose-response (VCNet's AMSE on the 5th-95th percentile "
             f"grid), ITE = individual curves (test units), effect = curves minus their value "
             f"at the median dose."]
    for design, g in (summary.groupby("design", sort=False) if len(summary) else []):
        lines += ["", f"### {design}", "",
                  "| method | ADRF MISE | ITE MISE | effect MISE | band coverage (central) | "
                  "band width | time / fit (s) | CPU / fit (s) |", "|---" * 8 + "|"]
        for _, row in g.iterrows():
            cov = cell(row, "band_coverage", 3)
            if cov != "-":
                cov += f" ({row.get('band_coverage_central_mean', np.nan):.3f})"
            lines.append(f"| {row['method']} | {cell(row, 'adrf_mise')} | "
                         f"{cell(row, 'ite_mise')} | {cell(row, 'effect_mise')} | {cov} | "
                         f"{cell(row, 'band_width', 3)} | {row['time_s_mean']:.2f} | "
                         f"{row['cpu_s_mean']:.2f} |")
        units = [f"{r['method']} {r['ite_coverage_mean']:.3f} (outer quartiles of the true "
                 f"values {r['ite_coverage_outer_mean']:.3f}; width {r['ite_width_mean']:.3f})"
                 for _, r in g.iterrows() if pd.notna(r.get("ite_coverage_mean", np.nan))]
        if units:
            lines.append("\nThe units' curves' 95 % intervals cover the true curves: "
                         + "; ".join(units))
        by = g.set_index("method")
        if "CFR" in by.index and "CFR-binary" in by.index:
            wall = by.loc["CFR", "time_s_mean"] / by.loc["CFR-binary", "time_s_mean"]
            cpu = by.loc["CFR", "cpu_s_mean"] / by.loc["CFR-binary", "cpu_s_mean"]
            lines.append(f"\nCost of a continuous CFR fit / a binary one of the same size "
                         f"(same units, back to back): wall time {wall:.2f}, CPU time {cpu:.2f}")
    failed = raw[raw["error"].fillna("") != ""]
    if len(failed):
        lines.append(f"\n{len(failed)} run(s) failed: "
                     + "; ".join(f"{r.method} seed {r.seed}: {r.error}"
                                 for r in failed.itertuples())[:2000])
    return "\n".join(lines)


def add_parser(sub) -> None:
    """Register the ``dose`` subcommand on ``sub`` (argparse)."""
    p = sub.add_parser("dose", help="continuous treatments: average and individual dose-"
                                    "response curves against EconML's DML, band coverage, time")
    p.add_argument("--designs", type=lambda v: report.parse_choices(v, DOSE_DESIGNS, "design"),
                   default=list(DOSE_DESIGNS), help="vcnet, ihdp or 'all' (default)")
    p.add_argument("--seeds", type=report.parse_range, default=report.parse_range("0-9"),
                   help="data sets per design, e.g. 0-9 (default)")
    p.add_argument("--methods", type=lambda v: report.parse_choices(v, DOSE_METHODS, "method"),
                   default=None, help="comma-separated methods or 'all' (default: all; with "
                                      "--coverage: CFR)")
    p.add_argument("--coverage", action="store_true",
                   help="only the band's coverage: CFR (or --methods) over --seeds")
    p.add_argument("--n-iter", type=int, default=None,
                   help="training steps of CFR/TARNet (default: the estimator's 'auto')")
    p.add_argument("--tiny", action="store_true", help="tiny networks and boosting (smoke)")
    p.add_argument("--cfr-params", type=parse_cfr_params, default={},
                   help='JSON object of CFR/TARNet keyword arguments, e.g. \'{"alpha": 0.5}\'')
    p.add_argument("--out", metavar="DIR", default=None,
                   help="directory for dose_raw.csv, dose_summary.csv, dose.md")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_threads_argument(p)


def run_command(args: argparse.Namespace) -> str:
    """Run ``dose`` from parsed arguments; write files; return markdown."""
    methods = args.methods or (["CFR"] if args.coverage else list(DOSE_METHODS))
    settings = dict(n_iter=args.n_iter, tiny=args.tiny, cfr_params=args.cfr_params)
    raw = run_dose(args.designs, args.seeds, methods, settings=settings,
                   progress=not args.no_progress)
    summary = summarize_dose(raw)
    md = dose_markdown(summary, raw, settings)
    report.write_outputs(args.out, "dose_coverage" if args.coverage else "dose", raw, summary, md)
    return md
