"""Distributed training: imbalance on the all-gathered batch ("global") vs each worker's own
("local"), on a design where the per-worker batches are small.

    python scripts/distributed_ipm.py --realizations 1-10 --world 2 --batch 16

IHDP realizations (747 units, 19% treated; the paper's 63/27/10 split: workers shard the 63%
training units, the 27% validation units are shared for early stopping, sqrt(PEHE) is measured on
the 10% test units and on the training units). With ``--batch 16`` per worker a local batch holds
about 3 treated units, so a per-worker Wasserstein distance is a very noisy estimate; the global
batch (``world * batch`` units) has ``world`` times as many. Each realization is also fitted in a
single process with a ``world * batch`` batch (``CFR.fit_chunks``, the same preprocessing path).
Workers are launched with ``torch.multiprocessing.spawn`` and gloo on localhost, one torch thread
each.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time

import numpy as np


def _params(args):
    return dict(n_rep_layers=2, rep_dim=64, n_head_layers=2, head_dim=32, n_iter=args.n_iter,
                eval_every=50, batch_size=args.batch, alpha=args.alpha, verbose=0,
                random_state=0)


def _data(r):
    from dowhy_cfr.datasets import ihdp_split, load_ihdp

    d = load_ihdp(r)
    sp = ihdp_split(len(d.t), seed=r)
    return d, sp


def _worker(rank, world, port, out_dir, r, mode, args):
    import torch
    import torch.distributed as dist

    from dowhy_cfr import CFR
    from dowhy_cfr.distributed import fit_distributed

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        d, sp = _data(r)
        shard = sp.train[rank::world]
        v = sp.val
        est = fit_distributed(CFR(**_params(args)), d.yf[shard], d.t[shard], d.x[shard],
                              validation=(d.yf[v], d.t[v], d.x[v]), ipm_batch=mode)
        if rank == 0:
            np.save(os.path.join(out_dir, "tau.npy"), est.effect(d.x))
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pehe(d, sp, tau_hat):
    tau = d.mu1 - d.mu0
    within = np.concatenate([sp.train, sp.val])
    return (float(np.sqrt(np.mean((tau_hat[within] - tau[within]) ** 2))),
            float(np.sqrt(np.mean((tau_hat[sp.test] - tau[sp.test]) ** 2))))


def run(args):
    import torch
    import torch.multiprocessing as mp

    from dowhy_cfr import CFR
    from dowhy_cfr.benchmarks.report import parse_range

    torch.set_num_threads(1)
    rows = []
    for r in parse_range(args.realizations):
        d, sp = _data(r)
        for mode in ("global", "local"):
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                mp.spawn(_worker, args=(args.world, _free_port(), tmp, r, mode, args),
                         nprocs=args.world, join=True)
                tau_hat = np.load(os.path.join(tmp, "tau.npy"))
            rows.append(dict(realization=r, mode=mode, seconds=time.perf_counter() - t0,
                             **dict(zip(("within", "out"), _pehe(d, sp, tau_hat)))))
        t0 = time.perf_counter()
        v = sp.val
        single = CFR(**{**_params(args), "batch_size": args.world * args.batch}).fit_chunks(
            [(d.yf[sp.train], d.t[sp.train], d.x[sp.train])],
            validation=(d.yf[v], d.t[v], d.x[v]))
        rows.append(dict(realization=r, mode="single", seconds=time.perf_counter() - t0,
                         **dict(zip(("within", "out"), _pehe(d, sp, single.effect(d.x))))))
        for row in rows[-3:]:
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                              for k, v in row.items()}), flush=True)
    summary = {}
    for mode in ("global", "local", "single"):
        sel = [x for x in rows if x["mode"] == mode]
        for key in ("within", "out"):
            vals = np.array([x[key] for x in sel])
            summary[f"{mode}_{key}"] = (round(float(vals.mean()), 3),
                                        round(float(vals.std(ddof=1) / np.sqrt(len(vals))), 3)
                                        if len(vals) > 1 else None)
    g = np.array([x["out"] for x in rows if x["mode"] == "global"])
    lo = np.array([x["out"] for x in rows if x["mode"] == "local"])
    summary.update(global_better_out=int((g < lo).sum()), realizations=len(g),
                   world=args.world, batch_per_worker=args.batch, alpha=args.alpha,
                   n_iter=args.n_iter)
    print(json.dumps(summary))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--realizations", default="1-10")
    p.add_argument("--world", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--batch", type=int, default=16, help="batch size per worker (default 16)")
    p.add_argument("--alpha", type=float, default=0.3,
                   help="imbalance penalty (default 0.3, where the IPM matters on IHDP)")
    p.add_argument("--n-iter", type=int, default=2000)
    args = p.parse_args(argv)
    run(args)


if __name__ == "__main__":
    sys.exit(main())
