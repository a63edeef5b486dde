"""Sources of training mini-batches for ``K`` stacked models (Algorithm 1's sampling step).

Every source has the same small interface: ``next()`` returns one batch ``(x, t, y)`` for each
model still training, shapes (K, B, d), (K, B), (K, B), with every treatment arm present; and
``keep(mask)`` continues with the models ``mask`` only (after early stops), leaving their streams
unchanged.

* :class:`InMemoryBatches` -- each model walks through random permutations of its own training
  units (sampling without replacement within an epoch), from its own generator.
* :class:`StreamBatches` -- one batch from a user callable (data larger than memory, or one
  worker's shard under ``torch.distributed``), shared by all models.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

__all__ = ["InMemoryBatches", "StreamBatches"]

# batches drawn per refill of a model's position buffer: one host read per refill, not per step
_BATCHES_PER_REFILL = 64


class InMemoryBatches:
    """Mini-batches of in-memory training data, one independent stream per model.

    Parameters
    ----------
    x, t, y : tensors (n, d), (n,), (n,) shared by all models, or (K, n, ...) per model
    train_idx : long tensor (K, n_train)
        Each model's training rows (may repeat: bootstrap).
    batch_size : int
    seeds : sequence of int, length K
        Model k's batch order depends only on ``seeds[k]``.
    n_arms : int
    per_model_data : bool
        Whether ``x, t, y`` have a leading model axis.

    A batch that misses an arm -- possible with very unbalanced data -- gets its last unit(s)
    replaced by random units of the missing arm(s).
    """

    def __init__(self, x, t, y, train_idx, batch_size: int, seeds: Sequence[int], n_arms: int,
                 per_model_data: bool = False):
        self.x, self.t, self.y, self.train_idx = x, t, y, train_idx
        k = train_idx.shape[0]
        self.model_rows = torch.arange(k, device=x.device).unsqueeze(1) if per_model_data else None
        self.batch_size = batch_size
        self.n_arms = n_arms
        self.gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
        self.train_arms = self._take(t, train_idx).cpu()
        self.leftover = [torch.empty(0, dtype=torch.long) for _ in seeds]
        self.buffer = torch.empty(k, 0, batch_size, dtype=torch.long)
        self.cursor = 0

    def _take(self, v, idx):
        return v[idx] if self.model_rows is None else v[self.model_rows, idx]

    def keep(self, mask: torch.Tensor) -> None:
        idx = torch.nonzero(mask.cpu()).flatten().tolist()
        self.gens = [self.gens[i] for i in idx]
        self.leftover = [self.leftover[i] for i in idx]
        self.buffer, self.train_arms = self.buffer[idx], self.train_arms[idx]
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
        """Draw the next ``_BATCHES_PER_REFILL`` batches of every model."""
        need = _BATCHES_PER_REFILL * self.batch_size
        n = self.train_idx.shape[1]
        streams = []
        for k, gen in enumerate(self.gens):
            parts, have = [self.leftover[k]], len(self.leftover[k])
            while have < need:
                parts.append(torch.randperm(n, generator=gen))
                have += n
            stream = torch.cat(parts)
            self.leftover[k] = stream[need:]
            streams.append(stream[:need])
        self.buffer = torch.stack(streams).view(len(self.gens), _BATCHES_PER_REFILL,
                                                self.batch_size)
        self.cursor = 0
        self._complete_arms()

    def _complete_arms(self) -> None:
        """Give every batch every arm (rare: only very unbalanced data misses one)."""
        arms = self.train_arms.gather(1, self.buffer.flatten(1)).view(self.buffer.shape)
        present = torch.stack([(arms == a).any(2) for a in range(self.n_arms)], dim=2)
        for k, b in torch.nonzero(~present.all(2)).tolist():
            slot = self.batch_size - 1
            for a in torch.nonzero(~present[k, b]).flatten().tolist():
                cand = torch.nonzero(self.train_arms[k] == a).flatten()
                self.buffer[k, b, slot] = cand[int(torch.randint(len(cand), (1,),
                                                                 generator=self.gens[k]))]
                slot -= 1


class StreamBatches:
    """Batches from ``batch_source() -> (x (B, d), t (B,), y (B,))``, shared by all models."""

    def __init__(self, batch_source: Callable[[], tuple], k: int, dtype, device):
        self.source, self.k, self.dtype, self.device = batch_source, k, dtype, device

    def keep(self, mask: torch.Tensor) -> None:
        self.k = int(mask.sum())

    def next(self):
        xb, tb, yb = (v.to(self.device) for v in self.source())
        return (xb.to(self.dtype).unsqueeze(0).expand(self.k, -1, -1),
                tb.long().unsqueeze(0).expand(self.k, -1),
                yb.to(self.dtype).unsqueeze(0).expand(self.k, -1))
