"""The representation-balance refuter's pass/fail figures on IHDP (docs/dowhy.md, "Pass/fail rule").

For each realization, CFR (defaults) and TARNet are estimated through DoWhy (``n_iter=1000``,
``random_state=0``) and the refuter is run on the validation units (the default, units the
network did not train on) with its training-units figure beside it::

    PYTHONPATH=. python scripts/balance_rule.py --realizations 1-6 --permutations 50 --threads 1
"""

from __future__ import annotations

import argparse
import logging
import warnings

import pandas as pd


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--realizations", default="1-6")
    parser.add_argument("--permutations", type=int, default=50)
    parser.add_argument("--n-iter", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    logging.getLogger("dowhy").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    from dowhy_cfr.benchmarks.refuters import ihdp_estimate
    from dowhy_cfr.benchmarks.report import parse_range

    rows = []
    for r in parse_range(args.realizations):
        for method in ("backdoor.cfr", "backdoor.tarnet"):
            model, estimand, est = ihdp_estimate(r, n_iter=args.n_iter, method=method)
            res = model.refute_estimate(estimand, est, method_name="representation_balance",
                                        n_permutations=args.permutations, random_state=0)
            t = res.training_units
            rows.append(dict(realization=r, method=method.split(".")[1],
                             val_units=res.n_units, reduction=round(res.reduction["wass"], 2),
                             p=round(res.p_value["wass"], 2), passed=res.passed,
                             train_reduction=round(t["reduction"], 2),
                             train_p=round(t["p_value"], 2)))
            print(rows[-1], flush=True)
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
