"""save/load: JSON + arrays, no pickled code, bit-identical predictions."""

import io
import json
import zipfile

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import Ridge

from dowhy_cfr import CFR, TARNet
from helpers import TINY, make_confounded


@pytest.mark.parametrize("cls", [CFR, TARNet])
def test_round_trip_is_bit_identical(tmp_path, cls):
    X, T, Y, _ = make_confounded(n=150)
    Xdf = pd.DataFrame(X, columns=list("abcde"))
    labels = np.where(T == 1, "treated", "control")
    est = cls(**{**TINY, "n_ensemble": 2}).fit(Y, labels, X=Xdf)
    path = est.save(tmp_path / "model.cfr")
    loaded = cls.load(path)
    assert type(loaded) is cls and loaded.get_params() == est.get_params()
    np.testing.assert_array_equal(loaded.effect(Xdf, T0="control", T1="treated"),
                                  est.effect(Xdf, T0="control", T1="treated"))
    np.testing.assert_array_equal(loaded.const_marginal_effect(Xdf),
                                  est.const_marginal_effect(Xdf))
    with pytest.raises(ValueError, match="T0='control'"):
        loaded.effect(Xdf)  # 0/1 are not this model's labels
    np.testing.assert_array_equal(loaded.transform(Xdf), est.transform(Xdf))
    for a, b in zip(loaded.predict_outcomes(Xdf), est.predict_outcomes(Xdf)):
        np.testing.assert_array_equal(a, b)
    pd.testing.assert_frame_equal(loaded.history_, est.history_)
    assert loaded.cate_feature_names() == list("abcde")
    with pytest.raises(ValueError, match="columns"):
        loaded.effect(Xdf[list("edcba")])


def test_file_holds_only_json_and_plain_arrays(tmp_path):
    X, T, Y, _ = make_confounded(n=150)
    path = CFR(**TINY).fit(Y, T, X=X).save(tmp_path / "m.cfr")
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["arrays.npz", "model.json"]
        state = json.loads(zf.read("model.json"))
    assert state["class"] == "CFR" and state["params"]["n_iter"] == TINY["n_iter"]
    with zipfile.ZipFile(path) as zf:
        npz = np.load(io.BytesIO(zf.read("arrays.npz")), allow_pickle=False)
        assert all(npz[k].dtype != object for k in npz.files)


def test_final_stage_is_refitted_identically(tmp_path):
    X, T, Y, _ = make_confounded(n=200)
    for model_final in (None, Ridge(alpha=2.0)):
        est = CFR(model_final=model_final, **TINY).fit(Y, T, X=X[:, :2], W=X[:, 2:])
        loaded = CFR.load(est.save(tmp_path / "w.cfr"))
        np.testing.assert_array_equal(loaded.effect(X[:, :2]), est.effect(X[:, :2]))
        np.testing.assert_array_equal(loaded.individual_effect(X[:, :2], X[:, 2:]),
                                      est.individual_effect(X[:, :2], X[:, 2:]))


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="not fitted"):
        CFR().save(tmp_path / "x.cfr")
    with pytest.raises(FileNotFoundError):
        CFR.load(tmp_path / "missing.cfr")
    bad = tmp_path / "bad.cfr"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("other.txt", "x")
    with pytest.raises(ValueError, match="not a dowhy_cfr model"):
        CFR.load(bad)


def test_errors_name_the_fix(tmp_path):
    """A non-zip file and a RandomState seed used to give zipfile's and json's own errors."""
    text = tmp_path / "notes.cfr"
    text.write_text("not a model")
    with pytest.raises(ValueError, match="not a saved dowhy_cfr model"):
        CFR.load(text)
    X, T, Y, _ = make_confounded(n=120)
    est = CFR(**{**TINY, "random_state": np.random.RandomState(0)}).fit(Y, T, X=X)
    with pytest.raises(TypeError, match=r"random_state.*set_params\(random_state=0\)"):
        est.save(tmp_path / "m.cfr")
    assert not (tmp_path / "m.cfr").exists()
    seeded = CFR(**{**TINY, "random_state": np.int64(3)}).fit(Y, T, X=X)
    assert CFR.load(seeded.save(tmp_path / "s.cfr")).ate() == seeded.ate()


def test_multi_arm_round_trip(tmp_path):
    """Three arms (string labels): every pair's effects, the potential outcomes of each arm and
    the doubly robust averages come back bit-identical."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 3))
    arm = rng.integers(0, 3, size=240)
    Y = X[:, 0] + np.select([arm == 1, arm == 2], [1 + X[:, 1], -2.0], 0) + rng.normal(size=240)
    labels = np.array(["ctrl", "drugA", "drugB"])[arm]
    est = CFR(**TINY).fit(Y, labels, X=X)
    loaded = CFR.load(est.save(tmp_path / "three.cfr"))
    np.testing.assert_array_equal(loaded.const_marginal_effect(X), est.const_marginal_effect(X))
    for t0, t1 in (("ctrl", "drugA"), ("ctrl", "drugB"), ("drugA", "drugB")):
        np.testing.assert_array_equal(loaded.effect(X, T0=t0, T1=t1), est.effect(X, T0=t0, T1=t1))
        for debiased in (True, False):
            a, b = (e.average_effect(T0=t0, T1=t1, debiased=debiased) for e in (loaded, est))
            assert (a.estimate, a.stderr, a.plugin) == pytest.approx(
                (b.estimate, b.stderr, b.plugin), rel=1e-12, nan_ok=True)
    outs = loaded.predict_outcomes(X)
    assert len(outs) == 3
    for a, b in zip(outs, est.predict_outcomes(X)):
        np.testing.assert_array_equal(a, b)
    assert loaded.ate_interval(T0="ctrl", T1="drugB") == est.ate_interval(T0="ctrl", T1="drugB")
    with pytest.raises(ValueError, match="drugC"):
        loaded.effect(X, T0="ctrl", T1="drugC")


def test_fit_chunks_round_trip(tmp_path):
    """A model trained from chunks (no fitted units kept, plug-in effects) predicts the same
    after loading."""
    X, T, Y, _ = make_confounded(n=300, seed=1)
    Xv, Tv, Yv, _ = make_confounded(n=100, seed=2)
    chunks = [(Y[i:i + 100], T[i:i + 100], X[i:i + 100]) for i in range(0, 300, 100)]
    est = CFR(**TINY).fit_chunks(chunks, validation=(Yv, Tv, Xv))
    loaded = CFR.load(est.save(tmp_path / "chunks.cfr"))
    assert type(loaded) is CFR and loaded.get_params() == est.get_params()
    np.testing.assert_array_equal(loaded.effect(Xv), est.effect(Xv))
    np.testing.assert_array_equal(loaded.transform(X[:7]), est.transform(X[:7]))
    for a, b in zip(loaded.predict_outcomes(X), est.predict_outcomes(X)):
        np.testing.assert_array_equal(a, b)
    assert loaded.ate(Xv) == est.ate(Xv)
    pd.testing.assert_frame_equal(loaded.history_, est.history_)


def test_clipped_share_is_saved_and_recovered_from_older_files(tmp_path):
    """The clipped units are saved with the doubly robust stage; a file saved before they were
    kept recovers them from the propensities (a clipped one equals min_propensity)."""
    X, T, Y, _ = make_confounded(n=200)
    with pytest.warns(UserWarning, match="lower min_propensity \\(e.g. to 0.04\\)"):
        est = CFR(**TINY, min_propensity=0.2).fit(Y, T, X=X)  # a high clip: many clipped
    assert est.clipped_share_ > 0
    path = est.save(tmp_path / "m.cfr")
    loaded = CFR.load(path)
    assert loaded.clipped_share_ == est.clipped_share_
    np.testing.assert_array_equal(loaded.fitted_.debiased.clipped, est.fitted_.debiased.clipped)
    assert str(loaded.summary()) == str(est.summary())

    def as_older_versions_wrote_it(state, arrays):
        del state["debiased"]["min_propensity"], arrays["debiased/clipped"]

    older = CFR.load(_rewritten(path, tmp_path / "old.cfr", as_older_versions_wrote_it))
    np.testing.assert_array_equal(older.fitted_.debiased.clipped, est.fitted_.debiased.clipped)
    assert older.fitted_.debiased.min_propensity == 0.2


def test_a_model_saved_before_feature_scaling_loads_as_it_was(tmp_path):
    """Files written before ``feature_scaling`` existed hold neither the parameter nor the input
    scales: they load as plain networks, with ``feature_scaling=False``, and predict as saved."""
    X, T, Y, _ = make_confounded(n=150)
    est = CFR(**{**TINY, "feature_scaling": False}).fit(Y, T, X=X)

    def without_the_option(state, arrays):
        del state["params"]["feature_scaling"], state["config"]["feature_scaling"]

    loaded = CFR.load(_rewritten(est.save(tmp_path / "new.cfr"), tmp_path / "old.cfr",
                                 without_the_option))
    assert loaded.feature_scaling is False and len(loaded.fitted_.members.net.input_scales) == 0
    np.testing.assert_array_equal(loaded.effect(X), est.effect(X))


@pytest.mark.parametrize("option, default, before", [
    ("ema_decay", 0.99, 0.0),  # trained on the last iterate
    ("alpha_units", 1200, None),  # trained with one alpha at any size
    ("ipm_max_units", 200, None),  # trained with the IPM on the whole batch
    ("ipm_every", 2, 1),  # trained with the IPM in every step
])
def test_a_model_saved_before_an_option_loads_as_it_was_trained(tmp_path, option, default,
                                                                 before):
    """Files written before ``ema_decay``, ``alpha_units``, ``ipm_max_units`` or ``ipm_every``
    existed were trained without them: they load with the value they were trained with (a refit
    trains as they were trained) and predict as saved."""
    X, T, Y, _ = make_confounded(n=150)
    est = CFR(**TINY).fit(Y, T, X=X)

    def without_the_option(state, arrays):
        del state["params"][option], state["config"][option]

    loaded = CFR.load(_rewritten(est.save(tmp_path / "new.cfr"), tmp_path / "old.cfr",
                                 without_the_option))
    assert getattr(est, option) == default and getattr(loaded, option) == before
    assert getattr(loaded.fitted_.config, option) == before and loaded.alpha_ == est.alpha_
    np.testing.assert_array_equal(loaded.effect(X), est.effect(X))


def _rewritten(path, new_path, edit):
    """A copy at ``new_path`` of the saved model ``path`` after ``edit(state, arrays)`` changed
    its JSON state and its arrays in place (a file as another version wrote it)."""
    with zipfile.ZipFile(path) as zf:
        state = json.loads(zf.read("model.json"))
        arrays = dict(np.load(io.BytesIO(zf.read("arrays.npz"))))
    edit(state, arrays)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with zipfile.ZipFile(new_path, "w") as zf:
        zf.writestr("model.json", json.dumps(state))
        zf.writestr("arrays.npz", buf.getvalue())
    return new_path
