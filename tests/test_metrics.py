"""Metrics against values computed by hand (see the comments)."""

import numpy as np
import pandas as pd
import pytest

from dowhy_cfr.metrics import (
    ate_error,
    att_error,
    jobs_att,
    nn_ite,
    nn_pehe,
    policy_curve,
    policy_risk,
    policy_value,
    sqrt_pehe,
)


def test_sqrt_pehe_and_ate_error():
    # differences 1, 0, 2 -> mean square 5/3
    assert sqrt_pehe([1, 2, 3], [2, 2, 5]) == pytest.approx(np.sqrt(5 / 3))
    # means 2 and 3
    assert ate_error([1, 2, 3], [2, 2, 5]) == pytest.approx(1.0)
    assert ate_error([1, 2, 3], [0, 2, 1]) == pytest.approx(1.0)  # absolute value
    assert sqrt_pehe(np.ones((3, 1)), np.ones(3)) == 0.0  # column vectors accepted
    with pytest.raises(ValueError, match="entries"):
        sqrt_pehe([1, 2], [1, 2, 3])


# Jobs-like toy data: units 0-3 randomized (e=1), units 4-5 observational controls.
Y = np.array([1, 0, 1, 0, 0, 1.0])
T = np.array([1, 1, 0, 0, 0, 0])
E = np.array([1, 1, 1, 1, 0, 0])


def test_jobs_att_uses_randomized_units_only():
    # mean(y | t=1, e=1) = (1 + 0) / 2; mean(y | t=0, e=1) = (1 + 0) / 2
    assert jobs_att(Y, T, E) == pytest.approx(0.0)
    y2 = np.array([1, 1, 0, 1, 0, 0.0])  # 1.0 - 0.5
    assert jobs_att(y2, T, E) == pytest.approx(0.5)
    # estimated ATT = mean of tau_hat over the treated = (0.2 + 0.4) / 2 = 0.3
    tau = np.array([0.2, 0.4, 9, 9, 9, 9])
    assert att_error(tau, y2, T, E) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="randomized"):
        jobs_att(Y, T, np.array([1, 1, 0, 0, 0, 0]))


def test_policy_risk_by_hand():
    # randomized units: pi = [1, 0, 1, 0]; p(pi=1) = 0.5
    # mean(y | pi=1, t=1) = y0 = 1;  mean(y | pi=0, t=0) = y3 = 0  -> value 0.5, risk 0.5
    tau = np.array([1, -1, 1, -1, 5, 5.0])
    assert policy_value(tau, Y, T, E) == pytest.approx(0.5)
    assert policy_risk(tau, Y, T, E) == pytest.approx(0.5)
    # pi = [1, 0, 0, 1]: mean(y | pi=1, t=1) = y0 = 1; mean(y | pi=0, t=0) = y2 = 1 -> risk 0
    tau2 = np.array([1, -1, -1, 1, -5, -5.0])
    assert policy_risk(tau2, Y, T, E) == pytest.approx(0.0)
    # the observational units (4, 5) do not matter
    assert policy_risk(np.array([1, -1, -1, 1, 5, 5.0]), Y, T, E) == pytest.approx(0.0)
    # threshold: tau > 0.5 on [0.4, 0.6, 0.4, 0.6] -> pi = [0, 1, 0, 1]
    # mean(y | pi=1, t=1) = y1 = 0; mean(y | pi=0, t=0) = y2 = 1 -> value 0.5
    assert policy_risk([0.4, 0.6, 0.4, 0.6], Y[:4], T[:4], threshold=0.5) == pytest.approx(0.5)


def test_policy_risk_empty_group_counts_as_zero():
    # pi treats units 0, 1 which are both controls: no (pi=1, t=1) unit and no (pi=0, t=0) unit
    y = np.array([1, 1, 1, 1.0])
    t = np.array([0, 0, 1, 1])
    assert policy_risk([1, 1, -1, -1], y, t) == pytest.approx(1.0)


def test_policy_curve_by_hand():
    y = np.array([1, 0, 1, 0.0])
    t = np.array([1, 1, 0, 0])
    tau = np.array([3, 2, 1, 0.0])
    curve = policy_curve(tau, y, t, n_points=5)
    assert isinstance(curve, pd.DataFrame)
    # n treated 0..4 (largest effects first):
    #  0: value = mean(y|t=0) = 0.5                         -> risk 0.5
    #  1: 0.25 * 1 + 0.75 * mean(y2, y3) = 0.625             -> risk 0.375
    #  2: 0.5 * mean(y0, y1) + 0.5 * mean(y2, y3) = 0.5      -> risk 0.5
    #  3: 0.75 * 0.5 + 0.25 * y3 = 0.375                     -> risk 0.625
    #  4: mean(y|t=1) = 0.5                                  -> risk 0.5
    np.testing.assert_allclose(curve["share_treated"], [0, 0.25, 0.5, 0.75, 1])
    np.testing.assert_allclose(curve["policy_risk"], [0.5, 0.375, 0.5, 0.625, 0.5])
    np.testing.assert_allclose(curve["threshold"], [np.inf, 3, 2, 1, 0])
    # the endpoint at share 0 and 1 agree with policy_risk at extreme thresholds
    assert curve["policy_risk"].iloc[0] == pytest.approx(policy_risk(tau, y, t, threshold=10))
    assert curve["policy_risk"].iloc[-1] == pytest.approx(policy_risk(tau, y, t, threshold=-10))


def test_policy_curve_restricts_to_randomized_units():
    curve = policy_curve(np.array([1, -1, 1, -1, 5, 5.0]), Y, T, E, n_points=3)
    np.testing.assert_allclose(curve["share_treated"], [0, 0.5, 1])


def test_nn_ite_and_nn_pehe_by_hand():
    x = np.array([[0.0], [1.0], [10.0], [11.0]])
    t = np.array([1, 0, 1, 0])
    y = np.array([5.0, 1.0, 20.0, 4.0])
    # unit 0 (treated): nearest control is unit 1 -> 5 - 1 = 4
    # unit 1 (control): nearest treated is unit 0 -> 5 - 1 = 4
    # unit 2 (treated): nearest control is unit 3 -> 20 - 4 = 16
    # unit 3 (control): nearest treated is unit 2 -> 20 - 4 = 16
    np.testing.assert_allclose(nn_ite(x, y, t), [4, 4, 16, 16])
    assert nn_pehe([4, 4, 16, 16], x, y, t) == pytest.approx(0.0)
    # differences 1, 0, 0, 2 -> sqrt(5 / 4)
    assert nn_pehe([5, 4, 16, 14], x, y, t) == pytest.approx(np.sqrt(5 / 4))
    # neighbours from a reference set: x = 0.4 (treated, y = 3) -> nearest control x = 1, y = 1
    np.testing.assert_allclose(nn_ite([[0.4]], [3.0], [1], x_ref=x, y_ref=y, t_ref=t), [2.0])
    with pytest.raises(ValueError, match="all of"):
        nn_ite(x, y, t, x_ref=x)
    with pytest.raises(ValueError, match="both arms"):
        nn_ite(x, y, np.ones(4))


def test_binary_inputs_are_checked():
    with pytest.raises(ValueError, match="only 0 and 1"):
        policy_risk([1, 2], [1, 0], [0, 2])
