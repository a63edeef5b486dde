"""The network must carry the estimate (issue 45): on a heterogeneous design where a network
should do well, a fit whose networks trained for one step must score clearly worse than the
default -- in the reported effect, in the heads' own effects, in the blend's weight on the heads
and in its pointwise intervals' width (issue 46: coverage must not come from width)."""

import numpy as np
import pytest

from dowhy_cfr import CFR


def _smooth(n, seed):
    """A smooth effect of three covariates, confounded through a fourth."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    tau = 1 + 1.5 * np.tanh(X[:, 0] + X[:, 1]) + 0.5 * X[:, 3]
    T = rng.binomial(1, 1 / (1 + np.exp(-0.5 * X[:, 2])))
    Y = X[:, 1] + 0.5 * X[:, 4] ** 2 + T * tau + rng.normal(size=n)
    return X, T, Y, tau


@pytest.fixture(scope="module")
def fits():
    X, T, Y, _ = _smooth(1000, 1)
    Xt, _, _, tau = _smooth(4000, 100)
    out = {}
    for name, kw in (("trained", {}), ("one step", {"n_iter": 1})):
        est = CFR(random_state=1, verbose=0, **kw).fit(Y, T, X=X)
        lo, hi = est.effect_interval(Xt)
        out[name] = dict(
            pehe=np.sqrt(np.mean((est.effect(Xt) - tau) ** 2)),
            heads=np.sqrt(np.mean((est.individual_effect(Xt) - tau) ** 2)),
            lam=est.blend_lambda_, coverage=np.mean((lo <= tau) & (tau <= hi)),
            width=np.mean(hi - lo))
    return out, tau.std()


def test_a_one_step_network_scores_clearly_worse(fits):
    """Measured (seed 1; seeds 0 and 2 alike; at the fast start's 8e-3 with its warm-up,
    docs/parameters.md item 37): √PEHE of the reported effect 0.305 trained against 0.528 after
    one step (seeds 0, 2: 0.34 / 0.62, 0.34 / 0.76), of the heads 0.32 against 1.19, the blend's
    weight on the heads 0.71 against 0.07 (seeds 0, 2: 0.75 / 0.12, 0.92 / 0.17). Before item
    37: 0.31 / 0.53, heads 0.32 / 1.19, weights 0.56 / 0.06."""
    out, _ = fits
    trained, one = out["trained"], out["one step"]
    assert trained["pehe"] < 0.75 * one["pehe"]
    assert trained["heads"] < 0.5 * one["heads"]
    assert trained["lam"] > 0.4 > 0.25 > one["lam"]


def test_intervals_cover_by_calibration_not_width(fits):
    """The trained fit's τ(x) intervals cover at a width of about one sd of τ; the one-step
    fit's cover too, but only at more than three: it fails the width check (measured, sd of τ
    1.19: coverage 0.909 at mean width 1.29 trained, 0.98 at 4.05 after one step; seeds 0, 2:
    0.914 at 1.57 and 0.816 at 1.06 trained, 3.81 and 3.63 after one step). Before the fast
    start's 8e-3 (docs/parameters.md, item 37) the trained intervals were wider and covered
    more: 0.95 at 1.66 (seeds 0, 2: 0.93 at 1.72, 0.98 at 1.92) -- on this design the faster
    start's members agree more closely, and seed 2 shows the bias the narrower band leaves
    uncovered."""
    out, tau_sd = fits
    trained, one = out["trained"], out["one step"]
    assert trained["coverage"] >= 0.9 and trained["width"] < 2.0 * tau_sd
    assert one["width"] > 2.0 * tau_sd
