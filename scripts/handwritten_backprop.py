"""Measurement (not used by the package): the network's forward and backward passes with the
chain rule written out, one autograd node each for Phi and for the factual heads, against the
package's autograd graph of the same operations.

Tried on 2026-11-24 as a way to cut per-step overhead. The gradients are bit for bit those of
autograd (checked below on 48 configurations: K = 1 and 3, 2 and 3 arms, 0-3 head layers, both
normalisations, float32 and float64), but a training step's network forward and backward was
no faster (``docs/results.md``, "Speed"): autograd's bookkeeping is not where the time goes; the
operations' dispatch and kernels are, and these run the same operations.

    PYTHONPATH=<checkout> python scripts/handwritten_backprop.py
"""

from __future__ import annotations

import itertools
import time

import torch
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

from dowhy_cfr.core.elementwise import elu
from dowhy_cfr.core.network import CFRNet

_CHUNK = 64  # as dowhy_cfr.core.elementwise


def per_model(fn, x, *more):
    """``fn(x, *more)`` elementwise, each model's elements zero-padded to whole vector chunks
    (as :func:`dowhy_cfr.core.elementwise.per_model`, for several tensors)."""
    n = x[0].numel() if x.shape[0] else 0
    pad = -n % _CHUNK
    if pad == 0 or x.device.type != "cpu":
        return fn(x, *more)
    flat = [F.pad(v.reshape(x.shape[0], n), (0, pad)) for v in (x, *more)]
    return fn(*flat)[:, :n].reshape(x.shape)


#: floor of ``||h||^2`` in the projection onto the unit sphere: keeps the gradient finite at 0
NORM_FLOOR = 1e-10


def _elu_backward(grad: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """``elu'(z) * grad``: the kernel autograd runs for ``F.elu(z)``."""
    return torch.ops.aten.elu_backward(grad, 1.0, 1, 1, False, z)


class Representation(torch.autograd.Function):
    """Phi(x) of ``K`` stacked models: ELU layers, then (``divide``) ``h / ||h||``.

    ``Representation.apply(x, divide, *weights, *biases)``; x (K, B, d_in), weights (K, i, o),
    biases (K, 1, o); returns (K, B, rep_dim).
    """

    @staticmethod
    def forward(ctx, x, divide: bool, *params):
        n = len(params) // 2
        weights, biases = params[:n], params[n:]
        h, saved = x, []
        for w, b in zip(weights, biases):
            z = torch.baddbmm(b, h, w)  # z_l = h_l W_l + b_l
            saved += [h, z]
            h = F.elu(z)
        if divide:  # project onto the unit sphere
            s = h.pow(2).sum(-1, keepdim=True)
            r = torch.rsqrt(s.clamp_min(NORM_FLOOR))
            saved += [h, s, r]
            h = h * r
        ctx.divide, ctx.n_layers = divide, n
        ctx.save_for_backward(*saved, *weights)
        return h

    @staticmethod
    @once_differentiable
    def backward(ctx, dphi):
        saved, n = ctx.saved_tensors, ctx.n_layers
        weights, g = saved[-n:], dphi
        if ctx.divide:
            h, s, r = saved[2 * n: 2 * n + 3]
            ds = torch.where(s >= NORM_FLOOR, (g * h).sum(-1, keepdim=True) * -0.5 * r.pow(3),
                             0.0)
            g = g * r + ds.expand_as(h) * (h * 2.0)
        grad_w, grad_b = [None] * n, [None] * n
        for layer in reversed(range(n)):
            h_in, z = saved[2 * layer], saved[2 * layer + 1]
            dz = _elu_backward(g, z)
            grad_w[layer] = h_in.transpose(1, 2).bmm(dz)
            grad_b[layer] = dz.sum(1, keepdim=True)
            if layer > 0 or ctx.needs_input_grad[0]:
                g = dz.bmm(weights[layer].transpose(1, 2))
        return (g if ctx.needs_input_grad[0] else None), None, *grad_w, *grad_b


class FactualHeads(torch.autograd.Function):
    """Each arm's head on that arm's rows, for ``K`` stacked models.

    ``FactualHeads.apply(n_arms, *blocks, *weights, *biases)``: ``blocks[a]`` (K, n_a, rep_dim)
    holds Phi of arm a's rows; weights (K, n_arms, i, o), biases (K, n_arms, 1, o), the last layer
    with ``o = 1``. Returns h_a(Phi) for every row, (K, sum n_a), in block order. The arms'
    pre-activations share one ELU call, padded per model (:mod:`.elementwise`).
    """

    @staticmethod
    def forward(ctx, n_arms: int, *tensors):
        blocks, params = tensors[:n_arms], tensors[n_arms:]
        n = len(params) // 2
        weights, biases = params[:n], params[n:]
        sizes = [blk.shape[1] for blk in blocks]
        hs, saved = list(blocks), []
        for layer in range(n - 1):
            w, b = weights[layer].unbind(1), biases[layer].unbind(1)
            z = torch.cat([torch.baddbmm(b[a], h, w[a]) for a, h in enumerate(hs)], 1)
            saved += [*hs, z]
            hs = elu(z).split(sizes, 1)
        # the output layer as a product-sum, not bmm: a matrix-vector bmm rounds differently
        # for K = 1 and in a stack
        w, b = weights[-1].unbind(1), biases[-1].unbind(1)
        out = torch.cat([(h * w[a].transpose(1, 2)).sum(-1) + b[a].squeeze(-1)
                         for a, h in enumerate(hs)], 1)
        ctx.sizes, ctx.n_layers = sizes, n
        ctx.save_for_backward(*saved, *hs, *weights)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        sizes, n = ctx.sizes, ctx.n_layers
        arms, per_layer = range(len(sizes)), len(sizes) + 1  # saved per hidden layer: hs, z
        saved = ctx.saved_tensors
        weights, h_out = saved[-n:], saved[-n - len(sizes): -n]
        grad_w, grad_b = [None] * n, [None] * n
        # output layer, out_a = sum_j h_aj w_aj + b_a
        d = dout.split(sizes, 1)
        w = weights[-1].unbind(1)
        grad_b[-1] = torch.stack([d[a].sum(1, keepdim=True).unsqueeze(-1) for a in arms], 1)
        d = [d[a].unsqueeze(-1).expand_as(h_out[a]) for a in arms]
        grad_w[-1] = torch.stack([(d[a] * h_out[a]).sum(1, keepdim=True).transpose(1, 2)
                                  for a in arms], 1)
        dh = [d[a] * w[a].transpose(1, 2) for a in arms]
        for layer in reversed(range(n - 1)):  # dz_l = elu'(z_l) dh_{l+1}, then dW, db, dh_l
            h_in = saved[layer * per_layer: layer * per_layer + len(sizes)]
            z = saved[layer * per_layer + len(sizes)]
            dz = per_model(_elu_backward, torch.cat(dh, 1), z).split(sizes, 1)
            w = weights[layer].unbind(1)
            grad_w[layer] = torch.stack([h_in[a].transpose(1, 2).bmm(dz[a]) for a in arms], 1)
            grad_b[layer] = torch.stack([dz[a].sum(1, keepdim=True) for a in arms], 1)
            dh = [dz[a].bmm(w[a].transpose(1, 2)) for a in arms]
        return None, *dh, *grad_w, *grad_b


def _check_bit_identity() -> bool:
    torch.manual_seed(0)
    same = True
    for k, n_arms, n_head, norm, dtype in itertools.product(
            [1, 3], [2, 3], [0, 1, 3], ["divide", "none"], [torch.float32, torch.float64]):
        net = CFRNet(25, list(range(k)), n_arms=n_arms, n_head_layers=n_head,
                     normalization=norm, rep_dim=48, head_dim=30, dtype=dtype)
        sizes = [37, 19, 11][:n_arms]
        x = torch.randn(k, sum(sizes), 25, dtype=dtype)
        g_phi = torch.randn(k, sum(sizes), 48, dtype=dtype)
        g_out = torch.randn(k, sum(sizes), dtype=dtype)

        def run(written_out):
            for p in net.parameters():
                p.grad = None
            if written_out:
                phi = Representation.apply(x, norm == "divide", *net.rep_weights, *net.rep_biases)
                out = FactualHeads.apply(n_arms, *phi.split(sizes, 1), *net.head_weights,
                                         *net.head_biases)
            else:
                phi = net.representation(x)
                out = net.factual_heads(phi.split(sizes, 1))
            ((phi * g_phi).sum() + (out * g_out).sum()).backward()
            return [phi.detach(), out.detach()] + [p.grad.clone() for p in net.parameters()]

        same &= all(torch.equal(a, b) for a, b in zip(run(False), run(True)))
    return same


def _time(written_out: bool, steps: int = 1000) -> float:
    """ms per forward and backward of the default network on an IHDP-sized batch (81 + 19)."""
    torch.manual_seed(0)
    net = CFRNet(25, [0])
    x, sizes = torch.randn(1, 100, 25), [81, 19]
    g_phi, g_out = torch.randn(1, 100, 200), torch.randn(1, 100)
    params = list(net.parameters())

    def step():
        if written_out:
            phi = Representation.apply(x, True, *net.rep_weights, *net.rep_biases)
            out = FactualHeads.apply(2, *phi.split(sizes, 1), *net.head_weights,
                                     *net.head_biases)
        else:
            phi = net.representation(x)
            out = net.factual_heads(phi.split(sizes, 1))
        torch.autograd.backward([phi, out], [g_phi, g_out])
        for p in params:
            p.grad = None

    for _ in range(50):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps * 1e3


def main():
    torch.set_num_threads(1)
    print("gradients bit-identical to autograd's:", _check_bit_identity())
    for _ in range(3):
        print(f"autograd {_time(False):.2f} ms, written out {_time(True):.2f} ms", flush=True)


if __name__ == "__main__":
    main()
