"""The AIPW ATE of default CFR fits recomputed with other propensities and outcome corrections.

Each data set is fitted once with the default CFR; from its doubly robust stage
(``est.fitted_.debiased``: outcomes, out-of-fold heads, the kept propensity) the normalised
AIPW ATE and its influence-function standard error are recomputed with

* ``ate``: the fit's own parts (the logistic regression or the boosting, whichever has the
  lower out-of-fold log-loss);
* ``e_boost``: the boosting's cross-fitted propensity whatever the log-loss says;
* ``e_mix``: the convex mixture w * logistic + (1 - w) * boosting of the two cross-fitted
  propensities, w minimising the mixture's out-of-fold log-loss (floored at
  ``SELECTION_FLOOR``, 1e-3): the super learner of van der Laan, Polley & Hubbard (2007) on the
  two candidates;
* ``resid``: the kept propensity, the heads plus a cross-fitted boosted regression of their
  residuals per arm (``scripts/ate_parts.py``);
* ``resid_mix``: both changes;
* ``e_iso``, ``e_mix_iso``: the kept / the mixed propensity calibrated by isotonic regression
  of T on it over the fitted units (its out-of-fold values pooled), then clipped at the fit's
  ``min_propensity``: the isotonic calibration of van der Laan, Lin, Carone & Luedtke (2024),
  under which the weights balance T on every level set of the propensity;
* ``iso_both``: the kept propensity and the heads both calibrated, the heads by an isotonic
  regression of Y on each arm's head over that arm's units (the calibrated doubly robust
  estimator of van der Laan, Luedtke & Carone, 2024);
* ``oracle_e``, ``oracle_mu``: the true propensity (clipped as the fit's) with the fit's
  heads, and the true potential-outcome means with the fit's propensity: where the bias comes
  from.

Per design (synthetic) or over the suite (realistic) it prints each variant's bias, sd, mean
absolute error against the population ATE, mean standard error and 95 % coverage, and the
paired difference of each variant's absolute error from ``ate``'s; first the root mean squared
error of the kept and of the mixed propensity against the true one (clipped as the fit's).
Reproduces ``docs/debiased.md``, "A mixture of the two candidates, measured" and "Isotonic
calibration"::

    python scripts/ate_propensity_variants.py realistic held-out 1500 0 --out r_ho.csv
    python scripts/ate_propensity_variants.py synthetic A 500 0-59 --out a500.csv
    python scripts/ate_propensity_variants.py synthetic B,C,D,E 500 0-39 --out s500.csv
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar
from sklearn.isotonic import IsotonicRegression

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ate_parts import boosted_outcomes  # noqa: E402

from dowhy_cfr import CFR  # noqa: E402
from dowhy_cfr.benchmarks import realistic as R  # noqa: E402
from dowhy_cfr.benchmarks.synthetic import parse_seeds  # noqa: E402
from dowhy_cfr.datasets.synthetic import population_ate, simulate  # noqa: E402
from dowhy_cfr.debiased import average_effect  # noqa: E402
from dowhy_cfr.nuisance import (SELECTION_FLOOR, arm_log_loss, clip_propensity,  # noqa: E402
                                cross_fit_propensity, weighted_residual_level)

VARIANTS = ("ate", "e_boost", "e_mix", "resid", "resid_mix", "e_iso", "e_mix_iso", "iso_both",
            "oracle_e", "oracle_mu")


def normalised_aipw(y, t, mu, e) -> tuple[float, float]:
    """The AIPW ATE with normalised weights (the package's default) and its standard error."""
    mu = mu + weighted_residual_level(y, t, mu, e)[None, :]
    effect = average_effect(y, t, mu, e)
    return effect.estimate, effect.stderr


def log_loss_mixture(e_a, e_b, t) -> tuple[np.ndarray, float]:
    """The convex mixture of two propensities (n, 2) with the lowest log-loss, floored as the
    package compares its candidates (:data:`dowhy_cfr.nuisance.SELECTION_FLOOR`)."""

    def loss(w):
        return arm_log_loss(clip_propensity(w * e_a + (1 - w) * e_b, SELECTION_FLOOR), t)

    w = float(minimize_scalar(loss, bounds=(0.0, 1.0), method="bounded").x)
    return w * e_a + (1 - w) * e_b, w


def isotonic(e: np.ndarray, t: np.ndarray, floor: float) -> np.ndarray:
    """The treated propensity ``e[:, 1]`` calibrated by an isotonic regression of T on it
    (scikit-learn's ``IsotonicRegression``), as (n, 2) arm probabilities clipped at ``floor``."""
    e1 = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit_transform(
        e[:, 1], (t == 1).astype(float))
    return clip_propensity(np.column_stack([1 - e1, e1]), floor)


def isotonic_heads(mu: np.ndarray, y: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Each arm's head ``mu[:, a]`` calibrated by an isotonic regression of Y on it over the
    units of arm a, evaluated at every unit: (n, 2)."""
    out = np.empty_like(mu)
    for a in (0, 1):
        iso = IsotonicRegression(out_of_bounds="clip").fit(mu[t == a, a], y[t == a])
        out[:, a] = iso.predict(mu[:, a])
    return out


def variants(est, seed: int, e_true: np.ndarray, mu_true: np.ndarray) -> dict:
    """The ATE and its standard error under every variant, from one fitted default CFR, and the
    root mean squared errors of the kept and the mixed propensity against ``e_true`` (n,);
    ``mu_true`` (n, 2) the true potential-outcome means of the fitted units."""
    st = est.fitted_.debiased
    y, t, mu, e = st.y, st.arms, st.mu, st.e
    floor = est.min_propensity  # the fit's clip, which every swapped propensity keeps
    residual = boosted_outcomes(st.x, y, t, [y - mu[:, 0], y - mu[:, 1]], seed, max_iter=100,
                                max_leaf_nodes=15)
    e_log = cross_fit_propensity("linear", st.x, t, n_arms=2, random_state=seed).e
    e_boost = cross_fit_propensity("gbf", st.x, t, n_arms=2, random_state=seed).e
    e_mix, w = log_loss_mixture(e_log, e_boost, t)
    e_iso = isotonic(e, t, floor)
    target = np.clip(e_true, floor, 1 - floor)
    parts = {"ate": (mu, e), "e_boost": (mu, e_boost), "e_mix": (mu, e_mix),
             "resid": (mu + residual, e), "resid_mix": (mu + residual, e_mix),
             "e_iso": (mu, e_iso), "e_mix_iso": (mu, isotonic(e_mix, t, floor)),
             "iso_both": (isotonic_heads(mu, y, t), e_iso),
             "oracle_e": (mu, np.column_stack([1 - target, target])), "oracle_mu": (mu_true, e)}
    row = dict(model=st.propensity_model, w_logistic=w,
               rmse_e_kept=float(np.sqrt(np.mean((e[:, 1] - target) ** 2))),
               rmse_e_mix=float(np.sqrt(np.mean((e_mix[:, 1] - target) ** 2))))
    for name, (m, p) in parts.items():
        row[name], row[f"{name}_se"] = normalised_aipw(y, t, m, p)
    return row


def fits(kind: str, designs: str, n: int, seeds: list[int]):
    """Yields (design, seed, population ATE, true propensities (n,), true potential-outcome
    means (n, 2), fitted default CFR)."""
    if kind == "realistic":
        for design in R.parse_designs(designs):
            for seed in seeds:
                data = R.draw_data(design, n, seed, dict(n_test=10, overlap=None))
                est = CFR(random_state=seed, verbose=0).fit(data.Y, data.T, X=data.X)
                yield design, seed, data.ate, data.e, np.column_stack([data.mu0, data.mu1]), est
        return
    for design in designs.split(","):
        for seed in seeds:
            data = simulate(design, n, random_state=seed)
            x = data.x if data.w is None else np.column_stack([data.x, data.w])
            est = CFR(random_state=seed, verbose=0).fit(data.y, data.t, X=x)
            mu_true = np.column_stack([data.b - data.tau / 2, data.b + data.tau / 2])
            yield design, seed, population_ate(design), data.e, mu_true, est


def summary(frame: pd.DataFrame) -> None:
    """Each variant's bias, sd, mean absolute error, standard error, coverage, paired change."""
    print(f"  propensity rmse: kept {frame['rmse_e_kept'].mean():.4f}, mixture "
          f"{frame['rmse_e_mix'].mean():.4f} "
          f"(mean w of the logistic {frame['w_logistic'].mean():.2f})")
    base = (frame["ate"] - frame["truth"]).abs()
    for name in VARIANTS:
        err, se = frame[name] - frame["truth"], frame[f"{name}_se"]
        diff = err.abs() - base
        print(f"  {name:9s} bias {err.mean():+.4f} sd {err.std():.4f} mae {err.abs().mean():.4f} "
              f"se {se.mean():.4f} coverage {(err.abs() <= 1.96 * se).mean():.3f} "
              f"abs. error - ate's {diff.mean():+.4f} +- {diff.std() / np.sqrt(len(diff)):.4f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("realistic", "synthetic"))
    parser.add_argument("designs", help="a suite or designs (realistic), designs A-E (synthetic)")
    parser.add_argument("n", type=int)
    parser.add_argument("seeds", type=parse_seeds, help="e.g. 0-59 or 0,1")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = []
    for design, seed, truth, e_true, mu_true, est in fits(args.kind, args.designs, args.n,
                                                          args.seeds):
        rows.append(dict(design=design, seed=seed, truth=truth,
                         **variants(est, seed, e_true, mu_true)))
        print(design, seed, flush=True)
    frame = pd.DataFrame(rows)
    frame.to_csv(args.out, index=False)
    groups = [("all", frame)] if args.kind == "realistic" else frame.groupby("design")
    for name, group in groups:
        print(name)
        summary(group)


if __name__ == "__main__":
    main()
