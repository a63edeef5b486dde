"""Measure the debiased (AIPW) average effects of CFR against the plug-in, on the synthetic designs.

Per data set (the same data seeds as ``python -m dowhy_cfr.benchmarks synthetic``) two fits:

* ``single``: one network (``n_ensemble=1``), AIPW with in-sample outcome predictions;
* ``cf5``: five members as cross-fitting folds (``n_ensemble=5, cross_fit=True``), AIPW with
  out-of-fold predictions; from the same fit, ``ens5-in`` uses the members' in-sample ensemble mean.

Each row: plug-in and AIPW ATE errors, the 95% interval (covered, width), sqrt(PEHE) of the
heads' effects and of the shifted effects on fresh test units, the seconds of the fit and of the
propensity step, plus a gradient-boosting propensity variant (``prop=hgb``) computed from the same
fitted heads. Usage::

    python scripts/debias_variants.py --designs A,B --seeds 0-3 --out scripts/out/debias_AB.csv
"""

import argparse
import time
import warnings

import numpy as np
import pandas as pd
import torch
from sklearn.ensemble import HistGradientBoostingClassifier

from dowhy_cfr import CFR
from dowhy_cfr.datasets.synthetic import DESIGNS, simulate
from dowhy_cfr.debiased import average_effect, cross_fit_propensity


def seed_of(design, n, seed, stream):
    return [int(seed), DESIGNS.index(design), int(n), int(stream)]


def rows_of(est, name, fit_s, train, test):
    fitted = est.fitted_
    st = fitted.debiased
    x_test = test.x if train.w is None else test.x
    tau_heads = fitted.tau(fitted.features(test.x, test.w))[:, 0]
    tau_cate = est.effect(x_test)
    ate_true = float(train.tau.mean())
    out = []
    variants = [(name, st.mu)]
    if name == "cf5":
        variants.append(("ens5-in", st.mu_plugin))
    xw = train.x if train.w is None else np.hstack([train.x, train.w])
    t0 = time.perf_counter()
    e_hgb = cross_fit_propensity(HistGradientBoostingClassifier(max_iter=100), xw, st.arms,
                                 n_arms=2, random_state=0, min_propensity=0.01)
    hgb_s = time.perf_counter() - t0
    for vname, mu in variants:
        for prop, e in (("logit", st.e), ("hgb", e_hgb)):
            res = average_effect(st.y, st.arms, mu, e, target="ate", mu_plugin=st.mu_plugin)
            lo, hi = res.interval(0.05)
            att = average_effect(st.y, st.arms, mu, e, target="att")
            out.append(dict(
                variant=vname, prop=prop, ate_true=ate_true, plugin=res.plugin,
                aipw=res.estimate, se=res.stderr, covered=float(lo <= ate_true <= hi),
                width=hi - lo, att_true=float(train.tau[train.t == 1].mean()),
                att_aipw=att.estimate, att_plugin=att.plugin,
                pehe_heads=float(np.sqrt(np.mean((tau_heads - test.tau) ** 2))),
                pehe_shifted=float(np.sqrt(np.mean((tau_cate - test.tau) ** 2))),
                fit_s=fit_s, hgb_s=hgb_s))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--designs", default="A,B,C,D,E")
    p.add_argument("--seeds", default="0-3")
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--variants", default="single,cf5")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    lo, _, hi = a.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    rows = []
    for design in a.designs.split(","):
        for seed in seeds:
            train = simulate(design, a.n, random_state=seed_of(design, a.n, seed, 0))
            test = simulate(design, 1000, random_state=seed_of(design, a.n, seed, 1))
            for name in a.variants.split(","):
                kw = dict(random_state=seed, verbose=0)
                if name == "cf5":
                    kw.update(n_ensemble=5, cross_fit=True)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.perf_counter()
                    est = CFR(**kw).fit(train.y, train.t, X=train.x, W=train.w)
                    fit_s = time.perf_counter() - t0
                st = est.fitted_.debiased
                np.savez(f"{a.out}.{design}{seed}{name}.npz", y=st.y, arms=st.arms, mu=st.mu,
                         mu_plugin=st.mu_plugin, e=st.e, ate_true=train.tau.mean(),
                         att_true=train.tau[train.t == 1].mean(),
                         atc_true=train.tau[train.t == 0].mean(), e_true=train.e,
                         x=train.x if train.w is None else np.hstack([train.x, train.w]))
                for r in rows_of(est, name, fit_s, train, test):
                    rows.append(dict(design=design, seed=seed, **r))
                pd.DataFrame(rows).to_csv(a.out, index=False)
                last = rows[-1]
                print(design, seed, name, f"fit {fit_s:.1f}s", flush=True)
    df = pd.DataFrame(rows)
    df["err_plugin"] = df.plugin - df.ate_true
    df["err_aipw"] = df.aipw - df.ate_true
    print(df.groupby(["design", "variant", "prop"])[
        ["err_plugin", "err_aipw", "covered", "width", "pehe_heads", "pehe_shifted", "fit_s"]
    ].agg(lambda v: np.mean(np.abs(v)) if v.name.startswith("err") else np.mean(v)).round(3))


if __name__ == "__main__":
    main()
