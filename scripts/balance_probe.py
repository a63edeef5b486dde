"""Measurement only (issue 45, item 2): what the balance penalty removes from the representation.

For one realistic design (seed 0, n = 1,500) and each ``alpha``, fits ``CFR(alpha=...)`` at the
other defaults and reports, averaged over the five members' representations Phi:

* ``heads``: the heads' root PEHE on 2,000 held-out units (``individual_effect``);
* ``R2(tau|Phi)``: how much of the true effect a boosted regression recovers from Phi of the
  held-out units (3-fold cross-validated R^2; from x itself for reference) -- what Phi keeps;
* ``AUC(T|Phi)``: how well a boosted classifier predicts the treatment from Phi of the fitted
  units (3-fold cross-validated ROC AUC; from x itself for reference) -- what is left to balance.

    python scripts/balance_probe.py nhefs-categorical 0,0.05,0.2

docs/parameters.md, item 20, quotes it for nhefs-categorical and cps-heavy.
"""
import argparse
import warnings

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.model_selection import cross_val_score

from dowhy_cfr import CFR
from dowhy_cfr.datasets.realistic import simulate_realistic


def _r2(features, target) -> float:
    return float(cross_val_score(HistGradientBoostingRegressor(max_iter=100, random_state=0),
                                 features, target, cv=3, scoring="r2").mean())


def _auc(features, t) -> float:
    return float(cross_val_score(HistGradientBoostingClassifier(max_iter=100, random_state=0),
                                 features, t, cv=3, scoring="roc_auc").mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("design")
    parser.add_argument("alphas", type=lambda v: [float(a) for a in v.split(",")])
    parser.add_argument("--n", type=int, default=1500)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    data = simulate_realistic(args.design, args.n, seed=0, n_test=2000)
    print(f"{args.design}: from x, R2(tau|x) {_r2(data.test.X, data.test.tau):.3f}, "
          f"AUC(T|x) {_auc(data.X, data.T):.3f}")
    for alpha in args.alphas:
        est = CFR(alpha=alpha, random_state=0, verbose=0).fit(data.Y, data.T, X=data.X)
        heads = np.ravel(est.individual_effect(data.test.X))
        members = range(est.fitted_.members.n_models)
        r2 = np.mean([_r2(est.transform(data.test.X, member=m), data.test.tau) for m in members])
        auc = np.mean([_auc(est.transform(data.X, member=m), data.T) for m in members])
        pehe = float(np.sqrt(np.mean((heads - data.test.tau) ** 2)))
        print(f"alpha {alpha:g}: heads sqrt(PEHE) {pehe:.3f}, R2(tau|Phi) {r2:.3f}, "
              f"AUC(T|Phi) {auc:.3f}", flush=True)


if __name__ == "__main__":
    main()
