"""Why the default CFR's AIPW interval under-covers on Nie & Wager's design A at n = 500.

For the first data sets of the coverage run (its data and network seeds), one default CFR fit
each; then the AIPW ATE of the fit's outcome predictions with other propensities, cross-fitted on
the estimator's own folds and clipped like the estimator's: each default candidate alone, their
average, the candidate (of the three) with the lowest out-of-fold log-loss, and the true
propensity. Prints the mean error and mean absolute error of each.

    python scripts/design_a_small_n.py A 500 16

Quoted in docs/debiased.md ("Coverage at scale").
"""
import sys

import numpy as np
import torch
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from dowhy_cfr import CFR
from dowhy_cfr.datasets.synthetic import DESIGNS, simulate
from dowhy_cfr.debiased import average_effect, default_propensity_models


def main(design: str = "A", n: int = 500, k: int = 16) -> None:
    torch.set_num_threads(1)
    errors = {"default (kept)": [], "logistic": [], "boosting": [], "average": [],
              "lowest log-loss of 3": [], "true": []}
    for seed in range(k):
        d = simulate(design, n, d=6, sigma=1.0, random_state=[seed, DESIGNS.index(design), n, 0])
        x = d.x if d.w is None else np.hstack([d.x, d.w])
        est = CFR(random_state=seed, verbose=0).fit(d.y, d.t, X=d.x, W=d.w)
        stage, truth = est.fitted_.debiased, float(np.mean(d.tau))
        fold_seed = int(est.seeds_[0]) % (2**32 - 1)  # the estimator's folds
        folds = StratifiedKFold(5, shuffle=True, random_state=fold_seed)
        e = {name: cross_val_predict(model, x, d.t, cv=folds, method="predict_proba")
             for name, model in default_propensity_models(fold_seed).items()}
        e["average"] = (e["logistic"] + e["boosting"]) / 2
        best = min(e, key=lambda name: log_loss(d.t, e[name]))
        e["lowest log-loss of 3"] = e[best]
        e["true"] = np.column_stack([1 - d.e, d.e])
        errors["default (kept)"].append(est.average_effect("ate").estimate - truth)
        for name, p in e.items():
            p = np.clip(p, est.min_propensity, 1.0)
            errors[name].append(average_effect(stage.y, stage.arms, stage.mu, p).estimate - truth)
        print(seed, est.propensity_model_, {k_: round(v[-1], 3) for k_, v in errors.items()},
              flush=True)
    for name, v in errors.items():
        v = np.asarray(v)
        print(f"{name:22s} mean error {v.mean():+.3f}  mean abs. error {np.abs(v).mean():.3f}")


if __name__ == "__main__":
    main(*(f(a) for f, a in zip((str, int, int), sys.argv[1:])))
