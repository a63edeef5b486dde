"""dowhy_cfr.tabular: encoding mixed-type tables and scaling the network inputs."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.preprocessing import QuantileTransformer

from dowhy_cfr.covariates import standardize
from dowhy_cfr.tabular import SMOOTH_CLIP_BOUND, FeatureScaler, TableEncoder, smooth_clip


def mixed_frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """Categorical with NaN and a rare level, strings with None, bool, nullable boolean with NA,
    int counts, a skewed float with NaN, a zero-inflated income."""
    rng = np.random.default_rng(seed)
    grade = rng.choice(["A", "B", "C", "Z"], n, p=[0.5, 0.3, 0.19, 0.01]).astype(object)
    grade[rng.random(n) < 0.1] = None
    city = rng.choice(["Paris", "Lyon"], n).astype(object)
    city[rng.random(n) < 0.05] = None
    skewed = rng.lognormal(0.0, 1.5, n)
    skewed[rng.random(n) < 0.2] = np.nan
    flag = pd.array(rng.random(n) < 0.3, dtype="boolean")
    flag[rng.random(n) < 0.1] = pd.NA
    return pd.DataFrame({
        "grade": pd.Categorical(grade, categories=["A", "B", "C", "Z"]),
        "city": pd.Series(city, dtype="str"),
        "smoker": rng.random(n) < 0.4,
        "flag": flag,
        "visits": rng.poisson(1.0, n),
        "skewed": skewed,
        "income": np.where(rng.random(n) < 0.6, 0.0, rng.lognormal(9.0, 1.0, n)),
    })


def roundtrip(obj):
    """to_state -> json text and an npz file read with allow_pickle=False -> from_state."""
    state, arrays = obj.to_state()
    text = json.dumps(state)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as npz:
        loaded = {k: npz[k] for k in npz.files}
    return type(obj).from_state(json.loads(text), loaded)


def bit_identical(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ============================================================================ TableEncoder
def test_mixed_frame_encodes_as_documented():
    X = mixed_frame()
    enc = TableEncoder().fit(X)  # min_frequency=10: "Z" (about 4 units) is grouped
    names = list(enc.get_feature_names_out())
    assert names == [
        "grade_A", "grade_B", "grade_C", "grade_nan", "grade_infrequent_sklearn",
        "city_Lyon", "city_Paris", "city_nan",
        "smoker_True",
        "flag_False", "flag_True", "flag_nan",
        "visits",
        "skewed", "missingindicator_skewed",
        "income",
    ]
    assert enc.kinds_ == ["categorical", "categorical", "bool", "bool", "numeric", "numeric",
                          "numeric"]
    assert list(enc.feature_names_in_) == list(X.columns)
    assert enc.n_features_in_ == 7 and enc.n_features_out_ == len(names)
    xw = enc.transform(X)
    assert xw.dtype == np.float64 and xw.shape == (len(X), len(names))
    assert np.isfinite(xw).all()
    col = {n: xw[:, i] for i, n in enumerate(names)}
    # numeric: median imputation plus an indicator, only where the fit saw missing values
    miss = X["skewed"].isna().to_numpy()
    assert np.array_equal(col["missingindicator_skewed"], miss.astype(float))
    assert np.all(col["skewed"][miss] == np.nanmedian(X["skewed"]))
    assert np.array_equal(col["skewed"][~miss], X["skewed"].to_numpy()[~miss])
    assert np.array_equal(col["visits"], X["visits"].to_numpy(dtype=float))
    # categorical: missing values are their own level, rare levels are grouped
    grade = X["grade"].astype(object).to_numpy()
    assert np.array_equal(col["grade_nan"], pd.isna(grade).astype(float))
    assert np.array_equal(col["grade_infrequent_sklearn"], (grade == "Z").astype(float))
    assert np.array_equal(col["grade_A"], (grade == "A").astype(float))
    onehot = [i for i, k in enumerate(enc.source_kind_) if k == "onehot"]
    rows = xw[:, [i for i in onehot if enc.source_index_[i] == 0]]
    assert np.all(rows.sum(1) == 1)  # exactly one level per unit
    # bool without missing values: one 0/1 column; with missing: False / True / nan
    assert np.array_equal(col["smoker_True"], X["smoker"].to_numpy(dtype=float))
    assert np.array_equal(col["flag_nan"], X["flag"].isna().to_numpy(dtype=float))
    # the map back to the inputs
    assert list(enc.source_index_) == [0] * 5 + [1] * 3 + [2] + [3] * 3 + [4] + [5, 5] + [6]
    assert list(enc.outputs_of("skewed")) == [13, 14]
    assert list(enc.source_kind_[enc.outputs_of("skewed")]) == ["numeric", "missing_indicator"]
    assert list(enc.outputs_of(2)) == [8]


def test_min_frequency_none_keeps_every_level_and_numbers_are_text_labels():
    X = pd.DataFrame({"g": pd.Categorical([1, 2, 2, 3, 3, 3]), "code": [7, 7, 8, 8, 9, 9]})
    enc = TableEncoder(min_frequency=None, categorical=["code"]).fit(X)
    assert list(enc.get_feature_names_out()) == ["g_1", "g_2", "g_3", "code_7", "code_8",
                                                 "code_9"]
    # 2.0 (float) and "3" (text) are the levels 2 and 3 seen at fit
    new = pd.DataFrame({"g": pd.Series([2.0, 3.0]), "code": pd.Series(["9", "7"])})
    assert np.array_equal(enc.transform(new), [[0, 1, 0, 0, 0, 1], [0, 0, 1, 1, 0, 0]])


def test_new_rows_give_the_same_columns_and_rowwise_values():
    X = mixed_frame()
    enc = TableEncoder().fit(X)
    full = enc.transform(X)
    idx = np.array([5, 3, 399, 0, 17])
    part = enc.transform(X.iloc[idx])
    assert part.shape == (5, full.shape[1])
    assert np.array_equal(part, full[idx])
    # a rare level at transform goes to the infrequent column
    one = X.iloc[[0]].copy()
    one["grade"] = pd.Categorical(["Z"], categories=["A", "B", "C", "Z"])
    j = list(enc.get_feature_names_out()).index("grade_infrequent_sklearn")
    assert enc.transform(one)[0, j] == 1.0
    # zero rows: an empty matrix of the right width
    assert enc.transform(X.iloc[:0]).shape == (0, full.shape[1])


def test_imputation_uses_training_medians_and_new_missingness_is_refused():
    X = pd.DataFrame({"a": [1.0, np.nan, 3.0, 10.0], "b": [5.0, 6.0, 7.0, 8.0]})
    enc = TableEncoder().fit(X)
    out = enc.transform(pd.DataFrame({"a": [np.nan, 100.0], "b": [7.0, 0.0]}))
    # the training median 3.0 (not the new rows' own) and the indicator
    assert np.array_equal(out, [[3.0, 1.0, 7.0], [100.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match=r"\['b'\] have missing values, but had none at fit"):
        enc.transform(pd.DataFrame({"a": [1.0, 2.0], "b": [np.nan, 0.0]}))


def test_numeric_array_input():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(50, 3))
    x[::7, 1] = np.nan
    x_before = x.copy()
    enc = TableEncoder().fit(x)
    assert not hasattr(enc, "feature_names_in_")
    assert list(enc.get_feature_names_out()) == ["x0", "x1", "missingindicator_x1", "x2"]
    out = enc.transform(x)
    assert np.array_equal(out[:, [0, 3]], x[:, [0, 2]])
    assert np.array_equal(out[:, 2], np.isnan(x[:, 1]).astype(float))
    assert np.array_equal(x, x_before, equal_nan=True)
    assert np.array_equal(enc.transform(pd.DataFrame(x, columns=list("pqr"))), out)


def test_callers_frame_is_not_modified():
    X = mixed_frame()
    before = X.copy(deep=True)
    enc = TableEncoder(categorical=["visits"]).fit(X)
    enc.transform(X)
    roundtrip(enc).transform(X)
    pd.testing.assert_frame_equal(X, before, check_exact=True)


# ------------------------------------------------------------------ errors naming the fix
def test_unseen_level_names_column_value_and_fix():
    X = mixed_frame()
    enc = TableEncoder().fit(X)
    new = X.iloc[:3].copy()
    new["city"] = ["Paris", "Marseille", "Lyon"]
    with pytest.raises(ValueError, match=r"'city' has level\(s\) \['Marseille'\] not seen at fit"
                                         r".*map them to a known level.*refit"):
        enc.transform(new)


def test_missing_value_in_a_column_complete_at_fit():
    X = pd.DataFrame({"g": ["a", "b"] * 10})
    enc = TableEncoder().fit(X)
    with pytest.raises(ValueError, match=r"'g' has missing values, but had none at fit.*fillna"
                                         r".*refit"):
        enc.transform(pd.DataFrame({"g": ["a", None]}))


@pytest.mark.parametrize("column", [[np.nan] * 4, pd.Series([None] * 4, dtype=object),
                                    pd.Categorical([None] * 4, categories=["a"])])
def test_all_missing_column_at_fit(column):
    X = pd.DataFrame({"ok": [1.0, 2.0, 3.0, 4.0], "empty": column})
    with pytest.raises(ValueError, match=r"\['empty'\] have no values at all.*drop them"):
        TableEncoder().fit(X)


def test_wrong_missing_and_reordered_columns():
    X = mixed_frame(50)
    enc = TableEncoder().fit(X)
    with pytest.raises(ValueError, match=r"missing \['income'\].*feature_names_in_"):
        enc.transform(X.drop(columns="income"))
    with pytest.raises(ValueError, match=r"unexpected \['extra'\]"):
        enc.transform(X.assign(extra=1.0))
    with pytest.raises(ValueError, match=r"another order than at fit.*reorder"):
        enc.transform(X[list(X.columns[::-1])])
    with pytest.raises(TypeError, match=r"pass a DataFrame with columns"):
        enc.transform(X.to_numpy())
    with pytest.raises(TypeError, match=r"'visits' was numeric at fit.*to_numeric"):
        enc.transform(X.assign(visits="many"))
    num = TableEncoder().fit(np.zeros((5, 3)))
    with pytest.raises(ValueError, match=r"X has 2 columns but the encoder was fitted on 3"):
        num.transform(np.zeros((5, 2)))


def test_non_numeric_array_column():
    x = np.array([[1.0, "a"], [2.0, "b"]], dtype=object)
    with pytest.raises(TypeError, match=r"non-numeric column\(s\) at position\(s\) \[1\].*"
                                        r"DataFrame"):
        TableEncoder().fit(x)


def test_infinite_values():
    X = pd.DataFrame({"a": [1.0, np.inf, 3.0], "b": ["x", "y", "x"]})
    with pytest.raises(ValueError, match=r"\['a'\] contain infinite values.*replace them with "
                                         r"NaN"):
        TableEncoder().fit(X)
    enc = TableEncoder().fit(X.assign(a=[1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"infinite values"):
        enc.transform(X)


def test_other_bad_input():
    with pytest.raises(TypeError, match=r"dates or times.*dt.days"):
        TableEncoder().fit(pd.DataFrame({"d": pd.date_range("2020-01-01", periods=3)}))
    with pytest.raises(ValueError, match=r"duplicated column names \['a'\]"):
        TableEncoder().fit(pd.DataFrame([[1, 2]], columns=["a", "a"]))
    with pytest.raises(ValueError, match=r"min_frequency=0 is invalid"):
        TableEncoder(min_frequency=0).fit(pd.DataFrame({"a": [1]}))
    with pytest.raises(ValueError, match=r"names column\(s\) \['nope'\]"):
        TableEncoder(categorical=["nope"]).fit(pd.DataFrame({"a": [1]}))
    with pytest.raises(ValueError, match=r"not fitted yet"):
        TableEncoder().transform(pd.DataFrame({"a": [1]}))
    with pytest.raises(ValueError, match=r"empty \(0 rows\)"):
        TableEncoder().fit(pd.DataFrame({"a": []}))


# ------------------------------------------------------------------ serialisation
@pytest.mark.parametrize("min_frequency", [None, 10, 150])
def test_encoder_round_trip_is_bit_identical(min_frequency):
    X = mixed_frame()
    enc = TableEncoder(min_frequency=min_frequency, categorical=["visits"]).fit(X)
    back = roundtrip(enc)
    new = mixed_frame(100, seed=5)
    new = new[new["visits"].isin(X["visits"].unique())]
    for data in (X, new):
        assert bit_identical(back.transform(data), enc.transform(data))
    assert list(back.get_feature_names_out()) == list(enc.get_feature_names_out())
    assert np.array_equal(back.source_index_, enc.source_index_)
    assert back.get_params() == enc.get_params()


def test_encoder_round_trip_of_an_array_fit_and_corrupt_states():
    x = np.random.default_rng(2).normal(size=(30, 2))
    x[0, 0] = np.nan
    enc = TableEncoder().fit(x)
    assert bit_identical(roundtrip(enc).transform(x), enc.transform(x))
    state, arrays = enc.to_state()
    with pytest.raises(ValueError, match="not a TableEncoder's"):
        TableEncoder.from_state({**state, "class": "FeatureScaler"}, arrays)
    with pytest.raises(ValueError, match="version 99 is not supported"):
        TableEncoder.from_state({**state, "version": 99}, arrays)
    with pytest.raises(ValueError, match="corrupt"):
        TableEncoder.from_state(state, {"median": arrays["median"][:1]})


# ============================================================================ FeatureScaler
ENCODER = TableEncoder().fit(mixed_frame(1000, 0))


def encoded_training(n: int = 1000, seed: int = 0) -> np.ndarray:
    """The mixed frame encoded by one encoder (the fit's levels are in every sample)."""
    return ENCODER.transform(mixed_frame(n, seed))


def test_standard_reproduces_the_package_standardisation():
    xw = encoded_training()
    xw = np.hstack([xw, np.full((len(xw), 1), 4.0)])  # a constant column: divided by 1
    assert bit_identical(FeatureScaler("standard").fit_transform(xw), standardize(xw))


def test_binary_columns_are_detected_and_centred():
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.random(200) < 0.1, rng.normal(size=200), np.ones(200)])
    for method in ("robust", "quantile"):
        s = FeatureScaler(method).fit(x)
        assert list(s.binary_) == [True, False, False]
        centred = x[:, 0] - x[:, 0].mean()
        z = s.transform(x)[:, 0]
        expected = smooth_clip(centred) if method == "robust" else centred
        np.testing.assert_array_equal(z, expected)
        assert abs(np.mean(x[:, 0] - x[:, 0].mean())) < 1e-12
    # "scale" treats them like any other column
    z = FeatureScaler("standard", binary="scale").fit_transform(x)[:, 0]
    np.testing.assert_array_equal(z, standardize(x)[:, 0])
    z = FeatureScaler("standard", binary="center").fit_transform(x)[:, 0]
    np.testing.assert_array_equal(z, x[:, 0] - x[:, 0].mean())


def test_robust_follows_the_paper():
    # column 0: IQR path; column 1: IQR 0 -> half the range; column 2: constant -> 0
    x = np.column_stack([np.arange(9.0), [0, 0, 0, 0, 0, 0, 0, 2, 10.0], np.full(9, 7.0)])
    s = FeatureScaler("robust").fit(x)
    np.testing.assert_array_equal(s.center_, [4.0, 0.0, 7.0])
    np.testing.assert_array_equal(s.scale_, [4.0, 5.0, np.inf])  # q75-q25 = 6-2; (10-0)/2
    z = s.transform(x)
    np.testing.assert_allclose(z[:, 0], (x[:, 0] - 4) / 4 / np.sqrt(1 + ((x[:, 0] - 4) / 12) ** 2),
                               rtol=1e-15)
    np.testing.assert_allclose(z[-1, 1], 2 / np.sqrt(1 + (2 / 3) ** 2), rtol=1e-15)
    assert np.all(z[:, 2] == 0)


def test_robust_output_is_bounded_and_monotone():
    xw = encoded_training()
    s = FeatureScaler("robust").fit(xw)
    z = s.transform(xw)
    assert np.all(np.abs(z) < SMOOTH_CLIP_BOUND)
    # new values over a huge range, sorted per column: outputs sorted too, within the bound
    grid = np.sort(np.concatenate([np.linspace(-1e4, 1e4, 2001), [-1e300, -1e9, 1e9, 1e300]]))
    new = np.repeat(grid[:, None], xw.shape[1], axis=1)
    out = s.transform(new)
    assert np.all(np.abs(out) <= SMOOTH_CLIP_BOUND)
    assert np.all(np.diff(out, axis=0) >= 0)
    moderate = np.abs(grid) <= 1e4  # below float64 saturation: strictly inside, strictly increasing
    nonconstant = np.isfinite(s.scale_)
    assert np.all(np.abs(out[moderate]) < SMOOTH_CLIP_BOUND)
    assert np.all(np.diff(out[moderate][:, nonconstant], axis=0) > 0)


def test_quantile_output_is_standard_normal_on_training_data():
    rng = np.random.default_rng(4)
    n = 2000
    x = np.column_stack([rng.lognormal(0, 2, n), rng.standard_t(2, n), rng.uniform(size=n)])
    z = FeatureScaler("quantile").fit_transform(x)
    # measured (seed 4): max |mean| 0.0003, std 1.009-1.011, KS statistic <= 0.0012
    assert np.all(np.abs(z.mean(0)) < 0.01)
    assert np.all(np.abs(z.std(0) - 1) < 0.02)
    for j in range(3):
        assert stats.kstest(z[:, j], "norm").statistic < 0.005
    assert np.all(np.diff(z[np.argsort(x[:, 0]), 0]) > 0)  # monotone


def test_quantile_ties_map_to_the_middle_of_their_quantile_range():
    rng = np.random.default_rng(5)
    n = 2000
    counts = rng.poisson(0.5, n).astype(float)  # about 60% zeros
    income = np.where(rng.random(n) < 0.7, 0.0, rng.lognormal(9.0, 1.0, n))  # zero-inflated
    x = np.column_stack([counts, income])
    z = FeatureScaler("quantile").fit_transform(x)
    for j in range(2):
        p0 = np.mean(x[:, j] == 0)
        zeros = z[x[:, j] == 0, j]
        # the zeros map to the normal quantile of the middle of their block, not to -5.2
        np.testing.assert_allclose(zeros, stats.norm.ppf(p0 / 2), atol=0.02)  # measured max 0.0003
    # scikit-learn alone sends every zero (the training minimum) to its lower clip, -5.2
    plain = QuantileTransformer(n_quantiles=1000, output_distribution="normal").fit_transform(x)
    assert np.all(plain[x[:, 0] == 0, 0] < -5)


def test_scalers_use_training_statistics_only():
    rng = np.random.default_rng(6)
    train = rng.normal(0.0, 1.0, size=(500, 2))
    new = rng.normal(5.0, 3.0, size=(50, 2))  # another distribution
    std = FeatureScaler("standard").fit(train)
    np.testing.assert_array_equal(std.transform(new), (new - train.mean(0)) / train.std(0))
    rob = FeatureScaler("robust").fit(train)
    q25, q50, q75 = np.quantile(train, [0.25, 0.5, 0.75], axis=0)
    np.testing.assert_array_equal(rob.transform(new), smooth_clip((new - q50) / (q75 - q25)))
    qua = FeatureScaler("quantile").fit(train)
    both = np.vstack([train, new])
    np.testing.assert_array_equal(qua.transform(new), qua.transform(both)[500:])
    # a scaler fitted on the new rows gives something else
    for method in ("standard", "robust", "quantile"):
        fitted_train = FeatureScaler(method).fit(train).transform(new)
        fitted_new = FeatureScaler(method).fit(new).transform(new)
        assert np.abs(fitted_train - fitted_new).max() > 0.5


@pytest.mark.parametrize("method", ["standard", "robust", "quantile"])
@pytest.mark.parametrize("binary", ["auto", "center", "scale"])
def test_scaler_round_trip_is_bit_identical(method, binary):
    xw = encoded_training(600)
    xw = np.hstack([xw, np.full((len(xw), 1), 2.5)])
    s = FeatureScaler(method, binary=binary, n_quantiles=200).fit(xw)
    back = roundtrip(s)
    new = np.vstack([encoded_training(100, seed=9), encoded_training(3, seed=1) * 50.0])
    new = np.hstack([new, np.full((len(new), 1), -1.0)])
    for data in (xw, new):
        assert bit_identical(back.transform(data), s.transform(data))
    assert back.get_params() == s.get_params()


def test_scaler_bad_input():
    x = np.random.default_rng(7).normal(size=(20, 2))
    with pytest.raises(ValueError, match=r"method='minmax' is invalid"):
        FeatureScaler("minmax").fit(x)
    with pytest.raises(ValueError, match=r"binary='yes' is invalid"):
        FeatureScaler(binary="yes").fit(x)
    with pytest.raises(ValueError, match=r"missing values \(NaN\).*TableEncoder first"):
        FeatureScaler().fit(np.where(x > 1, np.nan, x))
    s = FeatureScaler().fit(x)
    with pytest.raises(ValueError, match=r"X has 3 columns but the scaler was fitted on 2"):
        s.transform(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="too large to scale"):
        FeatureScaler().fit(np.array([[1e308], [-1e308]]))
    with pytest.raises(ValueError, match="not fitted yet"):
        FeatureScaler().transform(x)


@pytest.mark.parametrize("frame", [
    pd.DataFrame({"g": ["a", "b", None] * 5}),  # categorical only: no imputer
    pd.DataFrame({0: [1.0, 2.0, 3.0], 1: [4, 5, 6]}),  # numeric only, no missing: no indicator
])
def test_encoder_round_trip_of_one_kind_tables(frame):
    enc = TableEncoder(min_frequency=None).fit(frame)
    assert bit_identical(roundtrip(enc).transform(frame), enc.transform(frame))


def test_scaler_round_trip_without_quantile_columns():
    x = np.column_stack([np.arange(10) % 2, np.full(10, 3.0)])  # binary and constant only
    s = FeatureScaler("quantile").fit(x)
    assert s.quantile_transformer_ is None
    assert bit_identical(roundtrip(s).transform(x), s.transform(x))
    np.testing.assert_array_equal(s.transform(x), x - x.mean(0))


def test_a_numeric_table_without_missing_values_encodes_as_today():
    """What the package accepts today (numbers and bools, no NaN) passes through unchanged, so
    encoder + "standard" scaler give today's network input bit for bit."""
    rng = np.random.default_rng(8)
    X = pd.DataFrame({"a": rng.normal(size=50), "n": rng.poisson(3, 50),
                      "b": rng.random(50) < 0.5, "c": np.ones(50)})
    xw = TableEncoder().fit_transform(X)
    assert bit_identical(xw, X.astype("float64").to_numpy())
    # (compared on the same C-ordered matrix: numpy's column sums round differently on the
    # Fortran-ordered matrix pandas returns, in the last bit)
    scaled = FeatureScaler("standard").fit_transform(xw)
    assert bit_identical(scaled, standardize(np.ascontiguousarray(X.astype("float64"))))
