"""The methods compared by the benchmarks: CFR/TARNet and the baselines a user would pick.

Every baseline is a small class with ``fit(x, t, y)`` and ``effect(x)`` (estimated
``E[Y(1) - Y(0) | x]``). Outcome models are regressors for continuous outcomes; for 0/1 outcomes
(Jobs) the linear baselines become logistic regressions (the paper's LR-1 / LR-2) and the other
models regress the 0/1 outcome (a linear-probability-style estimate of the effect on
``P(Y = 1)``).

Baselines (names as in the output tables):

``OLS-1`` (``LR-1`` for binary Y)
    one linear (logistic) regression on ``[x, t]``; effect ``f(x, 1) - f(x, 0)`` (Sec. 5).
``OLS-2`` (``LR-2``)
    separate linear (logistic) regressions per arm (T-learner).
``k-NN``
    T-learner with ``KNeighborsRegressor(n_neighbors=10)`` on standardised covariates.
``RF``
    random forest with the treatment as a feature (S-learner, as in the paper's "RF"):
    ``RandomForestRegressor(n_estimators=200, min_samples_leaf=1)`` on ``[x, t]``.
``CF``
    EconML's ``CausalForestDML`` (Wager & Athey's causal forest with DML residualisation):
    200 trees, random-forest outcome model, standardised logistic propensity, ``cv=2``.
``X-learner``
    EconML ``XLearner`` with random-forest outcome/CATE models and a logistic propensity.
``DR-learner``
    EconML ``DRLearner`` with random-forest outcome regression, logistic propensity clipped to
    [0.01, 0.99], random-forest final model.

Every model uses ``n_jobs=1`` (the benchmarks are meant to share a small machine) and is seeded.
"""

from __future__ import annotations

import argparse
import inspect
import json
import warnings

import numpy as np
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

__all__ = ["BASELINES", "CFR_METHODS", "ALL_METHODS", "BCF", "make_baseline", "cfr_params",
           "display_name", "parse_cfr_params"]

#: CFR-family methods, trained with ``CFR.fit_stacked`` (K datasets per pass).
CFR_METHODS = ("TARNet", "CFR-MMD", "CFR-Wass")
#: Baselines, fitted one dataset at a time.
BASELINES = ("OLS-1", "OLS-2", "k-NN", "RF", "CF", "X-learner", "DR-learner")
#: All methods, in the order of the paper's tables (baselines first).
ALL_METHODS = BASELINES + CFR_METHODS

# Tiny settings used by tests and smoke runs (--tiny)
TINY_NET = dict(n_rep_layers=1, rep_dim=20, n_head_layers=1, head_dim=10, eval_every=10)


def display_name(method: str, binary: bool) -> str:
    """Table label: the linear baselines are logistic regressions (LR-1/LR-2) for 0/1 outcomes."""
    if binary and method in ("OLS-1", "OLS-2"):
        return method.replace("OLS", "LR")
    return method


def _logistic():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))


def _forest(seed, n_trees, leaf=5):
    return RandomForestRegressor(n_estimators=n_trees, min_samples_leaf=leaf, n_jobs=1,
                                 random_state=seed)


class _Baseline:
    """Common interface: ``fit(x, t, y)`` then ``effect(x)``."""

    def __init__(self, binary: bool, seed: int, tiny: bool):
        self.binary = binary
        self.seed = int(seed)
        self.n_trees = 10 if tiny else 200

    def fit(self, x, t, y):  # pragma: no cover - abstract
        raise NotImplementedError

    def effect(self, x) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class _SLearner(_Baseline):
    """One model on ``[x, t]``; effect = f(x, 1) - f(x, 0)."""

    def _model(self):
        raise NotImplementedError

    def fit(self, x, t, y):
        self.model_ = self._model().fit(np.column_stack([x, t]), y)
        return self

    def _predict(self, xt):
        if self.binary and hasattr(self.model_, "predict_proba"):
            return self.model_.predict_proba(xt)[:, 1]
        return self.model_.predict(xt)

    def effect(self, x):
        ones, zeros = np.ones(len(x)), np.zeros(len(x))
        treated = self._predict(np.column_stack([x, ones]))
        return treated - self._predict(np.column_stack([x, zeros]))


class _TLearner(_Baseline):
    """One model per arm; effect = f1(x) - f0(x)."""

    def _model(self):
        raise NotImplementedError

    def fit(self, x, t, y):
        t = np.asarray(t) > 0.5
        self.models_ = [self._model().fit(x[t == a], y[t == a]) for a in (False, True)]
        return self

    def _predict(self, m, x):
        if self.binary and hasattr(m, "predict_proba"):
            proba = m.predict_proba(x)
            cls = list(m.classes_)
            return proba[:, cls.index(1.0)] if 1.0 in cls else np.zeros(len(x))
        return m.predict(x)

    def effect(self, x):
        return self._predict(self.models_[1], x) - self._predict(self.models_[0], x)


class OLS1(_SLearner):
    def _model(self):
        return _logistic() if self.binary else LinearRegression()


class OLS2(_TLearner):
    def _model(self):
        return _logistic() if self.binary else LinearRegression()


class KNN(_TLearner):
    def _model(self):
        return make_pipeline(StandardScaler(), KNeighborsRegressor(n_neighbors=10))

    def _predict(self, m, x):
        return m.predict(x)


class RF(_SLearner):
    def _model(self):
        return _forest(self.seed, self.n_trees, leaf=1)

    def _predict(self, xt):
        return self.model_.predict(xt)


class _EconML(_Baseline):
    def fit(self, x, t, y):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.est_ = self._make().fit(y, np.asarray(t).astype(int), X=x)
        return self

    def effect(self, x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(self.est_.effect(x), dtype=float).reshape(-1)


class CF(_EconML):
    def _make(self):
        from econml.dml import CausalForestDML

        return CausalForestDML(
            model_y=_forest(self.seed, max(self.n_trees // 2, 10)),
            model_t=_logistic(),
            discrete_treatment=True,
            n_estimators=max(4, (self.n_trees // 4) * 4),  # a multiple of subforest_size=4
            cv=2,
            inference=False,
            n_jobs=1,
            random_state=self.seed,
        )


class XLearnerBaseline(_EconML):
    def _make(self):
        from econml.metalearners import XLearner

        return XLearner(models=_forest(self.seed, max(self.n_trees // 2, 10)),
                        propensity_model=_logistic())

    def fit(self, x, t, y):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.est_ = self._make().fit(y, np.asarray(t).astype(int), X=x, inference=None)
        return self


class DRLearnerBaseline(_EconML):
    def _make(self):
        from econml.dr import DRLearner

        return DRLearner(
            model_propensity=_logistic(),
            model_regression=_forest(self.seed, max(self.n_trees // 2, 10)),
            model_final=_forest(self.seed + 1, max(self.n_trees // 2, 10), leaf=10),
            min_propensity=0.01,
            cv=2,
            random_state=self.seed,
        )


class BCF:
    """Bayesian causal forest (Hahn, Murray & Carvalho 2020) from ``stochtree``, at its defaults.

    ``stochtree.BCFModel().sample`` with its default sampler (5 grow-from-root sweeps, then 100
    retained MCMC draws), no propensity given: stochtree then estimates it with its own BART
    model, as its documentation recommends when none is supplied; one thread, seeded with
    ``random_state``. The CATE is the posterior mean of ``tau(x)`` (``terms="cate"``); the ATE
    over ``X`` is the posterior mean of ``mean_i tau(x_i)`` and its interval the equal-tailed
    posterior interval of that mean (a credible interval for the mean effect over the given
    units). ``tiny``: 2 sweeps, 10 draws, 20/10 trees (smoke tests). Interface as EconML's:
    ``fit(Y, T, X=X)``, ``effect``, ``effect_interval`` (posterior quantiles of tau(x)),
    ``ate``, ``ate_interval``.
    """

    def __init__(self, *, random_state=None, tiny: bool = False):
        self.random_state = random_state
        self.tiny = tiny

    def fit(self, Y, T, *, X, W=None, inference=None):
        from stochtree import BCFModel

        if W is not None:
            raise ValueError("BCF takes no W here: pass the confounders as columns of X")
        kw = {}
        if self.tiny:
            kw = dict(num_gfr=2, num_mcmc=10, prognostic_forest_params={"num_trees": 20},
                      treatment_effect_forest_params={"num_trees": 10})
        general = {"num_threads": 1}
        if self.random_state is not None:
            general["random_seed"] = int(self.random_state)
        self.model_ = BCFModel()
        self.model_.sample(X_train=np.asarray(X, dtype=float), Z_train=np.asarray(T, dtype=float),
                           y_train=np.asarray(Y, dtype=float).reshape(-1),
                           general_params=general, **kw)
        return self

    def _draws(self, X) -> np.ndarray:
        """Posterior draws of tau(x): array (n, draws)."""
        X = np.asarray(X, dtype=float)
        draws = self.model_.predict(X=X, Z=np.zeros(len(X)), terms="cate", type="posterior")
        return np.asarray(draws, dtype=float).reshape(len(X), -1)

    def effect_interval(self, X, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
        """The equal-tailed ``1 - alpha`` posterior interval of each ``tau(x)``."""
        lo, hi = np.quantile(self._draws(X), [alpha / 2, 1 - alpha / 2], axis=1)
        return lo, hi

    def effect(self, X) -> np.ndarray:
        return self._draws(X).mean(axis=1)

    def ate(self, X) -> float:
        return float(self._draws(X).mean())

    def ate_interval(self, X, alpha: float = 0.05) -> tuple[float, float]:
        means = self._draws(X).mean(axis=0)
        lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
        return float(lo), float(hi)


_REGISTRY = {
    "OLS-1": OLS1,
    "OLS-2": OLS2,
    "k-NN": KNN,
    "RF": RF,
    "CF": CF,
    "X-learner": XLearnerBaseline,
    "DR-learner": DRLearnerBaseline,
}


def make_baseline(method: str, *, binary: bool, seed: int, tiny: bool = False) -> _Baseline:
    """An unfitted baseline by table name (see the module docstring)."""
    try:
        cls = _REGISTRY[method]
    except KeyError:
        raise ValueError(f"unknown baseline {method!r}; choose from {list(_REGISTRY)}") from None
    return cls(binary=binary, seed=seed, tiny=tiny)


def cfr_params(method: str, *, alpha_wass: float, alpha_mmd: float, n_iter: int | None,
               tiny: bool, seed: int, device: str = "cpu", extra: dict | None = None
               ) -> tuple[type, dict]:
    """Estimator class and keyword arguments of a CFR-family method.

    ``TARNet`` is CFR with ``alpha = 0``; ``CFR-Wass`` uses the entropic Wasserstein IPM and
    ``CFR-MMD`` the squared linear MMD (Sec. 4). Everything else is the estimator's default
    (the paper's IHDP configuration), except ``n_iter``, the ``tiny`` network, ``device`` and
    the keyword arguments ``extra`` (``--cfr-params``; TARNet ignores an ``alpha`` there).
    """
    from ..estimator import CFR, TARNet

    kw: dict = dict(random_state=seed, verbose=0, device=device)
    if tiny:
        kw.update(TINY_NET)
    if n_iter is not None:
        kw["n_iter"] = int(n_iter)
    kw.update(extra or {})
    if method == "TARNet":
        kw.pop("alpha", None)
        return TARNet, kw
    if method == "CFR-Wass":
        return CFR, {"ipm": "wass", "alpha": alpha_wass, **kw}
    if method == "CFR-MMD":
        return CFR, {"ipm": "mmd2_lin", "alpha": alpha_mmd, **kw}
    raise ValueError(f"unknown CFR method {method!r}; choose from {list(CFR_METHODS)}")


def parse_cfr_params(value: str) -> dict:
    """``--cfr-params``: a JSON object of CFR keyword arguments, e.g. ``'{"batch_size": 256}'``;
    names are checked against ``CFR``'s signature."""
    from ..estimator import CFR

    try:
        params = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not JSON: {exc}") from None
    if not isinstance(params, dict):
        raise argparse.ArgumentTypeError(f"{value!r}: give a JSON object, e.g. "
                                         '\'{"batch_size": 256}\'')
    known = set(inspect.signature(CFR).parameters)
    unknown = sorted(set(params) - known)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown CFR argument(s) {unknown}; CFR takes "
                                         f"{', '.join(sorted(known))}")
    return params
