"""How much the in-sample heads understate the residual variance sigma^2 of the sensitivity bounds.

The bounds of ``dowhy_cfr.sensitivity`` scale with sqrt(sigma^2 nu^2), sigma^2 = E[(Y - g(T, X))^2].
With one network (``n_ensemble=1``, the former default) the doubly robust stage's outcome
predictions are the in-sample heads', whose residuals on the units they trained on can be too
small; the default's K-fold members give out-of-fold ones. On IHDP the truth is
known: Y = mu_T(X) + noise, so the oracle sigma^2 of a sample is mean((y - mu_t(x))^2) (noise
variance 1). Per realization this compares, as ratios to the oracle:

* ``in_sample``: CFR with one network (``--cfr-params`` for both fits), residuals of all fitted units (what the stage holds);
* ``validation``: the same network, residuals of its validation units only (not trained on, used
  for early stopping);
* ``train``: the same network, residuals of its training units only;
* ``cross_fit``: ``CFR(n_ensemble=5, cross_fit=True)``, out-of-fold residuals of all units;

and the robustness value (``interval_type="theta"``, null 0) of the ATE with each sigma^2 (nu^2
and theta of the default fit). Both estimators train all realizations in one stacked pass.

``--design sim`` uses simulated data sets instead (n units, 10 covariates, Y = sin(2 x0) + x2^2 / 2
+ (1 + x1) T + N(0, 1), P(T = 1 | x) = expit(x0 - x1 / 2)); ``--patience none --n-iter 3000``
trains without early stopping (heads that overfit).

    python scripts/sensitivity_sigma.py --realizations 1-30 --out scripts/out/sensitivity_sigma.csv
    python scripts/sensitivity_sigma.py --design sim --n 500 --realizations 1-10
    python scripts/sensitivity_sigma.py --design sim --n 500 --realizations 1-10 --patience none --n-iter 3000
"""
from __future__ import annotations

import argparse
import json
import dataclasses
import os
import time
import warnings

import numpy as np
import pandas as pd


def residual_variance(y, arms, mu, rows=None) -> float:
    r = (y - mu[np.arange(len(y)), arms]) ** 2
    return float(r.mean() if rows is None else r[rows].mean())


def simulate(n: int, seed: int) -> dict:
    """One simulated data set of the ``--design sim`` (noise variance 1)."""
    from scipy.special import expit

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 10))
    t = rng.binomial(1, expit(x[:, 0] - x[:, 1] / 2))
    mu0 = np.sin(2 * x[:, 0]) + x[:, 2] ** 2 / 2
    mu1 = mu0 + 1 + x[:, 1]
    y = np.where(t == 1, mu1, mu0) + rng.normal(size=n)
    return {"x": x, "t": t, "yf": y, "mu0": mu0, "mu1": mu1}


def load(design: str, reals: list[int], n: int):
    """(x, t, y, mu0, mu1): x and t shared (IHDP) or per data set (lists)."""
    if design == "ihdp":
        from dowhy_cfr.datasets import load_ihdp_many

        d = load_ihdp_many(reals, copy=True)
        return d["x"][0], d["t"][0].astype(int), d["yf"], d["mu0"], d["mu1"]
    sims = [simulate(n, r) for r in reals]
    return ([s["x"] for s in sims], [s["t"] for s in sims], np.stack([s["yf"] for s in sims]),
            np.stack([s["mu0"] for s in sims]), np.stack([s["mu1"] for s in sims]))


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realizations", default="1-10", help="IHDP realizations, e.g. 1-10")
    parser.add_argument("--design", default="ihdp", choices=("ihdp", "sim"))
    parser.add_argument("--n", type=int, default=500, help="units per simulated data set")
    parser.add_argument("--n-iter", default="auto", help="CFR n_iter (default 'auto')")
    parser.add_argument("--patience", default="10", help="CFR patience ('none': no early stopping)")
    parser.add_argument("--out", default=None, help="CSV of the per-realization rows")
    parser.add_argument("--cfr-params", default="{}",
                        help="JSON object of CFR keyword arguments for both fits, e.g. "
                             "'{\"n_rep_layers\": 3, \"rep_dim\": 200}'")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    from dowhy_cfr import CFR
    from dowhy_cfr.sensitivity import robustness_value

    lo, _, hi = args.realizations.partition("-")
    reals = list(range(int(lo), int(hi or lo) + 1))
    x, t, y, mu0, mu1 = load(args.design, reals, args.n)
    n_iter = args.n_iter if args.n_iter == "auto" else int(args.n_iter)
    patience = None if args.patience == "none" else int(args.patience)
    fits, cpu = {}, {}
    params = json.loads(args.cfr_params)
    # "default": one network, in-sample heads (the former default); "cross_fit": five K-fold
    # members, out-of-fold heads (the current default)
    for name, extra in (("default", dict(params, n_ensemble=1, cross_fit=False)),
                        ("cross_fit", dict(params, n_ensemble=5, cross_fit=True))):
        c0 = time.process_time()
        est = CFR(random_state=0, verbose=0, n_iter=n_iter, patience=patience, **extra)
        fits[name] = est.fit_stacked(y, t, X=x, seeds="fit")
        cpu[name] = time.process_time() - c0
    rows = []
    for k, r in enumerate(reals):
        t_k = t[k] if isinstance(t, list) else t
        oracle = residual_variance(y[k], t_k, np.column_stack([mu0[k], mu1[k]]))
        default, crossed = fits["default"][k], fits["cross_fit"][k]
        stage, members = default.fitted_.debiased, default.fitted_.members
        s2 = {"in_sample": residual_variance(stage.y, stage.arms, stage.mu),
              "validation": residual_variance(stage.y, stage.arms, stage.mu, members.val_rows[0]),
              "train": residual_variance(stage.y, stage.arms, stage.mu, members.train_rows[0]),
              "cross_fit": residual_variance(y[k], t_k, crossed.fitted_.debiased.mu)}
        params = default.sensitivity_params()
        row = {"realization": r, "oracle_sigma2": oracle}
        for key, value in s2.items():
            row[f"{key}_ratio"] = value / oracle
            row[f"rv_{key}"] = robustness_value(dataclasses.replace(params, sigma2=value),
                                                interval_type="theta")
        row["rv_oracle"] = robustness_value(dataclasses.replace(params, sigma2=oracle),
                                            interval_type="theta")
        rows.append(row)
    table = pd.DataFrame(rows)
    print(table.round(3).to_string(index=False))
    print("\nmeans:\n" + table.drop(columns="realization").mean().round(3).to_string())
    print(f"\nCPU seconds: {', '.join(f'{k} {v:.0f}' for k, v in cpu.items())}")
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        table.to_csv(args.out, index=False)
    return table


if __name__ == "__main__":
    main()
