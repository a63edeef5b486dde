"""A binary treatment fitted with W: ``model_final``'s default regression of the heads'
unit-level effects on X, against the blend's shallow early-stopped boosting
(``fitting.BLEND_MODEL``), paired on the same fits' data and seeds.

* design E of ``dowhy_cfr.datasets.synthetic`` (X three effect modifiers, W three confounders
  that do not modify the effect): the truth tau(x) itself;
* designs A and B with X = (x1, x2) and W = the other columns (W confounds A's outcome, B is
  randomised; neither modifies the effect): the truth tau(x);
* design D with X = (x1, x2, x3) and W = (x4, x5, x6): tau = relu(x1 + x2 + x3) - relu(x4 +
  x5) is averaged over W, E[tau | X = x] = relu(x1 + x2 + x3) - 1 / sqrt(pi).

Reported: sqrt(PEHE) of effect(X) against E[tau | X] on 2,000 fresh units, the tau(x)
intervals' coverage and width, per design and regression. Usage::

    python scripts/binary_w_final.py --seeds 0-9 --n 2000
"""

import argparse
import time

import numpy as np
import pandas as pd
import torch
from sklearn.ensemble import HistGradientBoostingRegressor

from dowhy_cfr import CFR
from dowhy_cfr.datasets.synthetic import simulate
from dowhy_cfr.fitting import BLEND_MODEL

MODELS = {"hgb": lambda: HistGradientBoostingRegressor(), "blend": lambda: BLEND_MODEL,
          "default": lambda: None}


def split(design, n, seed):
    d = simulate(design, n, random_state=seed)
    if design == "E":
        return d.x, d.w, d.t, d.y
    k = 3 if design == "D" else 2
    return d.x[:, :k], d.x[:, k:], d.t, d.y


def truth(design, seed):
    test = simulate(design, 2000, random_state=10_000 + seed)
    if design == "E":
        return test.x, test.tau
    if design in ("A", "B"):
        return test.x[:, :2], test.tau
    u = np.maximum(test.x[:, :3].sum(1), 0.0)
    return test.x[:, :3], u - 1.0 / np.sqrt(np.pi)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--designs", default="E,D")
    ap.add_argument("--models", default="hgb,blend")
    args = ap.parse_args()
    a, _, b = args.seeds.partition("-")
    torch.set_num_threads(1)
    rows = []
    for design in args.designs.split(","):
        for seed in range(int(a), int(b or a) + 1):
            x, w, t, y = split(design, args.n, seed)
            x_test, tau = truth(design, seed)
            for name in args.models.split(","):
                start = time.perf_counter()
                est = CFR(random_state=seed, verbose=0, model_final=MODELS[name]()).fit(
                    y, t, X=x, W=w)
                seconds = time.perf_counter() - start
                eff = est.effect(x_test).ravel()
                lo, hi = (v.ravel() for v in est.effect_interval(x_test))
                rows.append(dict(design=design, seed=seed, model=name,
                                 pehe=np.sqrt(np.mean((eff - tau) ** 2)),
                                 coverage=np.mean((lo <= tau) & (tau <= hi)),
                                 width=np.mean(hi - lo), seconds=seconds))
                print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    print(df.groupby(["design", "model"])[["pehe", "coverage", "width", "seconds"]]
          .mean().round(4).to_string())
    wide = df.pivot_table(index=["design", "seed"], columns="model", values="pehe")
    if {"hgb", "blend"} <= set(wide.columns):
        diff = (wide["blend"] - wide["hgb"]).groupby("design")
        print("blend - hgb:", (diff.mean().round(4).astype(str) + " +- "
                               + (diff.std() / np.sqrt(diff.count())).round(4).astype(str))
              .to_dict())


if __name__ == "__main__":
    main()
