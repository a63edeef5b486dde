"""CFR/TARNet as EconML CATE estimators: API, shapes, recovery of known effects."""

import copy

import numpy as np
import pandas as pd
import pytest
from econml.inference import BootstrapInference
from sklearn.base import clone
from sklearn.linear_model import LinearRegression

from dowhy_cfr import CFR, TARNet
from helpers import TINY, make_confounded, slope, sqrt_pehe


@pytest.fixture(scope="module")
def fitted():
    X, T, Y, tau = make_confounded(n=300)
    est = CFR(**TINY).fit(Y, T, X=X)
    return est, X, T, Y, tau


def test_constructor_stores_params_unchanged_and_clone_works():
    est = CFR(alpha=0.7, ipm="mmd2_lin", n_iter=5, random_state=3)
    params = est.get_params()
    assert params["alpha"] == 0.7 and params["ipm"] == "mmd2_lin" and params["n_iter"] == 5
    c = clone(est)
    assert c.get_params() == params and c is not est
    est.set_params(alpha=0.1)
    assert est.alpha == 0.1
    with pytest.raises(TypeError):
        CFR(0.5)  # keyword-only


def test_tarnet_is_cfr_without_alpha():
    est = TARNet(n_iter=7)
    assert est.alpha == 0.0 and "alpha" not in est.get_params()
    assert clone(est).get_params()["n_iter"] == 7
    with pytest.raises(TypeError, match="alpha"):
        TARNet(alpha=0.3)
    with pytest.raises(TypeError, match="bogus"):
        TARNet(bogus=1)


def test_shapes_and_econml_api(fitted):
    est, X, T, Y, _ = fitted
    m = 7
    assert est.const_marginal_effect(X[:m]).shape == (m, 1)
    assert est.effect(X[:m]).shape == (m,)
    assert est.marginal_effect(1, X[:m]).shape == (m, 1)
    eff = est.effect(X[:m])
    np.testing.assert_allclose(est.effect(X[:m], T0=1, T1=0), -eff)
    np.testing.assert_allclose(est.effect(X[:m], T0=0, T1=0), 0)
    assert est.ate(X) == pytest.approx(eff.mean() if m == len(X) else est.effect(X).mean())
    mu0, mu1 = est.predict_outcomes(X[:m])
    np.testing.assert_allclose(mu1 - mu0, eff, rtol=1e-6, atol=1e-9)
    phi = est.transform(X[:m])
    assert phi.shape == (m, TINY["rep_dim"])
    np.testing.assert_allclose(np.linalg.norm(phi, axis=1), 1.0, rtol=1e-5)  # "divide"
    assert est.individual_effect(X[:m]).shape == (m,)


def test_history_and_fitted_attributes(fitted):
    est = fitted[0]
    h = est.history_
    assert list(h.columns) == ["step", "member", "train_loss", "train_imbalance", "val_loss",
                               "val_imbalance", "val_objective", "learning_rate"]
    assert h["step"].iloc[0] == 0 and h["step"].iloc[-1] == est.n_iter_
    assert est.best_iteration_[0] in set(h["step"])
    assert est.config_.alpha == est.alpha


def test_pandas_inputs_keep_feature_names():
    X, T, Y, _ = make_confounded(n=200)
    Xdf = pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])])
    est = CFR(**TINY).fit(pd.Series(Y, name="y"), pd.Series(T, name="treat"), X=Xdf)
    assert est.cate_feature_names() == list(Xdf.columns)
    assert est.cate_output_names() == ["y"]
    np.testing.assert_allclose(est.effect(Xdf), est.effect(X))
    with pytest.raises(ValueError, match="columns"):
        est.effect(Xdf[list(reversed(Xdf.columns))])


def test_same_seed_same_result_and_fresh_networks_each_fit():
    X, T, Y, _ = make_confounded(n=200)
    a = CFR(**TINY).fit(Y, T, X=X)
    b = CFR(**TINY).fit(Y, T, X=X)
    np.testing.assert_array_equal(a.effect(X), b.effect(X))
    first = a.effect(X).copy()
    a.fit(Y, T, X=X)  # refit starts from scratch: same seed -> same result
    np.testing.assert_array_equal(a.effect(X), first)


def test_recovers_heterogeneous_effect_much_better_than_difference_in_means():
    """The network itself (``debias=None``: no doubly robust shift, which makes the ATE right
    whatever the heads learned), on fresh test units of a confounded design with tau = 1 + x1.

    Measured (data seeds 1-5 with model seeds 0-4; the test is the first): the heads' sqrt(PEHE)
    on fresh units 0.15-0.31 (0.239 here), slope of tau_hat on x1 0.93-1.01 (0.934), corr with
    tau >= 0.97, plug-in ATE error <= 0.16 (0.052); an untrained network (n_iter=1): sqrt(PEHE)
    1.37-1.42, slope 0.00, corr 0.44-0.91, ATE error 0.94-1.03; a fit with half the true slope:
    sqrt(PEHE) 0.50, slope 0.5; the difference in means: sqrt(PEHE) 2.15-2.45.
    """
    X, T, Y, tau = make_confounded(n=800, seed=1)
    X_new, _, _, tau_new = make_confounded(n=2000, seed=100)
    est = CFR(n_rep_layers=2, rep_dim=48, n_head_layers=2, head_dim=48, n_iter=800,
              batch_size=100, verbose=0, random_state=0, debias=None).fit(Y, T, X=X)
    tau_hat = est.effect(X_new)
    assert sqrt_pehe(tau_hat, tau_new) < 0.4
    assert 0.75 < slope(X_new[:, 1], tau_hat) < 1.25
    assert np.corrcoef(tau_hat, tau_new)[0, 1] > 0.95
    assert abs(est.average_effect(debiased=False).estimate - tau.mean()) < 0.25
    assert est.ate(X) == pytest.approx(est.effect(X).mean())  # no shift with debias=None
    naive = Y[T == 1].mean() - Y[T == 0].mean()
    assert sqrt_pehe(est.effect(X), tau) < sqrt_pehe(naive, tau) / 5


def test_W_confounders_reach_the_representation_and_final_stage_gives_cate_of_X():
    X, T, Y, tau = make_confounded(n=300)
    x_mod, w_conf = X[:, 1:2], np.delete(X, 1, axis=1)  # x1 modifies, the rest confound
    est = CFR(model_final=LinearRegression(), **TINY).fit(Y, T, X=x_mod, W=w_conf)
    assert est.n_features_in_ == X.shape[1]
    assert est.effect(x_mod[:5]).shape == (5,)
    # the final stage is a linear fit of the unit-level effects on X
    unit = est.individual_effect(x_mod, w_conf)
    lin = LinearRegression().fit(x_mod, unit)
    np.testing.assert_allclose(est.effect(x_mod[:5]), lin.predict(x_mod[:5]), rtol=1e-6)
    with pytest.raises(ValueError, match="W"):
        est.predict_outcomes(x_mod)  # W was used at fit


def test_X_none_with_W_gives_average_effect():
    X, T, Y, _ = make_confounded(n=300)
    est = CFR(**TINY).fit(Y, T, X=None, W=X)
    ate = est.ate()
    assert np.isscalar(ate) or np.ndim(ate) == 0
    assert est.effect(T0=0, T1=1).shape == (1,)
    assert ate == pytest.approx(est.individual_effect(None, X).mean(), rel=1e-6)


def test_binary_outcome_uses_logloss_and_effects_are_probability_differences():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    T = rng.binomial(1, 0.5, size=300)
    Y = rng.binomial(1, 1 / (1 + np.exp(-(X[:, 0] + T))))
    est = CFR(**TINY).fit(Y, T, X=X)
    assert est.loss_ == "logloss"
    mu0, mu1 = est.predict_outcomes(X)
    assert np.all((mu0 > 0) & (mu0 < 1) & (mu1 > 0) & (mu1 < 1))
    assert np.all(np.abs(est.effect(X)) < 1)
    assert CFR(loss="mse", **TINY).fit(Y, T, X=X).loss_ == "mse"
    with pytest.raises(ValueError, match="binary outcome"):
        CFR(loss="logloss", **TINY).fit(Y + 0.5, T, X=X)


def test_string_treatment_labels_and_categories():
    X, T, Y, _ = make_confounded(n=200)
    labels = np.where(T == 1, "drug", "placebo")
    est = CFR(categories=["placebo", "drug"], **TINY).fit(Y, labels, X=X)
    ref = CFR(**TINY).fit(Y, T, X=X)
    np.testing.assert_allclose(est.effect(X[:5], T0="placebo", T1="drug"), ref.effect(X[:5]))


def test_ensemble_averages_members():
    X, T, Y, _ = make_confounded(n=200)
    est = CFR(**{**TINY, "n_ensemble": 3}).fit(Y, T, X=X)
    assert est.history_["member"].nunique() == 3 and len(est.best_iteration_) == 3
    fitted = est.fitted_
    outs = fitted.outputs(fitted.features(X[:4]))  # (K, arms, n)
    # the heads' ensemble mean, plus the one constant of the debiased (AIPW) default (effect()
    # blends it with the pseudo-outcome regression: tests/test_blend.py)
    np.testing.assert_allclose(est.individual_effect(X[:4]),
                               (outs[:, 1] - outs[:, 0]).mean(0) + fitted.debiased.shift[0])
    assert not np.allclose(outs[0], outs[1])


def test_bootstrap_intervals_via_econml():
    X, T, Y, _ = make_confounded(n=200)
    est = CFR(**{**TINY, "n_iter": 20}).fit(
        Y, T, X=X, inference=BootstrapInference(n_bootstrap_samples=4, n_jobs=1))
    lo, hi = est.effect_interval(X[:5], alpha=0.1)
    assert lo.shape == (5,) and np.all(lo < hi)
    # EconML's pivot interval of its refitted clones (kept in the private _instances)
    draws = np.stack([r.effect(X[:5]) for r in est._inference._est._instances])
    np.testing.assert_allclose(lo, 2 * est.effect(X[:5]) - np.percentile(draws, 95, axis=0))
    np.testing.assert_allclose(hi, 2 * est.effect(X[:5]) - np.percentile(draws, 5, axis=0))
    lo, hi = est.ate_interval(X, alpha=0.1)
    assert lo < est.ate(X) < hi
    assert est._strata(Y, T, X=X).tolist() == T.tolist()


def test_pickle_and_deepcopy_of_fitted_estimator(fitted):
    import pickle

    est, X = fitted[0], fitted[1]
    for other in (pickle.loads(pickle.dumps(est)), copy.deepcopy(est)):
        np.testing.assert_array_equal(other.effect(X[:5]), est.effect(X[:5]))


def test_unfitted_estimator_raises():
    with pytest.raises(ValueError, match="not fitted"):
        CFR().effect(np.zeros((2, 3)))


def test_representation_at_init_differs_from_trained(fitted):
    est, X = fitted[0], fitted[1]
    init = est.representation_at_init(X[:10])
    assert init.shape == (10, TINY["rep_dim"])
    assert not np.allclose(init, est.transform(X[:10]))


def test_fit_stacked_equals_separate_fits():
    X, T, Y, _ = make_confounded(n=200)
    rng = np.random.default_rng(1)
    Ys = np.stack([Y, 3 * Y + 10, Y + rng.normal(size=len(Y))])  # different scales per dataset
    members = CFR(**TINY).fit_stacked(Ys, T, X=X)
    assert len(members) == 3
    # member 0 uses the first seed drawn from random_state, like a plain fit
    single = CFR(**TINY).fit(Ys[0], T, X=X)
    np.testing.assert_allclose(members[0].effect(X), single.effect(X), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(members[0].history_["val_loss"], single.history_["val_loss"],
                               rtol=1e-4)
    # each member keeps its own outcome scale: dataset 1 is an affine copy of dataset 0
    assert members[1].fitted_.preprocessing.y_scale[0] == pytest.approx(
        3 * members[0].fitted_.preprocessing.y_scale[0])
    assert abs(members[1].ate(X)) > 2 * abs(members[0].ate(X))
    for m in members:
        assert m.history_["member"].eq(0).all() and len(m.best_iteration_) == 1
        assert m.effect(X[:3]).shape == (3,)


def test_estimator_defaults_are_cfrconfig_defaults():
    """CFRConfig is the one place of the training/network defaults: every parameter CFR shares
    with it defaults to CFRConfig's value (TARNet too, except alpha, which it does not have)."""
    import dataclasses
    import inspect

    from dowhy_cfr.core import CFRConfig

    config = CFRConfig()
    fields = {f.name for f in dataclasses.fields(CFRConfig)}
    for cls in (CFR, TARNet):
        params = inspect.signature(cls.__init__).parameters
        # loss: the estimator's "auto" picks CFRConfig's "mse" or "logloss" from the data
        shared = (fields & set(params)) - {"loss"}
        assert len(shared) >= 20, sorted(shared)
        for name in shared:
            assert params[name].default == getattr(config, name), name
        assert cls().get_params()["n_iter"] == config.n_iter  # sklearn sees the same defaults
    assert CFR().alpha == config.alpha == 0.2
    assert CFR().relative_patience == config.relative_patience


def test_an_ensemble_member_that_diverges_is_dropped_with_a_warning(data, monkeypatch):
    """One member of five fails before any checkpoint: the others make the ensemble (the whole
    fit used to abort); with a single network the error is clear."""
    import dowhy_cfr.fitting
    from dowhy_cfr.core import TrainingDivergedError, train_cfr

    X, T, Y, _ = data

    def second_member_blows_up(*args, seeds, config, **kwargs):
        wd = [config.weight_decay] * len(seeds)
        if len(seeds) > 1:
            wd[1] = 1e39
        return train_cfr(*args, seeds=seeds, config=config, weight_decay=wd, **kwargs)

    monkeypatch.setattr(dowhy_cfr.fitting, "train_cfr", second_member_blows_up)
    with pytest.warns(RuntimeWarning, match=r"member\(s\) \[1\] of 5 diverged"):
        est = CFR(**{**TINY, "n_ensemble": 5}).fit(Y, T, X=X)
    assert len(est.seeds_) == 4 and len(est.best_iteration_) == 4
    assert np.isfinite(est.effect(X[:5])).all()
    with pytest.raises(TrainingDivergedError, match="non-finite"):
        CFR(**{**TINY, "weight_decay": 1e39}).fit(Y, T, X=X)


def test_alpha_used_follows_the_members_training_size():
    """alpha_units: alpha in full up to that many training units per member, in inverse
    proportion beyond; alpha_ (and config_.alpha, the penalty trained with) is the weight used."""
    X, T, Y, _ = make_confounded(n=300)
    est = CFR(**{**TINY, "alpha": 0.3, "alpha_units": 60}).fit(Y, T, X=X)
    n_train = est.fitted_.members.train_rows.shape[1]
    assert n_train > 60
    assert est.alpha_ == est.config_.alpha == pytest.approx(0.3 * 60 / n_train)
    assert est.alpha == 0.3 and est.alpha_units == 60  # the parameters are left as given
    assert CFR(**{**TINY, "alpha": 0.3}).fit(Y, T, X=X).alpha_ == 0.3  # n_train < 1200
    with pytest.raises(TypeError, match="TARNet has no alpha_units"):
        TARNet(alpha_units=100)
