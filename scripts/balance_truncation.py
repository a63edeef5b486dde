"""Measurement only (docs/balance.md, "The verdict"; docs/parameters.md, item 39): how much the
truncated Sinkhorn of ``wass_iterations`` moves the balance refuter's ``reduction``.

One default CFR fit per data set (IHDP realization 1; three realistic designs, n = 1,500, seed
0), then the Wasserstein term between the arms on 300 of its units (seeded), through the
representation at initialisation and as fitted, after 10 and after 1,000 Sinkhorn iterations,
and the reduction ``1 - after / before`` of each.

    python scripts/balance_truncation.py
"""
import warnings

import numpy as np
import torch

from dowhy_cfr import CFR
from dowhy_cfr.core.ipm import wasserstein
from dowhy_cfr.datasets import load_ihdp
from dowhy_cfr.datasets.realistic import simulate_realistic

warnings.simplefilter("ignore")
COUNTS = (10, 1000)


def data_sets():
    ihdp = load_ihdp(1)
    yield "ihdp-1", ihdp.x, ihdp.t, ihdp.yf
    for design in ("nmes-smooth", "hi-categorical", "cps-heavy"):
        r = simulate_realistic(design, 1500, seed=0, n_test=10)
        yield design, np.asarray(r.X, float), np.asarray(r.T), np.asarray(r.Y)


def main() -> None:
    print("Wasserstein term after", COUNTS, "iterations: before training / after / reduction")
    for name, x, t, y in data_sets():
        est = CFR(random_state=0, verbose=0).fit(y, t, X=x)
        rows = np.random.default_rng(0).choice(len(x), min(300, len(x)), replace=False)
        arms = torch.as_tensor(t[rows], dtype=torch.float32)
        terms = {}
        for stage, z in (("before", est.representation_at_init(x[rows])),
                         ("after", est.transform(x[rows]))):
            z = torch.as_tensor(np.asarray(z), dtype=torch.float32)
            terms[stage] = np.array([float(wasserstein(z, arms, n_iter=k)) for k in COUNTS])
        reduction = 1 - terms["after"] / terms["before"]
        print(f"{name:15s} {np.round(terms['before'], 4)} / {np.round(terms['after'], 4)} / "
              f"{np.round(reduction, 3)}", flush=True)


if __name__ == "__main__":
    main()
