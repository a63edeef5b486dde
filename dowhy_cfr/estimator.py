"""``CFR`` and ``TARNet``: EconML CATE estimators on top of :mod:`dowhy_cfr.core`.

The estimator keeps the parameters and EconML's API; the fitting is done by
:mod:`dowhy_cfr.fitting` (and :mod:`dowhy_cfr.streaming` for chunks), and the fitted state is one
:class:`dowhy_cfr.fitted.FittedCFR` (``est.fitted_``) that only :meth:`CFR._set_fitted` stores.
"""

from __future__ import annotations

import inspect
import warnings

from econml._cate_estimator import BaseCateEstimator, LinearCateEstimator, TreatmentExpansionMixin
from econml.inference import BootstrapInference
from sklearn.base import BaseEstimator, clone

from . import _io, fitting
from . import _validation as V
from .core import CFRConfig
from .dose_response import DoseResponseMixin
from .covariates import EncodedX
from .inference import (CONSTANT_DOSE_EFFECT, AverageEffectsMixin, CFRAIPWInference,
                        CFRBootstrapInference, DoseInference)
from .sensitivity import SensitivityMixin

__all__ = ["CFR", "TARNet"]

#: The defaults of the training and network parameters (see ``docs/parameters.md``).
_D = CFRConfig()
#: EconML's shape bookkeeping, saved with a model.
_ECONML_STATE = ("_d_y", "_d_t", "_d_t_in", "_input_names")


def _fitted(path: str, doc: str) -> property:
    """A read-only fitted attribute: ``path`` inside ``est.fitted_`` (AttributeError if unfitted)."""
    def get(self):
        obj = self.__dict__.get("fitted_")
        if obj is None:
            raise AttributeError(f"{type(self).__name__} is not fitted: it has no {doc}")
        for part in path.split("."):
            obj = None if obj is None else getattr(obj, part)
        return obj

    return property(get, doc=doc)


class _UnitPredictions:
    """What the fitted networks say about single units: effects, potential outcomes and the
    representation (mixed into :class:`CFR`)."""

    def individual_effect(self, X=None, W=None):
        """Unit-level effects ``tau(x_i, w_i)`` from the heads (ensemble mean, plus the debiasing
        shift). Shape (m,) for a binary treatment; (m, n_arms - 1) (each arm vs control) otherwise.
        """
        fitted = self._check_fitted()
        tau = fitted.unit_effects(fitted.features(X, W))
        return tau[:, 0] if tau.shape[1] == 1 else tau

    def predict_outcomes(self, X=None, W=None):
        """Predicted potential outcomes ``(mu0, mu1)`` at ``X`` (and ``W``), each shape (m,).

        One array per treatment arm, in the order of the categories (control first). For binary
        outcomes these are probabilities. Averaged over the ensemble; with ``debias="aipw"`` each
        arm is shifted by its AIPW correction (``mu1 - mu0`` is ``individual_effect``).
        """
        fitted = self._check_fitted()
        return tuple(fitted.potential_outcomes(fitted.features(X, W)))

    def transform(self, X=None, W=None, *, member: int = 0):
        """The learned representation ``Phi(x)``, shape (m, rep_dim), of one ensemble member."""
        fitted = self._check_fitted()
        return fitted.representation(fitted.features(X, W), member)

    def representation_at_init(self, X=None, W=None, *, member: int = 0):
        """``Phi(x)`` of the same network before training (same seed), shape (m, rep_dim)."""
        fitted = self._check_fitted()
        return fitted.representation(fitted.features(X, W), member, at_init=True)


class _FittedAttributes:
    """The fitted attributes of :class:`CFR` (documented there), read from ``fitted_``."""

    history_ = _fitted("members.history", "history_ (the training history)")
    best_iteration_ = _fitted("members.best_iteration", "best_iteration_ (kept steps)")
    n_iter_ = _fitted("members.n_iter", "n_iter_ (steps run)")
    seeds_ = _fitted("members.seeds", "seeds_ (the members' seeds)")
    training_result_ = _fitted("members.result", "training_result_ (the core's result)")
    config_ = _fitted("config", "config_ (the core configuration used)")
    alpha_ = _fitted("config.alpha", "alpha_ (the alpha used)")
    alpha_scores_ = _fitted("alpha_scores", "alpha_scores_ (the alpha candidates' scores)")
    head_form_ = _fitted("config.head_form", "head_form_ (the heads' form used)")
    head_form_scores_ = _fitted("head_form_scores",
                                "head_form_scores_ (the head forms' fold losses)")
    propensity_model_ = _fitted("propensity_model", "propensity_model_ (model used)")
    clipped_share_ = _fitted("debiased.clipped_share", "clipped_share_ (clipped propensities)")
    loss_ = _fitted("preprocessing.loss", "loss_ (the loss used)")
    model_final_ = _fitted("final.models", "model_final_ (the final-stage models)")
    blend_weights_ = _fitted("blend.weights", "blend_weights_ (the weights of final_blend)")
    blend_lambda_ = _fitted("blend.lam", "blend_lambda_ (the heads' weight in the blend)")
    blend_test_ = _fitted("blend.test", "blend_test_ (the blend's heterogeneity test)")
    effect_model_ = _fitted("effect_model", "effect_model_ (what effect(X) reports)")
    n_features_in_ = _fitted("columns.n_features", "n_features_in_ (columns of X and W)")



class _OtherFits:
    """The other ways to fit (stacked datasets, chunks) and to keep a fit (save, load), mixed
    into :class:`CFR`."""

    def fit_stacked(self, Y, T, *, X, W=None, units=None, seeds=None):
        """Fit one independent copy of this estimator per dataset, in one stacked pass.

        For several datasets of equal size: ``Y[k]`` (and ``T[k]``, ``X[k]``, ``W[k]`` where
        these are given per dataset) is dataset ``k``. The networks train together, and estimator
        k is what ``clone(self).fit(Y[k], T[k], X=X[k], W=W[k])`` gives with the seed(s) of
        dataset ``k`` (up to float rounding).

        Parameters
        ----------
        Y : array_like, shape (K, n), or a list of K vectors of length n
        T : array_like, shape (n,) shared by all datasets, or (K, n)
        X, W : covariates shared by all datasets (as in :meth:`fit`), or K per-dataset blocks of
            one shape, each standardised on its own (e.g. the data with an extra column).
        units : array_like of int, shape (K, m), optional
            Dataset k consists of the rows ``units[k]`` of shared ``X``/``W`` and of
            ``Y[k]``/``T[k]`` (e.g. each realization's own training units). Default: all rows.
        seeds : None, "fit" or array_like of int, optional
            None: ``n_ensemble`` fresh seeds per dataset; ``"fit"``: the seeds :meth:`fit`
            draws, for every dataset; or K (x ``n_ensemble``) seeds.

        Returns
        -------
        list of K fitted estimators.
        """
        fits, (y0, t0, x0) = fitting.fit_stacked(self, Y, T, X, W, units, seeds)
        return [clone(self)._set_fitted(f, y0, t0, x0) for f in fits]

    def fit_chunks(self, chunks, *, validation):
        """Fit on training data read chunk by chunk (data larger than memory); returns self.

        ``chunks``: a re-iterable of ``(Y, T, X)`` -- a list, a torch ``DataLoader`` of tuples or
        dicts, or a zero-argument function returning a fresh iterator -- one chunk in memory at a
        time (:mod:`dowhy_cfr.streaming`). ``validation = (Y_val, T_val, X_val)``: held-out data
        for early stopping; ``ate()`` without X averages over it. No ``W``, no ``inference``, and
        the plug-in average (no debiasing).
        """
        from .streaming import fit_chunks

        return self._set_fitted(fit_chunks(self, chunks, validation), *validation)

    def save(self, path):
        """Save the fitted estimator to one file: JSON configuration + numeric arrays, no pickle.

        ``CFR.load(path)`` restores an estimator that predicts bit-identically (bootstrap
        replicas are not saved; a warning says so). Format: :mod:`dowhy_cfr._io`. Returns the path.
        """
        fitted = _fitted_for_saving(self)
        econml_state = {k: getattr(self, k) for k in _ECONML_STATE if hasattr(self, k)}
        return _io.save(path, type(self).__name__, self.get_params(deep=False), fitted,
                        econml_state)

    @classmethod
    def load(cls, path):
        """Load an estimator written by :meth:`save` (CPU; move with ``device`` on refit)."""
        name, params, fitted, econml_state = _io.load(path)
        estimator = _saved_class(cls, name, path)(**params)
        return estimator._set_fitted(fitted, econml_state=econml_state)


class CFR(DoseResponseMixin, AverageEffectsMixin, SensitivityMixin, _UnitPredictions,
          _FittedAttributes, _OtherFits, TreatmentExpansionMixin, LinearCateEstimator,
          BaseEstimator):
    """Counterfactual Regression (Shalit, Johansson & Sontag, ICML 2017) as an EconML estimator.

    A shared representation ``Phi`` of the covariates feeds one outcome head per treatment arm
    (``h0``, ``h1``). Training minimises the weighted factual loss plus ``alpha`` times an integral
    probability metric (IPM) between the treated and control representations (Eq. 3 of the paper),
    so that the heads extrapolate across arms from balanced representations. The heads' effect is
    ``h1(Phi(x)) - h0(Phi(x))`` (``individual_effect``). What ``effect(X)`` reports is
    ``effect_model_``: by default (no W) the blend ``lam * (h1 - h0) + (1 - lam) * g(x) + c`` of
    the heads' effect (the members' mean) with ``g``, a boosted regression of the doubly robust
    pseudo-outcomes on X, ``lam`` (``blend_lambda_``) chosen by the out-of-fold R-loss, or the
    doubly robust ATE at every x where a calibration test of the blend's out-of-fold effects does
    not show that tau varies (``blend_test_``); ``c`` makes the mean over the fitted units the
    doubly robust ATE (``final_blend``; ``summary()`` says which).

    The training and network defaults are those of :class:`dowhy_cfr.core.CFRConfig`, the one
    place they are defined (sources and measurements in ``docs/parameters.md``): five small
    networks trained in one stack as K-fold bagged members. ``CFR(**PAPER_IHDP)``
    (:data:`dowhy_cfr.core.PAPER_IHDP`) is the paper's IHDP configuration.

    With the default inference, ``ate_interval``/``summary`` give analytic intervals of the
    doubly robust averages over the fitted units, and ``effect_interval``/``effect_inference``
    pointwise intervals of tau(x) from the members' jackknife
    (:class:`dowhy_cfr.inference.CFRAIPWInference`).

    Parameters
    ----------
    alpha : float, "auto" or list of float, default 0.2
        Weight of the imbalance penalty (alpha of Eq. 3); ``alpha=0`` is TARNet. The factual loss
        is computed on the standardised outcome, so ``alpha`` does not depend on the units of Y.
        The paper's alpha = 0.3 on raw IHDP outcomes (variance about 4) is roughly 0.075 here;
        the default was measured on IHDP, the simulated and the realistic designs together
        (``docs/parameters.md``). ``"auto"`` (or a list) selects from
        :data:`dowhy_cfr.core.ALPHA_GRID` (the list) in one stack by the validation R-loss
        (``alpha_``, ``alpha_scores_``). Binary treatments only.
    alpha_units : int or None, default 1200
        ``alpha`` applies in full up to this many training units per member (n = 1,500 with the
        default five cross-fitting members) and in inverse proportion beyond: ``alpha *
        alpha_units / n_train`` (the penalty regularises, and more data need less of it; at n =
        4,000 the development designs' best alpha was 0.05; ``docs/parameters.md``, item 21).
        ``alpha_`` is the weight used. None: ``alpha`` at any size (the paper; ``PAPER_IHDP``).
        A stream (size unknown) and the candidates of ``alpha="auto"`` or a list use their
        alphas as given.
    ipm : {"wass", "wass2", "mmd2_lin", "mmd2_rbf"}
        The IPM: entropic Wasserstein-1 (CFR-Wass, the default), the same with squared Euclidean
        cost, squared linear MMD (the paper's CFR-MMD) or unbiased Gaussian-kernel MMD.
    weight_decay : float
        L2 penalty lambda of Eq. 3 on the heads' weights (``p_lambda``); on the standardised
        loss, var(y) times the paper's strength: measured as good as rescaled (see docs).
    rep_weight_decay : bool
        Also penalise the representation's weights.
    n_rep_layers, rep_dim, n_head_layers, head_dim : int
        Depth and width of the representation Phi and of each head (ELU; heads end linear);
        default 2 layers of 32 each (the paper: 3 x 200 and 3 x 100; ``PAPER_IHDP``).
    normalization : {"divide", "none"}
        "divide" projects each representation onto the unit sphere (reference code).
    weight_init : float
        Initial weights are N(0, (weight_init / sqrt(fan_in))^2); biases start at 0.
    feature_scaling : bool, default True
        A learned scale per input column before Phi's first layer (RealMLP's scaling layer; a
        fast, learned feature selection; ``docs/parameters.md``, item 18). ``PAPER_IHDP`` and
        False give the paper's plain network.
    head_form, effect_penalty : {"separate", "effect", "robinson", "auto"}, float
        One head per arm (the paper); ``mu = m -+ d/2`` (d's L2 x ``effect_penalty``);
        ``m + (t - e(x)) d`` at each unit's propensity; "auto": the first and the last (no
        penalty) in one stack, averaged where their fold losses are within 5 %, else the
        lower (docs/tuning.md). A dose's head is its own; streams take separate heads.
    learning_rate, lr_decay, lr_decay_steps, lr_warmup : float/"auto", float/"auto", int, int/"auto"
        Adam's learning rate, rising linearly over the first ``lr_warmup`` steps, times
        ``lr_decay`` every ``lr_decay_steps``. All "auto" at batches of up to 100 units: 8e-3
        times 0.8 after 50 warm-up steps (a continuous treatment: 4e-3 times 0.9, none;
        ``docs/parameters.md``, items 25, 37); else 2e-3 per 100 units of batch (at most 8e-3)
        times cfrnet's 0.97 and no warm-up, as when a rate or decay is set by hand.
    ema_decay : float, default 0.99
        Validation, early stopping and the fitted networks use an exponential moving average of
        the weights (warmed up over the first steps), removing most of the last iterate's noise;
        0 keeps the iterate, as the paper (``PAPER_IHDP``) does (docs/parameters.md, item 19).
    batch_size : int or "auto"
        Units per step, every arm in each (clamped, with a warning, to a small split); "auto":
        100 up to 2,000 training units, then 1/8 of them within 200-400.
    n_iter, val_fraction, eval_every : int or "auto", float, int
        Maximum number of steps ("auto": 50 passes within 1,500 steps, fewer in proportion to a
        batch above 100, and 3,000; ``docs/parameters.md``); share of units held out
        (stratified) for early stopping; steps between evaluations.
    patience : int or None
        Stop after this many evaluations (at least 7 epochs) without a better validation
        objective, keeping the best checkpoint. None runs all ``n_iter`` steps.
    relative_patience, tol, stop_quorum : float, float, float
        A model stops after ``max(patience * eval_every, 7 epochs, relative_patience *
        best_step)`` steps without a best ``tol`` (relative; 0: any) below the last; members
        stop together once ``stop_quorum`` (2 of 5) have, each at its best (1: each alone).
    reweight_sample : bool
        Weight units by ``w_i = t_i/(2u) + (1-t_i)/(2(1-u))`` (Algorithm 1, line 2).
    rbf_sigma, wass_lambda, wass_iterations : float, float, int
        ``mmd2_rbf``'s bandwidth sigma (``exp(-||a-b||^2 / sigma^2)``); Sinkhorn's scale
        (relative to the mean cost) and iterations.
    wass_backprop : bool or "auto", default "auto"
        The Wasserstein gradient through Sinkhorn's iterations (True, the authors' code), or
        with the transport plan held fixed (False, the supplement's Algorithm 2: about 40 % less
        time on batches of 400). "auto": True below batches of 200 units (n = 2,500 with the
        five K-fold members; :data:`dowhy_cfr.core.config.AUTO_PLAN_FIXED_FROM`).
    ipm_max_units, ipm_every : int or None, int; default 200, 2
        A training batch's IPM uses at most ``ipm_max_units`` of its units (each arm or dose
        stratum in proportion; None: all) and, after the first 200 steps, enters one step in
        ``ipm_every`` at ``ipm_every * alpha`` (1: every step, as Algorithm 1): each a tenth to
        a fifth off a fit at the same accuracy (``dowhy_cfr.core.config.IPM_EVERY``).
    scaling : {"standard", "robust", "quantile"}
        How the encoded covariates are scaled (:class:`dowhy_cfr.tabular.FeatureScaler`): mean
        and standard deviation, RealMLP's robust scaling with smooth clipping, or quantiles.
    loss : {"auto", "mse", "logloss"}, default "auto"
        Squared loss, or log-loss with a sigmoid output for 0/1 outcomes ("auto": when every
        outcome is 0 or 1; effects are then differences of probabilities).
    model_final : sklearn regressor or None, default None
        With ``W`` in ``fit``: the regression of the effects ``tau(x_i, w_i)`` on ``x_i`` (None:
        HistGradientBoostingRegressor; a dose: of the units' curves, None: ``BLEND_MODEL``,
        ``docs/dose.md``); without: ``final_blend``'s ``g`` (None: ``fitting.BLEND_MODEL``).
    final_blend : bool, default True
        Without ``W``, with ``debias="aipw"`` and cross-fitting members: effects ``lam * (h1 -
        h0) + (1 - lam) * g(x)`` (``g`` a DR-learner on each member's training units, ``lam`` by
        the out-of-fold R-loss; ``blend_weights_``), or a constant where the blend's calibration
        test does not reject one (``blend_test_``), shifted to the AIPW ATE. False: the heads'.
    n_ensemble : int, default 5
        Networks trained (stacked, in one pass) from different seeds, their effects averaged:
        five small ones, measured more accurate than one of the paper's size at about its cost
        (docs/parameters.md). Their spread gives the pointwise intervals (with ``cross_fit``).
    debias : {"aipw", None}, default "aipw"
        "aipw": doubly robust averages (:mod:`dowhy_cfr.debiased`); effects are shifted by one
        constant per arm so that ``ate(X)`` over the fitted units is the AIPW ATE. None: the
        plug-in (also ``average_effect(..., debiased=False)``), no analytic intervals.
    cross_fit : bool or "auto", default "auto"
        K-fold bagged members: member j trains outside the j-th of K folds and stops by the
        other members' validation objectives on their folds, never seeing fold j, whose outcome
        predictions enter the AIPW corrections (out of fold); effects average all members.
        "auto": True when ``n_ensemble >= 2``.
    model_propensity, min_propensity, cv : None, str, classifier or list; float; int
        Propensity model (None/"auto": the better by out-of-fold log-loss of a logistic regression
        and depth-3 boosting, stopped early for a dose's GPS; EconML's names "linear", "forest",
        ..., a list or dict to select from: :func:`dowhy_cfr.nuisance.propensity_candidates`),
        cross-fitted over ``cv`` stratified folds, clipped below at ``min_propensity`` (0.05; cv 5).
    categories : "auto" or list, default "auto"
        Treatment categories, the control arm first.
    treatment : {"auto", "categorical", "continuous"}, default "auto"
        "auto": categorical up to 20 distinct values, continuous (a dose) above, if numeric.
        A continuous T gets one head whose weights are splines of the dose (VCNet), the
        interval IPM (ADMIT) and a doubly robust average curve (``dose_response``;
        ``docs/dose.md``). ``spline_degree``, ``spline_knots``, ``dose_strata``, ``dose_scale``:
        its spline, the IPM's dose strata and the dose's scale (defaults: ``CFRConfig``).
    random_state : int, RandomState or None, default None
        Seed of the weights, the validation split and the mini-batch order.
    device : {"cpu", "cuda", "auto"}, default "cpu"
        Where the networks train ("auto": CUDA if available); a GPU pays from stacks of ~10
        models or batches of ~1,000, not for one default fit (docs/scaling.md).
    verbose : int, default 1
        1: a progress bar in interactive sessions (terminal or notebook); 2: always; 0: never.

    Attributes
    ----------
    fitted_ : dowhy_cfr.fitted.FittedCFR
        The whole fitted state (treatment encoding, preprocessing, networks, ...); the
        attributes below read it.
    history_ : pandas.DataFrame
        One row per evaluation and ensemble member: step, train/validation factual loss,
        imbalance, validation objective and learning rate. Step 0 is the untrained network.
    best_iteration_ : numpy.ndarray
        Step of the kept checkpoint, per ensemble member.
    n_iter_ : int
        Steps run (fewer than ``n_iter`` when every member stopped early).
    config_ : CFRConfig
        The core configuration used.
    alpha_ : float
        The alpha used: the selected one with ``alpha="auto"`` or a list, else ``alpha`` at the
        members' training size (``alpha_units``).
    alpha_scores_ : pandas.DataFrame or None
        With ``alpha="auto"`` or a list: per candidate, its validation criteria (``nn_pehe``,
        ``r_loss``, ``dr_loss``; mean over members, lower is better) and ``selected``; else None.
    head_form_, head_form_scores_ : str, pandas.DataFrame or None
        The form used (``"auto"``: both, averaged); with "auto" each form's ``fold_loss`` (its
        members' factual loss on their folds), ``selected``, ``weight`` (not saved); else None.
    model_final_ : list of fitted regressors or None
        The final-stage models, one per treated arm (only when W was given).
    effect_model_ : str
        What ``effect(X)`` reports: "blend", "constant" (the doubly robust ATE at every x),
        "heads" (``final_blend=False``, no blend possible) or "model_final" (W at fit).
    blend_weights_, blend_lambda_ : ndarray (2,) or None, float or None
        ``final_blend``'s weights of the heads and of ``g``: (lam, 1 - lam), or (0, 0) for a
        constant effect; ``lam`` of the blend (where a constant was chosen: of the blend it
        beat). None where no blend was fitted.
    blend_test_ : HeterogeneityTest or None
        The test that chose between the blend and a constant effect
        (:func:`dowhy_cfr.nuisance.heterogeneity_test`): ``kappa``, the calibration slope of
        the blend's out-of-fold effects (1: calibrated, 0: unrelated to the effect), its ``z``
        and one-sided ``pvalue``; a constant is reported where ``pvalue`` exceeds
        :data:`dowhy_cfr.nuisance.HETEROGENEITY_LEVEL` (0.05). None where no blend was fitted.
    seeds_, loss_, propensity_model_, clipped_share_ : list of int, str, str or None, float or None
        Members' seeds; the loss ("mse"/"logloss"); the propensity model kept; the share of units
        whose propensity was clipped at ``min_propensity`` (``fit`` warns above 10 %).

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
        self, *, alpha=_D.alpha, alpha_units=_D.alpha_units, ipm=_D.ipm,
        weight_decay=_D.weight_decay,
        rep_weight_decay=_D.rep_weight_decay, n_rep_layers=_D.n_rep_layers, rep_dim=_D.rep_dim,
        n_head_layers=_D.n_head_layers, head_dim=_D.head_dim, normalization=_D.normalization,
        weight_init=_D.weight_init, feature_scaling=_D.feature_scaling, head_form=_D.head_form,
        effect_penalty=_D.effect_penalty,
        learning_rate=_D.learning_rate, lr_decay=_D.lr_decay,
        lr_decay_steps=_D.lr_decay_steps, lr_warmup=_D.lr_warmup, ema_decay=_D.ema_decay,
        batch_size=_D.batch_size,
        n_iter=_D.n_iter, val_fraction=_D.val_fraction, eval_every=_D.eval_every,
        patience=_D.patience,
        relative_patience=_D.relative_patience, tol=_D.tol, stop_quorum=_D.stop_quorum,
        reweight_sample=_D.reweight_sample, rbf_sigma=_D.rbf_sigma, wass_lambda=_D.wass_lambda,
        wass_iterations=_D.wass_iterations, wass_backprop=_D.wass_backprop,
        ipm_max_units=_D.ipm_max_units, ipm_every=_D.ipm_every, dose_scale=_D.dose_scale,
        scaling=_D.scaling, loss="auto", model_final=None, final_blend=True,
        n_ensemble=_D.n_ensemble, debias="aipw", cross_fit=_D.cross_fit,
        model_propensity=None, min_propensity=0.05, cv=5, categories="auto", treatment="auto",
        spline_degree=_D.spline_degree, spline_knots=_D.spline_knots, dose_strata=_D.dose_strata,
        random_state=None, device="cpu", verbose=1,
    ):
        params = locals()
        for name in list(inspect.signature(CFR.__init__).parameters)[1:]:  # all but self
            setattr(self, name, params[name])
        super().__init__()

    transformer = property(lambda self: self.fitted_.encoding.transformer if "fitted_" in
                           self.__dict__ else None, doc="EconML's treatment encoder (None before fit)")

    def _set_fitted(self, fitted, Y=None, T=None, X=None, econml_state=None):
        """Store ``fitted``: the one writer of the fitted state. ``fit`` leaves EconML's
        bookkeeping to ``_wrap_fit``; other paths give the data for it, or the saved state."""
        if Y is not None:
            self._prefit(Y, T, X=X)
        self.fitted_ = fitted
        self.__dict__.update(econml_state or {})
        self._d_t = () if fitted.continuous else (fitted.encoding.n_arms - 1,)
        if Y is not None:
            self._postfit(Y, T)
        if Y is not None or econml_state is not None:  # fit_stacked, replicas, load
            self._inference = (DoseInference if fitted.continuous
                               else CFRAIPWInference).default_for(self)
        return self

    def _check_fitted(self):
        if "fitted_" not in self.__dict__:
            raise ValueError(f"This {type(self).__name__} instance is not fitted yet; call "
                             f"fit(Y, T, X=...) first")
        return self.fitted_

    # ------------------------------------------------------------------ EconML hooks
    def _gen_allowed_missing_vars(self):
        return []

    def _expand_treatments(self, X=None, *Ts, transform=True):
        # EconML converts X to an array here: encode it first (DataFrame columns, categories)
        fitted = self._check_fitted()
        x = None if X is None or fitted.columns.n_x == 0 else fitted.columns.block("X", X)
        fitted.encoding.check_labels(*Ts, n_rows=None if x is None else len(x))
        if x is None:
            return super()._expand_treatments(X, *Ts, transform=transform)
        return (EncodedX(x), *super()._expand_treatments(x, *Ts, transform=transform)[1:])

    def _get_inference_options(self):
        # "bootstrap": replicas in one stacked pass; "auto": "aipw" unless debias=None
        return dict(super()._get_inference_options(), bootstrap=CFRBootstrapInference,
                    aipw=CFRAIPWInference, auto=lambda: CFRAIPWInference() if self.debias else None)

    def _strata(self, Y, T, *args, **kwargs):
        """Bootstrap replicas keep the treated/control counts (EconML calls this)."""
        return V.as_1d("T", T)

    # ------------------------------------------------------------------ fit
    def fit(self, Y, T, *, X=None, W=None, groups=None, inference="auto"):
        """Train the networks on outcomes ``Y``, treatments ``T`` and covariates ``X`` (and ``W``).

        Parameters
        ----------
        Y : array_like, shape (n,) or (n, 1)
            Outcome. 0/1 outcomes use log-loss (``loss="auto"``).
        T : array_like, shape (n,) or (n, 1)
            Treatment: two or more labels, taken as categories (the first of ``categories`` is
            the control; one outcome head per arm).
        X : array_like, shape (n, d_x), or None (as in EconML; None needs W: averages only)
            Covariates: confounders and effect modifiers. ``effect(X)`` is a function of these.
        W : array_like, shape (n, d_w), optional
            Further confounders the representation sees; CATE is then averaged over W given X by
            ``model_final`` (see the class docstring).
        groups : array_like, shape (n,), optional
            A group label per row (e.g. a person with several rows): rows of one group stay on
            one side of every split (validation, cross-fitting folds of the propensity and of
            ``cross_fit`` members), as in EconML's DML estimators. Not with bootstrap inference.
        inference : "auto", "aipw", "bootstrap", Inference or None, default "auto"
            "auto" ("aipw"): analytic intervals of the doubly robust average effects over the
            fitted units (``ate_interval``; :class:`~dowhy_cfr.CFRAIPWInference`), free; none
            when ``debias=None``. "bootstrap" or an EconML ``BootstrapInference``: also
            pointwise ``effect_interval`` (trains one network per replica).

        Returns
        -------
        self
        """
        if fitting.treatment_kind(self, T) == "continuous":
            inference = _dose_inference(inference)
        if groups is None:
            return self._fit(Y, T, X=X, W=W, inference=inference)
        if isinstance(inference, BootstrapInference) or inference == "bootstrap":
            raise ValueError("groups cannot be combined with inference='bootstrap' (its "
                             "resamples are of rows); use the default inference")
        return self._fit(Y, T, X=X, W=W, groups=groups, inference=inference)

    @BaseCateEstimator._wrap_fit
    def _fit(self, Y, T, *, X, W=None, groups=None):
        return self._set_fitted(fitting.fit(self, Y, T, X, W, groups))

    # ------------------------------------------------------------------ public API
    def const_marginal_effect(self, X=None):
        """Effect of treatment vs control at ``X``: shape (m, d_t) (or (m, d_y, d_t) for 2-D Y).

        ``effect_model_`` says which: without W at fit, by default ``lam * (h1(Phi(x)) -
        h0(Phi(x))) + (1 - lam) * g(x)`` (the members' mean heads blended with the doubly robust
        regression ``g``, ``lam = blend_lambda_``), or the doubly robust ATE at every x where
        the calibration test (``blend_test_``) did not show that tau varies, or with
        ``final_blend=False`` the heads' effect alone; with W at fit, ``model_final_`` at X;
        with X=None at fit, the mean over the fitted units (shape (1, ...)). With ``debias="aipw"``, plus the constant that makes
        the mean over the fitted units the AIPW ATE (``average_effect``).
        """
        fitted = self._check_fitted()
        if fitted.continuous:
            raise NotImplementedError(CONSTANT_DOSE_EFFECT)
        if fitted.columns.n_x == 0 or (X is None and fitted.debiased is None):
            if X is not None:
                raise ValueError("the estimator was fitted with X=None; call with X=None")
            tau = fitted.tau_fit_mean.reshape(1, -1)  # (fit_chunks: over the validation units)
        else:
            tau = fitted.cate(X)
        return tau[:, None, :] if self._d_y else tau

def _dose_inference(inference):
    """The inference of a fit on a continuous treatment: its own (:class:`DoseInference`) for
    "auto"/"aipw"; None stays None; a clear error for a bootstrap."""
    if inference is None or isinstance(inference, DoseInference):
        return inference
    if isinstance(inference, str) and inference in ("auto", "aipw"):
        return DoseInference()
    raise NotImplementedError(
        f"inference={inference!r} is not available for a continuous treatment: the default "
        f"inference='auto' gives the doubly robust average curve's band (dose_response(), "
        f"ate_interval) and the members' jackknife intervals of the units' curves "
        f"(effect_interval)")


def _fitted_for_saving(est):
    """``est``'s fitted state, with a warning where bootstrap replicas will not be saved."""
    fitted = est._check_fitted()
    if isinstance(getattr(est, "_inference", None), CFRBootstrapInference):
        warnings.warn("save() does not store the bootstrap replicas of inference='bootstrap': "
                      "the loaded estimator has the analytic (AIPW) intervals only; refit with "
                      "inference='bootstrap' after loading for effect_interval",
                      UserWarning, stacklevel=3)
    return fitted


def _saved_class(cls, name: str, path):
    """The class called ``name`` among ``cls``, its CFR bases and its subclasses."""
    family, todo = [c for c in cls.__mro__ if issubclass(c, CFR)], [cls]
    while todo:
        subs = todo.pop().__subclasses__()
        family += subs
        todo += subs
    for c in family:
        if c.__name__ == name:
            return c
    raise TypeError(f"{path} holds a {name}, not a {cls.__name__}")


_TARNET_SIGNATURE = inspect.signature(CFR.__init__).replace(
    parameters=[p for name, p in inspect.signature(CFR.__init__).parameters.items()
                if name not in ("alpha", "alpha_units")]
)


class TARNet(CFR):
    """TARNet: CFR without the imbalance penalty (``alpha = 0``), same API.

    The validation history still records the imbalance (``ipm``) of the representation, which
    is what the balance refuter reports. All parameters are those of :class:`CFR` except
    ``alpha`` and ``alpha_units``.

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
        for name in ("alpha", "alpha_units"):
            if name in params:
                raise TypeError(f"TARNet has no {name} (it is CFR with alpha=0); use "
                                f"CFR({name}=...)")
        defaults = {name: p.default for name, p in _TARNET_SIGNATURE.parameters.items()
                    if name != "self"}
        unknown = set(params) - set(defaults)
        if unknown:
            raise TypeError(f"TARNet got unexpected keyword argument(s) {sorted(unknown)}")
        super().__init__(alpha=0.0, **{**defaults, **params})

    __init__.__signature__ = _TARNET_SIGNATURE
