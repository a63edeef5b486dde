"""Early-stopping schedules on IHDP: accuracy and steps of CFR-Wass and TARNet per schedule.

Fits ``CFR.fit_stacked`` on the given realizations (as ``python -m dowhy_cfr.benchmarks ihdp``
does: ``ihdp_split(747, seed=r).within`` for training) for each schedule and prints sqrt(PEHE)
within and out of sample, the steps run and the best step. Results: ``docs/parameters.md``.

    python scripts/early_stopping.py --realizations 1-100 --stack 50
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch

from dowhy_cfr import CFR, TARNet
from dowhy_cfr.benchmarks.report import parse_range
from dowhy_cfr.datasets import ihdp_split, load_ihdp_many

SCHEDULES = {
    "before (eval 100, patience 10, relative 0)": dict(eval_every=100, patience=10,
                                                       relative_patience=0.0),
    "eval 10, patience 10, relative 1": dict(eval_every=10, patience=10, relative_patience=1.0),
    "eval 10, patience 10, relative 0.5": dict(eval_every=10, patience=10,
                                               relative_patience=0.5),
    "eval 10, patience 20, relative 1": dict(eval_every=10, patience=20, relative_patience=1.0),
    "eval 20, patience 10, relative 1": dict(eval_every=20, patience=10, relative_patience=1.0),
}


def run(reals, stack, schedules, methods, seed=0, csv=None):
    data = load_ihdp_many(reals)
    x, t = data["x"][0], data["t"][0]
    tau = data["mu1"] - data["mu0"]
    rows = []
    splits = [ihdp_split(len(x), seed=int(r)) for r in reals]
    for method in methods:
        cls = TARNet if method == "TARNet" else CFR
        for label in schedules:
            within, out, steps, best, secs = [], [], [], [], 0.0
            for s in range(0, len(reals), stack):
                piece = list(range(s, min(s + stack, len(reals))))
                units = np.stack([splits[i].within for i in piece])
                start = time.perf_counter()
                members = cls(random_state=seed + s, verbose=0, **SCHEDULES[label]).fit_stacked(
                    data["yf"][piece], t, X=x, units=units)
                secs += time.perf_counter() - start
                for m, i in zip(members, piece):
                    err = m.effect(x) - tau[i]
                    within.append(np.sqrt(np.mean(err[splits[i].within] ** 2)))
                    out.append(np.sqrt(np.mean(err[splits[i].test] ** 2)))
                    h = m.history_
                    steps.append(int(h.loc[h["val_loss"].notna(), "step"].max()))  # its own stop
                    best.append(int(m.best_iteration_[0]))
                    rows.append(dict(method=method, schedule=label, realization=int(reals[i]),
                                     seed=seed, pehe_within=within[-1], pehe_out=out[-1],
                                     steps=steps[-1], best_step=best[-1]))
            print(f"| {method} | {label} | {np.mean(within):.3f} ± {np.std(within) / np.sqrt(len(within)):.3f} "
                  f"| {np.mean(out):.3f} ± {np.std(out) / np.sqrt(len(out)):.3f} "
                  f"| {np.median(out):.3f} | {np.mean(steps):.0f} | {np.median(best):.0f} "
                  f"| {secs:.0f} |", flush=True)
    if csv:
        pd.DataFrame(rows).to_csv(csv, index=False)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--realizations", default="1-100")
    p.add_argument("--stack", type=int, default=50)
    p.add_argument("--methods", default="CFR-Wass,TARNet")
    p.add_argument("--schedules", default=",".join(str(i) for i in range(len(SCHEDULES))),
                   help="indices into SCHEDULES")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0, help="random_state of the first stack")
    p.add_argument("--csv", default=None, help="also write one row per realization here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    labels = [list(SCHEDULES)[int(i)] for i in args.schedules.split(",")]
    print("| method | schedule | sqrt(PEHE) within | out-of-sample | median out | steps run "
          "(mean) | best step (median) | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    run(parse_range(args.realizations), args.stack, labels, args.methods.split(","),
        seed=args.seed, csv=args.csv)


if __name__ == "__main__":
    main()
