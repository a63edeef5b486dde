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
    """Measured (seed 1; seeds 0 and 2 alike): √PEHE of the reported effect 0.31 trained against
    0.53 after one step (seeds 0, 2: 0.37 / 0.62, 0.34 / 0.76), of the heads 0.32 against 1.19,
    the blend's weight on the heads 0.56 against 0.06 (seeds 0, 2: 0.63 / 0.12, 0.87 / 0.17)."""
    out, _ = fits
    trained, one = out["trained"], out["one step"]
    assert trained["pehe"] < 0.75 * one["pehe"]
    assert trained["heads"] < 0.5 * one["heads"]
    assert trained["lam"] > 0.4 > 0.25 > one["lam"]


def test_intervals_cover_by_calibration_not_width(fits):
    """The trained fit's τ(x) intervals cover at a width of about 1.5 sds of τ; the one-step
    fit's cover too, but only at more than three: it fails the width check (measured, sd of τ
    1.19: coverage 0.95 at mean width 1.66 trained, 0.98 at 4.06 after one step; seeds 0, 2:
    0.93 at 1.72 and 0.98 at 1.92 trained, 3.85 and 3.62 after one step)."""
    out, tau_sd = fits
    trained, one = out["trained"], out["one step"]
    assert trained["coverage"] >= 0.9 and trained["width"] < 2.0 * tau_sd
    assert one["width"] > 2.0 * tau_sd
