"""The IHDP semi-synthetic benchmark, regenerated exactly.

The IHDP-100 / IHDP-1000 realizations used by Shalit, Johansson & Sontag (ICML 2017) are
setting "A" of Vincent Dorie's ``npci`` R package, i.e. response surface B of Hill (2011) on
the Infant Health and Development Program covariates. Everything random in them comes from R's
``set.seed`` / ``sample`` / ``rnorm`` (R < 3.6), which :mod:`._rrandom` re-implements bit for
bit, so every realization can be rebuilt from the covariate table alone. That table ships with
EconML (``econml/data/ihdp/sim.csv``) and is read from the installed package at run time;
nothing is downloaded.

Construction of realization ``it`` (1-based; 747 units, 139 treated, 25 covariates):

1. units: the 985 rows of ``sim.csv`` minus the treated children of non-white mothers
   (``treat == 1 & momwhite == 0``), in file order;
2. covariates: ``bw, b.head, preterm, birth.o, nnhealth, momage`` (standardised with the
   sample mean and R's ``sd``), ``sex, twin, b.marr, mom.lths, mom.hs, mom.scoll, cig,
   first + 1, booze, drugs, work.dur, prenatal, site1..site7``;
3. ``set.seed(5 it + 565)`` for ``it <= 500``, ``set.seed(5 it + 7565)`` otherwise;
4. ``b0 = sample(seq(-1, 1, 0.25), 1)``;
   ``b = sample(c(0, .1, .2, .3, .4), 25, replace = TRUE, prob = c(.6, .1, .1, .1, .1))``;
5. with ``X1 = [1, X]`` and ``beta = (b0, b)``: ``mu0 = exp((X1 + W) beta)`` where ``W``
   adds 0.5 to every covariate (not to the intercept column), ``mu1 = X1 beta - omega``
   with ``omega`` such that the mean of ``mu1 - mu0`` over the treated is exactly 4;
6. ``y0 = mu0 + rnorm(747)``, then ``y1 = mu1 + rnorm(747)``; the factual outcome is
   ``yf = t y1 + (1 - t) y0`` and ``ycf`` the other one.

This reproduces the published ``ihdp_npci_1-100`` / ``ihdp_npci_1-1000`` files (which hold the
same units, in a per-realization order, split 672 / 75 into train and test). The random draws
are exact; the only differences, below 1e-9 relative, come from ``sim.csv`` storing its
non-integer ``b.head`` values rounded to 8 decimals.
"""

from __future__ import annotations

import functools
import importlib.resources
import numbers
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._rrandom import RRandom
from ._split import TrainValTestSplit

__all__ = [
    "IHDP_FEATURE_NAMES",
    "IHDP_MAX_REALIZATION",
    "IHDP_N_UNITS",
    "IHDPData",
    "IHDPSplit",
    "ihdp_covariates",
    "ihdp_seed",
    "ihdp_split",
    "load_ihdp",
    "load_ihdp_many",
    "load_ihdp_npz",
]

#: The 25 covariates, in the column order of the published ``x`` arrays (``sim.csv`` names).
IHDP_FEATURE_NAMES: tuple[str, ...] = (
    "bw", "b.head", "preterm", "birth.o", "nnhealth", "momage",
    "sex", "twin", "b.marr", "mom.lths", "mom.hs", "mom.scoll", "cig", "first", "booze",
    "drugs", "work.dur", "prenatal",
    "site1", "site2", "site3", "site4", "site5", "site6", "site7",
)  # fmt: skip
_N_CONTINUOUS = 6  # the first six covariates are standardised
IHDP_N_UNITS = 747
IHDP_MAX_REALIZATION = 1000

# Response surface B (Hill 2011; npci setting "A").
_INTERCEPTS = np.array([-1.0 + 0.25 * i for i in range(9)])  # seq(-1, 1, 0.25), exact
_COEF_VALUES = np.array([0.0, 0.1, 0.2, 0.3, 0.4])
_COEF_PROBS = (0.6, 0.1, 0.1, 0.1, 0.1)
_OFFSET_W = 0.5
_TARGET_ATT = 4.0

_ARRAY_KEYS = ("x", "t", "yf", "ycf", "mu0", "mu1")
_NPZ_OPTIONAL_SCALARS = ("ate", "yadd", "ymul")


# ---------------------------------------------------------------------------------------------
# Data container
# ---------------------------------------------------------------------------------------------
@dataclass(eq=False)
class IHDPData(Mapping):
    """One IHDP realization.

    Readable as a mapping over the array fields (``d["mu0"]``, ``d.keys()``, ``dict(d)``,
    ``np.savez(path, **d)``) and by attribute (``d.mu0``).

    Attributes
    ----------
    x : numpy.ndarray
        Covariates, shape ``(n, 25)``, float64 (first six standardised).
    t : numpy.ndarray
        Treatment indicator, shape ``(n,)``, float64 with values 0.0 / 1.0 (the dtype of the
        published files).
    yf, ycf : numpy.ndarray
        Factual and counterfactual outcomes, shape ``(n,)``.
    mu0, mu1 : numpy.ndarray
        Noiseless potential outcomes, shape ``(n,)``.
    feature_names : list of str
        Names of the columns of ``x``.
    realization : int or None
        1-based realization number (``None`` if unknown).
    extra : dict
        Scalars that came with a ``.npz`` file (``ate``, ``yadd``, ``ymul``), else empty.
    """

    x: np.ndarray
    t: np.ndarray
    yf: np.ndarray
    ycf: np.ndarray
    mu0: np.ndarray
    mu1: np.ndarray
    feature_names: list = field(default_factory=lambda: list(IHDP_FEATURE_NAMES))
    realization: int | None = None
    extra: dict = field(default_factory=dict)

    # Mapping protocol over the array fields only.
    def __getitem__(self, key: str) -> np.ndarray:
        if key not in _ARRAY_KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(_ARRAY_KEYS)

    def __len__(self) -> int:
        return len(_ARRAY_KEYS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IHDPData):
            return NotImplemented
        return (
            self.realization == other.realization
            and list(self.feature_names) == list(other.feature_names)
            and all(np.array_equal(self[k], other[k]) for k in _ARRAY_KEYS)
        )

    __hash__ = None  # mutable container of arrays

    @property
    def n_units(self) -> int:
        """Number of units (rows of ``x``)."""
        return int(self.x.shape[0])

    @property
    def ite(self) -> np.ndarray:
        """Noiseless individual treatment effects ``mu1 - mu0``, shape ``(n,)``."""
        return self.mu1 - self.mu0

    @property
    def ate(self) -> float:
        """Sample average treatment effect, ``mean(mu1 - mu0)``."""
        return float(np.mean(self.ite))

    def __repr__(self) -> str:
        return (
            f"IHDPData(realization={self.realization}, n_units={self.n_units}, "
            f"n_treated={int(np.sum(self.t))}, n_features={self.x.shape[1]})"
        )


class IHDPSplit(TrainValTestSplit):
    """Index arrays of an :func:`ihdp_split` (each sorted ascending, ``int64``): ``train``,
    ``val``, ``test`` and the property ``within`` (``train`` and ``val`` together, sorted)."""

    __slots__ = ()


# ---------------------------------------------------------------------------------------------
# Covariates
# ---------------------------------------------------------------------------------------------
def _sim_csv_path():
    """Location of ``sim.csv`` inside the installed EconML package."""
    try:
        root = importlib.resources.files("econml")
    except ModuleNotFoundError as exc:  # pragma: no cover - econml is a dependency
        raise ImportError(
            "the IHDP covariates are read from the installed 'econml' package "
            "(econml/data/ihdp/sim.csv); install econml"
        ) from exc
    path = root / "data" / "ihdp" / "sim.csv"
    if not path.is_file():  # pragma: no cover - depends on the econml build
        raise FileNotFoundError(f"IHDP covariate file not found in the econml package: {path}")
    return path


@functools.lru_cache(maxsize=1)
def _covariates() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 747 x 25 covariate matrix, the treatment vector and the covariates with the
    continuous columns in their own units (read-only, cached)."""
    with _sim_csv_path().open("r", encoding="utf-8") as fh:
        header = [h.strip().strip('"') for h in fh.readline().split(",")]
        table = np.loadtxt(fh, delimiter=",", dtype=np.float64, ndmin=2)
    col = {name: i for i, name in enumerate(header)}
    needed = ("treat", "momwhite") + IHDP_FEATURE_NAMES
    missing = [c for c in needed if c not in col]
    if missing:  # pragma: no cover - depends on the econml build
        raise ValueError(f"sim.csv lacks the columns {missing}")
    treat = table[:, col["treat"]]
    # npci: drop the treated children of non-white mothers (Hill 2011), keep row order
    keep = ~((treat == 1) & (table[:, col["momwhite"]] == 0))
    x = table[keep][:, [col[c] for c in IHDP_FEATURE_NAMES]].copy()
    x[:, IHDP_FEATURE_NAMES.index("first")] += 1.0
    raw = x.copy()
    cont = x[:, :_N_CONTINUOUS]
    # R: scale() / (x - mean(x)) / sd(x), sd with denominator n - 1
    x[:, :_N_CONTINUOUS] = (cont - cont.mean(axis=0)) / cont.std(axis=0, ddof=1)
    t = treat[keep].copy()
    if x.shape != (IHDP_N_UNITS, len(IHDP_FEATURE_NAMES)):  # pragma: no cover
        raise ValueError(f"unexpected IHDP covariate shape {x.shape}")
    for a in (x, t, raw):
        a.setflags(write=False)
    return x, t, raw


def ihdp_covariates(*, standardized: bool = True) -> np.ndarray:
    """The 747 x 25 IHDP covariates of :func:`load_ihdp` (``IHDP_FEATURE_NAMES``), read-only.

    ``standardized=False`` gives the first six (continuous) columns in their own units --
    grams, centimetres, weeks, years, as ``sim.csv`` stores them -- as the VCNet authors'
    dose design scales them (:mod:`dowhy_cfr.datasets.dose`); the other columns are the same
    either way."""
    x, _, raw = _covariates()
    return x if standardized else raw


@functools.lru_cache(maxsize=1)
def _design() -> tuple[np.ndarray, np.ndarray]:
    """``X1 = [1, X]`` and ``X1 + W`` (offset 0.5 on the covariate columns), read-only."""
    x, _, _ = _covariates()
    x1 = np.hstack([np.ones((x.shape[0], 1)), x])
    x1w = x1 + np.concatenate([[0.0], np.full(x.shape[1], _OFFSET_W)])
    x1.setflags(write=False)
    x1w.setflags(write=False)
    return x1, x1w


# ---------------------------------------------------------------------------------------------
# Simulation
# ---------------------------------------------------------------------------------------------
def _check_realization(realization: Any, name: str = "realization") -> int:
    if isinstance(realization, (bool, np.bool_)) or not isinstance(realization, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(realization).__name__}")
    r = int(realization)
    if not 1 <= r <= IHDP_MAX_REALIZATION:
        raise ValueError(f"{name} must be in 1..{IHDP_MAX_REALIZATION}, got {r}")
    return r


def ihdp_seed(realization: int) -> int:
    """The R seed of an IHDP realization (npci's choice).

    Parameters
    ----------
    realization : int
        1-based realization number, 1..1000.

    Returns
    -------
    int
        ``5 * realization + 565`` for realizations up to 500, ``5 * realization + 7565``
        above (npci switches seed range there so the two halves never overlap).
    """
    r = _check_realization(realization)
    return 5 * r + 565 if r <= 500 else 5 * r + 7565


def _simulate(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(mu0, mu1, y0, y1)`` of response surface B under R's ``set.seed(seed)``."""
    x, t, _ = _covariates()
    n, d = x.shape
    rng = RRandom(seed)  # set.seed(seed)
    b0 = _INTERCEPTS[rng.unif_index(_INTERCEPTS.size)[0]]  # sample(seq(-1, 1, .25), 1)
    # sample(c(0,.1,.2,.3,.4), d, replace = TRUE, prob = c(.6,.1,.1,.1,.1))
    coef = _COEF_VALUES[rng.sample_prob_replace(_COEF_PROBS, d) - 1]
    eps0 = rng.norm_rand(n)  # rnorm(n) for y0
    eps1 = rng.norm_rand(n)  # rnorm(n) for y1
    beta = np.concatenate([[b0], coef])
    x1, x1w = _design()
    lin = x1 @ beta  # X1 beta with X1 = [1, X]
    mu0 = np.exp(x1w @ beta)  # exp((X1 + W) beta), W = [0, .5, ..., .5] on every row
    treated = t == 1
    omega = np.mean(lin[treated] - mu0[treated]) - _TARGET_ATT
    mu1 = lin - omega
    return mu0, mu1, mu0 + eps0, mu1 + eps1


def _assemble(mu0, mu1, y0, y1, realization) -> IHDPData:
    x, t, _ = _covariates()
    treated = t == 1
    return IHDPData(
        x=np.array(x),
        t=np.array(t),
        yf=np.where(treated, y1, y0),
        ycf=np.where(treated, y0, y1),
        mu0=mu0,
        mu1=mu1,
        feature_names=list(IHDP_FEATURE_NAMES),
        realization=realization,
    )


def load_ihdp(realization: int = 1) -> IHDPData:
    """Regenerate one IHDP realization (all 747 units).

    Parameters
    ----------
    realization : int, default 1
        1-based realization number, 1..1000; realizations 1..100 are IHDP-100 and 1..1000 are
        IHDP-1000 of Shalit et al. (2017).

    Returns
    -------
    IHDPData
        ``x`` (747, 25), ``t``, ``yf``, ``ycf``, ``mu0``, ``mu1`` (747,), units in the order of
        EconML's ``sim.csv``.

    Raises
    ------
    TypeError
        If ``realization`` is not an integer.
    ValueError
        If ``realization`` is outside 1..1000.

    Examples
    --------
    >>> d = load_ihdp(1)
    >>> d.x.shape, d["mu0"].shape
    ((747, 25), (747,))
    """
    r = _check_realization(realization)
    return _assemble(*_simulate(ihdp_seed(r)), realization=r)


def load_ihdp_many(realizations: Iterable[int] | int, *, copy: bool = False) -> dict[str, Any]:
    """Regenerate several realizations, stacked along a leading realization axis.

    Parameters
    ----------
    realizations : iterable of int, or int
        1-based realization numbers (each in 1..1000). A single int ``K`` means ``1..K``.
    copy : bool, default False
        The covariates and treatment are the same in every realization; by default ``x`` and
        ``t`` are read-only broadcast views (no memory per realization). Set ``copy=True`` to
        get ordinary writable arrays.

    Returns
    -------
    dict
        ``x`` (K, 747, 25), ``t``, ``yf``, ``ycf``, ``mu0``, ``mu1`` (K, 747),
        ``realization`` (K,) int64 and ``feature_names`` (list of 25 str).

    Raises
    ------
    TypeError
        If a realization is not an integer.
    ValueError
        If ``realizations`` is empty or a realization is outside 1..1000.
    """
    if isinstance(realizations, numbers.Integral) and not isinstance(realizations, bool):
        realizations = range(1, _check_realization(realizations, "realizations") + 1)
    reals = [_check_realization(r, "realizations[i]") for r in realizations]
    if not reals:
        raise ValueError("realizations must not be empty")
    k = len(reals)
    x, t, _ = _covariates()
    treated = t == 1
    out = {key: np.empty((k, x.shape[0])) for key in ("yf", "ycf", "mu0", "mu1")}
    for i, r in enumerate(reals):
        mu0, mu1, y0, y1 = _simulate(ihdp_seed(r))
        out["mu0"][i], out["mu1"][i] = mu0, mu1
        out["yf"][i] = np.where(treated, y1, y0)
        out["ycf"][i] = np.where(treated, y0, y1)
    xs = np.broadcast_to(x, (k,) + x.shape)
    ts = np.broadcast_to(t, (k,) + t.shape)
    return {
        "x": np.array(xs) if copy else xs,
        "t": np.array(ts) if copy else ts,
        **out,
        "realization": np.asarray(reals, dtype=np.int64),
        "feature_names": list(IHDP_FEATURE_NAMES),
    }


# ---------------------------------------------------------------------------------------------
# Official cfrnet .npz files
# ---------------------------------------------------------------------------------------------
def load_ihdp_npz(
    path: str | os.PathLike, realization: int | None = None
) -> list[IHDPData] | IHDPData:
    """Read an IHDP file in the cfrnet ``.npz`` layout (e.g. ``ihdp_npci_1-100.train.npz``).

    The layout is ``x`` (n, d, R), ``t``, ``yf``, ``ycf``, ``mu0``, ``mu1`` (n, R), with
    column ``k`` holding realization ``k + 1``, plus optional scalars ``ate``, ``yadd``,
    ``ymul``. A single-realization file with ``x`` (n, d) and 1-D vectors is accepted too.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.npz`` file.
    realization : int, optional
        1-based realization (column ``realization - 1``) to return. By default all of them.

    Returns
    -------
    list of IHDPData or IHDPData
        One entry per realization (all of them if ``realization`` is None). Optional scalars
        go to ``IHDPData.extra``; ``feature_names`` are :data:`IHDP_FEATURE_NAMES` when
        ``d == 25`` and ``x0, x1, ...`` otherwise.

    Raises
    ------
    ValueError
        If a required key is missing, shapes disagree, or ``realization`` is out of range.
    TypeError
        If ``realization`` is not an integer.
    """
    with np.load(os.fspath(path), allow_pickle=False) as f:
        missing = [k for k in _ARRAY_KEYS if k not in f.files]
        if missing:
            raise ValueError(
                f"{os.fspath(path)!r} lacks the required keys {missing} "
                f"(found {sorted(f.files)}; need {list(_ARRAY_KEYS)})"
            )
        arrays = {k: np.asarray(f[k], dtype=np.float64) for k in _ARRAY_KEYS}
        extra = {k: f[k].item() for k in _NPZ_OPTIONAL_SCALARS if k in f.files and f[k].size == 1}

    x = arrays["x"]
    if x.ndim == 2:  # single realization
        arrays = {k: (v[..., None]) for k, v in arrays.items()}
        x = arrays["x"]
    if x.ndim != 3:
        raise ValueError(f"x must have shape (n, d, R) or (n, d), got {x.shape}")
    n, d, n_real = x.shape
    for k in _ARRAY_KEYS[1:]:
        if arrays[k].shape != (n, n_real):
            raise ValueError(
                f"{k} must have shape {(n, n_real)} to match x, got {arrays[k].shape}"
            )

    if d == len(IHDP_FEATURE_NAMES):
        names = list(IHDP_FEATURE_NAMES)
    else:
        names = [f"x{j}" for j in range(d)]

    def one(col: int) -> IHDPData:
        return IHDPData(
            **{k: np.ascontiguousarray(v[..., col]) for k, v in arrays.items()},
            feature_names=list(names),
            realization=col + 1,
            extra=dict(extra),
        )

    if realization is None:
        return [one(c) for c in range(n_real)]
    if isinstance(realization, (bool, np.bool_)) or not isinstance(realization, numbers.Integral):
        raise TypeError(f"realization must be an int or None, got {type(realization).__name__}")
    if not 1 <= int(realization) <= n_real:
        raise ValueError(f"realization must be in 1..{n_real} for this file, got {realization}")
    return one(int(realization) - 1)


# ---------------------------------------------------------------------------------------------
# Train / validation / test protocol
# ---------------------------------------------------------------------------------------------
def _round_half_up(v: float) -> int:
    return int(np.floor(v + 0.5))


def ihdp_split(
    n_units: int = IHDP_N_UNITS,
    *,
    seed: int,
    test_fraction: float = 0.1,
    val_fraction: float = 0.3,
) -> IHDPSplit:
    """Random train / validation / test split following Shalit et al. (2017).

    The paper uses 63/27/10 train/validation/test proportions. ``round(test_fraction * n)``
    units go to the test set, and ``round(val_fraction * rest)`` of the remaining units to the
    validation set (0.3 of the non-test 90% gives 27%). For IHDP's 747 units that is
    470 / 202 / 75 (the published ``ihdp_npci`` test files also hold 75 units).

    "Within-sample" results are reported on the ``train`` and ``val`` units (see
    :attr:`IHDPSplit.within`), "out-of-sample" results on the ``test`` units. The CFR estimator
    carves its own internal validation set out of whatever it is fitted on (for early stopping
    and model selection), so the usual use is to fit on ``split.within`` and evaluate the
    effect estimates both on ``split.within`` and on ``split.test``; ``val`` is there for
    callers that do their own model selection.

    Parameters
    ----------
    n_units : int, default 747
        Number of units.
    seed : int
        Seed of the permutation (``numpy.random.default_rng(seed)``); the same seed always
        gives the same split. Passing the realization number gives one split per realization.
    test_fraction : float, default 0.1
        Share of all units in the test set, in [0, 1).
    val_fraction : float, default 0.3
        Share of the non-test units in the validation set, in [0, 1).

    Returns
    -------
    IHDPSplit
        Named tuple ``(train, val, test)`` of sorted, disjoint ``int64`` index arrays covering
        ``0..n_units-1``.

    Raises
    ------
    TypeError
        If ``n_units`` or ``seed`` is not an integer.
    ValueError
        If ``n_units`` is not positive, ``seed`` is negative, a fraction is outside [0, 1), or
        the training set would be empty.
    """
    if isinstance(n_units, (bool, np.bool_)) or not isinstance(n_units, numbers.Integral):
        raise TypeError(f"n_units must be an int, got {type(n_units).__name__}")
    if n_units < 1:
        raise ValueError(f"n_units must be positive, got {n_units}")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    for name, frac in (("test_fraction", test_fraction), ("val_fraction", val_fraction)):
        if not isinstance(frac, numbers.Real) or not 0.0 <= float(frac) < 1.0:
            raise ValueError(f"{name} must be a number in [0, 1), got {frac!r}")
    n = int(n_units)
    n_test = _round_half_up(test_fraction * n)
    n_val = _round_half_up(val_fraction * (n - n_test))
    n_train = n - n_test - n_val
    if n_train < 1:
        raise ValueError(
            f"no training units left: n_units={n}, test_fraction={test_fraction}, "
            f"val_fraction={val_fraction}"
        )
    perm = np.random.default_rng(int(seed)).permutation(n)
    return IHDPSplit(
        train=np.sort(perm[:n_train]).astype(np.int64),
        val=np.sort(perm[n_train : n_train + n_val]).astype(np.int64),
        test=np.sort(perm[n_train + n_val :]).astype(np.int64),
    )
