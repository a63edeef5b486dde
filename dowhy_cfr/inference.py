"""Bootstrap inference for CFR that trains every replica in one stacked pass.

EconML's generic :class:`econml.inference.BootstrapInference` clones the estimator and refits it
once per replica. For a neural network that means ``n_bootstrap_samples`` full trainings.
:class:`CFRBootstrapInference` instead draws the (treatment-stratified) resamples up front and
trains all replicas as one ``K``-model stack with the core's vectorised training, then hands the
fitted replicas to EconML's own ``BootstrapEstimator``. Everything downstream --
``effect_interval``, ``effect_inference(...).summary_frame()``, ``ate_interval``,
``const_marginal_effect_interval``; ``"percentile"``, ``"pivot"`` and ``"normal"`` intervals -- is
EconML's code, unchanged.
"""

from __future__ import annotations

import numpy as np
from econml.inference import BootstrapInference
from econml.inference._bootstrap import BootstrapEstimator
from econml.utilities import filter_none_kwargs

from . import _validation as V

__all__ = ["CFRBootstrapInference"]

_BOOTSTRAP_TYPES = ("percentile", "pivot", "normal")


class _StackedBootstrapEstimator(BootstrapEstimator):
    """EconML's BootstrapEstimator whose replicas come from one stacked CFR training."""

    def __init__(self, wrapped, n_bootstrap_samples, bootstrap_type, random_state,
                 n_steps=None):
        # no clones are made here: the replicas are built in fit
        self._instances = []
        self._n_bootstrap_samples = n_bootstrap_samples
        self._n_jobs = 1
        self._verbose = 0
        self._compute_means = False
        self._bootstrap_type = bootstrap_type
        self._wrapped = wrapped
        self._random_state = random_state
        self._n_steps = n_steps

    def fit(self, Y, T, *, X=None, W=None):
        self._instances = self._wrapped._bootstrap_replicas(
            Y, T, X=X, W=W, n_replicas=self._n_bootstrap_samples,
            random_state=self._random_state, n_steps=self._n_steps,
        )
        return self


class CFRBootstrapInference(BootstrapInference):
    """Bootstrap intervals for :class:`~dowhy_cfr.CFR` from one stacked training of all replicas.

    Each replica draws its own stratified training/validation split of the units and network
    seed, then resamples each side with replacement within each treatment arm (so every replica
    keeps the arms' sizes and no unit is on both sides). This is what ``inference="bootstrap"``
    gives a CFR.

    Parameters
    ----------
    n_bootstrap_samples : int, default 100
        Number of replicas (all trained together).
    bootstrap_type : {"pivot", "percentile", "normal"}, default "pivot"
        How intervals are formed from the replicas (EconML's definitions).
    random_state : int, RandomState or None, default None
        Seed of the resamples and the replicas' networks. None derives it from the estimator's
        ``random_state`` (so a seeded estimator gives reproducible intervals).
    replica_steps : {"fitted", "early_stopping"} or int, default "fitted"
        How long each replica trains. ``"fitted"``: the number of steps the estimator's own early
        stopping selected (``best_iteration_``, the largest over ``n_ensemble`` members), with
        no early stopping of its own -- the stopping time is treated as a tuning parameter chosen
        on the full data, as for any bootstrap of a tuned procedure. The replicas then skip the
        ``patience`` evaluations past the best step that the estimator needed to find it, which
        makes 100 replicas several times cheaper (see docs/inference.md). ``"early_stopping"``:
        every replica runs the estimator's schedule and early stopping on its own validation
        split (the stopping time's own variability enters the intervals). An int: that many steps.
    verbose : int, default 0
        Unused; kept for signature compatibility with ``BootstrapInference``.

    Examples
    --------
    >>> from dowhy_cfr import CFR, CFRBootstrapInference
    >>> est = CFR(n_iter=500).fit(Y, T, X=X, inference=CFRBootstrapInference(50))  # doctest: +SKIP
    >>> lo, hi = est.effect_interval(X, alpha=0.1)  # doctest: +SKIP
    """

    def __init__(self, n_bootstrap_samples=100, bootstrap_type="pivot", random_state=None,
                 replica_steps="fitted", verbose=0):
        V.check_int("n_bootstrap_samples", n_bootstrap_samples, 2)
        if bootstrap_type not in _BOOTSTRAP_TYPES:
            raise ValueError(f"bootstrap_type={bootstrap_type!r} is invalid: choose one of "
                             f"{_BOOTSTRAP_TYPES}")
        if not (isinstance(replica_steps, str) and replica_steps in ("fitted", "early_stopping")):
            try:
                V.check_int("replica_steps", replica_steps, 1)
            except ValueError:
                raise ValueError(f"replica_steps={replica_steps!r} is invalid: use 'fitted', "
                                 f"'early_stopping' or a positive number of steps") from None
        super().__init__(n_bootstrap_samples=n_bootstrap_samples, n_jobs=1,
                         bootstrap_type=bootstrap_type, verbose=verbose)
        self.n_bootstrap_samples = n_bootstrap_samples
        self.bootstrap_type = bootstrap_type
        self.random_state = random_state
        self.replica_steps = replica_steps

    def fit(self, estimator, *args, **kwargs):
        if not hasattr(estimator, "_bootstrap_replicas"):
            raise TypeError(
                f"CFRBootstrapInference works with dowhy_cfr's CFR/TARNet, not "
                f"{type(estimator).__name__}; use econml.inference.BootstrapInference instead"
            )
        if self.replica_steps == "fitted":
            n_steps = max(1, int(np.max(estimator.best_iteration_)))
        elif self.replica_steps == "early_stopping":
            n_steps = None
        else:
            n_steps = int(self.replica_steps)
        est = _StackedBootstrapEstimator(estimator, self._n_bootstrap_samples,
                                         self._bootstrap_type, self.random_state, n_steps)
        est.fit(*args, **filter_none_kwargs(**kwargs))
        self._est = est
        self._d_t = estimator._d_t
        self._d_y = estimator._d_y
        self.d_t = self._d_t[0] if self._d_t else 1
        self.d_y = self._d_y[0] if self._d_y else 1
