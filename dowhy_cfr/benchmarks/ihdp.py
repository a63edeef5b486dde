"""IHDP benchmark (Shalit et al. 2017, Sec. 5.1 and Table 1).

Protocol, per realization ``r``: ``split = ihdp_split(747, seed=r)`` (63/27/10); every method is
fitted on ``split.within`` (train + validation; CFR/TARNet carve their own 30% early-stopping
split out of it, which gives the paper's 63/27 proportions) and evaluated on those units
("within-sample") and on ``split.test`` ("out-of-sample") with root PEHE and ATE error against
the noiseless ``mu1 - mu0``. CFR-family methods train ``--stack`` realizations per vectorised
pass; their wall time per realization is the pass's time divided by the number of realizations
in it.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from ..datasets import ihdp_split, load_ihdp_many
from ..metrics import ate_error, sqrt_pehe
from . import report
from ._runner import TaskPool, cfr_task, chunks, fit_baseline, progress_bar
from .methods import CFR_METHODS

__all__ = ["run_ihdp", "IHDP_COLUMNS"]

METRICS = ["within_pehe", "within_ate", "out_pehe", "out_ate"]
#: (group, label, metric) columns of the paper's Table 1 layout.
IHDP_COLUMNS = [
    ("within-sample", "√PEHE", "within_pehe"),
    ("within-sample", "ε_ATE", "within_ate"),
    ("out-of-sample", "√PEHE", "out_pehe"),
    ("out-of-sample", "ε_ATE", "out_ate"),
]


def _row(method, r, tau, tau_true, within, test, seconds, **extra):
    return dict(
        method=method,
        realization=int(r),
        within_pehe=sqrt_pehe(tau_true[within], tau[within]),
        within_ate=ate_error(tau_true[within], tau[within]),
        out_pehe=sqrt_pehe(tau_true[test], tau[test]),
        out_ate=ate_error(tau_true[test], tau[test]),
        time_s=seconds,
        **extra,
    )


def run_ihdp(realizations, methods, *, settings: dict, stack: int = 25, seed: int = 0,
             progress: bool = True, workers: int = 1, threads: int = 1):
    """Run the IHDP benchmark.

    Parameters
    ----------
    realizations : list of int
        IHDP realizations (1..1000).
    methods : list of str
        Method names (``methods.ALL_METHODS``).
    settings : dict
        ``n_iter`` (None = estimator default), ``tiny``, ``alpha_wass``, ``alpha_mmd``.
    stack : int
        Realizations per stacked CFR pass.
    seed : int
        Base seed (baselines use ``seed + r``; the CFR stack starting at position ``i`` uses
        ``seed + i``).
    progress : bool
        Show a tqdm progress bar.
    workers, threads : int
        Worker processes running stacks / baseline fits in parallel, and torch threads in each
        (:class:`~dowhy_cfr.benchmarks._runner.TaskPool`; ``workers=1`` runs inline).

    Returns
    -------
    raw : pandas.DataFrame, one row per method and realization
    summary : pandas.DataFrame, mean / se / median per method
    markdown : str
    """
    reals = list(realizations)
    data = load_ihdp_many(reals)
    x = np.ascontiguousarray(data["x"][0])
    t = np.ascontiguousarray(data["t"][0])
    tau_true_all = data["mu1"] - data["mu0"]
    splits = [ihdp_split(x.shape[0], seed=int(r)) for r in reals]
    rows = []
    walls = {}
    bar = progress_bar(len(reals) * len(methods), "IHDP", progress)
    try:
        with TaskPool(workers, threads) as pool:
            for method in methods:
                bar.set_description(f"IHDP {method}")
                start = time.perf_counter()
                if method in CFR_METHODS:
                    pieces = chunks(list(range(len(reals))), stack)
                    tasks = [(method, x, t, data["yf"][piece],
                              np.stack([splits[i].within for i in piece]), None, settings,
                              seed + piece[0]) for piece in pieces]
                    results = pool.map(cfr_task, tasks,
                                       lambda k, _: bar.update(len(pieces[k])))
                    for piece, (taus, secs, best) in zip(pieces, results):
                        for j, i in enumerate(piece):
                            rows.append(_row(method, reals[i], taus[j], tau_true_all[i],
                                             splits[i].within, splits[i].test,
                                             secs / len(piece), best_step=best[j]))
                else:
                    tasks = [(method, x[splits[i].within], t[splits[i].within],
                              data["yf"][i][splits[i].within], x, False, seed + int(r),
                              settings["tiny"]) for i, r in enumerate(reals)]
                    results = pool.map(fit_baseline, tasks, lambda k, _: bar.update(1))
                    for i, (tau, secs) in enumerate(results):
                        rows.append(_row(method, reals[i], tau, tau_true_all[i],
                                         splits[i].within, splits[i].test, secs))
                walls[method] = time.perf_counter() - start
    finally:
        bar.close()
    raw = pd.DataFrame(rows)
    summary = report.summarize(raw, METRICS)
    summary["wall_s"] = summary["method"].map(walls)
    md = [
        f"## IHDP: {len(reals)} realization(s) ({_describe(reals)}), mean ± standard error",
        "",
        report.paper_table(summary, IHDP_COLUMNS),
        "",
        "Medians:",
        "",
        report.median_table(summary, [(f"{g}: {lab}", m) for g, lab, m in IHDP_COLUMNS]),
        "",
        report.wall_line(walls, workers),
        "",
        _settings_line(settings, stack),
    ]
    return raw, summary, "\n".join(md)


def _describe(reals) -> str:
    if reals == list(range(reals[0], reals[0] + len(reals))):
        return f"{reals[0]}-{reals[-1]}"
    return ",".join(map(str, reals))


def _settings_line(settings: dict, stack: int) -> str:
    n_iter = report.n_iter_label(settings["n_iter"])
    return (f"Settings: n_iter={n_iter}, tiny={settings['tiny']}, alpha (CFR-Wass)="
            f"{settings['alpha_wass']}, alpha (CFR-MMD)={settings['alpha_mmd']}, "
            f"stack={stack}, device={settings.get('device', 'cpu')}. Time = wall seconds per "
            f"realization (stacked passes divided by their size).")
