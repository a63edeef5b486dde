r"""Doubly robust (AIPW) average effects on top of CFR's outcome heads, with analytic intervals.

CFR's heads give the potential-outcome regressions :math:`\hat\mu_a(x) = h_a(\Phi(x))`. The plug-in
average effect :math:`\frac1n\sum_i \hat\mu_1(x_i) - \hat\mu_0(x_i)` inherits the heads' bias
(regularisation, the imbalance penalty, early stopping). The augmented inverse-propensity-weighted
(AIPW, doubly robust) estimator adds a weighted mean of the residuals, with a propensity model
:math:`\hat e_a(x) = \hat P(T = a \mid x)`:

.. math::

    \psi_i = \hat\mu_1(x_i) - \hat\mu_0(x_i)
        + \frac{1[t_i = 1]\,(y_i - \hat\mu_1(x_i))}{\hat e_1(x_i)}
        - \frac{1[t_i = 0]\,(y_i - \hat\mu_0(x_i))}{\hat e_0(x_i)},
    \qquad \hat\theta_{ATE} = \frac1n \sum_i \psi_i .

It is consistent if either the outcome model or the propensity model is, and when both converge
fast enough (product of the rates :math:`o(n^{-1/2})`) it is asymptotically normal with the
efficient variance, estimated by the empirical variance of its influence function
(Robins, Rotnitzky & Zhao 1994; Hahn 1998; Chernozhukov et al. 2018).

For the effect on the treated (units at arm ``a1``, compared with arm ``a0``) and on the controls
(units at ``a0``) the doubly robust estimators are ratios of means (Hahn 1998; Moodie et al. 2018):

.. math::

    \hat\theta_{ATT} = \frac{\sum_i 1[t_i = a_1](y_i - \hat\mu_{a_0}(x_i))
        - 1[t_i = a_0] \frac{\hat e_{a_1}(x_i)}{\hat e_{a_0}(x_i)} (y_i - \hat\mu_{a_0}(x_i))}
        {\sum_i 1[t_i = a_1]},

    \hat\theta_{ATC} = \frac{\sum_i 1[t_i = a_0](\hat\mu_{a_1}(x_i) - y_i)
        + 1[t_i = a_1] \frac{\hat e_{a_0}(x_i)}{\hat e_{a_1}(x_i)} (y_i - \hat\mu_{a_1}(x_i))}
        {\sum_i 1[t_i = a_0]} .

Every target is written as :math:`\hat\theta = \bar a / \bar b` with per-unit terms :math:`a_i, b_i`
(:func:`aipw_terms`); its influence function is :math:`\varphi_i = (a_i - \hat\theta\, b_i) / \bar b`
and its standard error :math:`\sqrt{\sum_i \varphi_i^2} / n` (:func:`average_effect`). With more
than two arms the formulas hold for any pair of arms (``a1`` vs ``a0``).

The propensity is cross-fitted (:func:`cross_fit_propensity`): each unit's :math:`\hat e(x_i)` comes
from a classifier that did not see it (scikit-learn's ``cross_val_predict`` over
``StratifiedKFold`` folds), and is clipped below at ``min_propensity``, as EconML's ``DRLearner``
does. The default model is the better, by out-of-fold log-loss, of a logistic regression and
depth-3 gradient boosting (:func:`default_propensity_models`). Whether the outcome predictions
:math:`\hat\mu(x_i)` are out-of-fold is the estimator's choice (``CFR(cross_fit=...)``; see ``docs/debiased.md`` for the measurements behind the default).

References
----------
.. [1] J. M. Robins, A. Rotnitzky, L. P. Zhao. "Estimation of regression coefficients when some
   regressors are not always observed." JASA 89(427), 1994.
.. [2] J. Hahn. "On the role of the propensity score in efficient semiparametric estimation of
   average treatment effects." Econometrica 66(2), 1998.
.. [3] V. Chernozhukov et al. "Double/debiased machine learning for treatment and structural
   parameters." The Econometrics Journal 21(1), 2018.
.. [4] E. E. M. Moodie, O. Saarela, D. A. Stephens. "A doubly robust weighting estimator of the
   average treatment effect on the treated." Stat 7(1), 2018.
.. [5] V. Semenova, V. Chernozhukov. "Debiased machine learning of conditional average treatment
   effects and other causal functions." The Econometrics Journal 24(2), 2021.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

__all__ = ["TARGETS", "AverageEffect", "default_propensity_models", "logistic_propensity_model",
           "boosting_propensity_model", "cross_fit_propensity",
           "aipw_potential_outcomes", "aipw_terms", "average_effect", "plugin_effect",
           "sklearn_seed", "arm_log_loss", "best_linear_projection"]

#: Up to this many units the propensity models are cross-fitted with one BLAS/OpenMP thread: on
#: 2 cores the default cross-fit took 0.24 s on one thread against 0.46 s on two at IHDP size
#: (747 units) and 0.40 s against 0.56 s at 2,000 units (``docs/debiased.md``).
ONE_THREAD_UNITS = 10_000

#: The average effects with a doubly robust estimator: all units, the units at the treatment
#: arm ("att") and the units at the control arm ("atc").
TARGETS = ("ate", "att", "atc")


@dataclass(frozen=True)
class AverageEffect:
    """An average effect over the fitted units with its standard error.

    Attributes
    ----------
    target : {"ate", "att", "atc"}
    estimate : float
        The doubly robust (AIPW) estimate, or the plug-in mean when ``method == "plugin"``.
    stderr : float
        Influence-function standard error (NaN for the plug-in, which has no analytic one).
    plugin : float
        The plug-in mean of the heads' effects over the same units.
    n_units : int
        Number of units averaged over (all units for "ate").
    method : {"aipw", "plugin"}
    """

    target: str
    estimate: float
    stderr: float
    plugin: float
    n_units: int
    method: str = "aipw"

    def interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """The normal ``1 - alpha`` confidence interval ``estimate -/+ z_{1-alpha/2} stderr``."""
        if not 0 < alpha < 1:
            raise ValueError(f"alpha={alpha!r} must be in (0, 1), e.g. 0.05 for 95% intervals")
        half = norm.ppf(1 - alpha / 2) * self.stderr
        return self.estimate - half, self.estimate + half

    def pvalue(self, value: float = 0.0) -> float:
        """Two-sided p-value of the z-test of ``estimate == value``."""
        return float(2 * norm.sf(abs(self.estimate - value) / self.stderr))


def sklearn_seed(seed: int) -> int:
    """A network seed as a scikit-learn ``random_state`` (which must be < 2**32 - 1)."""
    return int(seed) % (2**32 - 1)


def boosting_propensity_model(random_state: int | None = 0):
    """Histogram gradient boosting with trees of depth 3 (100 rounds, learning rate 0.1), leaves
    of at least 40 units and an L2 penalty of 1 on the leaf values, with its own ``random_state``
    (with None scikit-learn draws from numpy's global state, which would change what DoWhy's
    refuter loops draw after a fit; :func:`cross_fit_propensity` seeds a model left at None).

    The larger leaves and the penalty keep the propensities away from 0 and 1 on small data,
    where AIPW divides by them: on Nie & Wager's design A they lowered the AIPW ATE error at
    n = 500 and n = 2000 and left designs B-E unchanged (``docs/debiased.md``). Early stopping
    was tried: a better out-of-fold log-loss, but design A's AIPW ATE error doubled."""
    return HistGradientBoostingClassifier(max_depth=3, max_iter=100, learning_rate=0.1,
                                          min_samples_leaf=40, l2_regularization=1.0,
                                          random_state=random_state)


def logistic_propensity_model():
    """Standardised covariates, then an L2 logistic regression with ``C = 1``.

    Measured against EconML's ``DRLearner`` default (``LogisticRegressionCV``, whose 3-fold
    search scores by accuracy): better out-of-fold log-loss and closer to the true propensity on
    every design and IHDP realization tried, at a tenth of the cost (``docs/debiased.md``).
    """
    return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000))


def default_propensity_models(random_state: int | None = 0) -> dict:
    """The candidates of the default propensity (``model_propensity=None``): a logistic
    regression and depth-3 boosting; :func:`cross_fit_propensity` keeps the one with the lower
    out-of-fold log-loss of the clipped propensities (those the AIPW estimate uses).

    Chosen by measurement (``docs/debiased.md``): on Nie & Wager's design A, whose propensity
    ``sin(pi x1 x2)`` is far from logistic, the logistic model left the AIPW ATE as biased as the
    plug-in while boosting removed the bias, as the true propensity did; on small data with a
    logistic propensity boosting overfits (propensities near the clip, huge weights), which the
    logistic model does not.
    """
    return {"logistic": logistic_propensity_model(),
            "boosting": boosting_propensity_model(random_state)}


def _out_of_fold(model, x, arms, splitter, min_propensity):
    """``model``'s out-of-fold probabilities, clipped below at ``min_propensity``."""
    with warnings.catch_warnings():
        # scikit-learn >= 1.8 announces default changes (e.g. a user's LogisticRegressionCV)
        warnings.filterwarnings("ignore", category=FutureWarning, module="sklearn")
        proba = cross_val_predict(model, x, arms, cv=splitter, method="predict_proba")
    return np.clip(proba, min_propensity, 1.0)


def _seeded(model, seed: int):
    """``model`` with ``random_state=seed`` where it has that parameter left at None."""
    if model.get_params().get("random_state", 0) is None:
        model.set_params(random_state=seed)
    return model


def cross_fit_propensity(model, x: np.ndarray, arms: np.ndarray, *, n_arms: int, cv: int = 5,
                         random_state: int = 0, min_propensity: float = 0.01,
                         return_model: bool = False):
    """Out-of-fold propensities ``P(T = a | x_i)``, shape (n, n_arms), clipped at ``min_propensity``.

    Parameters
    ----------
    model : scikit-learn classifier with ``predict_proba`` (cloned), or None: each of
        :func:`default_propensity_models` is cross-fitted on the same folds and the one with the
        lower out-of-fold log-loss is kept
    x : array (n, d), the covariates the classifier sees
    arms : array (n,) of int in 0..n_arms-1, the treatment arm of each unit
    n_arms : int
    cv : int, the number of ``StratifiedKFold`` folds (shuffled with ``random_state``)
    min_propensity : float, lower clip of every probability
    return_model : bool, also return the model used: the name of the default candidate kept
        (a key of :func:`default_propensity_models`), or the given model's class name

    Returns
    -------
    proba : array (n, n_arms), or ``(proba, model)`` with ``return_model``
    """
    if model is not None and not hasattr(model, "predict_proba"):
        raise TypeError(f"model_propensity must be a classifier with predict_proba; got "
                        f"{type(model).__name__}")
    counts = np.bincount(arms, minlength=n_arms)
    folds = int(min(cv, counts.min()))
    if folds < 2:
        raise ValueError(f"cross-fitting the propensity needs at least 2 units per treatment arm; "
                         f"an arm has {counts.min()}")
    seed = sklearn_seed(random_state)
    splitter = StratifiedKFold(folds, shuffle=True, random_state=seed)
    small = len(arms) <= ONE_THREAD_UNITS  # the caller's thread settings come back afterwards
    with threadpool_limits(1) if small else contextlib.nullcontext():
        name, proba = _cross_fit(model, x, arms, splitter, seed, min_propensity)
    return (proba, name) if return_model else proba


def _cross_fit(model, x, arms, splitter, seed, min_propensity):
    """``(name, clipped out-of-fold probabilities)`` of ``model``, or of the default candidate
    whose clipped probabilities have the lower log-loss when ``model`` is None."""
    if model is not None:
        model = _seeded(clone(model), seed)
        return type(model).__name__, _out_of_fold(model, x, arms, splitter, min_propensity)
    candidates = {name: _out_of_fold(m, x, arms, splitter, min_propensity)
                  for name, m in default_propensity_models(seed).items()}
    name = min(candidates, key=lambda k: arm_log_loss(candidates[k], arms))
    return name, candidates[name]


def arm_log_loss(proba: np.ndarray, arms: np.ndarray) -> float:
    """``-mean_i log proba[i, arms[i]]``: the log-loss of the (clipped) propensities of the arms
    the units received, i.e. of the ``1 / e`` weights that AIPW applies (scikit-learn's
    ``log_loss`` would rescale clipped rows to sum to one)."""
    arms = np.asarray(arms).astype(int)  # indices, also for a boolean treatment
    return float(-np.mean(np.log(proba[np.arange(len(arms)), arms])))


def aipw_potential_outcomes(y, arms, mu, e) -> np.ndarray:
    r"""Per unit and arm, :math:`\psi_{ia} = \hat\mu_a(x_i) + 1[t_i = a](y_i - \hat\mu_a(x_i)) /
    \hat e_a(x_i)`, shape (n, n_arms): its mean over units is the AIPW estimate of
    :math:`E[Y(a)]`, and :math:`\psi_{i a_1} - \psi_{i a_0}` the ATE term of :func:`aipw_terms`."""
    onehot = np.asarray(arms)[:, None] == np.arange(mu.shape[1])
    return mu + onehot * (np.asarray(y)[:, None] - mu) / e


def aipw_terms(y, arms, mu, e, *, a1: int, a0: int, target: str):
    """Per-unit terms ``(a_i, b_i)`` with ``theta = mean(a) / mean(b)`` (module docstring).

    Parameters
    ----------
    y : array (n,), outcomes; arms : array (n,) of int, treatment arms
    mu : array (n, n_arms), outcome predictions per arm; e : array (n, n_arms), propensities
    a1, a0 : the arms compared (effect of ``a1`` vs ``a0``)
    target : {"ate", "att", "atc"}
    """
    if target == "ate":
        psi = aipw_potential_outcomes(y, arms, mu, e)
        a = psi[:, a1] - psi[:, a0]
        return a, np.ones_like(a)
    t1, t0 = (arms == a1).astype(float), (arms == a0).astype(float)
    r1, r0 = y - mu[:, a1], y - mu[:, a0]
    if target == "att":
        return t1 * r0 - t0 * e[:, a1] / e[:, a0] * r0, t1
    if target == "atc":
        return -t0 * r1 + t1 * e[:, a0] / e[:, a1] * r1, t0
    raise ValueError(f"target={target!r} is invalid: choose one of {TARGETS}")


def _check_target(target) -> str:
    key = str(target).lower()
    if key not in TARGETS:
        raise ValueError(f"target={target!r} is invalid: choose one of {TARGETS}")
    return key


def plugin_effect(arms, mu, *, a1: int, a0: int, target: str) -> tuple[float, int]:
    """Plug-in mean of ``mu[:, a1] - mu[:, a0]`` over the target's units, and their number."""
    target = _check_target(target)
    keep = {"ate": np.ones(len(arms), bool), "att": arms == a1, "atc": arms == a0}[target]
    return float(np.mean(mu[keep, a1] - mu[keep, a0])), int(keep.sum())


def average_effect(y, arms, mu, e, *, a1: int = 1, a0: int = 0, target: str = "ate",
                   mu_plugin=None) -> AverageEffect:
    r"""The AIPW estimate of an average effect and its influence-function standard error.

    :math:`\hat\theta = \bar a / \bar b`, :math:`\varphi_i = (a_i - \hat\theta b_i) / \bar b`,
    :math:`\widehat{se} = \sqrt{\sum_i \varphi_i^2} / n` with the terms of :func:`aipw_terms`.

    Parameters
    ----------
    y, arms, mu, e, a1, a0, target : as in :func:`aipw_terms`
    mu_plugin : array (n, n_arms), optional
        The predictions whose mean is reported as ``plugin`` (default ``mu``; the estimator passes
        its in-sample ensemble predictions when ``mu`` is out-of-fold).
    """
    target = _check_target(target)
    a, b = aipw_terms(np.asarray(y, float), np.asarray(arms), np.asarray(mu, float),
                      np.asarray(e, float), a1=a1, a0=a0, target=target)
    b_mean = b.mean()
    if b_mean == 0:
        raise ValueError(f"no units at the arm that defines target={target!r}")
    theta = a.mean() / b_mean
    phi = (a - theta * b) / b_mean
    se = float(np.sqrt(np.sum(phi**2)) / len(phi))
    plugin, n_units = plugin_effect(arms, mu if mu_plugin is None else mu_plugin, a1=a1, a0=a0,
                                    target=target)
    return AverageEffect(target, float(theta), se, plugin, n_units)


def best_linear_projection(psi: np.ndarray, z: np.ndarray | None, names: list[str],
                           alpha: float = 0.05) -> pd.DataFrame:
    r"""Best linear projection of the effect on covariates ``z``, from the doubly robust scores.

    With :math:`\psi_i` the AIPW effect term of unit i (:func:`aipw_terms`, target "ate"),
    :math:`E[\psi_i \mid x_i] = \tau(x_i)` when either nuisance is right, so the least-squares fit

    .. math::

        (\hat\beta_0, \hat\beta) = \arg\min_{b_0, b} \sum_i (\psi_i - b_0 - (z_i - \bar z)^\top b)^2

    estimates the best linear approximation of :math:`\tau` in :math:`z`, with normal intervals
    from the sandwich (HC0) covariance (Semenova & Chernozhukov 2021 [5]_). ``z`` is centred, so
    :math:`\hat\beta_0 = \bar\psi` is the AIPW ATE and, with no ``z``, its standard error is
    :func:`average_effect`'s. With ``z`` the intercept's standard error holds the units' mean of
    ``z`` fixed (the effect averaged over units with these covariates), so it is at most the
    ATE's.

    Parameters
    ----------
    psi : array (n,), the scores; z : array (n, q) or None; names : q names of z's columns
    alpha : float, intervals at level 1 - alpha

    Returns
    -------
    pandas.DataFrame
        One row per coefficient ("intercept", then ``names``): ``estimate``, ``stderr``,
        ``ci_lower``, ``ci_upper``, ``pvalue`` (of zero).
    """
    n = len(psi)
    design = np.ones((n, 1)) if z is None else np.column_stack([np.ones(n), z - z.mean(0)])
    if np.linalg.matrix_rank(design) < design.shape[1]:
        raise ValueError("Z has a constant column or columns that are linear combinations of "
                         "others; drop them (the intercept is always included)")
    bread = np.linalg.inv(design.T @ design)
    beta = bread @ design.T @ psi
    resid = psi - design @ beta
    cov = bread @ (design.T * resid**2) @ design @ bread  # HC0 sandwich
    se = np.sqrt(np.diag(cov))
    q = norm.ppf(1 - alpha / 2)
    return pd.DataFrame({"estimate": beta, "stderr": se, "ci_lower": beta - q * se,
                         "ci_upper": beta + q * se,
                         "pvalue": 2 * norm.sf(np.abs(beta) / se)},
                        index=pd.Index(["intercept", *names], name="coefficient"))
