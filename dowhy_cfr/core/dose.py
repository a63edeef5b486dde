r"""Continuous treatments: heads whose weights vary with the dose, and the interval IPM.

A continuous treatment ``t`` (a dose, a price, hours) has no arms to give one head each. Two
published generalisations of CFR are combined here:

* **Varying-coefficient heads** (VCNet; Nie, Ye, Liu & Nicolae, ICLR 2021, Sec. 4.1): every layer
  of the outcome head has weights that are a spline function of the dose,

  .. math::

      \theta(s) = \sum_{b=1}^{B} \theta_b\, B_b(s), \qquad
      h_{l+1} = \sigma\Big(\sum_b B_b(s)\,(h_l W_{l,b} + c_{l,b})\Big),

  with :math:`s \in [0, 1]` the dose scaled by the training range and :math:`B_b` a spline
  basis (:func:`bspline_basis`; VCNet used a truncated power basis of degree 2 with knots 1/3
  and 2/3, the same space as the B-splines used here, which are better conditioned). The
  prediction :math:`\mu(x, t) = h(\Phi(x), s(t))` is then continuous (for degree >= 1) in
  :math:`t`, which dose-stratum heads (DRNet; Schwab et al., AAAI 2020) are not, and the
  heads share their statistical strength across all doses. :class:`DoseNet` holds ``K``
  such networks stacked, as :class:`~dowhy_cfr.core.network.CFRNet` does.

* **The interval IPM** (ADMIT; Wang et al., NeurIPS 2022, Sec. 4): the counterfactual error of
  :math:`\mu(x, t)` over all doses is bounded by the factual error plus the IPM, in the
  representation, between the units whose dose lies in an interval :math:`\Delta_j` of a
  partition of the dose range and the whole population, weighted by the intervals' shares,

  .. math::

      \int \epsilon_{CF}(t)\,dt \;\lesssim\; \epsilon_F
          + B_\Phi \sum_{j=1}^{m} P(t \in \Delta_j)\,
            \mathrm{IPM}_G\big(p_\Phi(r \mid t \in \Delta_j),\; p_\Phi(r)\big)
          + O(\max_j |\Delta_j|),

  the last term from treating the dose as constant within an interval (a Lipschitz outcome).
  Since the marginal is the mixture :math:`p = w_j p_j + (1 - w_j) p_{-j}` of an interval's
  distribution and the rest's, any IPM satisfies :math:`\mathrm{IPM}(p_j, p) = (1 - w_j)\,
  \mathrm{IPM}(p_j, p_{-j})` (the supremum of :math:`|E_{p_j} f - E_p f|` scales so), and with
  ``m`` equal-count intervals (dose strata, :math:`w_j = 1/m`) the middle term is
  :math:`(1 - 1/m)` times the mean over strata of the IPM between a stratum's
  representations and the other strata's. :func:`interval_imbalance` is that mean (the
  constant factor goes into ``alpha``); with two strata it is exactly the binary
  :math:`\mathrm{IPM}(\Phi \mid t=0, \Phi \mid t=1)` of Shalit et al. Comparing with the
  complement rather than the pooled sample keeps a unit out of both sides (the unbiased RBF
  MMD would otherwise count its pairs with itself). ADMIT also learns reweighting functions;
  those are not used here (the doubly robust stage of the estimator corrects the average
  curve instead).

Only torch and numpy are imported here.

References
----------
* [1] L. Nie, M. Ye, Q. Liu, D. Nicolae. "VCNet and functional targeted regularization for
  learning causal effects of continuous treatments." ICLR 2021.
* [2] X. Wang, S. Lyu, X. Wu, T. Wu, H. Chen. "Generalization bounds for estimating causal
  effects of continuous treatments." NeurIPS 2022.
* [3] P. Schwab, L. Linhardt, S. Bauer, J. M. Buhmann, W. Karlen. "Learning counterfactual
  representations for estimating individual dose-response curves." AAAI 2020.
* [4] C. de Boor. "A Practical Guide to Splines." Springer, 1978 (the recursion of
  :func:`bspline_basis`).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch.nn import functional as F

from .config import CFRConfig
from .ipm import imbalance, imbalance_blocks
from .network import CFRNet, stacked_matmul

__all__ = ["DoseNet", "bspline_basis", "knot_vector", "interval_imbalance",
           "interval_imbalance_blocks", "predict_dose", "predict_dose_grid", "dose_strata"]

_DEFAULT = CFRConfig()


def knot_vector(degree: int, n_knots: int) -> np.ndarray:
    """The clamped knot vector on [0, 1]: ``degree + 1`` zeros, ``n_knots`` equally spaced
    interior knots, ``degree + 1`` ones; it spans ``degree + 1 + n_knots`` B-splines."""
    interior = np.arange(1, n_knots + 1) / (n_knots + 1)
    return np.concatenate([np.zeros(degree + 1), interior, np.ones(degree + 1)])


def bspline_basis(s: torch.Tensor, degree: int = _DEFAULT.spline_degree,
                  n_knots: int = _DEFAULT.spline_knots) -> torch.Tensor:
    r"""The B-spline basis :math:`B_1(s), \dots, B_B(s)` at doses ``s`` scaled to [0, 1].

    Cox-de Boor's recursion on the clamped knot vector :math:`u` of :func:`knot_vector`,

    .. math::

        B_{i,0}(s) = 1[u_i \le s < u_{i+1}], \qquad
        B_{i,d}(s) = \frac{s - u_i}{u_{i+d} - u_i} B_{i,d-1}(s)
                   + \frac{u_{i+d+1} - s}{u_{i+d+1} - u_{i+1}} B_{i+1,d-1}(s),

    with the last interval closed at 1. The functions are non-negative and sum to one at every
    ``s`` (so equal coefficients give a constant), and piecewise polynomials of degree
    ``degree``, whose derivative in ``s`` autograd follows. ``s`` outside [0, 1] is clamped
    (the estimator refuses such doses before they get here).

    Parameters
    ----------
    s : tensor, any shape
    degree, n_knots : int
        Spline degree and number of interior knots (``B = degree + 1 + n_knots`` functions).

    Returns
    -------
    tensor, shape ``s.shape + (B,)``
    """
    u = knot_vector(degree, n_knots)
    s = s.clamp(0.0, 1.0).unsqueeze(-1)
    left = torch.as_tensor(u[:-1], dtype=s.dtype, device=s.device)
    right = torch.as_tensor(u[1:], dtype=s.dtype, device=s.device)
    basis = ((s >= left) & (s < right)).to(s.dtype)
    last = int(np.flatnonzero(np.diff(u) > 0)[-1])  # the last non-empty interval: closed at 1
    at_one = (s[..., 0] >= 1.0).to(s.dtype)
    basis[..., last] = basis[..., last] + at_one
    for d in range(1, degree + 1):
        terms = []
        for i in range(len(u) - d - 1):
            term = 0.0
            if u[i + d] > u[i]:
                term = term + (s[..., 0] - u[i]) / (u[i + d] - u[i]) * basis[..., i]
            if u[i + d + 1] > u[i + 1]:
                term = term + (u[i + d + 1] - s[..., 0]) / (u[i + d + 1] - u[i + 1]) \
                    * basis[..., i + 1]
            terms.append(term if torch.is_tensor(term) else torch.zeros_like(s[..., 0]))
        basis = torch.stack(terms, -1)
    return basis


def dose_strata(dose: np.ndarray, n_strata: int) -> np.ndarray:
    """Equal-count dose strata 0..n_strata-1 by rank (ties broken by position, stable): the
    intervals :math:`\\Delta_j` of :func:`interval_imbalance`, and the "arms" by which folds,
    validation splits and mini-batches are stratified."""
    dose = np.asarray(dose, dtype=float).reshape(-1)
    rank = np.empty(len(dose), dtype=np.int64)
    rank[np.argsort(dose, kind="stable")] = np.arange(len(dose))
    return (rank * n_strata // max(len(dose), 1)).astype(np.int64)


class DoseNet(CFRNet):
    """``K`` stacked networks with a representation Phi (as :class:`CFRNet`) and one outcome
    head whose layers' weights are spline functions of the scaled dose (module docstring).

    The head has ``n_head_layers`` ELU layers of width ``head_dim`` and a linear output, every
    layer varying with the dose through ``B = spline_degree + 1 + spline_knots`` coefficient
    sets: weights are stored as (K, fan_in, fan_out * B), so each layer is one batched matrix
    product followed by the contraction with the basis. Initial weights: N(0, (weight_init /
    sqrt(fan_in))^2) for every coefficient set, biases 0; model k's draws depend only on
    ``seeds[k]``.
    """

    def __init__(self, d_in: int, seeds: Sequence[int], *,
                 spline_degree: int = _DEFAULT.spline_degree,
                 spline_knots: int = _DEFAULT.spline_knots, **network_kwargs):
        self.spline_degree, self.spline_knots = int(spline_degree), int(spline_knots)
        self.n_basis = self.spline_degree + 1 + self.spline_knots
        super().__init__(d_in, seeds, n_arms=1, **network_kwargs)

    def _draw_head(self, gen: torch.Generator, fan_in: int, fan_out: int,
                   weight_init: float) -> torch.Tensor:
        """One model's head layer: ``n_basis`` coefficient sets side by side, (fan_in,
        fan_out * n_basis), the set of basis function b in columns ``b::n_basis``."""
        return (torch.randn(fan_in, fan_out * self.n_basis, generator=gen, dtype=torch.float64)
                * (weight_init / math.sqrt(fan_in)))

    def _head_bias(self, fan_out: int, **kw) -> torch.Tensor:
        return torch.zeros(self.n_models, 1, fan_out * self.n_basis, **kw)

    @classmethod
    def from_config(cls, config: CFRConfig, d_in: int, seeds: Sequence[int], *, n_arms: int = 1,
                    dtype: torch.dtype = torch.float32,
                    device: torch.device | str = "cpu") -> "DoseNet":
        """``K = len(seeds)`` dose networks with the architecture of ``config``."""
        return cls(d_in, seeds, spline_degree=config.spline_degree,
                   spline_knots=config.spline_knots, dtype=dtype, device=device,
                   **config.network_kwargs())

    def basis(self, s: torch.Tensor) -> torch.Tensor:
        """:func:`bspline_basis` of the scaled doses ``s`` (K, B) -> (K, B, n_basis)."""
        return bspline_basis(s, self.spline_degree, self.spline_knots)

    def heads(self, phi: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        r"""The outcome :math:`h(\Phi, s)`: (K, B, rep_dim), scaled doses (K, B) -> (K, B)."""
        return self.basis_heads(phi, self.basis(s))

    def basis_heads(self, phi: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
        """:meth:`heads` given the doses' basis (K, B, n_basis) (training computes it once per
        unit, not per step)."""
        basis = basis.unsqueeze(-2)  # (K, B, 1, n_basis)
        h, last = phi, len(self.head_weights) - 1
        for i, (w, b) in enumerate(zip(self.head_weights, self.head_biases)):
            z = stacked_matmul(h, w, b)  # (K, B, fan_out * n_basis)
            h = (z.unflatten(-1, (-1, self.n_basis)) * basis).sum(-1)  # sum_b B_b(s) z_b
            if i < last:
                h = F.elu(h)
        return h.squeeze(-1)

    def forward(self, x: torch.Tensor, s: torch.Tensor):
        """Returns ``(phi, outputs)``: Phi(x) (K, B, rep_dim) and h(Phi(x), s) (K, B)."""
        phi = self.representation(x)
        return phi, self.heads(phi, s)


def interval_imbalance(phi: torch.Tensor, strata: torch.Tensor, n_strata: int,
                       ipm_kw: dict) -> torch.Tensor:
    r"""The interval IPM (module docstring) on rows with ragged strata: the mean over dose
    strata :math:`j` of :math:`\mathrm{IPM}(\Phi \mid t \in \Delta_j,\; \Phi \mid t \notin
    \Delta_j)`, by :func:`~dowhy_cfr.core.ipm.imbalance` with the stratum as the "treated" rows.

    ``phi`` (K, B, r); ``strata`` (K, B) long in 0..n_strata-1 (every stratum present in each
    model's rows). Returns (K,).
    """
    total = 0.0
    for j in range(n_strata):
        total = total + imbalance(phi, strata == j, check=False, **ipm_kw)
    return total / n_strata


def interval_imbalance_blocks(blocks: Sequence[torch.Tensor], ipm_kw: dict) -> torch.Tensor:
    """:func:`interval_imbalance` of a stratum-blocked batch: ``blocks[j]`` (K, n_j, r) holds the
    representations of stratum j's rows, compared with those of the other strata. Returns (K,).

    Strata of equal size are stacked along the model axis and compared with their complements
    in one call (one Sinkhorn for the four strata of a batch of 100, not four)."""
    k, total = blocks[0].shape[0], 0.0
    for size in sorted({b.shape[1] for b in blocks}):
        same = [j for j, b in enumerate(blocks) if b.shape[1] == size]
        rest = [torch.cat([b for i, b in enumerate(blocks) if i != j], 1) for j in same]
        ipm = imbalance_blocks(torch.cat([blocks[j] for j in same], 0), torch.cat(rest, 0),
                               **ipm_kw)
        total = total + ipm.view(len(same), k).sum(0)
    return total / len(blocks)


@torch.no_grad()
def predict_dose(net: DoseNet, x: torch.Tensor, s: torch.Tensor, *,
                 batch_size: int = 65536) -> torch.Tensor:
    """Every model's ``h(Phi(x_i), s_i)`` for shared rows ``x`` (n, d) and scaled doses ``s``:
    (n,) shared by the models, or (K, n), model k's own (models on scales of their own).
    Returns (K, n)."""
    net.eval()
    device = net.rep_weights[0].device
    k, outs = net.n_models, []
    s = s.unsqueeze(0).expand(k, -1) if s.ndim == 1 else s
    for start in range(0, x.shape[0], batch_size):
        xb = x[start:start + batch_size].to(device)
        sb = s[:, start:start + batch_size].to(device=device, dtype=xb.dtype)
        outs.append(net(xb.unsqueeze(0).expand(k, -1, -1), sb)[1])
    return torch.cat(outs, 1) if outs else torch.empty(k, 0)


@torch.no_grad()
def predict_dose_grid(net: DoseNet, x: torch.Tensor, grid: torch.Tensor, *,
                      max_rows: int = 65536) -> torch.Tensor:
    """Every model's curve ``h(Phi(x_i), s)`` of shared rows ``x`` (n, d) at every scaled dose
    of ``grid``: (G,) shared by the models, or (K, G), model k's own. Returns (K, n, G). Phi is
    computed once per unit; the heads run on (unit, dose) pairs, ``max_rows`` at a time."""
    net.eval()
    device = net.rep_weights[0].device
    k = net.n_models
    grid = grid.to(device=device, dtype=x.dtype)
    grid = grid.unsqueeze(0).expand(k, -1) if grid.ndim == 1 else grid
    g = grid.shape[1]
    per = max(1, max_rows // max(g, 1))
    outs = []
    for start in range(0, x.shape[0], per):
        xb = x[start:start + per].to(device)
        phi = net.representation(xb.unsqueeze(0).expand(k, -1, -1))  # (K, m, r)
        m = phi.shape[1]
        pairs = phi.unsqueeze(2).expand(-1, -1, g, -1).reshape(k, m * g, -1)
        s = grid.repeat(1, m)  # (K, m * G): each unit's G doses in turn
        outs.append(net.heads(pairs, s).reshape(k, m, g))
    return torch.cat(outs, 1) if outs else torch.empty(k, 0, g)
