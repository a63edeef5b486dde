"""Offline reproduction of the experiments of Shalit, Johansson & Sontag (ICML 2017).

Run ``python -m dowhy_cfr.benchmarks {ihdp,jobs,imbalance,speed} --help``; the commands are
described in ``docs/benchmarks.md``. From Python, :func:`main` takes the same argument list.

Modules: :mod:`.ihdp` (Table 1, IHDP), :mod:`.jobs` (Table 1, Jobs, and the policy curve),
:mod:`.imbalance` (Fig. 2), :mod:`.speed` (stacked vs sequential vs plain PyTorch),
:mod:`.methods` (the compared methods), :mod:`.report` (tables and files).
"""

from .cli import main

__all__ = ["main"]
