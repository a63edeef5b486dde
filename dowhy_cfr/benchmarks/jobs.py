"""Jobs benchmark (Shalit et al. 2017, Sec. 5.2 and Table 1, right; policy curve of Fig. 3).

Protocol: ``n_splits`` (default 10) stratified train/validation/test splits 56/24/20
(:func:`dowhy_cfr.datasets.jobs_splits`). Every method is fitted on ``split.within`` (train +
validation; CFR carves its own 30% early-stopping split out of it, giving 56/24) and evaluated
within-sample (those units) and out-of-sample (``split.test``) by

* policy risk of ``pi(x) = 1[tau_hat(x) > 0]`` on the randomized units of the evaluated set;
* ATT error ``|mean(tau_hat | t=1) - ATT|`` with the ATT from the randomized units of the set.

The policy curve (out-of-sample policy risk against the share of randomized units treated,
averaged over splits) is written as CSV and, when matplotlib is installed, as a PNG.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..datasets import jobs_splits, load_jobs
from ..metrics import att_error, policy_curve, policy_risk
from . import report
from ._runner import (TaskPool, cfr_task, chunks, fit_baseline, headless_pyplot, progress_bar,
                      save_figure)
from .methods import CFR_METHODS, display_name

__all__ = ["run_jobs", "JOBS_COLUMNS", "plot_policy_curves"]

METRICS = ["within_policy_risk", "within_att", "out_policy_risk", "out_att"]
JOBS_COLUMNS = [
    ("within-sample", "R_pol", "within_policy_risk"),
    ("within-sample", "ε_ATT", "within_att"),
    ("out-of-sample", "R_pol", "out_policy_risk"),
    ("out-of-sample", "ε_ATT", "out_att"),
]


def _evaluate(name, i, tau, d, split, seconds, curve_points):
    w, te = split.within, split.test
    row = dict(
        method=name,
        split=i,
        within_policy_risk=policy_risk(tau[w], d.y[w], d.t[w], d.e[w]),
        within_att=att_error(tau[w], d.y[w], d.t[w], d.e[w]),
        out_policy_risk=policy_risk(tau[te], d.y[te], d.t[te], d.e[te]),
        out_att=att_error(tau[te], d.y[te], d.t[te], d.e[te]),
        time_s=seconds,
    )
    curve = policy_curve(tau[te], d.y[te], d.t[te], d.e[te], n_points=curve_points)
    curve.insert(0, "split", i)
    curve.insert(0, "method", name)
    return row, curve


def run_jobs(methods, *, settings: dict, variant: str = "lalonde", n_splits: int = 10,
             stack: int = 25, seed: int = 0, curve_points: int = 21, progress: bool = True,
             workers: int = 1, threads: int = 1):
    """Run the Jobs benchmark; returns ``(raw, summary, markdown, curves)``.

    ``curves`` holds the out-of-sample policy curve of every method and split (columns
    ``method, split, share_treated, threshold, policy_risk``). Other parameters as in
    :func:`dowhy_cfr.benchmarks.ihdp.run_ihdp`; ``variant`` selects the covariate set of
    :func:`dowhy_cfr.datasets.load_jobs`.
    """
    d = load_jobs(variant)
    splits = jobs_splits(d.t, d.e, n_splits=n_splits, seed=seed)
    rows, curves = [], []
    walls = {}
    bar = progress_bar(len(splits) * len(methods), "Jobs", progress)
    try:
        with TaskPool(workers, threads) as pool:
            for method in methods:
                name = display_name(method, binary=True)
                bar.set_description(f"Jobs {name}")
                start = time.perf_counter()
                if method in CFR_METHODS:
                    pieces = chunks(list(range(len(splits))), stack)
                    tasks = [(method, d.x, d.t, np.tile(d.y, (len(piece), 1)),
                              np.stack([splits[i].within for i in piece]), None, settings,
                              seed + piece[0]) for piece in pieces]
                    results = pool.map(cfr_task, tasks,
                                       lambda k, _: bar.update(len(pieces[k])))
                    fitted = [(i, taus[j], secs / len(piece))
                              for piece, (taus, secs, _) in zip(pieces, results)
                              for j, i in enumerate(piece)]
                else:
                    tasks = [(method, d.x[sp.within], d.t[sp.within], d.y[sp.within], d.x, True,
                              seed + i, settings["tiny"]) for i, sp in enumerate(splits)]
                    results = pool.map(fit_baseline, tasks, lambda k, _: bar.update(1))
                    fitted = [(i, tau, secs) for i, (tau, secs) in enumerate(results)]
                for i, tau, secs in fitted:
                    r, c = _evaluate(name, i, tau, d, splits[i], secs, curve_points)
                    rows.append(r)
                    curves.append(c)
                walls[name] = time.perf_counter() - start
    finally:
        bar.close()
    raw = pd.DataFrame(rows)
    curves = pd.concat(curves, ignore_index=True)
    summary = report.summarize(raw, METRICS)
    summary["wall_s"] = summary["method"].map(walls)
    md = "\n".join([
        f"## Jobs ({variant}: {d.n_units} units, {int(d.e.sum())} randomized), {len(splits)} "
        f"split(s), mean ± standard error",
        "",
        report.paper_table(summary, JOBS_COLUMNS, digits=3),
        "",
        report.wall_line(walls, workers),
        "",
        f"True ATT on all randomized units: {d.att:.4f}. Policy: treat if the estimated effect "
        f"> 0. n_iter={report.n_iter_label(settings['n_iter'])}, tiny={settings['tiny']}.",
    ])
    return raw, summary, md, curves


def plot_policy_curves(curves: pd.DataFrame, path) -> Path | None:
    """Plot the mean out-of-sample policy curve per method; None (with a message) without
    matplotlib."""
    plt = headless_pyplot("policy-curve plot")
    if plt is None:
        return None
    mean = (curves.groupby(["method", "share_treated"], sort=False)["policy_risk"].mean()
            .reset_index())
    fig, ax = plt.subplots(figsize=(6, 4))
    for method, g in mean.groupby("method", sort=False):
        ax.plot(g["share_treated"], g["policy_risk"], marker=".", label=method)
    ax.set_xlabel("share of randomized units treated")
    ax.set_ylabel("policy risk (out-of-sample)")
    ax.set_title("Jobs: policy risk vs inclusion rate")
    ax.legend(fontsize=7)
    return save_figure(plt, fig, path)
