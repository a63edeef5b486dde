"""Autograd through the unrolled Sinkhorn iterations against the hand-written backward of
``core.ipm.SinkhornDistance``, interleaved in one process on a quiet machine:

1. the Wasserstein term alone (forward + backward) on one IHDP-sized block (19 treated x 81
   control, r = 200), K = 1 and K = 5;
2. a K = 1 training step and a K = 5 step (``train_cfr``, 200 steps, no early stopping);
3. default ``CFR().fit`` on IHDP realizations 1-10 (median wall time, steps run).

"autograd" swaps in the previous implementation of ``wasserstein_blocks`` (the same iterations,
differentiated by autograd). The two compute the same gradient up to rounding, so fits take
slightly different trajectories: compare per-step times, not steps run.

    python scripts/sinkhorn_backward.py --threads 2

Quoted in docs/results.md ("Sinkhorn with a hand-written backward").
"""
import argparse
import time

import numpy as np
import torch

from dowhy_cfr import CFR
from dowhy_cfr.core import ipm
from dowhy_cfr.core.config import CFRConfig
from dowhy_cfr.core.elementwise import per_model
from dowhy_cfr.core.training import train_cfr
from dowhy_cfr.datasets import ihdp_split, load_ihdp_many

HAND_WRITTEN = ipm.wasserstein_blocks


def autograd_wasserstein_blocks(phi_t, phi_c, *, lam=10.0, n_iter=10, backprop=True,
                                squared=False):
    """The previous ``wasserstein_blocks``: autograd through the loop."""
    d2 = ipm.pairwise_sq_dists(phi_t, phi_c)
    cost = d2 if squared else torch.sqrt(d2.clamp_min(ipm._SQRT_FLOOR))
    eff_lam = (lam / cost.detach().mean((1, 2)).clamp_min(1e-12)).view(-1, 1, 1)
    scaled = eff_lam * cost
    kernel = per_model(torch.exp, (scaled.detach().amin(2, keepdim=True) - scaled).clamp(
        ipm._SINKHORN_FLOOR_32, 0.0))
    a = torch.tensor(1.0 / phi_t.shape[1])
    b = torch.tensor(1.0 / phi_c.shape[1])
    v = torch.ones_like(cost[:, 0])
    for _ in range(int(n_iter)):
        u = torch.div(a, (kernel * v.unsqueeze(1)).sum(2))
        v = torch.div(b, (kernel * u.unsqueeze(2)).sum(1))
    plan = u.unsqueeze(2) * kernel * v.unsqueeze(1)
    if not backprop:
        plan = plan.detach()
    return (plan * cost).sum((1, 2))


VARIANTS = {"autograd": autograd_wasserstein_blocks, "hand-written": HAND_WRITTEN}


def _use(name):
    ipm.wasserstein_blocks = VARIANTS[name]


def _term_us(k, repeats=300):
    g = torch.Generator().manual_seed(0)
    phi_t = torch.nn.functional.normalize(torch.randn(k, 19, 200, generator=g), dim=-1)
    phi_c = torch.nn.functional.normalize(torch.randn(k, 81, 200, generator=g), dim=-1)
    phi_t.requires_grad_(True)
    phi_c.requires_grad_(True)
    start = time.perf_counter()
    for _ in range(repeats):
        ipm.wasserstein_blocks(phi_t, phi_c).sum().backward()
    return (time.perf_counter() - start) / repeats * 1e6


def _step_ms(data, k, steps=200):
    x, t, y, tr, va = data
    config = CFRConfig(n_iter=steps, patience=None, eval_every=10**6)
    start = time.perf_counter()
    train_cfr(x, t, y, train_idx=tr.expand(k, -1), val_idx=va.expand(k, -1), config=config,
              seeds=list(range(k)))
    return (time.perf_counter() - start) / steps * 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    ihdp = load_ihdp_many(range(1, 11))
    x0 = torch.tensor(ihdp["x"][0], dtype=torch.float32)
    x0 = (x0 - x0.mean(0)) / x0.std(0).clamp_min(1e-6)
    y0 = torch.tensor(ihdp["yf"][0], dtype=torch.float32)
    perm = torch.as_tensor(np.random.default_rng(0).permutation(len(x0)))
    data = (x0, torch.tensor(ihdp["t"][0]).long(), (y0 - y0.mean()) / y0.std(),
            perm[:500].unsqueeze(0), perm[500:].unsqueeze(0))
    rows = {name: {} for name in VARIANTS}
    for name in VARIANTS:  # warm-up
        _use(name)
        _term_us(1, 20)
        _step_ms(data, 1, 20)
    for _ in range(args.repeats):
        for name in VARIANTS:
            _use(name)
            for label, fn in (("term K=1, us", lambda: _term_us(1)),
                              ("term K=5, us", lambda: _term_us(5)),
                              ("step K=1, ms", lambda: _step_ms(data, 1)),
                              ("step K=5, ms", lambda: _step_ms(data, 5))):
                rows[name].setdefault(label, []).append(fn())
    for r in range(10):
        x, t, y = ihdp["x"][r], ihdp["t"][r], ihdp["yf"][r]
        w = ihdp_split(len(x), seed=r + 1).within
        for name in VARIANTS:
            _use(name)
            start = time.perf_counter()
            est = CFR(random_state=0, verbose=0).fit(y[w], t[w], X=x[w])
            rows[name].setdefault("default fit, s", []).append(time.perf_counter() - start)
            rows[name].setdefault("steps run", []).append(est.n_iter_)
    _use("hand-written")
    print(f"| medians ({args.threads} torch threads) | " + " | ".join(VARIANTS) + " |")
    print("|---|" + "---|" * len(VARIANTS))
    for label in rows["autograd"]:
        print(f"| {label} | " + " | ".join(f"{np.median(rows[n][label]):.3g}" for n in VARIANTS)
              + " |")


if __name__ == "__main__":
    main()
