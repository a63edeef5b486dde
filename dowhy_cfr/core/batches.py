"""Sources of training mini-batches for ``K`` stacked models (Algorithm 1's sampling step).

Every source has the same small interface: ``next()`` returns one batch ``(x, t, y)`` for each
model still training, shapes (K, B, d), (K, B), (K, B), with every treatment arm present; and
``keep(mask)`` continues with the models ``mask`` only (after early stops), leaving their streams
unchanged.

* :class:`InMemoryBatches` -- stratified: each model's batches hold a fixed number of units of
  each arm, arm by arm; each model walks through random permutations of its own units of each
  arm (sampling without replacement within an epoch), from its own generator.
* :class:`StreamBatches` -- one batch from a user callable (data larger than memory, or one
  worker's shard under ``torch.distributed``), shared by all models.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

__all__ = ["InMemoryBatches", "StreamBatches", "arm_counts"]

# batches drawn per refill of a model's position buffer: one host read per refill, not per step
_BATCHES_PER_REFILL = 64


class InMemoryBatches:
    """Stratified mini-batches of in-memory training data, one independent stream per model.

    Model k's batches hold a fixed number ``counts[k, a]`` of units of each arm a (the arm's
    share of the model's training units times the batch size, rounded so that the counts sum to
    the batch size, at least one per arm), laid out arm by arm: arm 0's rows first. Within an arm
    the model walks through random permutations of its own units of that arm (sampling without
    replacement within an epoch of the arm), from its own generator. Fixed counts give fixed
    shapes, so each head can run on its own arm's rows only and the IPM on the treated x control
    block (:meth:`dowhy_cfr.core.training.StackedRun.forward`).

    Parameters
    ----------
    x, t, y : tensors (n, d), (n,), (n,) shared by all models, or (K, n, ...) per model
    train_idx : long tensor (K, n_train)
        Each model's training rows (may repeat: bootstrap). Every arm must be present.
    batch_size : int
        At least ``n_arms``.
    seeds : sequence of int, length K
        Model k's batch order depends only on ``seeds[k]``.
    n_arms : int
    per_model_data : bool
        Whether ``x, t, y`` have a leading model axis.
    count_shares : array (K, n_arms), optional
        The arm shares the counts are rounded from (default: each model's training shares;
        :func:`arm_counts`).
    """

    def __init__(self, x, t, y, train_idx, batch_size: int, seeds: Sequence[int], n_arms: int,
                 per_model_data: bool = False, count_shares: np.ndarray | None = None):
        self.x, self.t, self.y, self.train_idx = x, t, y, train_idx
        k = train_idx.shape[0]
        self.model_rows = torch.arange(k, device=x.device).unsqueeze(1) if per_model_data else None
        self.batch_size = batch_size
        train_arms = self._take(t, train_idx).cpu()
        if not all(bool((train_arms == a).any(1).all()) for a in range(n_arms)):
            raise ValueError("every model's training rows must contain every treatment arm")
        self.counts = arm_counts(train_arms, batch_size, n_arms, count_shares)
        self.arm_rows = [[torch.nonzero(row == a).flatten() for a in range(n_arms)]
                         for row in train_arms]  # each model's positions of each arm
        self.gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
        self.leftover = [[torch.empty(0, dtype=torch.long)] * n_arms for _ in seeds]
        self.buffer = torch.empty(k, 0, batch_size, dtype=torch.long)
        self.cursor = 0

    def _take(self, v, idx):
        return v[idx] if self.model_rows is None else v[self.model_rows, idx]

    def keep(self, mask: torch.Tensor) -> None:
        idx = torch.nonzero(mask.cpu()).flatten().tolist()
        for name in ("gens", "leftover", "arm_rows"):
            setattr(self, name, [getattr(self, name)[i] for i in idx])
        self.buffer, self.counts = self.buffer[idx], self.counts[idx]
        self.train_idx = self.train_idx[mask.to(self.train_idx.device)]
        if self.model_rows is not None:
            self.model_rows = self.model_rows[mask.to(self.model_rows.device)]

    def next(self):
        if self.cursor == self.buffer.shape[1]:
            self._refill()
        pos = self.buffer[:, self.cursor].to(self.train_idx.device)
        self.cursor += 1
        idx = self.train_idx.gather(1, pos)
        return self._take(self.x, idx), self._take(self.t, idx), self._take(self.y, idx)

    def _refill(self) -> None:
        """Draw the next ``_BATCHES_PER_REFILL`` batches of every model, arm by arm."""
        batches = []
        for k, gen in enumerate(self.gens):
            blocks = []
            for a, rows in enumerate(self.arm_rows[k]):
                need = _BATCHES_PER_REFILL * int(self.counts[k, a])
                parts, have = [self.leftover[k][a]], len(self.leftover[k][a])
                while have < need:
                    parts.append(rows[torch.randperm(len(rows), generator=gen)])
                    have += len(rows)
                stream = torch.cat(parts)
                self.leftover[k][a] = stream[need:]
                blocks.append(stream[:need].view(_BATCHES_PER_REFILL, -1))
            batches.append(torch.cat(blocks, dim=1))
        self.buffer = torch.stack(batches)
        self.cursor = 0


def arm_counts(arms: torch.Tensor, batch_size: int, n_arms: int,
               shares: np.ndarray | None = None) -> np.ndarray:
    """Units of each arm in a stratified batch, per model: ``batch_size`` times the arm's share
    of the model's units, rounded by largest remainder, at least 1 per arm. ``arms`` (K, n):
    each model's arm indices; returns (K, n_arms) ints summing to ``batch_size`` per row.

    ``shares`` (K, n_arms), optional: the shares to round instead of the models' own. The folds
    of one data set, whose training shares differ by a unit here and there, then share one
    count and one shape (:mod:`.groups`: one group instead of two or three, 16 % of a fit at
    n = 1,500); the batch weights follow the counts either way
    (:meth:`.training.StackedRun._batch_shares`)."""
    if batch_size < n_arms:
        raise ValueError(f"batch_size={batch_size} is too small: a batch needs at least one unit "
                         f"of each of the {n_arms} arms")
    if shares is None:
        totals = np.stack([np.bincount(row, minlength=n_arms)[:n_arms] for row in arms.numpy()])
        shares = totals / arms.shape[1]
    shares = np.asarray(shares, dtype=float).reshape(-1, n_arms)
    return np.stack([_largest_remainder(batch_size * row, batch_size) for row in shares])


def _largest_remainder(raw: np.ndarray, batch_size: int) -> np.ndarray:
    """Integer counts, at least 1 each, summing to ``batch_size``, nearest to ``raw``."""
    c = np.maximum(np.floor(raw).astype(np.int64), 1)
    while c.sum() < batch_size:
        c[np.argmax(raw - c)] += 1
    while c.sum() > batch_size:
        c[np.argmax(c)] -= 1
    return c


class StreamBatches:
    """Batches from ``batch_source() -> (x (B, d), t (B,), y (B,))``, shared by all models."""

    counts = None  # arms are not stratified: a batch's arm counts vary

    def __init__(self, batch_source: Callable[[], tuple], k: int, dtype, device):
        self.source, self.k, self.dtype, self.device = batch_source, k, dtype, device

    def keep(self, mask: torch.Tensor) -> None:
        self.k = int(mask.sum())

    def next(self):
        xb, tb, yb = (v.to(self.device) for v in self.source())
        return (xb.to(self.dtype).unsqueeze(0).expand(self.k, -1, -1),
                tb.long().unsqueeze(0).expand(self.k, -1),
                yb.to(self.dtype).unsqueeze(0).expand(self.k, -1))
