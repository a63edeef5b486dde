"""EconML's generic estimator tests, adapted to :class:`dowhy_cfr.CFR` (issue #31, "the
ecosystem's own tests pass").

Sources in py-why/EconML (read, not copied; the checks are rewritten for CFR):

* ``econml/tests/test_inference.py`` -- summaries, ``alpha``, pointwise inference, pickling of
  inference results, ``mean_pred_stderr``, results isolated from the estimator,
  ``translate``/``scale`` with a number and with a pandas Series;
* ``econml/tests/test_ate_inference.py`` -- ``ate``/``marginal_ate``/``const_marginal_ate``
  with their intervals and inference, shapes, and the z-tests of their summaries;
* ``econml/tests/test_integration.py`` (``TestPandasIntegration``) -- DataFrame inputs, names
  propagated to summaries, categorical treatments and refits with new categories;
* ``econml/tests/test_model_selection.py`` -- EconML's model strings, lists to select from and
  scikit-learn's searches, here for ``model_propensity``;
* ``econml/tests/test_refit.py`` -- setting parameters and refitting; plus pickling of fitted
  estimators (plain and with bootstrap inference).

EconML's data (X uniform, W normal, a fair coin T, noise Y) are generated the same way at a
smaller n; EconML's ``LinearDRLearner`` on the same data is the reference for shapes and names.
Where EconML uses ``BootstrapInference(n_bootstrap_samples=5)``, CFR's equivalent
``CFRBootstrapInference(5)`` is used (and EconML's own class where it works for CFR).

CFR's default inference ("auto", analytic intervals of the doubly robust averages) has no
pointwise intervals: those cases assert its clear ``NotImplementedError`` pointing to the
bootstrap. Limits inherent to CFR (several outcomes or treatment columns, a continuous treatment,
a propensity model without probabilities) assert their clear errors.
"""

import copy
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from econml.dr import LinearDRLearner
from econml.inference import BootstrapInference
from scipy.special import expit
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import (LinearRegression, LogisticRegression, LogisticRegressionCV,
                                  RidgeClassifierCV)
from sklearn.model_selection import GridSearchCV, RandomizedSearchCV

from dowhy_cfr import CFR, CFRBootstrapInference

# torch runs single-threaded in tests: see conftest.py
TINY = dict(n_rep_layers=2, rep_dim=16, n_head_layers=1, head_dim=16, n_iter=60, eval_every=20,
            batch_size=32, verbose=0, random_state=0, n_ensemble=1)
INFERENCES = ["auto", "bootstrap"]
POINTWISE = "inference='bootstrap'"  # the fix named by the default inference's pointwise error


def econml_data(n=400, seed=123):
    """EconML's TestInference data: X ~ U(0, 1)^3, W ~ N(0, 1)^3, T ~ Bernoulli(0.5),
    Y ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=n), rng.binomial(1, 0.5, size=n), rng.uniform(size=(n, 3)),
            rng.normal(size=(n, 3)))


def _inference(kind):
    return CFRBootstrapInference(n_bootstrap_samples=5) if kind == "bootstrap" else kind


@pytest.fixture(scope="module")
def data():
    return econml_data()


@pytest.fixture(scope="module")
def fitted(data):
    """CFR fitted with each inference, and EconML's LinearDRLearner, on the same data."""
    Y, T, X, W = data
    ests = {kind: CFR(**TINY).fit(Y, T, X=X, W=W, inference=_inference(kind))
            for kind in INFERENCES}
    ests["econml"] = LinearDRLearner(model_regression=LinearRegression(),
                                     model_propensity=LogisticRegression()).fit(Y, T, X=X, W=W)
    return ests


# ============================================================================ test_inference.py
@pytest.mark.parametrize("kind", INFERENCES)
def test_summary(fitted, kind):
    """EconML's linear estimators summarise coefficients; CFR's summary() is of the average
    effects, with the fitted inference's standard errors and normal intervals."""
    est = fitted[kind]
    table = np.asarray(est.summary().tables[0].data)
    assert list(table[0, 1:]) == ["point_estimate", "stderr", "zstat", "pvalue", "ci_lower",
                                  "ci_upper"]
    assert list(table[1:, 0]) == ["ATE", "ATT", "ATC"]
    values = table[1:, 1:].astype(float)
    for row, target in zip(values, ("ate", "att", "atc")):
        res = est.average_effect(target)
        assert row[0] == pytest.approx(res.estimate, abs=1e-3)
        if kind == "auto":
            assert row[1] == pytest.approx(res.stderr, abs=1e-3)
        else:  # the replicas' spread
            reps = [r.average_effect(target).estimate for r in est._inference._est._instances]
            assert row[1] == pytest.approx(np.std(reps), abs=1e-3)
        assert row[4:] == pytest.approx([row[0] - 1.96 * row[1], row[0] + 1.96 * row[1]],
                                        abs=2e-3)
    narrow = np.asarray(est.summary(alpha=0.5).tables[0].data)[1:, 5:].astype(float)
    assert np.all(narrow[:, 0] > values[:, 4]) and np.all(narrow[:, 1] < values[:, 5])
    named = est.summary(output_names=["Q"])
    assert "on Q over" in str(named.tables[0].title)


@pytest.mark.parametrize("inference", ["auto", "econml_bootstrap"])
def test_can_summarize(data, inference):
    Y, T, X, W = data
    inf = BootstrapInference(n_bootstrap_samples=3, n_jobs=1) if inference != "auto" else "auto"
    smry = CFR(**TINY).fit(Y, T > 0, X=X, W=W, inference=inf).summary()
    assert len(smry.tables[0].data) == 4 and "ATE" in str(smry)


def test_summary_needs_intervals(data):
    """Without any inference for the averages (debias=None), a clear error naming the fix."""
    Y, T, X, W = data
    est = CFR(**TINY, debias=None).fit(Y, T, X=X, W=W)
    with pytest.raises(ValueError, match="debias='aipw'.*inference='bootstrap'"):
        est.summary()


@pytest.mark.parametrize("kind", INFERENCES)
def test_alpha(fitted, data, kind):
    X = data[2]
    lb, ub = fitted[kind].const_marginal_ate_interval(X, alpha=1)
    assert (lb == ub).all()
    lb, ub = fitted[kind].const_marginal_ate_interval(X)
    assert (lb != ub).all()


@pytest.mark.parametrize("kind", INFERENCES)
def test_pointwise_inference(fitted, data, kind):
    """EconML's test_inference_with_none_stderr / test_auto_inference: pointwise inference
    (bootstrap); the default inference's clear error names the bootstrap."""
    Y, T, X, W = data
    est = fitted[kind]
    calls = [lambda: est.effect_inference(X), lambda: est.const_marginal_effect_inference(X),
             lambda: est.marginal_effect_inference(T, X)]
    if kind == "auto":
        for call in calls:
            with pytest.raises(NotImplementedError, match=POINTWISE):
                call()
        return
    for call in calls:
        res = call()
        assert res.stderr is not None and res.summary_frame().shape[0] == len(X)
    assert est.effect_inference(X).population_summary().mean_point == pytest.approx(
        est.ate(X))


@pytest.mark.parametrize("kind", INFERENCES)
def test_pickle_inference_results(fitted, data, kind):
    X = data[2]
    est = fitted[kind]
    results = [est.ate_inference(), est.const_marginal_ate_inference(X)]
    if kind == "bootstrap":  # EconML's results carried a local function
        results += [est.effect_inference(X), est.const_marginal_effect_inference(X)]
    for res in results:
        again = pickle.loads(pickle.dumps(res))
        np.testing.assert_array_equal(again.pred, res.pred)


@pytest.mark.parametrize("kind", INFERENCES)
def test_mean_pred_stderr(fitted, data, kind):
    """The average effects' inference has a standard error of the mean (EconML's linear final
    stages; CFR's averages with either inference)."""
    X = data[2]
    est = fitted[kind]
    for res in (est.ate_inference(X), est.const_marginal_ate_inference(X),
                est.const_marginal_ate_inference()):
        assert res.mean_pred_stderr is not None and np.all(np.asarray(res.stderr_mean) > 0)


@pytest.mark.parametrize("kind", INFERENCES)
def test_isolate_inference_results_from_estimator(fitted, data, kind):
    X = data[2]
    est = fitted[kind]
    before = est.const_marginal_ate()
    est.const_marginal_ate_inference().pred[0] = 0.5
    np.testing.assert_array_equal(est.const_marginal_ate(), before)
    if kind == "bootstrap":
        effect = est.effect(X)
        est.effect_inference(X).pred[0] = 0.5
        np.testing.assert_array_equal(est.effect(X), effect)


@pytest.mark.parametrize("op", ["translate", "scale"])
@pytest.mark.parametrize("value", ["number", "series"])
@pytest.mark.parametrize("kind", INFERENCES)
def test_translate_and_scale(fitted, data, op, value, kind):
    """EconML's test_translate/test_scale on const_marginal_effect_inference; a pandas Series
    holds one value per row of X (for a discrete treatment the results have an arm axis)."""
    X = data[2]
    est = fitted[kind]
    if kind == "auto":
        with pytest.raises(NotImplementedError, match=POINTWISE):
            est.const_marginal_effect_inference(X)
        return
    other = 10 if value == "number" else pd.Series(np.arange(1.0, len(X) + 1))
    per_row = np.reshape(np.asarray(other, dtype=float), (-1, 1)) if value == "series" else other
    inf = est.const_marginal_effect_inference(X)
    pred, (lo, hi) = inf.point_estimate, inf.conf_int()
    getattr(inf, op)(other)
    pred2, (lo2, hi2) = inf.point_estimate, inf.conf_int()
    inf.summary_frame()
    if op == "translate":
        np.testing.assert_array_equal(pred + per_row, pred2)
        np.testing.assert_array_almost_equal(lo + per_row, lo2)
        np.testing.assert_array_almost_equal(hi + per_row, hi2)
    else:
        np.testing.assert_array_equal(pred * per_row, pred2)
        np.testing.assert_array_almost_equal(lo * per_row, lo2)
        np.testing.assert_array_almost_equal(hi * per_row, hi2)


# ======================================================================= test_ate_inference.py
@pytest.mark.parametrize("at", ["fitted_X", "X_None"])
@pytest.mark.parametrize("kind", INFERENCES)
def test_ate_inference(fitted, data, kind, at):
    Y, T, X, W = data
    est, ref = fitted[kind], fitted["econml"]
    XX = X if at == "fitted_X" else None
    shape = np.shape(ref.ate(X))
    cm_shape = np.shape(ref.const_marginal_ate(X))  # discrete T: marginal == const_marginal
    assert np.shape(est.ate(XX)) == shape
    assert np.shape(est.ate_interval(XX, alpha=0.01)[0]) == shape
    assert np.shape(est.ate_inference(XX).conf_int_mean()[0]) == shape
    assert np.shape(est.marginal_ate(T, XX)) == cm_shape
    assert np.shape(est.marginal_ate_interval(T, XX, alpha=0.01)[0]) == cm_shape
    assert np.shape(est.marginal_ate_inference(T, XX).conf_int_mean()[0]) == cm_shape
    assert np.shape(est.const_marginal_ate(XX)) == cm_shape
    assert np.shape(est.const_marginal_ate_interval(XX, alpha=0.01)[0]) == cm_shape
    assert np.shape(est.const_marginal_ate_inference(XX).conf_int_mean()[0]) == cm_shape
    # z-tests of the summaries: far from 10, exactly at the mean effect (EconML's test reads
    # column 4, the p-value after a row label for each of its 3 outcomes; one outcome: no label)
    for res, mean in ((est.ate_inference(XX), np.mean(est.effect(X), axis=0)),
                      (est.marginal_ate_inference(T, XX),
                       np.mean(est.marginal_effect(T, X), axis=0)),
                      (est.const_marginal_ate_inference(XX),
                       np.mean(est.const_marginal_effect(X), axis=0))):
        for value, check in ((10, lambda p: p < 1e-5), (mean, lambda p: p == pytest.approx(1))):
            header, row = res.summary(value=value).tables[0].data[:2]
            assert header[-6:] == ["mean_point", "stderr_mean", "zstat", "pvalue",
                                   "ci_mean_lower", "ci_mean_upper"]
            assert check(float(row[-3]))


@pytest.mark.parametrize("case", ["three_outcomes", "two_treatment_columns"])
def test_ate_inference_multiple_outcomes_or_treatments(data, case):
    """EconML's test uses Y (n, 3) and T (n, 2): one outcome and one treatment column per CFR,
    each a clear error naming the fix."""
    Y, T, X, W = data
    if case == "three_outcomes":
        with pytest.raises(ValueError, match="single outcome.*one estimator per outcome"):
            CFR(**TINY).fit(np.column_stack([Y, Y, Y]), T, X=X, W=W)
    else:
        with pytest.raises(ValueError, match="single column.*one categorical treatment"):
            CFR(**TINY).fit(Y, np.column_stack([T, 1 - T]), X=X, W=W)


# ========================================================================== test_integration.py
@pytest.fixture(scope="module")
def pandas_data():
    """EconML's TestPandasIntegration frame (columns named ``*_df``)."""
    rng = np.random.default_rng(123)
    n = 300
    d = {f"W{i}_df": rng.normal(size=n) for i in range(4)}
    d.update({f"X{i}_df": rng.normal(size=n) for i in range(2)})
    d.update({f"T{i}_df": rng.uniform(size=n) for i in range(2)})
    d["T2_df"] = rng.binomial(1, 0.5, size=n)
    d["T_cat"] = rng.choice(["None", "One", "Two"], size=n, p=[0.4, 0.3, 0.3])
    d.update({f"Y{i}_df": rng.normal(size=n) for i in range(2)})
    return pd.DataFrame(d)


def _frames(df):
    return (df[["Y0_df"]], df[[f"X{i}_df" for i in range(2)]],
            df[[f"W{i}_df" for i in range(4)]])


def test_pandas_binary_treatment_names(pandas_data):
    """As EconML's LinearDRLearner on the same DataFrames: effect and pointwise intervals,
    feature, treatment and output names in summaries and population summaries."""
    Y, X, W = _frames(pandas_data)
    T = pandas_data[["T2_df"]]
    est = CFR(**TINY).fit(Y, T, X=X, W=W, inference=CFRBootstrapInference(5))
    ref = LinearDRLearner(model_regression=LinearRegression(),
                          model_propensity=LogisticRegression()).fit(Y, T, X=X, W=W)
    assert est.effect(X).shape == ref.effect(X).shape
    lb, ub = est.effect_interval(X, alpha=0.05)
    assert np.all(lb <= ub)
    assert est.cate_feature_names() == list(X.columns)
    assert est.cate_treatment_names() == ref.cate_treatment_names() == ["T2_df_1"]
    assert est.cate_output_names() == ref.cate_output_names() == ["Y0_df"]
    assert "on Y0_df over" in str(est.summary().tables[0].title)
    popsum = est.effect_inference(X).population_summary()
    assert list(popsum.output_names) == ["Y0_df"]
    X1 = X.rename(columns={c: f"{c}_1" for c in X.columns})  # re-fit with other names
    est.fit(Y, T, X=X1, W=W)
    assert est.cate_feature_names() == list(X1.columns)


@pytest.fixture(scope="module")
def categorical(pandas_data):
    Y, X, _ = _frames(pandas_data)
    return CFR(**TINY, categories=["None", "One", "Two"]).fit(Y, pandas_data["T_cat"], X=X)


def test_pandas_categorical_treatment_summary(categorical):
    assert categorical.cate_treatment_names() == ["T_cat_One", "T_cat_Two"]
    rows = np.asarray(categorical.summary().tables[0].data)[1:, 0]
    assert list(rows) == [f"{t}|T_cat_{arm}" for arm in ("One", "Two")
                          for t in ("ATE", "ATT", "ATC")]
    rows = np.asarray(categorical.summary(treatment_names=["Category"]).tables[0].data)[1:, 0]
    assert rows[0] == "ATE|Category_One" and rows[-1] == "ATC|Category_Two"


def test_pandas_categorical_treatment_refit_with_new_categories(pandas_data, categorical):
    Y, X, _ = _frames(pandas_data)
    est = clone(categorical)
    est.fit(Y, pandas_data["T_cat"], X=X)  # refit
    assert est.cate_treatment_names() == ["T_cat_One", "T_cat_Two"]
    est.categories = [f"{t}_1" for t in ("None", "One", "Two")]
    est.fit(Y, pandas_data["T_cat"] + "_1", X=X)
    assert est.cate_treatment_names() == ["T_cat_One_1", "T_cat_Two_1"]
    assert est.const_marginal_ate().shape == (1, 2)  # d_y + d_t: Y is a one-column DataFrame


def test_pandas_metalearner_style_inputs(pandas_data):
    """EconML's test_metalearners: X = [X | W] as one array."""
    Y, X, W = _frames(pandas_data)
    XW = np.hstack([X, W])
    est = CFR(**TINY).fit(Y, pandas_data["T2_df"], X=XW)
    assert est.effect(XW).shape == (len(XW), 1)  # as EconML's for a one-column Y


def test_pandas_continuous_treatment(pandas_data):
    """A continuous T is a dose (issue 47): fitted, with EconML's effect methods, with W as in
    EconML's DML (the curves given X) or every covariate in X; the constant marginal effect
    names the dose methods."""
    Y, X, W = _frames(pandas_data)
    t0, t1 = np.quantile(pandas_data["T0_df"], [0.25, 0.75])
    with_w = CFR(**TINY).fit(Y, pandas_data[["T0_df"]], X=X, W=W)
    assert with_w.effect_model_ == "model_final"
    assert with_w.effect(X[:4], T0=t0, T1=t1).shape == (4, 1)
    assert with_w.marginal_effect(t0, X[:4]).shape == (4, 1)
    est = CFR(**TINY).fit(Y, pandas_data[["T0_df"]], X=np.hstack([X, W]))
    assert est.fitted_.continuous
    assert est.effect(np.hstack([X, W])[:4], T0=t0, T1=t1).shape == (4, 1)
    with pytest.raises(NotImplementedError, match="dose_response"):
        est.const_marginal_effect(np.hstack([X, W])[:4])


@pytest.mark.parametrize("case", ["two_outcomes", "two_continuous_treatments"])
def test_pandas_inherent_limits(pandas_data, case):
    Y, X, W = _frames(pandas_data)
    if case == "two_outcomes":
        args, message = ((pandas_data[["Y0_df", "Y1_df"]], pandas_data["T2_df"]),
                         "single outcome.*one estimator per outcome")
    else:
        args, message = (Y, pandas_data[["T0_df", "T1_df"]]), "one categorical treatment"
    with pytest.raises(ValueError, match=message):
        CFR(**TINY).fit(*args, X=X, W=W)


@pytest.mark.parametrize("form", ["int_array", "float_array", "bool_array", "int_series",
                                  "float_series", "str_series"])
def test_treatment_names_as_econml(form):
    """cate_treatment_names() as EconML's for every form of a binary treatment (an integer
    Series gave "T_1.0" where EconML gives "T_1")."""
    Y, T, X, _ = econml_data(n=200)
    T = {"int_array": T, "float_array": T.astype(float), "bool_array": T.astype(bool),
         "int_series": pd.Series(T, name="T"), "float_series": pd.Series(T * 1.0, name="T"),
         "str_series": pd.Series(np.where(T, "b", "a"), name="T")}[form]
    est = CFR(**{**TINY, "n_iter": 20}, debias=None).fit(Y, T, X=X)
    ref = LinearDRLearner(model_regression=LinearRegression(),
                          model_propensity=LogisticRegression()).fit(Y, T, X=X)
    assert est.cate_treatment_names() == ref.cate_treatment_names()


# ====================================================================== test_model_selection.py
def simple_dgp(n=300, d_x=2, d_w=3, seed=0, nonlinear=False):
    """EconML's _simple_dgp with a discrete treatment; ``nonlinear``: T depends on the XOR of
    the signs of X0 and X1, which no logistic model of X and W captures."""
    rng = np.random.default_rng(seed)
    X, W = rng.normal(size=(n, d_x)), rng.normal(size=(n, d_w))
    XW = np.hstack([X, W])
    if nonlinear:
        T = rng.binomial(1, np.where((X[:, 0] > 0) ^ (X[:, 1] > 0), 0.85, 0.15))
    else:
        T = rng.binomial(1, expit(XW @ rng.normal(size=d_x + d_w)))
    Y = (X @ rng.normal(size=d_x)) * T + XW @ rng.normal(size=d_x + d_w) + rng.normal(size=n)
    return Y, T, X, W


SELECT = dict(TINY, n_iter=20)  # only the propensity matters here

CANDIDATES = {"auto": {"logistic", "boosting"}, "linear": {"logistic"},
              "poly": {"logistic", "poly2", "poly3"}, "forest": {"forest"}, "gbf": {"boosting"},
              "nnet": {"nnet"}, "automl": {"logistic", "poly2", "poly3", "forest", "boosting",
                                           "nnet"}}


@pytest.mark.parametrize("name", list(CANDIDATES))
def test_model_propensity_strings(name):
    Y, T, X, W = simple_dgp()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the MLP's convergence warnings
        est = CFR(**SELECT, model_propensity=name).fit(Y, T, X=X, W=W)
    assert est.propensity_model_ in CANDIDATES[name]
    assert np.isfinite(est.average_effect().stderr)


def test_model_propensity_unknown_string():
    Y, T, X, W = simple_dgp()
    with pytest.raises(ValueError, match="some_random_string.*'linear'"):
        CFR(**SELECT, model_propensity="some_random_string").fit(Y, T, X=X, W=W)


def test_model_propensity_list_selection():
    Y, T, X, W = simple_dgp()
    one = CFR(**SELECT, model_propensity=[LogisticRegression()]).fit(Y, T, X=X, W=W)
    assert one.propensity_model_ == "LogisticRegression"
    with pytest.raises(ValueError, match=r"model_propensity=\[\]"):
        CFR(**SELECT, model_propensity=[]).fit(Y, T, X=X, W=W)
    pair = [LogisticRegression(), RandomForestClassifier(n_estimators=50, min_samples_leaf=5)]
    # the treatment is logistic in X and W: the logistic regression fits better
    assert CFR(**SELECT, model_propensity=pair).fit(
        Y, T, X=X, W=W).propensity_model_ == "LogisticRegression"
    Y, T, X, W = simple_dgp(nonlinear=True)  # now only the forest captures it
    assert CFR(**SELECT, model_propensity=pair).fit(
        Y, T, X=X, W=W).propensity_model_ == "RandomForestClassifier"


@pytest.mark.parametrize("model", [
    LogisticRegressionCV(), GridSearchCV(LogisticRegression(), {"C": [1, 10]}),
    RandomizedSearchCV(LogisticRegression(), {"C": [1, 10]}, n_iter=2, random_state=0)],
    ids=["LogisticRegressionCV", "GridSearchCV", "RandomizedSearchCV"])
def test_sklearn_model_selection(model):
    Y, T, X, W = simple_dgp()
    est = CFR(**SELECT, model_propensity=model).fit(Y, T, X=X, W=W)
    assert est.propensity_model_ == type(model).__name__


def test_propensity_model_without_probabilities():
    """RidgeClassifierCV has no predict_proba: AIPW needs probabilities (a clear error)."""
    Y, T, X, W = simple_dgp()
    with pytest.raises(TypeError, match="predict_proba"):
        CFR(**SELECT, model_propensity=RidgeClassifierCV()).fit(Y, T, X=X, W=W)


def test_model_propensity_names_are_saved(tmp_path):
    Y, T, X, W = simple_dgp()
    est = CFR(**SELECT, model_propensity=["linear", RandomForestClassifier(n_estimators=20)]
              ).fit(Y, T, X=X, W=W)
    loaded = CFR.load(est.save(tmp_path / "m.zip"))
    assert loaded.model_propensity[0] == "linear"
    assert isinstance(loaded.model_propensity[1], RandomForestClassifier)
    assert loaded.model_propensity[1].n_estimators == 20
    np.testing.assert_array_equal(loaded.effect(X), est.effect(X))
    named = CFR(**SELECT, model_propensity={"lr": LogisticRegression(C=0.5)}).fit(Y, T, X=X, W=W)
    assert named.propensity_model_ == "lr"
    back = CFR.load(named.save(tmp_path / "named.zip"))
    assert list(back.model_propensity) == ["lr"]
    assert back.model_propensity["lr"].C == 0.5
    np.testing.assert_array_equal(back.effect(X), named.effect(X))


# ============================================================================= test_refit.py
def test_set_parameters_and_refit(data):
    """Parameters set on a fitted estimator take effect at the next fit, as in a new one."""
    Y, T, X, W = data
    est = CFR(**TINY).fit(Y, T, X=X, W=W)
    est.model_propensity = LogisticRegression()
    est.min_propensity = 0.1
    est.fit(Y, T, X=X, W=W)
    new = CFR(**TINY, model_propensity=LogisticRegression(), min_propensity=0.1).fit(
        Y, T, X=X, W=W)
    assert est.propensity_model_ == "LogisticRegression"
    np.testing.assert_array_equal(est.effect(X), new.effect(X))
    np.testing.assert_array_equal(est.ate_interval(), new.ate_interval())


def test_refit_with_other_treatment_levels(data):
    """EconML's test_can_set_discrete_treatment: three arms, then two."""
    Y, T, X, W = data
    T3 = np.random.default_rng(0).choice(3, size=len(T))
    est = CFR(**TINY).fit(Y, T3, X=X, W=W)
    assert est.const_marginal_effect(X).shape == (len(X), 2)
    est.fit(Y, T, X=X, W=W)
    assert est.const_marginal_effect(X).shape == (len(X), 1)


@pytest.mark.parametrize("kind", INFERENCES)
def test_pickle_fitted_estimator(fitted, data, kind):
    """A fitted CFR (also with bootstrap inference) pickles and predicts identically."""
    X = data[2]
    est = fitted[kind]
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.effect(X), est.effect(X))
    np.testing.assert_array_equal(again.ate_interval(), est.ate_interval())
    assert str(again.summary()) == str(est.summary())
    if kind == "bootstrap":
        np.testing.assert_array_equal(again.effect_interval(X), est.effect_interval(X))
    copied = copy.deepcopy(est)
    np.testing.assert_array_equal(copied.effect(X), est.effect(X))
    unfitted = clone(est)
    assert unfitted.get_params() == est.get_params() and "fitted_" not in vars(unfitted)


# ============================================== test_ate_inference.py with (n, 1) columns (#46)
SHAPES = [("vector", "vector"), ("column", "column"), ("vector", "column"), ("column", "vector")]


@pytest.fixture(scope="module")
def column_fits(data):
    """CFR (two K-fold members: the jackknife over other units too) and EconML's
    LinearDRLearner, fitted on Y and T as vectors or (n, 1) columns, with and without W."""
    Y, T, X, W = data
    fits = {}
    for y_form, t_form in SHAPES:
        y = Y if y_form == "vector" else Y.reshape(-1, 1)
        t = T if t_form == "vector" else T.reshape(-1, 1)
        for with_w in (True, False):
            w = W if with_w else None
            cfr = CFR(**{**TINY, "n_ensemble": 2, "n_iter": 40}).fit(y, t, X=X, W=w,
                                                                     inference="auto")
            ref = LinearDRLearner(model_regression=LinearRegression(),
                                  model_propensity=LogisticRegression()).fit(y, t, X=X, W=w)
            fits[(y_form, t_form, with_w)] = (cfr, ref, t)
    return fits


@pytest.mark.parametrize("with_w", [True, False], ids=["W", "no_W"])
@pytest.mark.parametrize("y_form,t_form", SHAPES)
def test_ate_inference_shapes_with_column_y_and_t(column_fits, data, y_form, t_form, with_w):
    """EconML's test_ate_inference for Y and T given as vectors or (n, 1) columns: every average
    effect, its interval (several alphas) and its inference has the shape EconML's
    LinearDRLearner gives (a (1,) outcome axis for a column Y), over the fitted units (X or
    None) and over other units (the members' jackknife). ``ate_interval(X, alpha=0.01)`` raised
    TypeError inside EconML's conf_int_mean for a column Y."""
    X = data[2]
    est, ref, T = column_fits[(y_form, t_form, with_w)]
    ate_shape, cm_shape = np.shape(ref.ate(X)), np.shape(ref.const_marginal_ate(X))
    assert ate_shape == (() if y_form == "vector" else (1,)) and cm_shape == ate_shape + (1,)
    for XX in (X, None, X[:50]):
        ate = est.ate(XX)
        assert np.shape(ate) == ate_shape
        assert np.shape(est.marginal_ate(T, XX)) == cm_shape
        assert np.shape(est.const_marginal_ate(XX)) == cm_shape
        widths = []
        for alpha in (0.01, 0.05, 0.3):
            lo, hi = est.ate_interval(XX, alpha=alpha)
            assert np.shape(lo) == np.shape(hi) == ate_shape
            assert np.all(lo < ate) and np.all(ate < hi)
            widths.append(float(np.ravel(hi - lo)[0]))
            for lo, hi in (est.marginal_ate_interval(T, XX, alpha=alpha),
                           est.const_marginal_ate_interval(XX, alpha=alpha)):
                assert np.shape(lo) == np.shape(hi) == cm_shape
        assert widths[0] > widths[1] > widths[2]
        inf = est.ate_inference(XX)
        assert np.shape(inf.conf_int_mean()[0]) == ate_shape
        assert np.shape(inf.stderr_mean) == ate_shape
        for res in (est.marginal_ate_inference(T, XX), est.const_marginal_ate_inference(XX)):
            assert np.shape(res.conf_int_mean(alpha=0.01)[0]) == cm_shape
        # summary_frame: one row (one outcome, one treated arm), the interval of ate_interval
        frame = inf.summary_frame(alpha=0.01, decimals=12)
        assert list(frame.columns) == ["mean_point", "stderr_mean", "zstat", "pvalue",
                                       "ci_mean_lower", "ci_mean_upper"]
        assert frame.shape == (1, 6)
        lo, hi = est.ate_interval(XX, alpha=0.01)
        assert frame[["ci_mean_lower", "ci_mean_upper"]].iloc[0].tolist() == pytest.approx(
            [float(np.ravel(lo)[0]), float(np.ravel(hi)[0])], abs=1e-9)
        assert frame["mean_point"].iloc[0] == pytest.approx(float(np.ravel(ate)[0]), abs=1e-9)
        cm_frame = est.const_marginal_ate_inference(XX).summary_frame()
        assert cm_frame.index.get_level_values("T").tolist() == est.cate_treatment_names()
        # EconML's z-tests of the summaries, with the outcome's shape (over other units the
        # jackknife of two members has a t test with 1 degree of freedom: p falls slowly)
        mean = np.mean(est.effect(X if XX is None else XX), axis=0)
        far = 1e-5 if XX is None or XX is X else 0.02
        for value, check in ((10, lambda p: p < far), (mean, lambda p: p == pytest.approx(1))):
            row = inf.summary(value=value).tables[0].data[1]
            assert check(float(row[-3]))
            assert float(row[-3]) == pytest.approx(float(inf.summary_frame(
                value=value)["pvalue"].iloc[0]), abs=1e-3)


def test_summary_takes_the_treated_arm_as_econml(column_fits, data):
    """EconML's discrete-treatment estimators take ``summary(T, *, alpha, value, decimals,
    feature_names, treatment_names, output_names)``; CFR's summary(T) keeps that arm's rows."""
    est, ref, _ = column_fits[("column", "column", True)]
    ref.summary(T=1)  # EconML's form, for reference
    full = np.asarray(est.summary().tables[0].data)
    for call in (lambda: est.summary(T=1), lambda: est.summary(1),
                 lambda: est.summary(1, alpha=0.05, value=0, decimals=3, feature_names=["a"],
                                     treatment_names=["T"], output_names=["Y"])):
        np.testing.assert_array_equal(np.asarray(call().tables[0].data)[1:, 1:], full[1:, 1:])
    Y, _, X, _ = data
    arms = CFR(**TINY).fit(Y, np.arange(len(Y)) % 3, X=X)
    rows = np.asarray(arms.summary(T=2).tables[0].data)[1:, 0]
    assert [r.split("|")[0] for r in rows] == ["ATE", "ATT", "ATC"] and rows[0].endswith("_2")
    with pytest.raises(ValueError, match="control arm.*one of \\[1, 2\\].*alpha="):
        arms.summary(0)
    with pytest.raises(ValueError, match="not a fitted treatment level.*alpha="):
        arms.summary(0.1)  # the former positional alpha: a clear error naming the keyword


def test_bootstrap_ate_inference_with_a_column_y(data):
    """The same shapes from the stacked bootstrap's average-effect inference."""
    Y, T, X, _ = data
    est = CFR(**{**TINY, "n_iter": 30}).fit(Y.reshape(-1, 1), T.reshape(-1, 1), X=X,
                                            inference=CFRBootstrapInference(3))
    for XX in (X, None):
        assert [np.shape(a) for a in est.ate_interval(XX, alpha=0.01)] == [(1,), (1,)]
        assert est.ate_inference(XX).summary_frame().shape == (1, 6)
        assert np.shape(est.const_marginal_ate_interval(XX, alpha=0.01)[0]) == (1, 1)
        assert np.shape(est.marginal_ate_inference(T, XX).conf_int_mean()[0]) == (1, 1)
