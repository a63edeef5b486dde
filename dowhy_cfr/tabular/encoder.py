r"""The :class:`TableEncoder`: a mixed-type table (numeric, bool, categorical and string columns,
with missing values in any of them) or a numeric array to a float64 matrix (see the package
docstring, :mod:`dowhy_cfr.tabular`, for the references)."""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.impute import SimpleImputer
from sklearn.preprocessing import OneHotEncoder

from .._validation import as_columns, column_mismatch
from .._validation import shown as _shown
from .state import STATE_VERSION, check_state

__all__ = ["TableEncoder", "NUMERIC", "BOOLEAN", "CATEGORICAL"]

NUMERIC, BOOLEAN, CATEGORICAL = "numeric", "bool", "categorical"

# ============================================================================ input tables
def _as_table(X, name: str) -> tuple[pd.DataFrame | np.ndarray, bool]:
    """``X`` as a DataFrame (kept as the caller's object; never written to) or a fresh 2-D float
    array, and whether it was a DataFrame."""
    if X is None:
        raise ValueError(f"{name} is required (got None)")
    if isinstance(X, pd.Series):
        X = X.to_frame()
    if isinstance(X, pd.DataFrame):
        if X.ndim != 2 or X.shape[1] == 0:
            raise ValueError(f"{name} has no columns; pass at least one covariate")
        names = [str(c) for c in X.columns]
        dup = sorted({c for c in names if names.count(c) > 1})
        if dup:
            raise ValueError(f"{name} has duplicated column names {dup}; rename them so that each "
                             f"column has its own name (e.g. X.columns = [...])")
        return X, True
    return _numeric_array(X, name), False


def _numeric_array(X, name: str) -> np.ndarray:
    arr = as_columns(name, np.array(X, copy=True))
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has no columns; pass at least one covariate")
    if arr.dtype.kind in "biuf":
        return arr.astype("float64")
    bad = []
    out = np.empty(arr.shape, dtype="float64")
    for j in range(arr.shape[1]):
        try:
            out[:, j] = pd.to_numeric(pd.Series(arr[:, j], dtype=object)).to_numpy(
                dtype="float64", na_value=np.nan)
        except (TypeError, ValueError):
            bad.append(j)
    if bad:
        raise TypeError(
            f"{name} is a numpy array with non-numeric column(s) at position(s) {_shown(bad)}; "
            f"an array must hold numbers only. Pass a pandas DataFrame instead, with those "
            f"columns as strings or pandas.Categorical (e.g. pandas.DataFrame({name}, "
            f"columns=[...]).astype({{...: 'category'}})), and they are one-hot encoded")
    return out


def _column_kind(s: pd.Series, name: str) -> str:
    """NUMERIC, BOOLEAN or CATEGORICAL, from the dtype and, for object columns, the values."""
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return CATEGORICAL
    if pd.api.types.is_bool_dtype(dtype):
        return BOOLEAN
    if pd.api.types.is_complex_dtype(dtype):
        raise TypeError(f"X column {name!r} holds complex numbers; split it into real columns "
                        f"(e.g. X[{name!r}].real and X[{name!r}].imag)")
    if pd.api.types.is_numeric_dtype(dtype):
        return NUMERIC
    inferred = pd.api.types.infer_dtype(s, skipna=True)
    if (pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype)
            or isinstance(dtype, pd.PeriodDtype)
            or inferred in ("datetime64", "datetime", "date", "timedelta64", "timedelta", "time",
                            "period")):
        raise TypeError(f"X column {name!r} holds dates or times; convert it to numbers first, "
                        f"e.g. (X[{name!r}] - X[{name!r}].min()).dt.days for days since the "
                        f"first date")
    if inferred == "boolean":
        return BOOLEAN
    if inferred in ("integer", "floating", "mixed-integer-float", "decimal", "empty"):
        return NUMERIC
    return CATEGORICAL


def _numeric_values(s: pd.Series, name: str) -> np.ndarray:
    """A fresh float64 column, missing values (None, NaN, pd.NA) as NaN."""
    try:
        if s.dtype == object:
            s = pd.to_numeric(s)
        return s.to_numpy(dtype="float64", na_value=np.nan, copy=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"X column {name!r} was numeric at fit but holds non-numeric values now "
                        f"({exc}); convert it with pandas.to_numeric(X[{name!r}]) or pass the "
                        f"values it had at fit") from exc


def _level(v, kind: str) -> str:
    """The text label of a category value: the same label for 1, 1.0 and numpy's 1."""
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral):
        f = float(v)
        if f.is_integer():
            v = int(f)
        else:
            return repr(f)
    if isinstance(v, numbers.Integral):
        if kind == BOOLEAN and int(v) in (0, 1):
            return str(bool(v))
        return str(int(v))
    return str(v)


def _levels(s: pd.Series, kind: str) -> np.ndarray:
    """A fresh object array of text labels, missing values as ``np.nan``."""
    missing = pd.isna(s).to_numpy()
    out = np.full(len(s), np.nan, dtype=object)
    if isinstance(s.dtype, pd.CategoricalDtype):
        labels = np.array([_level(c, kind) for c in s.cat.categories], dtype=object)
        codes = s.cat.codes.to_numpy()
        out[~missing] = labels[codes[~missing]]
        return out
    values = s.to_numpy(dtype=object)[~missing]
    mapping = {u: _level(u, kind) for u in pd.unique(values)}
    out[~missing] = [mapping[v] for v in values]
    return out


def _check_finite_numeric(values: np.ndarray, names: list[str]) -> None:
    bad = [n for n, inf in zip(names, np.isinf(values).any(0)) if inf]
    if bad:
        raise ValueError(
            f"X column(s) {_shown(bad)} contain infinite values; replace them with NaN to treat "
            f"them as missing (X.replace([numpy.inf, -numpy.inf], numpy.nan)) or clip them to "
            f"finite numbers")


# ============================================================================ TableEncoder
class TableEncoder(BaseEstimator):
    r"""Encode a mixed-type table (DataFrame or numeric array) as a float64 matrix.

    Fit on the training covariates, then transform any table with the same columns. Columns are
    typed at fit, from their dtype:

    * **numeric** (integer, float, pandas' nullable ``Int64``/``Float64``; object columns holding
      only numbers): kept as they are. Missing values (NaN, None, ``pd.NA``) are replaced by the
      column's training **median**, and every column that had missing values at fit gets a 0/1
      **missing-value indicator** column (scikit-learn's ``SimpleImputer(strategy="median",
      add_indicator=True)``). With the indicator the network can give missingness an effect of
      its own (missing values are often informative: not missing at random), and the imputed
      value only places those units on the axis; impute-then-learn with the mask is consistent
      for flexible learners (Josse et al. 2019) and is among the best approaches in Perez-Lebel
      et al.'s (2022) benchmark. The median is robust to the skewed columns common in tables.
      A missing value at transform in a column that had none at fit is refused (there is no
      indicator for it; imputing silently would hide a change in the data).
    * **bool** (numpy/pandas bool, or object columns holding only True/False): one-hot encoded
      with ``drop="if_binary"``, i.e. one 0/1 column ``name_True``; with missing values,
      three columns (``name_False``, ``name_True``, ``name_nan``). Never grouped as rare.
    * **categorical** (pandas ``Categorical``, strings, object columns with other values, and
      the numeric columns named in ``categorical``): values are compared as text labels (``1``,
      ``1.0`` and ``"1"`` are the same level), one-hot encoded by scikit-learn's
      ``OneHotEncoder``; **missing values are a level of their own** (output ``name_nan``).
      A column with two levels gives one 0/1 column (``drop="if_binary"``); with more, one
      column per level (no level dropped: the networks are not hurt by the redundancy and every
      level stays visible). **Rare levels** (fewer than ``min_frequency`` training units,
      missing values included) are grouped into one level ``name_infrequent_sklearn``: a level
      seen in a handful of units cannot have an effect learned for it, and its one-hot column
      would be mostly zeros that standardisation turns into very large values for those few
      units. New rows with a rare level map to that group.

    Output columns follow the input columns' order: a numeric column gives its value and then its
    indicator (if any), a categorical column its one-hot columns. :meth:`get_feature_names_out`
    names them; ``source_index_`` and ``source_kind_`` say where each comes from.

    Errors say what to do: an all-missing column at fit, a level or a missing value at transform
    that the fit did not see (map it to a known level or refit), missing, extra or reordered
    columns, non-numeric columns in a numpy array, and infinite values. The caller's table is
    never modified.

    Parameters
    ----------
    min_frequency : int or None, default=10
        Levels of a categorical column with fewer training units are grouped into one
        "infrequent" level (scikit-learn's ``OneHotEncoder(min_frequency=...)``). ``None`` or
        ``1`` keeps every level. Bool columns are never grouped.
    categorical : list of str or None, default=None
        Names of numeric columns to one-hot encode anyway (e.g. integer codes of regions).

    Attributes
    ----------
    n_features_in_ : int
        Number of input columns.
    feature_names_in_ : ndarray of str
        Input column names (only when fitted on a DataFrame, as in scikit-learn).
    kinds_ : list of str
        ``"numeric"``, ``"bool"`` or ``"categorical"`` per input column.
    imputer_ : sklearn.impute.SimpleImputer or None
        The median imputer (with indicators) of the numeric columns, in their input order.
    encoders_ : dict of int to sklearn.preprocessing.OneHotEncoder
        One fitted encoder per bool/categorical input column (keyed by the column's position).
    n_features_out_ : int
        Number of output columns.
    source_index_ : ndarray of int
        The input column (position) of each output column (``n_features_out_`` entries).
    source_kind_ : ndarray of str
        ``"numeric"``, ``"missing_indicator"`` or ``"onehot"`` per output column.

    Examples
    --------
    >>> import pandas as pd
    >>> X = pd.DataFrame({"age": [30, None, 50, 41], "smoker": [True, False, False, True],
    ...                   "region": ["north", "south", None, "north"]})
    >>> enc = TableEncoder(min_frequency=None).fit(X)
    >>> list(enc.get_feature_names_out())  # doctest: +NORMALIZE_WHITESPACE
    ['age', 'missingindicator_age', 'smoker_True', 'region_north', 'region_south', 'region_nan']
    """

    def __init__(self, *, min_frequency: int | None = 10, categorical: list | None = None):
        self.min_frequency = min_frequency
        self.categorical = categorical

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None) -> "TableEncoder":
        """Type the columns of ``X`` and fit the imputer and the one-hot encoders (``y`` is
        ignored)."""
        min_frequency = self._checked_min_frequency()
        table, from_frame = _as_table(X, "X")
        if table.shape[0] == 0:
            raise ValueError("X is empty (0 rows); fit needs data")
        names = ([str(c) for c in table.columns] if from_frame
                 else [f"x{j}" for j in range(table.shape[1])])
        kinds = self._kinds(table, names, from_frame)
        self._check_not_all_missing(table, names, from_frame)
        numeric = [j for j, k in enumerate(kinds) if k == NUMERIC]
        self.imputer_ = None
        if numeric:
            values = self._numeric_block(table, names, numeric, from_frame)
            self.imputer_ = SimpleImputer(strategy="median", add_indicator=True).fit(values)
        self.encoders_ = {}
        for j, kind in enumerate(kinds):
            if kind != NUMERIC:
                levels = _levels(table.iloc[:, j], kind).reshape(-1, 1)
                self.encoders_[j] = _one_hot(None if kind == BOOLEAN else min_frequency).fit(levels)
        self._set_layout(names, kinds, from_frame)
        return self

    def _checked_min_frequency(self):
        m = self.min_frequency
        if m is None:
            return None
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise ValueError(f"min_frequency={m!r} is invalid: use an integer >= 1 (the fewest "
                             f"training units a level needs to keep a column of its own), or "
                             f"None to keep every level")
        return int(m)

    def _kinds(self, table, names, from_frame) -> list[str]:
        if not from_frame:
            if self.categorical:
                raise ValueError("categorical=... names DataFrame columns; X is an array. Pass a "
                                 "DataFrame with named columns, or categorical=None")
            return [NUMERIC] * len(names)
        forced = [str(c) for c in (self.categorical or [])]
        unknown = [c for c in forced if c not in names]
        if unknown:
            raise ValueError(f"categorical={self.categorical!r} names column(s) {unknown} that X "
                             f"does not have; X's columns are {_shown(names)}")
        return [CATEGORICAL if n in forced else _column_kind(table.iloc[:, j], n)
                for j, n in enumerate(names)]

    @staticmethod
    def _check_not_all_missing(table, names, from_frame) -> None:
        empty = (table.isna().all(axis=0).to_numpy() if from_frame
                 else np.isnan(table).all(axis=0))
        bad = [n for n, e in zip(names, empty) if e]
        if bad:
            raise ValueError(f"X column(s) {_shown(bad)} have no values at all (every entry is "
                             f"missing) in the training data; drop them (X.drop(columns={bad})) "
                             f"or fill them before fitting")

    @staticmethod
    def _numeric_block(table, names, numeric, from_frame) -> np.ndarray:
        if from_frame:
            values = np.column_stack([_numeric_values(table.iloc[:, j], names[j]) for j in numeric])
        else:
            values = table[:, numeric]
        _check_finite_numeric(values, [names[j] for j in numeric])
        return values

    def _set_layout(self, names, kinds, from_frame) -> None:
        """Names, sources and the column order of the output (input order)."""
        self.n_features_in_ = len(names)
        self._names = list(names)
        self._from_frame = bool(from_frame)
        if from_frame:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.kinds_ = list(kinds)
        raw_names, position = self._raw_layout(names, kinds)
        order, source, kind = [], [], []
        for j in range(len(names)):
            pos = position[j]
            order += pos
            source += [j] * len(pos)
            if kinds[j] == NUMERIC:
                kind += ["numeric"] + ["missing_indicator"] * (len(pos) - 1)
            else:
                kind += ["onehot"] * len(pos)
        self._order = np.asarray(order, dtype=np.intp)
        self.feature_names_out_ = np.asarray([raw_names[p] for p in order], dtype=object)
        self.n_features_out_ = len(order)
        self.source_index_ = np.asarray(source, dtype=np.int64)
        self.source_kind_ = np.asarray(kind, dtype=object)

    def _raw_layout(self, names, kinds) -> tuple[list[str], dict]:
        """Names of the raw output (the imputer's columns: values then indicators, then each
        encoder's) and, per input column, its positions there."""
        numeric = [j for j, k in enumerate(kinds) if k == NUMERIC]
        raw_names, position = [], {}
        if self.imputer_ is not None:
            raw_names += list(self.imputer_.get_feature_names_out([names[j] for j in numeric]))
            flagged = ([] if self.imputer_.indicator_ is None
                       else list(self.imputer_.indicator_.features_))
            for p, j in enumerate(numeric):
                position[j] = [p] + ([len(numeric) + flagged.index(p)] if p in flagged else [])
        for j, enc in self.encoders_.items():
            out = list(enc.get_feature_names_out([names[j]]))
            position[j] = list(range(len(raw_names), len(raw_names) + len(out)))
            raw_names += out
        return raw_names, position

    # ------------------------------------------------------------------ transform
    def transform(self, X) -> np.ndarray:
        """The float64 matrix (n, ``n_features_out_``) of ``X``, whose columns must be those
        seen at fit (same names in the same order)."""
        self._check_fitted()
        table, from_frame = self._checked_columns(X)
        n = table.shape[0]
        if n == 0:
            return np.empty((0, self.n_features_out_), dtype="float64")
        out = np.empty((n, self.n_features_out_), dtype="float64")
        target = np.empty_like(self._order)  # raw output position -> column of ``out``
        target[self._order] = np.arange(len(self._order))
        numeric = [j for j, k in enumerate(self.kinds_) if k == NUMERIC]
        start = 0
        if numeric:
            values = self._numeric_block(table, self._names, numeric, from_frame)
            self._check_no_new_missing(values, numeric)
            block = np.asarray(self.imputer_.transform(values), dtype="float64").reshape(n, -1)
            out[:, target[:block.shape[1]]] = block
            start = block.shape[1]
        for j, enc in self.encoders_.items():
            levels = _levels(table.iloc[:, j], self.kinds_[j])
            self._check_known(j, enc, levels)
            block = enc.transform(levels.reshape(-1, 1))
            out[:, target[start:start + block.shape[1]]] = block
            start += block.shape[1]
        return out

    def fit_transform(self, X, y=None) -> np.ndarray:
        """``fit(X)`` then ``transform(X)``."""
        return self.fit(X).transform(X)

    def _check_no_new_missing(self, values: np.ndarray, numeric: list) -> None:
        """ValueError naming the numeric columns with missing values that had none at fit."""
        flagged = set() if self.imputer_.indicator_ is None else set(
            self.imputer_.indicator_.features_)
        bad = [self._names[j] for p, j in enumerate(numeric)
               if p not in flagged and np.isnan(values[:, p]).any()]
        if bad:
            raise ValueError(
                f"X column(s) {_shown(bad)} have missing values, but had none at fit (so there "
                f"is no missing-value indicator for them); fill them (e.g. X.fillna(...)) or "
                f"refit on data in which these columns have missing values too")

    def _check_fitted(self) -> None:
        if not hasattr(self, "_order"):
            raise ValueError("this TableEncoder is not fitted yet; call fit(X_train) first")

    def _checked_columns(self, X):
        names = self._names
        is_frame = isinstance(X, (pd.DataFrame, pd.Series))
        if not is_frame and any(k != NUMERIC for k in self.kinds_):
            raise TypeError(f"X is an array but the encoder was fitted on a DataFrame with "
                            f"non-numeric columns; pass a DataFrame with columns {_shown(names)}")
        table, from_frame = (_as_table(X, "X") if self._from_frame or not is_frame
                             else (_numeric_array(X, "X"), False))
        if from_frame:
            got = [str(c) for c in table.columns]
            if got != names:
                raise ValueError(column_mismatch(
                    "X", got, names, f"select and reorder them as at fit, {_shown(names)}, "
                    f"e.g. X[list(encoder.feature_names_in_)]"))
            return table, True
        if table.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {table.shape[1]} columns but the encoder was fitted on "
                             f"{self.n_features_in_} ({_shown(names)}); pass the same columns")
        return table, False

    def _check_known(self, j: int, enc: OneHotEncoder, levels: np.ndarray) -> None:
        """ValueError naming the levels (and missing values) of input column ``j`` not seen at
        fit."""
        cats = enc.categories_[0]
        known = {c for c in cats if isinstance(c, str)}
        has_missing = len(cats) > len(known)
        missing = pd.isna(levels)
        new = [v for v in pd.unique(levels[~missing]) if v not in known]
        name = self._names[j]
        if new:
            level = next(iter(sorted(known)), "<level>")
            raise ValueError(
                f"X column {name!r} has level(s) {_shown(new)} not seen at fit (known levels: "
                f"{_shown(sorted(known))}); map them to a known level, e.g. "
                f"X[{name!r}].replace({{{new[0]!r}: {level!r}}}), or refit on data that "
                f"contains them")
        if missing.any() and not has_missing:
            raise ValueError(
                f"X column {name!r} has missing values, but had none at fit (so there is no "
                f"missing-value level); fill them with a known level, e.g. "
                f"X[{name!r}].fillna({next(iter(sorted(known)), '<level>')!r}), or refit on data "
                f"with missing values in {name!r}")

    # ------------------------------------------------------------------ names
    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Names of the output columns (ndarray of str): a numeric column's name, then
        ``missingindicator_<name>``; ``<name>_<level>``, ``<name>_nan`` (missing values) and
        ``<name>_infrequent_sklearn`` (rare levels) for one-hot columns. Inputs of an array are
        named ``x0, x1, ...``. ``input_features`` is accepted for scikit-learn compatibility and
        must equal the fitted input names when given."""
        self._check_fitted()
        if input_features is not None and [str(c) for c in input_features] != self._names:
            raise ValueError(f"input_features={list(input_features)!r} differ from the fitted "
                             f"input names {_shown(self._names)}")
        return self.feature_names_out_.copy()

    def outputs_of(self, column) -> np.ndarray:
        """Positions of the output columns that come from input ``column`` (name or position)."""
        self._check_fitted()
        if isinstance(column, (int, np.integer)) and not isinstance(column, bool):
            j = int(column)
            if not 0 <= j < self.n_features_in_:
                raise ValueError(f"column={column} is out of range: there are "
                                 f"{self.n_features_in_} input columns")
        elif str(column) in self._names:
            j = self._names.index(str(column))
        else:
            raise ValueError(f"column={column!r} is not an input column; use one of "
                             f"{_shown(self._names)} or a position")
        return np.flatnonzero(self.source_index_ == j)

    # ------------------------------------------------------------------ state
    def to_state(self) -> tuple[dict, dict]:
        """The fitted encoder as a JSON-able dict and a dict of numpy arrays (no pickle).

        ``from_state(*enc.to_state())`` transforms bit-identically. The arrays' keys are plain
        names; prefix them when storing them beside other arrays.
        """
        self._check_fitted()
        numeric = [j for j, k in enumerate(self.kinds_) if k == NUMERIC]
        flagged = ([] if self.imputer_ is None or self.imputer_.indicator_ is None
                   else [numeric[p] for p in self.imputer_.indicator_.features_])
        state = {
            "class": "TableEncoder",
            "version": STATE_VERSION,
            "params": {"min_frequency": self._checked_min_frequency(),
                       "categorical": None if self.categorical is None
                       else [str(c) for c in self.categorical]},
            "from_frame": self._from_frame,
            "names": list(self._names),
            "kinds": list(self.kinds_),
            "indicator_columns": [int(j) for j in flagged],
            "encoders": [_encoder_state(j, enc) for j, enc in self.encoders_.items()],
            "feature_names_out": [str(n) for n in self.feature_names_out_],
        }
        arrays = {"median": (np.zeros(0) if self.imputer_ is None
                             else np.asarray(self.imputer_.statistics_, dtype="float64").copy())}
        return state, arrays

    @classmethod
    def from_state(cls, state: dict, arrays: dict) -> "TableEncoder":
        """Rebuild a fitted encoder from :meth:`to_state`'s output (after JSON / npz)."""
        check_state(state, "TableEncoder")
        params = state["params"]
        enc = cls(min_frequency=params["min_frequency"], categorical=params["categorical"])
        names, kinds = list(state["names"]), list(state["kinds"])
        numeric = [j for j, k in enumerate(kinds) if k == NUMERIC]
        median = np.asarray(arrays["median"], dtype="float64")
        if len(median) != len(numeric):
            raise ValueError(f"state has {len(median)} medians for {len(numeric)} numeric "
                             f"columns; it is corrupt")
        enc.imputer_ = (_rebuild_imputer(median, [numeric.index(j)
                                                  for j in state["indicator_columns"]])
                        if numeric else None)
        enc.encoders_ = {int(s["column"]): _rebuild_encoder(s) for s in state["encoders"]}
        enc._set_layout(names, kinds, bool(state["from_frame"]))
        if [str(n) for n in enc.feature_names_out_] != list(state["feature_names_out"]):
            raise ValueError("the rebuilt encoder's output columns differ from the saved ones; "
                             "the state is corrupt or from an incompatible scikit-learn")
        return enc


def _one_hot(min_frequency: int | None, categories="auto") -> OneHotEncoder:
    return OneHotEncoder(categories=categories, drop="if_binary", min_frequency=min_frequency,
                         handle_unknown="error", sparse_output=False, dtype=np.float64)


def _encoder_state(j: int, enc: OneHotEncoder) -> dict:
    cats = list(enc.categories_[0])
    infrequent = enc.infrequent_categories_[0] if enc.min_frequency is not None else None
    infrequent = [] if infrequent is None else list(infrequent)
    return {
        "column": int(j),
        "levels": [str(c) for c in cats if isinstance(c, str)],
        "has_missing": any(not isinstance(c, str) for c in cats),
        "min_frequency": enc.min_frequency,
        "infrequent": [str(c) for c in infrequent if isinstance(c, str)],
        "infrequent_missing": any(not isinstance(c, str) for c in infrequent),
    }


def _rebuild_encoder(s: dict) -> OneHotEncoder:
    """A OneHotEncoder fitted like the saved one: the saved categories, and a stand-in data set
    in which the frequent levels occur ``min_frequency`` times and the infrequent ones once."""
    cats = list(s["levels"]) + ([np.nan] if s["has_missing"] else [])
    m = s["min_frequency"]
    rare = set(s["infrequent"])
    counts = [1 if (c in rare if isinstance(c, str) else s["infrequent_missing"]) else (m or 1)
              for c in cats]
    data = np.array([c for c, k in zip(cats, counts) for _ in range(k)], dtype=object)
    enc = _one_hot(m, categories=[np.array(cats, dtype=object)]).fit(data.reshape(-1, 1))
    if _encoder_state(s["column"], enc) != s:
        raise ValueError(f"could not rebuild the one-hot encoder of input column {s['column']}; "
                         f"the state is corrupt")
    return enc


def _rebuild_imputer(median: np.ndarray, flagged: list[int]) -> SimpleImputer:
    """A SimpleImputer with these medians and indicator columns, fitted on a stand-in data set
    (three rows: the medians; missing in rows 2-3 of the flagged columns)."""
    data = np.tile(median, (3, 1))
    data[1:, flagged] = np.nan
    imputer = SimpleImputer(strategy="median", add_indicator=True).fit(data)
    got = [] if imputer.indicator_ is None else list(imputer.indicator_.features_)
    if not np.array_equal(imputer.statistics_, median) or got != sorted(flagged):
        raise ValueError("could not rebuild the median imputer; the state is corrupt")
    return imputer
