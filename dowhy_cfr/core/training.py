"""Training of ``K`` stacked CFR networks: Algorithm 1 of Shalit et al. (2017) on the objective
of Eq. 3 (:mod:`.objective`), for all models at once.

The ``K`` objectives are summed before ``backward()``; since the models share no parameters and
Adam updates each parameter element on its own, model k follows the trajectory it would follow
alone with the same seed, up to float rounding: batched kernels (matrix products, ELU, the Adam
update on one buffer of :class:`.optim.FlatAdam`) may round a model's elements differently in a
stack than alone, and like any rounding this grows over training (at most 7e-5 in the outputs
after 200-300 steps in the tests). The parts beside the loop: batch sources (:mod:`.batches`),
the optimiser (:mod:`.optim`), checkpoints, early stopping and compaction (:mod:`.stopping`),
defaults (:mod:`.config`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from .batches import InMemoryBatches, StreamBatches, arm_counts
from .config import IPM_EVERY_FROM, LOSSES, CFRConfig
from .dose import DoseNet, bspline_basis, interval_imbalance, interval_imbalance_blocks
from .groups import arm_count_groups
from .network import CFRNet, predict
from .objective import (Eq3Terms, arm_imbalance, arm_imbalance_blocks, eq3, factual,
                        factual_loss, ipm_subset, sample_weights, weighted_loss_sum)
from .optim import FlatAdam
from .stopping import Checkpoints, adam, compact_stack

__all__ = [
    "CFRConfig",
    "LOSSES",
    "TrainResult",
    "TrainingDivergedError",
    "DoseRun",
    "RobinsonRun",
    "StackedRun",
    "algorithm1",
    "available_cores",
    "arm_imbalance",
    "derive_seeds",
    "factual",
    "predict",
    "sample_weights",
    "train_cfr",
]

_EVAL_CHUNK = 65536
#: Validation evaluations run in a second thread beside the training where a core is free (CPU,
#: one torch thread) and each member has at least this many validation units; results are the
#: same either way. The hand-over costs more than it saves on small splits: on the realistic
#: designs (seed 0, default fits, 2 cores) inline was faster by 3 % at n = 1,500 (300
#: validation units per member) and 2.5 % at n = 4,000 (800), beside faster by 2.6 % at
#: n = 10,000 (2,000; docs/parameters.md, item 8).
BESIDE_FROM_VAL_UNITS = 1024
_HISTORY_KEYS = ("train_loss", "train_imbalance", "val_loss", "val_imbalance", "val_objective")


class TrainingDivergedError(RuntimeError):
    """Every model's training objective became NaN or infinite before a checkpoint was kept."""


@dataclass
class TrainResult:
    """What ``train_cfr`` returns. Arrays have a leading model axis K."""

    net: CFRNet  # holds each model's best checkpoint (initial weights for a failed model)
    history: dict  # lists per evaluation: step, train_loss, train_imbalance, val_loss, ...
    best_step: np.ndarray  # (K,) step of the kept checkpoint
    best_val_objective: np.ndarray  # (K,)
    n_steps: int  # steps actually run (all models stopped early -> fewer than n_iter)
    stopped: np.ndarray  # (K,) whether the model stopped early
    diverged: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    failed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # no checkpoint


def derive_seeds(seeds: Sequence[int]) -> tuple[list[int], list[int]]:
    """Independent init and batch seeds from each model's seed."""
    states = [np.random.SeedSequence(int(s)).generate_state(2) for s in seeds]
    return [int(a) for a, _ in states], [int(b) for _, b in states]


def algorithm1(run: "StackedRun", config: CFRConfig) -> int:
    """Algorithm 1 of Shalit et al. (2017), for the live models of a stack (each model on its
    own batches; their objectives are summed, so each gets its own gradient)::

        u = share treated;  w_i = t_i / (2u) + (1 - t_i) / (2(1 - u))
        while not converged:
            sample a mini-batch {j}
            factual loss   1/m sum_j w_j L(h_{t_j}(Phi(x_j)), y_j)
            imbalance      IPM({Phi(x_j)}_{t_j=0}, {Phi(x_j)}_{t_j=1})
            objective      factual loss + alpha * imbalance + lambda * R(h)      (Eq. 3)
              (ours: with ipm_every = k > 1 the imbalance enters one step in k after the first
              IPM_EVERY_FROM steps, at k * alpha: the same gradient in expectation, a k-th of
              the Sinkhorn's cost)
            one Adam step on the weights of Phi and of the heads h_0, h_1
              (R's gradient, lambda * W, is added to the gradients after backward())
        converged: early stopping on the validation objective (``StackedRun.validate``)

    Returns the number of steps run.
    """
    step = 0
    for step in range(1, config.n_iter + 1):
        x, t, y = run.batches.next()  # a mini-batch with every arm present
        phi, pred = run.forward(x, t, y)  # Phi(x_i) and the factual output h_{t_i}(Phi(x_i))
        # Eq. 3: weighted factual loss, IPM (after the first IPM_EVERY_FROM steps every
        # ipm_every-th step, weighted ipm_every * alpha there: the same expected gradient), (L2)
        terms = run.batch_eq3(phi, pred, t, y)
        run.optimizer.zero_grad(set_to_none=True)
        terms.objective.sum().backward()  # each model's gradient of its own Eq. 3 ...
        run.add_l2_gradient()  # ... whose L2 term's gradient lambda * W is added directly
        run.optimizer.step()  # Adam
        run.after_step(step, terms)  # learning-rate decay, running means, weight average
        if step % config.eval_every == 0 or step == config.n_iter:
            if not run.validate(step):  # checkpoints, early stopping, compaction
                break
    return step


def train_cfr(x: torch.Tensor, t: torch.Tensor, y: torch.Tensor, *,
              train_idx: torch.Tensor | None, val_idx: torch.Tensor, config: CFRConfig,
              seeds: Sequence[int], n_arms: int = 2,
              batch_source: Callable[[], tuple] | None = None,
              arm_shares: torch.Tensor | None = None, model_wrapper: Callable | None = None,
              gather_ipm: Callable | None = None, alpha: Sequence[float] | None = None,
              weight_decay: Sequence[float] | None = None, per_model_data: bool = False,
              device: torch.device | str = "cpu", count_shares: np.ndarray | None = None,
              ensembles: Sequence[int] | None = None,
              stop_on_others: Sequence[bool] | None = None,
              progress: bool | Callable | None = False,
              dose: torch.Tensor | None = None,
              propensity: torch.Tensor | None = None,
              head_forms: Sequence[str] | None = None) -> TrainResult:
    """Train ``K = len(seeds)`` CFR networks in one stacked pass.

    Parameters
    ----------
    x : tensor (n, d) shared by all models, or (K, n, d) with ``per_model_data=True``
        Covariates, already standardised. Float.
    t : tensor (n,) or (K, n), long
        Arm of each unit (0 = control, 1 = treated, ...).
    y : tensor (n,) or (K, n), float
        Outcomes (standardised for ``"mse"``, 0/1 for ``"logloss"``).
    train_idx, val_idx : long tensors (K, n_train), (K, n_val)
        Per-model row indices of the training and validation units. Rows may repeat (bootstrap).
    config : CFRConfig
    seeds : sequence of int, length K
        Model k's initial weights and mini-batch order depend only on ``seeds[k]``.
    alpha, weight_decay : optional per-model overrides of ``config.alpha``/``config.weight_decay``
        (hyper-parameter candidates of the same architecture can share one stack).
    progress : bool or callable
        True shows a tqdm bar; a callable receives ``(step, info_dict)`` after each evaluation.
    batch_source : callable, optional
        Streaming mode for data that does not fit in memory: each call returns one training
        mini-batch ``(x (B, d), t (B,), y (B,))`` with every arm present, used by all models.
        ``x, t, y`` then hold only the validation data, ``train_idx`` is None, and
        ``arm_shares`` (K, n_arms) gives the arms' shares in the training data.
    model_wrapper : callable, optional
        Applied once to the network before training; the training forward pass goes through the
        result (e.g. ``DistributedDataParallel``, see :mod:`dowhy_cfr.distributed`). K must be 1.
    count_shares : array (K, n_arms), optional
        In memory, the arm shares each model's batch counts are rounded from (default: its
        training shares). Give the members of one data set its shares and they share one batch
        shape (:func:`.batches.arm_counts`).
    gather_ipm : callable, optional
        ``(phi, t) -> (phi, t)`` applied before the training IPM (e.g. a differentiable
        all-gather of the representations of every worker's batch).
    ensembles : sequence of int, length K, optional
        The ensemble each model belongs to (models whose effects are averaged): the members of
        one ensemble stop together once ``config.quorum_size(size)`` of them have stopped
        (:class:`.stopping.Checkpoints`). None: every model is its own.
    stop_on_others : sequence of bool, length K, optional
        Models that choose their checkpoint and stop by the mean validation objective of the
        *other* members of their ensemble, never by their own (K-fold bagged members, whose own
        validation units are the fold they predict out of fold; :class:`.stopping.Checkpoints`).
        None: every model by its own.
    dose : tensor (n,) or (K, n), optional
        A continuous treatment: each unit's dose scaled to [0, 1]. The models are then
        :class:`~.dose.DoseNet` models (one head whose weights vary with the dose) trained by
        :class:`DoseRun`; ``t`` holds the units' dose strata (:func:`.dose.dose_strata`), which
        take the place of arms in the stratified batches and the validation checks, and the
        imbalance term is the interval IPM (:func:`.dose.interval_imbalance`). In memory only.
    propensity : tensor (n, n_arms) or (K, n, n_arms), optional
        Each unit's arm propensities, for ``head_form="robinson"`` only (:class:`RobinsonRun`).
    head_forms : sequence of {"separate", "robinson"}, length K, optional
        Per-model overrides of ``config.head_form`` (``head_form="auto"``'s candidates, in
        one :class:`RobinsonRun`); ``propensity`` is needed where any is "robinson".

    A model whose objective becomes non-finite stops, keeps its best checkpoint and is reported
    in ``diverged`` (``failed`` if it had none yet); the other models train on as if it had never
    been in the stack (up to float rounding). Only if every model fails is
    ``TrainingDivergedError`` raised.
    """
    config, y, run_class, robinson = _run_kind(config, y, train_idx, len(seeds), n_arms,
                                               batch_source, dose, propensity, head_forms)
    order = None
    if batch_source is None and len(seeds) > 1:  # equal arm counts next to each other
        order = stack_order(t, _check_rows(train_idx, len(seeds), "train_idx"),
                            config.batch_size, n_arms, per_model_data, count_shares)
        _check_rows(val_idx, len(seeds), "val_idx")
    if order is not None:
        (x, t, y, train_idx, val_idx, seeds, alpha, weight_decay, count_shares, ensembles,
         stop_on_others, robinson) = _reordered(order, per_model_data, x, t, y, train_idx, val_idx,
                                                seeds, alpha, weight_decay, count_shares,
                                                ensembles, stop_on_others, robinson)
    run = run_class(x, t, y, train_idx=train_idx, val_idx=val_idx, config=config, seeds=seeds,
                     n_arms=n_arms, batch_source=batch_source, arm_shares=arm_shares,
                     model_wrapper=model_wrapper, gather_ipm=gather_ipm, alpha=alpha,
                     weight_decay=weight_decay, per_model_data=per_model_data, device=device,
                     model_ids=order, count_shares=count_shares, ensembles=ensembles,
                     stop_on_others=stop_on_others,
                     **({} if robinson is None else {"robinson": robinson}))
    with _progress(progress, config, run) as report, _flush_denormals(), \
            _evaluator(run.x.device, model_wrapper, run.val_idx.shape[1]) as evaluator:
        run.report, run.evaluator = report, evaluator
        run.validate(0)  # the state at initialisation: recorded, never selected
        n_steps = algorithm1(run, config)
    result = run.result(n_steps)
    return result if order is None else _in_given_order(result, order)


def _run_kind(config: CFRConfig, y: torch.Tensor, train_idx, k: int, n_arms: int, batch_source,
              dose, propensity, head_forms):
    """``(config, y, run class, robinson)`` of :func:`train_cfr`: the configuration checked and
    resolved at the training size, and :class:`DoseRun` (y with the dose's spline basis),
    :class:`RobinsonRun` (y with the propensities; ``robinson``, for a stack of both forms,
    which models take Robinson's) or :class:`StackedRun`."""
    config = config.validate().resolve(None if train_idx is None else train_idx.shape[-1],
                                       continuous=dose is not None)
    config, robinson = _head_forms(config, head_forms, k, dose)
    robinson_run = _robinson(config, dose, n_arms, batch_source, propensity)
    if dose is not None:
        return config, _with_dose_basis(y, dose, config, batch_source), DoseRun, None
    if robinson_run:
        return config, _with_propensities(y, propensity, n_arms), RobinsonRun, robinson
    return config, y, StackedRun, None


def _head_forms(config: CFRConfig, head_forms, k: int, dose):
    """``(config, robinson)``: the configuration the stack's network is built from and, for a
    stack of both head forms (``head_forms``), which models take Robinson's form ((K,) bools;
    None: every model takes ``config.head_form``). A dose's head is its own: forms ignored."""
    if head_forms is None or dose is not None:
        if config.head_form == "auto" and dose is None:
            raise ValueError("head_form='auto' chooses between the forms after training both: "
                             "pass head_forms (one of 'separate', 'robinson' per model)")
        return (dataclasses.replace(config, head_form="separate")
                if config.head_form == "auto" else config), None
    forms = list(head_forms)
    if len(forms) != k or not set(forms) <= {"separate", "robinson"}:
        raise ValueError(f"head_forms needs one of 'separate' or 'robinson' per model (K={k}); "
                         f"got {forms!r}")
    if "robinson" not in forms:
        return dataclasses.replace(config, head_form="separate"), None
    return (dataclasses.replace(config, head_form="robinson"),
            [form == "robinson" for form in forms])


def _robinson(config: CFRConfig, dose, n_arms: int, batch_source, propensity) -> bool:
    """Whether :func:`train_cfr` trains Robinson's heads (``head_form="robinson"``, a categorical
    treatment), checking that the units' propensities come exactly then, in memory."""
    robinson = config.head_form == "robinson" and dose is None and n_arms >= 2
    if robinson and batch_source is not None:
        raise ValueError("head_form='robinson' needs each training unit's propensities, which a "
                         "stream does not give: fit in memory, or use head_form='separate'")
    if robinson != (propensity is not None):
        raise ValueError("head_form='robinson' trains with each unit's propensities: pass "
                         "propensity=(n, n_arms)" if robinson else
                         "propensity is for head_form='robinson' (a categorical treatment) "
                         "only; leave it out")
    return robinson


def _with_dose_basis(y: torch.Tensor, dose: torch.Tensor, config: CFRConfig,
                     batch_source) -> torch.Tensor:
    """Each unit's outcome and the spline basis of its scaled dose, side by side
    (:class:`DoseRun`): (..., n) -> (..., n, 1 + n_basis). In memory only."""
    if batch_source is not None:
        raise ValueError("a continuous treatment (dose) trains in memory only, not on a stream")
    basis = bspline_basis(dose.to(y.dtype).expand_as(y), config.spline_degree,
                          config.spline_knots)
    return torch.cat([y.unsqueeze(-1), basis], -1)


def _with_propensities(y: torch.Tensor, propensity: torch.Tensor, n_arms: int) -> torch.Tensor:
    """Each unit's outcome and its propensities of the arms, side by side (:class:`RobinsonRun`):
    (..., n) -> (..., n, 1 + n_arms)."""
    e = propensity.to(device=y.device, dtype=y.dtype)
    if e.shape[:-1] != y.shape or e.shape[-1] != n_arms:
        raise ValueError(f"propensity must have shape {tuple(y.shape) + (n_arms,)} (one row of "
                         f"arm probabilities per unit), got {tuple(e.shape)}")
    return torch.cat([y.unsqueeze(-1), e], -1)


def _reordered(order, per_model_data, x, t, y, train_idx, val_idx, seeds, alpha, weight_decay,
               count_shares, ensembles, stop_on_others, robinson=None):
    """The per-model inputs of :func:`train_cfr` in the stack order ``order``."""
    def rows(v):  # an expanded (shared) tensor is the same in every order
        return v if v.stride(0) == 0 else v.index_select(0, torch.as_tensor(order,
                                                                            device=v.device))

    def items(v):
        if v is None:
            return None
        v = list(v)
        return [v[i] for i in order]

    if per_model_data:
        x, t, y = rows(x), rows(t), rows(y)
    return (x, t, y, rows(train_idx), rows(val_idx), items(seeds), items(alpha),
            items(weight_decay),
            None if count_shares is None else np.asarray(count_shares)[order], items(ensembles),
            items(stop_on_others), items(robinson))


def _in_given_order(result: TrainResult, order: np.ndarray) -> TrainResult:
    """A result trained in the stack order ``order``, back in the caller's order of models."""
    back = np.argsort(order)
    with torch.no_grad():
        for p in result.net.parameters():
            p.data = p.data.index_select(0, torch.as_tensor(back, device=p.device))
    history = {key: value[:, back] if key in _HISTORY_KEYS else value
               for key, value in result.history.items()}
    return dataclasses.replace(
        result, history=history, best_step=result.best_step[back],
        best_val_objective=result.best_val_objective[back], stopped=result.stopped[back],
        diverged=result.diverged[back], failed=result.failed[back])


class StackedRun:
    """The state of one stacked fit: the network and optimiser of the live models, their data,
    per-model hyper-parameters, checkpoints and history. ``live[j]`` is the model index of stack
    position j; models leave the stack (:meth:`compact`) when they stop or diverge. ``config``
    has its "auto"s resolved (:meth:`CFRConfig.resolve`, as :func:`train_cfr` does)."""

    network_class = CFRNet  # the stacked networks trained (:class:`DoseRun`: DoseNet)

    def __init__(self, x, t, y, *, train_idx, val_idx, config, seeds, n_arms, batch_source,
                 arm_shares, model_wrapper, gather_ipm, alpha, weight_decay, per_model_data,
                 device, model_ids=None, count_shares=None, ensembles=None,
                 stop_on_others=None):
        k, device = len(seeds), torch.device(device)
        # the caller's index of each model (reports, warnings): train_cfr may reorder the stack
        self.model_ids = np.arange(k) if model_ids is None else np.asarray(model_ids)
        self.config, self.n_arms, self.k, self.gather_ipm = config, n_arms, k, gather_ipm
        self.ipm_kw = config.ipm_kwargs()
        self.x, self.t, self.y = (x.to(device), t.to(device=device, dtype=torch.long),
                                  y.to(device=device, dtype=x.dtype))
        self.per_model_data = per_model_data
        self.live = np.arange(k)
        self.alpha = _per_model(alpha, config.alpha, k, x.dtype, device, "alpha")
        self.wd = _per_model(weight_decay, config.weight_decay, k, x.dtype, device,
                             "weight_decay")
        self.use_l2 = bool((self.wd != 0).any())
        val_idx = _check_rows(val_idx, k, "val_idx").to(device)
        if batch_source is None:
            train_idx = _check_rows(train_idx, k, "train_idx").to(device)
            self.shares = self._train_shares(train_idx)
        elif arm_shares is None or per_model_data:
            raise ValueError("streaming training needs arm_shares and shared validation data")
        else:
            self.shares = torch.as_tensor(arm_shares, dtype=x.dtype,
                                          device=device).reshape(k, n_arms)
        if not all(bool((self.take(self.t, val_idx) == a).any(1).all()) for a in range(n_arms)):
            raise ValueError("every model's validation split must contain every treatment arm")
        self.arm_shares = self.shares  # the arms' shares of the training data
        if not config.reweight_sample:
            self.shares = torch.full_like(self.shares, 1.0 / n_arms)  # all weights 1
        init_seeds, batch_seeds = derive_seeds(seeds)
        self.net = self.network_class.from_config(config, x.shape[-1], init_seeds,
                                                  n_arms=n_arms, dtype=x.dtype, device=device)
        if model_wrapper is not None and k != 1:
            raise ValueError("model_wrapper (distributed training) needs a single model (K=1)")
        self.net_forward = self.net if model_wrapper is None else model_wrapper(self.net)
        self.optimizer = adam(self.net.parameters(), config.learning_rate,
                              flat=model_wrapper is None)
        self.scheduled_lr = float(config.learning_rate)  # the staircase, before any warm-up
        self._set_lr(1)
        if batch_source is None:
            self.batches = InMemoryBatches(
                self.x, self.t, self.y, train_idx, min(config.batch_size, train_idx.shape[1]),
                batch_seeds, n_arms, per_model_data, count_shares)
        else:
            self.batches = StreamBatches(batch_source, k, x.dtype, device)
        self.batch_shares = self._batch_shares()
        self._group_models()
        self.val_idx = _interleave_arms(val_idx, self.take(self.t, val_idx), n_arms)
        # the validation loss uses at most max_eval_units * 64 units (a stratified prefix), the
        # validation IPM the first max_eval_units: early stopping needs a stable estimate, not a
        # pass over hundreds of thousands of rows
        self.n_ipm_val = min(self.val_idx.shape[1], config.max_eval_units)
        self.val_idx = self.val_idx[:, : min(self.val_idx.shape[1], config.max_eval_units * 64)]
        self.val_ipm_arms = self.take(self.t, self.val_idx[:, : self.n_ipm_val])
        n_train = None if train_idx is None else train_idx.shape[-1]
        self.checkpoints = Checkpoints(self.net, min_wait=config.min_wait(n_train),
                                       relative_patience=config.relative_patience,
                                       tol=config.tol,
                                       ensembles=ensembles, quorum=config.quorum_size,
                                       on_others=stop_on_others)
        self.stopped, self.diverged = np.zeros(k, dtype=bool), np.zeros(k, dtype=bool)
        self.running = torch.zeros(2, k, dtype=x.dtype, device=device)  # sums of risk, IPM
        self.n_running = self.n_running_ipm = 0  # the steps in them (the IPM's: ipm_due)
        self.n_steps = 0  # training steps done
        self.history = {key: [] for key in ("step", *_HISTORY_KEYS, "learning_rate")}
        self.report = None
        self.evaluator = _Inline()  # where evaluations run (train_cfr: _evaluator)
        self._pending = None  # the evaluation launched and not yet concluded
        self.ema = (WeightAverage(self.net, config.ema_decay, self._flat())
                    if config.ema_decay > 0 else None)
        self.l2_scale = self._l2_scale()

    def _flat(self) -> FlatAdam | None:
        """The optimiser when it keeps the parameters in one buffer (:class:`.optim.FlatAdam`)."""
        return self.optimizer if isinstance(self.optimizer, FlatAdam) else None

    def _l2_scale(self) -> torch.Tensor | None:
        """Eq. 3's L2 multipliers laid out as the flat optimiser's buffer (None: no flat
        optimiser or no L2 term)."""
        flat = self._flat()
        if flat is None or not self.use_l2:
            return None
        return flat.buffer_of(dict(self.net.penalty_scales(self.wd,
                                                           self.config.rep_weight_decay)))

    def take(self, v, idx):
        """Rows ``idx`` (K_live, m) of ``v``, shared (n, ...) or per model (K, n, ...)."""
        if self.per_model_data:
            return v[torch.as_tensor(self.live, device=idx.device).unsqueeze(1), idx]
        return v[idx]

    def _train_shares(self, train_idx):
        t_train = self.take(self.t, train_idx)
        counts = _arm_totals(t_train, self.n_arms)
        if bool((counts == 0).any()):
            raise ValueError("every model's training split must contain every treatment arm")
        return counts.to(self.x.dtype) / t_train.shape[1]  # (K, n_arms): u and 1-u

    # -- Eq. 3 on a training batch and on the validation split --------------------------------
    def _group_models(self) -> None:
        """Group the live models by their batches' arm counts (usually one group): models of a
        group share the shapes of the per-arm heads and of the IPM's blocks, and a model's shapes
        never depend on the other groups. In a stack of penalised and unpenalised models
        (``head_form="auto"``'s candidates, an alpha list with 0) the batch's IPM is for the
        penalised ones only (``ipm_models``, on their own groups ``ipm_groups``): its gradient
        is zero for the others."""
        counts = self.batches.counts
        self.groups = None if counts is None else arm_count_groups(counts, self.alpha.device)
        penalised = (self.alpha > 0).cpu().numpy()
        self.use_ipm = bool(penalised.any())
        self.ipm_models = self.ipm_groups = None
        if self.use_ipm and counts is not None and not penalised.all():
            self.ipm_models = torch.as_tensor(np.flatnonzero(penalised), device=self.alpha.device)
            self.ipm_groups = arm_count_groups(np.asarray(counts)[penalised], self.alpha.device)

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor | None = None):
        """Phi(x_i) (K, B, r) and the factual outputs h_{t_i}(Phi(x_i)) (K, B). On arm-blocked
        batches each head runs on its own arm's rows only (half the head arithmetic of running
        every head on every row); on a stream every head runs and the factual one is kept."""
        if self.groups is None:
            phi, outputs = self.net_forward(x)
            return phi, factual(outputs, t)
        phi = self.net.representation(x)
        groups = self.groups
        params = (self.net.split_heads(groups.sizes) if groups.sizes is not None else
                  [self.net.select_heads(models) for models in groups.models])
        return phi, groups.apply(phi, lambda blocks, g: self.net.factual_heads(blocks, params[g]))

    def _batch_shares(self) -> torch.Tensor:
        """The arm shares (K, n_arms) that give a training batch's weights (Algorithm 1, line 2).

        Uniformly sampled batches (a stream) use the training shares ``u``: unbiased in
        expectation. Batches with fixed arm counts ``c_a`` (of ``B``) use ``c_a / (B n_arms
        target_a)`` instead, with ``target_a`` each arm's intended share of the loss (``1 /
        n_arms`` with ``reweight_sample``, else ``u_a``): every batch then gives arm a exactly
        ``target_a`` of its weight, even where ``c_a`` was rounded (up to the one unit of a rare
        arm), where the training shares would give it ``c_a / (B n_arms u_a)``."""
        counts = self.batches.counts
        if counts is None:
            return self.shares
        counts = torch.as_tensor(counts, dtype=self.shares.dtype, device=self.shares.device)
        n_arms = counts.shape[1]
        target = self.arm_shares if not self.config.reweight_sample else 1.0 / n_arms
        return counts / (counts.sum(1, keepdim=True) * n_arms * target)

    @property
    def ipm_due(self) -> bool:
        """Whether the step in progress puts the batch's IPM into Eq. 3: every one of the first
        ``IPM_EVERY_FROM`` steps, then one in ``k = ipm_every`` (every step with 1)."""
        done = self.n_steps - IPM_EVERY_FROM
        return self.use_ipm and (done < 0 or done % self.config.ipm_every == 0)

    @property
    def ipm_weight(self) -> int:
        """The IPM's weight relative to ``alpha`` on a step that computes it: ``ipm_every`` once
        the IPM skips steps (the same expected gradient as Eq. 3's), else 1."""
        return self.config.ipm_every if self.n_steps >= IPM_EVERY_FROM else 1

    def batch_eq3(self, phi, pred, t, y) -> Eq3Terms:
        """Eq. 3 on a training batch. The IPM enters on the steps :attr:`ipm_due` names, at
        ``ipm_weight * alpha`` (one in k steps at k times the weight: the same expected
        gradient, for a k-th of the Sinkhorn's cost); the other steps' imbalance is 0."""
        risk = (sample_weights(t, self.batch_shares)
                * factual_loss(pred, y, self.config.loss)).sum(1) / t.shape[1]
        if not self.ipm_due:
            return eq3(risk, torch.zeros_like(risk), None, self.alpha, self.wd)
        if self.ipm_models is not None:
            imb = torch.zeros_like(risk).index_copy(0, self.ipm_models, self.ipm_groups.apply(
                phi.index_select(0, self.ipm_models), self._block_imbalance))
        elif self.groups is not None:
            imb = self.groups.apply(phi, self._block_imbalance)
        else:
            phi_i, t_i = (phi, t) if self.gather_ipm is None else self.gather_ipm(phi, t)
            imb = arm_imbalance(phi_i, t_i, self.n_arms, self.ipm_kw)
        # the L2 term enters through its gradient (add_l2_gradient), not through the value
        return eq3(risk, imb, None, self.alpha * self.ipm_weight, self.wd)

    def add_l2_gradient(self) -> None:
        """Eq. 3's ``lambda * R(h)`` in the training step: ``lambda_k * W`` added to the
        gradients of model k's penalised weights (:meth:`CFRNet.add_penalty_gradient`)."""
        if self.l2_scale is not None:
            self.optimizer.add_scaled(self.l2_scale)
        elif self.use_l2:
            self.net.add_penalty_gradient(self.wd, self.config.rep_weight_decay)

    @torch.no_grad()
    def validation_eq3(self, net: CFRNet) -> Eq3Terms:
        """Eq. 3 of the stack ``net`` (the live models' weights) on the validation split."""
        loss_sum, phis = 0.0, []
        n_val = self.val_idx.shape[1]
        for start in range(0, n_val, _EVAL_CHUNK):
            idx = self.val_idx[:, start : start + _EVAL_CHUNK]
            t_c = self.take(self.t, idx)
            phi_c, loss_c = self._validation_chunk(net, idx, t_c)
            loss_sum = loss_sum + loss_c
            if start < self.n_ipm_val:  # the IPM on a prefix that holds every arm
                phis.append(phi_c[:, : self.n_ipm_val - start])
        imb = self.validation_imbalance(torch.cat(phis, 1))
        return eq3(loss_sum / n_val, imb, net.weight_penalty(self.config.rep_weight_decay),
                   self.alpha, self.wd)

    def _validation_chunk(self, net: CFRNet, idx: torch.Tensor, t_c: torch.Tensor):
        """Phi of the validation rows ``idx`` and their weighted factual loss summed per model."""
        phi_c, out_c = net(self.take(self.x, idx))
        return phi_c, weighted_loss_sum(out_c, t_c, self.take(self.y, idx), self.shares,
                                        self.config.loss)

    def _block_imbalance(self, blocks, _group) -> torch.Tensor:
        """The batch's IPM between the arms, on at most ``ipm_max_units`` of its rows."""
        return arm_imbalance_blocks(ipm_subset(blocks, self.config.ipm_max_units), self.ipm_kw)

    def validation_imbalance(self, phi: torch.Tensor) -> torch.Tensor:
        """The IPM between the arms of each model's validation units (``phi``: the first
        ``n_ipm_val``, whose arms are ``val_ipm_arms``)."""
        return arm_imbalance(phi, self.val_ipm_arms, self.n_arms, self.ipm_kw)

    # -- bookkeeping between steps --------------------------------------------------------------
    def _set_lr(self, step: int) -> None:
        """Adam's step size for step ``step``: the staircase's, times the warm-up's share."""
        for group in self.optimizer.param_groups:  # x * 1.0 is x: no warm-up changes nothing
            group["lr"] = self.scheduled_lr * self.config.warmup_factor(step)

    def after_step(self, step: int, terms: Eq3Terms) -> None:
        if step % self.config.lr_decay_steps == 0:  # staircase decay (cfrnet lrate_decay)
            self.scheduled_lr *= self.config.lr_decay
        self._set_lr(step + 1)  # a linear warm-up first (CFRConfig.lr_warmup)
        # the running means: the risk over every step, the IPM over the steps that computed it
        ipm_step = self.ipm_due
        self.running[0] += terms.risk.detach()
        if ipm_step:
            self.running[1] += terms.imbalance.detach()
        if self.ema is not None:
            self.ema.update(self.net, step)
        self.n_running += 1
        self.n_running_ipm += ipm_step
        self.n_steps += 1

    def validate(self, step: int) -> bool:
        """Evaluate Eq. 3 on the validation split at ``step``, and conclude the evaluation before
        it: record it, keep improved checkpoints and stop the models that waited long enough or
        diverged. Returns whether any model trains on.

        The evaluation of step s runs on a snapshot of the weights (:meth:`_launch`), in the
        ``evaluator`` (a second thread where a core is free, :func:`_evaluator`), while the models
        train on; it is concluded at the next evaluation, step s + ``eval_every``, where the
        models it stops leave the stack (at step 0 and the last step at once). The sequence is
        the same whether the evaluator runs beside or inline, so is the result; models that stop
        train ``eval_every`` steps longer than they are kept, which changes no checkpoint."""
        if not self._conclude():
            return False
        self._pending = self._launch(step)
        if step == 0 or step == self.config.n_iter:
            return self._conclude()
        return True

    def _launch(self, step: int) -> "_Evaluation":
        """Start evaluating the live models' weights of ``step``; the training terms' running
        means and the learning rate are taken now."""
        counts = torch.tensor([[self.n_running], [self.n_running_ipm]], dtype=self.running.dtype,
                              device=self.running.device)
        train = (self.running / counts).cpu().numpy()  # 0/0: NaN, no such step since the last
        if not self.use_ipm:
            train[1] = 0.0  # no model of the stack penalised (TARNet): no imbalance
        ipm_steps = self.n_running_ipm if self.use_ipm else self.n_running
        self.running.zero_()
        self.n_running = self.n_running_ipm = 0
        net = _snapshot(self.net)
        if self.ema is not None and step > 0:  # step 0: the initial weights, its average
            self.ema.copy_to(net)
        return _Evaluation(step, net, train, ipm_steps,
                           float(self.optimizer.param_groups[0]["lr"]),
                           self.evaluator.submit(self.validation_eq3, net))

    def _conclude(self) -> bool:
        """Conclude the pending evaluation (none: True): record, checkpoint, stop, compact."""
        evaluation, self._pending = self._pending, None
        if evaluation is None:
            return True
        step, terms = evaluation.step, evaluation.terms.result()
        self._record(step, evaluation.train, terms, evaluation.learning_rate)
        if step == 0:  # the initial state is recorded, never selected
            self._report(step, terms, np.ones(len(self.live), dtype=bool))
            return True
        objective = terms.objective.cpu().numpy()
        self.checkpoints.update(evaluation.net, self.live, objective, step)
        train_risk, train_ipm = evaluation.train
        finite = (np.isfinite(objective) & np.isfinite(train_risk)
                  & (np.isfinite(train_ipm) | (evaluation.ipm_steps == 0)))
        if not finite.all():
            self._diverge(self.live[~finite], step)
        waited = self.checkpoints.waited_enough(self.live, step) & finite
        self.stopped[self.live[waited]] = True
        keep = finite & ~waited
        self._report(step, terms, keep)
        if keep.any() and not keep.all():
            self.compact(keep)
        return bool(keep.any())

    def _diverge(self, models: np.ndarray, step: int) -> None:
        self.diverged[models] = True
        warnings.warn(
            f"the training objective of model(s) {self.model_ids[models].tolist()} became "
            f"non-finite by step "
            f"{step}; they stop and keep their best checkpoint (step(s) "
            f"{self.checkpoints.step[models].tolist()}; 0 = none), the other models train on "
            f"unaffected. Lower learning_rate, alpha or weight_decay, or check the inputs for "
            f"extreme values.", RuntimeWarning, stacklevel=4)

    def compact(self, keep: np.ndarray) -> None:
        """Drop the models that stopped from the stack (network, Adam state, data, batches)."""
        keep_t = torch.as_tensor(keep, device=self.alpha.device)
        self.optimizer = compact_stack(self.net, self.optimizer, keep_t)
        if self.ema is not None:
            self.ema.keep(keep_t, self._flat())
        self.batches.keep(keep_t)
        self.alpha, self.wd, self.shares = self.alpha[keep_t], self.wd[keep_t], self.shares[keep_t]
        self._group_models()
        self.batch_shares, self.arm_shares = self.batch_shares[keep_t], self.arm_shares[keep_t]
        self.val_idx, self.running = self.val_idx[keep_t], self.running[:, keep_t]
        self.val_ipm_arms = self.val_ipm_arms[keep_t]
        self.live = self.live[keep]
        self.l2_scale = self._l2_scale()

    def _record(self, step: int, train: np.ndarray, terms: Eq3Terms, lr: float) -> None:
        """One row per evaluation; models no longer training get NaN."""
        self.history["step"].append(step)
        values = (train[0], train[1], *(v.cpu().numpy() for v in terms))
        for key, value in zip(_HISTORY_KEYS, values):
            row = np.full(self.k, np.nan)
            row[self.live] = value
            self.history[key].append(row)
        self.history["learning_rate"].append(lr)

    def _report(self, step: int, terms: Eq3Terms, keep: np.ndarray) -> None:
        if self.report is not None:
            active = np.zeros(self.k, dtype=bool)
            active[self.model_ids[self.live[keep]]] = True
            self.report(step, {"val_loss": terms.risk, "val_imbalance": terms.imbalance,
                               "val_objective": terms.objective,
                               "models": torch.as_tensor(self.model_ids[self.live]),
                               "active": active})

    def result(self, n_steps: int) -> TrainResult:
        failed = self.diverged & ~self.checkpoints.has_best
        if failed.all():
            raise TrainingDivergedError(
                f"the training objective became non-finite before any checkpoint was kept for "
                f"every model ({self.k}); lower learning_rate, alpha or weight_decay, or check "
                f"the inputs for extreme values.")
        if not self.checkpoints.has_best[~failed].all():  # only if every evaluation was NaN
            raise TrainingDivergedError("no finite validation objective was reached; lower "
                                        "learning_rate or alpha, or check the inputs.")
        self.checkpoints.restore(self.net)  # all K models, each at its best checkpoint
        self.net.eval()
        hist = {key: np.stack(v) if key in _HISTORY_KEYS else np.asarray(v)
                for key, v in self.history.items()}
        return TrainResult(net=self.net, history=hist, best_step=self.checkpoints.step.copy(),
                           best_val_objective=self.checkpoints.objective.copy(),
                           n_steps=n_steps, stopped=self.stopped.copy(),
                           diverged=self.diverged.copy(), failed=failed)


class DoseRun(StackedRun):
    r"""A stacked fit of :class:`~.dose.DoseNet` models on a continuous treatment (``train_cfr(...,
    dose=...)``): Algorithm 1 with the dose in place of the arm.

    ``t`` holds each unit's dose stratum (:func:`~.dose.dose_strata`): the stratified batches
    hold a fixed number of units of each stratum, stratum by stratum, and the sample weights of
    Algorithm 1 are those of the strata (about 1: equal-count strata). ``y`` holds each unit's
    outcome and the spline basis of its scaled dose, (n, 1 + n_basis): the basis is computed
    once, not at every step. The objective is Eq. 3 with the factual loss of
    :math:`h(\Phi(x_i), s_i)` and the interval IPM of ADMIT in place of the arms' IPM
    (:func:`~.dose.interval_imbalance_blocks` on a batch's stratum blocks,
    :func:`~.dose.interval_imbalance` on the validation units)."""

    network_class = DoseNet

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor | None = None):
        """Phi(x_i) (K, B, r) and the outputs h(Phi(x_i), s_i) (K, B) at each unit's dose."""
        phi = self.net.representation(x)
        return phi, self.net.basis_heads(phi, y[..., 1:])

    def batch_eq3(self, phi, pred, t, y) -> Eq3Terms:
        return super().batch_eq3(phi, pred, t, y[..., 0])

    def _validation_chunk(self, net: DoseNet, idx: torch.Tensor, t_c: torch.Tensor):
        pairs = self.take(self.y, idx)
        phi_c = net.representation(self.take(self.x, idx))
        out_c = net.basis_heads(phi_c, pairs[..., 1:])
        loss = factual_loss(out_c, pairs[..., 0], self.config.loss)
        return phi_c, (sample_weights(t_c, self.shares) * loss).sum(1)

    def _block_imbalance(self, blocks, _group) -> torch.Tensor:
        return interval_imbalance_blocks(ipm_subset(blocks, self.config.ipm_max_units),
                                         self.ipm_kw)

    def validation_imbalance(self, phi: torch.Tensor) -> torch.Tensor:
        """The interval IPM of each model's validation units (the first ``n_ipm_val``)."""
        return interval_imbalance(phi, self.val_ipm_arms, self.n_arms, self.ipm_kw)


class RobinsonRun(StackedRun):
    r"""A stacked fit of networks with ``head_form="robinson"`` (``train_cfr(...,
    propensity=...)``): Algorithm 1 with each unit's factual output
    :math:`m(x_i) + d_{t_i}(x_i) - \sum_b e_b(x_i) d_b(x_i)` (:class:`~.network.CFRNet`).

    ``y`` holds each unit's outcome and its propensities of the arms, (n, 1 + n_arms), so that
    the stratified batches carry them with the units; the objective is Eq. 3 as for
    :class:`StackedRun` (the same weights, the same IPM of Phi between the arms)."""

    def __init__(self, *args, robinson: Sequence[bool] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        # a stack of both forms (head_forms): the live models in Robinson's form
        self.robinson = (None if robinson is None else
                         torch.as_tensor(list(robinson), dtype=torch.bool, device=self.x.device))

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor | None = None):
        """Phi(x_i) (K, B, r) and the factual outputs (K, B); every head runs on every row."""
        phi = self.net.representation(x)
        return phi, factual(self.net.heads(phi, y[..., 1:], self.robinson), t)

    def batch_eq3(self, phi, pred, t, y) -> Eq3Terms:
        return super().batch_eq3(phi, pred, t, y[..., 0])

    def _validation_chunk(self, net: CFRNet, idx: torch.Tensor, t_c: torch.Tensor):
        rows = self.take(self.y, idx)
        phi_c, out_c = net(self.take(self.x, idx), rows[..., 1:], self.robinson)
        return phi_c, weighted_loss_sum(out_c, t_c, rows[..., 0], self.shares, self.config.loss)

    def compact(self, keep: np.ndarray) -> None:
        super().compact(keep)
        if self.robinson is not None:
            self.robinson = self.robinson[torch.as_tensor(keep, device=self.robinson.device)]


def stack_order(t: torch.Tensor, train_idx: torch.Tensor, batch_size: int, n_arms: int,
                per_model_data: bool,
                count_shares: np.ndarray | None = None) -> np.ndarray | None:
    """The order of a stack's models that makes each group of equal batch arm counts a
    consecutive range (:class:`.groups.ArmGroups`: the heads then take views of the weights instead of
    copies), stable; None if the given order already does."""
    t, train_idx = t.cpu().long(), train_idx.cpu().long()
    arms = t if per_model_data else t.unsqueeze(0).expand(train_idx.shape[0], -1)
    counts = arm_counts(arms.gather(1, train_idx), min(batch_size, train_idx.shape[1]), n_arms,
                        count_shares)
    order = np.lexsort(counts.T[::-1])  # first column first, as np.unique(axis=0)
    return None if (order == np.arange(len(order))).all() else order


def _arm_totals(arms: torch.Tensor, n_arms: int) -> torch.Tensor:
    """Units of each arm in each model's rows: (K, m) arm indices -> (K, n_arms)."""
    return torch.stack([(arms == a).sum(1) for a in range(n_arms)], dim=1)


def _per_model(values, default, k, dtype, device, name):
    out = torch.as_tensor([default] * k if values is None else list(values), dtype=dtype,
                          device=device)
    if out.shape != (k,):
        raise ValueError(f"{name} overrides need one value per model (K={k})")
    return out


def _check_rows(idx, k, name):
    if idx is None or idx.dim() != 2 or idx.shape[0] != k:
        raise ValueError(f"{name} needs one row per model (K={k}); got "
                         f"{None if idx is None else tuple(idx.shape)}")
    return idx


def _interleave_arms(idx: torch.Tensor, arms: torch.Tensor, n_arms: int) -> torch.Tensor:
    """Reorder each model's indices so arms alternate in proportion to their sizes, with one unit
    of every arm first, so that any prefix holds every arm. Deterministic."""
    device = idx.device
    idx, arms = idx.cpu(), arms.cpu()
    out = torch.empty_like(idx)
    for k in range(idx.shape[0]):
        key = torch.empty(idx.shape[1], dtype=torch.float64)
        for a in range(n_arms):
            pos = torch.nonzero(arms[k] == a).flatten()
            rank = torch.arange(len(pos), dtype=torch.float64)
            key[pos] = torch.where(rank == 0, -1.0 + a * 1e-6, (rank + 0.5) / max(len(pos), 1))
        out[k] = idx[k][torch.argsort(key, stable=True)]
    return out.to(device)


@dataclass
class _Evaluation:
    """An evaluation launched at ``step`` on the weights ``net``, concluded later."""

    step: int
    net: CFRNet
    train: np.ndarray  # (2, K_live) running means of the training risk and IPM
    ipm_steps: int  # the steps in the IPM's mean (0: none since the last evaluation, NaN)
    learning_rate: float
    terms: Future  # of Eq3Terms


class _Inline:
    """An executor that runs each task at once in the calling thread."""

    @staticmethod
    def submit(fn, *args) -> Future:
        future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as exc:  # noqa: BLE001 - surfaces at future.result(), as in a thread
            future.set_exception(exc)
        return future


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS reports one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def _evaluator(device: torch.device, model_wrapper, n_val: int):
    """Where the validation evaluations run: a second thread on the CPU when torch uses fewer
    threads than the process has cores (the default fit trains on one) and the members have
    ``BESIDE_FROM_VAL_UNITS`` validation units or more, else inline. The thread flushes
    denormals as the training does (the setting is per thread)."""
    if not (n_val >= BESIDE_FROM_VAL_UNITS and device.type == "cpu" and model_wrapper is None
            and torch.get_num_threads() < available_cores()):
        yield _Inline()
        return
    with ThreadPoolExecutor(max_workers=1, initializer=torch.set_flush_denormal,
                            initargs=(True,)) as pool:
        yield pool


class WeightAverage:
    r"""An exponential moving average of a stack's weights (Polyak & Juditsky 1992's averaging
    of the iterates, in the exponential form of TensorFlow's ``ExponentialMovingAverage``),

    .. math:: \bar w_s = \beta_s \bar w_{s-1} + (1 - \beta_s) w_s, \qquad
              \beta_s = \min\big(\beta, \tfrac{1 + s}{10 + s}\big),

    after each Adam step s, starting from the initial weights. The warm-up :math:`\beta_s` lets
    the average follow the first steps (:math:`\beta_{10} = 0.55`, :math:`\beta_{100} = 0.92`,
    :math:`\beta` from step 890 at 0.99), so a short fit is not pulled back to its
    initialisation. The average is what validation sees and what the checkpoints keep; Adam
    goes on from the iterate. Element-wise per model, so stacked models stay independent.
    (``torch.optim.swa_utils.AveragedModel`` keeps a copy of the module, which the stack's
    compaction would have to slice too; this keeps the averaged tensors only.)"""

    def __init__(self, net: CFRNet, decay: float, flat: FlatAdam | None = None):
        self.decay = float(decay)
        self._follow(list(net.parameters()), flat)

    def _follow(self, weights: list, flat: FlatAdam | None) -> None:
        """Average ``weights`` (copies become the averages), or with a flat optimiser its whole
        buffer in one operation (the averages are views of one buffer)."""
        self.source = None if flat is None else flat.flat
        if flat is None:
            self.buffer = None
            self.weights = [w.detach().clone() for w in weights]
        else:
            self.buffer = torch.cat([w.detach().reshape(-1) for w in weights])
            self.weights = flat.views(self.buffer)

    def update(self, net: CFRNet, step: int) -> None:
        beta = min(self.decay, (1.0 + step) / (10.0 + step))
        with torch.no_grad():
            if self.buffer is not None:
                self.buffer.lerp_(self.source, 1.0 - beta)
                return
            for average, p in zip(self.weights, net.parameters()):
                average.lerp_(p.detach(), 1.0 - beta)

    def copy_to(self, net: CFRNet) -> None:
        """Put the averaged weights into ``net`` (a snapshot of the stack)."""
        for p, average in zip(net.parameters(), self.weights):
            p.data = average.clone()

    def keep(self, keep: torch.Tensor, flat: FlatAdam | None = None) -> None:
        """Keep the models ``keep`` (bool over the stack), as :func:`.stopping.compact_stack`
        (``flat``: the compacted stack's flat optimiser, whose buffer the average follows)."""
        self._follow([average[keep] for average in self.weights], flat)


def _snapshot(net: CFRNet) -> CFRNet:
    """A copy of the stack's weights (without gradients) for an evaluation beside the
    training, which goes on updating ``net`` in place."""
    grads = [p.grad for p in net.parameters()]
    for p in net.parameters():
        p.grad = None
    try:
        return copy.deepcopy(net)
    finally:
        for p, g in zip(net.parameters(), grads):
            p.grad = g


@contextlib.contextmanager
def _flush_denormals():
    """Flush subnormal floats to zero on the CPU while training, then back to torch's default.

    Weights and Adam's moments that decay towards zero become subnormal floats, on which CPUs
    compute 10-100 times slower: one fit on a realistic table took 56 s instead of 28 s
    (issue #30). Their values are below 1e-38, so flushing them changes nothing else. torch has
    no getter for the setting; its default (off) is restored."""
    switched = torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if switched:
            torch.set_flush_denormal(False)


@contextlib.contextmanager
def _progress(progress, config: CFRConfig, run: StackedRun):
    """The per-evaluation report: a user callable, a tqdm bar (``progress=True``) or nothing."""
    if callable(progress):
        yield progress
        return
    if progress is not True:
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=config.n_iter, desc="CFR" if run.use_ipm else "TARNet", leave=False)

    def report(step, info):
        bar.update(step - bar.n)
        bar.set_postfix(val_loss=f"{float(info['val_loss'].mean()):.4g}",
                        imbalance=f"{float(info['val_imbalance'].mean()):.3g}",
                        active=int(info["active"].sum()))

    try:
        yield report
    finally:
        bar.close()
