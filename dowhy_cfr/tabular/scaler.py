r"""The :class:`FeatureScaler`: per-column scaling of the encoded covariate matrix --
``"standard"``, ``"robust"`` (RealMLP's robust scaling with smooth clipping, Holzmüller,
Grinsztajn & Steinwart 2024) or ``"quantile"`` -- and :func:`smooth_clip`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.preprocessing import QuantileTransformer

from .state import STATE_VERSION, check_state

__all__ = ["FeatureScaler", "smooth_clip", "SMOOTH_CLIP_BOUND"]

#: :func:`smooth_clip` maps the real line onto ``(-SMOOTH_CLIP_BOUND, SMOOTH_CLIP_BOUND)``.
SMOOTH_CLIP_BOUND = 3.0
_SCALER_METHODS = ("standard", "robust", "quantile")
_BINARY_MODES = ("auto", "center", "scale")
_TIE_WIDTH = 0.1  # tied training values spread over +-5% of the gap to their nearest neighbour


def smooth_clip(z: np.ndarray, bound: float = SMOOTH_CLIP_BOUND) -> np.ndarray:
    r"""RealMLP's smooth clipping :math:`f(z) = z / \sqrt{1 + (z / b)^2}`, :math:`b` = ``bound``.

    Odd, strictly increasing, :math:`f(z) \approx z` for :math:`|z| \ll b` and
    :math:`|f(z)| < b` (Holzmüller et al. 2024). Computed as ``z / hypot(1, z / b)`` so that
    huge ``z`` give :math:`\pm b` instead of overflowing (float64 rounds :math:`f(z)` to exactly
    :math:`\pm b` once :math:`|z| > 10^8` or so); infinite ``z`` give :math:`\pm b`.
    """
    z = np.asarray(z, dtype="float64")
    with np.errstate(invalid="ignore"):
        out = z / np.hypot(1.0, z / bound)
    return np.where(np.isinf(z), np.sign(z) * bound, out)


class FeatureScaler(BaseEstimator):
    r"""Per-column scaling of the encoded covariate matrix, fitted on the training rows.

    Methods (``x`` a column of the training matrix, :math:`f` the smooth clip):

    ``"standard"``
        :math:`(x - \bar x) / s`, with :math:`s` the standard deviation (``ddof=0``) and
        :math:`s = 1` for a constant column: the package's standardisation
        (:func:`dowhy_cfr.covariates.standardize`), bit for bit.
    ``"robust"``
        RealMLP's robust scaling with smooth clipping (Holzmüller et al. 2024):
        :math:`f\big((x - q_{1/2}) / s\big)` with :math:`f(z) = z / \sqrt{1 + (z/3)^2}` and

        .. math::

            s = \begin{cases} q_{3/4} - q_{1/4} & \text{if } q_{3/4} \neq q_{1/4},\\
                \tfrac12 (\max x - \min x) & \text{if } q_{3/4} = q_{1/4},\ \max x \neq \min x,
                \end{cases}

        (quantiles :math:`q_p` of the training column, linear interpolation); a constant column
        maps to 0 (the paper's factor :math:`1/s = 0`). Outputs lie in :math:`(-3, 3)` and keep
        the order of the inputs; outliers are compressed instead of dominating.
    ``"quantile"``
        scikit-learn's ``QuantileTransformer(output_distribution="normal")`` with
        ``n_quantiles = min(n_quantiles, n)`` and no subsampling: each column's training
        distribution mapped to the standard normal (values beyond the training range go to
        :math:`\pm 5.2`, the ends of scikit-learn's clipping). Tied training values are first
        spread evenly over :math:`\pm 5\%` of the gap to their nearest distinct value, so a value
        shared by many units (the zeros of a count or of a zero-inflated income) maps to the
        middle of its quantile range; scikit-learn would send every unit at the training minimum
        or maximum to :math:`\mp 5.2`. Columns are standardised before the transform (which does
        not change it, being monotone), so scikit-learn's absolute tolerance of 1e-7 at the ends
        is relative to the column's spread. A constant column is centred (``x - mean``).

    **Binary columns** (training values exactly {0, 1}: one-hot outputs, missing-value
    indicators, 0/1 flags) follow ``binary``: ``"center"`` subtracts the training mean and does
    not scale (values within (-1, 1), mean 0; with ``"robust"`` the smooth clip is then applied,
    changing them by less than 6%); ``"scale"`` treats them like any other column. ``"auto"``
    (default) is ``"scale"`` for ``"standard"`` (the package's standardisation, and scikit-learn's
    ``StandardScaler``) and ``"center"`` for ``"robust"`` and ``"quantile"``, where the
    interquartile range or the quantiles of a 0/1 column mean little: a rare level would be
    scaled by ``(max - min) / 2`` or sent to the tails of the normal distribution.

    Statistics come from the training matrix only; ``transform`` of new rows uses them.

    Parameters
    ----------
    method : {"standard", "robust", "quantile"}, default="standard"
    binary : {"auto", "center", "scale"}, default="auto"
    n_quantiles : int, default=1000
        Most quantiles for ``"quantile"`` (at most the number of training rows are used).

    Attributes
    ----------
    n_features_in_ : int
    binary_ : ndarray of bool
        Columns whose training values are exactly {0, 1}.
    center_, scale_ : ndarray of float
        Each column's output is ``(x - center_) / scale_`` before the smooth clip (``"robust"``)
        or the quantile transform (``"quantile"``, columns in ``quantile_columns_``);
        ``scale_`` is ``inf`` for a constant column under ``"robust"`` (output 0).
    quantile_columns_ : ndarray of bool
        Columns passed to the quantile transform (``"quantile"`` only; others are centred).
    quantile_transformer_ : sklearn.preprocessing.QuantileTransformer or None
    """

    def __init__(self, method: str = "standard", *, binary: str = "auto",
                 n_quantiles: int = 1000):
        self.method = method
        self.binary = binary
        self.n_quantiles = n_quantiles

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None) -> "FeatureScaler":
        """Fit the per-column statistics on the training matrix ``X`` (``y`` is ignored)."""
        self._check_params()
        x = _finite_matrix(X, "X")
        if x.shape[0] == 0:
            raise ValueError("X is empty (0 rows); fit needs data")
        self.n_features_in_ = x.shape[1]
        self.binary_ = ((x == 0) | (x == 1)).all(0) & (x == 0).any(0) & (x == 1).any(0)
        constant = (x == x[0]).all(0)
        centred = self.binary_ if self._binary_mode() == "center" else np.zeros_like(self.binary_)
        with np.errstate(over="ignore", invalid="ignore"):
            getattr(self, f"_fit_{self.method}")(x, centred, constant)
        scale_ok = np.isfinite(self.scale_) | (constant & (self.method == "robust"))
        if not (np.isfinite(self.center_).all() and scale_ok.all()):
            raise ValueError("X values are too large to scale (their mean or spread overflows "
                             "float64); rescale those columns, e.g. to other units")
        return self

    @classmethod
    def standard_from_moments(cls, mean: np.ndarray, std: np.ndarray) -> "FeatureScaler":
        """A fitted ``"standard"`` scaler from column means and standard deviations computed
        elsewhere (e.g. over chunks of data that never fit in memory at once); constant columns
        (``std == 0``) are divided by 1, as :meth:`fit` does."""
        mean, std = np.asarray(mean, dtype="float64"), np.asarray(std, dtype="float64")
        scaler = cls("standard", binary="scale")
        scaler.n_features_in_ = mean.shape[0]
        scaler.center_ = mean.copy()
        scaler.scale_ = np.where(std > 0, std, 1.0)
        scaler.binary_ = np.zeros(mean.shape[0], dtype=bool)
        scaler.quantile_columns_ = np.zeros(mean.shape[0], dtype=bool)
        scaler.quantile_transformer_ = None
        return scaler

    def _check_params(self) -> None:
        if self.method not in _SCALER_METHODS:
            raise ValueError(f"method={self.method!r} is invalid: use one of {_SCALER_METHODS}")
        if self.binary not in _BINARY_MODES:
            raise ValueError(f"binary={self.binary!r} is invalid: use one of {_BINARY_MODES}")
        q = self.n_quantiles
        if isinstance(q, bool) or not isinstance(q, (int, np.integer)) or q < 2:
            raise ValueError(f"n_quantiles={q!r} is invalid: use an integer >= 2")

    def _binary_mode(self) -> str:
        if self.binary != "auto":
            return self.binary
        return "scale" if self.method == "standard" else "center"

    def _fit_standard(self, x, centred, constant) -> None:
        self.center_ = x.mean(0)
        std = x.std(0)
        self.scale_ = np.where(centred, 1.0, np.where(std > 0, std, 1.0))
        self.quantile_columns_ = np.zeros(x.shape[1], dtype=bool)
        self.quantile_transformer_ = None

    def _fit_robust(self, x, centred, constant) -> None:
        q25, q50, q75 = np.quantile(x, [0.25, 0.5, 0.75], axis=0)
        iqr = q75 - q25
        half_range = 0.5 * (x.max(0) - x.min(0))
        scale = np.where(iqr != 0, iqr, np.where(half_range != 0, half_range, np.inf))
        self.center_ = np.where(centred, x.mean(0), q50)
        self.scale_ = np.where(centred, 1.0, scale)
        self.quantile_columns_ = np.zeros(x.shape[1], dtype=bool)
        self.quantile_transformer_ = None

    def _fit_quantile(self, x, centred, constant) -> None:
        self._fit_standard(x, centred, constant)
        self.scale_ = np.where(constant, 1.0, self.scale_)
        cols = ~centred & ~constant
        self.scale_ = np.where(cols, self.scale_, 1.0)
        self.quantile_columns_ = cols
        self.quantile_transformer_ = None
        if cols.any():
            z = (x[:, cols] - self.center_[cols]) / self.scale_[cols]
            n = x.shape[0]
            self.quantile_transformer_ = _quantile_transformer(min(self.n_quantiles, n), n).fit(
                _spread_ties(z))

    # ------------------------------------------------------------------ transform
    def transform(self, X) -> np.ndarray:
        """Scale ``X`` (n, ``n_features_in_``) with the training statistics."""
        if not hasattr(self, "center_"):
            raise ValueError("this FeatureScaler is not fitted yet; call fit(X_train) first")
        x = _finite_matrix(X, "X")
        if x.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {x.shape[1]} columns but the scaler was fitted on "
                             f"{self.n_features_in_}; pass the encoded matrix with the same "
                             f"columns")
        z = (x - self.center_) / self.scale_
        if self.method == "robust":
            return smooth_clip(z)
        if self.quantile_transformer_ is not None and x.shape[0] > 0:
            z[:, self.quantile_columns_] = self.quantile_transformer_.transform(
                z[:, self.quantile_columns_])
        return z

    def fit_transform(self, X, y=None) -> np.ndarray:
        """``fit(X)`` then ``transform(X)``."""
        return self.fit(X).transform(X)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """The input names (per-feature scaling keeps the columns): ``input_features`` or
        ``x0, x1, ...``."""
        if input_features is None:
            return np.asarray([f"x{j}" for j in range(self.n_features_in_)], dtype=object)
        if len(input_features) != self.n_features_in_:
            raise ValueError(f"input_features has {len(input_features)} names for "
                             f"{self.n_features_in_} columns")
        return np.asarray([str(c) for c in input_features], dtype=object)

    # ------------------------------------------------------------------ state
    def to_state(self) -> tuple[dict, dict]:
        """The fitted scaler as a JSON-able dict and a dict of numpy arrays (no pickle)."""
        if not hasattr(self, "center_"):
            raise ValueError("this FeatureScaler is not fitted yet; call fit(X_train) first")
        state = {"class": "FeatureScaler", "version": STATE_VERSION, "method": self.method,
                 "binary": self.binary, "n_quantiles": int(self.n_quantiles),
                 "n_features_in": int(self.n_features_in_)}
        arrays = {"center": self.center_.copy(), "scale": self.scale_.copy(),
                  "binary": self.binary_.copy(), "quantile_columns": self.quantile_columns_.copy()}
        qt = self.quantile_transformer_
        if qt is not None:
            arrays["quantiles"] = np.asarray(qt.quantiles_, dtype="float64").copy()
            arrays["references"] = np.asarray(qt.references_, dtype="float64").copy()
        return state, arrays

    @classmethod
    def from_state(cls, state: dict, arrays: dict) -> "FeatureScaler":
        """Rebuild a fitted scaler from :meth:`to_state`'s output (after JSON / npz)."""
        check_state(state, "FeatureScaler")
        scaler = cls(state["method"], binary=state["binary"], n_quantiles=state["n_quantiles"])
        scaler._check_params()
        scaler.n_features_in_ = int(state["n_features_in"])
        scaler.center_ = np.asarray(arrays["center"], dtype="float64").copy()
        scaler.scale_ = np.asarray(arrays["scale"], dtype="float64").copy()
        scaler.binary_ = np.asarray(arrays["binary"], dtype=bool).copy()
        scaler.quantile_columns_ = np.asarray(arrays["quantile_columns"], dtype=bool).copy()
        scaler.quantile_transformer_ = None
        if "quantiles" in arrays:
            quantiles = np.asarray(arrays["quantiles"], dtype="float64").copy()
            qt = _quantile_transformer(quantiles.shape[0], quantiles.shape[0])
            qt.quantiles_ = quantiles
            qt.references_ = np.asarray(arrays["references"], dtype="float64").copy()
            qt.n_quantiles_ = quantiles.shape[0]
            qt.n_features_in_ = quantiles.shape[1]
            scaler.quantile_transformer_ = qt
        shapes = {a.shape for a in (scaler.center_, scaler.scale_, scaler.binary_,
                                    scaler.quantile_columns_)}
        if shapes != {(scaler.n_features_in_,)}:
            raise ValueError("the scaler's saved arrays do not match its number of columns; the "
                             "state is corrupt")
        return scaler


def _quantile_transformer(n_quantiles: int, n_rows: int) -> QuantileTransformer:
    # subsample=n_rows: no subsampling (works with scikit-learn before 1.5, where None did not)
    return QuantileTransformer(n_quantiles=n_quantiles, output_distribution="normal",
                               subsample=max(n_rows, 1))


def _spread_ties(z: np.ndarray) -> np.ndarray:
    """Each column's tied values spread evenly over ``+-_TIE_WIDTH / 2`` times the gap to the
    nearest distinct value (untied values unchanged, order of distinct values kept)."""
    out = np.empty_like(z)
    rows = np.arange(z.shape[0])
    for j in range(z.shape[1]):
        order = np.argsort(z[:, j], kind="stable")
        s = z[order, j]
        values, start, counts = np.unique(s, return_index=True, return_counts=True)
        gaps = np.diff(values)
        nearest = np.minimum(np.r_[np.inf, gaps], np.r_[gaps, np.inf])
        block = np.repeat(np.arange(len(values)), counts)
        within = ((rows - start[block] + 0.5) / counts[block] - 0.5)
        out[order, j] = s + np.where(counts[block] > 1, within * _TIE_WIDTH * nearest[block], 0.0)
    return out


def _finite_matrix(X, name: str) -> np.ndarray:
    if isinstance(X, (pd.DataFrame, pd.Series)):
        X = X.to_numpy()
    try:
        x = np.array(X, dtype="float64", copy=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric matrix (the TableEncoder's output); encode "
                        f"the table with TableEncoder first ({exc})") from exc
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {x.shape}")
    if not np.isfinite(x).all():
        kind = "missing values (NaN)" if np.isnan(x).any() else "infinite values"
        raise ValueError(f"{name} contains {kind}; the scaler takes the encoded matrix, which "
                         f"has none: encode the table with TableEncoder first (it imputes "
                         f"missing values and rejects infinite ones)")
    return x
