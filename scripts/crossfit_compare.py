"""Paired measurements of a change to the fit: the benchmarks' data and seeds, two effect columns.

Runs the CFR fits of three benchmark suites exactly as ``python -m dowhy_cfr.benchmarks`` does
(same data, same seeds, ``CFR()`` at the defaults) and records, per data set, the reported
effect's sqrt(PEHE) (``effect``), the heads' own (``individual_effect``: h1 - h0 plus the doubly
robust shift), the ATE's error and whether its 95 % interval covers the truth, the mean width of
the pointwise intervals and their coverage. Run it once per version of the code (``PYTHONPATH``
picks the package) and compare the CSVs with ``compare``::

    PYTHONPATH=/tmp/base python scripts/crossfit_compare.py realistic --out /tmp/m/base
    PYTHONPATH=$PWD      python scripts/crossfit_compare.py realistic --out /tmp/m/new
    python scripts/crossfit_compare.py compare /tmp/m/base/realistic.csv /tmp/m/new/realistic.csv

Suites: ``realistic`` (the twelve development designs, n = 1,500, seeds 0-1), ``ihdp``
(realizations 1-100, out of sample, stacks of 25), ``coverage`` (designs A-E, n = 2,000, data
sets 0-49, stacks of 50).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np
import pandas as pd
import torch


def pehe(a, b) -> float:
    return float(np.sqrt(np.mean((np.ravel(a) - np.ravel(b)) ** 2)))


def _pointwise(est, x, truth):
    try:
        lo, hi = est.effect_interval(x, alpha=0.05)
    except Exception:  # noqa: BLE001 - no pointwise intervals
        return np.nan, np.nan
    lo, hi = np.ravel(lo), np.ravel(hi)
    return float(np.mean((lo <= truth) & (truth <= hi))), float(np.mean(hi - lo))


def _row(est, x_fit, x_test, tau_test, ate_true, w_test=None, **keys) -> dict:
    ate = float(np.ravel(est.ate())[0])
    lo, hi = (float(np.ravel(v)[0]) for v in est.ate_interval(alpha=0.05))
    cov, width = _pointwise(est, x_test, tau_test)
    blend = est.fitted_.blend
    return dict(**keys, pehe=pehe(est.effect(x_test), tau_test),
                pehe_heads=pehe(est.individual_effect(x_test, w_test), tau_test),
                ate_abs_error=abs(ate - ate_true), ate_covered=float(lo <= ate_true <= hi),
                ate_width=hi - lo, tau_coverage=cov, tau_width=width,
                lam=np.nan if blend is None else float(blend.weights[0]),
                constant=np.nan if blend is None else float(not np.any(blend.weights)))


def fit_realistic(design: str, n: int, seed: int, cfr_params: dict):
    """One default-protocol CFR fit on a realistic design: the estimator, the data and the fit's
    wall and CPU seconds and steps (also ``scripts/paired_timing.py``'s fit)."""
    from dowhy_cfr.benchmarks import realistic as R
    from dowhy_cfr.benchmarks.synthetic import make_estimator

    settings = dict(n_test=2000, overlap=None, alpha=0.05, tiny=False, n_iter=None,
                    cfr_params=cfr_params, cfr_inference="auto")
    data = R.draw_data(design, n, seed, settings)
    est = make_estimator("CFR", seed=seed, settings=settings)
    wall, cpu = time.perf_counter(), time.process_time()
    R.fit_method(est, "CFR", data, settings, seed)
    spent = dict(time_s=time.perf_counter() - wall, cpu_s=time.process_time() - cpu,
                 steps=int(est.fitted_.members.n_iter))
    return est, data, spent


def realistic(args) -> pd.DataFrame:
    from dowhy_cfr.benchmarks import realistic as R
    from dowhy_cfr.datasets.realistic import DEFAULT_DESIGNS

    rows = []
    designs = DEFAULT_DESIGNS if args.designs is None else R.parse_designs(args.designs)
    for design in designs:
        for seed in args.seeds:
            est, data, spent = fit_realistic(design, args.n, seed, args.cfr_params)
            rows.append(_row(est, data.X, data.test.X, data.test.tau, data.ate, design=design,
                             seed=seed, **spent))
            print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def ihdp(args) -> pd.DataFrame:
    from dowhy_cfr.benchmarks._runner import chunks, fit_cfr_stacked
    from dowhy_cfr.datasets import ihdp_split, load_ihdp_many

    reals = list(range(1, args.realizations + 1))
    data = load_ihdp_many(reals)
    x, t = np.ascontiguousarray(data["x"][0]), np.ascontiguousarray(data["t"][0])
    tau_all = data["mu1"] - data["mu0"]
    splits = [ihdp_split(x.shape[0], seed=int(r)) for r in reals]
    settings = dict(alpha_wass=0.2, alpha_mmd=1.0, n_iter=None, tiny=False,
                    cfr_params=args.cfr_params)
    rows = []
    for piece in chunks(list(range(len(reals))), 25):
        _, _, members = fit_cfr_stacked("CFR-Wass", x, t, data["yf"][piece],
                                        np.stack([splits[i].within for i in piece]),
                                        settings=settings, seed=piece[0])
        for est, i in zip(members, piece):
            test, within = splits[i].test, splits[i].within
            truth = tau_all[i]
            rows.append(_row(est, x[within], x[test], truth[test], float(truth[within].mean()),
                             realization=reals[i]))
        print(pd.DataFrame(rows).drop(columns="realization").mean().round(3).to_dict(),
              flush=True)
    return pd.DataFrame(rows)


def coverage(args) -> pd.DataFrame:
    from dowhy_cfr import CFR
    from dowhy_cfr.benchmarks.synthetic import population_ate, run_data
    from dowhy_cfr.plans import draw_seeds

    rows = []
    seeds = list(range(args.datasets))
    for design in args.designs.split(","):
        data = [run_data(design, args.n, s) for s in seeds]
        est = CFR(random_state=seeds[0], verbose=0, **args.cfr_params)
        fits = est.fit_stacked([tr.y for tr, _ in data], [tr.t for tr, _ in data],
                               X=[tr.x for tr, _ in data],  # W as W, as the benchmark
                               W=None if data[0][0].w is None else [tr.w for tr, _ in data],
                               seeds=[draw_seeds(s, est.n_ensemble) for s in seeds])
        for s, fit, (train, test) in zip(seeds, fits, data):
            rows.append(_row(fit, train.x, test.x, test.tau, population_ate(design),
                             w_test=test.w, design=design, seed=s))
        print(design, pd.DataFrame(rows).query("design == @design").drop(
            columns=["design", "seed"]).mean().round(3).to_dict(), flush=True)
        _save(pd.DataFrame(rows), args)  # each design as it is done
    return pd.DataFrame(rows)


def _save(frame: pd.DataFrame, args) -> None:
    os.makedirs(args.out, exist_ok=True)
    frame.to_csv(os.path.join(args.out, f"{args.command}.csv"), index=False)


def compare(args) -> None:
    old, new = pd.read_csv(args.old), pd.read_csv(args.new)
    keys = [c for c in ("design", "seed", "realization") if c in old.columns]
    both = old.merge(new, on=keys, suffixes=("_old", "_new"))
    group = "design" if "design" in keys and args.by_design else None
    metrics = ["pehe", "pehe_heads", "ate_abs_error", "ate_covered", "ate_width",
               "tau_coverage", "tau_width", "constant"]
    metrics += [m for m in ("time_s", "cpu_s", "steps") if m in old and m in new]

    def summary(g):
        out = {}
        for m in metrics:
            d = g[f"{m}_new"] - g[f"{m}_old"]
            out[m] = (f"{g[f'{m}_old'].mean():.4f} -> {g[f'{m}_new'].mean():.4f} "
                      f"({d.mean():+.4f} ± {d.std(ddof=1) / np.sqrt(len(d)):.4f})")
        return pd.Series(out)

    print(f"{len(both)} paired data sets")
    print(summary(both).to_string())
    if group:
        print(both.groupby(group).apply(summary).T.to_string())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("realistic")
    r.add_argument("--n", type=int, default=1500)
    r.add_argument("--designs", default=None,
                   help="as the benchmark's --designs (default: the development designs)")
    r.add_argument("--seeds", type=lambda v: [int(s) for s in v.split(",")], default=[0, 1])
    i = sub.add_parser("ihdp")
    i.add_argument("--realizations", type=int, default=100)
    c = sub.add_parser("coverage")
    c.add_argument("--designs", default="A,B,C,D,E")
    c.add_argument("--n", type=int, default=2000)
    c.add_argument("--datasets", type=int, default=50)
    for s in (r, i, c):
        s.add_argument("--out", required=True, help="directory of <suite>.csv")
        s.add_argument("--cfr-params", type=json.loads, default={},
                       help='CFR keyword arguments as JSON, e.g. \'{"val_fraction": 0.15}\'')
    cmp = sub.add_parser("compare")
    cmp.add_argument("old")
    cmp.add_argument("new")
    cmp.add_argument("--by-design", action="store_true")
    args = p.parse_args()
    if args.command == "compare":
        return compare(args)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    _save({"realistic": realistic, "ihdp": ihdp, "coverage": coverage}[args.command](args), args)


if __name__ == "__main__":
    main()
