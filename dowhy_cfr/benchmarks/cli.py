"""Command line of the benchmarks: ``python -m dowhy_cfr.benchmarks COMMAND [options]``.

Commands
--------
``ihdp``       Table 1 (IHDP): root PEHE and ATE error, within- and out-of-sample.
``jobs``       Table 1 (Jobs): policy risk and ATT error; the policy curve.
``imbalance``  Fig. 2: CFR-Wass error vs alpha on biased IHDP subsamples.
``speed``      wall time of default and ensemble fits, stacked vs single; ms/step and GFLOP/s.
``synthetic``  Nie & Wager (2021) designs A-E: √PEHE, ATE error, intervals, time.
``coverage``   coverage and width of 95% intervals over many simulated data sets.
``realistic``  semi-synthetic designs on real covariate tables: √PEHE, ATE error, time.
``refuters``   DoWhy's five refuters on a CFR estimate of IHDP, stacked: seconds, placebo, RCC.
``dose``       continuous treatments: average/individual dose-response errors vs EconML's DML,
               band coverage, time (the VCNet simulation and IHDP dose design).

Every command prints a markdown table and, with ``--out DIR``, writes CSV and markdown (and
plots, when matplotlib is installed) into ``DIR``.
"""

from __future__ import annotations

import argparse
import sys
import time

from . import report
from ._runner import add_threads_argument
from ..core import CFRConfig
from .methods import ALL_METHODS, parse_cfr_params

__all__ = ["main", "build_parser"]

# CFR-MMD's alpha: the squared linear MMD of a trained TARNet representation is ~20-40x smaller
# than its Wasserstein distance on IHDP (0.008 vs 0.3 on realization 1), so the MMD penalty
# needs a ~20x larger alpha to weigh about as much; see docs/benchmarks.md.
DEFAULT_ALPHA_WASS = CFRConfig().alpha
DEFAULT_ALPHA_MMD = 1.0


def _methods(value: str) -> list[str]:
    return report.parse_choices(value, ALL_METHODS, "method", {
        "lr-1": "OLS-1", "lr-2": "OLS-2", "knn": "k-NN", "cfr": "CFR-Wass",
        "causal-forest": "CF", "xlearner": "X-learner", "drlearner": "DR-learner"})


def _floats(value: str) -> list[float]:
    return [float(v) for v in value.split(",") if v.strip()]


def _common(p: argparse.ArgumentParser, *, methods: bool = True):
    p.add_argument("--out", metavar="DIR", default=None,
                   help="directory for CSV / markdown / plots (default: print only)")
    p.add_argument("--n-iter", type=int, default=None,
                   help="training steps of CFR/TARNet (default: the estimator's 'auto')")
    p.add_argument("--tiny", action="store_true",
                   help="tiny networks and forests for smoke tests (1 layer of 20/10 units, "
                        "10 trees, eval every 10 steps); combine with --n-iter")
    p.add_argument("--stack", type=int, default=25,
                   help="datasets trained together in one CFR.fit_stacked pass (default 25)")
    p.add_argument("--seed", type=int, default=0, help="base random seed (default 0)")
    p.add_argument("--alpha-wass", type=float, default=DEFAULT_ALPHA_WASS,
                   help=f"alpha of CFR-Wass (default {DEFAULT_ALPHA_WASS}, the estimator's)")
    p.add_argument("--alpha-mmd", type=float, default=DEFAULT_ALPHA_MMD,
                   help=f"alpha of CFR-MMD (default {DEFAULT_ALPHA_MMD})")
    p.add_argument("--cfr-params", type=parse_cfr_params, default={},
                   help='JSON object of CFR/TARNet keyword arguments, e.g. \'{"batch_size": 256}\'')
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--device", default="cpu",
                   help='device of the CFR/TARNet stacks: "cpu" (default), "cuda" or "auto"')
    p.add_argument("--workers", type=int, default=1,
                   help="worker processes fitting stacks / baselines in parallel, each with "
                        "--threads torch threads (default 1: inline). On a quiet 2-core machine "
                        "use --workers 2 --threads 1")
    add_threads_argument(p)
    if methods:
        p.add_argument("--methods", type=_methods, default=list(ALL_METHODS),
                       help="comma-separated methods or 'all' (default): "
                            + ", ".join(ALL_METHODS))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dowhy_cfr.benchmarks",
        description="Reproduce the experiments of Shalit, Johansson & Sontag (ICML 2017) "
                    "offline. See docs/benchmarks.md.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ihdp", help="IHDP table: root PEHE and ATE error")
    p.add_argument("--realizations", type=report.parse_range, default=report.parse_range("1-100"),
                   help="realizations, e.g. 1-100 (default) or 1,2,5-9")
    _common(p)

    p = sub.add_parser("jobs", help="Jobs table: policy risk and ATT error, policy curve")
    p.add_argument("--splits", type=int, default=10, help="number of splits (default 10)")
    p.add_argument("--variant", choices=("lalonde", "dw"), default="lalonde",
                   help="covariate set: LaLonde 8 covariates (default) or Dehejia-Wahba")
    _common(p)

    p = sub.add_parser("imbalance", help="Fig. 2: error vs alpha under increasing imbalance")
    p.add_argument("--realizations", type=report.parse_range, default=report.parse_range("1-20"),
                   help="realizations (default 1-20; the paper used 500)")
    p.add_argument("--q", type=_floats, default=[0.0, 0.5, 1.0],
                   help="comma-separated removal probabilities q (default 0,0.5,1)")
    p.add_argument("--alphas", type=_floats, default=[0.0, 0.01, 0.03, 0.1, 0.3, 1.0],
                   help="comma-separated alphas; 0 is always added (default 0,0.01,...,1)")
    p.add_argument("--n-keep", type=int, default=400, help="units kept (default 400)")
    _common(p, methods=False)

    p = sub.add_parser("speed", help="wall time: default/ensemble fits, stacking, ms per step")
    p.add_argument("--realizations", type=report.parse_range, default=report.parse_range("1-10"),
                   help="realizations fitted one by one, and together in one stack (default "
                        "1-10)")
    p.add_argument("--device", default="cpu", help='"cpu" (default), "cuda" or "auto"')
    p.add_argument("--steps", type=int, default=300,
                   help="steps timed for the package-vs-plain comparison (default 300)")
    p.add_argument("--out", metavar="DIR", default=None)
    p.add_argument("--n-iter", type=int, default=None)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    add_threads_argument(p)

    from .synthetic import add_parsers

    add_parsers(sub)
    from .realistic import add_parsers as add_realistic_parsers

    add_realistic_parsers(sub)
    from .refuters import add_parser as add_refuters_parser

    add_refuters_parser(sub)
    from .dose import add_parser as add_dose_parser

    add_dose_parser(sub)
    return parser


def _settings(args) -> dict:
    return dict(n_iter=args.n_iter, tiny=args.tiny, alpha_wass=args.alpha_wass,
                alpha_mmd=args.alpha_mmd, device=args.device,
                cfr_params=getattr(args, "cfr_params", {}))


def main(argv=None) -> int:
    """Run a benchmark command; ``argv`` defaults to ``sys.argv[1:]``. Returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    if args.command == "ihdp":
        from .ihdp import run_ihdp

        raw, summary, md = run_ihdp(args.realizations, args.methods, settings=_settings(args),
                                    stack=args.stack, seed=args.seed,
                                    progress=not args.no_progress, workers=args.workers,
                                    threads=args.threads)
        report.write_outputs(args.out, "ihdp", raw, summary, md)
    elif args.command == "jobs":
        from .jobs import plot_policy_curves, run_jobs

        try:
            raw, summary, md, curves = run_jobs(
                args.methods, settings=_settings(args), variant=args.variant,
                n_splits=args.splits, stack=args.stack, seed=args.seed,
                progress=not args.no_progress, workers=args.workers, threads=args.threads)
        except ModuleNotFoundError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        report.write_outputs(args.out, "jobs", raw, summary, md)
        if args.out is not None:
            from pathlib import Path

            curves.to_csv(Path(args.out) / "jobs_policy_curves.csv", index=False)
            png = plot_policy_curves(curves, Path(args.out) / "jobs_policy_curve.png")
            if png is not None:
                md += f"\n\nPolicy curve: {png}"
    elif args.command == "imbalance":
        from .imbalance import plot_imbalance, run_imbalance

        raw, summary, md = run_imbalance(args.realizations, args.q, args.alphas,
                                         settings=_settings(args), n_keep=args.n_keep,
                                         stack=args.stack, seed=args.seed,
                                         progress=not args.no_progress,
                                         workers=args.workers, threads=args.threads)
        report.write_outputs(args.out, "imbalance", raw, summary, md)
        if args.out is not None:
            from pathlib import Path

            png = plot_imbalance(summary, Path(args.out) / "imbalance.png")
            if png is not None:
                md += f"\n\nPlot: {png}"
    elif args.command in ("synthetic", "coverage"):
        from .synthetic import run_command

        md = run_command(args)
    elif args.command == "realistic":
        from .realistic import run_command as run_realistic

        md = run_realistic(args)
    elif args.command == "refuters":
        from .refuters import run_command as run_refuters

        md = run_refuters(args)
    elif args.command == "dose":
        from .dose import run_command as run_dose

        md = run_dose(args)
    else:  # speed
        from .speed import run_speed

        table, md = run_speed(realizations=args.realizations, steps=args.steps,
                              n_iter=args.n_iter, tiny=args.tiny, seed=args.seed,
                              device=args.device)
        if args.out is not None:
            from pathlib import Path

            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            table.to_csv(out / "speed.csv", index=False)
            (out / "speed.md").write_text(md + "\n", encoding="utf-8")
    print(md)
    print(f"\n(total wall time {time.perf_counter() - start:.1f} s)")
    return 0
