"""Wall-time benchmark of the stacked implementation.

Measures, on IHDP (fitted on ``ihdp_split(747, seed=r).within``, as in the IHDP benchmark):

0. an untimed 5-step warm-up fit (the first torch calls of a process are slow);
1. one default ``CFR`` fit on realization 1 (``K = 1``; early stopping as configured);
2. ``K`` realizations (default 16) trained together by ``CFR.fit_stacked``: total and per model;
3. sequential ``K = 1`` fits: only two are timed (realizations 1 and 2, the first being fit 1)
   and the time for ``K`` of them is extrapolated as ``K x`` their mean -- stated in the output;
4. ms per training step of the package's ``K = 1`` network (``core.train_cfr``, no early
   stopping, one evaluation at the end) against a minimal plain PyTorch implementation of the
   same network (``nn.Linear`` layers, same widths, ELU, unit-sphere normalisation, two heads,
   weighted squared loss, the same Wasserstein IPM function, L2 on the heads, Adam with the
   same staircase decay, same batch size and number of steps).

Because early stopping makes different fits run different numbers of steps, per-step times are
reported next to wall times.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..core import CFRConfig, train_cfr
from ..core.ipm import imbalance
from ..datasets import ihdp_split, load_ihdp_many
from ..estimator import CFR

__all__ = ["PlainCFR", "plain_steps", "run_speed"]


class PlainCFR(nn.Module):
    """A plain (non-stacked) CFR/TARNet network, written for the speed comparison only.

    Representation: ``n_rep`` ELU layers of width ``rep_dim``, then ``phi / ||phi||``; two heads
    of ``n_head`` ELU layers of width ``head_dim`` and a linear output.
    """

    def __init__(self, d_in: int, *, n_rep=3, rep_dim=200, n_head=3, head_dim=100,
                 weight_init=0.1):
        super().__init__()
        layers, d = [], d_in
        for _ in range(n_rep):
            layers += [nn.Linear(d, rep_dim), nn.ELU()]
            d = rep_dim
        self.rep = nn.Sequential(*layers)

        def head():
            hl, h = [], rep_dim
            for _ in range(n_head):
                hl += [nn.Linear(h, head_dim), nn.ELU()]
                h = head_dim
            hl.append(nn.Linear(h, 1))
            return nn.Sequential(*hl)

        self.h0, self.h1 = head(), head()
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=weight_init / np.sqrt(m.in_features))
                nn.init.zeros_(m.bias)

    def forward(self, x):
        phi = self.rep(x)
        phi = phi * torch.rsqrt(phi.pow(2).sum(-1, keepdim=True).clamp_min(1e-10))
        return phi, self.h0(phi).squeeze(-1), self.h1(phi).squeeze(-1)

    def head_penalty(self):
        return 0.5 * sum(m.weight.pow(2).sum() for h in (self.h0, self.h1)
                         for m in h.modules() if isinstance(m, nn.Linear))


def plain_steps(x, t, y, *, n_steps: int, config: CFRConfig, seed: int = 0) -> float:
    """Run ``n_steps`` training steps of :class:`PlainCFR`; returns wall seconds."""
    torch.manual_seed(seed)
    gen = np.random.default_rng(seed)
    net = PlainCFR(x.shape[1], n_rep=config.n_rep_layers, rep_dim=config.rep_dim,
                   n_head=config.n_head_layers, head_dim=config.head_dim,
                   weight_init=config.weight_init)
    opt = torch.optim.Adam(net.parameters(), lr=config.learning_rate)
    sched = torch.optim.lr_scheduler.StepLR(opt, config.lr_decay_steps, gamma=config.lr_decay)
    xt = torch.as_tensor(x, dtype=torch.float32)
    tt = torch.as_tensor(t, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.float32)
    u = float(tt.mean())
    n = len(xt)
    ipm_kw = config.ipm_kwargs()
    start = time.perf_counter()
    for _ in range(n_steps):
        idx = torch.as_tensor(gen.choice(n, size=min(config.batch_size, n), replace=False))
        xb, tb, yb = xt[idx], tt[idx], yt[idx]
        w = tb / (2 * u) + (1 - tb) / (2 * (1 - u))  # Algorithm 1, line 2
        phi, o0, o1 = net(xb)
        pred = torch.where(tb > 0.5, o1, o0)
        loss = (w * (pred - yb).pow(2)).mean()
        if config.alpha > 0:
            loss = loss + config.alpha * imbalance(phi, tb, check=False, **ipm_kw)
        loss = loss + config.weight_decay * net.head_penalty()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    return time.perf_counter() - start


def _package_steps(x, t, y, *, n_steps: int, config: CFRConfig, seed: int = 0) -> float:
    """``n_steps`` steps of the package's stacked network with K = 1; wall seconds."""
    n = len(x)
    perm = np.random.default_rng(seed).permutation(n)
    n_val = max(int(0.3 * n), 2)
    cfg = CFRConfig(**{**config.to_dict(), "n_iter": n_steps, "eval_every": n_steps,
                       "patience": None})
    start = time.perf_counter()
    train_cfr(torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(t, dtype=torch.long),
              torch.as_tensor(y, dtype=torch.float32),
              train_idx=torch.as_tensor(perm[n_val:][None]),
              val_idx=torch.as_tensor(perm[:n_val][None]), config=cfg, seeds=[seed])
    return time.perf_counter() - start


def run_speed(*, k: int = 16, steps: int = 300, n_iter: int | None = None, tiny: bool = False,
              seed: int = 0):
    """Run the speed benchmark; returns ``(table, markdown)``."""
    from .methods import _TINY_NET

    params = dict(random_state=seed, verbose=0)
    if tiny:
        params.update(_TINY_NET)
    if n_iter is not None:
        params["n_iter"] = int(n_iter)
    reals = list(range(1, max(k, 2) + 1))
    data = load_ihdp_many(reals)
    x = np.ascontiguousarray(data["x"][0])
    t = np.ascontiguousarray(data["t"][0])
    splits = [ihdp_split(len(x), seed=r) for r in reals]
    rows = []

    def fit_one(i):
        w = splits[i].within
        start = time.perf_counter()
        est = CFR(**params).fit(data["yf"][i][w], t[w], X=x[w])
        return time.perf_counter() - start, est.n_iter_

    # warm-up (first torch calls, allocator): not timed
    w0 = splits[0].within
    CFR(**dict(params, n_iter=5)).fit(data["yf"][0][w0], t[w0], X=x[w0])
    # 1 + 3: sequential K=1 fits of realizations 1 and 2
    seq = [fit_one(0), fit_one(1)]
    rows.append(dict(what="CFR fit, K=1 (realization 1)", seconds=seq[0][0], steps=seq[0][1],
                     models=1, ms_per_step_per_model=1e3 * seq[0][0] / seq[0][1]))
    # 2: K stacked
    units = np.stack([splits[i].within for i in range(k)])
    start = time.perf_counter()
    members = CFR(**params).fit_stacked(data["yf"][:k], t, X=x, units=units)
    secs = time.perf_counter() - start
    steps_run = int(max(m.history_["step"].max() for m in members))
    rows.append(dict(what=f"CFR fit_stacked, K={k}", seconds=secs, steps=steps_run, models=k,
                     ms_per_step_per_model=1e3 * secs / steps_run / k))
    rows.append(dict(what=f"CFR fit_stacked, K={k}: per model", seconds=secs / k,
                     steps=steps_run, models=1, ms_per_step_per_model=np.nan))
    mean_seq = float(np.mean([s for s, _ in seq]))
    rows.append(dict(what=f"{k} sequential K=1 fits (extrapolated: {k} x mean of 2 timed fits)",
                     seconds=k * mean_seq, steps=int(np.mean([n for _, n in seq])), models=k,
                     ms_per_step_per_model=1e3 * sum(s for s, _ in seq) / sum(n for _, n in seq)))
    # 4: per-step, package K=1 vs plain PyTorch
    est_params = CFR(**params).get_params()
    cfg = CFRConfig(**{f: est_params[f] for f in CFRConfig.__dataclass_fields__
                       if f in est_params and f != "loss"}).validate()  # squared loss
    w = splits[0].within
    y0 = data["yf"][0][w]
    y_std = (y0 - y0.mean()) / y0.std()
    x_std = (x[w] - x[w].mean(0)) / np.where(x[w].std(0) > 0, x[w].std(0), 1.0)
    for label, fn in (("package network, K=1 (core.train_cfr)", _package_steps),
                      ("plain PyTorch nn.Module", plain_steps)):
        fn(x_std, t[w], y_std, n_steps=5, config=cfg, seed=seed)  # warm-up
        s = fn(x_std, t[w], y_std, n_steps=steps, config=cfg, seed=seed)
        rows.append(dict(what=f"{label}: {steps} steps", seconds=s, steps=steps, models=1,
                         ms_per_step_per_model=1e3 * s / steps))
    table = pd.DataFrame(rows)
    md = ["## Speed (IHDP, CPU, torch threads = %d)" % torch.get_num_threads(), "",
          "| what | wall s | steps | ms / step / model |", "|---|---|---|---|"]
    for _, r in table.iterrows():
        ms = "" if np.isnan(r["ms_per_step_per_model"]) else f"{r['ms_per_step_per_model']:.2f}"
        md.append(f"| {r['what']} | {r['seconds']:.2f} | {r['steps']} | {ms} |")
    md += ["", f"Speed-up of stacking over sequential fits (wall, extrapolated): "
               f"{k * mean_seq / secs:.1f}x. Settings: "
               f"{'tiny network, ' if tiny else ''}n_iter={params.get('n_iter', 3000)}, "
               f"batch_size={cfg.batch_size}, ipm={cfg.ipm}, alpha={cfg.alpha}."]
    return table, "\n".join(md)
