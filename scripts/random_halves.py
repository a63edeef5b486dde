"""The balance penalty without the treatment: each batch's IPM between two random halves.

``docs/parameters.md``, item 44: does the penalty help by balancing the arms (Theorem 1) or by its
pull at chance level, which shrinks the representation whatever the arms? This script trains
every fit with the batch's Wasserstein term between two random parts of the batch, of the arms'
sizes and drawn afresh every step, blind to the treatment (a dose: a random quarter against the
rest, as the interval IPM compares each of four strata with the rest). Everything else -- the
validation objective, early stopping, the doubly robust stage -- is the default's. It then runs
``crossfit_compare.py`` with the arguments given, so the two CSVs compare data set by data set::

    python scripts/crossfit_compare.py realistic --designs held-out --seeds 0 --out /tmp/m/arms
    python scripts/random_halves.py realistic --designs held-out --seeds 0 --out /tmp/m/halves
    python scripts/crossfit_compare.py compare /tmp/m/arms/realistic.csv /tmp/m/halves/realistic.csv

With ``benchmarks`` first it runs ``python -m dowhy_cfr.benchmarks`` instead (one process: no
``--workers``), e.g. the dose designs against the same command without the hook::

    python scripts/random_halves.py benchmarks dose --designs ihdp,vcnet --methods CFR --seeds 0-9

An experiment, not an option of the package: the hook replaces a private method of the core's
training runs for this process only.
"""

from __future__ import annotations

import torch

from dowhy_cfr.core import training
from dowhy_cfr.core.ipm import imbalance_blocks
from dowhy_cfr.core.objective import arm_imbalance_blocks, ipm_subset


def _shuffled(blocks) -> torch.Tensor:
    """The rows of all blocks (K, n_j, r) in one random order, (K, sum n_j, r)."""
    rows = torch.cat(list(blocks), 1)
    return rows[:, torch.randperm(rows.shape[1], device=rows.device)]


def halves_imbalance(self, blocks, _group) -> torch.Tensor:
    """The arms' IPM (:func:`arm_imbalance_blocks`) of random groups of the arms' sizes."""
    blocks = ipm_subset(blocks, self.config.ipm_max_units)
    rows = _shuffled(blocks)
    sizes = [b.shape[1] for b in blocks]
    return arm_imbalance_blocks(list(rows.split(sizes, 1)), self.ipm_kw)


def quarter_imbalance(self, blocks, _group) -> torch.Tensor:
    """A dose's batch: a random 1/len(blocks) of the rows against the rest."""
    blocks = ipm_subset(blocks, self.config.ipm_max_units)
    rows = _shuffled(blocks)
    q = max(1, rows.shape[1] // len(blocks))
    return imbalance_blocks(rows[:, :q], rows[:, q:], **self.ipm_kw)


if __name__ == "__main__":
    import runpy
    import sys

    training.StackedRun._block_imbalance = halves_imbalance
    training.DoseRun._block_imbalance = quarter_imbalance
    if sys.argv[1:2] == ["benchmarks"]:
        sys.argv = ["dowhy_cfr.benchmarks", *sys.argv[2:]]
        runpy.run_module("dowhy_cfr.benchmarks", run_name="__main__", alter_sys=True)
    else:
        import crossfit_compare  # this script's folder is on sys.path

        crossfit_compare.main()
