"""Pure-PyTorch core of CFR/TARNet (Shalit, Johansson & Sontag, ICML 2017).

Only torch and numpy are imported here. Every tensor carries a leading model axis ``K`` so that
``K`` independent networks train in one vectorised pass.
"""

from .config import ALPHA_GRID, IPM_NAMES, LOSSES, NORMALIZATIONS, PAPER_IHDP, CFRConfig
from .dose import (DoseNet, bspline_basis, dose_strata, interval_imbalance, predict_dose,
                   predict_dose_grid)
from .ipm import imbalance, mmd2_lin, mmd2_rbf, pairwise_sq_dists, wasserstein
from .network import CFRNet, predict
from .objective import sample_weights
from .training import TrainingDivergedError, TrainResult, train_cfr

__all__ = [
    "ALPHA_GRID",
    "IPM_NAMES",
    "LOSSES",
    "NORMALIZATIONS",
    "PAPER_IHDP",
    "CFRConfig",
    "CFRNet",
    "DoseNet",
    "bspline_basis",
    "dose_strata",
    "interval_imbalance",
    "predict_dose",
    "predict_dose_grid",
    "TrainResult",
    "TrainingDivergedError",
    "imbalance",
    "mmd2_lin",
    "mmd2_rbf",
    "pairwise_sq_dists",
    "predict",
    "sample_weights",
    "train_cfr",
    "wasserstein",
]
