"""The train / validation / test index split shared by the benchmark data sets."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class TrainValTestSplit(NamedTuple):
    """Index arrays of a split (each sorted ascending, ``int64``)."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray

    @property
    def within(self) -> np.ndarray:
        """The "within-sample" units: ``train`` and ``val`` together, sorted."""
        return np.sort(np.concatenate([self.train, self.val]))
