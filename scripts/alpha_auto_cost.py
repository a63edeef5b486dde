"""python scripts/alpha_auto_cost.py -- Cost of alpha='auto' vs alpha=0.05 at n=2000: wall time (noisy: shared 2-core machine) and
network-steps (steps each network ran, summed; the stack = the separate fits, same seeds)."""
import time, numpy as np, torch
from threadpoolctl import threadpool_limits
torch.set_num_threads(1)
from dowhy_cfr import CFR
from dowhy_cfr.core import ALPHA_GRID
from dowhy_cfr.datasets.synthetic import simulate
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
            print(design, seed, "fixed 0.05:", f"{walls[0.05]:.1f} s, {steps[0.05]} steps;",
                  "auto:", f"{wall:.1f} s, network-steps {sum(steps.values())} {steps}, alpha_ {auto.alpha_}",
                  flush=True)
