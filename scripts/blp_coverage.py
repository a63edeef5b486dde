"""Coverage of the best linear projection's intervals, and its accuracy as a CATE.

For each simulated data set of a Nie & Wager design (``dowhy_cfr.datasets.synthetic``), one
default ``CFR(random_state=seed)`` fit, then ``best_linear_projection(X)``. The true projection
coefficients (independent covariates): A, tau = (x1 + x2) / 2: (0.5, 0.5, 0, ...); B and E, tau
= x1 + log(1 + e^x2) with N(0, 1) covariates: (1, E[sigmoid(x2)] = 0.5, 0, ...) (Stein's
lemma); C, tau = 1: all 0; D: sqrt(PEHE) only. Writes one row per data set and coefficient
(estimate, interval, covered) and per data set the test sqrt(PEHE) of the projection used as a
CATE next to the heads' ``effect(X)`` and EconML's LinearDML (the synthetic benchmark's
settings).

    python scripts/blp_coverage.py --designs A,B --n 2000 --datasets 100 --workers 2 --out scripts/out/blp.csv
    python scripts/blp_coverage.py --designs A,B --n 2000 --datasets 100 --lineardml-only --out scripts/out/blp_lin.csv
    python scripts/blp_coverage.py --designs A --n 2000 --datasets 100 --cross-fit --out scripts/out/blp_cf5.csv
"""
from __future__ import annotations

import argparse
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

TRUE_SLOPES = {"A": [0.5, 0.5], "B": [1.0, 0.5], "C": [], "D": None, "E": [1.0, 0.5]}


def one(design: str, n: int, seed: int, lineardml_only: bool = False,
        cross_fit: bool = False) -> list[dict]:
    import torch
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    from dowhy_cfr import CFR
    from dowhy_cfr.benchmarks.synthetic import ProjectionCATE, make_estimator
    from dowhy_cfr.datasets.synthetic import simulate
    train = simulate(design, n=n, random_state=seed)
    test = simulate(design, n=1000, random_state=100_000 + seed)
    pehe = lambda tau_hat: float(np.sqrt(np.mean((np.ravel(tau_hat) - test.tau) ** 2)))
    peer = make_estimator("LinearDML", seed=seed, settings={"tiny": False, "n_iter": None})
    peer.fit(train.y, train.t, X=train.x, W=train.w)
    linear = {"design": design, "n": n, "seed": seed, "coefficient": "pehe",
              "pehe_lineardml": pehe(peer.effect(test.x))}
    if lineardml_only:
        return [linear]
    folds = dict(n_ensemble=5, cross_fit=True) if cross_fit else {}
    proj = ProjectionCATE(CFR(random_state=seed, verbose=0, **folds))
    proj.fit(train.y, train.t, X=train.x, W=train.w)
    slopes = proj.projection_.iloc[1:]
    rows = []
    if TRUE_SLOPES[design] is not None:  # D: tau is not linear, its projection not derived here
        truth = np.zeros(train.x.shape[1])
        truth[:len(TRUE_SLOPES[design])] = TRUE_SLOPES[design]
        rows = [{"design": design, "n": n, "seed": seed, "coefficient": name, "true": true,
                 "estimate": r.estimate, "stderr": r.stderr,
                 "covered": r.ci_lower <= true <= r.ci_upper}
                for (name, r), true in zip(slopes.iterrows(), truth)]
    rows.append({**linear, "pehe_projection": pehe(proj.effect(test.x)),
                 "pehe_heads": pehe(proj.cfr.effect(test.x))})
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--designs", default="A,B")
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--datasets", type=int, default=100)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lineardml-only", action="store_true",
                   help="only LinearDML's sqrt(PEHE) on the same data sets and test units")
    p.add_argument("--cross-fit", action="store_true",
                   help="CFR(n_ensemble=5, cross_fit=True): out-of-fold outcome predictions")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    jobs = [(d, args.n, s, args.lineardml_only, args.cross_fit) for d in args.designs.split(",")
            for s in range(args.datasets)]
    with ProcessPoolExecutor(args.workers) as pool:
        rows = [r for rs in pool.map(one, *zip(*jobs)) for r in rs]
    df = pd.DataFrame(rows)
    df.to_csv(args.out, index=False)
    pehe_cols = [c for c in ("pehe_projection", "pehe_heads", "pehe_lineardml") if c in df]
    print(df[df.coefficient == "pehe"].groupby("design")[pehe_cols].agg(["mean", "sem"])
          .round(3).to_string())
    if args.lineardml_only:
        return
    coef = df[df.coefficient != "pehe"]
    if coef.empty:
        return
    print(coef.groupby(["design", "coefficient"]).agg(
        true=("true", "first"), mean=("estimate", "mean"), sd=("estimate", "std"),
        mean_se=("stderr", "mean"), coverage=("covered", "mean")).round(3).to_string())


if __name__ == "__main__":
    main()
