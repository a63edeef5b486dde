"""Wall-time benchmark of the training engine (``python -m dowhy_cfr.benchmarks speed``).

Measures on IHDP (each realization fitted on ``ihdp_split(747, seed=r).within``, as in the IHDP
benchmark), after an untimed warm-up fit:

1. a default ``CFR`` fit (five K-fold members in one stack) on each of the given realizations:
   median wall time, median CPU time of the process (all threads; less sensitive than wall time
   to other jobs on the machine), steps run, best step;
2. the same with the paper's configuration, ``CFR(**PAPER_IHDP)`` (one network of 3 x 200 and
   3 x 100 units; the defaults before issue 30);
3. all the realizations in one ``CFR.fit_stacked`` pass against the sum of the single fits;
4. ms per training step of the package's ``K = 1`` network (``core.train_cfr``, no early
   stopping) against a minimal plain PyTorch loop of the same network and objective, with each
   step's matrix-product FLOP count (``torch.utils.flop_counter``) and the GFLOP/s achieved (the
   package's step runs each head on its own arm's rows only, the plain loop both heads on all).

Measurements and their commands: ``docs/results.md`` (section "Speed").
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..core import PAPER_IHDP, CFRConfig, train_cfr
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


def package_step_flops(x, t, y, *, config: CFRConfig, seed: int = 0) -> int:
    """Matrix-product FLOPs of one training step (forward and backward) of the package's K = 1
    network: each head on its own arm's rows of a stratified batch, the Sinkhorn on the treated x
    control block."""
    from torch.utils.flop_counter import FlopCounterMode

    from ..core.training import StackedRun

    n = len(x)
    perm = torch.as_tensor(np.random.default_rng(seed).permutation(n))
    n_val = max(int(0.3 * n), 2)
    run = StackedRun(torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(t),
                     torch.as_tensor(y, dtype=torch.float32), train_idx=perm[n_val:][None],
                     val_idx=perm[:n_val][None], config=config, seeds=[seed], n_arms=2,
                     batch_source=None, arm_shares=None, model_wrapper=None, gather_ipm=None,
                     alpha=None, weight_decay=None, per_model_data=False, device="cpu")
    xb, tb, yb = run.batches.next()
    with FlopCounterMode(display=False) as counter:
        phi, pred = run.forward(xb, tb)
        run.batch_eq3(phi, pred, tb, yb).objective.sum().backward()
        run.add_l2_gradient()
    return int(counter.get_total_flops())


def step_flops(x, t, y, *, config: CFRConfig) -> int:
    """Matrix-product FLOPs of one training step (forward and backward) of the plain network
    (both heads on every unit, the Sinkhorn on the whole batch)."""
    from torch.utils.flop_counter import FlopCounterMode

    net = PlainCFR(x.shape[1], n_rep=config.n_rep_layers, rep_dim=config.rep_dim,
                   n_head=config.n_head_layers, head_dim=config.head_dim)
    b = min(config.batch_size, len(x))
    xb = torch.as_tensor(x[:b], dtype=torch.float32)
    tb = torch.as_tensor(t[:b], dtype=torch.float32)
    yb = torch.as_tensor(y[:b], dtype=torch.float32)
    with FlopCounterMode(display=False) as counter:
        phi, o0, o1 = net(xb)
        loss = (torch.where(tb > 0.5, o1, o0) - yb).pow(2).mean()
        if config.alpha > 0:
            loss = loss + config.alpha * imbalance(phi, tb, check=False, **config.ipm_kwargs())
        loss.backward()
    return int(counter.get_total_flops())


def _fit_row(what, fits):
    secs = [f[0] for f in fits]
    return dict(what=what, seconds=float(np.median(secs)),
                cpu_seconds=float(np.median([f[3] for f in fits])),
                steps=int(np.median([f[1] for f in fits])),
                best_step=int(np.median([f[2] for f in fits])), models=1,
                ms_per_step_per_model=1e3 * sum(secs) / sum(f[1] for f in fits))


def run_speed(*, realizations=range(1, 11), steps: int = 300, n_iter: int | None = None,
              tiny: bool = False, seed: int = 0, device: str = "cpu"):
    """Run the speed benchmark; returns ``(table, markdown)``."""
    from .methods import TINY_NET

    params = dict(random_state=seed, verbose=0, device=device)
    if tiny:
        params.update(TINY_NET)
    if n_iter is not None:
        params["n_iter"] = int(n_iter)
    reals = list(realizations)
    data = load_ihdp_many(reals)
    x = np.ascontiguousarray(data["x"][0])
    t = np.ascontiguousarray(data["t"][0])
    splits = [ihdp_split(len(x), seed=r) for r in reals]

    def fit_one(i, **extra):
        w = splits[i].within
        start, cpu = time.perf_counter(), time.process_time()
        est = CFR(**{**params, **extra}).fit(data["yf"][i][w], t[w], X=x[w])
        return (time.perf_counter() - start, est.n_iter_, int(np.max(est.best_iteration_)),
                time.process_time() - cpu)

    fit_one(0, n_iter=5)  # warm-up (first torch calls, allocator): not timed
    single = [fit_one(i) for i in range(len(reals))]
    paper_cfg = {k: v for k, v in PAPER_IHDP.items() if not (tiny and k in TINY_NET)}
    paper = [fit_one(i, **paper_cfg) for i in range(len(reals))]
    rows = [_fit_row(f"default CFR fit, median of {len(reals)} realizations", single),
            _fit_row(f"CFR(**PAPER_IHDP) fit, median of {len(reals)} realizations", paper)]
    units = np.stack([s.within for s in splits])
    start = time.perf_counter()
    members = CFR(**params).fit_stacked(data["yf"], t, X=x, units=units)
    secs = time.perf_counter() - start
    steps_run = int(max(m.history_["step"].max() for m in members))
    rows.append(dict(what=f"CFR fit_stacked, K={len(reals)} realizations", seconds=secs,
                     steps=steps_run, best_step=int(np.median([m.best_iteration_[0] for m in members])),
                     models=len(reals), ms_per_step_per_model=1e3 * secs / steps_run / len(reals)))
    rows.append(dict(what=f"{len(reals)} single fits, one after the other (sum)",
                     seconds=sum(f[0] for f in single), steps=np.nan, best_step=np.nan,
                     models=len(reals), ms_per_step_per_model=np.nan))
    cfg, x_std, t0, y_std = _step_inputs(params, x, t, data["yf"][0], splits[0].within)
    flops = step_flops(x_std, t0, y_std, config=cfg)
    package_flops = package_step_flops(x_std, t0, y_std, config=cfg, seed=seed)
    for label, fn, f in (("package network, K=1 (core.train_cfr)", _package_steps, package_flops),
                         ("plain PyTorch nn.Module", plain_steps, flops)):
        fn(x_std, t0, y_std, n_steps=5, config=cfg, seed=seed)  # warm-up
        s_ = fn(x_std, t0, y_std, n_steps=steps, config=cfg, seed=seed)
        rows.append(dict(what=f"{label}: {steps} steps", seconds=s_, steps=steps,
                         best_step=np.nan, models=1, ms_per_step_per_model=1e3 * s_ / steps,
                         gflops=f * steps / s_ / 1e9))
    table = pd.DataFrame(rows)
    return table, _markdown(table, (flops, package_flops), cfg, params, tiny)


def _step_inputs(params, x, t, y_all, w):
    est_params = CFR(**params).get_params()
    cfg = CFRConfig(**{f: est_params[f] for f in CFRConfig.__dataclass_fields__
                       if f in est_params and f != "loss"}).validate()  # squared loss
    y0 = y_all[w]
    cfg = cfg.resolve(len(y0))  # the "auto"s at these units
    x_std = (x[w] - x[w].mean(0)) / np.where(x[w].std(0) > 0, x[w].std(0), 1.0)
    return cfg, x_std, t[w], (y0 - y0.mean()) / y0.std()


def _markdown(table, flops, cfg, params, tiny) -> str:
    md = [f"## Speed (IHDP, {params['device']}, torch threads = {torch.get_num_threads()})", "",
          "| what | wall s | CPU s | steps run | best step | ms / step / model | GFLOP/s |",
          "|---|---|---|---|---|---|---|"]

    def fmt(v, f):
        return "" if pd.isna(v) else format(v, f)

    for _, r in table.iterrows():
        md.append(f"| {r['what']} | {r['seconds']:.2f} | {fmt(r.get('cpu_seconds'), '.2f')} | "
                  f"{fmt(r['steps'], '.0f')} | "
                  f"{fmt(r['best_step'], '.0f')} | {fmt(r['ms_per_step_per_model'], '.2f')} | "
                  f"{fmt(r.get('gflops', np.nan), '.1f')} |")
    flops, package_flops = flops
    md += ["", f"One training step: {flops / 1e6:.1f} MFLOP in matrix products (forward and "
               f"backward) in the plain loop, {package_flops / 1e6:.1f} MFLOP in the package's "
               f"(each head on its own arm's rows). Settings: {'tiny network, ' if tiny else ''}"
               f"n_iter={params.get('n_iter', cfg.n_iter)}, batch_size={cfg.batch_size}, "
               f"ipm={cfg.ipm}, alpha={cfg.alpha}, eval_every={cfg.eval_every}, "
               f"patience={cfg.patience}, relative_patience={cfg.relative_patience}.",
           "", f"Machine: {machine_line(params['device'])}. Absolute times differ between "
               "machines: compare versions on one machine, with the plain loop as the yardstick."]
    return "\n".join(md)


def machine_line(device: str = "cpu") -> str:
    """The processor (or GPU), its cores and the torch version, for the benchmark's header."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    line = f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}"
    if str(device).startswith("cuda") and torch.cuda.is_available():
        line += f", {torch.cuda.get_device_name()}"
    return line
