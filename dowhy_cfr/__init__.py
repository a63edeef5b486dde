"""dowhy_cfr: Counterfactual Regression (CFR) and TARNet for the PyWhy ecosystem.

Shalit, Johansson & Sontag (ICML 2017), "Estimating individual treatment effect: generalization
bounds and algorithms". ``CFR`` and ``TARNet`` are EconML CATE estimators built on a pure-PyTorch
core (:mod:`dowhy_cfr.core`).
"""

from .estimator import CFR, TARNet
from .inference import CFRBootstrapInference
from .dowhy_adapter import CFREstimator, TARNetEstimator
from .stacked_refuters import refute_stacked, stacking_options
from .refuters import (
    RepresentationBalance,
    refute_representation_balance,
    representation_balance,
)
# DoWhy integration, every change to DoWhy in one place: "backdoor.cfr"/"backdoor.tarnet"/"cfr"/
# "tarnet", the "representation_balance" refuter, DoWhy's refuters stacked for CFR estimates
from .registration import register as _register_with_dowhy

_register_with_dowhy()

__version__ = "0.1.0"

__all__ = ["CFR", "TARNet", "CFRBootstrapInference", "CFREstimator", "TARNetEstimator",
           "RepresentationBalance", "refute_representation_balance", "representation_balance",
           "refute_stacked", "stacking_options", "__version__"]
