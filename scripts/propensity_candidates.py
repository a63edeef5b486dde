"""The default propensity's boosting candidate and selection rule, compared on recorded fits.

A CFR fit's outcome predictions do not depend on the propensity, so one default fit per data set
is recorded once (covariates, arms, outcomes, the fit's outcome predictions ``mu``, the true ATE,
the seed of the estimator's propensity folds), and any propensity is then replayed offline: the
logistic candidate, boosting settings alone, and each boosting setting against the logistic
candidate under two selection rules, the log-loss of the clipped propensities of the received
arms (:func:`dowhy_cfr.debiased.arm_log_loss`, the default since 2026-11-24) and scikit-learn's
``log_loss`` of the unclipped ones (the rule before). Prints bias, s.d., mean absolute error, mean
standard error and 95% coverage of the AIPW ATE.

    python scripts/propensity_candidates.py record --design A --n 500 --datasets 0-59
    python scripts/propensity_candidates.py replay --design A --n 500

Quoted in docs/debiased.md ("A regularised boosting candidate").
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import log_loss

from dowhy_cfr import CFR
from dowhy_cfr.benchmarks.report import parse_range
from dowhy_cfr.datasets.synthetic import DESIGNS, simulate
from dowhy_cfr.debiased import (arm_log_loss, average_effect, cross_fit_propensity,
                                logistic_propensity_model, sklearn_seed)

OUT = Path("scripts/out/propensity")
BOOSTING = {  # depth 3, 100 rounds; what differs from scikit-learn's defaults
    "lr 0.1 (before)": dict(learning_rate=0.1),
    "lr 0.07": dict(learning_rate=0.07),
    "lr 0.05, leaf 40": dict(learning_rate=0.05, min_samples_leaf=40),
    "lr 0.1, leaf 40": dict(learning_rate=0.1, min_samples_leaf=40),
    "lr 0.1, leaf 40, l2 1 (default)": dict(learning_rate=0.1, min_samples_leaf=40,
                                            l2_regularization=1.0),
}


def record(design: str, n: int, seeds: list[int]) -> None:
    """One default CFR fit per data set (the coverage benchmark's data and network seeds)."""
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        d = simulate(design, n, d=6, sigma=1.0, random_state=[seed, DESIGNS.index(design), n, 0])
        est = CFR(random_state=seed, verbose=0).fit(d.y, d.t, X=d.x, W=d.w)
        stage = est.fitted_.debiased
        np.savez(OUT / f"{design}{n}_{seed}.npz", x=d.x if d.w is None else np.hstack([d.x, d.w]),
                 arms=stage.arms, y=stage.y, mu=stage.mu, truth=float(np.mean(d.tau)),
                 fold_seed=sklearn_seed(est.seeds_[0]), min_p=float(est.min_propensity))
        print(seed, flush=True)


def _out_of_fold(model, z) -> np.ndarray:
    """``model``'s unclipped out-of-fold probabilities on the estimator's folds."""
    return cross_fit_propensity(model, z["x"], z["arms"], n_arms=2,
                                random_state=int(z["fold_seed"]), min_propensity=0.0)


def replay(design: str, n: int) -> None:
    files = sorted(OUT.glob(f"{design}{n}_*.npz"), key=lambda f: int(f.stem.split("_")[1]))
    rows: dict[str, list] = {}
    for f in files:
        z = np.load(f)
        raw = {"logistic": _out_of_fold(logistic_propensity_model(), z)}
        for name, kw in BOOSTING.items():
            raw[name] = _out_of_fold(HistGradientBoostingClassifier(
                max_depth=3, max_iter=100, random_state=int(z["fold_seed"]), **kw), z)
        e = {k: np.clip(p, float(z["min_p"]), 1.0) for k, p in raw.items()}
        err = {k: average_effect(z["y"], z["arms"], z["mu"], p) for k, p in e.items()}
        for k, r in err.items():
            rows.setdefault(f"alone: {k}", []).append((r.estimate - z["truth"], r.stderr))
        for k in BOOSTING:
            clipped = arm_log_loss(e[k], z["arms"]) < arm_log_loss(e["logistic"], z["arms"])
            unclipped = log_loss(z["arms"], raw[k]) < log_loss(z["arms"], raw["logistic"])
            for rule, kept in (("clipped", clipped), ("unclipped", unclipped)):
                r = err[k] if kept else err["logistic"]
                rows.setdefault(f"vs logistic, {rule}: {k}", []).append(
                    (r.estimate - z["truth"], r.stderr, kept))
    print(f"design {design}, n = {n}, {len(files)} data sets")
    print("| propensity | bias | s.d. | mean abs. error | mean s.e. | coverage | boosting kept |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, values in rows.items():
        a = np.asarray(values, dtype=float)
        e, se = a[:, 0], a[:, 1]
        kept = f"{int(a[:, 2].sum())}/{len(a)}" if a.shape[1] > 2 else ""
        print(f"| {name} | {e.mean():+.3f} | {e.std():.3f} | {np.abs(e).mean():.3f} | "
              f"{se.mean():.3f} | {np.mean(np.abs(e) <= 1.96 * se):.2f} | {kept} |")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("record", "replay"))
    p.add_argument("--design", default="A", choices=DESIGNS)
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--datasets", default="0-59")
    args = p.parse_args(argv)
    if args.action == "record":
        record(args.design, args.n, parse_range(args.datasets))
    else:
        replay(args.design, args.n)


if __name__ == "__main__":
    main()
