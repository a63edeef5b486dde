"""Where the heads' error comes from: bias across data sets, the arms' errors, effect cells.

For each realistic design, fits CFR (``--cfr-params``; ``--tarnet`` for TARNet) on ``--seeds``
independent training sets of ``--n`` units and predicts the heads' effects
(``individual_effect``) and the reported ones (``effect``) on one common test set (the test
units of data seed 1000). Per design it prints

* ``rmse``, ``bias``, ``sd``: the heads' root mean squared error over the fits and the test
  units, split into the error of the mean estimate over the fits (``bias``, which still holds
  ``sd / sqrt(seeds)``) and the spread between fits (``sd``); every fit's effects are first
  centred on the true ATE, so the ATE's own error is left out;
* ``mu0``, ``mu1``, ``corr``: the root mean squared errors of the heads' potential outcomes
  (``predict_outcomes``) against the true ``mu0``, ``mu1``, and the correlation of the two
  errors across test units: the effect's error is ``sd(e1 - e0)``, small only where the two arms
  err alike;
* ``between``, ``within``: where the true effect takes at most 40 distinct values (steps,
  categories, counts), the error of the heads' mean within each cell of units that share a true
  effect (``between``: does the estimate find the cells?) and the heads' spread within cells
  (``within``: does it vary where the truth does not?), weighted by the cells' sizes.

Reproduces ``docs/parameters.md``, item 41::

    python scripts/heads_bias.py nhefs-categorical,lalonde-counts,ames-steps --seeds 6
    python scripts/heads_bias.py nhefs-categorical,lalonde-counts,ames-steps --seeds 6 --tarnet
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import torch


def _cells(tau: np.ndarray, est: np.ndarray) -> tuple[float, float]:
    """Between-cell error and within-cell spread of ``est`` over the cells of equal ``tau``."""
    values, inverse, counts = np.unique(np.round(tau, 6), return_inverse=True,
                                        return_counts=True)
    if len(values) > 40:
        return np.nan, np.nan
    means = np.bincount(inverse, weights=est) / counts
    spread = np.bincount(inverse, weights=(est - means[inverse]) ** 2) / counts
    between = np.sqrt(np.average((means - values) ** 2, weights=counts))
    return float(between), float(np.sqrt(np.average(spread, weights=counts)))


def run(design: str, seeds: int, n: int, params: dict, tarnet: bool) -> dict:
    from dowhy_cfr import CFR, TARNet
    from dowhy_cfr.datasets.realistic import simulate_realistic

    test = simulate_realistic(design, n, seed=1000, n_test=2000).test
    heads, reported, e0, e1, cells = [], [], [], [], []
    for s in range(seeds):
        d = simulate_realistic(design, n, seed=s, n_test=10)
        est = (TARNet if tarnet else CFR)(random_state=s, verbose=0, **params)
        est.fit(d.Y, d.T, X=d.X)
        h = est.individual_effect(test.X)
        heads.append(h - h.mean() + test.tau.mean())
        r = np.ravel(est.effect(test.X))
        reported.append(r - r.mean() + test.tau.mean())
        mu0, mu1 = est.predict_outcomes(test.X)
        e0.append(mu0 - test.mu0)
        e1.append(mu1 - test.mu1)
        cells.append(_cells(test.tau, h))
    heads, reported = np.array(heads), np.array(reported)
    e0, e1 = np.concatenate(e0), np.concatenate(e1)
    between, within = np.nanmean(np.array(cells), 0) if not np.isnan(cells[0][0]) else (
        np.nan, np.nan)
    return dict(design=design, rmse=np.sqrt(np.mean((heads - test.tau) ** 2)),
                bias=np.sqrt(np.mean((heads.mean(0) - test.tau) ** 2)),
                sd=np.sqrt(np.mean(heads.var(0))),
                reported=np.sqrt(np.mean((reported - test.tau) ** 2)),
                mu0=np.sqrt(np.mean(e0 ** 2)), mu1=np.sqrt(np.mean(e1 ** 2)),
                corr=float(np.corrcoef(e0, e1)[0, 1]), between=between, within=within)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("designs", help="comma-separated realistic designs")
    parser.add_argument("--seeds", type=int, default=6, help="training sets per design")
    parser.add_argument("--n", type=int, default=1500, help="training units")
    parser.add_argument("--cfr-params", default="{}", help="JSON keyword arguments")
    parser.add_argument("--tarnet", action="store_true", help="fit TARNet instead of CFR")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    import pandas as pd

    rows = [run(d, args.seeds, args.n, json.loads(args.cfr_params), args.tarnet)
            for d in args.designs.split(",")]
    print(pd.DataFrame(rows).set_index("design").round(3).to_string())


if __name__ == "__main__":
    main()
