"""Adam on one flat buffer: a stack's step in a handful of tensor operations.

A default fit's networks are small (five members of 2 x 32 units) and their step is bound by the
number of tensor operations, not by arithmetic: ``torch.optim.Adam``'s fused kernel took 0.1 ms
of a step, its Python wrapper, ``zero_grad``, the weight average and the L2 gradient another
1.4 ms, one operation per parameter tensor each (``docs/parameters.md``, item 29).
:class:`FlatAdam` keeps every parameter of the stack as a view into one contiguous buffer and
every gradient as a view into another, so Adam's update, the zeroing of the gradients, the
weight average's update (:class:`~.training.WeightAverage` on :attr:`FlatAdam.flat`) and the L2
term's gradient (:meth:`FlatAdam.add_scaled`) are each one to seven operations on the whole
stack.

Adam is element-wise, so the stacked models stay independent, as with ``torch.optim.Adam``.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import torch

__all__ = ["FlatAdam"]


class FlatAdam:
    r"""Adam (Kingma & Ba, ICLR 2015; ``torch.optim.Adam``'s defaults: no weight decay, no
    AMSGrad) over parameters that live in one flat buffer.

    With gradient :math:`g_s` at step :math:`s`,

    .. math:: m_s = \beta_1 m_{s-1} + (1 - \beta_1) g_s, \qquad
              v_s = \beta_2 v_{s-1} + (1 - \beta_2) g_s^2, \qquad
              w_s = w_{s-1} - \frac{\eta}{1 - \beta_1^s}
                    \frac{m_s}{\sqrt{v_s / (1 - \beta_2^s)} + \epsilon},

    computed in the order of ``torch.optim.Adam``'s single-tensor code, on the whole buffer at
    once. The parameters' ``data`` become views of :attr:`flat` and their ``grad`` views of
    :attr:`grad`, so autograd accumulates into the buffer and :meth:`zero_grad` is one
    operation. ``param_groups[0]["lr"]`` is the learning rate, as for a torch optimiser.

    With the weight average and the L2 gradient on the same buffer it took the bookkeeping of a
    default fit's step at n = 1,500 from 1.47 to about 0.5 ms, and a fit 8-9 % less time on the
    realistic designs, paired (``docs/parameters.md``, item 29).

    Parameters
    ----------
    params : iterable of Parameter
        Every parameter of the stack (their values are copied into the buffer).
    lr : float
        The learning rate.
    betas, eps : as ``torch.optim.Adam``.
    state : (list, list, int) or None
        Per parameter the first and second moments, and the step count, to continue from
        (:meth:`kept`); None starts at zero.
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, *,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 state: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor], int] | None = None):
        self.params = list(params)
        self.sizes = [p.numel() for p in self.params]
        self.betas, self.eps = betas, eps
        self.param_groups = [{"lr": float(lr)}]
        with torch.no_grad():
            self.flat = torch.cat([p.detach().reshape(-1) for p in self.params])
            if state is None:
                self.exp_avg = torch.zeros_like(self.flat)
                self.exp_avg_sq = torch.zeros_like(self.flat)
                self.n_steps = 0
            else:
                moments, squares, self.n_steps = state
                self.exp_avg = torch.cat([m.reshape(-1) for m in moments])
                self.exp_avg_sq = torch.cat([v.reshape(-1) for v in squares])
        self.grad = torch.zeros_like(self.flat)
        for p, value, grad in zip(self.params, self.views(self.flat), self.views(self.grad)):
            p.data = value
            p.grad = grad

    def views(self, buffer: torch.Tensor) -> list[torch.Tensor]:
        """``buffer`` (a flat tensor laid out as :attr:`flat`) as one view per parameter."""
        return [piece.view_as(p) for p, piece in zip(self.params, buffer.split(self.sizes))]

    @torch.no_grad()
    def buffer_of(self, values: dict) -> torch.Tensor:
        """A buffer laid out as :attr:`flat`: ``values[p]`` (broadcast to ``p``'s shape) for each
        parameter ``p`` it names, zero for the others."""
        buffer = torch.zeros_like(self.flat)
        for p, view in zip(self.params, self.views(buffer)):
            if p in values:
                view.copy_(values[p].expand_as(p))
        return buffer

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero every gradient (``set_to_none`` is accepted for torch's signature; the gradients
        stay views of the buffer)."""
        self.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every parameter."""
        beta1, beta2 = self.betas
        self.n_steps += 1
        lr = self.param_groups[0]["lr"]
        self.exp_avg.lerp_(self.grad, 1.0 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(self.grad, self.grad, value=1.0 - beta2)
        denom = (self.exp_avg_sq.sqrt() / math.sqrt(1.0 - beta2 ** self.n_steps)).add_(self.eps)
        self.flat.addcdiv_(self.exp_avg, denom, value=-lr / (1.0 - beta1 ** self.n_steps))

    @torch.no_grad()
    def add_scaled(self, scale: torch.Tensor) -> None:
        """Add ``scale * w`` to the gradients (``scale`` laid out as :attr:`flat`,
        :meth:`buffer_of`): the gradient of a weighted L2 penalty ``sum scale w^2 / 2``."""
        self.grad.addcmul_(scale, self.flat)

    def kept(self, params: Iterable[torch.nn.Parameter], keep: torch.Tensor) -> "FlatAdam":
        """An optimiser over ``params`` (the stack's parameters after only the models ``keep``,
        bool over the model axis, stayed) with those models' moments and the step count."""
        moments = [m[keep] for m in self.views(self.exp_avg)]
        squares = [v[keep] for v in self.views(self.exp_avg_sq)]
        return FlatAdam(params, self.param_groups[0]["lr"], betas=self.betas, eps=self.eps,
                        state=(moments, squares, self.n_steps))
