"""Milliseconds per training step of CFR fits that run a fixed number of steps (no early
stopping, no propensity), on IHDP realizations 1-3, the fastest of the three: for before/after
comparisons of the engine whose changes move the stopping step (a rounding change alters the
trajectories, so the steps of early-stopped fits differ). Through the public API only, so the
same script times any version of the package: run two checkouts alternately.

    PYTHONPATH=<checkout> python scripts/step_times.py --threads 2

Quoted in docs/results.md ("Fewer small operations per step").
"""

from __future__ import annotations

import argparse
import time

import torch

from dowhy_cfr import CFR
from dowhy_cfr.datasets import ihdp_split, load_ihdp_many


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=300)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = load_ihdp_many([1, 2, 3])
    x, t = data["x"][0], data["t"][0]
    out = {}
    for k in (1, 5):
        best = float("inf")
        for i in range(3):
            w = ihdp_split(len(x), seed=i + 1).within
            y = data["yf"][i][w]
            CFR(n_iter=5, verbose=0).fit(y, t[w], X=x[w])  # warm-up
            start = time.perf_counter()
            est = CFR(random_state=0, verbose=0, n_iter=args.steps, patience=None, n_ensemble=k,
                      debias=None).fit(y, t[w], X=x[w])
            best = min(best, time.perf_counter() - start)
            assert est.n_iter_ == args.steps
        out[k] = best / args.steps * 1e3
    print("  ".join(f"n_ensemble={k}: {ms:.2f} ms/step" for k, ms in out.items()))


if __name__ == "__main__":
    main()
