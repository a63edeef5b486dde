"""Tables as users have them: categorical, string and bool columns and missing values, through
EconML's API and DoWhy's backdoor.cfr (the encoding itself is tested in test_tabular.py)."""

import warnings

import numpy as np
import pandas as pd
import pytest
from helpers import TINY

import dowhy_cfr  # noqa: F401
from dowhy_cfr import CFR

FIT = {**TINY, "n_rep_layers": 2, "rep_dim": 32, "head_dim": 32, "n_iter": 400, "eval_every": 20}


def _table(n=800, seed=0):
    """Mixed columns with missing visits; the effect depends on the region (2 in the north,
    0.5 elsewhere); age and smoking confound."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"age": rng.normal(40, 10, n), "visits": rng.poisson(2, n).astype(float),
                       "smoker": rng.random(n) < 0.3,
                       "region": pd.Categorical(rng.choice(["north", "south", "east"], n)),
                       "plan": rng.choice(["basic", "plus"], n)})
    df.loc[rng.random(n) < 0.1, "visits"] = np.nan
    e = 1 / (1 + np.exp(-(df["age"] - 40) / 10 - 0.5 * df["smoker"]))
    t = (rng.random(n) < e).astype(int)
    tau = np.where(df["region"] == "north", 2.0, 0.5)
    y = 0.05 * df["age"] + df["smoker"] + t * tau + rng.normal(size=n)
    return df, t, y.to_numpy(), tau


@pytest.fixture(scope="module")
def fitted():
    df, t, y, tau = _table()
    before = df.copy()
    est = CFR(**FIT).fit(y, t, X=df)
    pd.testing.assert_frame_equal(df, before)  # the caller's table is not modified
    return est, df, t, y, tau


def test_a_mixed_table_fits_and_the_effect_follows_the_categories(fitted):
    """Measured: north 2.02, south 0.50, east 0.51 (true 2, 0.5, 0.5); untrained (n_iter=1):
    1.03, 1.02, 1.02."""
    est, df, _, _, tau = fitted
    effect = est.effect(df)
    by_region = {r: effect[(df["region"] == r).to_numpy()].mean() for r in ("north", "south", "east")}
    assert by_region["north"] == pytest.approx(2.0, abs=0.4)
    assert by_region["south"] == pytest.approx(0.5, abs=0.4)
    assert by_region["east"] == pytest.approx(0.5, abs=0.4)
    assert est.ate() == pytest.approx(tau.mean(), abs=0.25)
    assert est.n_features_in_ == 5


def test_new_rows_need_the_same_columns_and_known_levels(fitted, tmp_path):
    est, df, *_ = fitted
    new = df.iloc[:5]
    np.testing.assert_allclose(est.effect(new), est.effect(df)[:5], rtol=1e-5)
    loaded = CFR.load(est.save(tmp_path / "m.cfr"))
    np.testing.assert_array_equal(loaded.effect(df), est.effect(df))
    with pytest.raises(ValueError, match=r"'region' has level\(s\) \['west'\] not seen at fit"):
        est.effect(new.assign(region=pd.Categorical(["west"] * 5)))
    with pytest.raises(ValueError, match=r"another order than at fit .*; select the 5 fitted "
                                         r"columns in their order, X\[\['age', 'visits'"):
        est.effect(new[list(reversed(df.columns))])
    with pytest.raises(ValueError, match=r"missing \['plan'\], unexpected \['plan_code'\]"):
        est.effect(new.rename(columns={"plan": "plan_code"}))
    with pytest.raises(ValueError, match=r"\['age'\] have missing values, but had none at fit"):
        est.effect(new.assign(age=np.nan))


def test_a_column_without_values_is_refused():
    df, t, y, _ = _table(200)
    with pytest.raises(ValueError, match=r"'empty'.* have no values at all"):
        CFR(**FIT).fit(y, t, X=df.assign(empty=np.nan))


def test_dowhy_with_a_mixed_table():
    """backdoor.cfr on a table with a categorical effect modifier, a string and a bool
    confounder and missing values (DoWhy encodes the categorical columns; CFR imputes)."""
    from dowhy import CausalModel

    df, t, y, tau = _table()
    data = df.assign(t=t, y=y)
    model = CausalModel(data=data, treatment="t", outcome="y",
                        common_causes=["age", "smoker", "visits", "plan"],
                        effect_modifiers=["region"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimand = model.identify_effect(proceed_when_unidentifiable=True)
        estimate = model.estimate_effect(estimand, method_name="backdoor.cfr",
                                         method_params={"init_params": FIT})
    assert estimate.value == pytest.approx(tau.mean(), abs=0.25)
