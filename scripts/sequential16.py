"""Time 16 sequential default CFR fits on IHDP realizations 1-16 (the realizations that
`python -m dowhy_cfr.benchmarks speed --k 16` stacks), for an exact stacked-vs-sequential
comparison.  python scripts/sequential16.py"""

import time

import torch

from dowhy_cfr import CFR
from dowhy_cfr.datasets import ihdp_split, load_ihdp

torch.set_num_threads(1)
CFR(n_iter=5, verbose=0).fit(load_ihdp(1).yf, load_ihdp(1).t, X=load_ihdp(1).x)  # warm-up
t0 = time.perf_counter()
steps = []
for r in range(1, 17):
    d = load_ihdp(r)
    w = ihdp_split(747, seed=r).within  # the units the stacked benchmark trains on
    est = CFR(random_state=0, verbose=0).fit(d.yf[w], d.t[w], X=d.x[w])
    steps.append(est.n_iter_)
total = time.perf_counter() - t0
print(f"16 sequential fits: {total:.1f} s, {total / 16:.2f} s per fit, steps {steps}")
