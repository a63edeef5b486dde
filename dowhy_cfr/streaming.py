"""Fitting CFR on data that does not fit in memory: chunks, or a torch ``DataLoader``.

``CFR.fit_chunks(chunks, validation=(Y_val, T_val, X_val))`` reads the training data as a sequence
of chunks ``(Y, T, X)`` -- a list, a generator factory, a torch ``DataLoader``, Parquet row groups
read with pyarrow, ... -- and never holds more than one chunk in memory:

1. a first pass computes the covariate means and standard deviations, the outcome's mean and
   standard deviation (or detects a 0/1 outcome), the treatment categories and the arms' shares;
2. training draws mini-batches chunk by chunk (shuffled within each chunk, each batch with every
   arm), cycling over the chunks until ``n_iter`` steps or early stopping;
3. early stopping uses the held-out ``validation`` data, which must fit in memory.

Only ``X`` is supported (no ``W``; put every confounder in ``X``).
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np
import torch
from econml.utilities import one_hot_encoder
from sklearn.utils import check_random_state

from . import _validation as V
from .core import train_cfr


__all__ = ["fit_chunks", "parquet_chunks"]


def parquet_chunks(paths, *, y: str, t: str, x=None, batch_rows: int | None = None):
    """Chunks ``(Y, T, X)`` read from Parquet files with pyarrow, for :meth:`CFR.fit_chunks`.

    Parameters
    ----------
    paths : str, path or list of them
        Parquet file(s), read in order.
    y, t : str
        Names of the outcome and treatment columns.
    x : list of str, optional
        Covariate columns (default: every other column, in file order).
    batch_rows : int, optional
        Rows per chunk. Default: one chunk per row group.

    Returns
    -------
    callable
        A zero-argument function returning a fresh iterator of ``(Y, T, X)`` numpy arrays; only
        the columns asked for are read, one chunk at a time.

    Examples
    --------
    >>> chunks = parquet_chunks("claims.parquet", y="cost", t="program")  # doctest: +SKIP
    >>> est = CFR().fit_chunks(chunks, validation=(y_val, t_val, X_val))  # doctest: +SKIP
    """
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - exercised only without pyarrow
        raise ModuleNotFoundError(
            'parquet_chunks needs pyarrow: pip install "dowhy-cfr[parquet]"') from exc
    from os import fspath

    files = [fspath(paths)] if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__") \
        else [fspath(p) for p in paths]
    if not files:
        raise ValueError("paths is empty: give at least one Parquet file")
    if batch_rows is not None and (isinstance(batch_rows, bool) or not isinstance(
            batch_rows, (int, np.integer)) or batch_rows < 1):
        raise ValueError(f"batch_rows={batch_rows!r} is invalid: use a positive integer or None")
    names = pq.ParquetFile(files[0]).schema_arrow.names
    missing = [c for c in [y, t] + list(x or []) if c not in names]
    if missing:
        raise ValueError(f"column(s) {missing} not in {files[0]!r}; it has {names}")
    covariates = list(x) if x is not None else [c for c in names if c not in (y, t)]
    columns = [y, t] + covariates

    def _split(table):
        cols = [table.column(c).to_numpy() for c in columns]
        return cols[0], cols[1], np.column_stack(cols[2:]) if covariates else None

    def read():
        for f in files:
            pf = pq.ParquetFile(f)
            if batch_rows is None:
                for g in range(pf.num_row_groups):
                    yield _split(pf.read_row_group(g, columns=columns))
            else:
                for batch in pf.iter_batches(batch_size=int(batch_rows), columns=columns):
                    yield _split(batch)

    return read


def _iterate(chunks) -> Iterable:
    if callable(chunks):
        return chunks()
    if hasattr(chunks, "__next__"):
        raise TypeError(
            "chunks must be re-iterable (a list, a DataLoader, or a function returning a fresh "
            "iterator): a one-shot iterator/generator cannot be read twice"
        )
    return chunks


def _chunk_arrays(chunk, i):
    if isinstance(chunk, dict):
        chunk = (chunk["Y"], chunk["T"], chunk["X"])
    if not isinstance(chunk, (tuple, list)) or len(chunk) != 3:
        raise TypeError(f"chunk {i} must be a tuple (Y, T, X) or a dict with keys Y, T, X")
    Y, T, X = (c.numpy() if isinstance(c, torch.Tensor) else c for c in chunk)
    y = V.as_1d(f"Y (chunk {i})", Y).astype("float64")
    V.check_finite(f"Y (chunk {i})", y)
    t = V.as_1d(f"T (chunk {i})", T)
    x = V.as_2d_float(f"X (chunk {i})", X)
    V.check_same_length(Y=y, T=t, X=x)
    return y, t, x


class _Moments:
    """Streaming mean and variance (Chan et al.'s parallel update)."""

    def __init__(self):
        self.n, self.mean, self.m2 = 0, None, None

    def update(self, a: np.ndarray):
        n_b = a.shape[0]
        mean_b = a.mean(0)
        m2_b = ((a - mean_b) ** 2).sum(0)
        if self.n == 0:
            self.n, self.mean, self.m2 = n_b, mean_b, m2_b
            return
        n = self.n + n_b
        delta = mean_b - self.mean
        self.mean = self.mean + delta * n_b / n
        self.m2 = self.m2 + m2_b + delta**2 * self.n * n_b / n
        self.n = n

    @property
    def std(self):
        return np.sqrt(self.m2 / self.n)


def fit_chunks(est, chunks, validation, *, on_chunk: Callable | None = None):
    """See :meth:`dowhy_cfr.CFR.fit_chunks`."""
    if validation is None or len(validation) != 3:
        raise ValueError("validation=(Y_val, T_val, X_val) is required: held-out data for early "
                         "stopping (it must fit in memory)")
    if est._check_n_ensemble() < 1:  # pragma: no cover - validated inside
        raise ValueError("n_ensemble must be positive")
    # pass 1: statistics
    xm, ym = _Moments(), _Moments()
    labels: list = []
    n_chunks, d = 0, None
    binary = True
    for i, chunk in enumerate(_iterate(chunks)):
        y, t, x = _chunk_arrays(chunk, i)
        if d is None:
            d = x.shape[1]
        elif x.shape[1] != d:
            raise ValueError(f"chunk {i} has {x.shape[1]} covariates, earlier chunks had {d}")
        xm.update(x)
        ym.update(y[:, None])
        binary &= bool(np.isin(y, (0.0, 1.0)).all())
        for v in np.unique(t.astype(str) if t.dtype == object else t):
            if v not in labels:
                labels.append(v)
        n_chunks += 1
    if n_chunks == 0:
        raise ValueError("chunks is empty: no training data")
    y_val, t_val, x_val = _chunk_arrays(validation, "validation")
    if x_val.shape[1] != d:
        raise ValueError(f"validation X has {x_val.shape[1]} covariates, training chunks {d}")

    setup(est, labels=labels, d=d, validation=validation)

    def arms_of(t):
        return arm_index(est, t)

    counts = np.zeros(est._n_arms)
    for i, chunk in enumerate(_iterate(chunks)):
        counts += np.bincount(arms_of(_chunk_arrays(chunk, i)[1]), minlength=est._n_arms)
    if (counts == 0).any():
        cats = list(est.transformer.categories_[0])
        raise ValueError(f"treatment categories {[c for c, n in zip(cats, counts) if n == 0]} "
                         f"have no training units")

    seeds = preprocessing(est, binary=binary, x_mean=xm.mean, x_std=xm.std,
                          y_mean=float(ym.mean[0]), y_std=float(ym.std[0]))
    config = est.config_
    stream = batch_stream(est, chunks, config.batch_size, np.random.default_rng(seeds[0]),
                          on_chunk)
    shares = torch.as_tensor(np.tile(counts / counts.sum(), (len(seeds), 1)))
    n_val = len(y_val)
    val_idx = np.stack([np.random.default_rng(s).permutation(n_val) for s in seeds])
    from .estimator import _resolve_device

    est._device = _resolve_device(est.device)
    return train_from_stream(est, stream, validation=(y_val, arms_of(t_val), x_val),
                             val_idx=val_idx, seeds=seeds, arm_shares=shares,
                             progress=est._show_progress())


def train_from_stream(est, stream, *, validation, val_idx, seeds, arm_shares, progress,
                      **hooks):
    """Train ``est`` (preprocessing already set) on mini-batches drawn from ``stream``, early
    stopping on ``validation = (y, arms, x)`` (raw scale; arms as indices); ``hooks`` go to
    :func:`~dowhy_cfr.core.train_cfr` (``model_wrapper``, ``gather_ipm``). Shared by
    :func:`fit_chunks` and :func:`dowhy_cfr.distributed.fit_distributed`."""
    y_val, arms_val, x_val = validation
    result = train_cfr(
        torch.as_tensor(est._standardize(x_val), dtype=torch.float32),
        torch.as_tensor(arms_val),
        torch.as_tensor((y_val - est._y_mean[0]) / est._y_scale[0], dtype=torch.float32),
        train_idx=None,
        val_idx=torch.as_tensor(val_idx),
        config=est.config_,
        seeds=seeds,
        n_arms=est._n_arms,
        batch_source=lambda: next(stream),
        arm_shares=arm_shares,
        device=est._device,
        progress=progress,
        **hooks,
    )
    return finish(est, result, seeds, x_val)


def batch_stream(est, chunks, batch: int, gen: np.random.Generator, on_chunk=None):
    """Endless standardised mini-batches ``(x, t, y)``: chunk by chunk, shuffled within each
    chunk, every arm present (a batch missing an arm gets a random unit of it from the chunk).
    Chunks without every arm, or smaller than a batch, are skipped."""
    while True:
        for i, chunk in enumerate(_iterate(chunks)):
            y, t, x = _chunk_arrays(chunk, i)
            a = arm_index(est, t)
            by_arm = [np.flatnonzero(a == j) for j in range(est._n_arms)]
            if any(len(ix) == 0 for ix in by_arm) or len(a) < batch:
                continue
            xs = torch.as_tensor(est._standardize(x), dtype=torch.float32)
            ys = torch.as_tensor((y - est._y_mean[0]) / est._y_scale[0], dtype=torch.float32)
            at = torch.as_tensor(a)
            order = gen.permutation(len(a))
            for start in range(0, len(a) - batch + 1, batch):
                rows = order[start:start + batch].copy()
                for j, ix in enumerate(by_arm):
                    if not (a[rows] == j).any():
                        rows[-1 - j] = gen.choice(ix)
                yield xs[rows], at[rows], ys[rows]
            if on_chunk is not None:
                on_chunk(i)


def arm_index(est, t) -> np.ndarray:
    """Arm index (0 = control) of treatment labels ``t`` under the fitted categories."""
    onehot = est.transformer.transform(np.asarray(t).reshape(-1, 1))
    return (onehot @ np.arange(1, onehot.shape[1] + 1)).round().astype(np.int64)


def setup(est, *, labels, d, validation):
    """Treatment encoding and EconML's shape bookkeeping for a fit outside ``CFR.fit``."""
    categories = est.categories
    cats = sorted(labels) if categories == "auto" else list(categories)
    est.transformer = one_hot_encoder(categories=[np.asarray(cats, dtype=object if any(
        isinstance(c, str) for c in cats) else None)], drop="first")
    est.transformer.fit(np.asarray(cats).reshape(-1, 1))
    est._n_arms = len(cats)
    est._d_t = (est._n_arms - 1,)
    est._d_t_in = ()
    est._d_y = ()
    est._x_columns = V.column_names(validation[2])
    est._w_columns = None
    est._n_x, est._n_w = d, 0
    est.n_features_in_ = d
    est._set_input_names(validation[0], validation[1], validation[2])


def preprocessing(est, *, binary, x_mean, x_std, y_mean, y_std):
    """Loss, configuration and standardisation from (global) statistics; returns the seeds."""
    loss = "logloss" if (est.loss == "logloss" or (est.loss == "auto" and binary)) else "mse"
    if est.loss == "logloss" and not binary:
        raise ValueError("loss='logloss' needs a binary outcome with values 0 and 1")
    config = est._config(loss)
    est.config_, est.loss_ = config, loss
    est._x_mean = x_mean
    est._x_scale = np.where(x_std > 0, x_std, 1.0)
    k = est._check_n_ensemble()
    if loss == "mse":
        sd = y_std
        est._y_mean = np.full(k, y_mean)
        est._y_scale = np.full(k, sd if sd > 0 else 1.0)
    else:
        est._y_mean, est._y_scale = np.zeros(k), np.ones(k)

    rng = check_random_state(est.random_state)
    seeds = [int(s) for s in rng.randint(0, 2**31 - 1, size=k)]
    return seeds


def finish(est, result, seeds, x_val):
    """Fitted attributes from a training result; average effect over the validation units."""
    est._net = result.net
    est.training_result_ = result
    est.best_iteration_ = result.best_step.copy()
    est.n_iter_ = int(result.n_steps)
    est.history_ = est._history_frame(result.history)
    est.seeds_ = seeds
    tau_val = est._tau_standardized_input(est._standardize(x_val))
    est._tau_fit_mean = tau_val.mean(0)  # average effect over the validation units
    est.model_final_ = None
    est._inference = None
    return est
