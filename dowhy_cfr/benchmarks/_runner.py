"""Fitting helpers shared by the benchmarks: K-stacked CFR fits and timed baseline fits."""

from __future__ import annotations

import multiprocessing
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .methods import CFR_METHODS, cfr_params, make_baseline

__all__ = ["add_threads_argument", "progress_bar", "headless_pyplot", "save_figure", "fit_cfr_stacked", "fit_baseline",
           "chunks", "TaskPool", "cfr_task"]


def progress_bar(total: int, desc: str, enabled: bool):
    """A tqdm bar on stderr (a no-op object when disabled)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)


def headless_pyplot(what: str):
    """matplotlib.pyplot on the Agg backend, or None (with a hint on stderr) when matplotlib is
    not installed; ``what`` names the plot that is skipped."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        import sys

        print(f"matplotlib is not installed: skipping the {what} "
              '(pip install "dowhy-cfr[plots]")', file=sys.stderr)
        return None
    return plt


def save_figure(plt, fig, path) -> Path:
    """Save ``fig`` to ``path`` (parent folders created, 120 dpi), close it, return the path."""
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def chunks(items, size: int):
    """Consecutive pieces of ``items`` of at most ``size`` elements."""
    size = max(1, int(size))
    return [items[i : i + size] for i in range(0, len(items), size)]


@contextmanager
def _quiet():
    with warnings.catch_warnings():
        # small --tiny settings clamp the batch size; that is expected in smoke runs
        warnings.filterwarnings("ignore", message="batch_size=.*is larger than the training split")
        yield


def fit_cfr_stacked(method: str, x, t, ys, units, eval_rows=None, *, settings: dict, seed: int):
    """Fit one CFR-family method on ``K`` datasets in one stacked pass (``CFR.fit_stacked``).

    Parameters
    ----------
    method : one of ``CFR_METHODS``
    x : array (n, d) shared covariates; t : array (n,) or (K, n); ys : array (K, n)
    units : int array (K, m) rows each dataset is fitted on
    eval_rows : array of row indices on which effects are returned (default all rows)
    settings : dict with ``alpha_wass``, ``alpha_mmd``, ``n_iter``, ``tiny`` (and optionally
        ``device``, default ``"cpu"``)
    seed : random_state of the stack

    Returns
    -------
    taus : array (K, len(eval_rows)) estimated effects; seconds : wall time of the whole stack;
    estimators : the K fitted estimators.
    """
    if method not in CFR_METHODS:
        raise ValueError(f"{method!r} is not a CFR-family method")
    cls, kw = cfr_params(method, alpha_wass=settings["alpha_wass"],
                         alpha_mmd=settings["alpha_mmd"], n_iter=settings["n_iter"],
                         tiny=settings["tiny"], seed=seed,
                         device=settings.get("device", "cpu"), extra=settings.get("cfr_params"))
    x_eval = x if eval_rows is None else x[eval_rows]
    start = time.perf_counter()
    with _quiet():
        members = cls(**kw).fit_stacked(ys, t, X=x, units=np.asarray(units, dtype=np.int64))
    taus = np.stack([np.asarray(m.effect(x_eval), dtype=float).reshape(-1) for m in members])
    return taus, time.perf_counter() - start, members


def fit_baseline(method: str, x_fit, t_fit, y_fit, x_eval, binary: bool, seed: int, tiny: bool):
    """Fit a baseline and return ``(tau on x_eval, wall seconds)`` (a :class:`TaskPool` task)."""
    start = time.perf_counter()
    model = make_baseline(method, binary=binary, seed=seed, tiny=tiny).fit(x_fit, t_fit, y_fit)
    tau = np.asarray(model.effect(x_eval), dtype=float).reshape(-1)
    return tau, time.perf_counter() - start


def cfr_task(method, x, t, ys, units, eval_rows, settings, seed):
    """:func:`fit_cfr_stacked` for a worker process: returns ``(taus, seconds, best_steps)``
    (the estimators themselves stay in the worker)."""
    taus, secs, members = fit_cfr_stacked(method, x, t, ys, units, eval_rows,
                                          settings=settings, seed=seed)
    return taus, secs, [int(m.best_iteration_[0]) for m in members]


def _init_worker(threads: int):
    if threads > 0:
        import torch

        torch.set_num_threads(threads)


class TaskPool:
    """Run independent benchmark tasks (stacks of realizations, baseline fits) in ``workers``
    processes with ``threads`` torch threads each, or inline when ``workers <= 1``.

    On a 2-core machine two single-threaded workers use both cores without the oversubscription
    that makes a 2-thread torch process many times slower next to another job. Use as a context
    manager; :meth:`map` returns results in task order.
    """

    def __init__(self, workers: int = 1, threads: int = 1):
        self.workers = max(1, int(workers))
        self.threads = int(threads)
        self._executor = None

    def __enter__(self):
        if self.workers > 1:
            # spawn: a fresh interpreter per worker, no forked OpenMP/torch thread state
            self._executor = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker, initargs=(self.threads,))
        return self

    def __exit__(self, *exc):
        if self._executor is not None:
            self._executor.shutdown(cancel_futures=True)
            self._executor = None
        return False

    def map(self, fn, tasks, on_done=None):
        """``[fn(*task) for task in tasks]``, in parallel when the pool has workers.

        ``on_done(index, result)`` is called as each task finishes (in completion order).
        """
        tasks = list(tasks)
        if self._executor is None:
            results = []
            for i, task in enumerate(tasks):
                results.append(fn(*task))
                if on_done is not None:
                    on_done(i, results[-1])
            return results
        futures = {self._executor.submit(fn, *task): i for i, task in enumerate(tasks)}
        results = [None] * len(tasks)
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            if on_done is not None:
                on_done(i, results[i])
        return results


def add_threads_argument(p) -> None:
    """The ``--threads`` option shared by the benchmark commands."""
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1; 0 keeps torch's default). On a "
                        "shared machine more threads than free cores make training many times "
                        "slower")
