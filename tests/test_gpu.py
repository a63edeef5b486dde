"""device="cuda" end to end: core, stacking, inference. Skipped without a GPU."""

import numpy as np
import pytest
import torch

from dowhy_cfr import CFR, CFRBootstrapInference
from helpers import TINY, make_confounded

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@cuda
def test_cuda_fit_matches_cpu_closely():
    X, T, Y, _ = make_confounded(n=200)
    gpu = CFR(device="cuda", n_ensemble=2, **TINY).fit(Y, T, X=X,
                                                       inference=CFRBootstrapInference(3))
    cpu = CFR(device="cpu", n_ensemble=2, **TINY).fit(Y, T, X=X)
    assert gpu.fitted_.members.net.rep_weights[0].is_cuda
    np.testing.assert_allclose(gpu.effect(X), cpu.effect(X), atol=5e-3)
    lo, hi = gpu.effect_interval(X[:5])
    assert np.all(lo <= hi)


def test_cuda_request_without_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    X, T, Y, _ = make_confounded(n=100)
    with pytest.raises(ValueError, match="CUDA is not available"):
        CFR(device="cuda", **TINY).fit(Y, T, X=X)


def test_auto_device_falls_back_to_cpu():
    X, T, Y, _ = make_confounded(n=100)
    est = CFR(device="auto", **TINY).fit(Y, T, X=X)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert est.fitted_.members.net.rep_weights[0].device.type == expected
