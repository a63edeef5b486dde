"""The CFR objective, Eq. 3 of Shalit et al. (2017), for ``K`` stacked models::

    1/n sum_i w_i * L(h_{t_i}(Phi(x_i)), y_i)          # weighted factual loss
    + alpha * IPM({Phi(x_i)}_{t_i=0}, {Phi(x_i)}_{t_i=1})   # imbalance
    + lambda * R(h)                                       # L2 on the heads
    with  w_i = t_i / (2u) + (1 - t_i) / (2(1 - u)),  u = share treated   (Algorithm 1, line 2)

Training (one mini-batch) and validation (the validation split) evaluate the same function,
:func:`eq3`, on the terms computed here.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch.nn import functional as F

from .ipm import imbalance, imbalance_blocks

__all__ = ["Eq3Terms", "arm_imbalance", "arm_imbalance_blocks", "eq3", "factual",
           "factual_loss", "ipm_subset", "sample_weights", "weighted_loss_sum"]


class Eq3Terms(NamedTuple):
    """Per-model terms of Eq. 3, each of shape (K,)."""

    risk: torch.Tensor  # weighted factual loss
    imbalance: torch.Tensor  # IPM between the arms' representations
    objective: torch.Tensor  # risk + alpha * imbalance + lambda * R(h)


def sample_weights(t: torch.Tensor, shares: torch.Tensor) -> torch.Tensor:
    """Algorithm 1, line 2, for any number of arms: ``w_i = 1 / (n_arms * share of arm t_i)``.

    For two arms this is ``t/(2u) + (1-t)/(2(1-u))`` with ``u`` the treated share; written as a
    product (not ``2*1-u``) it cannot suffer the reference code's old precedence bug.
    ``t``: (K, B) arm indices; ``shares``: (K, n_arms) arm shares in the training split.
    """
    n_arms = shares.shape[1]
    return 1.0 / (n_arms * shares.gather(1, t))


def factual(outputs: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """The observed arm's output ``h_{t_i}(Phi(x_i))``: (K, n_arms, B), (K, B) -> (K, B).

    Only this entry enters the factual loss, so each unit's gradient reaches only the head of its
    own arm.
    """
    return outputs.gather(1, t.unsqueeze(1)).squeeze(1)


def factual_loss(pred: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    """``L(h_t(Phi(x)), y)`` per unit: squared error (``"mse"``) or log-loss on logits."""
    if loss == "mse":
        return (pred - y).pow(2)
    return F.binary_cross_entropy_with_logits(pred, y, reduction="none")


def weighted_loss_sum(outputs, t, y, shares, loss: str) -> torch.Tensor:
    """``sum_i w_i L(h_{t_i}(Phi(x_i)), y_i)`` per model, shape (K,)."""
    return (sample_weights(t, shares) * factual_loss(factual(outputs, t), y, loss)).sum(1)


def arm_imbalance(phi: torch.Tensor, t: torch.Tensor, n_arms: int, ipm_kw: dict) -> torch.Tensor:
    """The imbalance term for ``n_arms`` arms: the mean over the treated arms a = 1..n_arms-1 of
    ``IPM(Phi | t=a, Phi | t=0)``.

    For a binary treatment this is exactly the paper's ``IPM(Phi|t=0, Phi|t=1)``. With more arms,
    each effect ``tau_a = mu_a - mu_0`` is bounded (Shalit et al. 2017, Thm. 1 applied to the pair
    (a, 0)) by the factual errors plus the IPM between arm a and control, so we penalise the
    average of these pairwise terms. Every arm must be present in each model's batch.
    """
    if n_arms == 2:
        return imbalance(phi, t == 1, None, check=False, **ipm_kw)
    total = 0.0
    for a in range(1, n_arms):
        total = total + imbalance(phi, t == a, (t == a) | (t == 0), check=False, **ipm_kw)
    return total / (n_arms - 1)


def ipm_subset(blocks, max_units: int | None):
    """The rows of a grouped training batch that its IPM uses: ``blocks[g]`` (K, n_g, r) holds
    group g's rows (an arm, or a dose stratum), in the random order the batches draw them
    (:class:`~.batches.InMemoryBatches`), so its first rows are a random subset. With more than
    ``max_units`` rows in all, group g keeps its first ``ceil(n_g * max_units / n)`` (at least
    one): the groups stay in proportion, and equal groups stay equal. ``max_units=None`` or a
    smaller batch: the blocks as they are."""
    total = sum(b.shape[1] for b in blocks)
    if max_units is None or total <= max_units:
        return blocks
    return [b[:, : max(1, math.ceil(b.shape[1] * max_units / total))] for b in blocks]


def arm_imbalance_blocks(blocks, ipm_kw: dict) -> torch.Tensor:
    """:func:`arm_imbalance` of an arm-blocked batch: ``blocks[a]`` holds the representations of
    arm a's rows, (K, n_a, r). The mean over a = 1..n_arms-1 of ``IPM(Phi | t=a, Phi | t=0)``."""
    total = 0.0
    for a in range(1, len(blocks)):
        total = total + imbalance_blocks(blocks[a], blocks[0], **ipm_kw)
    return total / (len(blocks) - 1)


def eq3(risk: torch.Tensor, imb: torch.Tensor, penalty: torch.Tensor | None, alpha: torch.Tensor,
        weight_decay: torch.Tensor) -> Eq3Terms:
    """Eq. 3: ``risk + alpha * IPM + lambda * R(h)``, per model (all arguments (K,)).
    ``penalty=None`` leaves ``lambda * R(h)`` out of the value: the training step adds its
    gradient ``lambda * W`` directly (:meth:`dowhy_cfr.core.network.CFRNet.add_penalty_gradient`)."""
    objective = risk + alpha * imb
    return Eq3Terms(risk, imb, objective if penalty is None else objective + weight_decay * penalty)
