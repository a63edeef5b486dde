"""dowhy_cfr: Counterfactual Regression (CFR) and TARNet for the PyWhy ecosystem.

Shalit, Johansson & Sontag (ICML 2017), "Estimating individual treatment effect: generalization
bounds and algorithms". ``CFR`` and ``TARNet`` are EconML CATE estimators built on a pure-PyTorch
core (:mod:`dowhy_cfr.core`).
"""

from .estimator import CFR, TARNet
from .inference import CFRBootstrapInference
# DoWhy integration: importing registers "backdoor.cfr"/"backdoor.tarnet"/"cfr"/"tarnet" and the
# "representation_balance" refuter with DoWhy (see dowhy_cfr.dowhy_adapter, dowhy_cfr.refuters).
from .dowhy_adapter import CFREstimator, TARNetEstimator
# DoWhy's re-estimating refuters train all their simulations as one stack for CFR estimates
from .stacked_refuters import refute_stacked, stacking_options  # (wraps DoWhy's functions)
from .refuters import (
    RepresentationBalance,
    refute_representation_balance,
    representation_balance,
)

__version__ = "0.1.0"

__all__ = ["CFR", "TARNet", "CFRBootstrapInference", "CFREstimator", "TARNetEstimator",
           "RepresentationBalance", "refute_representation_balance", "representation_balance",
           "refute_stacked", "stacking_options", "__version__"]
