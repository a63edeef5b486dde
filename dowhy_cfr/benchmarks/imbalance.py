"""Fig. 2 of Shalit et al. (2017): error as a function of alpha under increasing imbalance.

The paper builds biased subsamples of IHDP (Sec. 5.1): a logistic-regression propensity model
gives ``p_hat(t=1 | x)``; then, repeatedly, with probability ``q`` the remaining control unit
with ``p_hat`` closest to 1 (the control most similar to the treated) is removed, and with
probability ``1 - q`` a random remaining control unit; 347 units are removed, leaving 400. The
larger ``q``, the stronger the imbalance between the arms. The paper then plots the
out-of-sample error of CFR-Wass against alpha, relative to alpha = 0 (TARNet).

Our version: the propensity model is ``LogisticRegression`` (standardised covariates, all 747
units; the covariates and treatment are the same in every realization); the removal sequence is
random with seed ``(seed, realization, round(1000 q))``; the 400 kept units are split by
``ihdp_split(400, seed=r)`` (63/27/10), fitted on train + validation and evaluated on the test
units. For every ``(q, alpha)`` the realizations train together in one ``fit_stacked`` pass. The
reported relative error is the mean over realizations of ``sqrt_PEHE(alpha) / sqrt_PEHE(0)``
(a ratio per realization, so that realizations with large outcome scales do not dominate).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ..datasets import ihdp_split, load_ihdp_many
from ..metrics import sqrt_pehe
from . import report
from ._runner import TaskPool, cfr_task, chunks, headless_pyplot, progress_bar, save_figure

__all__ = ["biased_subsample", "run_imbalance", "plot_imbalance"]


def biased_subsample(x, t, q: float, *, n_keep: int = 400, rng=None) -> np.ndarray:
    """Indices of a biased IHDP subsample (Sec. 5.1): remove controls until ``n_keep`` remain.

    Parameters
    ----------
    x : array (n, d); t : array (n,) of 0/1
    q : float in [0, 1]
        Probability that a removal takes the remaining control with the highest estimated
        propensity (else a uniformly random remaining control).
    n_keep : int, default 400
        Units kept (all treated units are kept).
    rng : numpy Generator or int seed

    Returns
    -------
    numpy.ndarray of int64, sorted
    """
    if not 0.0 <= float(q) <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    rng = np.random.default_rng(rng)
    t = np.asarray(t) > 0.5
    n_remove = len(t) - int(n_keep)
    if n_remove < 0 or n_remove > (~t).sum() - 1:
        raise ValueError(f"cannot keep {n_keep} of {len(t)} units by removing only controls")
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000))
    p_hat = model.fit(x, t).predict_proba(x)[:, 1]
    controls = np.flatnonzero(~t)
    # controls in order of decreasing propensity: the "closest to 1" is always at the front
    remaining = list(controls[np.argsort(-p_hat[controls], kind="stable")])
    for _ in range(n_remove):
        if rng.random() < q:
            remaining.pop(0)
        else:
            remaining.pop(int(rng.integers(len(remaining))))
    return np.sort(np.concatenate([np.flatnonzero(t), remaining])).astype(np.int64)


def run_imbalance(realizations, qs, alphas, *, settings: dict, n_keep: int = 400,
                  stack: int = 25, seed: int = 0, progress: bool = True, workers: int = 1,
                  threads: int = 1):
    """Run the experiment; returns ``(raw, summary, markdown)``.

    ``raw`` has one row per (q, alpha, realization) with within- and out-of-sample root PEHE;
    ``summary`` the mean / se / median of the relative out-of-sample error per (q, alpha).
    """
    reals = list(realizations)
    alphas = sorted(set(float(a) for a in alphas) | {0.0})
    data = load_ihdp_many(reals)
    x = np.ascontiguousarray(data["x"][0])
    t = np.ascontiguousarray(data["t"][0])
    tau_true = data["mu1"] - data["mu0"]
    rows = []
    bar = progress_bar(len(qs) * len(alphas) * len(reals), "imbalance", progress)
    tasks, meta = [], []
    for q in qs:
        subs, splits = [], []
        for r in reals:
            sub = biased_subsample(x, t, q, n_keep=n_keep,
                                   rng=[int(seed), int(r), int(round(1000 * q))])
            sp = ihdp_split(len(sub), seed=int(r))
            subs.append(sub)
            splits.append((sub[sp.within], sub[sp.test]))
        for alpha in alphas:
            s = dict(settings, alpha_wass=alpha)
            method = "CFR-Wass" if alpha > 0 else "TARNet"
            for piece in chunks(list(range(len(reals))), stack):
                units = np.stack([splits[i][0] for i in piece])
                tasks.append((method, x, t, data["yf"][piece], units, None, s, seed + piece[0]))
                meta.append((q, alpha, piece, subs, splits))
    try:
        with TaskPool(workers, threads) as pool:
            results = pool.map(cfr_task, tasks, lambda k, _: bar.update(len(meta[k][2])))
    finally:
        bar.close()
    for (q, alpha, piece, subs, splits), (taus, secs, _) in zip(meta, results):
        for j, i in enumerate(piece):
            w, te = splits[i]
            rows.append(dict(
                q=q, alpha=alpha, realization=reals[i],
                treated_share=float(t[subs[i]].mean()),
                within_pehe=sqrt_pehe(tau_true[i][w], taus[j][w]),
                out_pehe=sqrt_pehe(tau_true[i][te], taus[j][te]),
                time_s=secs / len(piece),
            ))
    raw = pd.DataFrame(rows)
    base = raw[raw["alpha"] == 0.0].set_index(["q", "realization"])["out_pehe"]
    raw["relative_out_pehe"] = raw["out_pehe"].to_numpy() / base.loc[
        list(zip(raw["q"], raw["realization"]))].to_numpy()
    summary = (raw.groupby(["q", "alpha"])
               .agg(relative_mean=("relative_out_pehe", "mean"),
                    relative_se=("relative_out_pehe", _se),
                    relative_median=("relative_out_pehe", "median"),
                    out_pehe_mean=("out_pehe", "mean"),
                    n=("out_pehe", "size"))
               .reset_index())
    lines = [f"## Imbalance (Fig. 2): CFR-Wass out-of-sample √PEHE relative to alpha = 0, "
             f"{len(reals)} realization(s), {n_keep} units kept", "",
             "| q | " + " | ".join(f"alpha={a:g}" for a in alphas) + " |",
             "|" + "---|" * (len(alphas) + 1)]
    for q, g in summary.groupby("q"):
        cells = []
        for a in alphas:
            rr = g[g["alpha"] == a].iloc[0]
            se = "" if np.isnan(rr["relative_se"]) else f" ± {rr['relative_se']:.3f}"
            cells.append(f"{rr['relative_mean']:.3f}{se}")
        lines.append(f"| {q:g} | " + " | ".join(cells) + " |")
    lines += ["", f"n_iter={report.n_iter_label(settings['n_iter'])}, tiny={settings['tiny']}."]
    return raw, summary, "\n".join(lines)


def _se(v) -> float:
    """Standard error of the mean (NaN for a single value)."""
    return float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")


def plot_imbalance(summary: pd.DataFrame, path) -> Path | None:
    """Relative error vs alpha (log axis, alpha > 0) per q; None without matplotlib."""
    plt = headless_pyplot("imbalance plot")
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for q, g in summary[summary["alpha"] > 0].groupby("q"):
        ax.errorbar(g["alpha"], g["relative_mean"], yerr=g["relative_se"].fillna(0.0),
                    marker="o", capsize=2, label=f"q = {q:g}")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("imbalance penalty alpha")
    ax.set_ylabel("out-of-sample √PEHE relative to alpha = 0")
    ax.set_title("IHDP, biased subsamples (Fig. 2)")
    ax.legend()
    return save_figure(plt, fig, path)
