"""The core's training: sample weights, factual heads, stacking, determinism, early stopping."""

import numpy as np
import pytest
import torch

from dowhy_cfr.core import CFRConfig, CFRNet, predict, sample_weights, train_cfr
from dowhy_cfr.core.batches import InMemoryBatches, arm_counts
from dowhy_cfr.core.config import PAPER_IHDP
from dowhy_cfr.core.objective import factual_loss
from dowhy_cfr.core.training import TrainingDivergedError, factual
from helpers import CORE_SMALL, core_data


def test_sample_weights_formula():
    t = torch.tensor([[1, 0, 0, 0, 1, 0, 0, 0, 0, 0]])
    u = 0.2
    shares = torch.tensor([[1 - u, u]])
    w = sample_weights(t, shares)
    expected = t / (2 * u) + (1 - t) / (2 * (1 - u))  # Algorithm 1, line 2
    assert torch.allclose(w, expected.float())
    # cfrnet's historical precedence bug, 2*1-u instead of 2*(1-u), gives other control weights
    buggy = t / (2 * u) + (1 - t) / (2 * 1 - u)
    assert not torch.allclose(w, buggy.float())
    # weights balance the arms: each arm carries half the total weight
    assert float(w[t == 1].sum()) == pytest.approx(float(w[t == 0].sum()))


def test_each_unit_updates_only_its_factual_head():
    net = CFRNet(3, [0], n_rep_layers=1, rep_dim=8, n_head_layers=1, head_dim=8)
    x = torch.randn(1, 10, 3)
    t = torch.zeros(1, 10, dtype=torch.long)  # all control
    _, out = net(x)
    factual(out, t).pow(2).sum().backward()
    for w in net.head_weights:
        assert w.grad[:, 0].abs().sum() > 0  # h0 learns
        assert torch.all(w.grad[:, 1] == 0)  # h1 untouched


def test_batches_always_contain_both_arms():
    arms = torch.zeros(2, 50, dtype=torch.long)
    arms[0, 3] = 1  # a single treated unit in model 0
    arms[1, :2] = 1
    x = torch.arange(50.0).expand(2, -1).unsqueeze(-1)  # x = the row: which units were drawn
    train_idx = torch.arange(50).expand(2, -1)
    sampler = InMemoryBatches(x, arms, arms.float(), train_idx, 8, [1, 2], 2,
                              per_model_data=True)
    drawn = [set(), set()]
    for _ in range(100):
        xb, got, _ = sampler.next()
        assert bool((got == 1).any(1).all()) and bool((got == 0).any(1).all())
        assert got.shape == (2, 8) and xb.shape == (2, 8, 1)
        for k in range(2):
            drawn[k] |= set(xb[k, :, 0].long().tolist())
    assert drawn[0] == drawn[1] == set(range(50))  # every unit is drawn


def test_arm_counts_follow_the_shares_and_keep_every_arm():
    arms = torch.tensor([[0] * 81 + [1] * 19, [0] * 99 + [1], [0] * 30 + [1] * 30 + [2] * 40])
    counts = arm_counts(arms[:2], 100, 2)
    assert counts.tolist() == [[81, 19], [99, 1]]
    assert arm_counts(arms[:1], 32, 2).tolist() == [[26, 6]]  # 25.92 / 6.08: largest remainder
    assert arm_counts(arms[2:], 10, 3).tolist() == [[3, 3, 4]]
    assert arm_counts(torch.tensor([[0] * 999 + [1]]), 8, 2).tolist() == [[7, 1]]  # at least 1
    with pytest.raises(ValueError, match="batch_size"):
        arm_counts(arms[2:], 2, 3)


def test_count_shares_give_the_folds_of_one_data_set_one_batch_shape():
    """Training shares 0.305 and 0.314 round to 30 and 31 treated of 100 (two groups); rounded
    from the data set's share (0.3095) both batches hold 31, and each still draws its own
    units."""
    fold = lambda treated: [0] * (1000 - treated) + [1] * treated
    arms = torch.tensor([fold(305), fold(314)])
    assert arm_counts(arms, 100, 2).tolist() == [[70, 30], [69, 31]]
    shares = np.array([[0.6905, 0.3095]] * 2)
    assert arm_counts(arms, 100, 2, shares).tolist() == [[69, 31]] * 2
    t = torch.cat([arms[0], arms[1]])
    idx = torch.stack([torch.arange(1000), torch.arange(1000, 2000)])
    x = torch.arange(2000.0).unsqueeze(1)
    batches = InMemoryBatches(x, t, torch.zeros(2000), idx, 100, [0, 1], 2,
                              count_shares=shares)
    xb, tb, _ = batches.next()
    assert (tb == 1).sum(1).tolist() == [31, 31]
    assert bool((xb[0] < 1000).all()) and bool((xb[1] >= 1000).all())


def test_stratified_batches_keep_each_models_arm_counts_and_cover_each_arm():
    """Every batch of model k holds counts[k, a] units of arm a, arm 0's rows first; within an
    epoch of an arm every unit of that arm is drawn once."""
    arms = torch.zeros(2, 60, dtype=torch.long)
    arms[0, :15] = 1  # 25% treated
    arms[1, 30:] = 1  # 50% treated
    x = torch.arange(60.0).expand(2, -1).unsqueeze(-1)
    sampler = InMemoryBatches(x, arms, arms.float(), torch.arange(60).expand(2, -1), 12, [1, 2],
                              2, per_model_data=True)
    assert sampler.counts.tolist() == [[9, 3], [6, 6]]
    seen = [[], []]
    for _ in range(5):  # model 0: 5 batches x 3 treated = its 15 treated units, once each
        xb, tb, _ = sampler.next()
        for k, (n0, n1) in enumerate(sampler.counts):
            assert tb[k].tolist() == [0] * n0 + [1] * n1
        seen[0] += xb[0, 9:, 0].long().tolist()
    assert sorted(seen[0]) == list(range(15))
    sampler.keep(torch.tensor([False, True]))
    assert sampler.counts.tolist() == [[6, 6]] and sampler.next()[1].shape == (1, 12)


def test_factual_heads_equal_the_factual_entries_of_all_heads():
    """Running each head on its own arm's rows gives the factual outputs, loss and gradient of
    running every head on every row (up to rounding)."""
    torch.manual_seed(0)
    net = CFRNet(4, [1, 2], n_rep_layers=2, rep_dim=8, n_head_layers=2, head_dim=8)
    x, y = torch.randn(2, 10, 4), torch.randn(2, 10)
    t = torch.tensor([[0] * 7 + [1] * 3] * 2)
    phi, out = net(x)
    full = factual_loss(factual(out, t), y, "mse").sum()
    full_grads = torch.autograd.grad(full, list(net.parameters()))
    blocked = net.factual_heads(net.representation(x).split([7, 3], 1))
    assert torch.allclose(blocked, factual(out, t), atol=1e-6)
    loss = factual_loss(blocked, y, "mse").sum()
    assert torch.allclose(loss, full, rtol=1e-6)
    for g_full, g in zip(full_grads, torch.autograd.grad(loss, list(net.parameters()))):
        assert torch.allclose(g, g_full, atol=1e-6)
    # three arms, one model of a stack selected by position
    net3 = CFRNet(4, [1, 2], n_arms=3, n_rep_layers=1, rep_dim=8, n_head_layers=1, head_dim=8)
    t3 = torch.tensor([[0] * 5 + [1] * 3 + [2] * 2] * 2)
    phi3, out3 = net3(x)
    one = net3.factual_heads(phi3[1:].split([5, 3, 2], 1), net3.select_heads(torch.tensor([1])))
    assert torch.allclose(one, factual(out3, t3)[1:], atol=1e-6)
    # ... or as the second of two consecutive ranges of the stack (views, not copies)
    view = net3.factual_heads(phi3[1:].split([5, 3, 2], 1), net3.split_heads([1, 1])[1])
    assert torch.equal(view, one)


@pytest.mark.parametrize("n_arms", [2, 3])
def test_effect_heads_are_a_mean_and_an_effect_with_their_own_penalty(n_arms):
    """head_form="effect": mu_a = m + d_a - mean_b d_b (d_0 = 0), so for two arms tau = d, the
    factual outputs on arm blocks equal those of every head on every row, and the L2 penalty's
    gradient (effect_penalty x weight_decay on the effect heads) equals autograd's."""
    torch.manual_seed(1)
    net = CFRNet(4, [1, 2], n_arms=n_arms, n_rep_layers=1, rep_dim=8, n_head_layers=1,
                 head_dim=8, head_form="effect", effect_penalty=10.0)
    x = torch.randn(2, 12, 4)
    phi, out = net(x)
    sizes = [5, 7] if n_arms == 2 else [5, 4, 3]
    t = torch.cat([torch.full((s,), a) for a, s in enumerate(sizes)]).expand(2, -1)
    assert torch.allclose(net.factual_heads(phi.split(sizes, 1)), factual(out, t), atol=1e-6)
    if n_arms == 2:  # tau is the effect head itself: the second head's raw output
        w, b = net.head_weights[0][:, 1], net.head_biases[0][:, 1]
        d = (torch.nn.functional.elu(torch.baddbmm(b, phi, w)) @ net.head_weights[1][:, 1]
             + net.head_biases[1][:, 1]).squeeze(-1)
        assert torch.allclose(out[:, 1] - out[:, 0], d, atol=1e-6)
    wd = torch.tensor([1e-2, 3e-2])
    (net.weight_penalty() * wd).sum().backward()
    auto = [w.grad.clone() for w in net.head_weights]
    for w in net.head_weights:
        w.grad = None
    net.add_penalty_gradient(wd)
    for a, w in zip(auto, net.head_weights):
        assert torch.allclose(a, w.grad)
        assert torch.allclose(w.grad[:, 1], 10.0 * wd.view(-1, 1, 1) * w[:, 1].detach())
    with pytest.raises(ValueError, match="head_form"):
        CFRNet(4, [1], head_form="offset")


@pytest.mark.parametrize("n_arms", [2, 3])
def test_robinson_heads_centre_the_effect_heads_at_the_propensities(n_arms):
    """head_form="robinson": mu_a = m + d_a - sum_b e_b d_b with the rows' propensities e, so
    the effects mu_a - mu_0 = d_a are the effect form's whatever e is, without e the outputs
    are the effect form's, and the factual outputs on arm blocks equal those of every head on
    every row."""
    torch.manual_seed(2)
    kw = dict(n_arms=n_arms, n_rep_layers=1, rep_dim=8, n_head_layers=1, head_dim=8)
    net = CFRNet(4, [1, 2], head_form="robinson", **kw)
    effect = CFRNet(4, [1, 2], head_form="effect", **kw)  # the same draws, the same weights
    x = torch.randn(2, 12, 4)
    e = torch.softmax(torch.randn(2, 12, n_arms), -1)
    phi, out = net(x, e)
    _, out_effect = effect(x)
    d = out_effect - out_effect[:, :1]  # d_a = mu_a - mu_0, d_0 = 0
    m = out_effect[:, :1] + d.mean(1, keepdim=True)  # the effect form's mean head
    expected = m + d - (d * e.transpose(1, 2)).sum(1, keepdim=True)
    assert torch.allclose(out, expected, atol=1e-5)
    assert torch.allclose(out - out[:, :1], out_effect - out_effect[:, :1], atol=1e-5)
    assert torch.allclose(net(x)[1], out_effect, atol=1e-6)
    if n_arms == 2:  # two arms: mu_0 = m - e_1 d, mu_1 = m + (1 - e_1) d
        assert torch.allclose(out[:, 0], m[:, 0] - e[..., 1] * d[:, 1], atol=1e-5)
        assert torch.allclose(out[:, 1], m[:, 0] + (1 - e[..., 1]) * d[:, 1], atol=1e-5)
    sizes = [5, 7] if n_arms == 2 else [5, 4, 3]
    t = torch.cat([torch.full((s,), a) for a, s in enumerate(sizes)]).expand(2, -1)
    assert torch.allclose(net.factual_heads(phi.split(sizes, 1), e=e), factual(out, t),
                          atol=1e-6)
    assert torch.allclose(predict(net, x[0], e=e[0])[0], out[0], atol=1e-6)


def _propensity_design(n: int, d: int, seed: int):
    """Units whose treatment follows x0 (propensity e1 = sigmoid(x0)) and tau = 1 + x1:
    ``(x, t, y, e (n, 2), a random order of the units)``."""
    torch.manual_seed(seed)
    x = torch.randn(n, d)
    e1 = torch.sigmoid(x[:, 0])
    t = torch.bernoulli(e1).long()
    y = x[:, 0] + t * (1 + x[:, 1]) + 0.5 * torch.randn(n)
    return x, t, y, torch.stack([1 - e1, e1], 1), torch.randperm(n)


def test_robinson_training_needs_the_units_propensities():
    """train_cfr with head_form="robinson" takes each unit's propensities (and only then);
    without them, with a wrong shape, on a stream or for other heads: a ValueError naming the
    fix. With them the effect is learnt: tau = 1 + x1 recovered at r > 0.9 in 200 steps (after
    one step: r = -0.37)."""
    x, t, y, e, idx = _propensity_design(400, 5, seed=0)
    split = dict(train_idx=idx[:300].unsqueeze(0), val_idx=idx[300:].unsqueeze(0), seeds=[0],
                 per_model_data=True)
    cfg = CFRConfig(head_form="robinson", n_iter=200, batch_size=64, n_ensemble=1)
    args = (x.unsqueeze(0), t.unsqueeze(0), y.unsqueeze(0))
    with pytest.raises(ValueError, match="propensit"):
        train_cfr(*args, config=cfg, **split)
    with pytest.raises(ValueError, match="shape"):
        train_cfr(*args, config=cfg, propensity=e[:, :1].unsqueeze(0), **split)
    with pytest.raises(ValueError, match="only"):
        train_cfr(*args, config=CFRConfig(n_iter=5, batch_size=64), propensity=e.unsqueeze(0),
                  **split)
    with pytest.raises(ValueError, match="only"):  # a dose's head is its own
        train_cfr(*args, config=cfg, propensity=e.unsqueeze(0), dose=torch.rand(1, len(y)),
                  **split)
    with pytest.raises(ValueError, match="stream"):
        train_cfr(x[300:], t[300:], y[300:], train_idx=None, val_idx=torch.arange(100)[None],
                  config=cfg, seeds=[0], batch_source=lambda: (x[:64], t[:64], y[:64]),
                  arm_shares=torch.tensor([[0.5, 0.5]]))
    result = train_cfr(*args, config=cfg, propensity=e.unsqueeze(0), **split)
    out = predict(result.net, x, e=e)
    tau = (out[0, 1] - out[0, 0]).numpy()
    assert np.corrcoef(tau, (1 + x[:, 1]).numpy())[0, 1] > 0.9


def test_a_stack_of_both_head_forms_trains_each_as_alone():
    """``head_forms`` (head_form="auto"'s candidates): in one stack, a separate model and a
    Robinson model train as each does in a stack of its own form (the same steps and weights up
    to float rounding: the separate model's heads run on every row here, on its arm's rows
    alone); ``CFRNet.select(..., head_form)`` gives each its own form's outputs. Wrong forms,
    or "auto" without them: a ValueError naming the fix."""
    x, t, y, e, idx = _propensity_design(300, 4, seed=1)
    tr, va = idx[:220].expand(2, -1), idx[220:].expand(2, -1)
    cfg = CFRConfig(n_iter=60, batch_size=64, n_ensemble=1, eval_every=20, alpha=0.1)
    both = train_cfr(x, t, y, train_idx=tr, val_idx=va, config=cfg, seeds=[3, 4],
                     propensity=e, head_forms=["separate", "robinson"])
    sep = train_cfr(x, t, y, train_idx=tr[:1], val_idx=va[:1], config=cfg, seeds=[3])
    rob = train_cfr(x, t, y, train_idx=tr[:1], val_idx=va[:1], seeds=[4], propensity=e,
                    config=CFRConfig(**{**cfg.to_dict(), "head_form": "robinson"}))
    for k, (alone, form) in enumerate(((sep, "separate"), (rob, "robinson"))):
        assert both.best_step[k] == alone.best_step[0]
        mine = both.net.select([k], form)
        np.testing.assert_allclose(predict(mine, x, e=e).numpy(),
                                   predict(alone.net, x, e=e).numpy(), atol=1e-4)
    # the two forms' outputs differ: the mask matters
    assert not torch.allclose(predict(both.net.select([0], "robinson"), x, e=e),
                              predict(both.net.select([0], "separate"), x, e=e), atol=1e-3)
    with pytest.raises(ValueError, match="head_forms"):
        train_cfr(x, t, y, train_idx=tr, val_idx=va, config=cfg, seeds=[3, 4], propensity=e,
                  head_forms=["separate", "effect"])
    with pytest.raises(ValueError, match="pass head_forms"):
        train_cfr(x, t, y, train_idx=tr[:1], val_idx=va[:1], seeds=[3],
                  config=CFRConfig(**{**cfg.to_dict(), "head_form": "auto"}))


def test_select_copies_the_chosen_models_only():
    """``CFRNet.select`` keeps models 2 and 0 of a stack: their weights and outputs, as
    trainable parameters of their own (changing them leaves the stack untouched)."""
    net = CFRNet(5, [1, 2, 3, 4], rep_dim=8, head_dim=6)
    sub = net.select([2, 0])
    assert sub.n_models == 2 and net.n_models == 4
    for p, q in zip(net.parameters(), sub.parameters()):
        assert isinstance(q, torch.nn.Parameter) and q.requires_grad
        assert torch.equal(q, p[[2, 0]])
    x = torch.randn(7, 5)
    assert torch.equal(predict(sub, x), predict(net, x)[[2, 0]])
    before = [p.detach().clone() for p in net.parameters()]
    with torch.no_grad():
        for q in sub.parameters():
            q.add_(1.0)
    assert all(torch.equal(p, b) for p, b in zip(net.parameters(), before))


@pytest.mark.parametrize("ipm", ["wass", "mmd2_rbf"])
def test_stacked_models_with_other_arm_counts_equal_separate_fits(ipm):
    """Models whose batches hold other arm counts (other treated shares) form their own groups
    in the stack; each still computes what it computes alone, up to float rounding. The stack
    trains with equal counts next to each other (here models 0, 2, 1) and returns everything in
    the caller's order: networks, best steps, history, and the model indices of the reports."""
    data = [core_data(seed=s) for s in (0, 3, 0)]
    x, t, y = (torch.stack([d[i] for d in data]) for i in range(3))
    t[1, :60] = 0  # model 1: a much smaller treated share -> other counts
    y[2] = y[2] + 0.5  # model 2: the arms of model 0, another outcome
    tr, va = data[0][3], data[0][4]
    cfg = CFRConfig(alpha=0.5, ipm=ipm, rbf_sigma=1.0,
                    **{**CORE_SMALL, "n_iter": 200, "learning_rate": 3e-3, "patience": 2})
    seeds = [5, 6, 7]
    reports = []
    stacked = train_cfr(x, t, y, train_idx=tr.expand(3, -1), val_idx=va.expand(3, -1),
                        config=cfg, seeds=seeds, per_model_data=True,
                        progress=lambda step, info: reports.append(info["models"].tolist()))
    assert reports[0] == [0, 2, 1]  # trained in stack order, reported as the caller's indices
    out = predict(stacked.net, x[0])
    for k, s in enumerate(seeds):
        single = train_cfr(x[k : k + 1], t[k : k + 1], y[k : k + 1], train_idx=tr[None],
                           val_idx=va[None], config=cfg, seeds=[s], per_model_data=True)
        # rounding drift after 200 steps, measured: outputs 6.8e-5 (wass) / 7.2e-7 (mmd2_rbf),
        # val objective 8.8e-6 / 1.8e-6 relative; outputs ~1. Model 1's Wasserstein run is
        # sensitive: a 1e-7 relative change of x moves its outputs by up to 1.8e-4 and its val
        # objective by 4.1e-4 relative, so the margins leave room for other CPUs' rounding.
        torch.testing.assert_close(predict(single.net, x[0])[0], out[k], rtol=0, atol=1e-3)
        assert single.best_step[0] == stacked.best_step[k]
        n_evals = len(single.history["step"])
        np.testing.assert_allclose(single.history["val_objective"][:, 0],
                                   stacked.history["val_objective"][:n_evals, k], rtol=2e-3)


def test_stacked_gradients_equal_single_ones_at_the_default_sizes():
    """At the default architecture (widths 200/100, sizes that are not multiples of the vector
    width), one step's gradients of every model of a stack equal its gradients alone up to float
    rounding, groups of other arm counts included."""
    from dowhy_cfr.core.training import StackedRun

    g = torch.Generator().manual_seed(0)
    k, n, d = 3, 120, 25
    x, y = torch.randn(k, n, d, generator=g), torch.randn(k, n, generator=g)
    t = torch.zeros(k, n, dtype=torch.long)
    t[0, :24], t[1, 10:52], t[2, 60:84] = 1, 1, 1  # treated shares 0.2, 0.35, 0.2
    cfg = CFRConfig(alpha=1.0, batch_size=100).resolve(n)  # StackedRun takes numbers
    rows = torch.arange(n).expand(k, -1)

    def grads(models):
        run = StackedRun(x[models], t[models], y[models], train_idx=rows[models],
                         val_idx=rows[models], config=cfg, seeds=[7 + m for m in models],
                         n_arms=2, batch_source=None, arm_shares=None, model_wrapper=None,
                         gather_ipm=None, alpha=None, weight_decay=None, per_model_data=True,
                         device="cpu")
        xb, tb, yb = run.batches.next()
        phi, pred = run.forward(xb, tb)
        run.batch_eq3(phi, pred, tb, yb).objective.sum().backward()
        run.add_l2_gradient()
        return [p.grad for p in run.net.parameters()], run.groups

    stacked, groups = grads([1, 0, 2])  # train_cfr's order: equal arm counts next to each other
    assert groups.sizes == [1, 2]  # two groups, consecutive: the heads take views
    for j, m in enumerate([1, 0, 2]):
        for g_stack, g_alone in zip(stacked, grads([m])[0]):
            # measured: bit for bit on one thread; 1.8e-6 on two (1.4e-6 on main, which
            # promised bit-identity), gradients up to ~1
            torch.testing.assert_close(g_stack[j], g_alone[0], rtol=0, atol=1e-5)


@pytest.mark.parametrize("ipm", ["wass", "mmd2_lin", "mmd2_rbf", "wass2"])
def test_stacked_training_equals_separate_fits(ipm):
    """Up to float rounding: every model's arithmetic has the same shapes in a stack as alone
    (the Wasserstein term used to pad groups to the stack's largest, which drifted to 0.27 in
    the parameters after 300 steps at lr 3e-3). Over 100 steps: over 300, seed 33's Wasserstein
    run is chaotic (a 1e-7 relative change of x moves its outputs by 0.16; over 100 steps the
    three seeds' outputs move by at most 2.2e-5)."""
    x, t, y, tr, va = core_data()
    cfg = CFRConfig(alpha=0.5, ipm=ipm, rbf_sigma=1.0,
                    **{**CORE_SMALL, "n_iter": 100, "learning_rate": 3e-3, "patience": None})
    seeds = [11, 22, 33]
    k = len(seeds)
    stacked = train_cfr(x, t, y, train_idx=tr.expand(k, -1), val_idx=va.expand(k, -1),
                        config=cfg, seeds=seeds)
    assert not stacked.diverged.any()
    out_stacked = predict(stacked.net, x)
    for i, s in enumerate(seeds):
        single = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None], config=cfg, seeds=[s])
        # rounding drift after 100 steps, measured: outputs 6.9e-5 (wass), 7.2e-7 (mmd2_lin),
        # 4.8e-7 (mmd2_rbf), 7.2e-7 (wass2); val objective <= 6.2e-6 relative; outputs ~1
        torch.testing.assert_close(predict(single.net, x)[0], out_stacked[i], rtol=0, atol=5e-4)
        assert single.best_step[0] == stacked.best_step[i]
        np.testing.assert_allclose(single.history["val_objective"][:, 0],
                                   stacked.history["val_objective"][:, i], rtol=1e-4)


@pytest.mark.parametrize("ema_decay, learning_rate", [(0.0, 0.01), (0.99, 0.03)])
def test_stack_compaction_after_early_stops_keeps_models_identical(ema_decay, learning_rate):
    """Members stop at different evaluations; the stack drops them and the rest continue
    exactly as they would alone -- also their averaged weights (``ema_decay``; at 0.01 the
    averaged members all ran to the step limit, so a larger step makes them stop)."""
    x, t, y, tr, va = core_data()
    cfg = CFRConfig(**{**CORE_SMALL, "n_iter": 600, "eval_every": 10, "patience": 2,
                       "learning_rate": learning_rate, "ema_decay": ema_decay})
    seeds = [1, 2, 3, 4]
    stacked = train_cfr(x, t, y, train_idx=tr.expand(4, -1), val_idx=va.expand(4, -1),
                        config=cfg, seeds=seeds)
    assert len(set(stacked.best_step.tolist())) > 1  # they did stop at different times
    out = predict(stacked.net, x)
    for i, s in enumerate(seeds):
        single = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None], config=cfg, seeds=[s])
        assert single.best_step[0] == stacked.best_step[i]
        # after a compaction (new, smaller parameter tensors) the stacked and single runs round
        # differently; over hundreds of lr=0.01 steps that drifts to at most 4.6e-4 here (val
        # loss: 1.8e-3 relative; measured), outputs ~1
        assert torch.allclose(predict(single.net, x)[0], out[i], atol=2e-3)
        n = len(single.history["step"])
        np.testing.assert_allclose(stacked.history["val_loss"][:n, i],
                                   single.history["val_loss"][:, 0], rtol=1e-2)
        assert np.all(np.isnan(stacked.history["val_loss"][n:, i]))  # nothing after its stop


def test_per_model_data_and_alpha_overrides():
    x, t, y, tr, va = core_data()
    x2, t2, y2, _, _ = core_data(seed=1)
    cfg = CFRConfig(**CORE_SMALL)
    res = train_cfr(torch.stack([x, x2]), torch.stack([t, t2]), torch.stack([y, y2]),
                    train_idx=torch.stack([tr, tr]), val_idx=torch.stack([va, va]), config=cfg,
                    seeds=[5, 5], alpha=[0.0, 1.0], per_model_data=True)
    one = train_cfr(x2, t2, y2, train_idx=tr[None], val_idx=va[None],
                    config=CFRConfig(alpha=1.0, **CORE_SMALL), seeds=[5])
    h = res.history["val_objective"]
    np.testing.assert_allclose(h[:, 1], one.history["val_objective"][:, 0], rtol=1e-4)
    assert not np.allclose(h[:, 0], h[:, 1])
    # the unpenalised model skips the batch's IPM (the penalised one keeps it) and trains as
    # alone; the validation IPM is still recorded for both
    zero = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None],
                     config=CFRConfig(alpha=0.0, **CORE_SMALL), seeds=[5])
    np.testing.assert_allclose(h[:, 0], zero.history["val_objective"][:, 0], rtol=1e-4)
    np.testing.assert_allclose(res.history["val_imbalance"][:, 0],
                               zero.history["val_imbalance"][:, 0], rtol=1e-4)
    assert (res.history["train_imbalance"][1:, 0] == 0).all()  # row 0: before training
    assert (res.history["train_imbalance"][1:, 1] > 0).all()


def test_training_is_deterministic():
    x, t, y, tr, va = core_data()
    cfg = CFRConfig(**CORE_SMALL)
    a = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None], config=cfg, seeds=[3])
    b = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None], config=cfg, seeds=[3])
    assert torch.equal(predict(a.net, x), predict(b.net, x))
    c = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None], config=cfg, seeds=[4])
    assert not torch.equal(predict(a.net, x), predict(c.net, x))


@pytest.mark.parametrize("relative_patience, tol",
                         [(0.0, 0.0), (1.0, 0.0), (0.5, 0.0), (0.0, 0.002), (0.5, 0.05)])
def test_early_stopping_keeps_best_checkpoint(relative_patience, tol):
    x, t, y, tr, va = core_data()
    cfg = CFRConfig(**{**CORE_SMALL, "n_iter": 2000, "eval_every": 10, "patience": 3,
                       "learning_rate": 0.01, "relative_patience": relative_patience,
                       "tol": tol, "alpha": 0.05})
    res = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None], config=cfg, seeds=[0])
    h = res.history
    assert res.n_steps < 2000  # stopped early
    assert res.stopped[0]
    objective = h["val_objective"][:, 0]
    best = int(np.argmin(objective[1:])) + 1  # step 0 is never selected
    assert h["step"][best] == res.best_step[0]  # every best is kept, significant or not
    # the wait counts from the last significant best: one below (1 - tol) times the previous
    # significant best's objective (with tol = 0 every best)
    anchor, since = np.inf, 0
    for step, value in zip(h["step"][1:], objective[1:]):
        if value < (1 - tol) * anchor:
            anchor, since = value, int(step)
    # stops at the first evaluation max(min_wait, relative_patience * that step) steps after
    # it; min_wait: patience * eval_every = 30 steps, or 7 epochs of 140 units in batches of 32,
    # 31 steps
    assert cfg.min_wait(len(tr)) == 31
    wait = max(cfg.min_wait(len(tr)), relative_patience * since)
    assert h["step"][-1] == since + int(np.ceil(wait / 10) * 10)
    if tol == 0:
        assert since == res.best_step[0]
    # the kept network reproduces the best validation objective
    out = predict(res.net, x)[0]
    pred = torch.where(t[va] == 1, out[1, va], out[0, va])
    u = t[tr].float().mean()
    w = torch.where(t[va] == 1, 1 / (2 * u), 1 / (2 * (1 - u)))
    val_loss = float((w * (pred - y[va]) ** 2).mean())
    assert val_loss == pytest.approx(h["val_loss"][best, 0], rel=1e-4)


def test_early_stopping_waits_at_least_seven_epochs():
    """The floor of the wait: patience * eval_every steps (100 by default) or MIN_WAIT_EPOCHS
    passes over the training split, whichever is longer; the step floor alone for a stream."""
    from dowhy_cfr.core.config import MIN_WAIT_EPOCHS

    cfg = CFRConfig(batch_size=100)  # patience 5, eval_every 20
    assert MIN_WAIT_EPOCHS == 7
    assert cfg.min_wait(470) == 100  # IHDP's training split: 7 epochs are 33 steps
    assert cfg.min_wait(1400) == 100  # n = 2,000: 98 steps
    assert cfg.min_wait(7000) == 490  # n = 10,000: 100 steps would be 1.4 epochs
    assert cfg.min_wait(None) == 100  # a stream of unknown size
    assert CFRConfig(patience=None).min_wait(7000) is None  # never stops
    assert CFRConfig(patience=80, eval_every=10).min_wait(7000) == 800
    assert CFRConfig(patience=80).min_wait(7000) == 1600  # 80 evaluations of the default 20 steps


def test_a_large_training_split_waits_its_epochs():
    """A model whose best came early waits 7 passes over a large training split, not the
    100-step floor: with 2,000 training units in batches of 20 (700 steps), it stops no earlier
    than 700 steps after its best evaluation."""
    g = torch.Generator().manual_seed(3)
    n = 2600
    x = torch.randn(n, 4, generator=g)
    t = (torch.rand(n, generator=g) < 0.5).long()
    tr, va = torch.arange(2000), torch.arange(2000, n)
    # training outcomes near +1, validation outcomes near -1: what the model learns makes its
    # validation loss worse, so the best evaluation is the first one
    y = 0.1 * torch.randn(n, generator=g) + torch.where(torch.arange(n) < 2000, 1.0, -1.0)
    cfg = CFRConfig(**{**CORE_SMALL, "batch_size": 20, "n_iter": 3000, "eval_every": 10,
                       "patience": 2, "learning_rate": 0.01})
    assert cfg.min_wait(2000) == 700
    res = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None], config=cfg, seeds=[0])
    assert res.stopped[0] and res.best_step[0] == 10
    assert res.n_steps - res.best_step[0] >= 700  # the 100-step floor would stop at step 110
    assert res.n_steps < 3000


def test_auto_step_limit_is_50_epochs_within_1500_to_3000_steps():
    cfg = CFRConfig(batch_size=100)  # n_iter="auto"
    assert cfg.resolve(470).n_iter == 1500  # IHDP's training split: at least 1,500 steps
    assert cfg.resolve(3000).n_iter == 1500  # exactly 50 epochs
    assert cfg.resolve(3001).n_iter == 1501  # 50 epochs, rounded up
    assert cfg.resolve(3200).n_iter == 1600  # n = 4,000 with five K-fold members
    assert cfg.resolve(6001).n_iter == 3000  # at most cfrnet's 3,000
    assert cfg.resolve(None).n_iter == 3000  # a stream of unknown size
    assert CFRConfig(n_iter=70).resolve(10**6).n_iter == 70  # a number stays
    # a larger batch draws the same units in fewer steps: the floor falls in proportion
    assert CFRConfig(batch_size=200).resolve(470).n_iter == 750
    assert CFRConfig(batch_size=200).resolve(3200).n_iter == 800  # 50 passes of 16 batches
    assert CFRConfig(batch_size=32).resolve(470).n_iter == 1500  # smaller batches keep it


@pytest.mark.parametrize("n_train, batch, lr, decay, warmup, n_iter", [
    (470, 100, 8e-3, 0.8, 50, 1500),  # IHDP's training split: cfrnet's batch, the fast start
    (1600, 100, 8e-3, 0.8, 50, 1500),  # designs A-E at n = 2,000 (K-fold members)
    (2000, 100, 8e-3, 0.8, 50, 1500),  # up to 2,000 training units (n = 2,500, K-fold members)
    (2001, 251, 5.02e-3, 0.97, 0, 598),  # then 8 batches per pass, at least 200 units
    (3200, 400, 8e-3, 0.97, 0, 400),  # the realistic suite at n = 4,000 (K-fold members)
    (16000, 400, 8e-3, 0.97, 0, 2000),  # at most 400 units per step
    (None, 100, 2e-3, 0.97, 0, 3000),  # a stream of unknown size: the rule before
    (60, 60, 8e-3, 0.8, 50, 1500),  # a training split smaller than a batch: one batch of it all
])
def test_auto_batch_learning_rate_and_steps_follow_the_training_split(n_train, batch, lr, decay,
                                                                      warmup, n_iter):
    cfg = CFRConfig().resolve(n_train)
    assert (cfg.batch_size, cfg.n_iter, cfg.lr_warmup) == (batch, n_iter, warmup)
    assert cfg.learning_rate == pytest.approx(lr)
    assert cfg.lr_decay == pytest.approx(decay)
    assert cfg.resolve(n_train) == cfg  # a resolved configuration resolves to itself
    dose = CFRConfig().resolve(n_train, continuous=True)  # a dose's fast start: 4e-3 by 0.9
    fast = warmup > 0
    assert (dose.learning_rate, dose.lr_decay, dose.lr_warmup) == (
        (4e-3, 0.9, 0) if fast else (cfg.learning_rate, cfg.lr_decay, 0))
    assert CFRConfig().min_wait(n_train) == (100 if n_train is None else
                                             max(100, int(np.ceil(7 * n_train / batch))))


@pytest.mark.parametrize("params, lr, decay", [
    ({"learning_rate": 1e-3}, 1e-3, 0.97),  # a rate set by hand keeps cfrnet's decay
    ({"lr_decay": 0.9}, 2e-3, 0.9),  # a decay set by hand: the linear-scaling rate
    ({"lr_decay": 1.0}, 2e-3, 1.0),
    ({"learning_rate": 4e-3, "lr_decay": 0.5}, 4e-3, 0.5),
    (PAPER_IHDP, 1e-3, 0.97),  # the paper's schedule
])
def test_the_fast_start_needs_both_step_settings_auto(params, lr, decay):
    """The fast start (8e-3 shrinking by 0.8 after a 50-step warm-up) is learning_rate="auto"
    with lr_decay="auto" at batches of up to 100 units; setting either by hand gives the rule
    before it, without a warm-up (models saved before it stored lr_decay=0.97, and so refit as
    they were trained)."""
    cfg = CFRConfig(**params).resolve(470)
    assert cfg.batch_size == 100 and cfg.lr_warmup == 0
    assert (cfg.learning_rate, cfg.lr_decay) == (pytest.approx(lr), pytest.approx(decay))
    assert not CFRConfig(**params).is_fast_start(470, 100)
    assert CFRConfig().is_fast_start(470, 100) and not CFRConfig().is_fast_start(4700, 101)
    assert not CFRConfig().is_fast_start(None, 100)  # a stream


def test_the_warm_up_raises_the_step_linearly_then_the_staircase_takes_over():
    """lr_warmup=w: step s (1, 2, ...) takes min(1, s/w) of the scheduled rate, which decays
    by lr_decay every lr_decay_steps as without a warm-up; the history records the rate the
    next step takes. 0 (or a rate set by hand with "auto") trains at the full rate at once."""
    from dowhy_cfr import CFR

    cfg = CFRConfig(lr_warmup=40).resolve(470)
    assert [cfg.warmup_factor(s) for s in (1, 20, 40, 41, 500)] == [1 / 40, 0.5, 1.0, 1.0, 1.0]
    assert CFRConfig(lr_warmup=0).resolve(470).warmup_factor(1) == 1.0
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    T = rng.binomial(1, 0.5, 300)
    Y = X[:, 0] + T + rng.normal(size=300)
    kw = dict(n_iter=120, eval_every=20, patience=None, n_ensemble=1, cross_fit=False,
              final_blend=False, random_state=0, verbose=0)
    rates = CFR(lr_warmup=40, lr_decay_steps=100, **kw).fit(Y, T, X=X).history_.groupby(
        "step").learning_rate.first()
    # after step s the optimiser holds step s + 1's rate: 8e-3 * (s + 1) / 40, then 8e-3, and
    # 8e-3 * 0.8 from step 101 on
    assert rates[20] == pytest.approx(8e-3 * 21 / 40) and rates[60] == pytest.approx(8e-3)
    assert rates[120] == pytest.approx(8e-3 * 0.8)
    plain = CFR(lr_warmup=0, **kw).fit(Y, T, X=X).history_.groupby("step").learning_rate.first()
    assert plain[20] == pytest.approx(8e-3) and plain[120] == pytest.approx(8e-3 * 0.8)


@pytest.mark.parametrize("value, error", [("slow", ValueError), (-1, ValueError),
                                          (2.5, TypeError), (True, TypeError)])
def test_lr_warmup_is_checked(value, error):
    with pytest.raises(error, match="lr_warmup"):
        CFRConfig(lr_warmup=value).validate()


@pytest.mark.parametrize("value, error", [("fast", ValueError), (0.0, ValueError),
                                          (1.5, ValueError), (True, TypeError)])
def test_lr_decay_is_checked(value, error):
    with pytest.raises(error, match="lr_decay"):
        CFRConfig(lr_decay=value).validate()


@pytest.mark.parametrize("n_train, alpha", [
    (470, 0.2),  # IHDP's training split: alpha in full
    (1200, 0.2),  # the realistic suite at n = 1,500 (K-fold members): in full
    (3200, 0.075),  # n = 4,000: 0.2 * 1200 / 3200
    (8000, 0.03),  # n = 10,000
    (None, 0.2),  # a stream of unknown size: as given
])
def test_alpha_falls_in_inverse_proportion_beyond_alpha_units(n_train, alpha):
    cfg = CFRConfig().resolve(n_train)
    assert cfg.alpha == pytest.approx(alpha)
    assert cfg.alpha_units is None and cfg.resolve(n_train).alpha == cfg.alpha  # idempotent
    assert CFRConfig(alpha_units=None).resolve(n_train).alpha == 0.2  # the paper's: any size
    assert CFRConfig(alpha=0.0).resolve(n_train).alpha == 0.0  # TARNet stays TARNet


@pytest.mark.parametrize("n_train, batch_size, backprop", [
    (470, "auto", True),  # IHDP: batches of 100, the gradient through Sinkhorn's iterations
    (1600, "auto", True),  # designs A-E at n = 2,000 (K-fold members): unchanged
    (2001, "auto", False),  # batches of 251: the transport plan held fixed
    (3200, "auto", False),  # n = 4,000: batches of 400
    (None, "auto", True),  # a stream: batches of 100
    (10**5, 150, True),  # a batch set by hand decides too
    (10**5, 200, False),
    (150, 400, True),  # a batch larger than the split: the split's 150 units per step
])
def test_auto_wass_backprop_follows_the_batch(n_train, batch_size, backprop):
    cfg = CFRConfig(batch_size=batch_size).resolve(n_train)
    assert cfg.wass_backprop is backprop
    assert cfg.ipm_kwargs()["wass_backprop"] is backprop
    assert cfg.resolve(n_train).wass_backprop is backprop  # idempotent
    for given in (True, False):  # an explicit choice is kept at every batch
        assert CFRConfig(batch_size=batch_size, wass_backprop=given).resolve(
            n_train).wass_backprop is given
    assert CFRConfig().ipm_kwargs()["wass_backprop"] is True  # unresolved: no gradient asked
    assert CFRConfig().paper().resolve(n_train).wass_backprop is True  # the authors' wass_bpt 1


def test_ipm_subset_keeps_the_groups_in_proportion():
    from dowhy_cfr.core.objective import ipm_subset

    blocks = [torch.randn(3, n, 4) for n in (280, 120)]  # a batch of 400, treated share 0.3
    kept = ipm_subset(blocks, 200)
    assert [b.shape[1] for b in kept] == [140, 60]
    for b, k in zip(blocks, kept):  # the first rows: a random subset (the batches' own order)
        assert torch.equal(k, b[:, : k.shape[1]])
    strata = [torch.randn(2, 100, 4) for _ in range(4)]  # dose strata: equal stay equal
    assert [b.shape[1] for b in ipm_subset(strata, 200)] == [50] * 4
    assert [b.shape[1] for b in ipm_subset([torch.randn(1, 399, 2), torch.randn(1, 1, 2)],
                                           200)] == [200, 1]  # every group keeps a row
    assert ipm_subset(blocks, None) is blocks and ipm_subset(blocks, 400) is blocks


def test_the_batch_ipm_uses_at_most_ipm_max_units():
    """Only the batch's IPM changes: a cap at or above the batch trains to the bit as no cap,
    a binding cap trains otherwise (its IPM on fewer units)."""
    x, t, y, tr, va = core_data()
    kw = dict(train_idx=tr[None], val_idx=va[None], seeds=[0])
    base = {**CORE_SMALL, "alpha": 1.0, "batch_size": 64}
    runs = {cap: train_cfr(x, t, y, config=CFRConfig(**base, ipm_max_units=cap), **kw)
            for cap in (None, 64, 16)}
    full, same, capped = (np.asarray(runs[c].history["val_objective"]) for c in (None, 64, 16))
    np.testing.assert_array_equal(full, same)
    assert not np.allclose(full[1:], capped[1:])
    assert np.isfinite(capped).all()


def test_ipm_every_k_puts_the_ipm_in_every_kth_step_at_k_times_alpha(monkeypatch):
    """Algorithm 1 with ``ipm_every=k``: the batch's IPM in each of the first
    ``IPM_EVERY_FROM`` steps at ``alpha`` (here 10), then on every k-th step only, at ``k *
    alpha``; the other steps' objective is the factual loss alone. The validation objective
    keeps ``alpha`` at every check, and the recorded training IPM is the mean over the steps
    that computed it (not diluted by the others)."""
    from dowhy_cfr.core import training

    x, t, y, tr, va = core_data()
    kw = dict(train_idx=tr[None], val_idx=va[None], seeds=[0])
    calls = []

    def spy(risk, imb, penalty, alpha, weight_decay):
        if penalty is None:  # a training step (validation passes the L2 value)
            calls.append((float(alpha[0]), bool((imb != 0).all())))
        return eq3(risk, imb, penalty, alpha, weight_decay)

    eq3 = training.eq3
    monkeypatch.setattr(training, "eq3", spy)
    monkeypatch.setattr(training, "IPM_EVERY_FROM", 10)
    base = {**CORE_SMALL, "alpha": 0.5, "n_iter": 40, "eval_every": 10, "patience": None,
            "weight_decay": 0.0}
    for k in (1, 2, 3):
        calls.clear()
        res = train_cfr(x, t, y, config=CFRConfig(**base, ipm_every=k), **kw)
        assert len(calls) == 40
        for step, (alpha, with_ipm) in enumerate(calls, start=1):
            due = step <= 10 or (step - 11) % k == 0
            assert with_ipm is due, (k, step)
            if due:
                assert alpha == pytest.approx(0.5 * (k if step > 10 else 1))
        train_ipm = np.asarray(res.history["train_imbalance"])[1:, 0]
        assert np.isfinite(train_ipm).all() and (train_ipm > 0.01).all()
        val = np.asarray(res.history["val_objective"])[:, 0]
        val_eq3 = (np.asarray(res.history["val_loss"])[:, 0]
                   + 0.5 * np.asarray(res.history["val_imbalance"])[:, 0])
        np.testing.assert_allclose(val, val_eq3, rtol=1e-6)  # alpha, not k * alpha


def test_ipm_every_skips_steps_only_after_the_start_and_leaves_tarnet_alone():
    """The first ``IPM_EVERY_FROM`` (200) steps are Algorithm 1's whatever ``ipm_every``: a fit
    that ends by then trains to the bit as with 1 (``PAPER_IHDP``'s); one that runs on trains
    otherwise. Without a penalty (``alpha=0``) the setting changes nothing and the training IPM
    reads 0."""
    from dowhy_cfr.core.config import IPM_EVERY_FROM

    x, t, y, tr, va = core_data()
    kw = dict(train_idx=tr[None], val_idx=va[None], seeds=[0])
    assert PAPER_IHDP["ipm_every"] == 1 and CFRConfig().ipm_every == 2 and IPM_EVERY_FROM == 200

    def history(n_iter, alpha, k):
        cfg = CFRConfig(**{**CORE_SMALL, "n_iter": n_iter, "eval_every": 20, "patience": None,
                           "alpha": alpha, "ipm_every": k})
        res = train_cfr(x, t, y, config=cfg, **kw)
        assert not res.diverged.any()
        return res.history

    start = [np.asarray(history(200, 1.0, k)["val_objective"]) for k in (1, 2)]
    np.testing.assert_array_equal(*start)
    later = [np.asarray(history(300, 1.0, k)["val_objective"]) for k in (1, 2)]
    np.testing.assert_array_equal(later[0][:11], later[1][:11])  # steps 0-200
    assert not np.allclose(later[0][11:], later[1][11:])
    tarnet = [history(300, 0.0, k) for k in (1, 2)]
    np.testing.assert_array_equal(*(np.asarray(h["val_objective"]) for h in tarnet))
    np.testing.assert_array_equal(np.asarray(tarnet[1]["train_imbalance"])[1:], 0.0)


def test_bad_ipm_every_is_a_clear_error():
    with pytest.raises(ValueError, match="ipm_every=0 is invalid: give a positive integer"):
        CFRConfig(ipm_every=0).validate()
    with pytest.raises(TypeError, match="ipm_every must be an integer"):
        CFRConfig(ipm_every=1.5).validate()


def test_bad_ipm_max_units_is_a_clear_error():
    with pytest.raises(ValueError, match="ipm_max_units=1 is invalid: the IPM needs"):
        CFRConfig(ipm_max_units=1).validate()
    with pytest.raises(TypeError, match="ipm_max_units must be an integer"):
        CFRConfig(ipm_max_units=2.5).validate()


def test_bad_wass_backprop_is_a_clear_error():
    with pytest.raises(ValueError, match="wass_backprop='fixed' is invalid: use True"):
        CFRConfig(wass_backprop="fixed").validate()
    with pytest.raises(ValueError, match="wass_backprop=1 is invalid"):
        CFRConfig(wass_backprop=1).validate()


@pytest.mark.parametrize("value, error, match", [
    (0, ValueError, "alpha_units=0 is invalid: must be a positive number"),
    (2.5, TypeError, "alpha_units must be an integer"),
])
def test_bad_alpha_units_is_a_clear_error(value, error, match):
    with pytest.raises(error, match=match):
        CFRConfig(alpha_units=value).validate()


def test_explicit_batch_and_learning_rate_are_kept():
    cfg = CFRConfig(batch_size=64, learning_rate=1e-3).resolve(10**5)
    assert (cfg.batch_size, cfg.learning_rate) == (64, 1e-3)
    assert CFRConfig(batch_size=300).resolve(500).learning_rate == pytest.approx(6e-3)
    # a large batch set by hand keeps the largest rate measured (batch 400: 8e-3)
    assert CFRConfig(batch_size=4096).resolve(10**5).learning_rate == pytest.approx(8e-3)
    with pytest.raises(ValueError, match="batch_size='big' is invalid: give a number of units"):
        CFRConfig(batch_size="big").validate()
    with pytest.raises(ValueError, match="learning_rate='fast' is invalid"):
        CFRConfig(learning_rate="fast").validate()
    with pytest.raises(TypeError, match="batch_size must be an integer"):
        CFRConfig(batch_size=2.5).validate()


def test_auto_step_limit_follows_the_training_split(monkeypatch):
    from dowhy_cfr.core import config

    monkeypatch.setattr(config, "AUTO_MIN_STEPS", 5)
    monkeypatch.setattr(config, "AUTO_EPOCHS", 2)
    monkeypatch.setattr(config, "AUTO_MAX_STEPS", 12)
    x, t, y, tr, va = core_data()
    cfg = CFRConfig(**{**CORE_SMALL, "n_iter": "auto", "eval_every": 5, "patience": None})
    res = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None], config=cfg, seeds=[0])
    assert res.n_steps == int(np.ceil(2 * len(tr) / 32)) == 9  # 2 epochs of 140 units
    assert res.history["step"][-1] == 9  # the last step is evaluated
    assert cfg.n_iter == "auto"  # the caller's configuration is left as it was


def test_history_records_initial_state_and_objective():
    x, t, y, tr, va = core_data()
    cfg = CFRConfig(**CORE_SMALL)
    res = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None], config=cfg, seeds=[0])
    h = res.history
    assert list(h["step"]) == [0, 20, 40, 60]
    assert np.isnan(h["train_loss"][0, 0])
    assert np.all(np.isfinite(h["train_loss"][1:]))
    obj = h["val_loss"] + cfg.alpha * h["val_imbalance"]
    assert np.all(h["val_objective"] >= obj - 1e-6)  # plus the weight penalty
    resolved = cfg.resolve(len(tr))  # the first step's rate: the fast start's warm-up
    assert resolved.lr_warmup == 50 and h["learning_rate"][0] == pytest.approx(
        resolved.learning_rate / 50)


def test_divergence_is_a_clear_error():
    x, t, y, tr, va = core_data()
    y = y.clone()
    y[0] = float("inf")  # core receives already-validated data; simulate blow-up
    cfg = CFRConfig(**CORE_SMALL)
    with pytest.raises(TrainingDivergedError, match="non-finite"):
        train_cfr(x, t, y, train_idx=tr[None], val_idx=torch.cat([va, tr[:0]])[None],
                  config=cfg, seeds=[0])


def test_a_diverging_model_leaves_the_others_untouched():
    """K=3 with the middle model at weight_decay=1e39: it fails at once (no checkpoint) and is
    reported; the other two follow their solo trajectories up to float rounding (this used to
    abort the whole stack at step 1)."""
    x, t, y, tr, va = core_data()
    cfg = CFRConfig(**{**CORE_SMALL, "n_iter": 200, "eval_every": 10, "patience": 3})
    seeds = [1, 2, 3]
    with pytest.warns(RuntimeWarning, match=r"model\(s\) \[1\] became non-finite"):
        res = train_cfr(x, t, y, train_idx=tr.expand(3, -1), val_idx=va.expand(3, -1),
                        config=cfg, seeds=seeds, weight_decay=[1e-4, 1e39, 1e-4])
    assert res.diverged.tolist() == [False, True, False]
    assert res.failed.tolist() == [False, True, False]
    out = predict(res.net, x)
    for i in (0, 2):
        single = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None], config=cfg,
                           seeds=[seeds[i]])
        # measured after 200 steps: outputs 1.3e-5, val loss 1.2e-5 relative; outputs ~1
        torch.testing.assert_close(predict(single.net, x)[0], out[i], rtol=0, atol=5e-4)
        assert single.best_step[0] == res.best_step[i]
        n = len(single.history["step"])
        np.testing.assert_allclose(res.history["val_loss"][:n, i],
                                   single.history["val_loss"][:, 0], rtol=1e-4)
        np.testing.assert_array_equal(res.history["learning_rate"][:n],
                                      single.history["learning_rate"])


@pytest.mark.parametrize("include_representation", [False, True])
def test_penalty_gradient_equals_autograd_through_the_penalty(include_representation):
    """The training step adds lambda_k * W to the gradients instead of back-propagating
    lambda * R(h): the same gradient, per model, for every weight (penalised or not)."""
    net = CFRNet(4, [1, 2], n_rep_layers=2, rep_dim=8, n_head_layers=1, head_dim=8)
    x, wd = torch.randn(2, 10, 4), torch.tensor([0.3, 2.0])
    phi, out = net(x)
    loss = out.pow(2).sum() + phi.sum()
    objective = loss + (wd * net.weight_penalty(include_representation)).sum()
    expected = torch.autograd.grad(objective, list(net.parameters()), retain_graph=True)
    without = torch.autograd.grad(loss, list(net.parameters()), retain_graph=True)
    loss.backward()
    net.add_penalty_gradient(wd, include_representation)
    penalised = {id(w) for w in net.head_weights}
    if include_representation:
        penalised |= {id(w) for w in net.rep_weights}
    for p, g, g_loss in zip(net.parameters(), expected, without):
        assert torch.allclose(p.grad, g, rtol=1e-6, atol=1e-7)
        assert torch.equal(p.grad, g_loss) != (id(p) in penalised)  # only those get the term


def test_config_validation_names_the_parameter():
    with pytest.raises(ValueError, match="alpha"):
        CFRConfig(alpha=-1).validate()
    with pytest.raises(ValueError, match="ipm"):
        CFRConfig(ipm="mmd").validate()
    with pytest.raises(ValueError, match="val_fraction"):
        CFRConfig(val_fraction=1.0).validate()
    with pytest.raises(TypeError, match="n_iter"):
        CFRConfig(n_iter=10.5).validate()
    with pytest.raises(ValueError, match="n_iter='many'.*'auto'"):
        CFRConfig(n_iter="many").validate()
    with pytest.raises(ValueError, match="n_iter"):
        CFRConfig(n_iter=0).validate()
    with pytest.raises(ValueError, match="patience"):
        CFRConfig(patience=0).validate()
    with pytest.raises(ValueError, match="ema_decay=1.0 is invalid.*0 keeps the last iterate"):
        CFRConfig(ema_decay=1.0).validate()
    with pytest.raises(TypeError, match="ema_decay"):
        CFRConfig(ema_decay="slow").validate()


def test_weight_penalty_is_half_the_squared_norm_with_gradient_w():
    net = CFRNet(4, [1, 2], n_rep_layers=1, rep_dim=8, n_head_layers=1, head_dim=8)
    weights = list(net.head_weights) + list(net.rep_weights)
    penalty = net.weight_penalty(include_representation=True)
    expected = (sum(w.pow(2).sum(dim=(1, 2, 3)) for w in net.head_weights)
                + sum(w.pow(2).sum(dim=(1, 2)) for w in net.rep_weights)) * 0.5
    assert torch.allclose(penalty, expected)
    scale = torch.tensor([3.0, -2.0])  # per-model weights of the penalty (weight_decay)
    grads = torch.autograd.grad((penalty * scale).sum(), weights)
    for g, w in zip(grads, weights):
        assert torch.allclose(g, scale.view(-1, *([1] * (w.dim() - 1))) * w)
    assert torch.equal(net.weight_penalty()[0], CFRNet(4, [1], n_rep_layers=1, rep_dim=8,
                                                       n_head_layers=1,
                                                       head_dim=8).weight_penalty()[0])


@pytest.mark.parametrize("ipm", ["wass", "mmd2_rbf"])
def test_validation_imbalance_on_arm_blocks_equals_the_masked_ipm(ipm):
    """The recorded validation IPM (arm blocks, models grouped by their arm counts) equals the
    masked IPM of each model's validation representations, for models whose validation splits
    have different arm counts."""
    from dowhy_cfr.core.objective import arm_imbalance

    x, t, y, _, _ = core_data(n=240, seed=5)
    g = torch.Generator().manual_seed(6)
    perms = torch.stack([torch.randperm(240, generator=g) for _ in range(3)])
    train_idx, val_idx = perms[:, :160], perms[:, 160:]
    config = CFRConfig(**{**CORE_SMALL, "n_iter": 10, "eval_every": 10}, patience=None, ipm=ipm,
                       rbf_sigma=1.0)
    res = train_cfr(x, t, y, train_idx=train_idx, val_idx=val_idx, config=config,
                    seeds=[0, 1, 2])
    counts = {int((t[v] == 1).sum()) for v in val_idx}
    assert len(counts) > 1  # the groups differ
    assert list(res.best_step) == [10, 10, 10]
    recorded = torch.as_tensor(res.history["val_imbalance"][-1], dtype=torch.float32)
    for k in range(3):
        _, phi = predict(res.net.select([k]), x[val_idx[k]], representation=True)
        masked = arm_imbalance(phi, t[val_idx[k]].unsqueeze(0), 2, config.ipm_kwargs())
        # the IPMs are differences of O(1) kernel means: float32 rounding of the means (eps
        # 1.2e-7 each) is an absolute error of a few 1e-7 (measured up to 1.2e-7 for mmd2_rbf)
        torch.testing.assert_close(recorded[k], masked[0], rtol=1e-5, atol=5e-7)


@pytest.mark.parametrize("reweight", [True, False])
def test_batch_weights_follow_the_batch_arm_counts(reweight):
    """Batches with fixed arm counts give each arm its intended share of the weight: 1/2 with
    reweight_sample (Algorithm 1's w_i; every batch), the training share without. At 1.5%
    treated the batch's single treated units are rounded up, and with the training shares'
    weights the treated arm got 0.40 of each batch's weight (issue #29, defect 5)."""
    from dowhy_cfr.core.training import StackedRun, sample_weights

    n = 1000
    t = torch.zeros(1, n, dtype=torch.long)
    t[0, :15] = 1  # 1.5% treated
    x, y = torch.randn(1, n, 3), torch.randn(1, n)
    rows = torch.arange(n).unsqueeze(0)
    cfg = CFRConfig(batch_size=100, reweight_sample=reweight).resolve(n)
    run = StackedRun(x, t, y, train_idx=rows, val_idx=rows, config=cfg, seeds=[0], n_arms=2,
                     batch_source=None, arm_shares=None, model_wrapper=None, gather_ipm=None,
                     alpha=None, weight_decay=None, per_model_data=True, device="cpu")
    for _ in range(3):
        _, tb, _ = run.batches.next()
        w = sample_weights(tb, run.batch_shares)
        treated_share = float(w[tb == 1].sum() / w.sum())
        expected = 0.5 if reweight else 0.015
        assert treated_share == pytest.approx(expected, rel=1e-6)
        assert float(w.sum()) == pytest.approx(100, rel=1e-6)  # the batch's loss is a mean
    old = sample_weights(tb, run.shares)  # the training shares' weights, as before the fix
    if reweight:
        assert float(old[tb == 1].sum() / old.sum()) < 0.45


def test_training_flushes_denormals_and_restores_the_default():
    """Subnormal floats are flushed to zero while training (they slow CPUs 10-100 fold: a fit
    took 2x longer in issue #30) and torch's default is back afterwards."""
    seen = []
    x, t, y = torch.randn(80, 3), torch.randint(0, 2, (80,)), torch.randn(80)
    t[:2] = torch.tensor([0, 1])
    rows = torch.arange(80).unsqueeze(0)
    train_cfr(x, t, y, train_idx=rows, val_idx=rows, config=CFRConfig(**{**CORE_SMALL, "n_iter": 20}),
              seeds=[0], progress=lambda step, info: seen.append(
                  float(torch.tensor([1e-39], dtype=torch.float32)[0])))
    assert seen and all(v == 0.0 for v in seen)
    assert float(torch.tensor([1e-39], dtype=torch.float32)[0]) > 0


@pytest.mark.parametrize("beside", [True, False])
def test_evaluations_beside_the_training_change_nothing(monkeypatch, beside):
    """Validation evaluations run in a second thread where a core is free (one torch thread on
    the CPU) and the validation split is large; the evaluation of step s is concluded at step
    s + eval_every either way, so the checkpoints, stops and history are the same bit for bit
    as inline."""
    import threading

    from dowhy_cfr.core import training

    x, t, y, tr, va = core_data()
    cfg = CFRConfig(**{**CORE_SMALL, "n_iter": 600, "eval_every": 10, "patience": 2,
                       "learning_rate": 0.03})  # with the default averaged weights
    # (ema_decay) a step of 0.01 ran every member to the step limit: 0.03 makes them stop
    threads = set()
    evaluate = training.StackedRun.validation_eq3

    def spy(self, net):
        threads.add(threading.get_ident())
        return evaluate(self, net)

    monkeypatch.setattr(training.StackedRun, "validation_eq3", spy)
    monkeypatch.setattr(training.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs = {}
        for on in (beside, not beside):
            monkeypatch.setattr(training, "BESIDE_FROM_VAL_UNITS", 0 if on else 10**9)
            threads.clear()
            runs[on] = train_cfr(x, t, y, train_idx=tr.expand(4, -1), val_idx=va.expand(4, -1),
                                 config=cfg, seeds=[1, 2, 3, 4])
            assert (threading.get_ident() in threads) != on  # beside: never the caller's thread
    finally:
        torch.set_num_threads(before)
    a, b = runs[True], runs[False]
    assert len(set(a.best_step.tolist())) > 1  # members stopped at different evaluations
    np.testing.assert_array_equal(a.best_step, b.best_step)
    assert a.n_steps == b.n_steps
    for key in ("step", "val_objective", "train_loss", "learning_rate"):
        np.testing.assert_array_equal(a.history[key], b.history[key])
    assert torch.equal(predict(a.net, x), predict(b.net, x))


@pytest.mark.parametrize("stop_quorum, expected_at_50", [(0.6, [True, True, True]),
                                                         (1.0, [False, True, True])])
def test_members_of_one_ensemble_stop_together_at_its_quorum(stop_quorum, expected_at_50):
    """Ensemble 7 (models 0-2) needs 2 stopped members at stop_quorum 0.6, ensemble 9 (models 3,
    4) both; min_wait 30. Bests: all at step 10, models 0, 1, 4 again at 20, model 0 at 30."""
    from dowhy_cfr.core.stopping import Checkpoints

    config = CFRConfig(**CORE_SMALL, stop_quorum=stop_quorum)
    net = CFRNet.from_config(config, 3, [0, 1, 2, 3, 4])
    cp = Checkpoints(net, min_wait=30, relative_patience=0.0, ensembles=[7, 7, 7, 9, 9],
                     quorum=config.quorum_size)
    live = np.arange(5)
    cp.update(net, live, np.full(5, 1.0), step=10)
    cp.update(net, live, np.array([0.9, 0.9, 2.0, 2.0, 0.9]), step=20)
    cp.update(net, live, np.array([0.8, 2.0, 2.0, 2.0, 2.0]), step=30)
    # step 40: models 2 and 3 have waited 30 steps; neither ensemble has its quorum (model 4
    # trains on although its partner stopped: ensemble 9 needs both)
    assert cp.waited_enough(live, 40).tolist() == [False, False, True, True, False]
    # step 50: models 1 and 4 have waited; ensemble 7 now has 2 stopped members, so model 0,
    # which has waited only 20 steps since its best, stops with them at 0.6, not at 1.0
    assert cp.waited_enough(np.array([0, 1, 4]), 50).tolist() == expected_at_50
    assert cp.step.tolist() == [30, 20, 10, 10, 20]  # each keeps its own best checkpoint


def test_k_fold_members_judge_by_the_other_members_folds():
    """stop_on_others: a member's criterion is the geometric mean objective of the other live
    members of its ensemble (never its own, which is measured on the fold it predicts out of
    fold); its own objective only enters the others'. Such members stop only with the
    ensemble's quorum."""
    from dowhy_cfr.core.stopping import Checkpoints

    config = CFRConfig(**CORE_SMALL, stop_quorum=0.4)
    net = CFRNet.from_config(config, 3, [0, 1, 2, 3, 4])
    cp = Checkpoints(net, min_wait=20, relative_patience=0.0, ensembles=[0, 0, 0, 0, 1],
                     quorum=config.quorum_size, on_others=[True, True, True, True, True])
    live = np.arange(5)
    objective = np.array([1.0, 2.0, 3.0, 4.0, 7.0])
    others = [np.exp(np.mean(np.log(np.delete(objective[:4], j)))) for j in range(4)]
    np.testing.assert_allclose(cp.criterion(live, objective), others + [7.0])  # 4: alone
    # a member's own objective does not move its criterion
    lower_own = objective.copy()
    lower_own[0] = 1e-6
    assert cp.criterion(live, lower_own)[0] == pytest.approx(others[0])
    # a non-finite objective is left out of the others' means
    np.testing.assert_allclose(cp.criterion(live, np.array([np.nan, 2, 3, 4, 7.0]))[1:4],
                               [np.sqrt(12), np.sqrt(8), np.sqrt(6)])
    # one fold ten times the others' loss does not decide the others' checkpoints: its
    # member's drop counts by its relative size
    cp.update(net, live, np.ones(5), step=10)
    cp.update(net, live, np.array([10.0, 0.9, 0.9, 0.9, 0.9]), step=20)  # better for 0 only
    assert cp.step.tolist() == [20, 10, 10, 10, 20]
    # step 30: members 1-3 have waited 20 steps, member 0 only 10; two of four is the quorum,
    # so the ensemble stops together; model 4 (its own ensemble) has not waited
    assert cp.waited_enough(live, 30).tolist() == [True, True, True, True, False]
    cp2 = Checkpoints(net, min_wait=20, relative_patience=0.0, ensembles=[0] * 5,
                      quorum=lambda k: 5, on_others=[True] * 5)
    cp2.update(net, live, np.ones(5), step=10)
    cp2.update(net, live, np.array([10.0, 0.9, 0.9, 0.9, 0.9]), step=20)
    assert cp2.step.tolist() == [20, 10, 10, 10, 10]
    assert cp2.waited_enough(live, 30).tolist() == [False] * 5  # 1-4 waited: no one leaves
    assert cp2.waited_enough(live, 40).tolist() == [True] * 5


def test_stop_quorum_is_checked():
    with pytest.raises(ValueError, match="stop_quorum"):
        CFRConfig(stop_quorum=0.0).validate()
    assert [CFRConfig().quorum_size(k) for k in (1, 2, 3, 5, 10)] == [1, 1, 2, 2, 4]


def test_feature_scaling_adds_one_scale_per_column_and_starts_as_the_plain_network():
    """``feature_scaling``: a (K, 1, d_in) scale parameter at 1 + rate * 0, so that at
    initialisation the network is the plain one (same seeds, same outputs); without it the
    parameters are exactly the paper's."""
    x = torch.randn(2, 7, 4)
    plain = CFRNet(4, [3, 4], feature_scaling=False)
    scaled = CFRNet(4, [3, 4], feature_scaling=True)
    assert len(plain.input_scales) == 0 and scaled.input_scales[0].shape == (2, 1, 4)
    assert (sum(p.numel() for p in scaled.parameters())
            == sum(p.numel() for p in plain.parameters()) + 8)
    for a, b in zip(plain(x), scaled(x)):
        torch.testing.assert_close(a, b)


def test_feature_scaling_learns_which_columns_matter():
    """Trained on an outcome of column 0 alone, every member keeps column 0's scale near 1 and
    shrinks the five noise columns' (measured, seeds 0-2: column 0 at 1.02-1.13, the noise
    columns at 0.35-0.81); after one step all scales are still within 0.02 of 1, so the gap is
    learned."""
    from dowhy_cfr import CFR
    from dowhy_cfr.core.network import FEATURE_SCALE_RATE

    rng = np.random.default_rng(0)
    n = 600
    X = rng.normal(size=(n, 6))
    T = (rng.uniform(size=n) < 0.5).astype(int)
    Y = 2 * X[:, 0] + T * (1 + X[:, 0]) + 0.3 * rng.normal(size=n)

    def scales(n_iter):
        est = CFR(random_state=0, verbose=0, n_iter=n_iter, patience=None, n_ensemble=2)
        theta = est.fit(Y, T, X=X).fitted_.members.net.input_scales[0]
        return 1 + FEATURE_SCALE_RATE * theta.detach().numpy()[:, 0, :]

    trained = scales(300)
    assert np.all(trained[:, 0] > trained[:, 1:].max(1) + 0.15)
    assert np.abs(scales(1) - 1).max() < 0.02


@pytest.mark.parametrize("feature_scaling", [True, False])
def test_parameter_lists_hold_every_parameter_so_compaction_slices_them_all(feature_scaling):
    """compact_stack slices CFRNet.parameter_lists(); a parameter outside them would keep the
    stopped models' rows (also for the dose network, which adds none)."""
    from dowhy_cfr.core import DoseNet

    for net in (CFRNet(4, [1, 2], feature_scaling=feature_scaling),
                DoseNet(4, [1, 2], feature_scaling=feature_scaling)):
        listed = [id(p) for plist in net.parameter_lists() for p in plist]
        assert sorted(listed) == sorted(id(p) for p in net.parameters())


# ------------------------------------------------------------------ averaged weights (ema_decay)
def test_weight_average_follows_the_warmed_up_decay_and_keeps_the_models_that_stay():
    """After step s the average is beta_s * previous + (1 - beta_s) * iterate, with
    beta_s = min(decay, (1 + s) / (10 + s)); compaction keeps the kept models' rows."""
    from dowhy_cfr.core.training import WeightAverage

    net = CFRNet(3, [0, 1, 2], n_rep_layers=1, rep_dim=4, n_head_layers=1, head_dim=4)
    start = [p.detach().clone() for p in net.parameters()]
    average = WeightAverage(net, 0.99)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    average.update(net, 1)  # beta_1 = 2 / 11
    for a, w0 in zip(average.weights, start):
        torch.testing.assert_close(a, w0 + 9 / 11)
    average.update(net, 5000)  # beta = the decay
    for a, w0 in zip(average.weights, start):
        torch.testing.assert_close(a, w0 + 9 / 11 + 0.01 * (1 - 9 / 11))
    before = [a.clone() for a in average.weights]
    average.keep(torch.tensor([True, False, True]))
    for a, b in zip(average.weights, before):
        torch.testing.assert_close(a, b[[0, 2]])


def _validation_wiggle(ema_decay):
    """Mean absolute change of each model's validation objective between evaluations 300-600
    steps into a fit of batches of 16 at a high learning rate (a noisy iterate)."""
    x, t, y, tr, va = core_data(n=400)
    cfg = CFRConfig(**{**CORE_SMALL, "batch_size": 16, "n_iter": 600, "eval_every": 10,
                       "learning_rate": 1e-2, "lr_decay": 1.0, "ema_decay": ema_decay},
                    patience=None)
    res = train_cfr(x, t, y, train_idx=tr.expand(3, -1), val_idx=va.expand(3, -1), config=cfg,
                    seeds=[0, 1, 2])
    steps, curve = res.history["step"], res.history["val_objective"]
    return float(np.abs(np.diff(curve[steps >= 300], axis=0)).mean())


def test_validation_sees_the_averaged_weights():
    """With ``ema_decay`` the validation objective (and so the checkpoints) follows the average
    of the iterates: between evaluations it moves far less than the iterate's does (measured:
    0.0005 against 0.0091, a twentieth; asserted: below a quarter)."""
    iterate, averaged = _validation_wiggle(0.0), _validation_wiggle(0.99)
    assert averaged < 0.25 * iterate, (averaged, iterate)


# ------------------------------------------------------------------ Adam on one buffer (FlatAdam)
def _stack_loss(net, x):
    """A loss whose gradient reaches every parameter, summed over the models (independent)."""
    phi, out = net(x)
    return out.pow(2).sum() + phi.tanh().sum()


def _adam_run(net, opt, x, steps, *, wd=None):
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        _stack_loss(net, x).backward()
        if wd is not None:
            net.add_penalty_gradient(wd)
        opt.step()


def test_flat_adam_is_torch_adam_on_one_buffer():
    """FlatAdam's update is torch.optim.Adam's single-tensor one, element for element (equal to
    the bit here), and the parameters and gradients stay views of its two buffers."""
    from dowhy_cfr.core.optim import FlatAdam

    x = torch.randn(3, 20, 5)
    ours, theirs = (CFRNet(5, [0, 1, 2], rep_dim=8, head_dim=8, feature_scaling=True)
                    for _ in range(2))
    opt = FlatAdam(ours.parameters(), 1e-2)
    ref = torch.optim.Adam(theirs.parameters(), lr=1e-2, foreach=False)
    _adam_run(ours, opt, x, 30)
    _adam_run(theirs, ref, x, 30)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        assert torch.equal(p, q)
    start, end = opt.flat.data_ptr(), opt.flat.data_ptr() + opt.flat.numel() * 4
    assert all(start <= p.data_ptr() < end for p in ours.parameters())
    gstart = opt.grad.data_ptr()
    assert all(gstart <= p.grad.data_ptr() < gstart + opt.grad.numel() * 4
               for p in ours.parameters())
    assert float(opt.grad.abs().sum()) > 0  # autograd accumulated into the buffer


def test_flat_adam_compaction_keeps_each_kept_models_trajectory():
    """Models 0 and 2 of a stack of three, compacted after 5 of 10 steps, end where each would
    alone (same seeds, same data): the moments and the step count move with them."""
    from dowhy_cfr.core.stopping import adam, compact_stack

    x = torch.randn(20, 5)
    net = CFRNet(5, [7, 8, 9], rep_dim=8, head_dim=8)
    opt = adam(net.parameters(), 1e-2)
    _adam_run(net, opt, x.expand(3, -1, -1), 5)
    opt = compact_stack(net, opt, torch.tensor([True, False, True]))
    _adam_run(net, opt, x.expand(2, -1, -1), 5)
    for position, seed in enumerate([7, 9]):
        alone = CFRNet(5, [seed], rep_dim=8, head_dim=8)
        _adam_run(alone, adam(alone.parameters(), 1e-2), x.expand(1, -1, -1), 10)
        for p, q in zip(net.parameters(), alone.parameters()):
            torch.testing.assert_close(p[position], q[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("include_representation", [False, True])
def test_flat_penalty_buffer_is_the_penalty_gradient(include_representation):
    """The L2 gradient added on FlatAdam's buffer in one operation equals
    ``add_penalty_gradient``'s, per parameter (effect heads with their multiplier too)."""
    from dowhy_cfr.core.optim import FlatAdam

    net = CFRNet(4, [1, 2], rep_dim=8, head_dim=8, head_form="effect", effect_penalty=10.0)
    wd = torch.tensor([0.3, 2.0])
    opt = FlatAdam(net.parameters(), 1e-3)
    opt.add_scaled(opt.buffer_of(dict(net.penalty_scales(wd, include_representation))))
    flat = [g.clone() for g in opt.views(opt.grad)]
    for p in net.parameters():
        p.grad = None
    net.add_penalty_gradient(wd, include_representation)
    for p, g in zip(net.parameters(), flat):
        expected = torch.zeros_like(p) if p.grad is None else p.grad
        torch.testing.assert_close(g, expected)
    assert sum(bool(g.abs().sum() > 0) for g in flat) == 3 + 2 * include_representation


def test_weight_average_on_the_flat_buffer_is_the_per_tensor_average():
    """With FlatAdam the weight average is one operation on its buffer: the same averages as
    the per-tensor update, before and after compaction."""
    from dowhy_cfr.core.stopping import adam, compact_stack
    from dowhy_cfr.core.training import WeightAverage

    x = torch.randn(3, 20, 4)
    net = CFRNet(4, [0, 1, 2], rep_dim=8, head_dim=8)
    opt = adam(net.parameters(), 1e-2)
    flat, plain = WeightAverage(net, 0.9, opt), WeightAverage(net, 0.9)
    for step in range(1, 6):
        _adam_run(net, opt, x, 1)
        flat.update(net, step)
        plain.update(net, step)
    for a, b in zip(flat.weights, plain.weights):
        torch.testing.assert_close(a, b)
    keep = torch.tensor([False, True, True])
    opt = compact_stack(net, opt, keep)
    flat.keep(keep, opt)
    plain.keep(keep)
    _adam_run(net, opt, x[1:], 1)
    flat.update(net, 6)
    plain.update(net, 6)
    for a, b, p in zip(flat.weights, plain.weights, net.parameters()):
        assert a.shape == p.shape
        torch.testing.assert_close(a, b)


def test_tol_stops_a_creeping_model_sooner_and_keeps_its_best():
    """A best that improves the objective by less than ``tol`` does not reset the wait: with
    ``tol`` 0.05 the same training stops sooner than with 0, from the same trajectory (the two
    agree up to the earlier stop), and still keeps its best checkpoint."""
    x, t, y, tr, va = core_data()
    runs = {}
    for tol in (0.0, 0.05):
        cfg = CFRConfig(**{**CORE_SMALL, "n_iter": 2000, "eval_every": 10, "patience": 3,
                           "learning_rate": 0.01, "relative_patience": 0.5, "tol": tol,
                           "alpha": 0.05})
        runs[tol] = train_cfr(x, t, y, train_idx=tr[None], val_idx=va[None], config=cfg,
                              seeds=[0])
    slow, fast = runs[0.0], runs[0.05]
    assert fast.n_steps < slow.n_steps
    m = len(fast.history["step"])
    np.testing.assert_allclose(fast.history["val_objective"], slow.history["val_objective"][:m])
    assert fast.best_step[0] <= slow.best_step[0]
    obj = fast.history["val_objective"][1:, 0]
    assert fast.history["step"][1:][np.argmin(obj)] == fast.best_step[0]


def test_tol_is_validated():
    with pytest.raises(ValueError, match="tol"):
        CFRConfig(tol=1.0).validate()
    with pytest.raises(ValueError, match="tol"):
        CFRConfig(tol=-0.1).validate()
