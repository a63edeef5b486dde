"""When does ``device="cuda"`` pay? Milliseconds per training step of ``core.train_cfr`` (the
default architecture, CFR-Wass) on the CPU and the GPU, over batch sizes and stack sizes K.

    python scripts/gpu_steps.py --devices cpu,cuda --batches 100,1000 --stacks 1,10,50 --threads 2

Each cell trains K models on one synthetic data set (n = 20,000, d = 25, IHDP's width) for
``--steps`` steps after a short warm-up (CUDA context, kernel selection), with one validation at
the end; wall time over steps, with the GPU synchronised before the clock is read.
"""

from __future__ import annotations

import argparse
import time

import torch

from dowhy_cfr.core import CFRConfig, train_cfr


def data(n=20_000, d=25, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    t = (torch.rand(n, generator=g) < torch.sigmoid(x[:, 0])).long()
    y = x[:, 0] + t * (1 + x[:, 1]) + torch.randn(n, generator=g)
    perm = torch.randperm(n, generator=g)
    return x, t, y, perm[: int(0.7 * n)], perm[int(0.7 * n):]


def ms_per_step(device: str, batch: int, k: int, steps: int) -> float:
    x, t, y, tr, va = data()

    def run(n_iter):
        cfg = CFRConfig(batch_size=batch, n_iter=n_iter, eval_every=n_iter, patience=None)
        train_cfr(x, t, y, train_idx=tr.expand(k, -1), val_idx=va.expand(k, -1), config=cfg,
                  seeds=list(range(k)), device=device)
        if device == "cuda":
            torch.cuda.synchronize()
    run(20)  # warm-up
    start = time.perf_counter()
    run(steps)
    return (time.perf_counter() - start) / steps * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", default="cpu,cuda")
    p.add_argument("--batches", default="100,1000")
    p.add_argument("--stacks", default="1,10,50")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--threads", type=int, default=2, help="CPU threads (a laptop has few)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    devices = a.devices.split(",")
    print("| batch | K | " + " | ".join(f"{d}: ms/step (per model)" for d in devices) + " |")
    print("|---|---|" + "---|" * len(devices))
    for b in map(int, a.batches.split(",")):
        for k in map(int, a.stacks.split(",")):
            cells = []
            for d in devices:
                ms = ms_per_step(d, b, k, a.steps)
                cells.append(f"{ms:.2f} ({ms / k:.2f})")
            print(f"| {b} | {k} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
