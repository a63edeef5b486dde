"""The models of a stack grouped by their arm counts.

Models whose rows hold the same number of units of each arm share the shapes of the per-arm
heads and of the IPM's (treated x control) blocks, so each group runs as one stack. Training
groups its models by their batches' arm counts (:mod:`.training`); the Wasserstein distance
groups them by the sizes of the two groups it compares (:func:`.ipm.wasserstein`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

__all__ = ["ArmGroups", "arm_count_groups"]


@dataclass
class ArmGroups:
    """The models of a stack grouped by their rows' arm counts: models of a group share the
    shapes of the per-arm heads and of the IPM's blocks."""

    counts: list  # per group: the units of each arm
    models: list  # per group: the stack positions of its models (long tensor)
    sizes: list | None  # per group: its number of models, if the groups are consecutive ranges
    inverse: torch.Tensor | None  # else: the permutation from group order back to stack order

    def apply(self, phi: torch.Tensor, fn: Callable) -> torch.Tensor:
        """``fn(arm blocks of Phi, group index)`` for each group, concatenated in stack order.
        ``phi`` (K, B, ...) holds each model's rows arm by arm. Consecutive groups take views of
        ``phi`` and need no reordering; others take copies."""
        if self.sizes is not None:
            pieces = phi.split(self.sizes, 0) if len(self.sizes) > 1 else (phi,)
        else:
            pieces = [phi.index_select(0, models) for models in self.models]
        outs = [fn(piece.split(counts, 1), g)
                for g, (piece, counts) in enumerate(zip(pieces, self.counts))]
        if len(outs) == 1:
            return outs[0]
        out = torch.cat(outs, 0)
        return out if self.inverse is None else out.index_select(0, self.inverse)


def arm_count_groups(counts: np.ndarray, device) -> ArmGroups:
    """Group a stack's models by their rows' arm counts ``counts`` (K, n_arms), groups in the
    lexicographic order of their counts (:func:`.training.stack_order` sorts a stack that way)."""
    if (counts == counts[:1]).all():  # one group (always for K = 1): no np.unique (~0.1 ms)
        return ArmGroups(counts=[[int(c) for c in counts[0]]],
                         models=[torch.arange(len(counts), device=device)],
                         sizes=[len(counts)], inverse=None)
    uniq, inverse = np.unique(counts, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    models = [np.flatnonzero(inverse == g) for g in range(len(uniq))]
    consecutive = bool((np.diff(inverse) >= 0).all())
    order = np.concatenate(models)
    return ArmGroups(counts=[[int(c) for c in row] for row in uniq],
                     models=[torch.as_tensor(m, device=device) for m in models],
                     sizes=[len(m) for m in models] if consecutive else None,
                     inverse=None if consecutive else torch.as_tensor(np.argsort(order),
                                                                      device=device))
