"""A continuous treatment fitted with W: the projection of the units' curves on X
(``dowhy_cfr.fitting.dose_final_stage``) against the truth E[mu(X, W, t) | X = x], on two
designs where W is independent of X, so that the truth is known in closed form:

* ``vcnet``: the VCNet paper's simulation (``dowhy_cfr.datasets.simulate_dose``), X = (x1, x4,
  x6), W = (x2, x3, x5); x3 modifies the curve and is averaged out:
  E[1 / (1 + 2 x3^2)] = arctan(sqrt 2) / sqrt 2.
* ``linear``: x ~ N(0, I_3), T = x0 + N(0, 1), Y = sin(1.5 T) + x0 + 0.5 x1 T + N(0, 0.3^2)
  (``tests/test_dose.py``'s design), X = x1, W = (x0, x2): E[mu | x1] = sin(1.5 t) + 0.5 x1 t.

Reported per design and regression: the projected individual curves' mean squared error on the
test units over the design's grid, split into the curves' level (their mean over the grid) and
their shape, the 95 % band's coverage of the true curve, and the fit's time; ``no-W`` fits
every column as X and scores the units' own curves against mu(x, t). Usage::

    python scripts/dose_with_w.py --seeds 0-4 --models default,hgb,no-W
"""

import argparse
import time

import numpy as np
import pandas as pd
import torch
from sklearn.ensemble import HistGradientBoostingRegressor

from dowhy_cfr import CFR
from dowhy_cfr.datasets.dose import simulate_dose
from dowhy_cfr.fitting import BLEND_MODEL

MODELS = {"hgb": lambda: HistGradientBoostingRegressor(), "blend": lambda: BLEND_MODEL,
          "default": lambda: None, "no-W": lambda: None}
_X3_MEAN = np.arctan(np.sqrt(2)) / np.sqrt(2)


def vcnet(seed, no_w=False):
    d = simulate_dose("vcnet", seed)
    xs, xt = d.x, d.x_test
    if no_w:  # every column in X: the units' own curves against mu(x, t)
        return d.y, d.t, xs, None, xt, d.grid, d.curves_test
    truth = np.stack([np.cos(2 * np.pi * (g - 0.5)) * (
        g ** 2 + 4 * np.maximum(xt[:, 0], xt[:, 5]) ** 3 * _X3_MEAN * np.sin(xt[:, 3]))
        for g in d.grid], 1)
    return d.y, d.t, xs[:, [0, 3, 5]], xs[:, [1, 2, 4]], xt[:, [0, 3, 5]], d.grid, truth


def linear(seed, no_w=False, n=1000):
    rng = np.random.default_rng([seed, 11])
    x = rng.normal(size=(n, 3))
    t = x[:, 0] + rng.normal(size=n)
    y = np.sin(1.5 * t) + x[:, 0] + 0.5 * x[:, 1] * t + rng.normal(scale=0.3, size=n)
    xt = rng.normal(size=(2000, 3))
    grid = np.linspace(-1.5, 1.5, 13)
    if no_w:
        truth = np.stack([np.sin(1.5 * g) + xt[:, 0] + 0.5 * xt[:, 1] * g for g in grid], 1)
        return y, t, x, None, xt, grid, truth
    truth = np.stack([np.sin(1.5 * g) + 0.5 * xt[:, 1] * g for g in grid], 1)
    return y, t, x[:, [1]], x[:, [0, 2]], xt[:, [1]], grid, truth


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0-4")
    ap.add_argument("--models", default="default")
    ap.add_argument("--designs", default="vcnet,linear")
    ap.add_argument("--n-iter", default="auto")
    args = ap.parse_args()
    a, _, b = args.seeds.partition("-")
    seeds = range(int(a), int(b or a) + 1)
    torch.set_num_threads(1)
    rows = []
    for design in args.designs.split(","):
        for seed in seeds:
            for name in args.models.split(","):
                y, t, x, w, xt, grid, truth = {"vcnet": vcnet, "linear": linear}[design](
                    seed, no_w=name == "no-W")
                n_iter = args.n_iter if args.n_iter == "auto" else int(args.n_iter)
                start = time.perf_counter()
                est = CFR(random_state=seed, verbose=0, n_iter=n_iter,
                          model_final=MODELS[name]()).fit(y, t, X=x, W=w)
                seconds = time.perf_counter() - start
                res = est.dose_response(xt, t_grid=grid)
                err = res.estimate - truth
                level = err.mean(1, keepdims=True)
                rows.append(dict(design=design, seed=seed, model=name,
                                 mise=np.mean(err ** 2), level=np.mean(level ** 2),
                                 shape=np.mean((err - level) ** 2),
                                 coverage=np.mean((res.lower <= truth) & (truth <= res.upper)),
                                 width=np.mean(res.upper - res.lower),
                                 curves=0 if w is None else len(est.fitted_.dose.basis),
                                 seconds=seconds))
                print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    print(df.groupby(["design", "model"])[["mise", "level", "shape", "coverage", "width",
                                           "curves", "seconds"]].mean().round(4).to_string())


if __name__ == "__main__":
    main()
