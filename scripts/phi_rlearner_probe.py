"""Does an effect fitted on the learned representation by the R-loss beat the heads' h1 - h0?
(issue 45: the network carries the estimate)

For each realistic design and seed, fits ``CFR()`` at the defaults as the benchmark does, then,
for every K-fold member j, a ridge regression of the effect on that member's representation,
``tau_j(x) = a_j + b_j' Phi_j(x)`` (``phi``; ``h+phi`` adds the member's heads' effect
``h_j(x)`` as a feature, so the heads are one of its solutions), fitted by the R-loss of Nie &
Wager (2021) on the units member j trained on,

    sum_i (r_i - u_i tau_j(x_i))^2 + ridge * |b_j|^2,   u, r: Robinson's residuals of the fit
    (the out-of-fold heads and the cross-fitted propensity, ``nuisance.robinson_residuals``),

with the ridge weight chosen by the same loss on fold j (the units member j never saw). The
members' effects are averaged and shifted to the doubly robust ATE, as the fit shifts the
heads. ``phi_blend`` puts ``phi`` in the blend in place of the heads (lam by the out-of-fold
R-loss, as the fit chooses it). Scored on the test units against the truth, beside the heads
(``heads``: ``individual_effect``) and the reported effect (``default``)::

    python scripts/phi_rlearner_probe.py --out phi_dev.csv                             # 12 development designs
    python scripts/phi_rlearner_probe.py --designs held-out --seeds 0 --out phi_ho.csv

Measured results: ``docs/parameters.md``, item 32.
"""

from __future__ import annotations

import numpy as np

RIDGES = (0.1, 1.0, 10.0, 100.0, 1000.0, 1e4)


def ridge_r_loss(A, u, r, train, val, penalised):
    """The R-loss ridge fit of ``tau = A beta`` on the rows ``train``, its weight (``RIDGES``)
    chosen by the R-loss on the rows ``val``; columns standardised on ``train`` (the unpenalised
    ones kept as they are). Returns the fitted effect as a function of a feature matrix."""
    mu, sd = A[train].mean(0), A[train].std(0) + 1e-9
    mu[~penalised], sd[~penalised] = 0.0, 1.0
    z = (A - mu) / sd
    d_fit, d_val = u[train, None] * z[train], u[val, None] * z[val]
    gram, rhs = d_fit.T @ d_fit, d_fit.T @ r[train]
    fits = [np.linalg.solve(gram + w * np.diag(penalised.astype(float)), rhs) for w in RIDGES]
    beta = min(fits, key=lambda b: np.mean((r[val] - d_val @ b) ** 2))
    return lambda A2: ((A2 - mu) / sd) @ beta


def probe(design: str, n: int, seed: int) -> dict:
    from blend_lambda_probe import default_fit  # the probes' shared fit (same folder)
    from dowhy_cfr.nuisance import held_out_mean, robinson_residuals

    est, data = default_fit(design, n, seed)
    fitted = est.fitted_
    stage, pre, blend = fitted.debiased, fitted.preprocessing, fitted.blend
    train = fitted.members.seen_mask(len(stage.y))
    u, r = robinson_residuals(stage.y, stage.arms, stage.mu, stage.e)
    u = u[:, 0]
    ok = np.isfinite(u) & np.isfinite(r)
    x_test, tau = data.test.X, data.test.tau
    out_fit, out_test = fitted.outputs(pre.x(stage.x)), fitted.outputs(pre.x(x_test))
    h_fit, h_test = out_fit[:, 1] - out_fit[:, 0], out_test[:, 1] - out_test[:, 0]  # (K, n)
    theta = stage.theta[0]

    def pehe(effect_fit, effect_test):
        return float(np.sqrt(np.mean((effect_test + theta - effect_fit.mean() - tau) ** 2)))

    row = dict(design=design, seed=seed, heads=pehe(h_fit.mean(0), h_test.mean(0)),
               default=float(np.sqrt(np.mean((np.ravel(est.effect(x_test)) - tau) ** 2))),
               lam=np.nan if blend is None else float(blend.lam))
    for name in ("phi", "h+phi"):
        on_fit, on_test = [], []
        for j in range(fitted.members.n_models):
            phi, phi_test = est.transform(data.X, member=j), est.transform(x_test, member=j)
            cols = [np.ones((len(u), 1)), phi]
            cols_test = [np.ones((len(x_test), 1)), phi_test]
            penalised = [False] + [True] * phi.shape[1]
            if name == "h+phi":
                cols.insert(1, h_fit[j][:, None])
                cols_test.insert(1, h_test[j][:, None])
                penalised.insert(1, True)
            A, A_test = np.hstack(cols), np.hstack(cols_test)
            tau_j = ridge_r_loss(A, u, r, train[j] & ok, ~train[j] & ok, np.array(penalised))
            on_fit.append(tau_j(A))
            on_test.append(tau_j(A_test))
        on_fit, on_test = np.array(on_fit), np.array(on_test)
        row[name] = pehe(on_fit.mean(0), on_test.mean(0))
        if name == "phi" and blend is not None:
            t_oof = np.nanmean(np.where(~train, on_fit, np.nan), 0)
            regs = blend.regressions(stage.x)
            g_oof = held_out_mean(regs, blend.train)[:, 0]
            d, c = u * (t_oof - g_oof), u * g_oof
            m = ok & np.isfinite(d)
            lam = float(np.clip(np.sum(d[m] * (r[m] - c[m])) / np.sum(d[m] ** 2), 0, 1))
            g_fit, g_test = regs.mean(0)[:, 0], blend.regressions(x_test).mean(0)[:, 0]
            row["phi_blend"] = pehe(lam * on_fit.mean(0) + (1 - lam) * g_fit,
                                    lam * on_test.mean(0) + (1 - lam) * g_test)
            row["phi_blend_lam"] = lam
    return row


def main():
    from blend_lambda_probe import run_probes  # the probes' shared command line (same folder)

    frame = run_probes(probe, __doc__.splitlines()[0])
    varying = frame[~frame["design"].str.endswith("constant")]
    print(f"{len(frame)} fits; means over the {len(varying)} whose effect varies:")
    print(varying.drop(columns=["design", "seed"]).mean().round(4).to_string())


if __name__ == "__main__":
    main()
