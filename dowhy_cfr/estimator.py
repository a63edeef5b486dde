"""``CFR`` and ``TARNet``: EconML CATE estimators on top of :mod:`dowhy_cfr.core`."""

from __future__ import annotations

import copy
import inspect
import sys
import warnings

import numpy as np
import pandas as pd
import torch
from econml._cate_estimator import BaseCateEstimator, LinearCateEstimator, TreatmentExpansionMixin
from econml.utilities import one_hot_encoder
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state

from . import _validation as V
from .core import CFRConfig, predict, train_cfr

__all__ = ["CFR", "TARNet"]

_CONFIG_FIELDS = tuple(
    f for f in CFRConfig.__dataclass_fields__ if f not in ("loss", "max_eval_units")
)


def _resolve_device(device) -> torch.device:
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available; use 'cpu'")
    return dev


def _plain(v):
    """numpy scalar -> Python scalar, for readable messages."""
    return v.item() if isinstance(v, np.generic) else v


def _resample_within_arms(units: np.ndarray, arms: np.ndarray, rng) -> np.ndarray:
    """Draw ``len(units)`` of ``units`` with replacement, keeping each arm's count (sorted)."""
    parts = [rng.choice(units[arms[units] == a], size=int((arms[units] == a).sum()))
             for a in np.unique(arms[units])]
    return np.sort(np.concatenate(parts))


def _interactive() -> bool:
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except Exception:  # pragma: no cover
        return False


class CFR(TreatmentExpansionMixin, LinearCateEstimator, BaseEstimator):
    """Counterfactual Regression (Shalit, Johansson & Sontag, ICML 2017) as an EconML estimator.

    A shared representation ``Phi`` of the covariates feeds one outcome head per treatment arm
    (``h0``, ``h1``). Training minimises the weighted factual loss plus ``alpha`` times an integral
    probability metric (IPM) between the treated and control representations (Eq. 3 of the paper),
    so that the heads extrapolate across arms from balanced representations. The individual effect
    is ``tau(x) = h1(Phi(x)) - h0(Phi(x))``.

    Defaults follow the paper's IHDP configuration (the authors' ``configs/example_ihdp.txt``),
    except ``alpha``, which is on the scale of the *standardised* outcome (see ``alpha``).

    Parameters
    ----------
    alpha : float, default 0.05
        Weight of the imbalance penalty (alpha of Eq. 3); ``alpha=0`` is TARNet. The factual loss
        is computed on the standardised outcome, so ``alpha`` does not depend on the units of Y.
        The paper's alpha = 0.3 was set on raw IHDP outcomes, whose variance is about 4 for a
        typical realization; on the standardised scale that corresponds to roughly 0.075. The
        default was chosen by measurement on IHDP (see ``docs/results.md``).
    ipm : {"wass", "wass2", "mmd2_lin", "mmd2_rbf"}, default "wass"
        The IPM: entropic Wasserstein-1 (CFR-Wass, the default), the same with squared Euclidean
        cost, squared linear MMD (the paper's CFR-MMD) or unbiased Gaussian-kernel MMD.
    weight_decay : float, default 1e-4
        L2 penalty lambda of Eq. 3 on the outcome heads' weights (``p_lambda``).
    rep_weight_decay : bool, default False
        Also penalise the representation's weights.
    n_rep_layers, rep_dim : int, default 3, 200
        Depth and width of the representation Phi (ELU layers).
    n_head_layers, head_dim : int, default 3, 100
        Depth and width of each outcome head (ELU layers, then a linear output).
    normalization : {"divide", "none"}, default "divide"
        "divide" projects each representation onto the unit sphere (reference code).
    weight_init : float, default 0.1
        Initial weights are N(0, (weight_init / sqrt(fan_in))^2); biases start at 0.
    learning_rate : float, default 1e-3
        Adam's learning rate.
    lr_decay, lr_decay_steps : float, int, default 0.97, 100
        Staircase decay of the learning rate: multiplied by ``lr_decay`` every ``lr_decay_steps``
        steps (1.0 switches decay off).
    batch_size : int, default 100
        Mini-batch size; batches always contain both arms. Clamped (with a warning) to the
        training split's size for small data.
    n_iter : int, default 3000
        Maximum number of mini-batch steps.
    val_fraction : float, default 0.3
        Share of the units held out (stratified by treatment) for early stopping.
    eval_every : int, default 100
        Evaluate the validation objective every ``eval_every`` steps.
    patience : int or None, default 10
        Stop after this many evaluations without improvement of the validation objective; the
        best checkpoint is kept. None runs all ``n_iter`` steps (still keeping the best).
    relative_patience : float, default 1.0
        The wait for a better checkpoint also grows with the training so far: a model stops after
        ``max(patience * eval_every, relative_patience * best_step)`` steps without improvement.
    reweight_sample : bool, default True
        Weight units by ``w_i = t_i/(2u) + (1-t_i)/(2(1-u))`` (Algorithm 1, line 2).
    rbf_sigma : float, default 0.1
        Bandwidth of ``mmd2_rbf``: kernel ``exp(-||a-b||^2 / sigma^2)``.
    wass_lambda, wass_iterations : float, int, default 10, 10
        Entropic scale (relative to the mean cost) and number of Sinkhorn iterations.
    wass_backprop : bool, default True
        Backpropagate through the Sinkhorn transport plan.
    loss : {"auto", "mse", "logloss"}, default "auto"
        Squared loss, or log-loss with a sigmoid output for 0/1 outcomes; "auto" uses log-loss
        when every outcome is 0 or 1. For binary outcomes effects are differences of
        probabilities.
    model_final : sklearn regressor or None, default None
        Only used when ``W`` is passed to ``fit``: CATE is then a function of ``X`` alone, so the
        unit-level effects ``tau(x_i, w_i)`` are regressed on ``x_i`` with this model. None uses
        ``HistGradientBoostingRegressor()``.
    n_ensemble : int, default 1
        Number of networks trained (stacked, in one pass) from different seeds and validation
        splits; effects are averaged over them.
    categories : "auto" or list, default "auto"
        Treatment categories; the first is the control arm.
    random_state : int, RandomState or None, default None
        Seed of the weights, the validation split and the mini-batch order.
    device : {"cpu", "cuda", "auto"}, default "cpu"
    verbose : int, default 1
        1 shows a progress bar in interactive sessions (terminal or notebook), 2 always,
        0 never.

    Attributes
    ----------
    history_ : pandas.DataFrame
        One row per evaluation and ensemble member: step, train/validation factual loss,
        imbalance, validation objective and learning rate. Step 0 is the untrained network.
    best_iteration_ : numpy.ndarray
        Step of the kept checkpoint, per ensemble member.
    n_iter_ : int
        Steps run (fewer than ``n_iter`` when every member stopped early).
    config_ : CFRConfig
        The core configuration used.
    model_final_ : fitted regressor or None
        The final-stage model (only when W was given).

    Examples
    --------
    >>> import numpy as np
    >>> from dowhy_cfr import CFR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3))
    >>> T = rng.binomial(1, 1 / (1 + np.exp(-X[:, 0])))
    >>> Y = X[:, 0] + T * (1 + X[:, 1]) + rng.normal(scale=0.1, size=500)
    >>> est = CFR(n_iter=300, random_state=0, verbose=0).fit(Y, T, X=X)
    >>> est.effect(X[:3]).shape
    (3,)
    """

    def __init__(
        self,
        *,
        alpha=0.05,
        ipm="wass",
        weight_decay=1e-4,
        rep_weight_decay=False,
        n_rep_layers=3,
        rep_dim=200,
        n_head_layers=3,
        head_dim=100,
        normalization="divide",
        weight_init=0.1,
        learning_rate=1e-3,
        lr_decay=0.97,
        lr_decay_steps=100,
        batch_size=100,
        n_iter=3000,
        val_fraction=0.3,
        eval_every=100,
        patience=10,
        relative_patience=1.0,
        reweight_sample=True,
        rbf_sigma=0.1,
        wass_lambda=10.0,
        wass_iterations=10,
        wass_backprop=True,
        loss="auto",
        model_final=None,
        n_ensemble=1,
        categories="auto",
        random_state=None,
        device="cpu",
        verbose=1,
    ):
        self.alpha = alpha
        self.ipm = ipm
        self.weight_decay = weight_decay
        self.rep_weight_decay = rep_weight_decay
        self.n_rep_layers = n_rep_layers
        self.rep_dim = rep_dim
        self.n_head_layers = n_head_layers
        self.head_dim = head_dim
        self.normalization = normalization
        self.weight_init = weight_init
        self.learning_rate = learning_rate
        self.lr_decay = lr_decay
        self.lr_decay_steps = lr_decay_steps
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.val_fraction = val_fraction
        self.eval_every = eval_every
        self.patience = patience
        self.relative_patience = relative_patience
        self.reweight_sample = reweight_sample
        self.rbf_sigma = rbf_sigma
        self.wass_lambda = wass_lambda
        self.wass_iterations = wass_iterations
        self.wass_backprop = wass_backprop
        self.loss = loss
        self.model_final = model_final
        self.n_ensemble = n_ensemble
        self.categories = categories
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        super().__init__()

    # ------------------------------------------------------------------ EconML plumbing
    def _gen_allowed_missing_vars(self):
        return []

    def _expand_treatments(self, X=None, *Ts, transform=True):
        # EconML converts X to an array here; check DataFrame column names before they are lost
        self._check_fitted()
        if X is not None and self._n_x > 0:
            self._check_block("X", X, self._n_x, self._x_columns)
        cats = list(self.transformer.categories_[0])
        for T in Ts:
            values = pd.unique(pd.Series(np.asarray(T, dtype=object).ravel()))
            unknown = [v for v in values if v not in cats]
            if unknown:
                raise ValueError(
                    f"treatment value(s) {[_plain(u) for u in unknown]} are not among the fitted "
                    f"treatment categories {[_plain(c) for c in cats]}; call e.g. "
                    f"effect(X, T0={_plain(cats[0])!r}, T1={_plain(cats[1])!r})"
                )
        return super()._expand_treatments(X, *Ts, transform=transform)

    def _get_inference_options(self):
        # "bootstrap" trains all replicas in one stacked pass (see dowhy_cfr.inference)
        from .inference import CFRBootstrapInference

        options = dict(super()._get_inference_options())
        options["bootstrap"] = CFRBootstrapInference
        return options

    def _strata(self, Y, T, *args, **kwargs):
        """Bootstrap replicas keep the treated/control counts (EconML calls this)."""
        return V.as_1d("T", T)

    # ------------------------------------------------------------------ fit
    def _config(self, loss: str) -> CFRConfig:
        params = {f: getattr(self, f) for f in _CONFIG_FIELDS}
        return CFRConfig(loss=loss, **params).validate()

    @BaseCateEstimator._wrap_fit
    def fit(self, Y, T, *, X, W=None, inference=None):
        """Train the networks on outcomes ``Y``, treatments ``T`` and covariates ``X`` (and ``W``).

        Parameters
        ----------
        Y : array_like, shape (n,) or (n, 1)
            Outcome. 0/1 outcomes use log-loss (``loss="auto"``).
        T : array_like, shape (n,) or (n, 1)
            Binary treatment (any two labels; the first of ``categories`` is the control).
        X : array_like, shape (n, d_x), or None
            Covariates: confounders and effect modifiers. ``effect(X)`` is a function of these.
        W : array_like, shape (n, d_w), optional
            Further confounders the representation sees; CATE is then averaged over W given X by
            ``model_final`` (see the class docstring).
        inference : str, Inference or None
            ``"bootstrap"`` or an EconML ``BootstrapInference`` for intervals.

        Returns
        -------
        self
        """
        xw, arms, y = self._check_fit_inputs(Y, T, X, W)
        k = self._check_n_ensemble()
        rng = check_random_state(self.random_state)
        seeds = [int(s) for s in rng.randint(0, 2**31 - 1, size=k)]
        self._train(xw, np.tile(arms, (k, 1)), np.tile(y, (k, 1)), seeds)
        self._finish(xw)
        return self

    def fit_stacked(self, Y, T, *, X, W=None, units=None):
        """Fit one independent copy of this estimator per outcome vector, in one stacked pass.

        For benchmarks and simulations with several datasets of equal size that share their
        covariates (e.g. IHDP realizations): ``Y[k]`` (and ``T[k]`` if ``T`` is 2-D) is dataset
        ``k``. The ``K`` networks train together -- much faster than ``K`` separate fits -- and
        each returned estimator is exactly what ``clone(self).fit(Y[k], T[k], X=X, W=W)`` would
        give with member seed ``k`` (up to float rounding).

        Parameters
        ----------
        Y : array_like, shape (K, n), or a list of K vectors of length n
        T : array_like, shape (n,) shared by all datasets, or (K, n)
        X, W : covariates shared by all datasets, as in :meth:`fit`.
        units : array_like of int, shape (K, m), optional
            Dataset k consists of the rows ``units[k]`` of ``X``/``W``/``Y[k]``/``T[k]`` (e.g.
            each realization's own training units). Default: all rows.

        Returns
        -------
        list of K fitted estimators (``n_ensemble`` must be 1).
        """
        if self._check_n_ensemble() != 1:
            raise ValueError("fit_stacked needs n_ensemble=1 (each dataset gets one network)")
        ys = [np.asarray(v) for v in Y] if isinstance(Y, (list, tuple)) else np.asarray(Y)
        if np.ndim(ys) != 2:
            raise ValueError(f"Y must have shape (K, n) for fit_stacked; got {np.shape(ys)}")
        k = len(ys)
        t_arr = np.asarray(T)
        ts = [t_arr] * k if t_arr.ndim == 1 else list(t_arr)
        if len(ts) != k:
            raise ValueError(f"T has {len(ts)} rows but Y has {k}; give one T per dataset or "
                             f"a single shared T")
        template = clone(self)
        template._prefit(ys[0], ts[0], X=X, W=W)
        xw, arms0, y0 = template._check_fit_inputs(ys[0], ts[0], X, W)
        arms = [arms0]
        y_all = [y0]
        for j in range(1, k):
            _, a_j, y_j = template._check_fit_inputs(ys[j], ts[j], X, W)
            arms.append(a_j)
            y_all.append(y_j)
        rows = None
        if units is not None:
            rows = np.asarray(units)
            if rows.ndim != 2 or rows.shape[0] != k or not np.issubdtype(rows.dtype, np.integer):
                raise ValueError(f"units must be an integer array of shape (K={k}, m); got "
                                 f"shape {rows.shape} and dtype {rows.dtype}")
            if rows.min() < 0 or rows.max() >= xw.shape[0]:
                raise ValueError(f"units must index rows 0..{xw.shape[0] - 1} of X")
        rng = check_random_state(self.random_state)
        seeds = [int(s) for s in rng.randint(0, 2**31 - 1, size=k)]
        template._train(xw, np.stack(arms), np.stack(y_all), seeds, rows=rows)
        template._postfit(ys[0], ts[0], X=X, W=W)
        template._inference = None
        members = []
        for j in range(k):
            est = template._member(j)
            est._finish(xw if rows is None else xw[rows[j]])
            members.append(est)
        return members

    def fit_chunks(self, chunks, *, validation):
        """Fit on training data read chunk by chunk (data larger than memory).

        Parameters
        ----------
        chunks : re-iterable of ``(Y, T, X)``
            A list, a torch ``DataLoader`` yielding ``(Y, T, X)`` tuples or dicts, or a
            zero-argument function returning a fresh iterator (e.g. over Parquet row groups).
            It is read twice for statistics, then cycled over during training; only one chunk is
            in memory at a time. Chunks smaller than ``batch_size`` or missing an arm are skipped
            during training.
        validation : tuple ``(Y_val, T_val, X_val)``
            Held-out data (in memory) for early stopping.

        Returns
        -------
        self

        See :mod:`dowhy_cfr.streaming` for details. ``W`` and ``inference`` are not supported
        here; ``ate()`` without X averages over the validation units.
        """
        from .streaming import fit_chunks

        return fit_chunks(self, chunks, validation)

    def _check_n_ensemble(self) -> int:
        k = self.n_ensemble
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"n_ensemble={k!r} is invalid: it must be a positive integer")
        return int(k)

    def _train(self, xw, arms, y, seeds, rows=None, split=None):
        """Train ``K = len(seeds)`` networks: member k on outcomes ``y[k]`` / arms ``arms[k]``
        (shape (K, n)) of the units ``rows[k]`` (default: all), sharing the covariates ``xw``.

        ``split = (train_idx, val_idx)`` (each (K, m)) fixes the training/validation rows
        instead of splitting ``rows`` (the bootstrap resamples each side of a unit-level split).
        """
        if split is not None:
            rows = np.concatenate(split, axis=1)
        loss = self._resolve_loss(y)
        config = self._config(loss)
        # fitted preprocessing: standardise every covariate, and Y (per member) for the squared loss
        self._x_mean = xw.mean(0)
        scale = xw.std(0)
        self._x_scale = np.where(scale > 0, scale, 1.0)
        k = len(seeds)
        if rows is None:
            rows = np.tile(np.arange(xw.shape[0]), (k, 1))
        if loss == "mse":
            y_used = np.take_along_axis(y, rows, axis=1)  # each member's own units
            self._y_mean = y_used.mean(1)
            ys = y_used.std(1)
            self._y_scale = np.where(ys > 0, ys, 1.0)
        else:
            self._y_mean, self._y_scale = np.zeros(k), np.ones(k)
        self.config_ = config
        self.loss_ = loss

        train_idx, val_idx = self._split(arms, rows, seeds, config) if split is None else split
        n_train = train_idx.shape[1]
        if config.batch_size > n_train:
            warnings.warn(
                f"batch_size={config.batch_size} is larger than the training split "
                f"({n_train} units); using batch_size={n_train}",
                UserWarning,
                stacklevel=3,
            )
            config.batch_size = n_train
        self._device = _resolve_device(self.device)
        x_t = torch.as_tensor(self._standardize(xw), dtype=torch.float32)
        y_std = (y - self._y_mean[:, None]) / self._y_scale[:, None]
        result = train_cfr(
            x_t.unsqueeze(0).expand(k, -1, -1),
            torch.as_tensor(arms, dtype=torch.long),
            torch.as_tensor(y_std, dtype=torch.float32),
            train_idx=torch.as_tensor(train_idx),
            val_idx=torch.as_tensor(val_idx),
            config=config,
            seeds=seeds,
            n_arms=self._n_arms,
            per_model_data=True,
            device=self._device,
            progress=self._show_progress(),
        )
        self._net = result.net
        self.training_result_ = result
        self.best_iteration_ = result.best_step.copy()
        self.n_iter_ = int(result.n_steps)
        self.history_ = self._history_frame(result.history)
        self.seeds_ = list(seeds)
        return result

    def _bootstrap_replicas(self, Y, T, *, X=None, W=None, n_replicas, random_state=None,
                            n_steps=None):
        """``n_replicas`` fitted copies of this estimator, each trained on a resample of the
        units drawn with replacement within each treatment arm -- all in one stacked pass.

        With ``n_ensemble = E`` every replica is itself an ensemble of E networks (K = B * E).
        ``n_steps`` trains every replica for that many steps without early stopping (the best
        validation checkpoint among them is kept); None trains them like the estimator.
        """
        template = clone(self)
        if n_steps is not None:
            template.set_params(n_iter=int(n_steps), patience=None)
        template._prefit(Y, T, X=X, W=W)
        xw, arms, y = template._check_fit_inputs(Y, T, X, W)
        base = self.random_state if random_state is None else random_state
        if isinstance(base, (int, np.integer)) and not isinstance(base, bool):
            rng = np.random.default_rng([int(base), 0xB0075])  # not the estimator's own stream
        else:
            rng = np.random.default_rng(check_random_state(base).randint(0, 2**31 - 1))
        e = template._check_n_ensemble()
        n = len(arms)
        seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=n_replicas * e)]
        # Split the *units* into training and validation first (the estimator's own stratified
        # split, with the replica's seed), then resample each side with replacement within each
        # arm. Resampling first and splitting the resample would put copies of one unit on both
        # sides: the validation loss would then reward memorising the training units and early
        # stopping would come late.
        config = template._config(template._resolve_loss(y[None, :]))
        all_units = np.arange(n)[None, :]
        train_rows, val_rows = [], []
        for b in range(n_replicas):
            tr, va = template._split(arms[None, :], all_units, [seeds[b * e]], config)
            train_rows.append(_resample_within_arms(tr[0], arms, rng))
            val_rows.append(_resample_within_arms(va[0], arms, rng))
        train_rows = np.repeat(np.stack(train_rows), e, axis=0)
        val_rows = np.repeat(np.stack(val_rows), e, axis=0)
        rows = np.concatenate([train_rows, val_rows], axis=1)
        k = n_replicas * e
        template._train(xw, np.tile(arms, (k, 1)), np.tile(y, (k, 1)), seeds,
                        split=(train_rows, val_rows))
        template._postfit(Y, T, X=X, W=W)
        template._inference = None
        replicas = []
        for b in range(n_replicas):
            rep = template._member(list(range(b * e, (b + 1) * e)))
            rep._finish(xw[rows[b * e]])
            replicas.append(rep)
        return replicas

    def _member(self, members) -> "CFR":
        """A fitted estimator holding only the given member(s) of a stacked fit."""
        members = [members] if np.isscalar(members) else list(members)
        est = clone(self)
        skip = {"_net", "training_result_", "history_"}
        for key, value in self.__dict__.items():
            if key not in est.get_params() and key not in skip:
                est.__dict__[key] = copy.deepcopy(value)
        est._net = self._net.select(members)
        est._y_mean = self._y_mean[members].copy()
        est._y_scale = self._y_scale[members].copy()
        est.best_iteration_ = self.best_iteration_[members].copy()
        est.seeds_ = [self.seeds_[j] for j in members]
        h = self.history_[self.history_["member"].isin(members)].copy()
        h["member"] = h["member"].map({j: i for i, j in enumerate(members)})
        est.history_ = h.reset_index(drop=True)
        return est

    def _finish(self, xw):
        """Unit-level effects on the fitted units: the final stage (with W) and X=None use them."""
        tau_units = self._tau_standardized_input(self._standardize(xw))
        self._tau_fit_mean = tau_units.mean(0)
        self.model_final_ = None
        if self._n_w > 0 and self._n_x > 0:
            model = self.model_final
            if model is None:
                from sklearn.ensemble import HistGradientBoostingRegressor

                model = HistGradientBoostingRegressor(random_state=self.seeds_[0] % (2**32 - 1))
            self._final_x = xw[:, : self._n_x]
            self._final_tau = tau_units
            self.model_final_ = [clone(model).fit(self._final_x, tau_units[:, j])
                                 for j in range(tau_units.shape[1])]

    def _check_fit_inputs(self, Y, T, X, W):
        if X is None and W is None:
            raise ValueError("X is required (W alone is allowed only together with X=None "
                             "when you want an average effect); pass the covariates as X")
        y = V.as_1d("Y", Y)
        if isinstance(Y, (pd.DataFrame, np.ndarray)) and np.ndim(Y) == 2 and np.shape(Y)[1] > 1:
            raise ValueError(f"Y must be a single outcome; got {np.shape(Y)[1]} columns. Fit one "
                             f"estimator per outcome.")
        try:
            y = y.astype("float64")
        except (TypeError, ValueError) as exc:
            raise TypeError("Y must be numeric; encode a categorical outcome as 0/1") from exc
        V.check_finite("Y", y)
        t_raw = V.as_1d("T", T)
        x = V.as_2d_float("X", X, allow_none=True)
        w = V.as_2d_float("W", W, allow_none=True)
        V.check_same_length(Y=y, T=t_raw, X=x, W=w)
        self._x_columns = V.column_names(X)
        self._w_columns = V.column_names(W)
        self._n_x = 0 if x is None else x.shape[1]
        self._n_w = 0 if w is None else w.shape[1]
        self.n_features_in_ = self._n_x + self._n_w

        categories = self.categories
        if categories != "auto":
            categories = [categories]
        uniq = pd.unique(pd.Series(t_raw, dtype=object)) if t_raw.dtype == object else np.unique(t_raw)
        if len(uniq) < 2:
            raise ValueError(f"T has a single value ({_plain(uniq[0])!r}); CFR needs treated and control "
                             f"units")
        if len(uniq) > 20:
            raise ValueError(
                f"T has {len(uniq)} distinct values; CFR treats T as categorical (one outcome head "
                f"per arm). A continuous treatment is not supported: discretise it first."
            )
        self.transformer = one_hot_encoder(categories=categories, drop="first")
        try:
            t_onehot = self.transformer.fit_transform(t_raw.reshape(-1, 1))
        except ValueError as exc:
            raise ValueError(f"T does not match categories={self.categories!r}: {exc}") from exc
        self._d_t = t_onehot.shape[1:]
        # arm index: 0 for the first category (control), a for the a-th other category
        arms = (t_onehot @ np.arange(1, t_onehot.shape[1] + 1)).round().astype(np.int64)
        self._n_arms = t_onehot.shape[1] + 1
        present = np.bincount(arms, minlength=self._n_arms)
        if (present == 0).any():
            missing = [_plain(c) for c, n in zip(self.transformer.categories_[0], present) if n == 0]
            raise ValueError(f"treatment categories {missing} have no units in T")
        xw = np.hstack([a for a in (x, w) if a is not None])
        return xw, arms, y

    def _resolve_loss(self, y: np.ndarray) -> str:
        binary = bool(np.isin(y, (0.0, 1.0)).all())
        if self.loss == "auto":
            return "logloss" if binary and len(np.unique(y)) == 2 else "mse"
        if self.loss == "logloss" and not binary:
            raise ValueError("loss='logloss' needs a binary outcome with values 0 and 1; Y has "
                             "other values. Use loss='mse' for a continuous outcome.")
        if self.loss not in ("mse", "logloss"):
            raise ValueError(f"loss={self.loss!r} is invalid: choose 'auto', 'mse' or 'logloss'")
        return self.loss

    def _split(self, arms: np.ndarray, rows: np.ndarray, seeds, config: CFRConfig):
        """Stratified training/validation split of each member's units ``rows[k]``."""
        tr, va = [], []
        for k, s in enumerate(seeds):
            arms_k = arms[k][rows[k]]
            counts = np.bincount(arms_k, minlength=self._n_arms)
            n_val_min = np.ceil(counts * config.val_fraction)
            too_small = (counts < 2) | (n_val_min < 1) | (counts - n_val_min < 1)
            if too_small.any():
                label = _plain(self.transformer.categories_[0][int(np.argmax(too_small))])
                raise ValueError(
                    f"treatment arm {label!r} has only {counts[too_small].min()} unit(s); at "
                    f"least 2 are needed to split it into training and validation (val_fraction="
                    f"{config.val_fraction})"
                )
            a, b = train_test_split(np.arange(len(arms_k)), test_size=config.val_fraction,
                                    stratify=arms_k, random_state=s % (2**32 - 1))
            tr.append(rows[k][a])
            va.append(rows[k][b])
        return np.stack(tr), np.stack(va)

    def _show_progress(self) -> bool:
        if self.verbose is None or self.verbose <= 0:
            return False
        return self.verbose >= 2 or _interactive()

    def _history_frame(self, hist: dict) -> pd.DataFrame:
        steps = hist["step"]
        k = hist["val_loss"].shape[1]
        frames = []
        for m in range(k):
            keep = ~np.isnan(hist["val_loss"][:, m])  # a member's rows end when it stops
            frames.append(pd.DataFrame({
                "step": steps,
                "member": m,
                "train_loss": hist["train_loss"][:, m],
                "train_imbalance": hist["train_imbalance"][:, m],
                "val_loss": hist["val_loss"][:, m],
                "val_imbalance": hist["val_imbalance"][:, m],
                "val_objective": hist["val_objective"][:, m],
                "learning_rate": hist["learning_rate"],
            })[keep])
        return pd.concat(frames, ignore_index=True)

    # ------------------------------------------------------------------ prediction helpers
    def _check_fitted(self):
        if not hasattr(self, "_net"):
            raise ValueError(f"This {type(self).__name__} instance is not fitted yet; call "
                             f"fit(Y, T, X=...) first")

    def _standardize(self, xw: np.ndarray) -> np.ndarray:
        return (xw - self._x_mean) / self._x_scale

    def _check_block(self, name, A, n_expected, names_expected, n_rows=None):
        if n_expected == 0:
            if A is not None:
                raise ValueError(f"{name} was not used at fit; pass {name}=None")
            return None
        if A is None:
            raise ValueError(f"{name} with {n_expected} column(s) is required (it was used at fit)")
        arr = V.as_2d_float(name, A)
        if arr.shape[1] != n_expected:
            raise ValueError(f"{name} has {arr.shape[1]} columns but the estimator was fitted "
                             f"with {n_expected}")
        got = V.column_names(A)
        if names_expected is not None and got is not None and got != names_expected:
            raise ValueError(f"{name}'s columns {got} differ from those seen at fit "
                             f"{names_expected} (names and order must match)")
        if n_rows is not None and arr.shape[0] != n_rows:
            raise ValueError(f"{name} has {arr.shape[0]} rows, X has {n_rows}; they must match")
        return arr

    def _features(self, X, W) -> np.ndarray:
        self._check_fitted()
        x = self._check_block("X", X, self._n_x, self._x_columns)
        w = self._check_block("W", W, self._n_w, self._w_columns,
                              None if x is None else x.shape[0])
        return self._standardize(np.hstack([a for a in (x, w) if a is not None]))

    def _outputs(self, xw_std: np.ndarray) -> np.ndarray:
        """Per-member, per-arm predictions on the outcome scale: (K, n_arms, n)."""
        out = predict(self._net, torch.as_tensor(xw_std, dtype=torch.float32))
        out = out.double().cpu().numpy()
        if self.loss_ == "logloss":
            return 1.0 / (1.0 + np.exp(-out))
        return out * self._y_scale[:, None, None] + self._y_mean[:, None, None]

    def _tau_standardized_input(self, xw_std: np.ndarray) -> np.ndarray:
        """Ensemble-mean effect of each non-control arm vs control: (n, n_arms - 1)."""
        out = self._outputs(xw_std).mean(0)  # (n_arms, n)
        return (out[1:] - out[0:1]).T

    # ------------------------------------------------------------------ public API
    def const_marginal_effect(self, X=None):
        """Effect of treatment vs control at ``X``: shape (m, d_t) (or (m, d_y, d_t) for 2-D Y).

        Without W at fit, this is ``h1(Phi(x)) - h0(Phi(x))`` (ensemble mean). With W at fit, it
        is ``model_final_`` applied to X. With X=None at fit, the average effect over the fitted
        units (shape (1, ...)).
        """
        self._check_fitted()
        if self._n_x == 0:
            if X is not None:
                raise ValueError("the estimator was fitted with X=None; call with X=None")
            tau = self._tau_fit_mean.reshape(1, -1)
        elif self.model_final_ is not None:
            x = self._check_block("X", X, self._n_x, self._x_columns)
            tau = np.column_stack([m.predict(x) for m in self.model_final_])
        else:
            tau = self._tau_standardized_input(self._features(X, None))
        if self._d_y:
            tau = tau[:, None, :]
        return tau

    def individual_effect(self, X=None, W=None):
        """Unit-level effects ``tau(x_i, w_i)`` from the heads (ensemble mean).

        Shape (m,) for a binary treatment; (m, n_arms - 1) -- each arm vs control -- otherwise.
        """
        tau = self._tau_standardized_input(self._features(X, W))
        return tau[:, 0] if tau.shape[1] == 1 else tau

    def predict_outcomes(self, X=None, W=None):
        """Predicted potential outcomes ``(mu0, mu1)`` at ``X`` (and ``W``), each shape (m,).

        One array per treatment arm, in the order of the categories (control first). For binary
        outcomes these are probabilities. Averaged over the ensemble.
        """
        out = self._outputs(self._features(X, W)).mean(0)
        return tuple(out)

    def transform(self, X=None, W=None, *, member: int = 0):
        """The learned representation ``Phi(x)``, shape (m, rep_dim), of one ensemble member."""
        xw = self._features(X, W)
        if not 0 <= member < self._net.n_models:
            raise ValueError(f"member must be in [0, {self._net.n_models}); got {member}")
        _, phi = predict(self._net, torch.as_tensor(xw, dtype=torch.float32), representation=True)
        return phi[member].double().cpu().numpy()

    def save(self, path):
        """Save the fitted estimator to one file: JSON configuration + numeric arrays, no pickle.

        ``CFR.load(path)`` restores an estimator that predicts bit-identically. See
        :mod:`dowhy_cfr._io` for the format. Returns the path.
        """
        from . import _io

        return _io.save(self, path)

    @classmethod
    def load(cls, path):
        """Load an estimator written by :meth:`save` (CPU; move with ``device`` on refit)."""
        from . import _io

        return _io.load(cls, path)

    def representation_at_init(self, X=None, W=None, *, member: int = 0):
        """``Phi(x)`` of the same network before training (same seed), shape (m, rep_dim)."""
        from .core import CFRNet
        from .core.training import derive_seeds

        xw = self._features(X, W)
        if not 0 <= member < len(self.seeds_):
            raise ValueError(f"member must be in [0, {len(self.seeds_)}); got {member}")
        init_seed = derive_seeds([self.seeds_[member]])[0]
        c = self.config_
        net = CFRNet(xw.shape[1], init_seed, n_arms=self._n_arms, n_rep_layers=c.n_rep_layers,
                     rep_dim=c.rep_dim, n_head_layers=c.n_head_layers, head_dim=c.head_dim,
                     normalization=c.normalization, weight_init=c.weight_init)
        _, phi = predict(net, torch.as_tensor(xw, dtype=torch.float32), representation=True)
        return phi[0].double().numpy()


_TARNET_SIGNATURE = inspect.signature(CFR.__init__).replace(
    parameters=[p for name, p in inspect.signature(CFR.__init__).parameters.items()
                if name != "alpha"]
)


class TARNet(CFR):
    """TARNet: CFR without the imbalance penalty (``alpha = 0``), same API.

    The validation history still records the imbalance (``ipm``) of the representation, which
    is what the balance refuter reports. All parameters are those of :class:`CFR` except
    ``alpha``.

    Examples
    --------
    >>> import numpy as np
    >>> from dowhy_cfr import TARNet
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); T = rng.binomial(1, 0.5, size=300)
    >>> Y = X[:, 0] + 2 * T + rng.normal(scale=0.1, size=300)
    >>> TARNet(n_iter=200, random_state=0, verbose=0).fit(Y, T, X=X).ate(X) > 1
    True
    """

    def __init__(self, **params):
        if "alpha" in params:
            raise TypeError("TARNet has no alpha (it is CFR with alpha=0); use CFR(alpha=...)")
        defaults = {name: p.default for name, p in _TARNET_SIGNATURE.parameters.items()
                    if name != "self"}
        unknown = set(params) - set(defaults)
        if unknown:
            raise TypeError(f"TARNet got unexpected keyword argument(s) {sorted(unknown)}")
        super().__init__(alpha=0.0, **{**defaults, **params})

    __init__.__signature__ = _TARNET_SIGNATURE
