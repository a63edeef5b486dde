r"""Tables as users have them: mixed-type covariates to a numeric matrix, and its scaling.

Two scikit-learn-style transformers, each in its own module, meant to run one after the other on the covariates of the
estimator (``enc = TableEncoder().fit(X_train)``; ``xw = enc.transform(X)``;
``scaler = FeatureScaler(method).fit(xw_train)``; ``scaler.transform(xw)``):

* :class:`TableEncoder` (:mod:`.encoder`) turns a pandas DataFrame (numeric, bool, categorical and string columns,
  with missing values in any of them) or a numeric array into a float64 matrix: numeric columns
  pass through with their missing values imputed by the training median plus a 0/1
  missing-value indicator, categorical-like columns are one-hot encoded with a category of their
  own for missing values and rare levels grouped (scikit-learn's ``SimpleImputer`` and
  ``OneHotEncoder`` do the work);
* :class:`FeatureScaler` (:mod:`.scaler`) scales each column of that matrix: ``"standard"`` (mean and standard
  deviation, what the package does by default), ``"robust"`` (RealMLP's robust scaling with
  smooth clipping, Holzmüller, Grinsztajn & Steinwart 2024) or ``"quantile"`` (scikit-learn's
  ``QuantileTransformer`` to standard normal margins).

Both save their fitted state without pickle: ``to_state()`` returns a JSON-able dict and a dict of
numpy arrays (for ``json.dumps`` and ``numpy.savez``), and ``from_state(state, arrays)`` rebuilds
an object whose ``transform`` gives bit-identical outputs. The scikit-learn objects are rebuilt
through their public API (explicit categories and a small stand-in data set with the same fitted
statistics, or their documented fitted attributes), so no scikit-learn internals are stored.

The package imports numpy, pandas and scikit-learn only. ``docs/tabular.md`` describes the
choices for users.

References
----------
* [1] D. Holzmüller, L. Grinsztajn, I. Steinwart. "Better by default: strong pre-tuned MLPs and
  boosted trees on tabular data." NeurIPS 37, 2024 (RealMLP; section "Robust scale + smooth
  clip").
* [2] J. Josse, N. Prost, E. Scornet, G. Varoquaux. "On the consistency of supervised learning
  with missing values." arXiv:1902.06931, 2019 (impute, add the missingness indicator, then
  learn).
* [3] A. Perez-Lebel, G. Varoquaux, M. Le Morvan, J. Josse, J.-B. Poline. "Benchmarking
  missing-values approaches for predictive models on health databases." GigaScience 11, 2022.
"""

from .encoder import TableEncoder
from .scaler import SMOOTH_CLIP_BOUND, FeatureScaler, smooth_clip
from .state import STATE_VERSION

__all__ = ["TableEncoder", "FeatureScaler", "smooth_clip", "SMOOTH_CLIP_BOUND", "STATE_VERSION"]
