"""Measurement only (issue 46, item 1): how much of the members' jackknife is seed noise, and what
a seed-noise-corrected jackknife would cover on the realistic designs.

Fit A and fit B share the five folds (``plans.folds`` is patched to one fold seed, so only the
members' network seeds and the boosting's seed differ). sigma^2(x) is one member's seed variance
of its blended effect at x: half the mean over members of the squared difference between A's
member blend and B's (B's heads and regressions mixed with A's blend weights). The jackknife J(x)
= (K-1)/K sum_j (tau_j - mean)^2 counts independent seed noise (K-1)^2/K sigma^2 where the mean
of K members carries sigma^2/K, so the corrected variance is J - (K-2) sigma^2 (floored at
sigma^2/K). Prints, per data set, the tau(x) coverage and mean width of the current 95 % interval
and of the corrected one (pointwise sigma^2 and pooled over units), the same in the outer
quartiles of tau, and (K-2) sigma^2 / J: the seed noise's share of the jackknife; then their
means over the data sets (those reporting a constant effect are skipped).

    python scripts/seed_noise_jackknife.py nhefs-steps,cps-steps 1500 2 ["{'alpha': 0.1}"]

(designs, n, data sets per design, optional CFR keyword arguments). docs/inference.md quotes it.
"""
import ast, sys, numpy as np, warnings; warnings.simplefilter("ignore")
import torch; torch.set_num_threads(1)
from scipy.stats import t as student_t
import dowhy_cfr.plans as P
from dowhy_cfr import CFR
from dowhy_cfr.fitted import effects_of
from dowhy_cfr.datasets.realistic import simulate_realistic
orig = P.folds
P.folds = lambda arms, k, seed, groups=None: orig(arms, k, 777, groups)
designs = sys.argv[1].split(","); n = int(sys.argv[2]); seeds = range(int(sys.argv[3]))
kw = ast.literal_eval(sys.argv[4]) if len(sys.argv) > 4 else {}

LINE = ("cur {cur:.3f} ({cur_w:.2f}) corr {corr:.3f} ({corr_w:.2f}) pooled {pooled:.3f} "
        "({pooled_w:.2f}) | outer cur {outer_cur:.3f} corr {outer_corr:.3f} | seed share "
        "{seed_share:.2f} pehe {pehe:.3f}")


def member_parts(est, x):
    f = est.fitted_
    xs = f.columns.block("X", x)
    heads = np.stack([effects_of(o) for o in f.outputs(f.preprocessing.x(xs))])  # (K, m, 1)
    regs = f.blend.regressions(xs)  # (K, m, 1)
    return heads[..., 0], regs[..., 0]

rows = []
for design in designs:
    for s in seeds:
        d = simulate_realistic(design, n, seed=s, n_test=2000)
        x, tau = d.test.X, d.test.tau
        fa = CFR(random_state=s, verbose=0, **kw).fit(d.Y, d.T, X=d.X)
        fb = CFR(random_state=s + 1000, verbose=0, **kw).fit(d.Y, d.T, X=d.X)
        if fa.fitted_.blend.constant:
            print(f"{design:22s} {s} constant effect reported: skipped", flush=True)
            continue
        ha, ga = member_parts(fa, x); hb, gb = member_parts(fb, x)
        w = fa.fitted_.blend.weights
        ma = w[0] * ha + w[1] * ga; mb = w[0] * hb + w[1] * gb
        K = ma.shape[0]
        J = (K - 1) / K * ((ma - ma.mean(0)) ** 2).sum(0)
        s2 = ((ma - mb) ** 2).mean(0) / 2
        est = np.ravel(fa.effect(x)); q = student_t.ppf(0.975, K - 1)
        lo, hi = fa.effect_interval(x, alpha=0.05); half = (np.ravel(hi) - np.ravel(lo)) / 2
        hc = q * np.sqrt(np.maximum(J - (K - 2) * s2, s2 / K))
        sp = np.full_like(s2, s2.mean())
        hp = q * np.sqrt(np.maximum(J - (K - 2) * sp, sp / K))
        err = np.abs(est - tau)
        qs = np.quantile(tau, [0.25, 0.75]); outer = (tau <= qs[0]) | (tau >= qs[1])
        row = dict(cur=np.mean(err <= half), cur_w=2 * half.mean(), corr=np.mean(err <= hc),
                   corr_w=2 * hc.mean(), pooled=np.mean(err <= hp), pooled_w=2 * hp.mean(),
                   outer_cur=np.mean(err[outer] <= half[outer]),
                   outer_corr=np.mean(err[outer] <= hc[outer]),
                   seed_share=(K - 2) * s2.mean() / J.mean(), pehe=np.sqrt(np.mean(err ** 2)))
        rows.append(row)
        print(f"{design:22s} {s} " + LINE.format(**row), flush=True)
if rows:
    print(f"{'mean of ' + str(len(rows)):24s} "
          + LINE.format(**{k: np.mean([r[k] for r in rows]) for k in rows[0]}))
