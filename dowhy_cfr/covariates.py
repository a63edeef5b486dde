"""The covariates as the networks see them: the blocks ``X`` and ``W`` of a fit, encoded
(:class:`Columns`, with :class:`~dowhy_cfr.tabular.TableEncoder`), and their scaling with each
member's outcome standardisation (:class:`Preprocessing`, with
:class:`~dowhy_cfr.tabular.FeatureScaler`).

Part of a fit's state (:mod:`dowhy_cfr.fitted`); nothing here trains or imports the estimator.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from . import _validation as V
from .tabular import FeatureScaler, TableEncoder

__all__ = ["Columns", "EncodedX", "Preprocessing", "standardize"]

def _nonzero(scale) -> np.ndarray:
    scale = np.asarray(scale, dtype=float)
    return np.where(scale > 0, scale, 1.0)


def standardize(a: np.ndarray) -> np.ndarray:
    """Columns of ``a`` to mean 0 and standard deviation 1 (constant columns: divided by 1)."""
    return (a - a.mean(0)) / _nonzero(a.std(0))


# ----------------------------------------------------------------------------- covariates
@dataclass
class Columns:
    """The covariate blocks seen at fit: ``n_x`` encoded columns of X and ``n_w`` of W, the
    input column names when they were DataFrames, and each block's
    :class:`~dowhy_cfr.tabular.TableEncoder` (categorical, string and bool columns one-hot
    encoded, missing values imputed with indicators; None: numbers taken as they are)."""

    n_x: int
    n_w: int
    x_names: list | None = None
    w_names: list | None = None
    x_encoder: TableEncoder | None = None
    w_encoder: TableEncoder | None = None

    @classmethod
    def fit(cls, X, W) -> tuple["Columns", np.ndarray | None, np.ndarray | None]:
        """The blocks of a fit's ``X`` and ``W`` (either may be None) and their encoded
        matrices."""
        encoders, blocks = [], []
        for name, A in (("X", X), ("W", W)):
            if A is None:
                encoders.append(None)
                blocks.append(None)
                continue
            enc = TableEncoder().fit(_as_table(name, A))
            encoders.append(enc)
            blocks.append(enc.transform(_as_table(name, A)))
        widths = [0 if b is None else b.shape[1] for b in blocks]
        return (cls(widths[0], widths[1], V.column_names(X), V.column_names(W), *encoders),
                *blocks)

    @property
    def n_features(self) -> int:
        """The number of input columns of X and W (before encoding)."""
        return sum(n if enc is None else enc.n_features_in_ for n, enc in
                   ((self.n_x, self.x_encoder), (self.n_w, self.w_encoder)))

    def block(self, name: str, A, n_rows: int | None = None):
        """``A`` encoded as at fit (a float array), checked against the block ``name`` ("X" or
        "W") of the fit."""
        encoder = self.x_encoder if name == "X" else self.w_encoder
        n_encoded = self.n_x if name == "X" else self.n_w
        names_expected = self.x_names if name == "X" else self.w_names
        if n_encoded == 0:
            if A is not None:
                raise ValueError(f"{name} was not used at fit; pass {name}=None")
            return None
        n_expected = n_encoded if encoder is None else encoder.n_features_in_
        if A is None:
            raise ValueError(f"{name} with {n_expected} column(s) is required (it was used at fit)")
        table = _as_table(name, A)
        got = V.column_names(A)
        if names_expected is not None and got is not None and got != names_expected:
            raise ValueError(V.column_mismatch(
                name, got, names_expected, f"select the {len(names_expected)} fitted columns in "
                f"their order, {name}[{V.shown(names_expected)!r}]"))
        if table.shape[1] != n_expected:
            raise ValueError(f"{name} has {table.shape[1]} columns but the estimator was fitted "
                             f"with {n_expected}")
        arr = V.as_2d_float(name, table) if encoder is None else encoder.transform(table)
        if n_rows is not None and arr.shape[0] != n_rows:
            raise ValueError(f"{name} has {arr.shape[0]} rows, X has {n_rows}; they must match")
        return arr

    def stack(self, X, W) -> np.ndarray:
        """The encoded network input ``[X | W]`` of new units, checked against the fit."""
        x = self.block("X", X)
        w = self.block("W", W, None if x is None else x.shape[0])
        return np.hstack([a for a in (x, w) if a is not None])


class EncodedX:
    """The X block of new units already encoded (:meth:`Columns.block`), as the estimator hands
    it from EconML's treatment expansion to ``const_marginal_effect``."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.shape = array.shape


def _as_table(name: str, A):
    """``A`` as a DataFrame (a Series becomes one column; the caller's object, never written
    to) or a 2-D array (lists and 1-D arrays become columns)."""
    if isinstance(A, pd.Series):
        return A.to_frame()
    if isinstance(A, pd.DataFrame):
        if A.shape[0] == 0:
            raise ValueError(f"{name} is empty (0 rows); fit needs data")
        return A
    try:
        arr = np.asarray(A)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise TypeError(f"{name} could not be converted to an array: {exc}") from exc
    arr = V.as_columns(name, arr)
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (0 rows); fit needs data")
    return arr


# ----------------------------------------------------------------------------- preprocessing
@dataclass
class Preprocessing:
    """Scaling of the covariates and standardisation of each member's outcome, and the way back.

    The networks see ``scaler.transform(xw)`` (:class:`~dowhy_cfr.tabular.FeatureScaler`:
    ``"standard"``, ``"robust"`` or ``"quantile"``; one per member when members train on their
    own covariates) and are trained on ``(y - y_mean[k]) / y_scale[k]`` (squared loss) or on the
    0/1 outcome itself (log-loss: ``y_mean = 0``, ``y_scale = 1`` and outputs are logits).
    """

    loss: str
    scaler: FeatureScaler | list
    y_mean: np.ndarray  # (K,)
    y_scale: np.ndarray  # (K,)

    @property
    def x_mean(self) -> np.ndarray:
        """The covariates' centres (the means under ``"standard"`` scaling)."""
        return self.scaler.center_

    @property
    def x_scale(self) -> np.ndarray:
        """The covariates' scales (the standard deviations under ``"standard"`` scaling)."""
        return self.scaler.scale_

    @classmethod
    def from_moments(cls, loss, x_mean, x_std, y_mean, y_std) -> "Preprocessing":
        """Standard scaling from covariate means/standard deviations and per-member outcome ones
        (arrays (K,)), e.g. statistics computed over chunks or workers."""
        y_mean = np.atleast_1d(np.asarray(y_mean, dtype=float))
        if loss != "mse":
            y_mean, y_std = np.zeros_like(y_mean), np.ones_like(y_mean)
        scaler = FeatureScaler.standard_from_moments(np.asarray(x_mean, dtype=float),
                                                     np.asarray(x_std, dtype=float))
        return cls(loss, scaler, y_mean, _nonzero(np.atleast_1d(y_std)))

    @classmethod
    def fit(cls, loss: str, xw: np.ndarray, y: np.ndarray, rows: np.ndarray,
            scaling: str = "standard") -> "Preprocessing":
        """The covariate scaler fitted on all rows of ``xw``; member k's outcome statistics over
        its units ``rows[k]`` of ``y[k]`` (shapes (K, n) and (K, m)).

        ``xw`` of shape (K, n, d) gives member k its own covariates ``xw[k]`` and scaler, as
        k's own fit would scale them."""
        y_used = np.take_along_axis(y, rows, axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            moments = y_used.mean(1), y_used.std(1)
        if not all(np.all(np.isfinite(m)) for m in moments):
            raise ValueError("Y values are too large to standardise (their mean or standard "
                             "deviation overflows float64); rescale Y, e.g. to other units")
        try:
            scaler = ([FeatureScaler(scaling).fit(x) for x in xw] if xw.ndim == 3
                      else FeatureScaler(scaling).fit(xw))
        except ValueError as exc:
            if "too large" not in str(exc):
                raise
            raise ValueError("X/W values are too large to standardise (their mean or standard "
                             "deviation overflows float64); rescale X/W, e.g. to other "
                             "units") from None
        y_mean, y_std = moments
        if loss != "mse":
            y_mean, y_std = np.zeros_like(y_mean), np.ones_like(y_mean)
        return cls(loss, scaler, y_mean, _nonzero(y_std))

    def x(self, xw: np.ndarray) -> np.ndarray:
        """The network input of covariates ``xw``: (n, d), or (K, n, d) for per-member
        covariates (each with its member's scaler)."""
        if isinstance(self.scaler, list):
            return np.stack([sc.transform(x) for sc, x in zip(self.scaler, xw)])
        return self.scaler.transform(xw)

    def x_tensor(self, xw: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(self.x(xw), dtype=torch.float32)

    def y(self, y: np.ndarray) -> np.ndarray:
        """Each member's training target: (K, n) from outcomes (K, n) or one shared (n,)."""
        return (y - self.y_mean[:, None]) / self.y_scale[:, None]

    def outputs(self, raw: np.ndarray) -> np.ndarray:
        """Network outputs (K, n_arms, n) on the outcome scale (probabilities for log-loss)."""
        if self.loss == "logloss":
            return 1.0 / (1.0 + np.exp(-raw))
        return raw * self.y_scale[:, None, None] + self.y_mean[:, None, None]

    def dose_outputs(self, raw: np.ndarray) -> np.ndarray:
        """Dose networks' outputs (K, ...) on the outcome scale (probabilities for log-loss)."""
        if self.loss == "logloss":
            return 1.0 / (1.0 + np.exp(-raw))
        shape = (-1,) + (1,) * (raw.ndim - 1)
        return raw * self.y_scale.reshape(shape) + self.y_mean.reshape(shape)

    def select(self, members: list) -> "Preprocessing":
        """The given members; with per-member scalers they must share one."""
        scaler = self.scaler
        if isinstance(scaler, list):
            first = scaler[members[0]]
            if not all(np.array_equal(scaler[j].center_, first.center_)
                       and np.array_equal(scaler[j].scale_, first.scale_) for j in members):
                raise ValueError("members trained on different covariates cannot form one fit")
            scaler = first
        return dataclasses.replace(self, scaler=scaler, y_mean=self.y_mean[members].copy(),
                                   y_scale=self.y_scale[members].copy())
