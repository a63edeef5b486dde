"""What the average curve's band rests on (issue 47; docs/parameters.md item 34, docs/dose.md).

Per data set of a dose design: one default continuous fit (``dose_scale`` as given), then the
average curve three ways -- the networks' plug-in mean curve, the doubly robust curve of the
fit (binned generalised propensity), and the doubly robust curve recomputed with the design's
**true** generalised propensity (the density ratio of the dose's logit-normal law, capped as
the fit caps its weights) -- each scored against the true curve; and the fit's band taken apart
by grid region: the estimate's bias and spread over the data sets against the standard errors
the band uses (the members' jackknife of the plug-in curve, the influence function's)::

    python scripts/dose_band_parts.py --design ihdp --scale range --seeds 30
    python scripts/dose_band_parts.py --design ihdp --scale rank --seeds 30
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd
import torch
from scipy import stats

#: The sd of the dose's logit around ``dose_logit(x)`` (``dowhy_cfr.datasets.dose``'s docstring:
#: N(0, 0.5^2) on VCNet's logit; IHDP's N(0, 0.5^2) before the logit is doubled).
LOGIT_SD = {"vcnet": 0.5, "ihdp": 1.0}


def true_weights(design: str, t, x, population) -> np.ndarray:
    r"""The stabilised weights :math:`\varpi(t_i) / \pi(t_i \mid x_i)` of the design's
    logit-normal dose (the logit's Jacobian cancels), the marginal averaged over ``population``."""
    from dowhy_cfr.datasets.dose import dose_logit

    sd, logit = LOGIT_SD[design], np.log(t / (1 - t))
    density = lambda z: np.exp(-0.5 * (z / sd) ** 2)  # noqa: E731 - constants cancel
    centres = dose_logit(design, population)
    marginal = np.array([density(v - centres).mean() for v in logit])
    return marginal / density(logit - dose_logit(design, x))


class TrueGPS:
    """The design's own generalised propensity in the interface :meth:`DoseStage.of` takes."""

    model = "true"

    def __init__(self, weights: np.ndarray):
        self._weights = weights

    def weights(self, dose, max_weight: float) -> np.ndarray:
        return np.minimum(self._weights, max_weight)


def band(stage, grid):
    """The fit's average curve on ``grid`` with its 95 % band, and the two standard errors."""
    res = stage.adrf(grid)
    members = stage.member_stderr(grid)
    q = stats.t.ppf(0.975, res.df)
    return (res.estimate, res.estimate - q * res.stderr, res.estimate + q * res.stderr, members,
            np.sqrt(np.maximum(res.stderr ** 2 - members ** 2, 0.0)))


def one(design: str, seed: int, scale: str) -> dict:
    from dowhy_cfr import CFR
    from dowhy_cfr.adrf import UNDERSMOOTH
    from dowhy_cfr.datasets.dose import simulate_dose
    from dowhy_cfr.fitted import DoseStage

    d = simulate_dose(design, seed)
    est = CFR(treatment="continuous", random_state=seed, dose_scale=scale).fit(d.y, d.t, X=d.x)
    stage = est.fitted_.dose
    population = (np.random.default_rng(1).uniform(size=(20000, 6)) if design == "vcnet"
                  else np.concatenate([d.x, d.x_test]))
    gps = TrueGPS(true_weights(design, d.t, d.x, population))
    oracle = DoseStage.of(stage.x, stage.y, stage.dose, stage.grid, stage.curves, stage.mu,
                          stage.plugin_curve, stage.member_curves, gps,
                          max_weight=1.0 / est.min_propensity, undersmooth=UNDERSMOOTH,
                          knots=(stage.knots_t, stage.knots_u))
    u_grid = stage.u(stage.grid)
    span = u_grid[-1] - u_grid[0]
    estimate, lower, upper, members, influence = band(stage, d.grid)
    return dict(truth=d.adrf, plugin=stage.plugin(d.grid), estimate=estimate, lower=lower,
                upper=upper, members=members, influence=influence,
                true_gps=oracle.adrf(d.grid).estimate, h=stage.h / span,
                h_true_gps=oracle.h / span)


def summarize(runs: list[dict]) -> tuple[pd.Series, pd.DataFrame]:
    get = lambda key: np.array([r[key] for r in runs])  # noqa: E731
    truth, est = get("truth"), get("estimate")
    covered = (get("lower") <= truth) & (truth <= get("upper"))
    overall = pd.Series({
        "plugin_mise": np.mean((get("plugin") - truth) ** 2),
        "dr_mise": np.mean((est - truth) ** 2),
        "dr_true_gps_mise": np.mean((get("true_gps") - truth) ** 2),
        "band_coverage": covered.mean(),
        "h_share_of_span": get("h").mean(), "h_true_gps": get("h_true_gps").mean()})
    regions = np.array_split(np.arange(truth.shape[1]), 3)
    rows = []
    for name, cols in zip(("low third", "middle third", "high third"), regions):
        err, plug = (est - truth)[:, cols], (get("plugin") - truth)[:, cols]
        se = np.sqrt(get("members") ** 2 + get("influence") ** 2)[:, cols]
        rows.append(dict(region=name, coverage=covered[:, cols].mean(),
                         rms_bias=np.sqrt((err.mean(0) ** 2).mean()), sd_error=err.std(0).mean(),
                         rms_se=np.sqrt((se ** 2).mean()), sd_plugin=plug.std(0).mean(),
                         rms_member_se=np.sqrt((get("members")[:, cols] ** 2).mean()),
                         sd_correction=(est - get("plugin"))[:, cols].std(0).mean(),
                         rms_influence_se=np.sqrt((get("influence")[:, cols] ** 2).mean())))
    return overall, pd.DataFrame(rows)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--design", default="ihdp", choices=("ihdp", "vcnet"))
    p.add_argument("--scale", default="range", choices=("range", "rank", "auto"))
    p.add_argument("--seeds", type=int, default=30, help="data sets 0..seeds-1")
    args = p.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    runs = [one(args.design, seed, args.scale) for seed in range(args.seeds)]
    overall, regions = summarize(runs)
    print(overall.round(4).to_string())
    print(regions.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
