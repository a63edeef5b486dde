"""Run-to-run spread of the ATE on the same data: K networks with different seeds (one
``CFR.fit_stacked`` pass over K copies of one data set), plug-in vs doubly robust ATE.

Usage::

    python scripts/debias_spread.py --design A --seed 0 --k 8
"""

import argparse
import warnings

import numpy as np
import torch

from dowhy_cfr import CFR
from dowhy_cfr.datasets.synthetic import DESIGNS, simulate


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--design", default="A")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--ensemble", type=int, default=1, help="n_ensemble of every fit")
    a = p.parse_args()
    torch.set_num_threads(1)
    d = simulate(a.design, a.n, random_state=[a.seed, DESIGNS.index(a.design), a.n, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seeds = np.random.default_rng(100).integers(0, 2**31 - 1, size=(a.k, a.ensemble))
        fits = CFR(n_ensemble=a.ensemble, verbose=0).fit_stacked(
            np.tile(d.y, (a.k, 1)), d.t, X=d.x, W=d.w, seeds=seeds)
    res = [f.average_effect("ate") for f in fits]
    plug = np.array([r.plugin for r in res]) - d.tau.mean()
    dr = np.array([r.estimate for r in res]) - d.tau.mean()
    se = np.array([r.stderr for r in res])
    pehe = np.array([np.sqrt(np.mean((f.individual_effect(d.x, d.w) - d.tau) ** 2)) for f in fits])
    print(f"design {a.design} data seed {a.seed}, {a.k} fits of n_ensemble={a.ensemble}: "
          f"ATE error mean (sd); in-sample sqrt(PEHE) {pehe.mean():.3f} (sd {pehe.std(ddof=1):.3f})")
    print(f"  plug-in {plug.mean():+.3f} ({plug.std(ddof=1):.3f})  range {plug.min():+.3f}..{plug.max():+.3f}")
    print(f"  AIPW    {dr.mean():+.3f} ({dr.std(ddof=1):.3f})  range {dr.min():+.3f}..{dr.max():+.3f}"
          f"  mean s.e. {se.mean():.3f}")


if __name__ == "__main__":
    main()
