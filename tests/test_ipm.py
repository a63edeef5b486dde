"""The IPMs against independent computations (numpy double sums, scipy's exact assignment)."""

import numpy as np
import pytest
import torch
from scipy.optimize import linear_sum_assignment

from dowhy_cfr.core import imbalance, mmd2_lin, mmd2_rbf, wasserstein
from dowhy_cfr.core.ipm import IPM_NAMES, imbalance_blocks, wasserstein_blocks


def _groups(seed=0, n_t=12, n_c=20, r=4, shift=0.7):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n_t, r)) + shift
    b = rng.normal(size=(n_c, r))
    phi = torch.tensor(np.vstack([a, b]))
    t = torch.tensor([1] * n_t + [0] * n_c)
    return a, b, phi, t


def test_mmd2_lin_is_squared_distance_of_means():
    a, b, phi, t = _groups()
    expected = np.sum((a.mean(0) - b.mean(0)) ** 2)
    assert float(mmd2_lin(phi, t)) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
def test_mmd2_rbf_matches_direct_double_sum(sigma):
    a, b, phi, t = _groups(seed=1)

    def k(u, v):
        return np.exp(-np.sum((u - v) ** 2) / sigma**2)

    m, n = len(a), len(b)
    ktt = sum(k(a[i], a[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    kcc = sum(k(b[i], b[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    ktc = sum(k(a[i], b[j]) for i in range(m) for j in range(n)) / (m * n)
    expected = ktt + kcc - 2 * ktc
    assert float(mmd2_rbf(phi, t, sigma=sigma)) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_sinkhorn_approaches_exact_optimal_transport():
    """Equal-size uniform samples: exact OT is an assignment problem (scipy)."""
    rng = np.random.default_rng(2)
    a = rng.normal(size=(25, 3)) + 0.5
    b = rng.normal(size=(25, 3))
    cost = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
    rows, cols = linear_sum_assignment(cost)
    exact = cost[rows, cols].mean()
    phi = torch.tensor(np.vstack([a, b]))
    t = torch.tensor([1] * 25 + [0] * 25)
    errors = []
    for lam in (1.0, 10.0, 100.0):
        w = float(wasserstein(phi, t, lam=lam, n_iter=3000))
        errors.append(abs(w - exact) / exact)
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.01  # measured: ~0.2% at lam=100
    # the entropic value is an upper bound when the plan is (nearly) feasible
    assert float(wasserstein(phi, t, lam=10.0, n_iter=3000)) >= exact - 1e-9


def test_wass2_uses_squared_cost():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(10, 2)) + 1.0
    b = rng.normal(size=(10, 2))
    cost2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost2)
    exact = cost2[rows, cols].mean()
    phi = torch.tensor(np.vstack([a, b]))
    t = torch.tensor([1] * 10 + [0] * 10)
    w2 = float(imbalance(phi, t, ipm="wass2", wass_lambda=200.0, wass_iterations=5000))
    assert w2 == pytest.approx(exact, rel=0.01)


def test_transport_plan_has_uniform_marginals():
    a, b, _, _ = _groups(seed=4)
    _, plan = wasserstein_blocks(torch.tensor(a)[None], torch.tensor(b)[None], n_iter=200,
                                 return_plan=True)
    assert plan.shape == (1, 12, 20)
    assert torch.allclose(plan.sum(), torch.tensor(1.0, dtype=plan.dtype), atol=1e-6)
    # columns (control) are exact after the last v-update; rows converge
    col = plan[0].sum(0)
    assert torch.allclose(col, torch.full_like(col, 1 / 20), atol=1e-8)
    row = plan[0].sum(1)
    assert torch.allclose(row, torch.full_like(row, 1 / 12), atol=1e-4)


@pytest.mark.parametrize("ipm", ["mmd2_lin", "wass", "wass2"])
def test_identical_samples_have_no_imbalance(ipm):
    rng = np.random.default_rng(5)
    a = rng.normal(size=(15, 3))
    phi = torch.tensor(np.vstack([a, a]))
    t = torch.tensor([1] * 15 + [0] * 15)
    scale = float(wasserstein(phi + torch.tensor([[0.0, 0, 0]] * 15 + [[2.0, 0, 0]] * 15), t))
    value = float(imbalance(phi, t, ipm=ipm, wass_lambda=200.0, wass_iterations=2000))
    assert abs(value) < 1e-3 * max(scale, 1.0)


def test_rbf_mmd_identical_samples_vanishes_with_n():
    # the unbiased estimator is not exactly 0 for identical samples; its bias is O(1/n)
    def same_vs_shifted(n):
        rng = np.random.default_rng(6)
        a = rng.normal(size=(n, 2))
        t = torch.tensor([1] * n + [0] * n)
        same = abs(float(mmd2_rbf(torch.tensor(np.vstack([a, a])), t, sigma=1.0)))
        diff = float(mmd2_rbf(torch.tensor(np.vstack([a + 1.0, a])), t, sigma=1.0))
        return same, diff

    same_100, diff_100 = same_vs_shifted(100)
    same_400, diff_400 = same_vs_shifted(400)
    assert same_400 < same_100 / 3
    assert same_400 < 0.05 * diff_400  # measured ratio 0.031


@pytest.mark.parametrize("ipm", IPM_NAMES)
def test_finite_gradients_with_duplicates_and_single_unit_groups(ipm):
    base = torch.randn(6, 4, dtype=torch.float64)
    phi = torch.cat([base[:1], base[:1], base, base[:2]]).requires_grad_(True)  # duplicates
    t = torch.zeros(phi.shape[0], dtype=torch.long)
    t[0] = 1  # one treated unit, which also has an exact duplicate among the controls
    value = imbalance(phi, t, ipm=ipm)
    value.backward()
    assert torch.isfinite(value)
    assert torch.isfinite(phi.grad).all()


@pytest.mark.parametrize("ipm", IPM_NAMES)
def test_stacked_groups_equal_per_model_values(ipm):
    """Ragged group sizes across the K axis are handled by masks."""
    g = torch.Generator().manual_seed(7)
    phi = torch.randn(3, 30, 5, generator=g, dtype=torch.float64)
    share = torch.tensor([[0.2], [0.5], [0.85]], dtype=torch.float64)
    t = (torch.rand(3, 30, generator=g, dtype=torch.float64) < share).long()
    stacked = imbalance(phi, t, ipm=ipm, rbf_sigma=1.0)
    single = torch.stack([imbalance(phi[k], t[k], ipm=ipm, rbf_sigma=1.0) for k in range(3)])
    assert torch.allclose(stacked, single, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("ipm", IPM_NAMES)
def test_valid_mask_excludes_rows(ipm):
    g = torch.Generator().manual_seed(8)
    phi = torch.randn(40, 3, generator=g, dtype=torch.float64)
    t = torch.tensor([1, 0] * 20)
    valid = torch.arange(40) < 25
    masked = imbalance(phi, t, valid, ipm=ipm, rbf_sigma=1.0)
    direct = imbalance(phi[:25], t[:25], ipm=ipm, rbf_sigma=1.0)
    assert torch.allclose(masked, direct, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "lam, shift", [(1e-3, 0.0), (1e4, 0.0), (10.0, 1e4), (1e4, 1e4), (10.0, 0.0)]
)
def test_sinkhorn_stays_finite(lam, shift):
    """Tiny and huge entropic scales, far-apart groups, duplicated points."""
    g = torch.Generator().manual_seed(9)
    a = torch.randn(10, 3, generator=g)
    b = torch.cat([a[:5], a[:5]]) + shift  # duplicates, possibly far away
    phi = torch.cat([a, b]).requires_grad_(True)
    t = torch.tensor([1] * 10 + [0] * 10)
    w = wasserstein(phi, t, lam=lam, n_iter=50)
    w.backward()
    assert torch.isfinite(w) and torch.isfinite(phi.grad).all()
    if shift:
        assert float(w.detach()) == pytest.approx(shift * np.sqrt(3), rel=0.01)


def test_backprop_switch_changes_only_the_gradient():
    _, _, phi, t = _groups(seed=10)
    p1 = phi.clone().requires_grad_(True)
    p2 = phi.clone().requires_grad_(True)
    w1 = wasserstein(p1, t, backprop=True)
    w2 = wasserstein(p2, t, backprop=False)
    assert float(w1.detach()) == pytest.approx(float(w2.detach()), rel=1e-12)
    w1.backward()
    w2.backward()
    assert not torch.allclose(p1.grad, p2.grad)


def test_empty_group_is_an_error_and_unknown_name_too():
    phi = torch.randn(5, 2)
    with pytest.raises(ValueError, match="at least one treated and one control"):
        mmd2_lin(phi, torch.zeros(5))
    with pytest.raises(ValueError, match="unknown ipm 'mmd'"):
        imbalance(phi, torch.tensor([0, 1, 0, 1, 0]), ipm="mmd")


def test_near_identical_representations_keep_their_distances_in_float32():
    """Representations on the unit sphere within 1e-4 of each other (a collapsed Phi): the
    float32 distances must not drown in the rounding of |a|^2 + |b|^2 - 2ab (the uncentred
    formula gave a median relative error of ~90% here and a Wasserstein value 14x too small)."""
    g = torch.Generator().manual_seed(12)
    centre = torch.nn.functional.normalize(torch.randn(1, 50, generator=g, dtype=torch.float64))
    phi64 = centre + 1e-4 * torch.randn(60, 50, generator=g, dtype=torch.float64)
    t = torch.tensor([1, 0] * 30)
    from dowhy_cfr.core.ipm import pairwise_sq_dists

    exact = pairwise_sq_dists(phi64[None], phi64[None])[0].sqrt()
    approx = pairwise_sq_dists(phi64[None].float(), phi64[None].float())[0].sqrt().double()
    off = ~torch.eye(60, dtype=torch.bool)
    rel = ((approx - exact).abs() / exact)[off]
    assert float(rel.median()) < 1e-3
    w64 = float(wasserstein(phi64, t))
    w32 = float(wasserstein(phi64.float(), t))
    assert w32 == pytest.approx(w64, rel=1e-3)


@pytest.mark.parametrize("ipm", IPM_NAMES)
def test_a_models_imbalance_and_gradient_do_not_depend_on_its_neighbours(ipm):
    """Model k's value and gradient in a stack whose other models have other group sizes equal
    those of model k alone, up to float32 rounding (batched kernels may round a model's
    elements differently in a stack)."""
    g = torch.Generator().manual_seed(13)
    phi = torch.randn(3, 40, 6, generator=g)
    share = torch.tensor([[0.15], [0.5], [0.9]])
    t = (torch.rand(3, 40, generator=g) < share).long()
    t[:, 0], t[:, 1] = 1, 0
    stacked_phi = phi.clone().requires_grad_(True)
    imbalance(stacked_phi, t, ipm=ipm, rbf_sigma=1.0).sum().backward()
    stacked = imbalance(phi, t, ipm=ipm, rbf_sigma=1.0)
    for k in range(3):
        single_phi = phi[k : k + 1].clone().requires_grad_(True)
        single = imbalance(single_phi, t[k : k + 1], ipm=ipm, rbf_sigma=1.0)
        single.sum().backward()
        # measured: equal bit for bit on one thread; on two threads mmd2_rbf's gradient
        # differs by 4.7e-10 (on main too), values ~0.1-1, gradients ~0.01-0.1
        torch.testing.assert_close(single[0], stacked[k], rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(single_phi.grad[0], stacked_phi.grad[k], rtol=1e-5,
                                   atol=1e-7)


def test_sinkhorn_gradient_stays_finite_with_an_outlying_control_unit():
    """A control unit far from every treated unit (all its kernel entries at the floor) in
    float32: its scaling v_j is large and 1 / (K^T u)_j^2 enters the gradient."""
    g = torch.Generator().manual_seed(14)
    phi = torch.randn(40, 8, generator=g)
    phi[-1] += 50.0
    phi.requires_grad_(True)
    t = torch.tensor([1, 0] * 20)
    w = wasserstein(phi, t, lam=10.0, n_iter=10)
    w.backward()
    assert torch.isfinite(w) and torch.isfinite(phi.grad).all()


@pytest.mark.parametrize("ipm", IPM_NAMES)
def test_block_form_equals_the_masked_form(ipm):
    """The IPM of two blocks (the arm-blocked training batches) is the masked IPM of the
    whole batch, up to rounding."""
    g = torch.Generator().manual_seed(21)
    phi = torch.randn(3, 30, 5, generator=g)
    phi_t, phi_c = phi[:, :8], phi[:, 8:]
    t = torch.tensor([1] * 8 + [0] * 22).expand(3, -1)
    masked = imbalance(phi, t, ipm=ipm, rbf_sigma=1.0)
    blocks = imbalance_blocks(phi_t, phi_c, ipm=ipm, rbf_sigma=1.0)
    assert blocks.shape == (3,)
    torch.testing.assert_close(blocks, masked, rtol=1e-5, atol=1e-6)


def _reference_sinkhorn(a, b, lam, n_iter, squared, backprop):
    """Supplement Algorithm 2 written out for one model: dense cost from explicit differences,
    no row scaling, autograd through the loop (float64)."""
    cost = (a[:, None, :] - b[None, :, :]).pow(2).sum(-1)
    if not squared:
        cost = cost.sqrt()
    kernel = torch.exp(-lam / cost.detach().mean() * cost)
    v = torch.ones(b.shape[0], dtype=a.dtype)
    for _ in range(n_iter):
        u = (1.0 / a.shape[0]) / (kernel @ v)
        v = (1.0 / b.shape[0]) / (kernel.T @ u)
    plan = u[:, None] * kernel * v[None, :]
    return ((plan if backprop else plan.detach()) * cost).sum()


@pytest.mark.parametrize("backprop", [True, False])
@pytest.mark.parametrize("ipm", ["wass", "wass2"])
def test_sinkhorn_equals_a_dense_reference_for_ragged_groups(ipm, backprop):
    """Values and gradients of four models with different group sizes (and rows left out by
    ``valid``) in one call against the dense reference of each model alone, in float64: the
    gathering into blocks, the grouping of models by their group sizes and the hand-written
    backward of ``SinkhornDistance``."""
    g = torch.Generator().manual_seed(22)
    phi = torch.randn(4, 30, 5, generator=g, dtype=torch.float64)
    # (treated, control, left out) per model: models 0 and 2 form one group, and the groups
    # are not consecutive ranges of the stack (model 3's sizes sort first)
    sizes = [(6, 20, 4), (11, 19, 0), (6, 20, 4), (4, 24, 2)]
    t = torch.zeros(4, 30, dtype=torch.long)
    valid = torch.zeros(4, 30, dtype=torch.bool)
    for k, (n_t, n_c, _) in enumerate(sizes):
        rows = torch.randperm(30, generator=g)
        t[k, rows[:n_t]], valid[k, rows[: n_t + n_c]] = 1, True
    weights = torch.tensor([0.5, -1.0, 2.0, 1.5], dtype=torch.float64)  # a gradient per model
    kw = dict(lam=10.0, n_iter=10, squared=(ipm == "wass2"), backprop=backprop)
    p = phi.clone().requires_grad_(True)
    got = wasserstein(p, t, valid, **kw)
    (got * weights).sum().backward()
    for k in range(4):
        q = phi[k].clone().requires_grad_(True)
        rows_t, rows_c = (t[k] == 1) & valid[k], (t[k] == 0) & valid[k]
        ref = _reference_sinkhorn(q[rows_t], q[rows_c], **kw)
        (ref * weights[k]).backward()
        torch.testing.assert_close(got[k].detach(), ref.detach(), rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(p.grad[k], q.grad, rtol=1e-8, atol=1e-11)


@pytest.mark.parametrize("ipm", ["wass", "wass2"])
def test_block_sinkhorn_on_tensors_equals_numpy(ipm, monkeypatch):
    """On GPUs ``SinkhornDistance`` runs its block arithmetic on the tensors instead of numpy:
    that path, forced on the CPU, gives the same value and gradients."""
    from dowhy_cfr.core import ipm as module

    g = torch.Generator().manual_seed(24)
    phi = torch.randn(3, 30, 5, generator=g, dtype=torch.float64)
    weights = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)

    def value_and_grad():
        p = phi.clone().requires_grad_(True)
        w = imbalance_blocks(p[:, :8], p[:, 8:], ipm=ipm)
        (w * weights).sum().backward()
        return w.detach(), p.grad

    numpy_path = value_and_grad()
    monkeypatch.setattr(module, "_host", lambda t: t.detach())
    tensor_path = value_and_grad()
    for a, b in zip(numpy_path, tensor_path):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", ["outlier", "coincident"])
def test_block_sinkhorn_gradient_stays_finite(case):
    """An outlying control unit (kernel entries at the floor) or a control unit at a treated
    unit's representation (distance 0, where sqrt has an infinite derivative)."""
    g = torch.Generator().manual_seed(14)
    phi_t = torch.randn(1, 20, 8, generator=g)
    phi_c = torch.randn(1, 20, 8, generator=g)
    if case == "outlier":
        phi_c[0, -1] += 50.0
    else:
        phi_c[0, 3] = phi_t[0, 5]
    phi_c.requires_grad_(True)
    w = imbalance_blocks(phi_t, phi_c)
    w.sum().backward()
    assert torch.isfinite(w).all() and torch.isfinite(phi_c.grad).all()
    assert float(phi_c.grad.abs().sum()) > 0
