"""Input checks shared by the estimator, the DoWhy adapter and the refuters.

Every check raises ``ValueError`` or ``TypeError`` naming the argument and saying how to fix it,
and converts without modifying the caller's objects (pandas and numpy inputs are copied on
conversion, never written to).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["plain", "as_2d_float", "as_columns", "as_1d", "as_vector", "column_names",
           "check_same_length", "check_finite", "check_int"]


def plain(v):
    """numpy scalar -> Python scalar, for readable messages and clean dicts."""
    return v.item() if isinstance(v, np.generic) else v


#: Values an error message lists before "..." (:func:`shown`).
SHOWN = 8


def shown(values) -> list:
    """At most :data:`SHOWN` of ``values`` as a list, with "..." where there are more."""
    values = list(values)
    return values[:SHOWN] + (["..."] if len(values) > SHOWN else [])


def column_mismatch(name: str, got: list, expected: list, fix: str) -> str:
    """The message for a DataFrame ``name`` whose columns ``got`` are not those seen at fit
    (``expected``): which are missing and which are new, or that only the order differs, then
    ``fix``, what to pass instead."""
    missing = [c for c in expected if c not in got]
    extra = [c for c in got if c not in expected]
    if missing or extra:
        return (f"{name}'s columns differ from those seen at fit: missing {shown(missing)}, "
                f"unexpected {shown(extra)}; {fix}")
    return (f"{name}'s columns are in another order than at fit ({shown(got)} vs "
            f"{shown(expected)}); {fix}")


def column_names(a) -> list[str] | None:
    """Column names of a DataFrame (as strings), None otherwise."""
    if isinstance(a, pd.DataFrame):
        return [str(c) for c in a.columns]
    return None


def _non_numeric_columns(df: pd.DataFrame) -> list[str]:
    bad = []
    for c in df.columns:
        dtype = df[c].dtype
        if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
            continue
        bad.append(str(c))
    return bad


def _to_numeric_frame(name: str, df: pd.DataFrame) -> np.ndarray:
    bad = _non_numeric_columns(df)
    if bad:
        raise TypeError(
            f"{name} has non-numeric column(s) {bad}; encode them as numbers first, e.g. with "
            f"pandas.get_dummies({name}, columns={bad}, drop_first=True) or "
            f"sklearn.preprocessing.OneHotEncoder"
        )
    if df.isna().to_numpy().any():
        cols = [str(c) for c in df.columns[df.isna().any().to_numpy()]]
        raise ValueError(
            f"{name} contains missing values (NaN/NA) in column(s) {cols}; impute or drop those "
            f"rows before fitting"
        )
    return df.astype("float64").to_numpy(copy=True)


def as_columns(name: str, arr: np.ndarray) -> np.ndarray:
    """``arr`` as a matrix (n_samples, n_features): a 1-D array becomes one column; any other
    shape than 1-D or 2-D is a ValueError naming ``name``."""
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}")
    return arr


def as_2d_float(name: str, a, *, allow_none: bool = False) -> np.ndarray | None:
    """Convert a DataFrame / Series / array / list to a fresh float64 array of shape (n, d)."""
    if a is None:
        if allow_none:
            return None
        raise ValueError(f"{name} is required (got None)")
    if isinstance(a, pd.Series):
        a = a.to_frame()
    if isinstance(a, pd.DataFrame):
        arr = _to_numeric_frame(name, a)
    else:
        try:
            arr = np.array(a, copy=True)
        except Exception as exc:  # pragma: no cover - exotic inputs
            raise TypeError(f"{name} could not be converted to an array: {exc}") from exc
        if arr.dtype == object or not (
            np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
        ):
            try:
                arr = arr.astype("float64")
            except (TypeError, ValueError) as exc:
                raise TypeError(
                    f"{name} must be numeric (got dtype {arr.dtype}); encode categorical "
                    f"columns as numbers first, e.g. with pandas.get_dummies"
                ) from exc
        arr = as_columns(name, arr.astype("float64", copy=False))
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (0 rows); fit needs data")
    check_finite(name, arr)
    return arr


def as_1d(name: str, a) -> np.ndarray:
    """A fresh 1-D array (values kept as they are: numbers, bools or labels)."""
    if a is None:
        raise ValueError(f"{name} is required (got None)")
    if isinstance(a, pd.DataFrame):
        if a.shape[1] != 1:
            raise ValueError(
                f"{name} must be a single column; got a DataFrame with {a.shape[1]} columns"
            )
        a = a.iloc[:, 0]
    if isinstance(a, pd.Series):
        if a.isna().any():
            raise ValueError(f"{name} contains missing values (NaN/NA); drop or impute them")
        if isinstance(a.dtype, pd.CategoricalDtype):  # the categories' own type (int, str...)
            levels = a.dtype.categories.dtype
            arr = a.to_numpy(dtype=levels if levels.kind in "biuf" else object, copy=True)
        elif pd.api.types.is_bool_dtype(a.dtype):
            arr = a.to_numpy(dtype=bool, copy=True)
        elif pd.api.types.is_integer_dtype(a.dtype):  # integer labels stay integers (as arrays)
            arr = a.to_numpy(dtype="int64", copy=True)
        elif pd.api.types.is_numeric_dtype(a.dtype):
            arr = a.to_numpy(dtype="float64", copy=True)
        else:
            arr = a.to_numpy(dtype=object, copy=True)
    else:
        arr = np.array(a, copy=True)
        if arr.dtype.kind in "US":  # text labels: object dtype, as pandas and sklearn use
            arr = arr.astype(object)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be one-dimensional (n,) or a single column (n, 1); got shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (0 rows); fit needs data")
    if np.issubdtype(arr.dtype, np.number):
        check_finite(name, arr.astype("float64", copy=False))
    elif arr.dtype == object and pd.isna(arr).any():
        raise ValueError(f"{name} contains missing values (None/NaN); drop or impute them")
    return arr


def check_finite(name: str, arr: np.ndarray) -> None:
    if not np.isfinite(arr).all():
        kind = "NaN" if np.isnan(arr).any() else "infinite values"
        raise ValueError(f"{name} contains {kind}; remove or impute them before fitting")


def check_same_length(**arrays) -> int:
    lengths = {k: len(v) for k, v in arrays.items() if v is not None}
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{k}: {n}" for k, n in lengths.items())
        raise ValueError(f"inputs have different numbers of rows ({desc}); they must match")
    return next(iter(lengths.values()))


def as_vector(name: str, a, n: int | None = None, dtype=float) -> np.ndarray:
    """A 1-D array of ``dtype`` (a single row or column is flattened), of length ``n`` if given.

    For numeric vectors of metrics and plots; :func:`as_1d` keeps labels as they are.
    """
    arr = np.asarray(a, dtype=dtype)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {np.shape(a)}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries; expected {n}")
    return arr


def check_treatment_rows(Ts, n_rows: int | None) -> None:
    """ValueError where a treatment argument of a prediction (``T0``/``T1`` of ``effect``,
    ``T`` of ``marginal_effect``) holds neither one value nor one per row of X (``n_rows``;
    None: no X, nothing to check)."""
    if n_rows is None:
        return
    names = ("T0", "T1") if len(Ts) == 2 else ("T",) * len(Ts)
    for name, T in zip(names, Ts):
        shape = np.shape(np.asarray(T, dtype=object))
        if shape and shape[0] != n_rows:
            raise ValueError(f"{name} has {shape[0]} values for the {n_rows} rows of X: pass one "
                             f"treatment value as a scalar (used for every row) or one per row")


def check_int(name: str, value, minimum: int, maximum: int | None = None) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) in ``[minimum, maximum)``."""
    ok = not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= minimum
    if ok and maximum is not None and value >= maximum:
        ok = False
    if not ok:
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum})"
        raise ValueError(f"{name}={value!r} is invalid: use an integer {bound}")
    return int(value)
