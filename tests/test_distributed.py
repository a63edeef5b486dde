"""Two CPU workers on localhost (gloo) vs single-process training on the same data and seed."""

import os
import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dowhy_cfr import CFR
from helpers import make_confounded, slope, sqrt_pehe

PARAMS = dict(n_rep_layers=2, rep_dim=32, n_head_layers=1, head_dim=32, n_iter=300,
              eval_every=50, batch_size=50, verbose=0, random_state=0, n_ensemble=1)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, out_dir, ipm_batch):
    from dowhy_cfr.distributed import fit_distributed

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        X, T, Y, _ = make_confounded(n=1000, seed=0)
        Xv, Tv, Yv, _ = make_confounded(n=300, seed=1)
        shard = slice(rank, None, world)
        est = fit_distributed(CFR(**PARAMS), Y[shard], T[shard], X[shard],
                              validation=(Yv, Tv, Xv), ipm_batch=ipm_batch)
        np.save(os.path.join(out_dir, f"effect_{rank}.npy"), est.effect(X))
        np.save(os.path.join(out_dir, f"fresh_{rank}.npy"), est.effect(_fresh()[0]))
        np.save(os.path.join(out_dir, f"xmean_{rank}.npy"), est.fitted_.preprocessing.x_mean)
    finally:
        dist.destroy_process_group()


def _fresh():
    """Fresh test units and their effects."""
    X, _, _, tau = make_confounded(n=2000, seed=100)
    return X, tau


def _run(tmp_path, ipm_batch):
    mp.spawn(_worker, args=(2, _free_port(), str(tmp_path), ipm_batch), nprocs=2, join=True)
    return [np.load(tmp_path / f"effect_{r}.npy") for r in (0, 1)], \
        [np.load(tmp_path / f"xmean_{r}.npy") for r in (0, 1)], \
        np.load(tmp_path / "fresh_0.npy")


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not available")
@pytest.mark.parametrize("ipm_batch", ["global", "local"])
def test_two_gloo_workers_match_single_process(tmp_path, ipm_batch):
    """Measured: single-process sqrt(PEHE) 0.268; two workers 0.251 (global IPM) / 0.250 (local);
    mean |tau_dist - tau_single| 0.110 / 0.113 (different batch draws, same seed). Tolerance:
    0.25 on that gap (2x).

    On fresh units: sqrt(PEHE) 0.295 / 0.271 (workers, global / local IPM) and 0.288 (single),
    slope of tau_hat on x1 0.97 / 0.97 and 0.94; the single process on data seeds 0-4: 0.23-0.33
    and 0.86-0.95; untrained (n_iter=1): 1.37-1.42 and 0.00."""
    (e0, e1), (m0, m1), fresh = _run(tmp_path, ipm_batch)
    X, T, Y, tau = make_confounded(n=1000, seed=0)
    Xv, Tv, Yv, _ = make_confounded(n=300, seed=1)
    # every worker ends with the same network and the global standardisation
    np.testing.assert_array_equal(e0, e1)
    np.testing.assert_allclose(m0, X.mean(0), rtol=1e-10, atol=1e-12)
    # single process, same data and seed, a batch as large as the two workers' together
    single = CFR(**{**PARAMS, "batch_size": 100}).fit_chunks([(Y, T, X)], validation=(Yv, Tv, Xv))
    e_single = single.effect(X)
    assert np.mean(np.abs(e0 - e_single)) < 0.25
    X_new, tau_new = _fresh()
    # fresh units: the heads' sqrt(PEHE) < 0.42 and slope on x1 in (0.7, 1.3) for the workers
    # and the single process alike (measured there). The old margin, a third of the naive 2.3,
    # passed a fit with half the true slope (sqrt(PEHE) 0.50, slope 0.5).
    for tau_hat in (fresh, single.effect(X_new)):
        assert sqrt_pehe(tau_hat, tau_new) < 0.42
        assert 0.7 < slope(X_new[:, 1], tau_hat) < 1.3


def test_requires_a_process_group():
    from dowhy_cfr.distributed import fit_distributed

    X, T, Y, _ = make_confounded(n=100)
    with pytest.raises(RuntimeError, match="process group"):
        fit_distributed(CFR(n_ensemble=1), Y, T, X, validation=(Y, T, X))
