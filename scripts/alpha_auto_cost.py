"""Cost of ``CFR(alpha="auto")`` against ``alpha=0.05`` at n = 2000 (designs A and C, seeds 0, 1).

    python scripts/alpha_auto_cost.py

Prints the wall time of each fit (noisy on a shared machine) and the network-steps: the steps
each network ran, summed. The stacked search trains each candidate exactly as a separate fit
with the same seed would, so its network-steps are the sum of the fixed-alpha fits' steps.
"""

import time

import torch
from threadpoolctl import threadpool_limits

from dowhy_cfr import CFR
from dowhy_cfr.core import ALPHA_GRID
from dowhy_cfr.datasets.synthetic import simulate

torch.set_num_threads(1)
with threadpool_limits(1):
    for design in ("A", "C"):
        for seed in (0, 1):
            a = simulate(design, 2000, random_state=seed)
            steps, walls = {}, {}
            for alpha in ALPHA_GRID:
                t0 = time.time()
                est = CFR(alpha=alpha, random_state=seed, verbose=0).fit(a.y, a.t, X=a.x)
                walls[alpha] = time.time() - t0
                steps[alpha] = int(est.history_["step"].max())
            t0 = time.time()
            auto = CFR(alpha="auto", random_state=seed, verbose=0).fit(a.y, a.t, X=a.x)
            wall = time.time() - t0
            print(f"{design} {seed} fixed 0.05: {walls[0.05]:.1f} s, {steps[0.05]} steps; auto: "
                  f"{wall:.1f} s, network-steps {sum(steps.values())} {steps}, "
                  f"alpha_ {auto.alpha_}", flush=True)
