"""Scaling of CFR with the number of units: wall time and peak memory for n = 1e4, 1e5, 1e6.

    python scripts/scaling.py --sizes 10000,100000,1000000 --n-iter 1000

Design: Nie & Wager (2021) setup A with d = 50 covariates, X ~ U[0, 1]^d,
e(x) = trim_{0.1}(sin(pi x1 x2)), b(x) = sin(pi x1 x2) + 2 (x3 - 0.5)^2 + x4 + 0.5 x5,
tau(x) = (x1 + x2) / 2, Y = b(x) + (T - 0.5) tau(x) + N(0, 1).
Each size runs in a fresh subprocess so that its peak resident memory (ru_maxrss) is its own.
Training cost per step does not depend on n (mini-batches); what grows with n is reading and
standardising the data, the validation evaluations and predicting tau for every unit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def nie_wager_a(n, d=50, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.random((n, d), dtype=np.float64)
    e = np.clip(np.sin(np.pi * X[:, 0] * X[:, 1]), 0.1, 0.9)
    T = (rng.random(n) < e).astype(np.int64)
    b = np.sin(np.pi * X[:, 0] * X[:, 1]) + 2 * (X[:, 2] - 0.5) ** 2 + X[:, 3] + 0.5 * X[:, 4]
    tau = (X[:, 0] + X[:, 1]) / 2
    Y = b + (T - 0.5) * tau + rng.normal(size=n)
    return X, T, Y, tau


def one(n: int, n_iter: int, threads: int) -> dict:
    import resource

    import numpy as np
    import torch

    from dowhy_cfr import CFR

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    X, T, Y, tau = nie_wager_a(n)
    t_data = time.perf_counter() - t0
    t0 = time.perf_counter()
    est = CFR(n_iter=n_iter, patience=None, random_state=0, verbose=0).fit(Y, T, X=X)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    eff = est.effect(X)
    t_pred = time.perf_counter() - t0
    return {
        "n": n, "d": X.shape[1], "n_iter": n_iter, "threads": threads,
        "data_s": round(t_data, 2), "fit_s": round(t_fit, 1), "effect_s": round(t_pred, 2),
        "sqrt_pehe": round(float(np.sqrt(np.mean((eff - tau) ** 2))), 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0),
        "data_mb": round(X.nbytes / 2**20, 0),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10000,100000,1000000")
    p.add_argument("--n-iter", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        print(json.dumps(one(args.child, args.n_iter, args.threads)))
        return
    for n in [int(s) for s in args.sizes.split(",")]:
        out = subprocess.run([sys.executable, __file__, "--child", str(n), "--n-iter",
                              str(args.n_iter), "--threads", str(args.threads)],
                             capture_output=True, text=True, check=True)
        print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
