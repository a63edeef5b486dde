r"""The nuisance layer: every cross-fit of the package, and the doubly robust scores.

One module decides how units are split into folds and how the nuisance functions of the doubly
robust stage are estimated out of fold:

* :func:`folds` -- treatment-stratified folds; with ``groups`` (e.g. the original unit of each
  row of a bootstrap resample) the rows of one group always fall into one fold, so that copies of
  a unit never sit on both sides of a split;
* :func:`cross_fit_propensity` -- :math:`\hat e_a(x_i) = \hat P(T = a \mid x_i)` from a classifier
  that did not see unit i, clipped below at ``min_propensity`` (the clipped units recorded:
  :func:`clipped_units`, :func:`clipped_warning`); by default the better (by
  out-of-fold log-loss) of a logistic regression and depth-3 boosting, or the best of the
  candidates of :func:`propensity_candidates` (EconML's model names, lists of models);
* :func:`cross_fit_outcomes` -- out-of-fold arm-wise outcome regressions
  :math:`\hat\mu_a(x_i)` (gradient boosting), the outcome nuisance of the selection criteria;
* :func:`cross_fit_dr_learner` -- regressions of the doubly robust pseudo-outcomes on X, one on
  each ensemble member's training units (Kennedy's DR-learner), :func:`blend_weights`, the
  R-loss mix of the heads' effects and those regressions, and :func:`heterogeneity_test`, the
  calibration test that decides between that mix and a constant effect;
* :func:`cross_fit_gps` -- for a continuous treatment, the generalised propensity score
  (Hirano & Imbens 2004): the conditional density :math:`\hat\pi(t \mid x_i)` of the dose,
  binned: the cross-fitted propensities of equal-count dose intervals (:class:`GPS`);
* :func:`cross_fit_dose_outcomes` -- out-of-fold outcome regressions :math:`\hat\mu(x_i, t)`
  on covariates and dose (gradient boosting), the outcome nuisance of the benchmarks' GPS-DR
  average curve;
* :func:`aipw_scores` -- the AIPW (doubly robust) score of each unit and arm,

.. math::

    \psi_{ia} = \hat\mu_a(x_i) + \frac{1[t_i = a]\,(y_i - \hat\mu_a(x_i))}{\hat e_a(x_i)},

  whose mean estimates :math:`E[Y(a)]`; :math:`\psi_{i1} - \psi_{i0}` is the doubly robust
  pseudo-outcome of the CATE (Kennedy 2023) and the ATE term of :mod:`dowhy_cfr.debiased`.

The AIPW averages (:mod:`dowhy_cfr.debiased`), the choice of ``alpha``
(:mod:`dowhy_cfr.fitting`), the selection criteria (:mod:`dowhy_cfr.metrics`) and the refuters
all use these functions.

References
----------
* [1] V. Chernozhukov et al. "Double/debiased machine learning for treatment and structural
  parameters." The Econometrics Journal 21(1), 2018.
* [2] E. H. Kennedy. "Towards optimal doubly robust estimation of heterogeneous causal
  effects." Electronic Journal of Statistics 17(2), 2023.
* [3] K. Hirano, G. W. Imbens. "The propensity score with continuous treatments." In Applied
  Bayesian Modeling and Causal Inference from Incomplete-Data Perspectives, Wiley, 2004.
* [4] E. H. Kennedy, Z. Ma, M. D. McHugh, D. S. Small. "Non-parametric methods for doubly
  robust estimation of continuous treatment effects." JRSS-B 79(4), 2017.
"""

from __future__ import annotations

import contextlib
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from sklearn.base import clone
from sklearn.ensemble import (HistGradientBoostingClassifier, HistGradientBoostingRegressor,
                              RandomForestClassifier)
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler
from threadpoolctl import threadpool_limits

from .core.training import available_cores

__all__ = ["ONE_THREAD_UNITS", "Propensity", "sklearn_seed", "seeded", "folds",
           "nuisance_threads",
           "logistic_propensity_model", "boosting_propensity_model", "default_propensity_models",
           "gps_boosting_model", "default_gps_models",
           "PROPENSITY_NAMES", "propensity_candidates", "outcome_model", "cross_fit_propensity",
           "cross_fit_outcomes", "aipw_scores", "weighted_residual_level", "arm_log_loss",
           "clip_propensity", "clipped_units", "clipped_warning", "CLIPPED_WARN_SHARE", "SELECTION_FLOOR",
           "BLEND_THREADS_CELLS", "fit_per_arm", "held_out_mean", "cross_fit_dr_learner",
           "HETEROGENEITY_LEVEL", "HeterogeneityTest", "heterogeneity_test", "robinson_residuals",
           "blend_weights",
           "GPS", "GPS_BINS", "cross_fit_gps", "cross_fit_dose_outcomes",
           "LinearPropensity", "linear_propensity", "unit_propensities"]

#: Up to this many units the nuisance models are cross-fitted with one BLAS/OpenMP thread: on
#: 2 cores the default propensity cross-fit took 0.24 s on one thread against 0.46 s on two at
#: IHDP size (747 units) and 0.40 s against 0.56 s at 2,000 units (``docs/debiased.md``).
ONE_THREAD_UNITS = 10_000


#: Above this share of units with a clipped propensity a fit warns (:func:`clipped_warning`).
#: A unit whose propensity of some arm is below the clip sits where that arm is (almost) never
#: seen: its effect rests on the outcome model's extrapolation, and the few units there that did
#: receive the arm have their AIPW weights capped at ``1 / min_propensity``, which biases the
#: doubly robust averages. Measured with the default cross-fitted propensity (n = 1,500, seed 0;
#: ``docs/debiased.md``, "Clipped propensities"): at most 7 % (median 1 %) on the 41 realistic
#: designs built with moderate or good overlap, and 0-5 % on Nie & Wager's designs A-E; above
#: 10 % on 43 of the 47 realistic designs rebuilt with poor overlap (median 21 %) and on 5 of
#: the 6 whose surface has poor overlap by design. 10 % separates the two. IHDP (16 %: its
#: treated group is not a random subset) is above it.
CLIPPED_WARN_SHARE = 0.10

#: The candidates of the propensity are compared by their out-of-fold log-loss with every
#: probability floored here, not at ``min_propensity`` (a smaller ``min_propensity`` is used
#: instead). The clip is a cap on the AIPW weights, not part of the model: at 0.05 it hides the
#: extreme probabilities where a misspecified model and a good one differ most. On the realistic
#: design ``nhefs-smooth`` (n = 1,500, seeds 0-1) the clipped log-loss preferred the logistic
#: regression and the ATE was off by 0.25 and 0.30; floored at 1e-3 it kept the boosting and the
#: error was 0.01 and 0.08 (``docs/debiased.md``, "Choosing the propensity model"). The floor
#: only keeps one overconfident probability from deciding the comparison (its log-loss term is
#: at most log(1000) = 6.9).
SELECTION_FLOOR = 1e-3


class Propensity(NamedTuple):
    """Cross-fitted propensities ``e`` (n, n_arms), clipped, the name of the model used, and
    ``clipped`` (n,) bool: the units whose propensity of some arm was below the clip (None:
    not recorded)."""

    e: np.ndarray
    model: str
    clipped: np.ndarray | None = None

    @property
    def clipped_share(self) -> float | None:
        """The share of units with a clipped propensity (None where not recorded)."""
        return None if self.clipped is None else float(np.mean(self.clipped))

    def subset(self, rows: np.ndarray) -> "Propensity":
        """The propensities of the units ``rows`` (e.g. a bootstrap replica's)."""
        return Propensity(self.e[rows], self.model,
                          None if self.clipped is None else self.clipped[rows])


def sklearn_seed(seed: int) -> int:
    """A network seed as a scikit-learn ``random_state`` (which must be < 2**32 - 1)."""
    return int(seed) % (2**32 - 1)


# ----------------------------------------------------------------------------- folds
def folds(arms: np.ndarray, n_folds: int, seed: int, groups: np.ndarray | None = None) -> list:
    """``n_folds`` treatment-stratified folds of the units: a list of ``(fit_rows, pred_rows)``.

    ``groups`` (one label per row): rows with the same label fall into the same fold
    (scikit-learn's ``StratifiedGroupKFold``), e.g. the copies of one unit in a bootstrap
    resample. Shuffled with ``seed``.
    """
    if groups is None:
        splitter = StratifiedKFold(n_folds, shuffle=True, random_state=sklearn_seed(seed))
        return list(splitter.split(np.zeros(len(arms)), arms))
    splitter = StratifiedGroupKFold(n_folds, shuffle=True, random_state=sklearn_seed(seed))
    return list(splitter.split(np.zeros(len(arms)), arms, groups))


def _n_folds(arms: np.ndarray, wanted: int, groups=None) -> int:
    """``wanted`` folds, fewer if an arm has fewer units (or groups); ValueError below 2."""
    per_arm = [len(np.unique(groups[arms == a])) if groups is not None else int((arms == a).sum())
               for a in np.unique(arms)]
    n = int(min(wanted, min(per_arm)))
    if n < 2:
        raise ValueError(f"cross-fitting needs at least 2 units per treatment arm; an arm has "
                         f"{min(per_arm)}")
    return n


# ----------------------------------------------------------------------------- models
def boosting_propensity_model(random_state: int | None = 0):
    """Histogram gradient boosting with trees of depth 3 (50 rounds, learning rate 0.2), leaves
    of at least 40 units and an L2 penalty of 1 on the leaf values, with its own ``random_state``
    (with None scikit-learn draws from numpy's global state, which would change what DoWhy's
    refuter loops draw after a fit; :func:`cross_fit_propensity` seeds a model left at None).

    The larger leaves and the penalty keep the propensities away from 0 and 1 on small data,
    where AIPW divides by them: on Nie & Wager's design A they lowered the AIPW ATE error at
    n = 500 and n = 2000 and left designs B-E unchanged (``docs/debiased.md``). Early stopping
    was tried: a better out-of-fold log-loss, but design A's AIPW ATE error doubled. 50 rounds
    at rate 0.2 in place of 100 at 0.1 cost 60 % of the time, and the AIPW ATE error (with fixed
    outcome models) stayed within noise: 0.034 against 0.038 on design A (n = 2,000, six data
    sets; B-E keep the logistic model either way), 0.072 against 0.070 over the twelve realistic
    designs at n = 1,500 and 4,000. The cross-fit runs beside the networks' training and, at 100
    rounds, took about as long on realistic tables. 63 bins per column rather than 255 (with
    the blend's, ``docs/parameters.md`` item 14) made a default fit at n = 1,500 4.8 % faster
    at the same accuracy."""
    return HistGradientBoostingClassifier(max_depth=3, max_iter=50, learning_rate=0.2,
                                          min_samples_leaf=40, l2_regularization=1.0,
                                          max_bins=63, random_state=random_state)


def logistic_propensity_model():
    """Standardised covariates, then an L2 logistic regression with ``C = 1``.

    Measured against EconML's ``DRLearner`` default (``LogisticRegressionCV``, whose 3-fold
    search scores by accuracy): better out-of-fold log-loss and closer to the true propensity on
    every design and IHDP realization tried, at a tenth of the cost (``docs/debiased.md``).
    """
    return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000))


class LinearPropensity(NamedTuple):
    """A multinomial logistic propensity on the network's scaled covariates, as arrays (saved
    with a model without pickle): ``P(T = a | x) = softmax(x coef^T + intercept)_a``.

    ``head_form="robinson"`` centres the heads at the units' propensities; the effects do not
    depend on them, the potential outcomes' level does. A fit's own units use their
    cross-fitted propensities (:func:`unit_propensities`); this model gives them for any other
    units (:func:`linear_propensity`)."""

    coef: np.ndarray  # (n_arms, d)
    intercept: np.ndarray  # (n_arms,)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The arms' probabilities of the rows of ``x`` (n, d): (n, n_arms)."""
        z = np.asarray(x, dtype=float) @ self.coef.T + self.intercept
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)


def linear_propensity(x: np.ndarray, arms: np.ndarray, n_arms: int) -> LinearPropensity:
    """:class:`LinearPropensity` fitted on all the rows of ``x`` (the network's scaled
    covariates; L2 logistic regression, ``C = 1``, as :func:`logistic_propensity_model`)."""
    model = LogisticRegression(C=1.0, max_iter=1000).fit(x, arms)
    coef = np.zeros((n_arms, x.shape[1]))
    intercept = np.zeros(n_arms)
    if n_arms == 2:  # scikit-learn's one row: the logit of arm 1 against arm 0
        coef[1], intercept[1] = model.coef_[0], model.intercept_[0]
    else:
        coef[model.classes_], intercept[model.classes_] = model.coef_, model.intercept_
    return LinearPropensity(coef, intercept)


def unit_propensities(propensity: Propensity) -> np.ndarray:
    """The fitted units' propensities (n, n_arms) that ``head_form="robinson"`` trains with: the
    cross-fitted ones as the doubly robust stage uses them (clipped at ``min_propensity``),
    each row rescaled to sum to 1."""
    e = np.asarray(propensity.e, dtype=float)
    return e / e.sum(axis=1, keepdims=True)


def gps_boosting_model(random_state: int | None = 0):
    """The generalised propensity's boosting candidate (:func:`default_gps_models`):
    :func:`boosting_propensity_model` stopped early, after 5 rounds without a better log-loss on
    a random tenth of its training units (scikit-learn's ``early_stopping``).

    With one classifier per dose interval (eight) each round grows eight trees, and on small data
    the fixed 50 rounds overfit: where the boosting is the candidate kept, the early stop had the
    lower out-of-fold log-loss (IHDP dose design, three data sets: 1.94 against 1.98; the NHEFS
    doses of ``examples/06_dose_response``: 1.553 against 1.594) in a third of the time; on the
    VCNet design the logistic model is kept either way. The IHDP design's average curve improved
    with it (docs/parameters.md, item 31). The binary and categorical propensity keep
    scikit-learn's ``"auto"``, early stopping only above 10,000 units (on design A at n = 500 and
    2,000 early stopping doubled the AIPW ATE error)."""
    return boosting_propensity_model(random_state).set_params(early_stopping=True,
                                                              n_iter_no_change=5)


def default_gps_models(random_state: int | None = 0) -> dict:
    """The candidates of a continuous treatment's generalised propensity
    (:func:`cross_fit_gps` with ``model`` None or ``"auto"``): the logistic regression of
    :func:`default_propensity_models` and :func:`gps_boosting_model`."""
    return {"logistic": logistic_propensity_model(),
            "boosting": gps_boosting_model(random_state)}


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


#: EconML's model names for ``model_propensity`` (``econml.sklearn_extensions.model_selection.
#: get_selector``) and the candidates each stands for here: "auto" is this package's default
#: selection, "linear" its logistic regression, "gbf" its boosting; "poly" adds logistic
#: regressions on degree-2 and degree-3 polynomial features, "automl" selects among "poly",
#: "forest", "gbf" and "nnet" (as in EconML).
PROPENSITY_NAMES = {
    "auto": ("logistic", "boosting"),
    "linear": ("logistic",),
    "poly": ("logistic", "poly2", "poly3"),
    "forest": ("forest",),
    "gbf": ("boosting",),
    "nnet": ("nnet",),
    "automl": ("logistic", "poly2", "poly3", "forest", "boosting", "nnet"),
}


def _named_propensity_model(name: str):
    """One candidate of :data:`PROPENSITY_NAMES` (its ``random_state`` left at None, seeded by
    :func:`cross_fit_propensity`)."""
    if name == "logistic":
        return logistic_propensity_model()
    if name == "boosting":
        return boosting_propensity_model(None)
    if name in ("poly2", "poly3"):
        degree = int(name[-1])
        return make_pipeline(StandardScaler(), PolynomialFeatures(degree, include_bias=False),
                             StandardScaler(), LogisticRegression(C=1.0, max_iter=1000))
    if name == "forest":  # EconML's "forest": a random forest with scikit-learn's defaults
        return RandomForestClassifier(n_estimators=100, random_state=None)
    return make_pipeline(StandardScaler(), MLPClassifier(max_iter=500, random_state=None))


def propensity_candidates(model_propensity) -> dict:
    """The propensity models ``model_propensity`` stands for: ``{name: unfitted classifier}``.

    :func:`cross_fit_propensity` cross-fits every candidate on the same folds and keeps the one
    whose clipped propensities have the lowest out-of-fold log-loss.

    Parameters
    ----------
    model_propensity : None, str, classifier or list
        None or ``"auto"``: :func:`default_propensity_models`. A name of
        :data:`PROPENSITY_NAMES` (EconML's ``"linear"``, ``"poly"``, ``"forest"``, ``"gbf"``,
        ``"nnet"``, ``"automl"``). A scikit-learn classifier with ``predict_proba`` (its class
        name is its name). A list of names and classifiers: all their candidates. A dict of
        classifiers: those candidates under their keys (e.g. :func:`default_gps_models`).

    Raises
    ------
    ValueError
        An unknown name, an empty list or an empty dict.
    TypeError
        Anything else, or a classifier without ``predict_proba``.
    """
    if model_propensity is None:
        return default_propensity_models(None)
    if isinstance(model_propensity, dict):
        if not model_propensity:
            raise ValueError("model_propensity={} selects from no model: give at least one "
                             "classifier")
        for name, model in model_propensity.items():
            if not hasattr(model, "predict_proba"):
                raise TypeError(f"model_propensity[{name!r}] must be a classifier with "
                                f"predict_proba; got {type(model).__name__}")
        return dict(model_propensity)
    if isinstance(model_propensity, str):
        if model_propensity not in PROPENSITY_NAMES:
            raise ValueError(f"model_propensity={model_propensity!r} is not a known model name: "
                             f"use one of {list(PROPENSITY_NAMES)}, a classifier with "
                             f"predict_proba, or a list of these to select from")
        return {name: _named_propensity_model(name) for name in PROPENSITY_NAMES[model_propensity]}
    if isinstance(model_propensity, (list, tuple)):
        if len(model_propensity) == 0:
            raise ValueError("model_propensity=[] selects from no model: give at least one name "
                             "or classifier, or None for the default selection")
        out = {}
        for item in model_propensity:
            for name, model in propensity_candidates(item).items():
                if isinstance(item, str) and name in out:
                    continue  # a name listed twice (e.g. "linear" and "poly") is one candidate
                key, k = name, 2
                while key in out:
                    key, k = f"{name}_{k}", k + 1
                out[key] = model
        return out
    if not hasattr(model_propensity, "predict_proba"):
        raise TypeError(f"model_propensity must be a classifier with predict_proba, one of "
                        f"{list(PROPENSITY_NAMES)} or a list of these; got "
                        f"{type(model_propensity).__name__}")
    return {type(model_propensity).__name__: model_propensity}


def outcome_model(random_state: int | None = 0):
    """The outcome nuisance of the selection criteria: histogram gradient boosting (100 rounds,
    leaves of at least 20 units), fitted per arm."""
    return HistGradientBoostingRegressor(max_iter=100, min_samples_leaf=20,
                                         random_state=random_state)


def seeded(model, seed: int):
    """A clone of ``model`` with ``random_state=seed`` wherever it (or a step of a pipeline or
    search) has that parameter left at None."""
    model = clone(model)
    unset = {k: seed for k, v in model.get_params().items()
             if (k == "random_state" or k.endswith("__random_state")) and v is None}
    if unset:
        model.set_params(**unset)
    return model


# ----------------------------------------------------------------------------- cross-fitting
def clip_propensity(proba: np.ndarray, min_propensity: float) -> np.ndarray:
    """Every probability clipped below at ``min_propensity`` (as EconML's ``DRLearner``)."""
    return np.clip(proba, min_propensity, 1.0)


def clipped_units(proba: np.ndarray, min_propensity: float) -> np.ndarray:
    """Per unit (row of ``proba``, (n, n_arms)), whether :func:`clip_propensity` raises the
    probability of any arm: (n,) bool."""
    return np.asarray(proba < min_propensity).any(axis=1)


def clipped_warning(share: float | None, min_propensity: float) -> str | None:
    """The warning of a fit whose clipped share exceeds :data:`CLIPPED_WARN_SHARE`, else None.

    Parameters
    ----------
    share : float or None, the share of units with a clipped propensity (None: unknown)
    min_propensity : float, the clip

    Returns
    -------
    str or None
        What it means and what to do: check overlap, trim the sample, or lower
        ``min_propensity``.
    """
    if share is None or not share > CLIPPED_WARN_SHARE:
        return None
    return (f"{share:.0%} of the units have an estimated propensity below "
            f"min_propensity={min_propensity:g} for some treatment arm: limited overlap. Their "
            f"effects rest on the outcome model's extrapolation, and those among them that "
            f"received the unlikely arm have their doubly robust weights capped at "
            f"{1 / min_propensity:g} (the clip), which biases the average effects. Check the "
            f"overlap of the arms (est.clipped_share_; covariates that predict treatment almost "
            f"perfectly), trim the sample to units with common support, report the ATT or ATC "
            f"if one arm has overlap, or lower min_propensity (e.g. to {min_propensity / 5:g}) "
            f"if the weights stay stable.")


def _out_of_fold_proba(model, x, arms, splits, n_arms: int) -> np.ndarray:
    """Out-of-fold ``predict_proba`` (n, n_arms) of ``model`` over the given splits."""
    proba = np.zeros((len(arms), n_arms))
    with warnings.catch_warnings():
        # scikit-learn >= 1.8 announces default changes (e.g. a user's LogisticRegressionCV)
        warnings.filterwarnings("ignore", category=FutureWarning, module="sklearn")
        for fit_rows, pred_rows in splits:
            fitted = clone(model).fit(x[fit_rows], arms[fit_rows])
            cols = np.searchsorted(np.arange(n_arms), fitted.classes_)
            proba[np.ix_(pred_rows, cols)] = fitted.predict_proba(x[pred_rows])
    return proba


def nuisance_threads(n: int):
    """One BLAS/OpenMP thread for small data (the caller's settings come back afterwards)."""
    return threadpool_limits(1) if n <= ONE_THREAD_UNITS else contextlib.nullcontext()


def cross_fit_propensity(model, x: np.ndarray, arms: np.ndarray, *, n_arms: int, cv: int = 5,
                         random_state: int = 0, min_propensity: float = 0.05,
                         groups: np.ndarray | None = None) -> Propensity:
    """Out-of-fold propensities ``P(T = a | x_i)``, shape (n, n_arms), clipped at ``min_propensity``.

    Parameters
    ----------
    model : None, a name, a classifier with ``predict_proba`` or a list
        (:func:`propensity_candidates`): each candidate is cloned and cross-fitted on the same
        folds, and the one whose propensities have the lowest out-of-fold log-loss (floored at
        :data:`SELECTION_FLOOR`, not clipped at ``min_propensity``) is kept (None: the two of
        :func:`default_propensity_models`)
    x : array (n, d), the covariates the classifier sees
    arms : array (n,) of int in 0..n_arms-1, the treatment arm of each unit
    n_arms : int
    cv : int, the number of folds (:func:`folds`; fewer if an arm is smaller)
    random_state : int, seed of the folds and of models whose ``random_state`` is None
    min_propensity : float, lower clip of every probability
    groups : array (n,), optional; rows of one group stay in one fold (:func:`folds`)

    Returns
    -------
    Propensity
        ``e`` (n, n_arms), ``model``: the name of the candidate kept (a key of
        :func:`propensity_candidates`; the given model's class name for one classifier), and
        ``clipped``: the units whose propensity of some arm was below ``min_propensity``.
    """
    seed = sklearn_seed(random_state)
    candidates = {name: seeded(m, seed) for name, m in propensity_candidates(model).items()}
    splits = folds(arms, _n_folds(arms, cv, groups), seed, groups)
    with nuisance_threads(len(arms)):
        raw = {name: _out_of_fold_proba(m, x, arms, splits, n_arms)
               for name, m in candidates.items()}
    floor = min(min_propensity, SELECTION_FLOOR)
    name = min(raw, key=lambda k: arm_log_loss(clip_propensity(raw[k], floor), arms))
    return Propensity(clip_propensity(raw[name], min_propensity), name,
                      clipped_units(raw[name], min_propensity))


def cross_fit_outcomes(x: np.ndarray, y: np.ndarray, arms: np.ndarray, *, n_arms: int,
                       cv: int = 5, random_state: int = 0, model=None,
                       groups: np.ndarray | None = None) -> np.ndarray:
    """Out-of-fold arm-wise outcome regressions ``mu_a(x_i) = E[Y | x_i, T = a]``, (n, n_arms).

    Each fold's arm-a model is fitted on the other folds' units at arm a (default
    :func:`outcome_model`), on the folds of :func:`folds`.
    """
    seed = sklearn_seed(random_state)
    model = seeded(outcome_model(None) if model is None else model, seed)
    mu = np.zeros((len(y), n_arms))
    with nuisance_threads(len(y)):
        for fit_rows, pred_rows in folds(arms, _n_folds(arms, cv, groups), seed, groups):
            for a in range(n_arms):
                own = fit_rows[arms[fit_rows] == a]
                mu[pred_rows, a] = clone(model).fit(x[own], y[own]).predict(x[pred_rows])
    return mu


# ----------------------------------------------------------------------------- scores
def aipw_scores(y, arms, mu, e) -> np.ndarray:
    r"""Per unit and arm, :math:`\psi_{ia} = \hat\mu_a(x_i) + 1[t_i = a](y_i - \hat\mu_a(x_i)) /
    \hat e_a(x_i)`, shape (n, n_arms): its mean over units is the AIPW estimate of
    :math:`E[Y(a)]`, and :math:`\psi_{i a_1} - \psi_{i a_0}` the doubly robust pseudo-outcome of
    the effect of :math:`a_1` vs :math:`a_0` (the ATE term of :mod:`dowhy_cfr.debiased`)."""
    mu = np.asarray(mu, dtype=float)
    onehot = np.asarray(arms)[:, None] == np.arange(mu.shape[1])
    return mu + onehot * (np.asarray(y, dtype=float)[:, None] - mu) / np.asarray(e, dtype=float)


def weighted_residual_level(y, arms, mu, e) -> np.ndarray:
    r"""Per arm, the inverse-propensity-weighted mean residual of the outcome predictions,

    .. math::

        c_a = \frac{\sum_i 1[t_i = a]\,(y_i - \hat\mu_a(x_i)) / \hat e_a(x_i)}
                   {\sum_i 1[t_i = a] / \hat e_a(x_i)},

    shape (n_arms,) (0 for an arm no unit received). Adding :math:`c_a` to arm a's predictions
    makes the weighted residuals sum to zero, so the AIPW mean of :func:`aipw_scores` with the
    shifted predictions is :math:`\frac1n \sum_i \hat\mu_a(x_i) + c_a`: the AIPW estimator
    with each arm's inverse-propensity weights normalised to mean one (Hajek's ratio form;
    the weighted-regression form of the doubly robust estimator, Kang & Schafer 2007,
    Robins et al. 2007). It stays doubly robust and asymptotically the same; in finite samples
    it is the more stable where some weights are large (``docs/debiased.md``)."""
    mu = np.asarray(mu, dtype=float)
    weights = (np.asarray(arms)[:, None] == np.arange(mu.shape[1])) / np.asarray(e, dtype=float)
    total = weights.sum(0)
    resid = (weights * (np.asarray(y, dtype=float)[:, None] - mu)).sum(0)
    return np.divide(resid, total, out=np.zeros_like(total), where=total > 0)


def arm_log_loss(proba: np.ndarray, arms: np.ndarray) -> float:
    """``-mean_i log proba[i, arms[i]]``: the log-loss of the (clipped) propensities of the arms
    the units received, i.e. of the ``1 / e`` weights that AIPW applies (scikit-learn's
    ``log_loss`` would rescale clipped rows to sum to one)."""
    arms = np.asarray(arms).astype(int)  # indices, also for a boolean treatment
    return float(-np.mean(np.log(proba[np.arange(len(arms)), arms])))


# ----------------------------------------------------------------------------- the DR-learner
#: From this many cells of X (units x columns) the blend's K regressions are fitted on one thread
#: per core: on 2 cores 0.69 s against 1.04 s at 3,200 x 199 and 0.70 against 0.97 at
#: 3,200 x 107, but 0.25 against 0.27 at 1,200 x 107 and 0.21 against 0.16 at 3,200 x 8.
BLEND_THREADS_CELLS = 250_000


def fit_per_arm(model, x: np.ndarray, tau: np.ndarray) -> list:
    """One clone of ``model`` per arm, fitted to that arm's effects ``tau[:, j]``."""
    return [clone(model).fit(x, tau[:, j]) for j in range(tau.shape[1])]


def held_out_mean(values: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Per unit, the mean of ``values`` (K, n, a) over the members that did not see it
    (``train``: (K, n) bool, the units each member trained or early-stopped on): (n, a); NaN
    where every member saw the unit."""
    unseen = (~train).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.einsum("kna,kn->na", values, unseen) / unseen.sum(0)[:, None]


def cross_fit_dr_learner(model, x: np.ndarray, pseudo: np.ndarray, train: np.ndarray,
                         seeds: list) -> list:
    """Kennedy's DR-learner on each member's units: regressor ``j`` (a clone of ``model`` per
    treated arm, seeded by ``seeds[j]`` where its ``random_state`` is None) fitted to the
    pseudo-outcomes ``pseudo`` (n, n_arms - 1) of the units ``train[j]`` (K, n) bool. Returns K
    lists of fitted regressors; each is out of fold for the units its member left out.

    Small data run on one OpenMP thread per regressor, as the other nuisances; wide small
    tables (:data:`BLEND_THREADS_CELLS`) fit the K regressors on one thread per core."""
    jobs = [(seeded(model, sklearn_seed(seed)), x[rows], pseudo[rows])
            for rows, seed in zip(train, seeds)]
    with nuisance_threads(len(pseudo)):
        parallel = len(pseudo) <= ONE_THREAD_UNITS and x.size >= BLEND_THREADS_CELLS
        return _map_threads(fit_per_arm, jobs, parallel)


def _map_threads(fn, jobs: list, parallel: bool) -> list:
    """``[fn(*job) for job in jobs]``, on one thread per core where ``parallel`` (small data:
    scikit-learn's boosting releases the GIL, and each job runs on one OpenMP thread, as under
    :func:`nuisance_threads`, which a new thread does not inherit)."""
    workers = min(len(jobs), available_cores()) if parallel else 1
    if workers <= 1:
        return [fn(*job) for job in jobs]

    def one(job):
        with nuisance_threads(0):
            return fn(*job)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, jobs))


#: The one-sided level of :func:`heterogeneity_test` at which the blend keeps a varying effect
#: (:func:`blend_weights`; docs/parameters.md, item 9). With the development designs at
#: n = 1,500 (seeds 0-1) and the 45 held-out designs at n = 1,500 (seed 0), the z statistic of
#: every constant-effect data set was below 1.3, of every varying one above 1.9; on 48 null data
#: sets it rejected 4 times, on design C 3 of 50 times.
HETEROGENEITY_LEVEL = 0.05


class HeterogeneityTest(NamedTuple):
    r"""The test of :func:`heterogeneity_test`: ``kappa`` the calibration slope of the
    out-of-fold effects' variation (1: calibrated, 0: no signal), ``z`` its ratio to its
    heteroskedasticity-robust standard error and ``pvalue`` the one-sided p-value of
    :math:`\kappa \le 0` (that tau does not vary along the effects)."""

    kappa: float
    z: float
    pvalue: float


def robinson_residuals(y, arms, mu, e):
    """Robinson's residuals of the R-loss (Nie & Wager 2021): the treatment indicators'
    ``u = 1[t = a] - e_a`` (n, n_arms - 1; ``e`` renormalised) and the outcome's
    ``r = y - sum_a e_a mu_a``."""
    e = np.asarray(e, dtype=float)
    e = e / e.sum(1, keepdims=True)
    onehot = np.asarray(arms)[:, None] == np.arange(e.shape[1])
    return onehot[:, 1:] - e[:, 1:], np.asarray(y, dtype=float) - (e * mu).sum(1)


def _off(v: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``v`` less its least-squares projection on the columns of ``u`` (a free constant per arm)."""
    return v - u @ np.linalg.lstsq(u, v, rcond=None)[0]


def _slope_test(r: np.ndarray, u: np.ndarray, f: np.ndarray) -> HeterogeneityTest:
    """:func:`heterogeneity_test` on the residuals ``r``, ``u`` and the effects' term ``f``."""
    from scipy.stats import norm

    r, f = _off(r, u), _off(f, u)
    ff = float(f @ f)
    if not ff > 0:  # the effects do not vary: nothing to test
        return HeterogeneityTest(0.0, 0.0, 1.0)
    kappa = float(f @ r) / ff
    se = float(np.sqrt(np.sum(f ** 2 * (r - kappa * f) ** 2))) / ff
    z = kappa / se if se > 0 else float(np.sign(kappa)) * np.inf
    return HeterogeneityTest(kappa, float(z), float(norm.sf(z)))


def heterogeneity_test(y, arms, mu, e, tau) -> HeterogeneityTest:
    r"""Does tau vary along the out-of-fold effects ``tau`` (n, n_arms - 1)? The calibration test
    of Chernozhukov, Demirer, Duflo & Fernandez-Val (2018; the "best linear predictor" of the
    CATE) in the R-loss form of ``grf``'s ``test_calibration`` (Athey, Tibshirani & Wager 2019):
    the least-squares slope :math:`\kappa` of

    .. math:: y_i - m(x_i) = \sum_{a \ge 1} u_{ia} \big(c_a + \kappa\, \hat\tau_a(x_i)\big)
              + \varepsilon_i, \qquad u_{ia} = 1[t_i = a] - e_a(x_i),

    with :math:`m = \sum_a e_a \mu_a` from the out-of-fold outcome predictions ``mu`` (n, n_arms)
    and the cross-fitted propensities ``e`` (rows renormalised), and free constants :math:`c_a`.
    :math:`\kappa = 1` where the effects' variation is calibrated, 0 where it is unrelated to
    the true effect's; a noisy but informative estimate gives a slope between (its signal's
    share of its variance). The one-sided p-value of :math:`\kappa \le 0` uses the HC0 (White)
    standard error. Where :math:`\hat\tau` is independent of the units' noise, ``z`` is about
    standard normal under a constant effect (``tests/test_blend.py``); with cross-fitted members
    it leans negative (each member's level leans against its own fold's residuals) and spreads
    wider, so the level was measured on the realistic designs (docs/parameters.md, item 9).
    Rows with a NaN are left out.

    References
    ----------
    * V. Chernozhukov, M. Demirer, E. Duflo, I. Fernandez-Val. "Generic machine learning
      inference on heterogeneous treatment effects in randomized experiments." NBER Working
      Paper 24678, 2018.
    * S. Athey, J. Tibshirani, S. Wager. "Generalized random forests." Annals of Statistics
      47(2), 2019 (``test_calibration`` in the ``grf`` package).
    * X. Nie, S. Wager. "Quasi-oracle estimation of heterogeneous treatment effects."
      Biometrika 108(2), 2021.
    """
    u, r = robinson_residuals(y, arms, mu, e)
    f = (u * np.asarray(tau, dtype=float)).sum(1)
    ok = np.isfinite(f) & np.isfinite(r)
    if not ok.any():
        return HeterogeneityTest(np.nan, np.nan, np.nan)
    return _slope_test(r[ok], u[ok], f[ok])


def blend_weights(y, arms, mu, e, heads_oof, reg_oof, *, constant: bool = True) -> np.ndarray:
    r"""The weights :math:`(a, b)` of :class:`~dowhy_cfr.fitted.BlendStage`, chosen by the R-loss of Nie & Wager
    (2021, Eq. 4; one treatment indicator per treated arm) of out-of-fold effects,

    .. math:: L(\tau) = \min_c \sum_i \Big(y_i - m(x_i) - \sum_{a \ge 1}
              (1[t_i = a] - e_a(x_i)) \big(\tau_a(x_i) + c_a\big)\Big)^2,

    with :math:`m = \sum_a e_a \mu_a` from the out-of-fold outcome predictions ``mu`` (n, n_arms)
    and the cross-fitted propensities ``e`` (rows renormalised to sum to one), :math:`A` the
    heads' out-of-fold effects ``heads_oof`` and :math:`B` the regressions' ``reg_oof`` (both
    (n, n_arms - 1)); the constant :math:`c_a` is free (the level is set by the doubly robust
    average). First the mix :math:`\lambda A + (1 - \lambda) B`: :math:`\lambda` minimises
    :math:`L` (a quadratic, clipped to [0, 1]; 1 when the two agree everywhere). Then the
    model choice: where :func:`heterogeneity_test` of the mix's out-of-fold effects does not
    reject a constant effect at the one-sided level :data:`HETEROGENEITY_LEVEL`, the weights are
    (0, 0) -- the effect is reported as constant -- else :math:`(\lambda, 1 - \lambda)`.

    A test, not the R-loss's comparison: each out-of-fold prediction comes from one member's
    regression, noisier than the average reported. The mix beats a constant in R-loss only
    where its calibration slope exceeds 1/2 (the noise at most the signal), which dropped
    real heterogeneity on wide tables (slope 0.41-0.50 at z = 2.4-3.0; docs/parameters.md,
    item 9); a shrinkage factor fitted to the same effects would shrink it too.
    ``constant=False`` skips the choice: the mix's weights (the candidate a constant beat).
    Rows with a NaN are left out; (1, 0) when no row is left."""
    u, r = robinson_residuals(y, arms, mu, e)
    g = (u * (heads_oof - reg_oof)).sum(1)
    c = (u * reg_oof).sum(1)
    ok = np.isfinite(g) & np.isfinite(c) & np.isfinite(r)
    if not ok.any():
        return np.array([1.0, 0.0])
    u, r, g, c = u[ok], r[ok], g[ok], c[ok]
    denom = float(np.sum(g ** 2))
    lam = 1.0 if denom <= 0 else float(np.clip(np.sum(g * (r - c)) / denom, 0.0, 1.0))
    blend = lam * g + c  # sum_a u_a (lam A_a + (1 - lam) B_a)
    if constant and _slope_test(r, u, blend).pvalue > HETEROGENEITY_LEVEL:
        return np.array([0.0, 0.0])
    return np.array([lam, 1.0 - lam])


# ----------------------------------------------------------------------------- continuous T
#: The dose intervals of the generalised propensity score (:func:`cross_fit_gps`): equal-count
#: bins of the training doses, whose propensities are cross-fitted as those of a multi-arm
#: treatment. On the VCNet design (60 data sets, n = 500) the doubly robust average curve's
#: mean squared error was 0.0060 with 3 bins, 0.0052 with 5 and 0.0044 with 8 (the plug-in's
#: 0.0044); a normal GPS with a boosted mean gave 5 times the plug-in's error on one data set
#: (docs/parameters.md, item 17).
GPS_BINS = 8


class GPS(NamedTuple):
    r"""A cross-fitted generalised propensity score (Hirano & Imbens 2004) of a continuous
    treatment, binned: the dose range is cut into ``len(widths)`` intervals of equal counts at
    the doses ``edges`` (inner boundaries, (B - 1,)), and the conditional density of the dose is
    taken as constant within an interval,

    .. math:: \hat\pi(t \mid x_i) = \hat P(b(t) \mid x_i) / |\Delta_{b(t)}|,

    with :math:`\hat P(b \mid x_i)` (``proba``, (n, B)) the out-of-fold, clipped propensity of
    interval b from :func:`cross_fit_propensity` (the intervals as arms), and
    :math:`|\Delta_b|` (``widths``) the intervals' widths. The marginal density is
    :math:`\hat\varpi(t) = \frac1n \sum_j \hat\pi(t \mid x_j)`, so the stabilised weight
    :math:`\hat\varpi(t_i) / \hat\pi(t_i \mid x_i) = \bar P(b_i) / \hat P(b_i \mid x_i)` does not
    depend on the widths. ``model`` names the classifier kept."""

    edges: np.ndarray
    widths: np.ndarray
    proba: np.ndarray
    model: str

    def bins(self, dose) -> np.ndarray:
        """The interval index of each dose."""
        return np.searchsorted(self.edges, np.asarray(dose, dtype=float), side="right")

    def density(self, dose, rows=None) -> np.ndarray:
        r""":math:`\hat\pi(t_j \mid x_j)` of one dose per unit ``rows`` (default: all)."""
        b = self.bins(dose)
        proba = self.proba if rows is None else self.proba[rows]
        return proba[np.arange(len(b)), b] / self.widths[b]

    def marginal(self, dose) -> np.ndarray:
        r"""The marginal density :math:`\hat\varpi(t)` at each dose."""
        b = self.bins(dose)
        return self.proba.mean(0)[b] / self.widths[b]

    def weights(self, dose, max_weight: float = np.inf) -> np.ndarray:
        r"""The stabilised weights :math:`\hat\varpi(t_i) / \hat\pi(t_i \mid x_i)` of the
        units' own doses, capped at ``max_weight``."""
        b = self.bins(dose)
        return np.minimum(self.proba.mean(0)[b] / self.proba[np.arange(len(b)), b], max_weight)


def cross_fit_gps(model, x: np.ndarray, dose: np.ndarray, *, n_bins: int = GPS_BINS,
                  cv: int = 5, random_state: int = 0, min_propensity: float = 0.05,
                  groups: np.ndarray | None = None) -> GPS:
    r"""The cross-fitted, binned generalised propensity score of a continuous treatment
    (:class:`GPS`).

    The doses are cut into ``n_bins`` equal-count intervals (by rank, ties by position; the
    boundaries halfway between neighbouring intervals), and the intervals' propensities are
    cross-fitted as a multi-arm treatment's (:func:`cross_fit_propensity`: by default a
    logistic regression and depth-3 boosting stopped early, :func:`default_gps_models`, the one
    with the lower out-of-fold log-loss kept; folds stratified by interval, probabilities
    clipped below at ``min_propensity``). A density with interval-wise steps is all the doubly
    robust average curve needs from the GPS (its weights enter a kernel smoother), and a
    classifier's probabilities are bounded where a location-scale density's ratios are not: on
    a data set of the VCNet design (n = 500) the average curve's error with a normal GPS of
    boosted mean was five times the plug-in's, with this one about equal (docs/parameters.md,
    item 17).

    Parameters
    ----------
    model : None, a name, a classifier, a list or a dict (:func:`propensity_candidates`); None
        or ``"auto"``: :func:`default_gps_models`
    x : array (n, d); dose : array (n,)
    n_bins, cv, random_state, min_propensity, groups : as above and in
        :func:`cross_fit_propensity`

    Returns
    -------
    GPS
    """
    dose = np.asarray(dose, dtype=float)
    order = np.argsort(dose, kind="stable")
    bins = np.empty(len(dose), dtype=np.int64)
    bins[order] = np.arange(len(dose)) * n_bins // len(dose)
    lows = np.array([dose[bins == b].min() for b in range(n_bins)])
    highs = np.array([dose[bins == b].max() for b in range(n_bins)])
    edges = (highs[:-1] + lows[1:]) / 2
    bounds = np.concatenate([[dose.min()], edges, [dose.max()]])
    widths = np.maximum(np.diff(bounds), 1e-12 * max(np.ptp(dose), 1.0))
    arms = np.searchsorted(edges, dose, side="right")  # ties at a boundary: one interval
    if model is None or (isinstance(model, str) and model == "auto"):
        model = default_gps_models(None)
    prop = cross_fit_propensity(model, x, arms, n_arms=n_bins, cv=cv, random_state=random_state,
                                min_propensity=min_propensity, groups=groups)
    return GPS(edges, widths, prop.e, prop.model)


def cross_fit_dose_outcomes(x: np.ndarray, y: np.ndarray, dose: np.ndarray, strata: np.ndarray,
                            grid: np.ndarray, *, cv: int = 5, random_state: int = 0,
                            model=None) -> tuple[np.ndarray, np.ndarray]:
    r"""Out-of-fold regressions of the outcome on covariates and dose, :math:`\hat\mu(x, t)`
    (default gradient boosting, :func:`outcome_model`), folds stratified by the dose
    ``strata``: each unit's prediction at its own dose (n,) and its curve at every dose of
    ``grid`` (n, G), both from the fold's model that did not see it."""
    seed = sklearn_seed(random_state)
    model = seeded(outcome_model(None) if model is None else model, seed)
    own, curves = np.zeros(len(y)), np.zeros((len(y), len(grid)))
    xt = np.column_stack([x, dose])
    with nuisance_threads(len(y)):
        for fit_rows, pred_rows in folds(strata, _n_folds(strata, cv), seed):
            fitted = clone(model).fit(xt[fit_rows], y[fit_rows])
            own[pred_rows] = fitted.predict(xt[pred_rows])
            xp = np.repeat(x[pred_rows], len(grid), axis=0)
            tp = np.tile(grid, len(pred_rows))
            curves[pred_rows] = fitted.predict(np.column_stack([xp, tp])).reshape(-1, len(grid))
    return own, curves
