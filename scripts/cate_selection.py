"""Can CFR choose between its heads and its best linear projection without ground truth?

For each simulated data set: one default ``CFR(random_state=seed)``; the doubly robust scores
psi_i of the fit (``dowhy_cfr.debiased.aipw_terms``); the projection refitted on the training
units' scores only; then the doubly robust loss mean((psi_i - tau_hat(x_i))^2) of the heads'
``effect(x)`` and of that projection on the validation units (which neither the heads nor the
projection were fitted on). The lower loss chooses. Reports the test sqrt(PEHE) of the heads, the
projection, the choice and the oracle choice, and how often the choice is the oracle's.

    python scripts/cate_selection.py --designs A,B,C,D,E --n 2000 --datasets 40 --workers 2 --out scripts/out/cate_selection.csv
"""
from __future__ import annotations

import argparse
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd


def one(design: str, n: int, seed: int) -> dict:
    import torch
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    from dowhy_cfr import CFR
    from dowhy_cfr.datasets.synthetic import simulate
    from dowhy_cfr.debiased import aipw_terms, best_linear_projection
    train = simulate(design, n=n, random_state=seed)
    test = simulate(design, n=1000, random_state=100_000 + seed)
    est = CFR(random_state=seed, verbose=0).fit(train.y, train.t, X=train.x, W=train.w)
    stage = est.fitted_.debiased
    psi, _ = aipw_terms(stage.y, stage.arms, stage.mu, stage.e, a1=1, a0=0, target="ate")
    tr, va = est.fitted_.members.train_rows[0], est.fitted_.members.val_rows[0]
    x = train.x
    beta = best_linear_projection(psi[tr], x[tr], [f"x{j}" for j in range(x.shape[1])])
    beta = beta["estimate"].to_numpy()
    project = lambda z: beta[0] + (z - x[tr].mean(0)) @ beta[1:]
    heads = lambda z: np.ravel(est.effect(z))
    loss = {k: float(np.mean((psi[va] - f(x[va])) ** 2)) for k, f in (("heads", heads),
                                                                       ("projection", project))}
    pehe = {k: float(np.sqrt(np.mean((f(test.x) - test.tau) ** 2)))
            for k, f in (("heads", heads), ("projection", project))}
    chosen = min(loss, key=loss.get)
    best = min(pehe, key=pehe.get)
    return {"design": design, "n": n, "seed": seed, "pehe_heads": pehe["heads"],
            "pehe_projection": pehe["projection"], "pehe_chosen": pehe[chosen],
            "pehe_oracle": pehe[best], "chosen": chosen, "oracle": best,
            "loss_heads": loss["heads"], "loss_projection": loss["projection"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--designs", default="A,B,C,D,E")
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--datasets", type=int, default=40)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    jobs = [(d, args.n, s) for d in args.designs.split(",") for s in range(args.datasets)]
    with ProcessPoolExecutor(args.workers) as pool:
        df = pd.DataFrame(pool.map(one, *zip(*jobs)))
    df.to_csv(args.out, index=False)
    df["agrees"] = df["chosen"] == df["oracle"]
    df["projection_chosen"] = df["chosen"] == "projection"
    print(df.groupby("design")[["pehe_heads", "pehe_projection", "pehe_chosen", "pehe_oracle",
                                "projection_chosen", "agrees"]].mean().round(3).to_string())


if __name__ == "__main__":
    main()
