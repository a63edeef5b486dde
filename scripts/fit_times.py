"""Wall time of default and ``n_ensemble=5`` CFR fits on IHDP, through the public API only, so
that the same script times any version of the package (before/after comparisons: run two
checkouts side by side, so both see the same machine load). Results: ``docs/results.md``.

    PYTHONPATH=<checkout> python scripts/fit_times.py --realizations 1-10

``--fixed-steps N``: fits of exactly N steps (no early stopping, no propensity), reported as
milliseconds per step, the fastest and the median over the realizations: for engine changes that
round differently, whose early-stopped fits then stop at other steps and cannot be compared by
wall time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from dowhy_cfr import CFR
from dowhy_cfr.datasets import ihdp_split, load_ihdp_many


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--realizations", default="1-10")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--fixed-steps", type=int, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    lo, hi = (int(v) for v in args.realizations.split("-"))
    reals = list(range(lo, hi + 1))
    data = load_ihdp_many(reals)
    x, t = data["x"][0], data["t"][0]
    w0 = ihdp_split(len(x), seed=reals[0]).within
    CFR(n_iter=5, verbose=0).fit(data["yf"][0][w0], t[w0], X=x[w0])  # warm-up
    fixed = ({} if args.fixed_steps is None else
             dict(n_iter=args.fixed_steps, patience=None, debias=None))
    for k in (1, 5):
        secs, steps, best = [], [], []
        for i, r in enumerate(reals):
            w = ihdp_split(len(x), seed=r).within
            start = time.perf_counter()
            est = CFR(random_state=0, verbose=0, n_ensemble=k, **fixed).fit(data["yf"][i][w], t[w],
                                                                          X=x[w])
            secs.append(time.perf_counter() - start)
            steps.append(est.n_iter_)
            best.append(int(np.max(est.best_iteration_)))
        if fixed:
            ms = np.array(secs) / args.fixed_steps * 1e3
            print(f"n_ensemble={k}: {ms.min():.2f} ms/step (fastest), median {np.median(ms):.2f}",
                  flush=True)
            continue
        print(f"n_ensemble={k}: median {np.median(secs):.2f} s (min {min(secs):.2f}, max "
              f"{max(secs):.2f}), steps run median {np.median(steps):.0f}, best step median "
              f"{np.median(best):.0f}", flush=True)


if __name__ == "__main__":
    main()
