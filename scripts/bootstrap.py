"""Stacked bootstrap: wall time of 100 replicas vs one fit, and empirical interval coverage.

    python scripts/bootstrap.py time      # one fit vs 100 stacked replicas (IHDP realization 1)
    python scripts/bootstrap.py time --replica-steps early_stopping
    python scripts/bootstrap.py coverage --seeds 50
                                             # coverage of 90%/95% intervals for ATE and tau(x)

The coverage design: n units, x ~ N(0, I_5), P(t=1|x) = sigmoid(x0), y = 2 x0 + x2 + t (1 + x1)
+ N(0, 1); the true ATE is 1 and tau(x) = 1 + x1. For each seed a new data set is drawn and a CFR
with CFRBootstrapInference(n_bootstrap_samples) is fitted; we record whether the intervals
contain the truth (ATE over the sample's units; tau(x) at every unit, averaged over units).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from dowhy_cfr import CFR, CFRBootstrapInference


def _design(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    T = rng.binomial(1, 1 / (1 + np.exp(-X[:, 0])))
    tau = 1 + X[:, 1]
    Y = 2 * X[:, 0] + X[:, 2] + T * tau + rng.normal(size=n)
    return X, T, Y, tau


def run_time(args):
    from dowhy_cfr.datasets import load_ihdp

    d = load_ihdp(args.realization)
    params = dict(n_iter=args.n_iter, random_state=0, verbose=0)
    t0 = time.perf_counter()
    single = CFR(**params).fit(d.yf, d.t, X=d.x)
    one = time.perf_counter() - t0
    steps = _steps(args.replica_steps)
    t0 = time.perf_counter()
    est = CFR(**params).fit(d.yf, d.t, X=d.x, inference=CFRBootstrapInference(
        args.replicas, random_state=0, replica_steps=steps))
    boot = time.perf_counter() - t0
    reps = est._inference._est._instances
    rep_steps = [int(r.history_["step"].max()) for r in reps]
    res = {"realization": args.realization, "n_iter": args.n_iter,
           "one_fit_s": round(one, 1), "one_fit_steps": int(single.n_iter_),
           "one_fit_best_step": int(single.best_iteration_[0]),
           "replica_steps": args.replica_steps, "replicas": args.replicas,
           "replica_steps_mean": round(float(np.mean(rep_steps)), 1),
           "fit_plus_replicas_s": round(boot, 1), "replicas_only_s": round(boot - one, 1),
           "ratio_to_one_fit": round((boot - one) / one, 1)}
    print(json.dumps(res))


def _steps(value):
    return int(value) if str(value).isdigit() else value


def run_coverage(args):
    if args.default_net:  # the estimator's defaults: 3x200 representation, 3x100 heads, 3000 it
        params = dict(verbose=0)
    else:
        params = dict(n_rep_layers=2, rep_dim=args.width, n_head_layers=2, head_dim=args.width,
                      n_iter=args.n_iter, batch_size=100, verbose=0)
    hits = {("ate", a): [] for a in (0.1, 0.05)}
    hits.update({("tau", a): [] for a in (0.1, 0.05)})
    widths = {("ate", a): [] for a in (0.1, 0.05)}
    t0 = time.perf_counter()
    for seed in range(args.seeds):
        X, T, Y, tau = _design(args.n, seed)
        est = CFR(random_state=seed, **params).fit(
            Y, T, X=X, inference=CFRBootstrapInference(args.replicas, bootstrap_type=args.kind,
                                                       random_state=seed,
                                                       replica_steps=_steps(args.replica_steps)))
        for a in (0.1, 0.05):
            lo, hi = est.ate_interval(X, alpha=a)
            hits[("ate", a)].append(lo <= tau.mean() <= hi)
            widths[("ate", a)].append(hi - lo)
            lo, hi = est.effect_interval(X, alpha=a)
            hits[("tau", a)].append(np.mean((lo <= tau) & (tau <= hi)))
        print(json.dumps({"seed": seed, "ate_90": bool(hits[("ate", 0.1)][-1]),
                          "ate_95": bool(hits[("ate", 0.05)][-1]),
                          "tau_90": round(float(hits[("tau", 0.1)][-1]), 3),
                          "tau_95": round(float(hits[("tau", 0.05)][-1]), 3),
                          "ate_width_90": round(float(widths[("ate", 0.1)][-1]), 3),
                          "ate_error": round(float(est.ate(X) - tau.mean()), 3),
                          "best_step": int(est.best_iteration_[0]),
                          "seconds": round(time.perf_counter() - t0)}), flush=True)
    out = {f"{what}_{int(100 * (1 - a))}": round(float(np.mean(v)), 3)
           for (what, a), v in hits.items()}
    out.update({f"ate_width_{int(100 * (1 - a))}": round(float(np.mean(v)), 3)
                for (_, a), v in widths.items()})
    out.update({"seeds": args.seeds, "n": args.n, "replicas": args.replicas, "kind": args.kind,
                "replica_steps": args.replica_steps,
                "network": "default" if args.default_net else f"2x{args.width}, n_iter={args.n_iter}",
                "seconds": round(time.perf_counter() - t0)})
    print(json.dumps(out))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("time")
    t.add_argument("--replicas", type=int, default=100)
    t.add_argument("--n-iter", type=int, default=3000)
    t.add_argument("--realization", type=int, default=1)
    t.add_argument("--replica-steps", default="fitted",
                   help="'fitted' (default), 'early_stopping' or a number of steps")
    c = sub.add_parser("coverage")
    c.add_argument("--seeds", type=int, default=50)
    c.add_argument("--n", type=int, default=1000)
    c.add_argument("--replicas", type=int, default=100)
    c.add_argument("--n-iter", type=int, default=1000)
    c.add_argument("--width", type=int, default=64)
    c.add_argument("--kind", default="percentile", choices=["percentile", "pivot", "normal"])
    c.add_argument("--replica-steps", default="fitted")
    c.add_argument("--default-net", action="store_true",
                   help="the estimator's default network and schedule (ignores --width/--n-iter)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    {"time": run_time, "coverage": run_coverage}[args.cmd](args)


if __name__ == "__main__":
    main()
