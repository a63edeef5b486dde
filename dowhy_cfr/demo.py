"""Demo: identify -> estimate -> refute with CFR and TARNet in DoWhy, on one IHDP realization.

Run ``python -m dowhy_cfr.demo`` (options: ``--realization``, ``--n-iter``, ``--simulations``,
``--permutations``, ``--threads``, ``--seed``). It prints

1. the identified estimand;
2. the CFR and TARNet estimates of the ATE and ATT next to the truth (IHDP is semi-synthetic, so
   the noiseless potential outcomes ``mu0``, ``mu1`` are known), the PEHE of the unit-level
   effects, the share of units with a clipped propensity (``clipped_share_``: limited
   overlap), and how CFR's effect varies with six covariates (``best_linear_projection``, with
   intervals, next to the same projection of the true effects);
3. DoWhy's five re-estimating refuters on the CFR estimate -- placebo treatment, data subset,
   bootstrap, random common cause, dummy outcome -- at DoWhy's default of 100 simulations each,
   called exactly as for any DoWhy estimate; each refuter's simulations train as one stack
   (:mod:`dowhy_cfr.stacked_refuters`), and one line says what its result means; one more reads
   the five as a family (Holm's adjustment: with five tests at 5 % one "FAILS" line appears in
   about one run in four when nothing is wrong; ``family_verdict``); then how strong
   a hidden confounder would have to be to move the estimate to zero (DoWhy's
   ``add_unobserved_common_cause`` with ``simulation_method="non-parametric-partial-R2"``, from
   CFR's doubly robust stage: :mod:`dowhy_cfr.dowhy_sensitivity`);
4. the representation-balance refuter (``method_name="representation_balance"``) for both.

With the defaults it trains 2 + 5 * 100 networks; run times are in ``docs/refutation.md``.

Data: :func:`dowhy_cfr.datasets.load_ihdp` (the IHDP realizations of Shalit et al., 2017). If that
loader is unavailable, EconML's ``ihdp_surface_B`` generator is used instead.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings

import numpy as np
import pandas as pd


def load_data(realization: int, seed: int):
    """(DataFrame with covariates, ``t`` (int) and ``y``; true unit effects; description)."""
    try:
        from .datasets import load_ihdp
    except ImportError:  # pragma: no cover - fallback when the loader is not available
        load_ihdp = None
    if load_ihdp is not None:
        d = load_ihdp(realization)
        names = [n.replace(".", "_") for n in d.feature_names]  # DoWhy-friendly column names
        df = pd.DataFrame(d.x, columns=names)
        df["t"] = d.t.astype(int)
        df["y"] = d.yf
        return df, d.mu1 - d.mu0, f"IHDP realization {realization} (dowhy_cfr.datasets.load_ihdp)"
    from econml.data.dgps import ihdp_surface_B  # pragma: no cover

    y, t, x, te = ihdp_surface_B(random_state=seed)  # pragma: no cover
    names = [f"x{i}" for i in range(x.shape[1])]  # pragma: no cover
    df = pd.DataFrame(x, columns=names)  # pragma: no cover
    df["t"] = np.asarray(t).astype(int)  # pragma: no cover
    df["y"] = y  # pragma: no cover
    return df, np.asarray(te), "IHDP response surface B (econml ihdp_surface_B)"  # pragma: no cover


def _rule(title: str) -> None:
    print(f"\n{'=' * 8} {title} {'=' * max(0, 80 - len(title) - 10)}")


def _show_overlap(cfr) -> None:
    """The share of units whose propensity was clipped (the fit's overlap warning, explained)."""
    m = cfr.min_propensity
    print(f"Overlap: {cfr.clipped_share_:.1%} of the units have an estimated propensity outside "
          f"[{m:g}, {1 - m:g}] (clipped; clipped_share_): their ATE terms lean on the outcome "
          f"model; the ATT needs overlap for the treated only (docs/debiased.md)")


def _show_projection(cfr, df: pd.DataFrame, columns: list[str], tau: np.ndarray) -> None:
    """CFR's doubly robust best linear projection of the effect on ``columns``, next to the same
    projection of the true effects (known: IHDP is semi-synthetic)."""
    from .debiased import best_linear_projection

    blp = cfr.best_linear_projection(df[columns])
    blp["true"] = best_linear_projection(tau, df[columns].to_numpy(), columns)["estimate"]
    print(f"\nHow the CFR effect varies with {', '.join(columns)}: best_linear_projection "
          f"(95% intervals; 'true': the same projection of the true effects)")
    print(blp[["estimate", "ci_lower", "ci_upper", "true"]].round(3).to_string())


def _show_sensitivity(model, estimand, estimate) -> None:
    """The robustness values of the CFR estimate (DoWhy's add_unobserved_common_cause refuter,
    non-parametric partial R^2, from CFR's doubly robust stage; docs/sensitivity.md)."""
    res = model.refute_estimate(estimand, estimate, method_name="add_unobserved_common_cause",
                                simulation_method="non-parametric-partial-R2",
                                plot_estimate=False)
    rv_ci = estimate.estimator.estimator.robustness_value()  # EconML's: two-sided 95% bound
    print(f"add_unobserved_common_cause: a hidden confounder explaining {res.RV:.0%} of the "
          f"residual variation of both the outcome and the treatment's Riesz representer would "
          f"move the ATE estimate to 0;\n  {rv_ci:.0%} would make it insignificant (its 95% "
          f"confidence bound reaches 0; docs/sensitivity.md)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dowhy_cfr.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--realization", type=int, default=1, help="IHDP realization (1-1000)")
    parser.add_argument("--n-iter", type=int, default=600,
                        help="maximum training steps per network (default 600)")
    parser.add_argument("--simulations", type=int, default=100,
                        help="simulations per DoWhy refuter (default 100, DoWhy's default; "
                             "each refuter trains its simulations as one stack)")
    parser.add_argument("--permutations", type=int, default=100,
                        help="permutations for the balance refuter's p-values (default 100)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads (default 0: torch's default, every core; the "
                             "refuters' stacks of 100 networks use them)")
    parser.add_argument("--seed", type=int, default=0, help="random_state of the networks")
    args = parser.parse_args(argv)
    if args.simulations < 2:
        parser.error("--simulations must be at least 2 (DoWhy's significance test needs a spread)")
    if args.permutations < 0 or args.n_iter < 1:
        parser.error("--permutations must be >= 0 and --n-iter >= 1")

    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    logging.getLogger("dowhy").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*limited overlap")  # printed as a line instead
    from dowhy import CausalModel

    import dowhy_cfr  # noqa: F401  (registers "backdoor.cfr", "representation_balance", ...)

    t_start = time.time()
    df, tau, source = load_data(args.realization, args.seed)
    covariates = [c for c in df.columns if c not in ("t", "y")]
    treated = df["t"].to_numpy() == 1
    true_ate, true_att = float(tau.mean()), float(tau[treated].mean())
    _rule("Data")
    print(f"{source}: {len(df)} units, {treated.sum()} treated, {len(covariates)} covariates")
    print(f"true ATE = {true_ate:.4f}   true ATT = {true_att:.4f}   (means of mu1 - mu0)")

    _rule("1. Identify")
    model = CausalModel(data=df, treatment="t", outcome="y", common_causes=covariates)
    # the backdoor set is known here (all covariates); DoWhy's default search over adjustment sets
    # takes about a minute with 25 common causes, "maximal-adjustment" finds the same set at once
    estimand = model.identify_effect(method_name="maximal-adjustment",
                                     proceed_when_unidentifiable=True)
    backdoor = sorted(estimand.get_backdoor_variables(), key=covariates.index)
    print(f"{estimand.estimand_type.name}: backdoor adjustment for {len(backdoor)} variables")
    print(f"  d/dt E[y | {', '.join(backdoor)}]")
    print("  assumption: no unobserved common cause of t and y (unconfoundedness)")

    init = {"n_iter": args.n_iter, "random_state": args.seed, "verbose": 0}
    estimates = {}
    _rule("2. Estimate")
    for name in ("backdoor.cfr", "backdoor.tarnet"):
        t0 = time.time()
        est = model.estimate_effect(estimand, method_name=name,
                                    method_params={"init_params": init})
        att = model.estimate_effect(estimand, method_name=name, target_units="att",
                                    fit_estimator=False)
        estimates[name] = est
        cate = est.cate_estimates.ravel()
        pehe = float(np.sqrt(np.mean((cate - tau) ** 2)))
        net = est.estimator.estimator
        print(f"{name:16s} ATE {est.value:8.4f} (error {est.value - true_ate:+.4f})   "
              f"ATT {att.value:8.4f} (error {att.value - true_att:+.4f})   "
              f"PEHE {pehe:.4f}   [{type(net).__name__}, alpha={net.alpha:g}, "
              f"ipm={net.config_.ipm!r}, best step {int(net.best_iteration_[0])}, "
              f"{time.time() - t0:.0f}s]")
    _show_overlap(estimates["backdoor.cfr"].estimator.estimator)
    _show_projection(estimates["backdoor.cfr"].estimator.estimator, df, covariates[:6], tau)

    _rule(f"3. Refute the CFR estimate (DoWhy's refuters, {args.simulations} simulations each)")
    from .stacked_refuters import REFUTERS, explain, explain_family, refute_all

    cfr = estimates["backdoor.cfr"]
    lower, upper = cfr.estimator.estimator.ate_interval()
    half_width = float(np.ravel(upper - lower)[0]) / 2

    def show(name, res, seconds):
        info = getattr(res[0] if isinstance(res, list) else res, "stacking", {})
        print(f"{explain(name, res, cfr.value, half_width)}  [{seconds:.0f}s, "
              f"{info.get('stacks', '?')} stack(s)]")

    table = refute_all(model, estimand, cfr, tuple(REFUTERS), simulations=args.simulations,
                       seed=args.seed, callback=show)
    print(explain_family(dict(zip(table["refuter"], table["p_value"]))))
    print("(p-values: DoWhy's test of the estimate against the simulations' spread; how to read "
          "them for a stochastic estimator: docs/refutation.md)")
    _show_sensitivity(model, estimand, cfr)

    _rule("4. Refute: representation balance (IPM between treated and control)")
    for name, est in estimates.items():
        t0 = time.time()
        res = model.refute_estimate(estimand, est, method_name="representation_balance",
                                    n_permutations=args.permutations, random_state=args.seed)
        print(f"--- {name} ---")
        print(str(res).strip(), f"\n[{time.time() - t0:.0f}s]\n")

    print(f"Total time {time.time() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
