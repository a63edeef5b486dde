"""Training one CFR across processes or machines with ``torch.distributed``.

Launch one process per worker with ``torchrun`` (or any launcher that initialises a process group)
and call :func:`fit_distributed` in every worker with that worker's shard of the training data and
the same held-out validation data::

    # train.py -- run with: torchrun --nproc_per_node=2 train.py   (one machine, 2 CPU workers)
    # or, on a cluster:     torchrun --nnodes=4 --nproc_per_node=8 --rdzv_backend=c10d \\
    #                                --rdzv_endpoint=HOST:29400 train.py
    import torch.distributed as dist
    from dowhy_cfr import CFR
    from dowhy_cfr.distributed import fit_distributed

    dist.init_process_group("gloo")          # "nccl" on GPUs (with device="cuda")
    Y, T, X = load_my_shard(dist.get_rank(), dist.get_world_size())
    est = fit_distributed(CFR(n_iter=3000), Y, T, X, validation=(Y_val, T_val, X_val))
    if dist.get_rank() == 0:
        est.save("model.cfr")

How it works:

* The standardisation statistics and the arms' shares are computed over *all* shards
  (``all_reduce`` of counts, sums and sums of squares), so every worker preprocesses identically.
* Every worker starts from the same weights (same seed) and wraps the network in
  :class:`~torch.nn.parallel.DistributedDataParallel`, which averages the gradients after each
  backward pass; each worker draws mini-batches of ``batch_size`` from its own shard.
* The imbalance term: ``ipm_batch="global"`` (default) all-gathers the representations of every
  worker's batch (differentiably, ``torch.distributed.nn.all_gather``) so the IPM is computed on
  the union -- the same estimator as single-process training with a batch of
  ``world_size * batch_size``; ``"local"`` computes it on each worker's own batch and averages the
  gradients, which is cheaper but a noisier, biased estimate for small batches (the Wasserstein
  and unbiased-MMD estimates are not linear in the batch). ``docs/scaling.md`` compares both.
* Early stopping: every worker evaluates the same validation data with the same weights, so all
  take the same decisions without extra communication.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from . import _validation as V
from . import fitting
from .covariates import Columns
from .streaming import batch_stream, encoding_of_labels, preprocessing, train_on_stream

__all__ = ["fit_distributed"]


def _gather_batches(phi: torch.Tensor, t: torch.Tensor):
    """Differentiable all-gather of every worker's batch representations (K=1 stacks)."""
    import warnings

    from torch.distributed.nn.functional import all_gather

    with warnings.catch_warnings():
        # deprecated in favour of private functional collectives; the public op is kept for
        # compatibility with torch 2.1+ (its backward sums the gradients of all workers)
        warnings.simplefilter("ignore", FutureWarning)
        phis = all_gather(phi[0].contiguous())
    ts = [torch.empty_like(t[0]) for _ in range(dist.get_world_size())]
    dist.all_gather(ts, t[0].contiguous())
    return torch.cat(phis, dim=0).unsqueeze(0), torch.cat(ts, dim=0).unsqueeze(0)


def fit_distributed(est, Y, T, X, *, validation, ipm_batch: str = "global"):
    """Fit ``est`` (a CFR/TARNet) on data sharded over the workers of a process group.

    Parameters
    ----------
    est : CFR or TARNet
        Unfitted estimator (``n_ensemble`` must be 1); fitted in place and returned.
    Y, T, X : array_like
        This worker's shard of the training data (binary or categorical T, as in ``fit``).
    validation : tuple ``(Y_val, T_val, X_val)``
        Held-out data for early stopping, identical on every worker.
    ipm_batch : {"global", "local"}
        Compute the imbalance on the union of the workers' batches, or on each worker's own.

    Returns
    -------
    est, fitted identically on every worker.
    """
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("fit_distributed needs an initialised process group: launch with "
                           "torchrun and call torch.distributed.init_process_group first")
    if ipm_batch not in ("global", "local"):
        raise ValueError(f"ipm_batch={ipm_batch!r} is invalid: choose 'global' or 'local'")
    settings = fitting.FitSettings.of(est)
    if settings.n_ensemble != 1:
        raise ValueError(f"fit_distributed trains one network (n_ensemble="
                         f"{settings.n_ensemble} given): pass CFR(n_ensemble=1, ...)")
    y = V.as_1d("Y", Y).astype("float64")
    V.check_finite("Y", y)
    t = V.as_1d("T", T)
    x = V.as_2d_float("X", X)
    V.check_same_length(Y=y, T=t, X=x)
    d = x.shape[1]

    # global statistics: treatment labels, covariate/outcome moments, arm counts
    labels = [None] * dist.get_world_size()
    dist.all_gather_object(labels, sorted(set(np.unique(t).tolist())))
    dims = [None] * dist.get_world_size()
    dist.all_gather_object(dims, d)
    if len(set(dims)) != 1:
        raise ValueError(f"workers have different numbers of covariates: {dims}")
    encoding = encoding_of_labels(est, sorted(set().union(*labels)))
    stats = torch.tensor(np.concatenate([
        [len(y), y.sum(), (y**2).sum(), float(np.isin(y, (0.0, 1.0)).all())],
        x.sum(0), (x**2).sum(0), np.bincount(encoding.arms(t), minlength=encoding.n_arms),
    ]), dtype=torch.float64)
    binary_flag = stats[3].clone()
    dist.all_reduce(stats)
    dist.all_reduce(binary_flag, op=dist.ReduceOp.MIN)
    n = float(stats[0])
    x_mean = (stats[4:4 + d] / n).numpy()
    x_var = np.maximum((stats[4 + d:4 + 2 * d] / n).numpy() - x_mean**2, 0.0)
    y_mean = float(stats[1] / n)
    y_var = max(float(stats[2] / n) - y_mean**2, 0.0)
    counts = stats[4 + 2 * d:].numpy()
    if (counts == 0).any():
        raise ValueError("some treatment arm has no training unit on any worker")
    pre, seeds = preprocessing(settings, binary=bool(binary_flag > 0.5), x_mean=x_mean,
                               x_std=np.sqrt(x_var), y_mean=[y_mean],
                               y_std=[float(np.sqrt(y_var))])
    device = settings.device
    rank = dist.get_rank()
    batch = settings.config(pre.loss).resolve(None).batch_size
    stream = batch_stream(encoding, pre, [(y, t, x)], batch,
                          np.random.default_rng([seeds[0], rank]))
    y_val = V.as_1d("Y_val", validation[0]).astype("float64")
    x_val = V.as_2d_float("X_val", validation[2])
    t_val = V.as_1d("T_val", validation[1])
    device_ids = [device.index] if device.type == "cuda" else None

    def wrap(net):
        return torch.nn.parallel.DistributedDataParallel(net, device_ids=device_ids)

    hooks = {"model_wrapper": wrap,
             "gather_ipm": _gather_batches if ipm_batch == "global" else None}
    source = fitting.StreamSource(lambda: next(stream), (counts / counts.sum())[None],
                                  (y_val, encoding.arms(t_val), x_val), pre, encoding, hooks)
    fitted = train_on_stream(settings, source, seeds,
                             Columns(d, 0, V.column_names(validation[2])),
                             progress=fitting.show_progress(est.verbose) and rank == 0)
    return est._set_fitted(fitted, *validation)
