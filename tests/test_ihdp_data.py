"""Tests of the IHDP regenerator (dowhy_cfr.datasets)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dowhy_cfr.datasets import (
    IHDP_FEATURE_NAMES,
    IHDPData,
    ihdp_seed,
    ihdp_split,
    load_ihdp,
    load_ihdp_many,
    load_ihdp_npz,
)
from dowhy_cfr.datasets._rrandom import RRandom, _r_seed_state_loop, r_seed_state, revsort
from dowhy_cfr.datasets.ihdp import _simulate

# /work/main/tests/this_file -> parents[2] = /work ; shared data lives in /work/shared/data
REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "ihdp_npci_1-100.test.npz"


# --------------------------------------------------------------------------------------------
# R random number generation
# --------------------------------------------------------------------------------------------
def test_r_uniforms_and_normals_match_known_r_output():
    # set.seed(42); runif(3)  and  set.seed(42); rnorm(2)  (Mersenne-Twister, Inversion)
    np.testing.assert_allclose(
        RRandom(42).unif_rand(3), [0.914806043496355, 0.937075413297862, 0.286139534786344],
        rtol=0, atol=1e-14,
    )  # fmt: skip
    np.testing.assert_allclose(
        RRandom(42).norm_rand(2), [1.37095844714667, -0.564698171396089], rtol=0, atol=1e-13
    )
    # set.seed(1); rnorm(3)
    np.testing.assert_allclose(
        RRandom(1).norm_rand(3),
        [-0.626453810742332, 0.183643324222082, -0.835628612410047],
        rtol=0,
        atol=1e-13,
    )


def test_r_sample_rounding_matches_r_before_3_6():
    # R 3.5: set.seed(123); sample(1:10)  ->  3 8 4 7 6 1 10 9 2 5   (do_sample's swap loop)
    rng = RRandom(123)
    pool, n, out = list(range(10)), 10, []
    for _ in range(10):
        j = int(rng.unif_index(n)[0])
        out.append(pool[j] + 1)
        n -= 1
        pool[j] = pool[n]
    assert out == [3, 8, 4, 7, 6, 1, 10, 9, 2, 5]


def test_seed_state_vectorised_equals_loop():
    for seed in (0, 1, 570, 3065, 10070, -5, 2**31 - 1, 2**32 + 7):
        np.testing.assert_array_equal(r_seed_state(seed), _r_seed_state_loop(seed))
    with pytest.raises(TypeError, match="seed"):
        r_seed_state(1.5)


def test_revsort_is_descending_heapsort_with_r_tie_order():
    a, perm = revsort([0.6, 0.1, 0.1, 0.1, 0.1])
    np.testing.assert_array_equal(a, [0.6, 0.1, 0.1, 0.1, 0.1])
    # R's heapsort leaves the tied labels in this order (not 2, 3, 4, 5): it decides which
    # coefficient value each uniform maps to.
    np.testing.assert_array_equal(perm, [1, 3, 4, 5, 2])
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.integers(0, 5, size=int(rng.integers(1, 30))).astype(float)
        s, p = revsort(v)
        assert np.all(np.diff(s) <= 0)
        np.testing.assert_array_equal(v[p - 1], s)
        assert sorted(p.tolist()) == list(range(1, v.size + 1))


def test_sample_prob_replace_labels_and_frequencies():
    labels = RRandom(7).sample_prob_replace([0.6, 0.1, 0.1, 0.1, 0.1], 20000)
    assert labels.min() >= 1 and labels.max() <= 5
    freq = np.bincount(labels, minlength=6)[1:] / labels.size
    np.testing.assert_allclose(freq, [0.6, 0.1, 0.1, 0.1, 0.1], atol=0.015)
    with pytest.raises(ValueError, match="prob"):
        RRandom(7).sample_prob_replace([0.5, -0.1], 3)


# --------------------------------------------------------------------------------------------
# Regeneration against the published files
# --------------------------------------------------------------------------------------------
@pytest.mark.skipif(not REFERENCE.is_file(), reason=f"reference file not found: {REFERENCE}")
def test_regeneration_matches_published_realizations_1_to_100():
    ref = np.load(REFERENCE)
    n_real = ref["x"].shape[2]
    assert n_real == 100
    many = load_ihdp_many(range(1, n_real + 1))
    x = many["x"][0]
    for k in range(n_real):
        xr = ref["x"][:, :, k]
        # the published rows are a subset of the 747 units in a per-realization order
        d2 = ((xr[:, None, :] - x[None, :, :]) ** 2).sum(axis=-1)
        idx = d2.argmin(axis=1)
        assert d2.min(axis=1).max() < 1e-12, f"realization {k + 1}: unmatched covariate rows"
        assert np.unique(idx).size == idx.size
        np.testing.assert_array_equal(many["t"][k][idx], ref["t"][:, k])
        for key in ("yf", "ycf", "mu0", "mu1"):
            np.testing.assert_allclose(
                many[key][k][idx], ref[key][:, k], rtol=1e-9, atol=1e-6,
                err_msg=f"{key}, realization {k + 1}",
            )  # fmt: skip


def test_seed_branch_above_500():
    assert ihdp_seed(1) == 570 and ihdp_seed(500) == 3065
    assert ihdp_seed(501) == 501 * 5 + 7565 and ihdp_seed(1000) == 12565
    d = load_ihdp(501)
    mu0, mu1, y0, y1 = _simulate(501 * 5 + 7565)
    np.testing.assert_array_equal(d.mu0, mu0)
    np.testing.assert_array_equal(d.mu1, mu1)
    np.testing.assert_array_equal(d.yf, np.where(d.t == 1, y1, y0))
    other = _simulate(501 * 5 + 565)
    assert not np.allclose(d.mu0, other[0])
    # below the switch the first branch is used
    np.testing.assert_array_equal(load_ihdp(500).mu0, _simulate(500 * 5 + 565)[0])


def test_realization_invariants():
    d = load_ihdp(3)
    assert d.x.shape == (747, 25) and d.x.dtype == np.float64
    for key in ("t", "yf", "ycf", "mu0", "mu1"):
        assert d[key].shape == (747,)
    assert int(d.t.sum()) == 139 and set(np.unique(d.t)) == {0.0, 1.0}
    np.testing.assert_allclose(d.ite[d.t == 1].mean(), 4.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.x[:, :6].mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(d.x[:, :6].std(axis=0, ddof=1), 1.0, atol=1e-12)
    assert set(np.unique(d.x[:, IHDP_FEATURE_NAMES.index("first")])) == {1.0, 2.0}
    treated = d.t == 1
    y1 = np.where(treated, d.yf, d.ycf)
    y0 = np.where(treated, d.ycf, d.yf)
    # unit-variance noise around the noiseless surfaces
    assert 0.8 < np.std(y0 - d.mu0) < 1.2 and 0.8 < np.std(y1 - d.mu1) < 1.2
    # different realizations differ, the same realization is reproducible
    assert load_ihdp(3) == d
    assert not np.allclose(load_ihdp(4).mu0, d.mu0)


# --------------------------------------------------------------------------------------------
# API
# --------------------------------------------------------------------------------------------
def test_key_and_attribute_access():
    d = load_ihdp(1)
    assert isinstance(d, IHDPData)
    assert list(d.keys()) == ["x", "t", "yf", "ycf", "mu0", "mu1"]
    assert len(d) == 6 and "mu0" in d and "ate" not in d
    assert d["mu0"] is d.mu0
    np.testing.assert_array_equal(d.ite, d.mu1 - d.mu0)
    assert d.ate == pytest.approx(float(np.mean(d.mu1 - d.mu0)))
    assert d.feature_names == list(IHDP_FEATURE_NAMES) and len(d.feature_names) == 25
    assert d.realization == 1
    assert set(dict(d)) == set(d.keys())
    with pytest.raises(KeyError):
        d["nope"]
    # returned arrays are private copies: mutating one does not leak into the cache
    d.x[0, 0] = 1e9
    assert load_ihdp(1).x[0, 0] != 1e9


@pytest.mark.parametrize("bad", [0, -1, 1001])
def test_load_ihdp_rejects_out_of_range(bad):
    with pytest.raises(ValueError, match="realization"):
        load_ihdp(bad)


@pytest.mark.parametrize("bad", [1.0, "1", True, None])
def test_load_ihdp_rejects_non_int(bad):
    with pytest.raises(TypeError, match="realization"):
        load_ihdp(bad)


def test_load_ihdp_many_shapes_and_consistency():
    many = load_ihdp_many([2, 7, 600])
    assert many["x"].shape == (3, 747, 25) and many["t"].shape == (3, 747)
    for key in ("yf", "ycf", "mu0", "mu1"):
        assert many[key].shape == (3, 747)
    np.testing.assert_array_equal(many["realization"], [2, 7, 600])
    assert not many["x"].flags.writeable
    for i, r in enumerate([2, 7, 600]):
        d = load_ihdp(r)
        for key in d:
            np.testing.assert_array_equal(many[key][i], d[key])
    assert load_ihdp_many(2, copy=True)["x"].flags.writeable
    np.testing.assert_array_equal(load_ihdp_many(2)["realization"], [1, 2])
    with pytest.raises(ValueError, match="empty"):
        load_ihdp_many([])
    with pytest.raises(ValueError, match="realizations"):
        load_ihdp_many([1, 1001])


# --------------------------------------------------------------------------------------------
# Split protocol
# --------------------------------------------------------------------------------------------
def test_split_proportions_and_disjointness():
    split = ihdp_split(747, seed=0)
    train, val, test = split
    assert (len(train), len(val), len(test)) == (470, 202, 75)
    all_idx = np.concatenate([train, val, test])
    np.testing.assert_array_equal(np.sort(all_idx), np.arange(747))
    np.testing.assert_array_equal(split.within, np.sort(np.concatenate([train, val])))
    assert len(train) / 747 == pytest.approx(0.63, abs=0.01)
    assert len(val) / 747 == pytest.approx(0.27, abs=0.01)
    assert len(test) / 747 == pytest.approx(0.10, abs=0.01)


def test_split_deterministic_per_seed():
    a, b, c = ihdp_split(seed=5), ihdp_split(seed=5), ihdp_split(seed=6)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.test, c.test)


def test_split_validation():
    with pytest.raises(ValueError, match="test_fraction"):
        ihdp_split(seed=0, test_fraction=1.0)
    with pytest.raises(ValueError, match="val_fraction"):
        ihdp_split(seed=0, val_fraction=-0.1)
    with pytest.raises(ValueError, match="n_units"):
        ihdp_split(0, seed=0)
    with pytest.raises(TypeError, match="seed"):
        ihdp_split(seed=1.5)
    with pytest.raises(ValueError, match="seed"):
        ihdp_split(seed=-1)
    with pytest.raises(ValueError, match="training"):
        ihdp_split(2, seed=0, test_fraction=0.5, val_fraction=0.9)


# --------------------------------------------------------------------------------------------
# .npz loader
# --------------------------------------------------------------------------------------------
def _write_cfrnet_npz(path, realizations):
    many = load_ihdp_many(realizations)
    np.savez(
        path,
        x=np.transpose(many["x"], (1, 2, 0)),  # (n, d, R)
        **{k: many[k].T for k in ("t", "yf", "ycf", "mu0", "mu1")},  # (n, R)
        ate=np.array(4.0),
        yadd=np.array(0.0),
        ymul=np.array(1.0),
    )


def test_npz_round_trip(tmp_path):
    path = tmp_path / "ihdp.npz"
    _write_cfrnet_npz(path, [1, 2, 3])
    loaded = load_ihdp_npz(path)
    assert len(loaded) == 3
    for r, d in enumerate(loaded, start=1):
        assert d.realization == r and d.extra == {"ate": 4.0, "yadd": 0.0, "ymul": 1.0}
        assert d == load_ihdp(r)
    assert load_ihdp_npz(path, realization=2) == load_ihdp(2)
    with pytest.raises(ValueError, match="realization"):
        load_ihdp_npz(path, realization=4)
    with pytest.raises(TypeError, match="realization"):
        load_ihdp_npz(path, realization=1.0)


def test_npz_single_realization_and_missing_keys(tmp_path):
    d = load_ihdp(9)
    single = tmp_path / "single.npz"
    np.savez(single, **d)
    back = load_ihdp_npz(single)
    assert len(back) == 1 and back[0].extra == {}
    np.testing.assert_array_equal(back[0].mu1, d.mu1)
    broken = tmp_path / "broken.npz"
    np.savez(broken, x=d.x, t=d.t, yf=d.yf)
    with pytest.raises(ValueError, match=r"ycf.*mu0.*mu1"):
        load_ihdp_npz(broken)
    bad_shape = tmp_path / "bad_shape.npz"
    np.savez(bad_shape, **{**dict(d), "mu0": d.mu0[:10]})
    with pytest.raises(ValueError, match="mu0"):
        load_ihdp_npz(bad_shape)


@pytest.mark.skipif(not REFERENCE.is_file(), reason=f"reference file not found: {REFERENCE}")
def test_npz_loader_reads_published_file():
    data = load_ihdp_npz(REFERENCE)
    assert len(data) == 100 and data[0].x.shape == (75, 25)
    assert data[0].extra.get("ate") == 4.0
    assert data[41].realization == 42


def test_covariates_in_their_own_units():
    """The unstandardised covariates are sim.csv's (birth weight in grams, the mother's age in
    years), and standardising their first six columns gives load_ihdp's x exactly."""
    from dowhy_cfr.datasets import ihdp_covariates

    raw, std = ihdp_covariates(standardized=False), ihdp_covariates()
    assert raw.shape == std.shape == (747, 25)
    assert raw[:, 0].min() > 400 and raw[:, 0].max() < 3000  # birth weight, grams
    assert 13 <= raw[:, 5].min() and raw[:, 5].max() <= 50  # mother's age, years
    cont = raw[:, :6]
    np.testing.assert_allclose((cont - cont.mean(0)) / cont.std(0, ddof=1), std[:, :6])
    np.testing.assert_array_equal(raw[:, 6:], std[:, 6:])
    np.testing.assert_array_equal(std, load_ihdp(1).x)
