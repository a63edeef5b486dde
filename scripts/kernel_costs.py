"""What the operations of a default training step cost on this CPU, one at a time: the matrix
products at the step's shapes (GFLOP/s), ELU against ``exp``-based forms, ELU's two backward
kernels, and Adam's Python ``step`` against its fused kernel alone. Results: ``docs/results.md``
("Speed").

    PYTHONPATH=<checkout> python scripts/kernel_costs.py --threads 2
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.nn import functional as F

from dowhy_cfr.core.network import CFRNet
from dowhy_cfr.core.stopping import adam


def _us(fn, n: int = 2000) -> float:
    for _ in range(max(n // 20, 5)):
        fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    print("matrix products (rows x inner x outer): bmm us, GFLOP/s")
    for m, k, n in [(100, 25, 200), (100, 200, 200), (81, 200, 100), (19, 200, 100),
                    (81, 100, 100), (19, 100, 100)]:
        a, b = torch.randn(1, m, k), torch.randn(1, k, n)
        us = _us(lambda: torch.bmm(a, b))
        print(f"  {m} x {k} x {n}: {us:.1f} us, {2 * m * k * n / us / 1e3:.0f} GFLOP/s")
    for shape in [(1, 100, 200), (100, 100, 200)]:
        x, n = torch.randn(*shape) * 0.5, 2000 if shape[0] == 1 else 100

        def via_exp():
            out = torch.exp(x.clamp(max=0))
            return out.sub_(1).add_(x.clamp(min=0))

        print(f"ELU on {shape}: F.elu {_us(lambda: F.elu(x), n):.1f} us, exp alone "
              f"{_us(lambda: torch.exp(x), n):.1f}, expm1 alone {_us(lambda: torch.expm1(x), n):.1f}"
              f", exp(min(x, 0)) - 1 + max(x, 0) {_us(via_exp, n):.1f}, where(x > 0, x, exp(x) - 1) "
              f"{_us(lambda: torch.where(x > 0, x, torch.exp(x) - 1), n):.1f}; backward from the "
              f"input {_us(lambda: torch.ops.aten.elu_backward(x, 1.0, 1, 1, False, x), n):.1f}, "
              f"from the output {_us(lambda: torch.ops.aten.elu_backward(x, 1.0, 1, 1, True, x), n):.1f}")
    net = CFRNet(25, [0])
    params = list(net.parameters())
    opt = adam(params, 1e-3)
    for q in params:
        q.grad = torch.randn_like(q) * 1e-3
    opt.step()
    state = [opt.state[q] for q in params]
    moments = [s["exp_avg"] for s in state], [s["exp_avg_sq"] for s in state]
    steps = [s["step"] for s in state]

    def kernel_only():
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(params, [q.grad for q in params], *moments, [], steps, lr=1e-3,
                           beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False,
                           maximize=False)

    print(f"Adam on the default network: optimizer.step {_us(opt.step):.0f} us, the fused kernel "
          f"alone {_us(kernel_only):.0f} us")


if __name__ == "__main__":
    main()
