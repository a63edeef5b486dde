"""IHDP: out-of-sample sqrt(PEHE) and ATE error of the default (debiased) CFR against the heads'
plug-in effects of the same fits, and the AIPW ATE interval's coverage of the within-sample ATE.

The same protocol as ``python -m dowhy_cfr.benchmarks ihdp`` (``ihdp_split(747, seed=r)``, fit
on the within-sample units with ``CFR.fit_stacked``, one stack per 25 realizations, stack seed
= base seed + position). Usage::

    python scripts/debias_ihdp.py --realizations 1-100 --out scripts/out/debias_ihdp.csv
"""

import argparse
import warnings

import numpy as np
import pandas as pd
import torch

from dowhy_cfr import CFR
from dowhy_cfr.benchmarks.report import parse_range
from dowhy_cfr.datasets.ihdp import ihdp_split, load_ihdp_many


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--realizations", default="1-100")
    p.add_argument("--stack", type=int, default=25)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    reals = parse_range(a.realizations)
    data = load_ihdp_many(reals)
    x, t = data["x"][0], data["t"][0]
    tau_true = data["mu1"] - data["mu0"]
    rows = []
    for start in range(0, len(reals), a.stack):
        piece = list(range(start, min(start + a.stack, len(reals))))
        splits = [ihdp_split(x.shape[0], seed=int(reals[i])) for i in piece]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits = CFR(random_state=start, verbose=0).fit_stacked(
                data["yf"][piece], t, X=x, units=np.stack([s.within for s in splits]))
        for i, s, est in zip(piece, splits, fits):
            tt = tau_true[i]
            heads = est.fitted_.tau(est.fitted_.features(x))[:, 0]
            shifted = np.asarray(est.effect(x), dtype=float)
            res = est.average_effect("ate")
            lo, hi = res.interval(0.05)
            ate_w = tt[s.within].mean()
            rows.append(dict(
                realization=reals[i],
                out_pehe_plugin=np.sqrt(np.mean((heads[s.test] - tt[s.test]) ** 2)),
                out_pehe_debiased=np.sqrt(np.mean((shifted[s.test] - tt[s.test]) ** 2)),
                within_ate_err_plugin=abs(heads[s.within].mean() - ate_w),
                within_ate_err_debiased=abs(res.estimate - ate_w),
                out_ate_err_plugin=abs(heads[s.test].mean() - tt[s.test].mean()),
                out_ate_err_debiased=abs(shifted[s.test].mean() - tt[s.test].mean()),
                covered=float(lo <= ate_w <= hi), width=hi - lo))
        pd.DataFrame(rows).to_csv(a.out, index=False)
        print(f"{len(rows)} realizations", flush=True)
    df = pd.DataFrame(rows)
    print(df.drop(columns="realization").agg(["mean", "sem", "median"]).round(3).T)


if __name__ == "__main__":
    main()
