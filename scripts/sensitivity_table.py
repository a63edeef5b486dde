"""The hidden-confounder table of docs/sensitivity.md: CFR's sensitivity bounds against a confounder
of known strength.

For each strength (gamma, delta) of ``dowhy_cfr.datasets.HiddenConfounder`` (X0 and four noise
covariates observed, the binary confounder U hidden; the causal ATE is 1), ``--datasets`` data
sets of ``--n`` units, one default ``CFR`` each (all trained in one stacked pass). Per strength and
target (ATE, ATT) it prints

* the confounder's exact ``c_y``, ``c_t``, ``rho`` and the bias of the short effect (the effect
  given X only) over the causal one;
* the mean error of CFR's doubly robust estimate against the causal effect;
* the exact bound ``sqrt(c_y c_t / (1 - c_t) sigma^2 nu^2)`` at the confounder's (c_y, c_t) and CFR's
  estimate of it (``confounding_bias`` of its ``sensitivity_params``, mean);
* how often the bounds at (c_y, c_t) contain the causal effect: ``interval_type="theta"``, the 95%
  confidence bounds (``"ci"``), and the confidence bounds at a quarter of the strength;
* the mean robustness value of reaching the causal effect (``null_hypothesis`` = the truth,
  ``"theta"``): the strength c_y = c_t a confounder needs to move the estimate to it.

    python scripts/sensitivity_table.py --n 2000 --datasets 10 --out scripts/out/sensitivity_table.csv
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
import pandas as pd

STRENGTHS = [(0.0, 0.0), (0.5, 0.25), (1.0, 0.5), (2.0, 1.0), (3.0, 1.5)]
TARGETS = ("ate", "att")


def one_fit_row(est, truth: dict, target: str) -> dict:
    """The checks of one fitted estimator against the exact ``truth`` of ``target``."""
    from dowhy_cfr.sensitivity import confounding_bias, robustness_value, sensitivity_interval

    params = est.sensitivity_params(1, target=target)
    strength = dict(c_y=truth["c_y"], c_t=truth["c_t"])
    quarter = dict(c_y=truth["c_y"] / 4, c_t=truth["c_t"] / 4)
    inside = lambda lo, hi: bool(lo <= truth["long"] <= hi)  # noqa: E731
    return {
        "error": params.theta - truth["long"],
        "bound_estimated": confounding_bias(params, **strength),
        "covered_theta": inside(*sensitivity_interval(params, **strength, interval_type="theta")),
        "covered_ci": inside(*sensitivity_interval(params, **strength)),
        "covered_ci_quarter": inside(*sensitivity_interval(params, **quarter)),
        "rv_to_truth": robustness_value(params, null_hypothesis=truth["long"],
                                        interval_type="theta"),
    }


def main(argv=None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="units per data set (default 2000)")
    parser.add_argument("--datasets", type=int, default=10, help="data sets per strength")
    parser.add_argument("--n-iter", default="auto", help="CFR n_iter (default 'auto')")
    parser.add_argument("--out", default=None, help="CSV of the table")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    from dowhy_cfr import CFR
    from dowhy_cfr.datasets import HiddenConfounder

    designs = [HiddenConfounder(gamma, delta, n_noise=4) for gamma, delta in STRENGTHS]
    data = [d.sample(args.n, seed=1_000 * i + k) for i, d in enumerate(designs)
            for k in range(args.datasets)]
    n_iter = args.n_iter if args.n_iter == "auto" else int(args.n_iter)
    c0 = time.process_time()
    fits = CFR(random_state=0, verbose=0, n_iter=n_iter).fit_stacked(
        [s["y"] for s in data], [s["t"] for s in data], X=[s["x"] for s in data])
    cpu = time.process_time() - c0
    rows = []
    for i, design in enumerate(designs):
        for target in TARGETS:
            truth = design.truth(target)
            per_fit = pd.DataFrame([one_fit_row(est, truth, target) for est in
                                    fits[i * args.datasets:(i + 1) * args.datasets]])
            rows.append({"gamma": design.gamma, "delta": design.delta, "target": target,
                         "c_y": truth["c_y"], "c_t": truth["c_t"], "rho": truth["rho"],
                         "short_bias": truth["bias"], "bound_exact": truth["bound"],
                         **per_fit.mean().to_dict()})
    table = pd.DataFrame(rows)
    print(table.round(3).to_string(index=False))
    print(f"\n{len(fits)} CFR fits of {args.n} units, one stack: {cpu:.0f} CPU seconds")
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        table.to_csv(args.out, index=False)
    return table


if __name__ == "__main__":
    main()
