"""The representation-balance refuter (dowhy_cfr.refuters).

Data: confounded (W0, W1 drive T and Y; X0 modifies the effect), generated here, n = 600:
    T ~ Bernoulli(sigmoid(1.2 W0 + 0.5 W1)), Y = 1.5 W0 + W1 + 0.5 X0 + T (1 + W0 + 0.5 X0) + N(0, .25)

Measured with the TINY networks on data seeds 0-4 (tests use seed 0), 19 permutations:
    TARNet: Wasserstein reduction 0.49-0.58, permutation p = 0.05 (the minimum) -> fails;
    CFR-Wass with alpha = 5: reduction 0.925-0.998 -> passes.
    (CFR-MMD with alpha = 5 reached only 0.87-0.89: too close to the 0.8 threshold for a test.)
"""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from dowhy import CausalModel
from dowhy.causal_refuter import CausalRefutation
from dowhy.causal_refuters import refute_estimate, refute_random_common_cause
from scipy.spatial.distance import pdist

from dowhy_cfr import RepresentationBalance, refute_representation_balance
from dowhy_cfr.core.ipm import imbalance, mmd2_lin, mmd2_rbf, wasserstein
from dowhy_cfr.refuters import RepresentationBalanceResult, representation_balance

TINY = dict(n_rep_layers=2, rep_dim=16, n_head_layers=1, head_dim=16, n_iter=200, batch_size=64,
            learning_rate=1e-2, ipm="mmd2_lin", verbose=0, random_state=0, n_ensemble=1)
COLS = ["W0", "W1", "X0"]
IPMS = ("mmd2_lin", "mmd2_rbf", "wass")
N_PERM = 19  # smallest count whose p-value can reach 0.05


# torch runs single-threaded in tests: see conftest.py


def make_data(n=600, seed=0, confounding=1.2):
    rng = np.random.default_rng(seed)
    w0, w1, x0 = rng.normal(size=(3, n))
    t = rng.binomial(1, 1.0 / (1.0 + np.exp(-confounding * (w0 + w1 / 2.4))))
    y = 1.5 * w0 + w1 + 0.5 * x0 + t * (1.0 + w0 + 0.5 * x0) + rng.normal(scale=0.5, size=n)
    return pd.DataFrame({"W0": w0, "W1": w1, "X0": x0, "T": t.astype(int), "Y": y})


@pytest.fixture(scope="module")
def setup():
    df = make_data()
    model = CausalModel(data=df, treatment="T", outcome="Y", common_causes=["W0", "W1"],
                        effect_modifiers=["X0"])
    estimand = model.identify_effect(proceed_when_unidentifiable=True)
    return df, model, estimand


@pytest.fixture(scope="module")
def tarnet(setup):
    df, model, estimand = setup
    est = model.estimate_effect(estimand, method_name="backdoor.tarnet",
                                method_params={"init_params": TINY})
    res = model.refute_estimate(estimand, est, method_name="representation_balance",
                                n_permutations=N_PERM, random_state=0)
    return est, res


@pytest.fixture(scope="module")
def cfr_strong(setup):
    df, model, estimand = setup
    est = model.estimate_effect(estimand, method_name="backdoor.cfr",
                                method_params={"init_params": {**TINY, "alpha": 5.0,
                                                               "ipm": "wass"}})
    res = model.refute_estimate(estimand, est, method_name="representation_balance",
                                n_permutations=N_PERM, random_state=0)
    return est, res


def _median_sigma(z):
    med = float(np.median(pdist(z)))
    return med if med > 0 else 1.0


def _direct(est, df):
    """The three spaces and the IPMs computed directly with the core functions, on the
    validation units of member 0 (the refuter's default units)."""
    cfr = est.estimator.estimator
    df = df.iloc[np.unique(cfr.fitted_.members.val_rows[0])]
    raw = df[COLS].to_numpy(float)
    spaces = {
        "input_space": (raw - raw.mean(0)) / raw.std(0),
        "before_training": cfr.representation_at_init(df[COLS]),
        "after_training": cfr.transform(df[COLS]),
    }
    t = torch.as_tensor(df["T"].to_numpy() == 1)
    cfg = cfr.config_
    out, sigmas = {}, {}
    for space, z in spaces.items():
        zt = torch.as_tensor(np.asarray(z, dtype=np.float64))
        sigmas[space] = _median_sigma(np.asarray(z, dtype=np.float64))
        out[space] = {
            "mmd2_lin": float(mmd2_lin(zt, t)),
            "mmd2_rbf": float(mmd2_rbf(zt, t, sigma=sigmas[space])),
            "wass": float(wasserstein(zt, t, lam=cfg.wass_lambda, n_iter=cfg.wass_iterations)),
        }
    return spaces, out, sigmas, t


# ----------------------------------------------------------------------------- numbers
@pytest.mark.parametrize("which", ["tarnet", "cfr_strong"])
def test_numbers_equal_the_core_ipms(setup, which, request):
    df, model, estimand = setup
    est, res = request.getfixturevalue(which)
    spaces, direct, sigmas, t = _direct(est, df)
    frame = res.to_frame()
    assert list(frame.index) == list(IPMS)
    assert list(frame.columns) == ["input_space", "before_training", "after_training",
                                   "reduction", "p_value"]
    for space in direct:
        assert res.rbf_sigma[space] == pytest.approx(sigmas[space], rel=1e-9)
        for ipm in IPMS:
            assert frame.loc[ipm, space] == pytest.approx(direct[space][ipm], rel=1e-9, abs=1e-12)
            assert getattr(res, space)[ipm] == frame.loc[ipm, space]
    for ipm in IPMS:
        before, after = direct["before_training"][ipm], direct["after_training"][ipm]
        assert res.reduction[ipm] == pytest.approx(1 - after / before, rel=1e-9)
    # the RBF bandwidths differ per space (median heuristic), e.g. 3 standardized covariates
    # vs. a representation on the unit sphere
    assert res.rbf_sigma["input_space"] > 1.0 > res.rbf_sigma["after_training"]


def test_permutation_p_values_follow_their_definition(setup, tarnet):
    df, model, estimand = setup
    est, res = tarnet
    df = df.iloc[np.unique(est.estimator.estimator.fitted_.members.val_rows[0])]
    z = torch.as_tensor(est.estimator.estimator.transform(df[COLS]))
    t = df["T"].to_numpy() == 1
    rng = np.random.default_rng(0)  # random_state=0
    perms = [rng.permutation(t) for _ in range(N_PERM)]
    cfg = est.estimator.estimator.config_
    sigma = res.rbf_sigma["after_training"]
    for ipm in IPMS:
        null = np.array([float(imbalance(z, torch.as_tensor(p), ipm=ipm, rbf_sigma=sigma,
                                         wass_lambda=cfg.wass_lambda,
                                         wass_iterations=cfg.wass_iterations)) for p in perms])
        np.testing.assert_allclose(res.null_distribution[ipm], null, rtol=1e-8, atol=1e-14)
        observed = res.after_training[ipm]
        assert res.p_value[ipm] == pytest.approx((1 + np.sum(null >= observed)) / (N_PERM + 1))
    # seeded: the same seed gives the same p-values, the table is deterministic
    again = representation_balance(est, setup[0], n_permutations=N_PERM, random_state=0)
    pd.testing.assert_frame_equal(again.to_frame(), res.to_frame())


# ----------------------------------------------------------------------------- rule
def test_tarnet_fails_and_strong_cfr_passes(tarnet, cfr_strong):
    _, t_res = tarnet
    _, c_res = cfr_strong
    assert t_res.estimator_name == "TARNet" and t_res.alpha == 0.0
    assert c_res.estimator_name == "CFR" and c_res.alpha == 5.0
    # measured on validation units, data seeds 0-2: TARNet reduction 0.48-0.54 with p = 0.05;
    # CFR-Wass(alpha=5) reduction 0.92-1.0
    assert t_res.reduction["wass"] < 0.7
    assert t_res.p_value["wass"] <= 0.05
    assert not t_res.passed
    assert c_res.reduction["wass"] > 0.85
    assert c_res.passed
    assert c_res.after_training["wass"] < t_res.after_training["wass"]
    for r in (t_res, c_res):
        assert r.passed == ((r.p_value["wass"] > 0.05) or (r.reduction["wass"] >= 0.8))
        assert r.refutation_result["passed"] is r.passed
        assert r.refutation_result["p_value"] == r.p_value["wass"]


def test_rule_thresholds(setup, tarnet):
    df, model, estimand = setup
    est, res = tarnet
    red = res.reduction["wass"]
    # the reduction clause alone: just below / above the measured reduction
    below = representation_balance(est, df, n_permutations=0, min_reduction=red - 0.01)
    above = representation_balance(est, df, n_permutations=0, min_reduction=red + 0.01)
    assert math.isnan(below.p_value["wass"]) and below.passed
    assert not above.passed
    # the significance clause alone: with 19 permutations p >= 0.05 > 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lenient = representation_balance(est, df, n_permutations=N_PERM, significance_level=0.01,
                                         min_reduction=1.0)
    assert lenient.p_value["wass"] > 0.01 and lenient.passed
    with pytest.warns(UserWarning, match="can never reject"):
        representation_balance(est, df, n_permutations=5, significance_level=0.05)


# ----------------------------------------------------------------------------- result object
def test_result_prints_and_is_a_dowhy_refutation(tarnet):
    _, res = tarnet
    assert isinstance(res, RepresentationBalanceResult)
    assert isinstance(res, CausalRefutation)
    text = str(res)
    for word in ("Representation balance", "input_space", "before_training", "after_training",
                 "reduction", "p_value", "mmd2_lin", "mmd2_rbf", "wass", "Rule:", "FAILED",
                 "different scales"):
        assert word in text, word
    assert res.new_effect == res.estimated_effect  # the check does not re-estimate
    assert isinstance(res.refuter, RepresentationBalance)
    assert res.n_units == 180 and res.n_treated + res.n_control == 180  # validation: 30% of 600
    assert res.units == "validation" and "not trained on" in text and "Extra" in text
    assert res.n_permutations == N_PERM and res.null_distribution["wass"].shape == (N_PERM,)
    f = res.to_frame()
    f.iloc[0, 0] = -1.0  # a copy: the result is not changed
    assert res.to_frame().iloc[0, 0] != -1.0


def test_fixed_bandwidth_and_subsample(setup, tarnet):
    df, model, estimand = setup
    est, _ = tarnet
    res = representation_balance(est, df, n_permutations=0, rbf_sigma=0.7, units="all")
    assert set(res.rbf_sigma.values()) == {0.7}
    z = torch.as_tensor(est.estimator.estimator.transform(df[COLS]))
    t = torch.as_tensor(df["T"].to_numpy() == 1)
    assert res.after_training["mmd2_rbf"] == pytest.approx(float(mmd2_rbf(z, t, sigma=0.7)),
                                                          rel=1e-9)
    sub = representation_balance(est, df, n_permutations=0, max_units=200, random_state=3,
                                 units="all")
    assert sub.n_units == 200 and sub.subsampled
    share = df["T"].mean()
    assert abs(sub.n_treated / 200 - share) < 0.01
    assert "subsample" in str(sub)


def test_units_the_network_did_not_train_on(setup, tarnet):
    """Default: the validation units; the training units' figure is a labelled extra."""
    df, model, estimand = setup
    est, res = tarnet
    members = est.estimator.estimator.fitted_.members
    assert res.n_units == len(np.unique(members.val_rows[0]))
    on_train = representation_balance(est, df, n_permutations=0, units="training")
    assert on_train.units == "training" and on_train.training_units is None
    assert on_train.n_units == len(np.unique(members.train_rows[0]))
    extra = res.training_units
    assert extra["n_units"] == on_train.n_units
    assert extra["after_training"] == pytest.approx(on_train.after_training["wass"], rel=1e-9)
    assert extra["before_training"] == pytest.approx(on_train.before_training["wass"], rel=1e-9)
    assert 0 < extra["p_value"] <= 1
    # the main permutations do not depend on the extra: the same as without it
    whole = representation_balance(est, df, n_permutations=N_PERM, units="all")
    assert whole.n_units == len(df) and whole.training_units is None
    with pytest.raises(ValueError, match="units"):
        representation_balance(est, df, units="test")
    with pytest.raises(ValueError, match="fitted on"):
        representation_balance(est, df.iloc[:100], n_permutations=0)


# ----------------------------------------------------------------------------- DoWhy APIs
def test_functional_refute_estimate(setup, tarnet):
    df, model, estimand = setup
    est, res = tarnet
    out = refute_estimate(df, estimand, est,
                          refuters=[refute_representation_balance, refute_random_common_cause],
                          n_permutations=N_PERM, random_state=0, num_simulations=2)
    assert len(out) == 2
    assert isinstance(out[0], RepresentationBalanceResult)
    pd.testing.assert_frame_equal(out[0].to_frame(), res.to_frame())
    assert isinstance(out[1], CausalRefutation) and np.isfinite(out[1].new_effect)


def test_errors_name_the_problem(setup, tarnet):
    df, model, estimand = setup
    est, _ = tarnet
    lr = model.estimate_effect(estimand, method_name="backdoor.linear_regression")
    with pytest.raises(TypeError, match="CFR/TARNet"):
        model.refute_estimate(estimand, lr, method_name="representation_balance")
    with pytest.raises(TypeError, match="CFR/TARNet"):
        representation_balance(lr, df)
    with pytest.raises(ValueError, match="estimate"):
        representation_balance(None, df)
    with pytest.raises(TypeError, match="n_perm"):
        model.refute_estimate(estimand, est, method_name="representation_balance", n_perm=5)
    with pytest.raises(ValueError, match="unknown ipms"):
        representation_balance(est, df, ipms=("wass", "kl"))
    with pytest.raises(ValueError, match="n_permutations"):
        representation_balance(est, df, n_permutations=-1)
    with pytest.raises(ValueError, match="member"):
        representation_balance(est, df, member=3)
    with pytest.raises(ValueError, match="rbf_sigma"):
        representation_balance(est, df, rbf_sigma="mean")


def test_cfr_inside_dowhys_own_econml_wrapper(setup):
    """A CFR handed to DoWhy's EconML wrapper (effect modifiers as X, common causes as W)."""
    import copy

    from dowhy.causal_estimator import estimate_effect
    from dowhy.causal_estimators.econml import Econml

    from dowhy_cfr import CFR

    df, model, estimand = setup
    e = copy.deepcopy(estimand)
    e.set_identifier_method("backdoor")
    est = estimate_effect(df, "T", "Y", "backdoor", Econml(e, econml_estimator=CFR(**TINY)),
                          effect_modifiers=["X0"], method_params={})
    res = representation_balance(est, df, n_permutations=0, units="all")
    cfr = est.estimator.estimator
    w_cols = est.estimator._observed_common_causes_names  # DoWhy's (set-derived) order
    assert sorted(w_cols) == ["W0", "W1"]
    z = torch.as_tensor(cfr.transform(df[["X0"]], df[w_cols]))
    t = torch.as_tensor(df["T"].to_numpy() == 1)
    assert res.after_training["mmd2_lin"] == pytest.approx(float(mmd2_lin(z, t)), rel=1e-9)
    assert res.n_units == len(df)


def test_multi_valued_treatment_uses_the_training_definition():
    """Three arms: each IPM is the mean over arms a >= 1 of IPM(arm a, control)."""
    rng = np.random.default_rng(0)
    df = make_data()
    df["T"] = np.where(df["T"] == 1, 1 + (rng.random(len(df)) < 0.5), 0)  # arms 0, 1, 2
    model = CausalModel(data=df, treatment="T", outcome="Y", common_causes=["W0", "W1"],
                        effect_modifiers=["X0"])
    estimand = model.identify_effect(proceed_when_unidentifiable=True)
    est = model.estimate_effect(estimand, method_name="backdoor.cfr", treatment_value=2,
                                method_params={"init_params": TINY})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = representation_balance(est, df, n_permutations=3, random_state=0, units="all")
    cfr = est.estimator.estimator
    z = torch.as_tensor(cfr.transform(df[COLS]))
    arms = torch.as_tensor(df["T"].to_numpy().copy())
    for ipm in IPMS:
        kw = dict(ipm=ipm, rbf_sigma=res.rbf_sigma["after_training"],
                  wass_lambda=cfr.config_.wass_lambda, wass_iterations=cfr.config_.wass_iterations)
        pairs = [float(imbalance(z, arms == a, (arms == a) | (arms == 0), **kw)) for a in (1, 2)]
        assert res.after_training[ipm] == pytest.approx(np.mean(pairs), rel=1e-9)
        perm_rng = np.random.default_rng(0)
        null = []
        for _ in range(3):
            pa = torch.as_tensor(perm_rng.permutation(df["T"].to_numpy()))
            null.append(np.mean([float(imbalance(z, pa == a, (pa == a) | (pa == 0), **kw))
                                 for a in (1, 2)]))
        np.testing.assert_allclose(res.null_distribution[ipm], null, rtol=1e-9)
    assert len(res.arm_sizes) == 3 and sum(res.arm_sizes.values()) == len(df)
    assert "arm sizes" in str(res)
