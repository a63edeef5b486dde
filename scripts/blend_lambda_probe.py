"""Is the blend's lam chosen where the test error is least? (issue 45, lam >= 0.6)

For each realistic design and seed, fits ``CFR()`` at the defaults as the benchmark does and
compares three heads' weights lam of the blend ``lam * h(x) + (1 - lam) * g(x) + c``
(``docs/parameters.md``, item 9):

* ``lam_chosen``: the fit's, by the R-loss of the out-of-fold effects (each unit's from the one
  member that never saw it);
* ``lam_corrected``: the same R-loss corrected for the members' noise, errors in variables: a
  unit's out-of-fold effect is one member's, with the members' variance at that unit, where the
  reported effect averages K members (``L_avg = L_oof - (1 - 1/K) sum_i u_i^2 Var_i(lam * h_j +
  (1 - lam) * g_j)``, the variances from the K members' spread at the fitted units);
* ``lam_oracle``: the lam on a grid of 0.05 with the least sqrt(PEHE) on the test units (the
  truth; not available to a fit).

and the test sqrt(PEHE) at each (the shift ``c`` recomputed so that the mean over the fitted units
is the doubly robust ATE, as the fit does). If the R-loss's choice were pulled toward the
boosted regression by the single members' noise, ``lam_corrected`` and ``lam_oracle`` would sit
above ``lam_chosen``::

    python scripts/blend_lambda_probe.py --out lam.csv                       # 12 development designs
    python scripts/blend_lambda_probe.py --designs held-out --seeds 0 --out lam_heldout.csv
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd
import torch

GRID = np.linspace(0.0, 1.0, 21)


def _lams(fitted, h: np.ndarray, regs: np.ndarray, held_out_mean) -> tuple[float, float]:
    """The R-loss's lam from the out-of-fold effects, and the same corrected for the members'
    noise (module docstring); ``h`` (K, n): each member's heads' effect at the fitted units,
    ``regs`` (K, n, 1): each member's regression there."""
    from dowhy_cfr.nuisance import robinson_residuals

    stage = fitted.debiased
    g = regs[..., 0]  # (K, n)
    k = h.shape[0]
    h_oof = stage.mu[:, 1] - stage.mu[:, 0]
    g_oof = held_out_mean(regs, fitted.blend.train)[:, 0]
    u, r = robinson_residuals(stage.y, stage.arms, stage.mu, stage.e)
    u = u[:, 0]  # binary: one column
    d, c = u * (h_oof - g_oof), u * g_oof
    ok = np.isfinite(d) & np.isfinite(c) & np.isfinite(r)
    s1, s2 = np.sum(d[ok] * (r[ok] - c[ok])), np.sum(d[ok] ** 2)
    dh, dg = h - h.mean(0), g - g.mean(0)
    v_h, v_g = (dh ** 2).sum(0) / (k - 1), (dg ** 2).sum(0) / (k - 1)
    c_hg = (dh * dg).sum(0) / (k - 1)
    f, u2 = 1.0 - 1.0 / k, u[ok] ** 2
    num = s1 - f * np.sum(u2 * (v_g - c_hg)[ok])
    den = s2 - f * np.sum(u2 * (v_h + v_g - 2 * c_hg)[ok])
    chosen = float(np.clip(s1 / s2, 0, 1))
    return chosen, (float(np.clip(num / den, 0, 1)) if den > 0 else 1.0)


def default_fit(design: str, n: int, seed: int):
    """``CFR()`` at the defaults fitted as the realistic benchmark fits it, and the data."""
    from dowhy_cfr.benchmarks import realistic as R
    from dowhy_cfr.benchmarks.synthetic import make_estimator

    settings = dict(n_test=2000, overlap=None, alpha=0.05, tiny=False, n_iter=None,
                    cfr_params={}, cfr_inference="auto")
    data = R.draw_data(design, n, seed, settings)
    est = make_estimator("CFR", seed=seed, settings=settings)
    return R.fit_method(est, "CFR", data, settings, seed), data


def probe(design: str, n: int, seed: int) -> dict | None:
    from dowhy_cfr.nuisance import held_out_mean

    est, data = default_fit(design, n, seed)
    fitted = est.fitted_
    if fitted.blend is None:
        return None
    blend, stage, pre = fitted.blend, fitted.debiased, fitted.preprocessing
    regs = blend.regressions(stage.x)
    out = fitted.outputs(pre.x(stage.x))
    h_members = out[:, 1] - out[:, 0]  # (K, n): computed once, for the lams and h_fit
    chosen, corrected = _lams(fitted, h_members, regs, held_out_mean)
    x_test, tau = data.test.X, data.test.tau
    h_test = fitted.tau(pre.x(x_test))[:, 0]
    g_test = blend.regressions(x_test).mean(0)[:, 0]
    h_fit = h_members.mean(0)
    g_fit = regs.mean(0)[:, 0]

    def pehe(lam: float) -> float:
        shift = stage.theta[0] - np.mean(lam * h_fit + (1 - lam) * g_fit)
        return float(np.sqrt(np.mean((lam * h_test + (1 - lam) * g_test + shift - tau) ** 2)))

    curve = [pehe(lam) for lam in GRID]
    return dict(design=design, seed=seed, constant=bool(blend.constant), lam_chosen=blend.lam,
                lam_replicated=chosen, lam_corrected=corrected,
                lam_oracle=float(GRID[int(np.argmin(curve))]), pehe_chosen=pehe(blend.lam),
                pehe_corrected=pehe(corrected), pehe_oracle=min(curve), pehe_heads=curve[-1],
                pehe_regression=curve[0])


def run_probes(probe, description: str) -> pd.DataFrame:
    """The command line shared by the realistic-design probes (this one,
    ``phi_rlearner_probe.py``): ``--designs``, ``--seeds``, ``--n``, ``--out``; ``probe(design,
    n, seed)`` gives one row (or None to skip the fit), printed and written to ``--out`` as it
    comes. Returns the rows."""
    from dowhy_cfr.benchmarks import realistic as R
    from dowhy_cfr.datasets.realistic import DEFAULT_DESIGNS

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--designs", default=None, help="as the benchmark's (default: development)")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--n", type=int, default=1500)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    designs = DEFAULT_DESIGNS if args.designs is None else R.parse_designs(args.designs)
    rows = []
    for design in designs:
        for seed in (int(s) for s in args.seeds.split(",")):
            row = probe(design, args.n, seed)
            if row is not None:
                rows.append(row)
                print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()},
                      flush=True)
                pd.DataFrame(rows).to_csv(args.out, index=False)
    return pd.DataFrame(rows)


def main():
    frame = run_probes(probe, __doc__.splitlines()[0])
    varying = frame[~frame["constant"]]
    print(f"{len(frame)} fits, {len(varying)} with a varying effect; means over those:")
    print(varying.drop(columns=["design", "seed", "constant"]).mean().round(4).to_string())


if __name__ == "__main__":
    main()
