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

from . import _validation as V
from . import fitting
from . import plans as P
from .covariates import Columns, Preprocessing
from .fitted import FittedCFR, effects_of
from .treatment import MAX_ARMS, TreatmentEncoding


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
    if batch_rows is not None:
        V.check_int("batch_rows", batch_rows, 1)
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


def _statistics(chunks):
    """Pass 1 over the chunks: covariate and outcome moments, labels, 0/1 outcome, width."""
    xm, ym = _Moments(), _Moments()
    labels: list = []
    d, binary = None, True
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
    if d is None:
        raise ValueError("chunks is empty: no training data")
    return xm, ym, labels, binary, d


def fit_chunks(est, chunks, validation, *, on_chunk: Callable | None = None):
    """The fitted state of ``est.fit_chunks(chunks, validation=validation)`` (see
    :meth:`dowhy_cfr.CFR.fit_chunks`)."""
    if validation is None or len(validation) != 3:
        raise ValueError("validation=(Y_val, T_val, X_val) is required: held-out data for early "
                         "stopping (it must fit in memory)")
    settings = fitting.FitSettings.of(est)
    k = settings.n_ensemble
    xm, ym, labels, binary, d = _statistics(chunks)
    y_val, t_val, x_val = _chunk_arrays(validation, "validation")
    if x_val.shape[1] != d:
        raise ValueError(f"validation X has {x_val.shape[1]} covariates, training chunks {d}")
    encoding = encoding_of_labels(est, labels)
    counts = np.zeros(encoding.n_arms)
    for i, chunk in enumerate(_iterate(chunks)):
        counts += np.bincount(encoding.arms(_chunk_arrays(chunk, i)[1]), minlength=encoding.n_arms)
    if (counts == 0).any():
        raise ValueError(f"treatment categories {[c for c, n in zip(encoding.categories, counts) if n == 0]} "
                         f"have no training units")
    pre, seeds = preprocessing(settings, binary=binary, x_mean=xm.mean, x_std=xm.std,
                               y_mean=np.full(k, ym.mean[0]), y_std=np.full(k, ym.std[0]))
    batch = settings.config(pre.loss).resolve(None).batch_size
    stream = batch_stream(encoding, pre, chunks, batch, np.random.default_rng(seeds[0]), on_chunk)
    source = fitting.StreamSource(lambda: next(stream), np.tile(counts / counts.sum(), (k, 1)),
                                  (y_val, encoding.arms(t_val), x_val), pre, encoding)
    return train_on_stream(settings, source, seeds, Columns(d, 0, V.column_names(validation[2])))


def encoding_of_labels(est, labels) -> TreatmentEncoding:
    """The treatment encoding of the labels seen in the data, under ``est.categories``; a
    continuous treatment (``treatment="continuous"``, or more than ``MAX_ARMS`` labels) is a
    NotImplementedError: a dose trains in memory."""
    kind = getattr(est, "treatment", "auto")
    if kind == "continuous" or (kind == "auto" and len(labels) > MAX_ARMS):
        raise NotImplementedError(
            f"chunked and distributed fits take a categorical treatment; T has {len(labels)} "
            f"distinct values (a continuous treatment, a dose): fit it in memory with "
            f"fit(Y, T, X=...), or pass treatment='categorical' for up to {MAX_ARMS} levels")
    auto = isinstance(est.categories, str) and est.categories == "auto"
    return TreatmentEncoding.of_categories(sorted(labels) if auto else list(est.categories))


def preprocessing(settings, *, binary, x_mean, x_std, y_mean, y_std):
    """Standardisation and member seeds from (global) statistics of the data."""
    loss = fitting.resolve_loss(settings.loss, binary=binary)
    pre = Preprocessing.from_moments(loss, x_mean, x_std, y_mean, y_std)
    return pre, P.draw_seeds(settings.random_state, len(pre.y_mean))


def train_on_stream(settings, source, seeds, columns: Columns, progress=None) -> FittedCFR:
    """Train one member per seed on the stream ``source`` (:func:`dowhy_cfr.fitting.train_members`)
    and assemble the fit; ``effect`` with ``X=None`` averages over the validation units. Shared
    by :func:`fit_chunks` and :func:`dowhy_cfr.distributed.fit_distributed`."""
    plans = [P.MemberPlan(s) for s in seeds]
    trained = fitting.train_members(settings, plans, stream=source, on_failure="drop",
                                    progress=progress)
    x_val = source.validation[2]
    tau = effects_of(trained.outputs(x_val).mean(0))
    return FittedCFR(trained.config, source.encoding, columns, trained.preprocessing,
                     trained.members, tau.mean(0), device=settings.device)


def batch_stream(encoding, pre, chunks, batch: int, gen: np.random.Generator, on_chunk=None):
    """Endless standardised mini-batches ``(x, t, y)``: chunk by chunk, shuffled within each
    chunk, every arm present (a batch missing an arm gets a random unit of it from the chunk).
    Chunks without every arm, or smaller than a batch, are skipped."""
    while True:
        for i, chunk in enumerate(_iterate(chunks)):
            y, t, x = _chunk_arrays(chunk, i)
            a = encoding.arms(t)
            by_arm = [np.flatnonzero(a == j) for j in range(encoding.n_arms)]
            if any(len(ix) == 0 for ix in by_arm) or len(a) < batch:
                continue
            xs = pre.x_tensor(x)
            ys = torch.as_tensor(pre.y(y)[0], dtype=torch.float32)
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
