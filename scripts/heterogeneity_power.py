"""Measurement only (issue 45, item 3): the size and power of the blend's calibration test.

For each realistic design, heterogeneity (the sd of tau) and data set, fits ``CFR()`` at the
defaults and records the test of the blend's out-of-fold effects (``blend_test_``: slope kappa,
z), whether a constant effect was reported, and the root PEHE on the held-out units of both
candidates: the blend (its rejected mix where the constant was chosen) and the constant (the
doubly robust ATE at every x). Prints, per heterogeneity, how often a constant was reported, the
mean z, and the mean root PEHE of the choice made, of always the blend and of always the
constant; the rows go to ``--out``.

    python scripts/heterogeneity_power.py nhefs-steps,ames-sparse 0,0.3 0-3 1500 [--out rows.csv]

(designs, heterogeneities, data sets per design as a range, n). docs/parameters.md, item 9,
quotes it for nhefs-steps, ames-sparse, lalonde-heavy, nmes-smooth, ames-interact and
hi-categorical (seeds 0-7 at heterogeneity 0, 0-3 at 0.15 and 0.3).
"""
import argparse
import warnings

import numpy as np
import pandas as pd
import torch

from dowhy_cfr import CFR
from dowhy_cfr.datasets.realistic import simulate_realistic


def _rmse(a, b) -> float:
    return float(np.sqrt(np.mean((np.ravel(a) - np.ravel(b)) ** 2)))


def one(design: str, h: float, seed: int, n: int) -> dict:
    data = simulate_realistic(design, n, seed=seed, heterogeneity=h)
    est = CFR(random_state=seed, verbose=0).fit(data.Y, data.T, X=data.X)
    fitted, tau = est.fitted_, np.ravel(data.test.tau)
    blend = fitted.blend
    mix = (fitted.rejected_mix(data.test.X)[0][1] if blend.constant
           else est.effect(data.test.X))
    return dict(design=design, heterogeneity=h, seed=seed, tau_sd=float(tau.std()),
                kappa=blend.test.kappa, z=blend.test.z, pvalue=blend.test.pvalue,
                constant=bool(blend.constant), pehe=_rmse(est.effect(data.test.X), tau),
                pehe_blend=_rmse(mix, tau), pehe_constant=_rmse(fitted.debiased.theta[0], tau))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("designs")
    p.add_argument("heterogeneity", help="comma-separated sds of tau, e.g. 0,0.15,0.3")
    p.add_argument("seeds", help="a range, e.g. 0-7")
    p.add_argument("n", type=int)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    lo, hi = (int(v) for v in args.seeds.split("-"))
    rows = []
    for h in (float(v) for v in args.heterogeneity.split(",")):
        for design in args.designs.split(","):
            for seed in range(lo, hi + 1):
                rows.append(one(design, h, seed, args.n))
                if args.out:
                    pd.DataFrame(rows).to_csv(args.out, index=False)
    frame = pd.DataFrame(rows)
    print(frame.groupby("heterogeneity").agg(
        data_sets=("seed", "size"), constant=("constant", "sum"), z=("z", "mean"),
        pehe=("pehe", "mean"), always_blend=("pehe_blend", "mean"),
        always_constant=("pehe_constant", "mean")).round(3).to_string())


if __name__ == "__main__":
    main()
