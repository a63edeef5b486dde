"""Two CFR settings fitted back to back on each design: time and accuracy, paired.

Wall times on a shared 2-core machine drift by a fifth between two runs of the same code, so two
separate ``crossfit_compare.py`` runs cannot compare the time of a fit. Here each data set is
fitted with both settings one after the other, in alternating order, and the differences are
paired (``docs/parameters.md``, item 28, measured when ``--old`` was the default)::

    python scripts/paired_timing.py --old '{"eval_every": 10, "patience": 10}' --new '{}'
    python scripts/paired_timing.py --old '{"eval_every": 10, "patience": 10}' --new '{}' \
        --designs held-out --seeds 0

Two versions of the code (``--old-path``, ``--new-path``: checkouts put first on ``sys.path``)
are fitted in two worker processes, one per version, that take turns; each worker fits one data
set before the first timed one, so neither times the warm-up of a new process (item 29)::

    python scripts/paired_timing.py --old-path /tmp/base --new-path . --new '{}'
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import torch


def _fit(design: str, n: int, seed: int, params: dict) -> dict:
    from crossfit_compare import fit_realistic, pehe  # this script's folder is on sys.path

    est, data, spent = fit_realistic(design, n, seed, params)
    x, tau = data.test.X, data.test.tau
    return dict(**spent, pehe=pehe(est.effect(x), tau),
                pehe_heads=pehe(est.individual_effect(x), tau))


class _Worker:
    """A process fitting with the package at ``path`` (first on its ``sys.path``): one JSON job
    a line on its stdin, one JSON row a line on its stdout."""

    def __init__(self, path: str, n: int):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [os.path.abspath(path), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve",
                                      "--n", str(n), "--new", "{}"], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def fit(self, design: str, seed: int, params: dict) -> dict:
        self.proc.stdin.write(json.dumps([design, seed, params]) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def _serve(n: int) -> None:
    """The worker's loop (``--serve``): a warm-up fit, then the jobs of stdin."""
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    _fit("lalonde-linear", n, 99, {})
    for line in sys.stdin:
        design, seed, params = json.loads(line)
        print(json.dumps(_fit(design, n, seed, params)), flush=True)


def main():
    from dowhy_cfr.benchmarks import realistic as R
    from dowhy_cfr.datasets.realistic import DEFAULT_DESIGNS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", type=json.loads, default={}, help="CFR keyword arguments as JSON")
    p.add_argument("--new", type=json.loads, required=True, help="CFR keyword arguments as JSON")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--n", type=int, default=1500)
    p.add_argument("--designs", default=None,
                   help="as the benchmark's --designs (default: the development designs)")
    p.add_argument("--out", default=None, help="write the fits' rows to this CSV")
    p.add_argument("--old-path", default=None, help="fit --old with the package in this checkout")
    p.add_argument("--new-path", default=None, help="fit --new with the package in this checkout")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        return _serve(args.n)
    designs = DEFAULT_DESIGNS if args.designs is None else R.parse_designs(args.designs)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    rows = []
    seeds = [int(s) for s in args.seeds.split(",")]
    pairs = [(design, seed) for design in designs for seed in seeds]
    workers = None
    if args.old_path or args.new_path:
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
        workers = {name: _Worker(path or here, args.n)
                   for name, path in (("old", args.old_path), ("new", args.new_path))}
    for i, (design, seed) in enumerate(pairs):  # the order alternates from one data set to the next
        order = [("old", args.old), ("new", args.new)]
        for name, params in (order if i % 2 == 0 else order[::-1]):
            row = (_fit(design, args.n, seed, params) if workers is None
                   else workers[name].fit(design, seed, params))
            rows.append(dict(design=design, seed=seed, setting=name, **row))
            print(rows[-1], flush=True)
    for worker in (workers or {}).values():
        worker.close()
    if args.out:
        pd.DataFrame(rows).to_csv(args.out, index=False)
    wide = pd.DataFrame(rows).pivot_table(index=["design", "seed"], columns="setting")
    for metric in ("pehe", "pehe_heads", "steps", "time_s"):
        d = wide[metric]["new"] - wide[metric]["old"]
        print(f"{metric}: {wide[metric]['old'].mean():.4f} -> {wide[metric]['new'].mean():.4f} "
              f"({d.mean():+.4f} ± {d.std(ddof=1) / np.sqrt(len(d)):.4f})")


if __name__ == "__main__":
    main()
