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
quartiles of tau, and (K-2) sigma^2 / J: the seed noise's share of the jackknife.

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

def member_parts(est, x):
    f = est.fitted_
    xs = f.columns.block("X", x)
    heads = np.stack([effects_of(o) for o in f.outputs(f.preprocessing.x(xs))])  # (K, m, 1)
    regs = f.blend.regressions(xs)  # (K, m, 1)
    return heads[..., 0], regs[..., 0]

out = []
for design in designs:
    for s in seeds:
        d = simulate_realistic(design, n, seed=s, n_test=2000)
        x, tau = d.test.X, d.test.tau
        fa = CFR(random_state=s, verbose=0, **kw).fit(d.Y, d.T, X=d.X)
        fb = CFR(random_state=s + 1000, verbose=0, **kw).fit(d.Y, d.T, X=d.X)
        if fa.fitted_.blend.constant:
            out.append((design, s, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, 1)); continue
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
        row = (design, s, np.mean(err <= half), 2 * half.mean(), np.mean(err <= hc), 2 * hc.mean(),
               np.mean(err <= hp), 2 * hp.mean(), 0, np.mean(err[outer] <= half[outer]),
               np.mean(err[outer] <= hc[outer]), (K - 2) * s2.mean() / J.mean(), np.sqrt(np.mean(err**2)))
        out.append(row)
        print("%-22s %d cur %.3f (%.2f) corr %.3f (%.2f) pooled %.3f (%.2f) | outer cur %.3f corr %.3f | seed share %.2f pehe %.3f"
              % (row[:8] + row[9:]), flush=True)
