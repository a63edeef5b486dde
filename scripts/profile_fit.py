"""Profile of one default ``CFR().fit`` on an IHDP realization, end to end: where the wall time
goes (``cProfile``, cumulative, by function) and which tensor operations take the CPU time
(``torch.profiler``, self CPU). Results: ``docs/results.md`` (section "Speed").

    PYTHONPATH=<checkout> python scripts/profile_fit.py --realization 1 --threads 1
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

from dowhy_cfr import CFR
from dowhy_cfr.datasets import ihdp_split, load_ihdp_many


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--realization", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--n-ensemble", type=int, default=1)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = load_ihdp_many([args.realization])
    x, t, y = data["x"][0], data["t"][0], data["yf"][0]
    w = ihdp_split(len(x), seed=args.realization).within

    def fit():
        return CFR(random_state=0, verbose=0, n_ensemble=args.n_ensemble).fit(y[w], t[w], X=x[w])

    CFR(n_iter=5, verbose=0).fit(y[w], t[w], X=x[w])  # warm-up
    start = time.perf_counter()
    est = fit()
    print(f"fit: {time.perf_counter() - start:.2f} s, steps {est.n_iter_}, best "
          f"{est.best_iteration_}")
    prof = cProfile.Profile()
    prof.enable()
    fit()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(args.top)
    print(out.getvalue())
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as tp:
        fit()
    print(tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))


if __name__ == "__main__":
    main()
