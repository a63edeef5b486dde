"""Measurement only (issue 46, item 1): can the pointwise intervals' width be set from what a fit
knows about its own error? One default CFR per realistic data set; the test units' reported
effect, heads, the blend's regression and the members' jackknife standard error are saved, then
intervals built from them are scored against the true tau (data sets reporting a constant effect,
or whose tau has sd < 0.3, are left out).

    python scripts/interval_scales.py fit default 1500 0,1 results/scales_dev
    python scripts/interval_scales.py fit held-out 1500 0 results/scales_ho
    python scripts/interval_scales.py score results/scales_dev results/scales_ho

The intervals scored (t_4 = 2.78, the jackknife's quantile; D(x) = (heads(x) - g(x))^2, the
squared disagreement between the heads and the blend's regression):

* ``a J + b D``: effect(x) -/+ t_4 sqrt(a se_J(x)^2 + b D(x)) -- a = 1, b = 0 is the default;
* ``scale rms(D)``: effect(x) -/+ 1.96 rms(heads - g), one width per data set, as if the
  disagreement measured the data set's error level;
* ``de-shrunk``: no interval, the effect's calibration slope -- the least-squares slope of the
  true tau on effect(x) over the test units (an oracle) against the slope of the out-of-fold
  pseudo-outcomes on the out-of-fold blend over the fitted units (what a fit could estimate),
  and the root PEHE after rescaling effect(x) about its mean by either.

``score`` prints mean coverage, coverage in the outer quartiles of tau, mean width, the lowest
surface family's coverage (the family whose coverage is lowest), Spearman's rank correlation of
width with the absolute error, and the slopes. docs/inference.md ("Can the width follow the
error?") quotes it.
"""
from __future__ import annotations

import glob
import os
import sys
import warnings

import numpy as np
import pandas as pd
from scipy.stats import spearmanr
from scipy.stats import t as student_t
from threadpoolctl import threadpool_limits

T4 = float(student_t.ppf(0.975, 4))
GRID = [(a, b) for a in (0.4, 0.6, 0.8, 1.0, 1.2) for b in (0.0, 0.1, 0.25, 0.5)]


def fit(designs: str, n: int, seeds: list[int], out: str) -> None:
    from dowhy_cfr import CFR
    from dowhy_cfr.benchmarks.realistic import parse_designs
    from dowhy_cfr.datasets.realistic import simulate_realistic
    from dowhy_cfr.nuisance import aipw_scores, held_out_mean

    os.makedirs(out, exist_ok=True)
    for design in parse_designs(designs):
        for seed in seeds:
            d = simulate_realistic(design, n, seed=seed, n_test=2000)
            with threadpool_limits(1), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = CFR(random_state=seed, verbose=0).fit(d.Y, d.T, X=d.X)
                xt = d.test.X
                fitted, blend = est.fitted_, est.fitted_.blend
                stage = fitted.debiased
                psi = aipw_scores(stage.y, stage.arms, stage.mu, stage.e)
                g = blend.regressions(fitted.columns.block("X", xt)).mean(0)[:, 0]
                g_oof = held_out_mean(blend.regressions(stage.x), blend.train)[:, 0]
                np.savez(f"{out}/{design}_{seed}.npz", tau=d.test.tau,
                         effect=np.ravel(est.effect(xt)), heads=np.ravel(est.individual_effect(xt)),
                         se=np.ravel(est.effect_inference(xt).stderr), g=g,
                         psi=psi[:, 1] - psi[:, 0], g_oof=g_oof,
                         h_oof=stage.mu[:, 1] - stage.mu[:, 0], lam=blend.lam,
                         constant=float(blend.constant))
            print(design, seed, flush=True)


def _load(path: str) -> list[dict]:
    out = []
    for f in sorted(glob.glob(f"{path}/*.npz")):
        z = dict(np.load(f))
        if z["constant"] == 1 or np.std(z["tau"]) < 0.3:
            continue
        z["surface"] = os.path.basename(f).rsplit("_", 1)[0].split("-", 1)[1]
        out.append(z)
    return out


def _score(data: list[dict], half_width) -> dict:
    rows = []
    for z in data:
        tau, eff = z["tau"], z["effect"]
        half = half_width(z)
        covered = np.abs(eff - tau) <= half
        q1, q4 = tau <= np.quantile(tau, 0.25), tau >= np.quantile(tau, 0.75)
        rank = spearmanr(half, np.abs(eff - tau))[0] if np.ptp(half) > 0 else 0.0
        rows.append(dict(surface=z["surface"], cov=covered.mean(), q1=covered[q1].mean(),
                         q4=covered[q4].mean(), width=2 * np.mean(half), rank=rank))
    r = pd.DataFrame(rows)
    family = r.groupby("surface")["cov"].mean()
    return dict(cov=r["cov"].mean(), q1=r.q1.mean(), q4=r.q4.mean(), width=r.width.mean(),
                lowest_family=f"{family.idxmin()} {family.min():.2f}", rank=r["rank"].mean())


def _slopes(data: list[dict]) -> dict:
    rows = []
    for z in data:
        tau, eff = z["tau"], z["effect"]
        c = eff - eff.mean()
        oracle = np.dot(c, tau - tau.mean()) / np.dot(c, c)
        oof = z["lam"] * z["h_oof"] + (1 - z["lam"]) * z["g_oof"]
        co = oof - oof.mean()
        fold = np.dot(co, z["psi"] - z["psi"].mean()) / np.dot(co, co)
        rows.append(dict(oracle=oracle, out_of_fold=fold,
                         pehe=np.sqrt(np.mean((eff - tau) ** 2)),
                         pehe_oracle=np.sqrt(np.mean((eff.mean() + oracle * c - tau) ** 2)),
                         pehe_out_of_fold=np.sqrt(np.mean((eff.mean() + fold * c - tau) ** 2)),
                         rms_d=np.sqrt(np.mean((z["heads"] - z["g"]) ** 2))))
    r = pd.DataFrame(rows)
    out = r.mean().to_dict()
    out["corr(pehe, rms_d)"] = float(np.corrcoef(r.pehe, r.rms_d)[0, 1])
    return out


def score(paths: list[str]) -> None:
    pd.set_option("display.width", 200)
    for path in paths:
        data = _load(path)
        rows = []
        for a, b in GRID:
            rows.append(dict(interval=f"{a:g} J + {b:g} D", **_score(
                data, lambda z, a=a, b=b: T4 * np.sqrt(a * z["se"] ** 2
                                                       + b * (z["heads"] - z["g"]) ** 2))))
        for c in (0.75, 1.0, 1.25):
            rows.append(dict(interval=f"scale {c:g} rms(D)", **_score(
                data, lambda z, c=c: np.full(len(z["tau"]), 1.96 * c * np.sqrt(
                    np.mean((z["heads"] - z["g"]) ** 2))))))
        print(f"{path}: {len(data)} data sets whose tau varies")
        print(pd.DataFrame(rows).round(3).to_string(index=False))
        print("slopes and scales:", {k: round(v, 3) for k, v in _slopes(data).items()})


if __name__ == "__main__":
    if sys.argv[1] == "fit":
        fit(sys.argv[2], int(sys.argv[3]), [int(s) for s in sys.argv[4].split(",")], sys.argv[5])
    elif sys.argv[1] == "score":
        score(sys.argv[2:])
    else:
        raise SystemExit(__doc__)
