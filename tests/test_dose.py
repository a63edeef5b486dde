"""Continuous treatments (issue 47): the dose networks of the core, the estimator's API on a
dose, its accuracy against a known design, the doubly robust average curve, bad input and
saving. Accuracy thresholds were measured with the seeds used here (see each test); each also
fails for a network trained one step (``n_iter=1``), which one test checks explicitly."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import t as student_t

from dowhy_cfr import CFR, TARNet
from dowhy_cfr.core import (CFRConfig, DoseNet, bspline_basis, dose_strata, imbalance,
                            interval_imbalance, predict_dose, predict_dose_grid, train_cfr)
from dowhy_cfr.core.config import AUTO_DOSE_DECAY, AUTO_DOSE_LEARNING_RATE
from dowhy_cfr.core.dose import interval_imbalance_blocks
from dowhy_cfr.debiased import jackknife_stderr
from helpers import TINY

GRID = np.linspace(-1.5, 1.5, 13)  # inside the 5th-95th percentiles of T (sd 1.41)


def dose_design(n=500, seed=0):
    """x ~ N(0, I_3), T = x0 + N(0, 1) (confounded by x0), Y = sin(1.5 T) + x0 + 0.5 x1 T +
    N(0, 0.3^2): mu(x, t) known, the average curve theta(t) = sin(1.5 t)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    T = X[:, 0] + rng.normal(size=n)
    Y = _mu(T, X) + rng.normal(scale=0.3, size=n)
    return X, T, Y


def _mu(t, x):
    return np.sin(1.5 * t) + x[:, 0] + 0.5 * x[:, 1] * t


def _curves_truth(x, grid=GRID):
    return np.stack([_mu(np.full(len(x), g), x) for g in grid], 1)


@pytest.fixture(scope="module")
def fitted_dose():
    """A default CFR on the dose design (about 4 s on one core)."""
    X, T, Y = dose_design()
    return CFR(random_state=0, verbose=0).fit(Y, T, X=X), (X, T, Y)


@pytest.fixture(scope="module")
def tiny_dose():
    X, T, Y = dose_design(300, seed=3)
    return CFR(**{**TINY, "n_ensemble": 3}).fit(Y, T, X=X), (X, T, Y)


# ----------------------------------------------------------------------------- core
def test_bspline_basis_is_a_partition_of_unity_with_gradients():
    s = torch.linspace(0, 1, 41, requires_grad=True)
    basis = bspline_basis(s, degree=2, n_knots=2)
    assert basis.shape == (41, 5)
    assert torch.allclose(basis.sum(-1), torch.ones(41), atol=1e-6)
    assert (basis >= 0).all() and float(basis[-1, -1].detach()) == pytest.approx(1)
    (basis[:, 2] * torch.arange(41.0)).sum().backward()  # piecewise quadratics: a gradient
    assert s.grad.abs().sum() > 0
    assert bspline_basis(torch.tensor([0.3]), degree=0, n_knots=3).tolist() == [[0, 1, 0, 0]]


def test_dose_strata_have_equal_counts_despite_ties():
    dose = np.r_[np.zeros(50), np.arange(50.0)]  # half the units at one dose
    strata = dose_strata(dose, 4)
    assert np.bincount(strata).tolist() == [25, 25, 25, 25]
    assert (np.diff(strata[np.argsort(dose, kind="stable")]) >= 0).all()


def test_interval_imbalance_of_blocks_matches_ragged_form():
    """The batched, stratum-blocked interval IPM (training) equals the masked one
    (validation) on the same rows, for the Wasserstein and the MMD."""
    g = torch.Generator().manual_seed(0)
    strata = torch.arange(4).repeat_interleave(10).expand(3, -1)
    phi = torch.randn(3, 40, 5, generator=g, dtype=torch.float64)
    phi[..., 0] += strata  # representations that differ between strata
    for ipm in ("wass", "mmd2_lin", "mmd2_rbf"):
        kw = dict(CFRConfig().ipm_kwargs(), ipm=ipm, rbf_sigma=1.0)
        blocks = interval_imbalance_blocks(phi.split(10, 1), kw)
        ragged = interval_imbalance(phi, strata, 4, kw)
        assert torch.allclose(blocks, ragged, rtol=1e-6), ipm
        assert (blocks > 0).all()
    # representations that do not depend on the stratum have (almost) no imbalance
    same = phi[:, :10].repeat(1, 4, 1)
    kw = dict(CFRConfig().ipm_kwargs(), ipm="mmd2_lin")
    assert interval_imbalance_blocks(same.split(10, 1), kw).abs().max() < 1e-12
    # two strata: the binary IPM between them (Sinkhorn's 10 iterations are not symmetric in
    # the two groups: the mean of both orders)
    kw = dict(CFRConfig().ipm_kwargs(), ipm="wass")
    two = interval_imbalance_blocks(phi.split(20, 1), kw)
    halves = (torch.arange(40) >= 20).expand(3, -1)
    binary = (imbalance(phi, halves, **kw) + imbalance(phi, ~halves, **kw)) / 2
    assert torch.allclose(two, binary, rtol=1e-6)


def test_dose_networks_in_a_stack_train_as_they_would_alone():
    x = torch.randn(200, 4, generator=torch.Generator().manual_seed(1))
    dose = torch.sigmoid(x[:, 0])
    y = torch.sin(3 * dose) + x[:, 1]
    strata = torch.as_tensor(dose_strata(dose.numpy(), 4))
    perm = torch.randperm(200, generator=torch.Generator().manual_seed(2))
    tr, va = perm[:140], perm[140:]
    cfg = CFRConfig(n_rep_layers=1, rep_dim=8, n_head_layers=1, head_dim=8, batch_size=40,
                    n_iter=40, eval_every=20, patience=None)
    kw = dict(config=cfg, n_arms=4, dose=dose)
    both = train_cfr(x, strata, y, train_idx=torch.stack([tr, tr]), val_idx=torch.stack([va, va]),
                     seeds=[3, 4], **kw)
    alone = train_cfr(x, strata, y, train_idx=tr[None], val_idx=va[None], seeds=[4], **kw)
    assert isinstance(both.net, DoseNet)
    out_both = predict_dose(both.net, x, dose)
    assert torch.allclose(out_both[1], predict_dose(alone.net, x, dose)[0], atol=1e-4)
    grid = predict_dose_grid(both.net, x[:7], torch.tensor([0.2, 0.7]))
    assert grid.shape == (2, 7, 2)
    assert torch.allclose(grid[:, :, 0], predict_dose(both.net, x[:7], torch.full((7,), 0.2)))
    # doses on each model's own scale: model k at its row of s / of the grid
    own = torch.stack([dose, dose ** 2])
    assert torch.allclose(predict_dose(both.net, x, own)[1],
                          predict_dose(both.net, x, dose ** 2)[1])
    grids = predict_dose_grid(both.net, x[:7], torch.tensor([[0.2, 0.7], [0.1, 0.9]]))
    assert torch.allclose(grids[1],
                          predict_dose_grid(both.net, x[:7], torch.tensor([0.1, 0.9]))[1])
    assert torch.allclose(grids[0], grid[0])


# ----------------------------------------------------------------------------- the estimator
def test_a_float_treatment_with_many_values_is_continuous_and_few_values_categorical():
    X, T, Y = dose_design(300, seed=1)
    est = CFR(**TINY).fit(Y, T, X=X)
    assert est.fitted_.continuous and est._d_t == ()
    binary = CFR(**TINY).fit(Y, (T > 0).astype(float), X=X)
    assert not binary.fitted_.continuous and binary._d_t == (1,)


def test_the_curves_of_a_trained_network_are_accurate(fitted_dose):
    """Measured (seed 0): individual curves' MISE 0.011 (0.018 before the fast start), the
    network's average curve's squared error 0.021 (0.020); after one step 1.12 and 0.62
    (test_one_step_fails_the_accuracy_thresholds)."""
    est, (X, T, Y) = fitted_dose
    config = est.fitted_.config  # a dose's fast start: 4e-3 by 0.9, no warm-up
    assert (config.learning_rate, config.lr_decay, config.lr_warmup) == (
        AUTO_DOSE_LEARNING_RATE, AUTO_DOSE_DECAY, 0)
    X_new = dose_design(200, seed=1)[0]
    curves = est.dose_response(X_new, t_grid=GRID)
    assert curves.estimate.shape == (200, len(GRID)) and curves.kind == "individual"
    assert np.mean((curves.estimate - _curves_truth(X_new)) ** 2) < 0.05
    assert np.mean((est.fitted_.dose.plugin(GRID) - np.sin(1.5 * GRID)) ** 2) < 0.06


def test_one_step_fails_the_accuracy_thresholds_and_the_dr_curve_does_not():
    """The thresholds above detect an untrained network (and the slopes' below: root mean
    square error 0.46, no variation with x1). The doubly robust average curve (measured 0.023
    after one step, 0.021 trained) is carried by the generalised propensity when the outcome
    model is poor; the network's own (plug-in) average is not (0.62)."""
    X, T, Y = dose_design()
    est = CFR(n_iter=1, random_state=0, verbose=0).fit(Y, T, X=X)
    X_new = dose_design(200, seed=1)[0]
    curves = est.dose_response(X_new, t_grid=GRID).estimate
    assert np.mean((curves - _curves_truth(X_new)) ** 2) > 0.3
    assert np.mean((est.fitted_.dose.plugin(GRID) - np.sin(1.5 * GRID)) ** 2) > 0.3
    dr = est.dose_response(t_grid=GRID)
    assert np.mean((dr.estimate - np.sin(1.5 * GRID)) ** 2) < 0.06
    slope = est.marginal_effect(0.0, X_new)
    assert np.sqrt(np.mean((slope - 1.5 - 0.5 * X_new[:, 1]) ** 2)) > 0.35


def test_effects_are_differences_of_the_curves(fitted_dose):
    est, (X, T, Y) = fitted_dose
    curves = est.dose_response(X[:4], t_grid=[-1.0, 0.5]).estimate
    np.testing.assert_allclose(est.effect(X[:4], T0=-1.0, T1=0.5), curves[:, 1] - curves[:, 0],
                               atol=1e-10)
    per_row = est.effect(X[:4], T0=np.full(4, -1.0), T1=np.array([0.5, 0.5, 0.5, 0.5]))
    np.testing.assert_allclose(per_row, curves[:, 1] - curves[:, 0], atol=1e-10)
    # the slope of each unit's curve at t = 0 is 1.5 + 0.5 x1: measured root mean square error
    # 0.22 on new units, regression coefficient on x1 0.44 (one step: 0.46 and 0.00)
    X_new = dose_design(200, seed=1)[0]
    slope = est.marginal_effect(0.0, X_new)
    assert slope.shape == (200,)
    assert np.sqrt(np.mean((slope - 1.5 - 0.5 * X_new[:, 1]) ** 2)) < 0.35
    assert 0.3 < np.polyfit(X_new[:, 1], slope, 1)[0] < 0.7


def test_the_units_curves_average_to_the_doubly_robust_curve(fitted_dose):
    """Every unit's curve carries the doubly robust correction of the average curve, so the
    mean effect over the fitted units is the doubly robust contrast (ate with X=None)."""
    est, (X, T, Y) = fitted_dose
    contrast = est.ate(T0=-1.0, T1=1.0)
    # up to the linear interpolation of the network's mean curve on the fit's dose grid
    assert abs(np.mean(est.effect(X, T0=-1.0, T1=1.0)) - contrast) < 0.02
    dr = est.dose_response(t_grid=[-1.0, 1.0])
    assert abs(dr.estimate[1] - dr.estimate[0] - contrast) < 1e-10
    assert abs(contrast - (np.sin(1.5) - np.sin(-1.5))) < 0.4


def test_the_contrast_interval_adds_the_members_jackknife_to_the_influence_function(
        fitted_dose):
    est, _ = fitted_dose
    stage = est.fitted_.dose
    res = est.average_effect(T0=-1.0, T1=1.0)
    lo, hi = est.ate_interval(T0=-1.0, T1=1.0)
    assert lo < res.estimate < hi
    assert 4 < res.df < np.inf  # Satterthwaite: at least the jackknife's K - 1 = 4
    np.testing.assert_allclose(hi - lo, 2 * student_t.ppf(0.975, res.df) * res.stderr,
                               rtol=1e-5)
    assert res.interval(0.05) == pytest.approx((lo, hi))
    influence = stage.adrf([1.0, -1.0]).phi
    if_se = np.sqrt(np.sum((influence[:, 0] - influence[:, 1]) ** 2)) / len(influence)
    members = stage.member_points([1.0, -1.0])
    jk = jackknife_stderr(members[:, 0] - members[:, 1])
    np.testing.assert_allclose(res.stderr, np.hypot(if_se, jk), rtol=1e-10)
    assert jk > 0 and if_se > 0


def test_dose_response_band_and_frame(fitted_dose):
    est, (X, T, Y) = fitted_dose
    avg = est.dose_response()
    assert avg.kind == "average" and len(avg.t) == 50
    np.testing.assert_allclose(avg.t[[0, -1]], np.quantile(T, [0.05, 0.95]))
    assert (avg.lower < avg.estimate).all() and (avg.estimate < avg.upper).all()
    assert avg.bandwidth > 0 and "doubly robust" in avg.method
    frame = est.dose_response(X[:3], t_grid=GRID).to_frame()
    assert list(frame.columns) == ["unit", "dose", "estimate", "lower", "upper", "stderr"]
    assert len(frame) == 3 * len(GRID) and (frame["upper"] > frame["lower"]).all()
    lo, hi = est.effect_interval(X[:5], T0=-1.0, T1=1.0)
    eff = est.effect(X[:5], T0=-1.0, T1=1.0)
    assert ((lo < eff) & (eff < hi)).all()


# ----------------------------------------------------------------------------- bad input
def test_few_values_passed_as_continuous_name_the_categorical_option():
    X, T, Y = dose_design(200)
    with pytest.raises(ValueError, match="treatment='categorical'"):
        CFR(**TINY, treatment="continuous").fit(Y, np.round(T).clip(-1, 1), X=X)
    with pytest.raises(TypeError, match="numeric"):
        CFR(**TINY, treatment="continuous").fit(Y, np.array(["a", "b"] * 100, dtype=object), X=X)
    with pytest.raises(ValueError, match="treatment='continuous'"):
        CFR(**TINY, treatment="categorical").fit(Y, T, X=X)
    with pytest.raises(ValueError, match="treatment='bogus' is invalid"):
        CFR(**TINY, treatment="bogus").fit(Y, T, X=X)


def test_doses_outside_the_training_range_are_refused(tiny_dose):
    est, (X, T, Y) = tiny_dose
    too_high = T.max() + 1.0
    for call in (lambda: est.effect(X[:2], T0=0.0, T1=too_high),
                 lambda: est.marginal_effect(too_high, X[:2]),
                 lambda: est.dose_response(t_grid=[0.0, too_high]),
                 lambda: est.ate(T0=0.0, T1=too_high)):
        with pytest.raises(ValueError, match="outside the range of the training doses"):
            call()
    with pytest.raises(ValueError, match="single doses"):
        est.ate(T0=np.zeros(2), T1=np.ones(2))


def test_constant_effect_methods_name_the_dose_methods(tiny_dose):
    est, (X, T, Y) = tiny_dose
    for call in (lambda: est.const_marginal_effect(X[:2]), lambda: est.const_marginal_ate(X),
                 lambda: est.const_marginal_effect_interval(X[:2])):
        with pytest.raises(NotImplementedError, match="dose_response"):
            call()
    with pytest.raises(ValueError, match="'att'/'atc'"):
        est.average_effect("att", T0=0.0, T1=1.0)
    with pytest.raises(NotImplementedError, match="inference='bootstrap' is not available"):
        CFR(**TINY).fit(Y, T, X=X, inference="bootstrap")


def test_inputs_are_not_modified():
    X, T, Y = dose_design(200)
    copies = X.copy(), T.copy(), Y.copy()
    est = CFR(**TINY).fit(Y, T, X=X[:, :2], W=X[:, 2:])
    est.effect(X[:, :2], T0=T, T1=np.clip(T + 0.5, T.min(), T.max()))
    for a, b in zip((X, T, Y), copies):
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- W with a dose
def _truth_given_x1(x1, grid=GRID):
    """E[mu(x, W, t) | x1] of the dose design with W = (x0, x2), independent of x1."""
    return np.stack([np.sin(1.5 * g) + 0.5 * x1 * g for g in grid], 1)


@pytest.fixture(scope="module")
def fitted_dose_w():
    """A default CFR on the dose design with X = x1 and the confounder x0 in W (about 5 s)."""
    X, T, Y = dose_design()
    return CFR(random_state=0, verbose=0).fit(Y, T, X=X[:, [1]], W=X[:, [0, 2]]), (X, T, Y)


def test_w_with_a_dose_projects_the_curves_on_x(fitted_dose_w):
    """The curves given X average the confounder in W out. Measured (seeds 0-2 of the data and
    the fit): MISE against E[mu | x1] 0.037, 0.015, 0.017; the slopes at t = 0 root mean square
    error 0.21-0.27 (0.08), coefficient on x1 0.43-0.49; a network trained one step 0.19-0.20,
    0.46-0.48 and 0.00 (test_w_with_a_dose_fails_for_a_one_step_network)."""
    est, (X, T, Y) = fitted_dose_w
    assert est.effect_model_ == "model_final" and len(est.fitted_.dose.basis) >= 1
    assert "projected on X" in est.fitted_.effect_description()
    X_new = dose_design(200, seed=1)[0][:, [1]]
    curves = est.dose_response(X_new, t_grid=GRID)
    assert curves.estimate.shape == (200, len(GRID))
    assert np.mean((curves.estimate - _truth_given_x1(X_new[:, 0])) ** 2) < 0.08
    assert np.all(np.isfinite(curves.stderr)) and np.all(curves.upper > curves.lower)
    slope = est.marginal_effect(0.0, X_new)
    assert np.sqrt(np.mean((slope - 1.5 - 0.5 * X_new[:, 0]) ** 2)) < 0.35
    assert 0.3 < np.polyfit(X_new[:, 0], slope, 1)[0] < 0.7
    # effects are differences of the curves; their mean over the fitted units is the doubly
    # robust contrast (the projection keeps the networks' mean curve, the shift is added)
    np.testing.assert_allclose(est.effect(X_new[:4], T0=-1.0, T1=0.5),
                               est.dose_response(X_new[:4], t_grid=[-1.0, 0.5]).estimate
                               @ np.array([-1.0, 1.0]), atol=1e-10)
    assert abs(np.mean(est.effect(X[:, [1]], T0=-1.0, T1=1.0))
               - est.ate(T0=-1.0, T1=1.0)) < 1e-8
    lo, hi = est.effect_interval(X_new[:4], T0=-1.0, T1=1.0)
    assert lo.shape == (4,) and np.all(hi > lo)


def test_w_with_a_dose_fails_for_a_one_step_network():
    X, T, Y = dose_design()
    est = CFR(n_iter=1, random_state=0, verbose=0).fit(Y, T, X=X[:, [1]], W=X[:, [0, 2]])
    X_new = dose_design(200, seed=1)[0][:, [1]]
    curves = est.dose_response(X_new, t_grid=GRID).estimate
    assert np.mean((curves - _truth_given_x1(X_new[:, 0])) ** 2) > 0.12
    slope = est.marginal_effect(0.0, X_new)
    assert np.sqrt(np.mean((slope - 1.5 - 0.5 * X_new[:, 0]) ** 2)) > 0.35


def test_w_with_a_dose_saves_loads_and_checks_its_blocks(tmp_path):
    X, T, Y = dose_design(300, seed=3)
    est = CFR(**{**TINY, "n_ensemble": 3}).fit(Y, T, X=X[:, :2], W=X[:, 2:])
    back = CFR.load(est.save(tmp_path / "dose_w.zip"))
    np.testing.assert_array_equal(back.effect(X[:5, :2], T0=0.0, T1=1.0),
                                  est.effect(X[:5, :2], T0=0.0, T1=1.0))
    a, b = back.dose_response(X[:5, :2], t_grid=GRID), est.dose_response(X[:5, :2], t_grid=GRID)
    np.testing.assert_array_equal(a.estimate, b.estimate)
    np.testing.assert_array_equal(a.upper, b.upper)
    with pytest.raises(ValueError, match="fitted with 2"):
        est.effect(X[:5], T0=0.0, T1=1.0)  # X and W stacked: X holds the X block only
    # X=None with W: the average curve only
    none = CFR(**{**TINY, "n_ensemble": 3}).fit(Y, T, W=X)
    assert none.fitted_.final is None
    assert np.isfinite(none.ate(T0=0.0, T1=1.0))
    with pytest.raises(ValueError, match="X was not used at fit"):
        none.dose_response(X[:5], t_grid=GRID)


def test_debias_none_gives_the_plugin_curve_and_tarnet_works():
    X, T, Y = dose_design(300, seed=2)
    est = TARNet(**{**TINY, "n_ensemble": 3}, debias=None).fit(Y, T, X=X)
    avg = est.dose_response(t_grid=GRID)
    np.testing.assert_allclose(avg.estimate, est.fitted_.dose.plugin(GRID))
    assert "plug-in" in avg.method and np.isfinite(avg.stderr).all()
    with pytest.raises(ValueError, match="debias=None"):
        est.ate_interval(T0=0.0, T1=1.0)
    assert est.fitted_.config.alpha == 0.0


def test_save_and_load_reproduce_a_dose_fit(tiny_dose, tmp_path):
    est, (X, T, Y) = tiny_dose
    path = est.save(tmp_path / "dose.zip")
    back = CFR.load(path)
    assert back.fitted_.continuous
    np.testing.assert_array_equal(back.effect(X[:5], T0=0.0, T1=1.0),
                                  est.effect(X[:5], T0=0.0, T1=1.0))
    a, b = back.dose_response(t_grid=GRID), est.dose_response(t_grid=GRID)
    np.testing.assert_array_equal(a.estimate, b.estimate)
    np.testing.assert_array_equal(a.upper, b.upper)
    assert back.ate_interval(T0=0.0, T1=1.0) == est.ate_interval(T0=0.0, T1=1.0)
    with pytest.raises(ValueError, match="outside the range"):
        back.effect(X[:2], T0=0.0, T1=T.max() + 1)


def test_fit_stacked_on_doses_equals_single_fits():
    X, T, Y = dose_design(300, seed=4)
    rng = np.random.default_rng(0)
    T2 = rng.permutation(T)
    est = CFR(**{**TINY, "n_ensemble": 2})
    members = est.fit_stacked([Y, Y], [T, T2], X=X, seeds="fit")
    alone = CFR(**{**TINY, "n_ensemble": 2}).fit(Y, T2, X=X)
    np.testing.assert_allclose(members[1].effect(X[:20], T0=0.0, T1=1.0),
                               alone.effect(X[:20], T0=0.0, T1=1.0), atol=2e-3)
    assert members[0].fitted_.continuous


def test_plot_dose_response(fitted_dose):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    est, (X, T, Y) = fitted_dose
    fig = est.dose_response(t_grid=GRID).plot(doses=T, truth=np.sin(1.5 * GRID))
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert {"95% pointwise band", "true curve", "observed doses"} <= set(labels)
    plt.close(fig)
    fig = est.dose_response(X[:3], t_grid=GRID).plot()
    assert len(fig.axes[0].lines) == 3
    plt.close(fig)
    with pytest.raises(TypeError, match="dose_response"):
        from dowhy_cfr.plotting import plot_dose_response
        plot_dose_response(np.zeros(3))


def test_chunked_fits_and_the_random_search_refuse_a_dose():
    X, T, Y = dose_design(200)
    with pytest.raises(NotImplementedError, match="fit it in memory"):
        CFR(**TINY).fit_chunks([(Y[:150], T[:150], X[:150])], validation=(Y[150:], T[150:],
                                                                           X[150:]))
    from dowhy_cfr.selection import random_search

    with pytest.raises(NotImplementedError, match="dose"):
        random_search(1, Y, T, X, train=np.arange(150), val=np.arange(150, 200))


def test_dose_benchmark_smoke(tmp_path):
    """The benchmark's command runs end to end (tiny settings: its numbers mean nothing) and
    writes its tables; the designs' truths are those of their formulas."""
    from dowhy_cfr.benchmarks import main
    from dowhy_cfr.datasets.dose import dose_outcome, simulate_dose

    data = simulate_dose("vcnet", 3)
    assert data.x.shape == (500, 6) and data.x_test.shape == (200, 6)
    np.testing.assert_allclose(data.curves_test[:, 5],
                               dose_outcome("vcnet", np.full(200, data.grid[5]), data.x_test))
    assert data.t.min() < data.grid[0] < data.grid[-1] < data.t.max()
    # the IHDP design scales the covariates in their own units to [0, 1] as the VCNet
    # authors' code does; on the standardised columns the dose piled up at 1 (median 0.99)
    ihdp = simulate_dose("ihdp", 0)
    assert ihdp.x.shape == (471, 25) and ihdp.x_test.shape == (276, 25)
    assert ihdp.x.min() >= 0 and ihdp.x.max() <= 1
    assert 0.4 < np.median(ihdp.t) < 0.8 and ihdp.grid[0] < 0.2
    assert main(["dose", "--designs", "vcnet", "--seeds", "0", "--methods",
                 "CFR,LinearDML,CFR-binary", "--tiny", "--n-iter", "5", "--no-progress",
                 "--out", str(tmp_path)]) == 0
    import pandas as pd

    raw = pd.read_csv(tmp_path / "dose_raw.csv")
    assert raw["error"].isna().all() and len(raw) == 3
    cfr = raw.set_index("method").loc["CFR"]
    scores = cfr[["adrf_mise", "ite_mise", "band_coverage", "ite_width"]].astype(float)
    assert np.isfinite(scores).all()
    assert 0 <= cfr["ite_coverage_outer"] <= 1 and 0 <= cfr["ite_coverage"] <= 1
    text = (tmp_path / "dose.md").read_text()
    assert "Cost of a continuous CFR fit" in text and "The units' curves' 95 % intervals" in text


# ----------------------------------------------------------------------------- the dose's scale
def test_dose_knots_put_tied_doses_at_their_mid_level_and_invert():
    from dowhy_cfr.treatment import DOSE_KNOTS, DoseEncoding, dose_knots

    rng = np.random.default_rng(0)
    dose = np.where(rng.random(400) < 0.4, 0.0, rng.lognormal(1, 0.8, 400))  # 40 % at 0
    t, u = map(np.asarray, dose_knots(dose))
    assert t[0] == 0.0 and t[-1] == dose.max() and u[0] == 0.0 and u[-1] == 1.0
    assert np.all(np.diff(t) > 0) and np.all(np.diff(u) > 0)
    # the deciles' doses (the tied zeros one knot), each at its units' mean rank
    assert len(t) <= DOSE_KNOTS == 11 and np.isin(t, dose).all()
    s = np.sort(dose)
    z = int(np.sum(dose == 0))
    mid_zero, rank_1 = (z - 1) / 2, float(np.mean(np.flatnonzero(s == t[1])))
    assert u[1] == pytest.approx((rank_1 - mid_zero) / (len(dose) - 1 - mid_zero), rel=1e-12)
    # with a knot per dose: the zeros at the middle of their levels p0 / 2, the next dose at
    # level p0, rescaled: (p0 - p0 / 2) / (1 - p0 / 2)
    t_all, u_all = map(np.asarray, dose_knots(dose, max_knots=len(dose)))
    p0 = z / len(dose)
    assert len(t_all) == len(np.unique(dose))
    assert u_all[1] == pytest.approx((p0 / 2) / (1 - p0 / 2), abs=0.005)
    enc, _ = DoseEncoding.fit(dose, len(np.unique(dose)), "auto", 4, "rank")
    inner = np.sort(dose)[200:210]
    np.testing.assert_allclose(enc.unscale(enc.scale(inner)), inner, rtol=1e-12)
    assert enc.scale(dose).min() == 0.0 and enc.scale(dose).max() == 1.0
    assert len(dose_knots(rng.normal(size=5000))[0]) == DOSE_KNOTS  # bounded: saved with the model
    # a monotone re-expression moves no knot's position
    t_exp, u_exp = map(np.asarray, dose_knots(np.exp(dose)))
    np.testing.assert_allclose(t_exp, np.exp(t), rtol=1e-12)
    np.testing.assert_array_equal(u_exp, u)


def test_auto_dose_scale_ranks_a_dose_whose_median_crowds_one_end():
    from dowhy_cfr.treatment import rank_scale

    rng = np.random.default_rng(1)
    t = rng.uniform(size=500)
    assert not rank_scale(t) and not rank_scale(np.exp(t))  # medians at 0.5 and ~0.38 of range
    assert rank_scale(np.exp(5 * t)) and rank_scale(np.log(t + 0.01))  # ~0.07 and ~0.86
    assert rank_scale(t, "rank") and not rank_scale(np.exp(5 * t), "range")
    X, T, Y = dose_design(60)
    with pytest.raises(ValueError, match=r"dose_scale='log' is invalid.*'rank'"):
        CFR(dose_scale="log").fit(Y, T, X=X)


def test_the_rank_scale_makes_the_fit_nearly_invariant_to_re_expressing_the_dose(tmp_path):
    """Fit on T and on exp(T): with ``dose_scale="rank"`` the curves at matching doses nearly
    agree (measured: 0.0086 here, the individual and the average curves, which span -1.1 to 1.0:
    the knots' positions are the same, the scale between the deciles follows the given units;
    5e-5 when every dose was a knot, docs/parameters.md item 34), with ``"range"`` they do not
    (measured: 1.05 and 0.66); the rank-scaled fit saves and loads."""
    X, T, Y = dose_design(300, seed=5)
    kw = dict(TINY, n_iter=60, n_ensemble=2, random_state=0, verbose=0)
    grid = np.quantile(T, [0.1, 0.3, 0.5, 0.7, 0.9])

    def curves(scale):
        a = CFR(dose_scale=scale, **kw).fit(Y, T, X=X)
        b = CFR(dose_scale=scale, **kw).fit(Y, np.exp(T), X=X)
        return (a, b), [(e.dose_response(X[:20], t_grid=g).estimate,
                         e.dose_response(t_grid=g).estimate) for e, g in ((a, grid),
                                                                           (b, np.exp(grid)))]

    (_, ranked), ((ind_a, avg_a), (ind_b, avg_b)) = curves("rank")
    assert np.abs(ind_a - ind_b).max() < 0.02 and np.abs(avg_a - avg_b).max() < 0.02
    _, ((ind_a, _), (ind_b, _)) = curves("range")
    assert np.abs(ind_a - ind_b).max() > 0.05
    t = ranked.dose_response().t  # the default grid: even on the rank scale, dense where T is
    u = ranked.fitted_.encoding.scale(t)
    np.testing.assert_allclose(np.diff(u), np.diff(u)[0], rtol=1e-9)
    assert np.diff(t)[0] < np.diff(t)[-1] / 10  # exp(T): raw steps grow along the grid
    back = CFR.load(ranked.save(tmp_path / "ranked.zip"))
    assert back.fitted_.encoding.knots_t == ranked.fitted_.encoding.knots_t
    assert back.fitted_.members.dose_knots == ranked.fitted_.members.dose_knots is not None
    np.testing.assert_array_equal(back.dose_response(X[:5], t_grid=np.exp(grid)).estimate,
                                  ranked.dose_response(X[:5], t_grid=np.exp(grid)).estimate)


def test_rank_scaled_members_read_the_dose_on_scales_of_their_own_training_units():
    """On the rank scale each K-fold member maps doses by the knots of the units it trains on
    (the ends pinned to the fitted range), so the members' jackknife -- the band -- sees the
    knots' sampling variance (docs/parameters.md, item 35; measured over 100 data sets of the
    e^{5t} re-expression: the band's coverage 0.909 -> 0.936 on the IHDP design); the range
    scale keeps one scale for all."""
    from dowhy_cfr.treatment import dose_knots

    X, T, Y = dose_design(300, seed=5)
    dose = np.exp(T)
    est = CFR(**{**TINY, "n_ensemble": 3, "dose_scale": "rank"}).fit(Y, dose, X=X)
    members, enc = est.fitted_.members, est.fitted_.encoding
    assert len(members.dose_knots) == 3
    for j, (t, u) in enumerate(members.dose_knots):
        own_t, own_u = dose_knots(dose[members.train_rows[j]])
        assert t[1:-1] == own_t[1:-1] and u == own_u
        assert (t[0], t[-1]) == (dose.min(), dose.max())
    assert len({k[0] for k in members.dose_knots}) == 3  # three different scales
    doses = np.quantile(dose, [0.05, 0.3, 0.6, 0.95])
    scaled = members.dose_scale(enc, doses)
    for j in range(3):
        np.testing.assert_array_equal(scaled[j], np.interp(doses, *members.dose_knots[j]))
    # each member's curve is its network at its own scale; the first two members kept as a pair
    curves = est.fitted_.dose_curves(X[:4], doses, grid=True, members=True)
    pair = dataclasses.replace(est.fitted_, members=members.select([2, 0]),
                               preprocessing=est.fitted_.preprocessing.select([2, 0]))
    assert pair.members.dose_knots == (members.dose_knots[2], members.dose_knots[0])
    np.testing.assert_allclose(pair.dose_curves(X[:4], doses, grid=True, members=True),
                               curves[[2, 0]], rtol=1e-6)
    ranged = CFR(**{**TINY, "n_ensemble": 3, "dose_scale": "range"}).fit(Y, dose, X=X)
    assert ranged.fitted_.members.dose_knots is None
    # members of stacked data sets: one on a range scale keeps the encoding's (None)
    from dowhy_cfr.treatment import DoseEncoding, member_dose_knots

    ranked_enc, ranged_enc = enc, DoseEncoding.fit(T, len(T), "auto", 4, "range")[0]
    both = member_dose_knots([ranked_enc, ranged_enc], [dose[:200], T[:200]])
    assert both[1] is None and both[0][0][1:-1] == dose_knots(dose[:200])[0][1:-1]
    assert member_dose_knots([ranged_enc], [T]) is None
    # one member (no folds) saw every unit, its training and its validation split: the fit's scale
    single = CFR(**{**TINY, "dose_scale": "rank"}).fit(Y, dose, X=X)
    enc = single.fitted_.encoding
    assert single.fitted_.members.dose_knots == ((enc.knots_t, enc.knots_u),)


def test_a_lone_dose_leaves_the_bandwidth_choice_finite_and_quiet():
    from dowhy_cfr.adrf import loocv_bandwidth

    rng = np.random.default_rng(2)
    dose = np.r_[rng.uniform(size=200), 50.0]  # one dose far beyond the others
    values = rng.normal(size=201)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h, risks = loocv_bandwidth(dose, values, [0.01, 0.1, 1.0, 100.0])
    assert h == 100.0 and np.isinf(risks[:3]).all() and np.isfinite(risks[3])


def test_a_treatment_argument_of_the_wrong_length_is_named(tiny_dose):
    est, (X, T, Y) = tiny_dose
    with pytest.raises(ValueError, match=r"T0 has 3 values for the 5 rows of X"):
        est.effect(X[:5], T0=np.zeros(3), T1=1.0)
    with pytest.raises(ValueError, match=r"T has 2 values for the 4 rows of X"):
        est.marginal_effect(np.zeros(2), X[:4])


def test_summary_of_a_dose_fit_is_the_average_curve_and_its_contrasts(fitted_dose):
    est, (X, T, Y) = fitted_dose
    smry = est.summary(alpha=0.1)
    curve_rows, contrast_rows = (np.array(t.data[1:], dtype=object) for t in smry.tables)
    doses = np.percentile(T, [10, 25, 50, 75, 90])
    assert len(curve_rows) == 5 and len(contrast_rows) == 4
    curve = est.dose_response(t_grid=doses, alpha=0.1)
    np.testing.assert_allclose(np.asarray(curve_rows[:, 1], float), curve.estimate, atol=1e-3)
    np.testing.assert_allclose(np.asarray(curve_rows[:, 3], float), curve.lower, atol=1e-3)
    median = est.fitted_.encoding.quantiles[1]
    lo, hi = est.ate_interval(T0=median, T1=doses[-1], alpha=0.1)
    last = np.asarray(contrast_rows[-1, 1:], float)
    assert last[0] == pytest.approx(float(est.ate(T0=median, T1=doses[-1])), abs=1e-3)
    assert (last[4], last[5]) == pytest.approx((lo, hi), abs=1e-3)
    assert "p90" in str(contrast_rows[-1, 0]) and "doubly robust" in str(smry)
    assert f"bandwidth {curve.bandwidth:.3g} in dose units" in str(smry)  # the range scale
    chosen = est.summary(T=[-1.0, 1.0, 1.0])  # a repeated dose is reported once
    assert [len(t.data) - 1 for t in chosen.tables] == [2, 2]
    with pytest.raises(ValueError, match="outside the range of the training doses"):
        est.summary(T=[100.0])


def test_plugin_dose_curve_and_summary_on_a_mixed_table():
    X, T, Y = dose_design(300, seed=5)
    frame = pd.DataFrame(X[:, :2], columns=["a", "b"]).assign(
        kind=np.where(X[:, 2] > 0, "high", "low"))
    est = CFR(**{**TINY, "n_ensemble": 3}, debias=None).fit(Y, T, X=frame)
    curve = est.dose_response(t_grid=[-1.0, 0.0, 1.0])
    np.testing.assert_allclose(curve.estimate, est.fitted_.dose.plugin([-1.0, 0.0, 1.0]),
                               rtol=1e-5)
    assert np.isfinite(curve.stderr).all() and "plug-in" in str(est.summary())
