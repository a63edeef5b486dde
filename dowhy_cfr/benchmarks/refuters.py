"""``python -m dowhy_cfr.benchmarks refuters``: DoWhy's five re-estimating refuters on a CFR
estimate of IHDP, at DoWhy's default number of simulations, stacked (:mod:`dowhy_cfr.stacked_refuters`).

For each refuter: the wall time of ``model.refute_estimate(...)``, the simulations and stacks
trained, the refuter's new effect relative to the estimate (placebo and dummy outcome:
``new / estimate``, ideally 0; the others: ``new / estimate - 1``, ideally 0), DoWhy's p-value,
and the five read as a family (``p_holm``, ``significant_holm``: Holm's adjustment,
:func:`dowhy_cfr.stacked_refuters.family_verdict`).
Targets (issue 12): <= 60 s per refuter on 2 cores, placebo within 10% of zero relative to the
estimate, ``random_common_cause`` moving the estimate by < 5% and not significant.
"""

from __future__ import annotations

import logging
import time
import warnings

import pandas as pd

from ..stacked_refuters import REFUTERS, refute_all
from ._runner import add_threads_argument

__all__ = ["add_parser", "ihdp_estimate", "run_command"]

DOWHY_REFUTERS = tuple(REFUTERS)


def add_parser(sub) -> None:
    """Register the ``refuters`` subcommand on ``sub`` (argparse)."""
    p = sub.add_parser("refuters", help="DoWhy's five refuters on a CFR estimate of IHDP, "
                                        "stacked: seconds, placebo effect, random common cause")
    p.add_argument("--realization", type=int, default=1, help="IHDP realization (default 1)")
    p.add_argument("--simulations", type=int, default=100,
                   help="simulations per refuter (default 100, DoWhy's default)")
    p.add_argument("--refuters", default=",".join(DOWHY_REFUTERS),
                   help="comma-separated DoWhy method names (default: all five)")
    p.add_argument("--n-iter", type=int, default=None,
                   help="maximum training steps of the estimate (default: the estimator's)")
    p.add_argument("--steps", default="fitted",
                   help="steps per simulation: 'fitted' (default), 'early_stopping' or a number")
    p.add_argument("--seeds", default="auto", choices=("auto", "original", "spread"),
                   help="network seeds of the simulations (default 'auto')")
    p.add_argument("--dowhy-loop", action="store_true",
                   help="DoWhy's own per-simulation loop instead of the stack (slow)")
    p.add_argument("--seed", type=int, default=0, help="random_state of CFR and random_seed "
                                                       "of the refuters (default 0)")
    p.add_argument("--device", default="cpu",
                   help='device of the estimate and its stacked simulations: "cpu" (default), '
                        '"cuda" or "auto"')
    p.add_argument("--out", metavar="DIR", default=None)
    add_threads_argument(p)


def ihdp_estimate(realization: int = 1, *, seed: int = 0, n_iter=None, method="backdoor.cfr",
                  device="cpu"):
    """(CausalModel, estimand, CFR estimate) for IHDP ``realization`` as in the demo."""
    from dowhy import CausalModel

    from ..demo import load_data

    df, _, _ = load_data(realization, seed)
    covariates = [c for c in df.columns if c not in ("t", "y")]
    model = CausalModel(data=df, treatment="t", outcome="y", common_causes=covariates)
    estimand = model.identify_effect(method_name="maximal-adjustment",
                                     proceed_when_unidentifiable=True)
    init = {"random_state": seed, "verbose": 0, "device": device}
    if n_iter is not None:
        init["n_iter"] = n_iter
    estimate = model.estimate_effect(estimand, method_name=method,
                                     method_params={"init_params": init})
    return model, estimand, estimate


def _progress(name, refutation, seconds) -> None:
    print(f"{name}: {seconds:.1f} s", flush=True)


def _markdown(table: pd.DataFrame) -> str:
    cols = list(table.columns)
    fmt = {"p_value": "{:.3g}", "p_holm": "{:.3g}", "relative": "{:+.2%}"}
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for _, row in table.iterrows():
        lines.append("| " + " | ".join(fmt.get(c, "{}").format(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def run_command(args) -> str:
    """Run the ``refuters`` command from parsed arguments; returns markdown."""
    from .. import stacked_refuters as sr
    from . import report

    refuters = [r.strip() for r in args.refuters.split(",") if r.strip()]
    unknown = sorted(set(refuters) - set(DOWHY_REFUTERS))
    if unknown:
        raise SystemExit(f"error: argument --refuters: unknown {unknown}; choose from "
                         f"{', '.join(DOWHY_REFUTERS)}")
    steps = int(args.steps) if args.steps.isdigit() else args.steps
    logging.getLogger("dowhy").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=FutureWarning)
    start = time.perf_counter()
    model, estimand, estimate = ihdp_estimate(args.realization, seed=args.seed,
                                              n_iter=args.n_iter, device=args.device)
    fit_seconds = time.perf_counter() - start
    with sr.stacking_options(enabled=not args.dowhy_loop, steps=steps, seeds=args.seeds):
        table = refute_all(model, estimand, estimate, refuters, simulations=args.simulations,
                           seed=args.seed, callback=_progress)
    cfr = estimate.estimator.estimator
    md = (f"IHDP realization {args.realization}: CFR estimate {estimate.value:.4f} (fit "
          f"{fit_seconds:.1f} s, best step {int(cfr.best_iteration_[0])}); "
          f"{args.simulations} simulations per refuter, torch threads {args.threads}, "
          f"device {args.device}\n\n"
          + _markdown(table) + "\n\n"
          + sr.explain_family(dict(zip(table["refuter"], table["p_value"]))))
    report.write_outputs(args.out, "refuters", table, table, md)
    return md
