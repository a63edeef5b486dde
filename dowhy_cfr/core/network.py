"""The CFR network: representation Phi and one outcome head h_t per treatment arm.

Every parameter carries a leading model axis ``K``: a ``CFRNet`` holds ``K`` independent networks
of identical architecture and evaluates all of them with batched matrix products (``baddbmm``).
Model ``k`` only ever sees its own slice of every weight, so the ``K`` networks do not interact;
training them together is the same as training them one by one up to float rounding (batched
kernels may round a model's elements differently in a stack than alone), only faster.

Architecture (Shalit et al. 2017, Fig. 1 and Sec. 5; reference configuration of the paper's code):

* Phi: ``n_rep_layers`` fully connected ELU layers of width ``rep_dim``, then (``"divide"``)
  projection of each representation onto the unit sphere, ``Phi(x) / ||Phi(x)||``.
* h_0, h_1: ``n_head_layers`` ELU layers of width ``head_dim`` and a linear output each. A unit's
  factual loss only involves the head of its observed arm, so only that head gets its gradient.
* ``head_form="effect"``: the same heads read as a mean head ``m`` (arm 0's weights) and one
  effect head ``d_a`` per treated arm, ``mu_a = m + d_a - (1/A) sum_b d_b`` with ``d_0 = 0``
  (for two arms ``mu_0 = m - d/2``, ``mu_1 = m + d/2``, so ``tau = d``): every unit trains
  ``m``, the effect is a network of its own, and an L2 penalty on its weights
  (``effect_penalty`` times ``weight_decay``) shrinks it toward a constant -- the structure
  ``mu(x) + t tau(x)`` with a regularised ``tau`` of Bayesian causal forests (Hahn, Murray &
  Carvalho 2020) and of FlexTENet's shared and private heads (Curth & van der Schaar 2021), on
  the balanced representation. Centring the treatment coding splits each unit's gradient evenly
  between ``m`` and ``d`` (with ``mu_1 = m + d`` the control head would absorb half of the
  effect early in training).
* ``head_form="robinson"``: the same two heads centred at each unit's propensities ``e_b(x)``,
  ``mu_a = m + d_a - sum_b e_b d_b`` (two arms: ``mu_0 = m - e d``, ``mu_1 = m + (1 - e) d``),
  Robinson's (1988) decomposition ``Y = m(x) + (T - e(x)) tau(x)``: with ``m`` free the
  least-squares ``m`` is E[Y | x], and the effect's gradient, ``(T - e(x))`` times the residual,
  is orthogonal to any error of ``m`` that is a function of x (the R-learner's loss, Nie &
  Wager 2021, fitted jointly). The propensities come with the units (:meth:`heads`'s ``e``);
  without them the effect form's centring ``1 / n_arms`` is used, which changes the outcomes'
  level and never the effects ``mu_a - mu_0 = d_a``.
* weights drawn from ``N(0, (weight_init / sqrt(fan_in))^2)``, biases 0 (reference code).
* ``feature_scaling`` (ours, not the paper's): before Phi's first layer every input column ``i``
  is multiplied by a learned scale ``s_i = 1 + r theta_i`` (``theta_i = 0`` at first, one per
  model and column, no weight decay; ``r`` = :data:`FEATURE_SCALE_RATE`). This is the scaling
  layer of RealMLP (Holzmueller, Grinsztajn & Steinwart, "Better by Default", NeurIPS 2024):
  the product ``s_i W_1[i, :]`` spans the same functions as ``W_1`` alone, but under Adam a
  column's scale moves by about ``r`` times the learning rate per step whatever the column's
  fan-out, so the network can raise or silence a whole input -- a learned feature selection
  -- far faster than through its 32 first-layer weights one by one.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from .config import HEAD_FORMS, NORMALIZATIONS, CFRConfig

__all__ = ["CFRNet", "FEATURE_SCALE_RATE", "NORMALIZATIONS", "predict", "stacked_matmul"]

_DEFAULT = CFRConfig()

#: ``feature_scaling``'s scale is ``1 + FEATURE_SCALE_RATE * theta``: Adam moves ``theta`` by
#: about the learning rate a step, the scale by this many times that (ours; RealMLP also gives
#: its scaling layer a larger step). On the twelve development designs (n = 1,500, seeds 0-1)
#: 1 changed nothing (sqrt(PEHE) +0.003 +- 0.004), 5 lowered it 0.358 -> 0.351 (heads 0.418 ->
#: 0.408), 20 lowered the heads further (0.404) but raised the blend's error (0.371) with two
#: more constant fallbacks (docs/parameters.md, item 18).
FEATURE_SCALE_RATE = 5.0


def stacked_matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x @ weight + bias`` over arbitrary leading (model, arm) axes.

    ``x``: ``(*lead, B, i)``, ``weight``: ``(*lead, i, o)``, ``bias``: ``(*lead, 1, o)`` ->
    ``(*lead, B, o)``.
    """
    if weight.dim() == 3:  # one leading (model) axis: no reshapes, which autograd would record
        return torch.baddbmm(bias, x, weight)
    lead = weight.shape[:-2]
    flat = math.prod(lead)
    out = torch.baddbmm(
        bias.reshape(flat, 1, -1),
        x.reshape(flat, x.shape[-2], x.shape[-1]),
        weight.reshape(flat, weight.shape[-2], weight.shape[-1]),
    )
    return out.reshape(*lead, x.shape[-2], weight.shape[-1])


def _run_heads(hs: list, params: list) -> list:
    """Head ``a`` (its layers' ``(weights, biases)``, one per arm in ``params``) on ``hs[a]``:
    ELU between layers, a linear output."""
    last = len(params) - 1
    for i, (w, b) in enumerate(params):
        hs = [stacked_matmul(h, wa, ba) for h, wa, ba in zip(hs, w, b)]
        if i < last:
            hs = [F.elu(h) for h in hs]
    return hs


class HalfSquaredNorm(torch.autograd.Function):
    """``||W_k||^2 / 2`` per model k of a stacked weight (K, ...), with the gradient ``W_k``
    written out: one product in the backward pass instead of autograd's chain of ``pow``, ``mul``
    and ``expand``."""

    @staticmethod
    def forward(ctx, w):
        ctx.save_for_backward(w)
        return (w * w).flatten(1).sum(1) * 0.5

    @staticmethod
    def backward(ctx, grad):
        (w,) = ctx.saved_tensors
        return grad.view(-1, *([1] * (w.dim() - 1))) * w


class CFRNet(nn.Module):
    """``K`` stacked CFR/TARNet networks.

    Parameters
    ----------
    d_in : int
        Number of input covariates.
    seeds : sequence of int
        One seed per model; model ``k``'s initial weights depend only on ``seeds[k]``.
    n_arms : int
        Number of treatment arms (= number of outcome heads), 2 for a binary treatment.
    n_rep_layers, rep_dim, n_head_layers, head_dim, normalization, weight_init, feature_scaling
        Architecture, see the module docstring.
    """

    def __init__(
        self,
        d_in: int,
        seeds: Sequence[int],
        *,
        n_arms: int = 2,
        n_rep_layers: int = _DEFAULT.n_rep_layers,
        rep_dim: int = _DEFAULT.rep_dim,
        n_head_layers: int = _DEFAULT.n_head_layers,
        head_dim: int = _DEFAULT.head_dim,
        normalization: str = _DEFAULT.normalization,
        weight_init: float = _DEFAULT.weight_init,
        head_form: str = _DEFAULT.head_form,
        effect_penalty: float = _DEFAULT.effect_penalty,
        feature_scaling: bool = _DEFAULT.feature_scaling,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ):
        super().__init__()
        if normalization not in NORMALIZATIONS:
            raise ValueError(
                f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}"
            )
        if n_rep_layers < 1:
            raise ValueError(f"n_rep_layers must be at least 1, got {n_rep_layers!r}")
        if n_head_layers < 0:
            raise ValueError(f"n_head_layers must be non-negative, got {n_head_layers!r}")
        if head_form not in HEAD_FORMS:
            raise ValueError(f"head_form must be one of {HEAD_FORMS}, got {head_form!r}")
        self.n_models = len(seeds)
        self.n_arms = int(n_arms)
        self.normalization = normalization
        # Robinson's form: the effect form's heads centred at the units' propensities
        self.robinson = head_form == "robinson" and self.n_arms >= 2
        self.effect_form = head_form == "effect" or self.robinson
        # a fitted network of both forms (head_form="auto" keeping both): (K,) bool, the models
        # in Robinson's form, the others separate heads (None: every model in this form)
        self.robinson_models: torch.Tensor | None = None
        # the L2 multiplier of each arm's head weights: effect_penalty on the effect heads d_a
        self.arm_penalty = [1.0] + [float(effect_penalty) if self.effect_form else 1.0] * (
            self.n_arms - 1)
        rep_sizes = [d_in] + [rep_dim] * n_rep_layers
        head_sizes = [rep_dim] + [head_dim] * n_head_layers + [1]

        # Draw each model's weights from its own generator, in a fixed order, so that model k of a
        # stack starts exactly where a single model with seed seeds[k] would.
        rep_w = [[] for _ in rep_sizes[1:]]
        head_w = [[] for _ in head_sizes[1:]]
        for seed in seeds:
            gen = torch.Generator().manual_seed(int(seed))
            for layer, (fan_in, fan_out) in enumerate(zip(rep_sizes[:-1], rep_sizes[1:])):
                rep_w[layer].append(
                    torch.randn(fan_in, fan_out, generator=gen, dtype=torch.float64)
                    * (weight_init / math.sqrt(fan_in))
                )
            for layer, (fan_in, fan_out) in enumerate(zip(head_sizes[:-1], head_sizes[1:])):
                head_w[layer].append(self._draw_head(gen, fan_in, fan_out, weight_init))
        kw = dict(dtype=dtype, device=device)
        self.rep_weights = nn.ParameterList(
            [nn.Parameter(torch.stack(ws).to(**kw)) for ws in rep_w]
        )
        self.rep_biases = nn.ParameterList(
            [nn.Parameter(torch.zeros(self.n_models, 1, o, **kw)) for o in rep_sizes[1:]]
        )
        self.head_weights = nn.ParameterList(
            [nn.Parameter(torch.stack(ws).to(**kw)) for ws in head_w]
        )
        self.head_biases = nn.ParameterList(
            [nn.Parameter(self._head_bias(o, **kw)) for o in head_sizes[1:]]
        )
        # the scale of input column i is 1 + FEATURE_SCALE_RATE * theta_i, theta_i = 0 at first
        self.input_scales = nn.ParameterList(
            [nn.Parameter(torch.zeros(self.n_models, 1, d_in, **kw))] if feature_scaling else []
        )

    def parameter_lists(self) -> tuple[nn.ParameterList, ...]:
        """Every list of stacked parameters (each with the model axis first): what
        :func:`~dowhy_cfr.core.stopping.compact_stack` slices when models leave the stack."""
        return (self.rep_weights, self.rep_biases, self.head_weights, self.head_biases,
                self.input_scales)

    def _draw_head(self, gen: torch.Generator, fan_in: int, fan_out: int,
                   weight_init: float) -> torch.Tensor:
        """One model's weights of a head layer, all arms: (n_arms, fan_in, fan_out), drawn from
        the model's generator (subclasses shape their heads here)."""
        return (torch.randn(self.n_arms, fan_in, fan_out, generator=gen, dtype=torch.float64)
                * (weight_init / math.sqrt(fan_in)))

    def _head_bias(self, fan_out: int, **kw) -> torch.Tensor:
        """The stack's initial biases of a head layer: zeros (K, n_arms, 1, fan_out)."""
        return torch.zeros(self.n_models, self.n_arms, 1, fan_out, **kw)

    @classmethod
    def from_config(cls, config: CFRConfig, d_in: int, seeds: Sequence[int], *, n_arms: int = 2,
                    dtype: torch.dtype = torch.float32,
                    device: torch.device | str = "cpu") -> "CFRNet":
        """``K = len(seeds)`` networks with the architecture of ``config``."""
        return cls(d_in, seeds, n_arms=n_arms, dtype=dtype, device=device,
                   **config.network_kwargs())

    def representation(self, x: torch.Tensor) -> torch.Tensor:
        """Phi(x): (K, B, d_in) -> (K, B, rep_dim); with ``feature_scaling`` each input column
        is first multiplied by its learned scale (:data:`FEATURE_SCALE_RATE`)."""
        h = x
        for theta in self.input_scales:
            h = h * (1.0 + FEATURE_SCALE_RATE * theta)
        for w, b in zip(self.rep_weights, self.rep_biases):
            h = F.elu(stacked_matmul(h, w, b))
        if self.normalization == "divide":
            # project onto the unit sphere; the floor keeps the gradient finite at h = 0
            h = h * torch.rsqrt(h.pow(2).sum(-1, keepdim=True).clamp_min(1e-10))
        return h

    def heads(self, phi: torch.Tensor, e: torch.Tensor | None = None,
              robinson: torch.Tensor | None = None) -> torch.Tensor:
        """All arms' outputs h_a(Phi): (K, B, rep_dim) -> (K, n_arms, B). ``e`` (K or 1, B,
        n_arms): the rows' propensities of ``head_form="robinson"``; ``robinson`` (K,) bool:
        in a stack of both forms, the models in Robinson's form (:meth:`_outcomes`)."""
        h = phi.unsqueeze(1).expand(-1, self.n_arms, -1, -1)
        last = len(self.head_weights) - 1
        for i, (w, b) in enumerate(zip(self.head_weights, self.head_biases)):
            h = stacked_matmul(h, w, b)
            if i < last:
                h = F.elu(h)
        return self._outcomes(h.squeeze(-1), e, robinson)

    def _outcomes(self, h: torch.Tensor, e: torch.Tensor | None = None,
                  robinson: torch.Tensor | None = None) -> torch.Tensor:
        """The arms' outputs (K, n_arms, B) from the heads' (K, n_arms, B): themselves, or with
        ``head_form="effect"`` ``m + d_a - mean_b d_b`` (``m = h[:, 0]``, ``d_a = h[:, a]``,
        ``d_0 = 0``), with ``"robinson"`` ``m + d_a - sum_b e_b d_b`` given the rows'
        propensities ``e`` (K or 1, B, n_arms; None: the mean, ``e_b = 1 / n_arms``).
        ``robinson`` (K,) bool, for a network in Robinson's form only: the models that take it;
        the others' outputs are their heads' own (separate heads; ``head_form="auto"`` trains
        both forms in one stack). None: :attr:`robinson_models`, a fitted network's own mask
        where it holds both forms."""
        if not self.effect_form:
            return h
        robinson = self.robinson_models if robinson is None else robinson
        d = torch.cat([torch.zeros_like(h[:, :1]), h[:, 1:]], 1)
        if not self.robinson or e is None:
            out = h[:, :1] + d - d.mean(1, keepdim=True)
        else:
            out = h[:, :1] + d - (d * e.transpose(1, 2).to(d.dtype)).sum(1, keepdim=True)
        return out if robinson is None else torch.where(robinson.view(-1, 1, 1).to(h.device),
                                                        out, h)

    def head_params(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The heads' ``(weight, bias)`` per layer, each with axes (K, n_arms, ...)."""
        return list(zip(self.head_weights, self.head_biases))

    def split_heads(self, sizes: Sequence[int]) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
        """:meth:`head_params` of consecutive ranges of ``sizes`` models (views: no copies, and
        one concatenation of the gradients in the backward pass), one list per range."""
        if len(sizes) == 1:
            return [self.head_params()]
        pieces = [(w.split(sizes, 0), b.split(sizes, 0)) for w, b in self.head_params()]
        return [[(w[g], b[g]) for w, b in pieces] for g in range(len(sizes))]

    def select_heads(self, models: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`head_params` of the models at the stack positions ``models`` (copies)."""
        return [(w.index_select(0, models), b.index_select(0, models))
                for w, b in self.head_params()]

    def factual_heads(self, blocks: Sequence[torch.Tensor],
                      params: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None,
                      e: torch.Tensor | None = None) -> torch.Tensor:
        """Each arm's head on that arm's rows only: ``blocks[a]`` (K', n_a, rep_dim) holds
        Phi of arm a's rows; returns h_a(Phi) for every row, (K', sum n_a), in block order.
        ``params``: the K' models' head weights (:meth:`split_heads`, :meth:`select_heads`);
        all K models' by default.

        Half the head arithmetic of :meth:`heads` for two arms; with ``head_form="effect"``
        or ``"robinson"`` every head runs on every row (each arm's output needs all of them),
        ``"robinson"`` with the rows' propensities ``e`` (K', sum n_a, n_arms), in block order.
        """
        params = [(w.unbind(1), b.unbind(1)) for w, b in
                  (self.head_params() if params is None else params)]
        if not self.effect_form:
            return torch.cat(_run_heads(list(blocks), params), 1).squeeze(-1)
        phi = torch.cat(list(blocks), 1)
        h = torch.cat(_run_heads([phi] * self.n_arms, params), -1).transpose(1, 2)
        out = self._outcomes(h, e)  # (K', n_arms, B), rows in block order
        arms = torch.cat([torch.full((blk.shape[1],), a, dtype=torch.long, device=phi.device)
                          for a, blk in enumerate(blocks)])
        return out.gather(1, arms.view(1, 1, -1).expand(out.shape[0], 1, -1)).squeeze(1)

    def forward(self, x: torch.Tensor, e: torch.Tensor | None = None,
                robinson: torch.Tensor | None = None):
        """Returns ``(phi, outputs)`` with outputs of shape (K, n_arms, B); ``e`` and
        ``robinson`` as in :meth:`heads`."""
        phi = self.representation(x)
        return phi, self.heads(phi, e, robinson)

    def weight_penalty(self, include_representation: bool = False) -> torch.Tensor:
        """Per-model L2 penalty ``sum ||W||^2 / 2`` over the head weights (not the biases).

        This is the ``lambda * R(h)`` term of Eq. 3; with ``include_representation`` the
        representation's weights are penalised too. Shape (K,).
        """
        if self.effect_form:
            factor = self._arm_factor(self.head_weights[0]).view(-1)
            total = sum((w * w).flatten(2).sum(2) @ factor for w in self.head_weights) * 0.5
        else:
            total = sum(HalfSquaredNorm.apply(w) for w in self.head_weights)
        if include_representation:
            total = total + sum(HalfSquaredNorm.apply(w) for w in self.rep_weights)
        return total

    def penalty_scales(self, weight_decay: torch.Tensor,
                       include_representation: bool = False) -> list[tuple[torch.Tensor,
                                                                            torch.Tensor]]:
        """``(W, scale)`` for each penalised weight ``W``: ``scale * W`` is the gradient of
        ``weight_decay * weight_penalty()`` with respect to ``W`` (``scale`` broadcasts against
        ``W``: ``weight_decay[k]``, times the arm's multiplier for the effect heads).
        ``weight_decay``: (K,)."""
        weights = list(self.head_weights)
        if include_representation:
            weights += list(self.rep_weights)
        pairs = []
        for w in weights:
            scale = weight_decay.view(-1, *([1] * (w.dim() - 1)))
            if self.effect_form and w.dim() == 4:  # head weights (K, n_arms, i, o)
                scale = scale * self._arm_factor(w).view(1, -1, 1, 1)
            pairs.append((w, scale))
        return pairs

    @torch.no_grad()
    def add_penalty_gradient(self, weight_decay: torch.Tensor,
                             include_representation: bool = False) -> None:
        """Add ``weight_decay[k] * W_k``, the gradient of ``weight_decay * weight_penalty()``, to
        the gradients of the penalised weights (after ``backward()``). The same gradient as
        autograd's through :meth:`weight_penalty`, without the forward pass over every weight and
        the full-size gradient that autograd would then add to the loss's. ``weight_decay``: (K,).
        (With a :class:`~.optim.FlatAdam` the training adds it in one operation, the
        :meth:`penalty_scales` laid out as its buffer.)
        """
        for w, scale in self.penalty_scales(weight_decay, include_representation):
            if w.grad is None:
                w.grad = scale * w
            else:
                w.grad.addcmul_(scale, w)

    def _arm_factor(self, like: torch.Tensor) -> torch.Tensor:
        """Each arm's multiplier of the heads' L2 penalty, (n_arms,)."""
        return torch.as_tensor(self.arm_penalty, dtype=like.dtype, device=like.device)

    @torch.no_grad()
    def select(self, models: Sequence[int], head_form=None) -> "CFRNet":
        """A new ``CFRNet`` holding only the given models (used for save/inspection).

        Only those models' parameters are copied: the ``deepcopy`` is handed their new
        parameters in its memo, so that it does not first copy all ``K`` models (selecting each
        member of a 100-model stack used to copy the whole stack 100 times). ``head_form``
        ("separate" or "robinson"), or one of them per selected model: the form the selected
        models were trained in, where a stack of both forms (:meth:`_outcomes`' ``robinson``)
        trained them (None: this network's). Models of both forms make a network that keeps
        each model's form (:attr:`robinson_models`)."""
        import copy

        forms = [head_form] * len(models) if head_form is None or isinstance(head_form, str) \
            else list(head_form)
        if len(forms) != len(models) or not (
                set(forms) <= {None} or set(forms) <= {"separate", "robinson"}) or (
                forms[0] is not None and self.effect_form and not self.robinson):
            raise ValueError(f"head_form={head_form!r}: a stack of both forms holds 'separate' "
                             f"or 'robinson' models (one form, or one per selected model)")
        idx = torch.as_tensor(list(models), dtype=torch.long, device=self.rep_weights[0].device)
        memo = {id(p): nn.Parameter(p.detach().index_select(0, idx), requires_grad=p.requires_grad)
                for p in self.parameters()}
        new = copy.deepcopy(self, memo)
        new.n_models = len(models)
        if self.robinson_models is not None:
            new.robinson_models = self.robinson_models[idx.cpu()]
        if forms[0] is not None:
            new.robinson = "robinson" in forms and new.n_arms >= 2
            new.effect_form = new.robinson
            both = new.robinson and "separate" in forms
            new.robinson_models = torch.as_tensor([f == "robinson" for f in forms]) if both \
                else None
        return new


@torch.no_grad()
def predict(net: CFRNet, x: torch.Tensor, *, batch_size: int = 65536,
            representation: bool = False, e: torch.Tensor | None = None):
    """Outputs of every model on shared covariates ``x`` (n, d), in batches; ``e`` (n, n_arms):
    the rows' propensities of ``head_form="robinson"`` (:meth:`CFRNet.heads`; None: the
    effect form's centring, the same effects).

    Returns ``outputs`` (K, n_arms, n), and with ``representation=True`` also ``phi``
    (K, n, rep_dim).
    """
    net.eval()
    device = net.rep_weights[0].device
    k = net.n_models
    outs, phis = [], []
    for start in range(0, x.shape[0], batch_size):
        xb = x[start : start + batch_size].to(device)
        eb = None if e is None else e[start : start + batch_size].to(device).unsqueeze(0)
        phi, out = net(xb.unsqueeze(0).expand(k, -1, -1), eb)
        outs.append(out)
        if representation:
            phis.append(phi)
    out = torch.cat(outs, dim=2) if outs else torch.empty(k, net.n_arms, 0)
    if representation:
        return out, (torch.cat(phis, dim=1) if phis else torch.empty(k, 0, 0))
    return out
