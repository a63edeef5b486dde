"""Model selection inside one stacked fit: per-model best checkpoints, the early-stopping rule,
and the compaction of the stack when models stop.

* :class:`Checkpoints` -- each model's best parameters so far, for all ``K`` models, and the rule
  that decides when a model has waited long enough for a better one.
* :func:`compact_stack` -- drop stopped models from the network and the optimiser, so that a stack
  costs what its live models cost.
"""

from __future__ import annotations

import numpy as np
import torch

from .network import CFRNet
from .optim import FlatAdam

__all__ = ["Checkpoints", "adam", "compact_stack"]


class Checkpoints:
    """Best validation objective, its step and its parameters, per model (all ``K``).

    The stopping rule: model k stops once it has gone ``max(min_wait, relative_patience *
    since[k])`` steps since its last *significant* best, with ``min_wait`` from
    :meth:`CFRConfig.min_wait <dowhy_cfr.core.config.CFRConfig.min_wait>` (``patience *
    eval_every`` steps, and at least ``MIN_WAIT_EPOCHS`` passes over the training data). The
    wait grows with the training so far: a model whose best came at step 100 is confirmed by step
    200, one whose best came at step 1000 gets 1000 more steps. ``min_wait=None`` never stops
    (the best of all evaluations is kept, as in the reference code). A best is significant when
    it is below ``(1 - tol)`` times the objective of the model's previous significant best
    (scikit-learn's ``tol``): every best is still kept as the checkpoint, but a model whose
    objective creeps down by less than ``tol`` over a whole wait stops (``tol=0``: every best
    resets the wait).

    The members of one ensemble (``ensembles``: an ensemble label per model; None: every model
    its own) stop together once ``quorum(size)`` of them have stopped by that rule (members
    that diverged do not count): the others stop at once, each keeping its best checkpoint so
    far. Their effects are averaged, so a late member's last improvements matter little, while
    the longest member sets the stack's time (:attr:`CFRConfig.stop_quorum
    <dowhy_cfr.core.config.CFRConfig.stop_quorum>`).

    Models flagged in ``on_others`` (K-fold bagged members) judge every evaluation by the
    (geometric) mean objective of the *other* live members of their ensemble, each on its own
    validation units,
    never by their own: member j's own validation units are the fold it predicts out of fold for
    the doubly robust stage, so its checkpoint and its stop may not depend on them, while the
    other members' folds are units it trains on, scored by members that did not. The mean over
    K - 1 folds is also a steadier criterion than one fold. Such members stop only with their
    ensemble's quorum (none leaves the stack before, so every mean has the same members).
    """

    def __init__(self, net: CFRNet, *, min_wait: int | None, relative_patience: float,
                 tol: float = 0.0, ensembles=None, quorum=None, on_others=None):
        k = net.n_models
        self.store = [p.detach().clone() for p in net.parameters()]  # initial weights until a best
        self.objective = np.full(k, np.inf)
        self.step = np.zeros(k, dtype=int)
        self.anchor = np.full(k, np.inf)  # the objective at the last significant best
        self.since = np.zeros(k, dtype=int)  # its step: the wait counts from it
        self.min_wait = min_wait
        self.relative_patience = relative_patience
        self.tol = float(tol)
        labels = np.arange(k) if ensembles is None else np.asarray(ensembles).reshape(-1)
        if len(labels) != k:
            raise ValueError(f"ensembles has {len(labels)} labels for {k} models")
        _, self.ensemble = np.unique(labels, return_inverse=True)  # 0..E-1 per model
        sizes = np.bincount(self.ensemble)
        self.quorum = sizes if quorum is None else np.array([quorum(int(s)) for s in sizes])
        self.finished = np.zeros(k, dtype=bool)  # stopped by the waiting rule
        self.on_others = (np.zeros(k, dtype=bool) if on_others is None
                          else np.asarray(on_others, dtype=bool).reshape(-1))
        if len(self.on_others) != k:
            raise ValueError(f"on_others has {len(self.on_others)} flags for {k} models")

    @property
    def has_best(self) -> np.ndarray:
        return np.isfinite(self.objective)

    @torch.no_grad()
    def update(self, net: CFRNet, live: np.ndarray, objective: np.ndarray, step: int) -> None:
        """Keep the current parameters of the live models whose objective improved.
        ``live[j]``: the model index of stack position j; ``objective``: (len(live),)."""
        objective = self.criterion(live, objective)
        better = np.isfinite(objective) & (objective < self.objective[live])
        if not better.any():
            return
        models = torch.as_tensor(live[better])
        positions = torch.as_tensor(np.flatnonzero(better))
        for s, p in zip(self.store, net.parameters()):
            s[models.to(s.device)] = p.detach()[positions.to(p.device)]
        self.objective[live[better]] = objective[better]
        self.step[live[better]] = step
        significant = better & (objective < (1.0 - self.tol) * self.anchor[live])
        self.anchor[live[significant]] = objective[significant]
        self.since[live[significant]] = step

    def criterion(self, live: np.ndarray, objective: np.ndarray) -> np.ndarray:
        """What each live model is judged by: its own ``objective``, or (``on_others``) the
        geometric mean of the finite objectives of the other live members of its ensemble (its
        own where it has none). Geometric: each fold's curve counts by its relative change, so
        one fold whose loss is ten times the others' (an extreme outcome in it) does not decide
        every other member's checkpoint."""
        pooled = self.on_others[live]
        if not pooled.any():
            return objective
        ens = self.ensemble[live]
        ok = np.isfinite(objective) & (objective > 0)
        log = np.where(ok, np.log(np.where(ok, objective, 1.0)), 0.0)
        size = len(self.quorum)
        total = np.bincount(ens, weights=log, minlength=size)[ens]
        count = np.bincount(ens, weights=ok.astype(float), minlength=size)[ens]
        others = np.exp((total - log) / np.maximum(count - ok, 1.0))
        return np.where(pooled & (count - ok >= 1) & ok, others, objective)

    def waited_enough(self, live: np.ndarray, step: int) -> np.ndarray:
        """Bool per live model: it has a best and has waited the patience since, or its ensemble
        has reached its quorum of stopped members."""
        if self.min_wait is None:
            return np.zeros(len(live), dtype=bool)
        wait = np.maximum(self.min_wait, self.relative_patience * self.since[live])
        done = self.has_best[live] & (step - self.since[live] >= wait)
        self.finished[live[done]] = True
        counts = np.bincount(self.ensemble, weights=self.finished, minlength=len(self.quorum))
        quorum = self.has_best[live] & (counts >= self.quorum)[self.ensemble[live]]
        return np.where(self.on_others[live], quorum, done | quorum)

    @torch.no_grad()
    def restore(self, net: CFRNet) -> None:
        """Load every model's best checkpoint; the network holds all ``K`` models again."""
        for s, p in zip(self.store, net.parameters()):
            p.data = s.clone()
        net.n_models = int(self.store[0].shape[0])


def adam(params, lr: float, *, flat: bool = True):
    """The stack's Adam: :class:`~.optim.FlatAdam` (every parameter in one buffer, a step in
    seven tensor operations), or with ``flat=False`` (a wrapped model: distributed training
    manages the gradients itself) ``torch.optim.Adam`` with the fused kernel where torch has one
    for the device (CPU and CUDA since torch 2.4), else the ``foreach`` implementation. All
    compute the same update, element by element, so stacked models never interact.

    The fused CPU kernel rounds the elements of a tensor's scalar tail (its last ``numel % 16``)
    differently from the vectorised bulk, so a model's update in a stack may differ from its
    update alone in the last bit; :class:`~.optim.FlatAdam`'s element-wise operations may do the
    same where a model's elements fall in a vectorised block: stacked and single fits are equal
    up to float rounding (:mod:`.training`), not bit for bit."""
    params = list(params)
    if flat:
        return FlatAdam(params, lr)
    try:
        return torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(params, lr=lr, foreach=True)


def compact_stack(net: CFRNet, opt: FlatAdam, keep: torch.Tensor) -> FlatAdam:
    """Keep only the models ``keep`` (bool, current stack positions) in ``net``; returns an Adam
    optimiser over the new parameters carrying each kept model's moments and step unchanged.
    (New Parameter objects: autograd caches a leaf's shape, so resizing in place is unsafe.)
    Only a stack's :class:`~.optim.FlatAdam` compacts: a wrapped model (distributed training,
    ``torch.optim.Adam``) trains alone, so it never loses models."""
    if not isinstance(opt, FlatAdam):
        raise TypeError(f"compact_stack needs the stack's FlatAdam, got {type(opt).__name__}")
    with torch.no_grad():
        for plist in net.parameter_lists():
            for i in range(len(plist)):
                plist[i] = torch.nn.Parameter(plist[i].detach()[keep].contiguous())
    net.n_models = int(keep.sum())
    return opt.kept(net.parameters(), keep)
