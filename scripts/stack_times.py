"""Wall time of one ``CFR.fit_stacked`` of K networks on IHDP realization 1 (each on its own
random 600 of the 747 units), a fixed number of steps, no early stopping and no propensity: the
cost of a stack as DoWhy's refuters, ensembles and the bootstrap run it, set-up and summaries
included. Results: ``docs/results.md`` ("Speed").

    PYTHONPATH=<checkout> python scripts/stack_times.py --k 100 --steps 60 --threads 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from dowhy_cfr import CFR
from dowhy_cfr.datasets import load_ihdp_many


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = load_ihdp_many([1])
    x, t, y = data["x"][0], data["t"][0], data["yf"][0]
    rng = np.random.default_rng(0)
    units = np.stack([np.sort(rng.choice(len(x), 600, replace=False)) for _ in range(args.k)])
    ys = np.tile(y, (args.k, 1))
    CFR(n_iter=5, debias=None, verbose=0).fit_stacked(ys[:3], t, X=x, units=units[:3])  # warm-up
    for _ in range(args.repeats):
        start = time.perf_counter()
        CFR(n_iter=args.steps, patience=None, debias=None, verbose=0).fit_stacked(
            ys, t, X=x, units=units)
        print(f"K={args.k}, {args.steps} steps: {time.perf_counter() - start:.2f} s", flush=True)


if __name__ == "__main__":
    main()
