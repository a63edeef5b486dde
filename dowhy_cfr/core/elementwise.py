"""Elementwise functions whose result for model k does not depend on the other models of a stack.

PyTorch's CPU kernels compute ``exp``-based functions (``exp``, ``elu``) with vector instructions
on the bulk of a tensor and a scalar loop on its last, partial chunk of elements, and the two round
differently. A model's elements that end a K = 1 tensor but sit in the middle of a stacked one
would then round differently alone and in a stack. :func:`per_model` pads each model's elements to
a whole number of chunks, so every model's elements take the same path whatever K.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.nn import functional as F

__all__ = ["per_model", "elu"]

# elements per vectorised chunk of ATen's CPU loops: 64 covers AVX2 and AVX-512, float32/64
_CHUNK = 64


def per_model(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``fn(x)`` for an elementwise ``fn`` and ``x`` of shape (K, ...), each model's elements
    padded with zeros to a multiple of 64 (a no-op when they already are, and on GPUs)."""
    n = x[0].numel() if x.shape[0] else 0
    pad = -n % _CHUNK
    if pad == 0 or x.device.type != "cpu":
        return fn(x)
    flat = F.pad(x.reshape(x.shape[0], n), (0, pad))
    return fn(flat)[:, :n].reshape(x.shape)


def elu(x: torch.Tensor) -> torch.Tensor:
    """``F.elu`` of a stacked (K, ...) tensor, model by model identical for any K."""
    return per_model(F.elu, x)
