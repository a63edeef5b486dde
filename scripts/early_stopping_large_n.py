"""Early stopping on large data: the default CFR against a longer floor of the wait (``patience``
in evaluations), same data and seeds, on the synthetic designs. One line per fit: design, n,
seed, patience, sqrt(PEHE) on fresh test units, ATE error, seconds, best step, steps run.

    python scripts/early_stopping_large_n.py A,C,D,E 0-5 default,50 10000
    python scripts/early_stopping_large_n.py C,A 6-13 default,50 10000

Run on the package before ``MIN_WAIT_EPOCHS`` (2026-11-24), when the floor was 100 steps
whatever the data size; patience 50 (500 steps, 7 epochs at n = 10,000) was the candidate.
Results: ``scripts/results/issue13/patience10k.log``; docs/parameters.md, "Early stopping on
large data".
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import torch


def one(job):
    design, seed, patience, n = job
    from threadpoolctl import threadpool_limits

    from dowhy_cfr import CFR
    from dowhy_cfr.benchmarks.synthetic import run_data

    torch.set_num_threads(1)
    train, test = run_data(design, n, seed)
    kw = {} if patience == "default" else {"patience": int(patience)}
    with threadpool_limits(1):
        start = time.perf_counter()
        est = CFR(random_state=seed, verbose=0, **kw).fit(train.y, train.t, X=train.x, W=train.w)
        seconds = time.perf_counter() - start
    pehe = float(np.sqrt(np.mean((np.asarray(est.effect(test.x)).ravel() - test.tau) ** 2)))
    ate_error = float(np.asarray(est.ate(train.x)).ravel()[0]) - train.tau.mean()
    return (design, n, seed, patience, round(pehe, 5), round(ate_error, 5), round(seconds, 2),
            int(est.best_iteration_[0]), int(est.n_iter_))


def main(argv):
    designs, seeds, patiences, n = argv[0].split(","), argv[1], argv[2].split(","), int(argv[3])
    lo, hi = (int(v) for v in seeds.split("-"))
    jobs = [(d, s, p, n) for d in designs for s in range(lo, hi + 1) for p in patiences]
    with ProcessPoolExecutor(2) as pool:
        for row in pool.map(one, jobs):
            print(*row, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
