"""Diagnostic plots: content (axes, labels, plotted data), not pixels."""

import importlib
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers import TINY, make_confounded  # noqa: E402
from dowhy_cfr import CFR, CFRBootstrapInference, TARNet  # noqa: E402
from dowhy_cfr import plotting  # noqa: E402


# torch runs single-threaded in tests: see conftest.py


@pytest.fixture(scope="module")
def data():
    return make_confounded(n=200)


@pytest.fixture(scope="module")
def cfr(data):
    X, T, Y, _ = data
    return CFR(**TINY).fit(Y, T, X=X)


@pytest.fixture(scope="module")
def tarnet(data):
    X, T, Y, _ = data
    return TARNet(**TINY).fit(Y, T, X=X)


@pytest.fixture(scope="module")
def cfr_boot(data):
    X, T, Y, _ = data
    return CFR(**TINY).fit(Y, T, X=X, inference=CFRBootstrapInference(4, random_state=0))


@pytest.fixture
def figs():
    """Figures to close after the test."""
    out = []
    yield out
    for fig in out:
        plt.close(fig)


def _legend(ax):
    leg = ax.get_legend()
    return [t.get_text() for t in leg.get_texts()] if leg is not None else []


def _line(ax, label):
    hits = [ln for ln in ax.get_lines() if ln.get_label() == label]
    assert len(hits) == 1, [ln.get_label() for ln in ax.get_lines()]
    return hits[0]


def _bar_heights(ax):
    return [p.get_height() for p in ax.patches]


# ----------------------------------------------------------------------------- history
def test_plot_history_data_labels_and_best_marker(cfr, figs):
    fig = plotting.plot_history(cfr)
    figs.append(fig)
    ax_loss, ax_imb = fig.axes
    h = cfr.history_[cfr.history_["member"] == 0]
    best = int(cfr.best_iteration_[0])
    for ax, key in ((ax_loss, "loss"), (ax_imb, "imbalance")):
        val = _line(ax, "validation")
        np.testing.assert_array_equal(val.get_xdata(), h["step"])
        np.testing.assert_allclose(val.get_ydata(), h[f"val_{key}"])
        train = _line(ax, "train (mini-batches)")
        ok = h[f"train_{key}"].notna()
        assert not ok.iloc[0]  # step 0: the untrained network has no training loss
        np.testing.assert_array_equal(train.get_xdata(), h["step"][ok])
        np.testing.assert_allclose(train.get_ydata(), h[f"train_{key}"][ok])
        marker = _line(ax, f"best checkpoint (step {best})")
        assert list(marker.get_xdata()) == [best]
        np.testing.assert_allclose(marker.get_ydata(),
                                   h.loc[h["step"] == best, f"val_{key}"].to_numpy())
        vlines = [ln for ln in ax.get_lines() if list(ln.get_xdata()) == [best, best]]
        assert len(vlines) == 1  # the vertical line at the best step
        assert ax.get_xlabel() == "iteration (mini-batch step)"
        assert _legend(ax) == ["train (mini-batches)", "validation",
                               f"best checkpoint (step {best})"]
    assert "factual loss" in ax_loss.get_ylabel() and "MSE" in ax_loss.get_ylabel()
    assert "Wasserstein" in ax_imb.get_ylabel()
    title = fig._suptitle.get_text()
    assert "CFR" in title and "'wass'" in title and f"alpha={cfr.alpha}" in title


def test_plot_history_tarnet_title_and_given_axes(tarnet, figs):
    fig0, axes = plt.subplots(2, 1)
    figs.append(fig0)
    fig = plotting.plot_history(tarnet, axes=axes)
    assert fig is fig0 and len(fig.axes) == 2
    title = fig._suptitle.get_text()
    assert title.startswith("TARNet") and "not penalised" in title


def test_plot_history_errors(cfr, figs):
    with pytest.raises(ValueError, match="not fitted"):
        plotting.plot_history(CFR(**TINY))
    with pytest.raises(ValueError, match="member"):
        plotting.plot_history(cfr, member=1)
    fig0, ax = plt.subplots()
    figs.append(fig0)
    with pytest.raises(ValueError, match="2 matplotlib Axes"):
        plotting.plot_history(cfr, axes=[ax])


# ----------------------------------------------------------------------------- balance
class _FakeRefutation:
    """Duck-typed stand-in for the refuter's result."""

    estimator_name = "CFR"
    training_ipm = "wass"
    alpha = 0.05
    n_units = 200

    def __init__(self):
        self.frame = pd.DataFrame(
            {"input_space": [0.9, 0.05, 1.7], "before_training": [0.02, 0.004, 0.3],
             "after_training": [0.001, 0.002, 0.05], "reduction": [0.95, 0.5, 1 - 0.05 / 0.3],
             "p_value": [0.4, 0.02, np.nan]},
            index=pd.Index(["mmd2_lin", "mmd2_rbf", "wass"], name="ipm"))

    def to_frame(self):
        return self.frame.copy()


def test_plot_balance_from_refutation_table(figs):
    res = _FakeRefutation()
    fig = plotting.plot_balance(res)
    figs.append(fig)
    assert len(fig.axes) == 3
    frame = res.to_frame()
    for ax, (ipm, row) in zip(fig.axes, frame.iterrows()):
        np.testing.assert_allclose(
            _bar_heights(ax), row[["input_space", "before_training", "after_training"]])
        assert [t.get_text() for t in ax.get_xticklabels()] == \
            ["input space", "before training", "after training"]
        assert plotting.IPM_LABELS[ipm] in ax.get_ylabel()
        assert ax.get_title().startswith(plotting.IPM_LABELS[ipm])
    assert "reduction 95%" in fig.axes[0].get_title() and "p = 0.4" in fig.axes[0].get_title()
    assert "p =" not in fig.axes[2].get_title()  # NaN p-value is left out
    assert "CFR" in fig._suptitle.get_text() and "'wass'" in fig._suptitle.get_text()


def test_plot_balance_ipm_column_and_missing_columns(figs):
    res = _FakeRefutation()
    res.frame = res.frame.reset_index()[["ipm", "before_training", "after_training"]]
    fig = plotting.plot_balance(res)
    figs.append(fig)
    assert len(fig.axes) == 3
    np.testing.assert_allclose(_bar_heights(fig.axes[2]), [0.3, 0.05])
    res.frame = res.frame[["ipm", "before_training"]]
    with pytest.raises(ValueError, match="before/after"):
        plotting.plot_balance(res)


def test_plot_balance_from_estimator_uses_history(cfr, figs):
    fig = plotting.plot_balance(cfr)
    figs.append(fig)
    assert len(fig.axes) == 1
    h = cfr.history_
    best = int(cfr.best_iteration_[0])
    expected = [h.loc[h["step"] == 0, "val_imbalance"].item(),
                h.loc[h["step"] == best, "val_imbalance"].item()]
    np.testing.assert_allclose(_bar_heights(fig.axes[0]), expected)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == \
        ["before training", "after training"]
    assert "Wasserstein" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="not fitted"):
        plotting.plot_balance(TARNet(**TINY))


def test_plot_balance_real_refuter(data, figs):
    """End to end with the DoWhy refuter (its result has to_frame())."""
    dowhy = pytest.importorskip("dowhy")
    from dowhy_cfr import representation_balance

    X, T, Y, _ = data
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]).assign(t=T, y=Y)
    model = dowhy.CausalModel(data=df, treatment="t", outcome="y",
                              common_causes=[f"x{i}" for i in range(X.shape[1])])
    estimand = model.identify_effect(proceed_when_unidentifiable=True)
    estimate = model.estimate_effect(estimand, method_name="backdoor.cfr",
                                     method_params={"init_params": dict(TINY)})
    res = representation_balance(estimate, df, n_permutations=0)
    fig = plotting.plot_balance(res)
    figs.append(fig)
    frame = res.to_frame()
    assert len(fig.axes) == len(frame)
    for ax, (_, row) in zip(fig.axes, frame.iterrows()):
        np.testing.assert_allclose(
            _bar_heights(ax), row[["input_space", "before_training", "after_training"]])


# ----------------------------------------------------------------------------- representation
def test_plot_representation_pca_subsample(cfr, data, figs):
    X, T, _, _ = data
    fig = plotting.plot_representation(cfr, X, T, method="pca", max_points=150)
    figs.append(fig)
    assert len(fig.axes) == 2
    for ax in fig.axes:
        sizes = [len(c.get_offsets()) for c in ax.collections]
        assert len(sizes) == 2 and sum(sizes) == 150
        assert ax.get_xlabel() == "PC 1" and ax.get_ylabel() == "PC 2"
        assert _legend(ax) == ["control (T=0)", "treated (T=1)"]
    assert fig.axes[0].get_title().startswith("Covariates")
    assert "representation" in fig.axes[1].get_title()
    # deterministic subsample: same points again
    fig2 = plotting.plot_representation(cfr, X, T, method="pca", max_points=150)
    figs.append(fig2)
    for a, b in zip(fig.axes, fig2.axes):
        for ca, cb in zip(a.collections, b.collections):
            np.testing.assert_allclose(ca.get_offsets(), cb.get_offsets())
    # arm counts follow T on the subsample
    idx = np.sort(np.random.default_rng(0).choice(len(T), 150, replace=False))
    assert len(fig.axes[0].collections[1].get_offsets()) == int(T[idx].sum())


def test_plot_representation_tsne_small(cfr, data, figs):
    X, T, _, _ = data
    fig = plotting.plot_representation(cfr, X[:40], T[:40], max_points=40)
    figs.append(fig)
    assert fig.axes[0].get_xlabel() == "t-SNE 1"
    assert sum(len(c.get_offsets()) for c in fig.axes[1].collections) == 40
    assert "t-SNE" in fig._suptitle.get_text()


def test_plot_representation_errors(cfr, data):
    X, T, _, _ = data
    with pytest.raises(ValueError, match="method"):
        plotting.plot_representation(cfr, X, T, method="umap")
    with pytest.raises(ValueError, match="max_points"):
        plotting.plot_representation(cfr, X, T, max_points=1)
    with pytest.raises(ValueError, match="T must"):
        plotting.plot_representation(cfr, X, T[:10], method="pca")
    with pytest.raises(ValueError, match="did not see"):
        plotting.plot_representation(cfr, X, T + 5, method="pca")
    with pytest.raises(ValueError, match="not fitted"):
        plotting.plot_representation(CFR(**TINY), X, T, method="pca")


# ----------------------------------------------------------------------------- policy curve
def _jobs_like(n=300, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    t = rng.binomial(1, 0.5, size=n)
    e = (rng.random(n) < 0.6).astype(int)
    y = rng.binomial(1, 1 / (1 + np.exp(-(0.2 + t * x)))).astype(float)
    return x, y, t, e


def test_policy_curve_helper_by_hand():
    # 4 randomized units; treating the 2 with positive effects: value = 0.5*1 + 0.5*1
    share, risk = plotting._policy_curve([1, 1, -1, -1], y=[1, 0, 1, 1], t=[1, 1, 0, 1],
                                         n_points=3)
    np.testing.assert_allclose(share, [0.0, 0.5, 1.0])
    # s=0: nobody treated, value = mean(y | t=0) = 1; s=0.5: 0.5*0.5 + 0.5*1; s=1: mean(y|t=1)
    np.testing.assert_allclose(risk, [0.0, 0.25, 1 - 2 / 3])


def test_policy_curve_matches_metrics_module():
    metrics = pytest.importorskip("dowhy_cfr.metrics")
    if not hasattr(metrics, "policy_curve"):
        pytest.skip("dowhy_cfr.metrics.policy_curve not available")
    x, y, t, e = _jobs_like()
    share, risk = plotting._policy_curve(x, y, t, e, n_points=11)
    ref = metrics.policy_curve(x, y, t, e, n_points=11)
    np.testing.assert_allclose(share, ref["share_treated"])
    np.testing.assert_allclose(risk, ref["policy_risk"])


def test_plot_policy_curve_several_methods(figs):
    x, y, t, e = _jobs_like()
    effects = {"oracle-ish": x, "reversed": -x}
    fig = plotting.plot_policy_curve(effects, y, t, e=e, n_points=11)
    figs.append(fig)
    (ax,) = fig.axes
    assert _legend(ax) == ["oracle-ish", "reversed", "random policy"]
    for name, tau in effects.items():
        share, risk = plotting._policy_curve(tau, y, t, e, n_points=11)
        line = _line(ax, name)
        np.testing.assert_allclose(line.get_xdata(), share)
        np.testing.assert_allclose(line.get_ydata(), risk)
    rnd = _line(ax, "random policy")
    keep = e == 1
    np.testing.assert_allclose(rnd.get_ydata(), [1 - y[keep & (t == 0)].mean(),
                                                 1 - y[keep & (t == 1)].mean()])
    # the endpoints of every curve are the random policy's (nobody / everybody treated)
    np.testing.assert_allclose(_line(ax, "oracle-ish").get_ydata()[[0, -1]], rnd.get_ydata())
    assert "share of units treated" in ax.get_xlabel()
    assert "policy risk" in ax.get_ylabel()
    assert "randomized" in ax.get_title()


def test_plot_policy_curve_precomputed_and_given_ax(figs):
    fig0, ax0 = plt.subplots()
    figs.append(fig0)
    s, r = np.linspace(0, 1, 5), np.array([0.3, 0.25, 0.22, 0.24, 0.3])
    fig = plotting.plot_policy_curve(share_treated=s, policy_risk=r, label="CFR", ax=ax0)
    assert fig is fig0
    line = _line(ax0, "CFR")
    np.testing.assert_allclose(line.get_xdata(), s)
    np.testing.assert_allclose(line.get_ydata(), r)
    assert _legend(ax0) == ["CFR"]  # no y/t: no random-policy line


def test_plot_policy_curve_errors():
    x, y, t, e = _jobs_like()
    with pytest.raises(ValueError, match="either effect"):
        plotting.plot_policy_curve(x, y, t, share_treated=[0, 1], policy_risk=[0.1, 0.2])
    with pytest.raises(ValueError, match="together"):
        plotting.plot_policy_curve(share_treated=[0, 1])
    with pytest.raises(ValueError, match="y and t"):
        plotting.plot_policy_curve(x)
    with pytest.raises(ValueError, match="give effect"):
        plotting.plot_policy_curve()
    with pytest.raises(ValueError, match="only 0 and 1"):
        plotting.plot_policy_curve(x, y, t + 1)
    with pytest.raises(ValueError, match="entries"):
        plotting.plot_policy_curve(x[:5], y, t)
    with pytest.raises(ValueError, match="treated and control"):
        plotting.plot_policy_curve(x, y, t, e=np.where(t == 1, 1, 0))


# ----------------------------------------------------------------------------- CATE
def test_plot_cate_without_inference(cfr, data, figs):
    X, _, _, tau_true = data
    fig = plotting.plot_cate(cfr, X, true_effect=tau_true)
    figs.append(fig)
    ax_hist, ax_unit = fig.axes
    tau = cfr.effect(X)
    line = _line(ax_unit, "estimated \u03c4\u0302(x)")
    np.testing.assert_allclose(line.get_ydata(), np.sort(tau))
    assert not [c for c in ax_unit.collections if c.get_label().endswith("interval")]
    truth = [c for c in ax_unit.collections if c.get_label() == "true effect"]
    np.testing.assert_allclose(truth[0].get_offsets()[:, 1], tau_true[np.argsort(tau)])
    # histogram counts sum to the number of units (estimated bars only)
    est_bars = [p for p in ax_hist.patches if p.get_label() != "true effect"
                and type(p).__name__ == "Rectangle"]
    assert sum(p.get_height() for p in est_bars) == len(X)
    assert ax_hist.get_xlabel() == "effect" and ax_hist.get_ylabel() == "number of units"
    assert ax_unit.get_xlabel() == "units, sorted by estimated effect"
    assert any(s.startswith("mean (ATE)") for s in _legend(ax_hist))
    assert "true effect" in _legend(ax_hist) and "true effect" in _legend(ax_unit)
    with pytest.raises(ValueError, match="inference"):
        plotting.plot_cate(cfr, X, intervals=True)


def test_plot_cate_with_intervals_unsorted(cfr_boot, data, figs):
    X, _, _, _ = data
    Xs = X[:30]
    fig = plotting.plot_cate(cfr_boot, Xs, alpha=0.1, sort=False)
    figs.append(fig)
    ax_unit = fig.axes[1]
    assert "90% interval" in _legend(ax_unit)
    np.testing.assert_allclose(_line(ax_unit, "estimated \u03c4\u0302(x)").get_ydata(),
                               cfr_boot.effect(Xs))
    band = [c for c in ax_unit.collections if c.get_label() == "90% interval"][0]
    lo, hi = cfr_boot.effect_interval(Xs, alpha=0.1)
    verts = np.concatenate([p.vertices for p in band.get_paths()])
    assert np.isclose(verts[:, 1].min(), lo.min()) and np.isclose(verts[:, 1].max(), hi.max())
    assert ax_unit.get_xlabel() == "unit"
    assert "with intervals" in ax_unit.get_title()
    fig2 = plotting.plot_cate(cfr_boot, Xs, intervals=False)
    figs.append(fig2)
    assert not [c for c in fig2.axes[1].collections if "interval" in c.get_label()]


def test_plot_cate_errors(cfr, data):
    X, _, _, _ = data
    with pytest.raises(ValueError, match="not fitted"):
        plotting.plot_cate(CFR(**TINY), X)
    with pytest.raises(ValueError, match="alpha"):
        plotting.plot_cate(cfr, X, alpha=1.5)
    with pytest.raises(ValueError, match="true_effect"):
        plotting.plot_cate(cfr, X, true_effect=np.zeros(3))
    with pytest.raises(TypeError, match="effect"):
        plotting.plot_cate(object(), X)


# ----------------------------------------------------------------------------- optional extra
def test_missing_matplotlib_raises_install_hint(monkeypatch, cfr, data):
    X, T, _, _ = data
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    mod = importlib.reload(plotting)  # importing the module itself needs no matplotlib
    calls = [
        lambda: mod.plot_history(cfr),
        lambda: mod.plot_balance(cfr),
        lambda: mod.plot_representation(cfr, X, T, method="pca"),
        lambda: mod.plot_policy_curve(share_treated=[0, 1], policy_risk=[0, 1]),
        lambda: mod.plot_cate(cfr, X),
    ]
    for call in calls:
        with pytest.raises(ImportError, match=r'pip install "dowhy-cfr\[plots\]"'):
            call()
