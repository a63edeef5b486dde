"""Diagnostic plots for CFR / TARNet (matplotlib, an optional extra).

Install with ``pip install "dowhy-cfr[plots]"``. matplotlib is imported only when a function
here is called, so ``import dowhy_cfr.plotting`` works without it.

* :func:`plot_history` -- factual loss and imbalance (IPM) over training, best checkpoint marked;
* :func:`plot_balance` -- treated/control imbalance in the input space and in the representation
  before and after training, one panel per IPM (from the ``representation_balance`` refuter, or
  cheaply from a fitted estimator's history);
* :func:`plot_representation` -- 2-D t-SNE (or PCA) of the covariates and of the learned
  representation, coloured by treatment arm (Figure 4 of the paper's supplement);
* :func:`plot_policy_curve` -- policy risk against the share of units treated (Figure 3 of
  the paper, Jobs);
* :func:`plot_cate` -- distribution of the estimated effects and the sorted effects with
  intervals (when the estimator was fitted with inference);
* :func:`plot_dose_response` -- a continuous treatment's average (or individual) dose-response
  curve with its pointwise band, and the observed doses.

Every function returns the :class:`matplotlib.figure.Figure` and draws into the given ``ax`` /
``axes`` when passed (otherwise a new figure is created with :func:`matplotlib.pyplot.subplots`;
close it with ``plt.close(fig)`` when done).
"""

from __future__ import annotations

import numpy as np

from . import _validation as V
from .covariates import standardize

__all__ = [
    "plot_history",
    "plot_balance",
    "plot_representation",
    "plot_policy_curve",
    "plot_cate",
    "plot_dose_response",
]

_INSTALL_HINT = 'pip install "dowhy-cfr[plots]"'

IPM_LABELS = {
    "wass": "Wasserstein-1",
    "wass2": "Wasserstein (squared cost)",
    "mmd2_lin": "linear MMD\u00b2",
    "mmd2_rbf": "RBF MMD\u00b2",
}

# columns of the balance table, in plotting order, with display labels and colours
_BALANCE_SPACES = (
    ("input_space", "input space", "0.65"),
    ("before_training", "before training", "tab:orange"),
    ("after_training", "after training", "tab:blue"),
)
_ARM_COLORS = ("tab:blue", "tab:red")


# ----------------------------------------------------------------------------- helpers
def _pyplot():
    """``matplotlib.pyplot``, or an ImportError that says how to install it."""
    try:
        import matplotlib  # noqa: F401
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            f"dowhy_cfr.plotting needs matplotlib, which is not installed; install it with: "
            f"{_INSTALL_HINT}"
        ) from exc
    return plt


def _axes(axes, n: int, *, figsize, name: str = "axes"):
    """(figure, list of n Axes): the given ones, or new subplots in one row."""
    if axes is None:
        plt = _pyplot()
        fig, created = plt.subplots(1, n, figsize=figsize, squeeze=False)
        return fig, list(created[0])
    _pyplot()
    axs = list(np.ravel(np.asarray(axes, dtype=object))) if not hasattr(axes, "figure") \
        else [axes]
    if len(axs) != n:
        raise ValueError(f"{name} must hold {n} matplotlib Axes; got {len(axs)}")
    for a in axs:
        if not hasattr(a, "figure") or not hasattr(a, "plot"):
            raise TypeError(f"{name} must contain matplotlib Axes; got {type(a).__name__}")
    return axs[0].figure, axs


def _alpha_used(est) -> float | None:
    """The alpha a fitted estimator used (the selected one with ``alpha="auto"``), else its
    numeric ``alpha`` parameter, else None."""
    try:
        return float(est.alpha_)
    except (AttributeError, TypeError):
        alpha = getattr(est, "alpha", None)
        return float(alpha) if isinstance(alpha, (int, float, np.number)) else None


def _model_name(est) -> str:
    """'CFR' / 'TARNet' (a CFR with alpha = 0 is TARNet)."""
    name = type(est).__name__
    alpha = _alpha_used(est)
    if name == "CFR" and alpha is not None and alpha == 0.0:
        return "CFR (alpha=0, i.e. TARNet)"
    return name


def _ipm_label(ipm) -> str:
    return IPM_LABELS.get(str(ipm), str(ipm))


def _check_history(est, member: int):
    """History rows of one ensemble member and its best step; ValueError if unfitted."""
    history = getattr(est, "history_", None)
    best = getattr(est, "best_iteration_", None)
    if history is None or best is None:
        raise ValueError(
            f"{type(est).__name__} is not fitted (no history_): call fit(Y, T, X=...) first"
        )
    best = np.atleast_1d(np.asarray(best))
    member = V.check_int("member", member, 0, len(best))
    h = history[history["member"] == member].sort_values("step")
    return h, int(best[member])


def _ipm_of(est) -> str:
    config = getattr(est, "config_", None)
    return str(getattr(config, "ipm", getattr(est, "ipm", "?")))


# ----------------------------------------------------------------------------- history
def plot_history(est, member: int = 0, *, axes=None):
    """Training curves of a fitted CFR/TARNet: factual loss and imbalance vs. iteration.

    Left panel: the factual loss on the training mini-batches (mean over the steps since the
    previous evaluation) and on the validation units; right panel: the imbalance (the
    estimator's IPM between the treated and control representations) on the same data. Step 0
    is the untrained network (no training loss yet). The kept checkpoint
    (``best_iteration_``, chosen by the validation objective) is marked in both panels by a
    dotted vertical line and a marker on the validation curve.

    Parameters
    ----------
    est : CFR or TARNet
        A fitted estimator (uses ``history_``, ``best_iteration_`` and ``config_``).
    member : int, default 0
        Ensemble member to show.
    axes : sequence of two matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    _pyplot()
    h, best = _check_history(est, member)
    fig, (ax_loss, ax_imb) = _axes(axes, 2, figsize=(10, 4))
    steps = h["step"].to_numpy()
    ipm = _ipm_of(est)
    loss_name = "log-loss" if getattr(est, "loss_", "mse") == "logloss" \
        else "MSE, standardised outcome"

    panels = (
        (ax_loss, "loss", f"factual loss ({loss_name})", "Factual loss"),
        (ax_imb, "imbalance", f"imbalance: {_ipm_label(ipm)}", "Imbalance of the representation"),
    )
    for ax, key, ylabel, title in panels:
        train = h[f"train_{key}"].to_numpy(dtype=float)
        val = h[f"val_{key}"].to_numpy(dtype=float)
        ok = np.isfinite(train)
        ax.plot(steps[ok], train[ok], marker=".", color="tab:blue", label="train (mini-batches)")
        ax.plot(steps, val, marker=".", color="tab:orange", label="validation")
        ax.axvline(best, color="0.3", linestyle=":", linewidth=1)
        at_best = val[steps == best]
        ax.plot([best], [at_best[0] if len(at_best) else np.nan], marker="*", markersize=14,
                color="tab:green", linestyle="none", label=f"best checkpoint (step {best})")
        ax.set_xlabel("iteration (mini-batch step)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend()

    name = _model_name(est)
    alpha = _alpha_used(est)
    if alpha is not None and alpha > 0:
        what = f"ipm={ipm!r}, alpha={alpha:g}"
    else:
        what = f"imbalance measured with ipm={ipm!r}, not penalised"
    n_members = len(np.atleast_1d(est.best_iteration_))
    suffix = f", member {member}" if n_members > 1 else ""
    fig.suptitle(f"{name} training history ({what}{suffix})")
    if axes is None:
        fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- balance
def _balance_table(obj, member: int):
    """(pandas DataFrame indexed by IPM with the space columns present, title, note)."""
    import pandas as pd

    if hasattr(obj, "to_frame"):
        frame = obj.to_frame()
        if not isinstance(frame, pd.DataFrame):
            raise TypeError("to_frame() must return a pandas DataFrame")
        if "ipm" in frame.columns:
            frame = frame.set_index("ipm")
        columns = {}
        for key, _, _ in _BALANCE_SPACES:
            if key in frame.columns:
                columns[key] = key
            else:  # tolerate e.g. "before"/"input" column names
                token = key.split("_")[0]
                hits = [c for c in frame.columns if token in str(c).lower()]
                if len(hits) == 1:
                    columns[key] = hits[0]
        if "before_training" not in columns or "after_training" not in columns:
            raise ValueError(f"the balance table needs before/after-training columns; got "
                             f"{list(frame.columns)}")
        table = pd.DataFrame({k: pd.to_numeric(frame[c], errors="coerce")
                              for k, c in columns.items()}, index=frame.index)
        for extra in ("reduction", "p_value"):
            if extra in frame.columns:
                table[extra] = pd.to_numeric(frame[extra], errors="coerce")
        name = getattr(obj, "estimator_name", None)
        ipm = getattr(obj, "training_ipm", None)
        alpha = getattr(obj, "alpha", None)
        title = "Treated vs. control imbalance"
        if name is not None:
            detail = f"training ipm={ipm!r}" if ipm is not None else ""
            if alpha is not None:
                detail += f", alpha={float(alpha):g}"
            title += f": {name}" + (f" ({detail.lstrip(', ')})" if detail else "")
        n = getattr(obj, "n_units", None)
        note = f"{n} units" if n is not None else ""
        return table, title, note

    # a fitted estimator: validation imbalance of the training IPM, from the history
    h, best = _check_history(obj, member)
    before = h.loc[h["step"] == h["step"].min(), "val_imbalance"].to_numpy(dtype=float)
    after = h.loc[h["step"] == best, "val_imbalance"].to_numpy(dtype=float)
    if len(before) == 0 or len(after) == 0:
        raise ValueError(f"history_ has no evaluation at step 0 and at best step {best}")
    before0, after0 = float(before[0]), float(after[0])
    ipm = _ipm_of(obj)
    table = pd.DataFrame(
        {"before_training": [before0], "after_training": [after0],
         "reduction": [1.0 - after0 / before0 if before0 > 0 else np.nan]},
        index=pd.Index([ipm], name="ipm"))
    title = f"{_model_name(obj)}: treated vs. control imbalance"
    note = f"validation units: step 0 vs. best step {best}"
    return table, title, note


def plot_balance(refutation_or_est, *, member: int = 0, axes=None):
    """Imbalance between treated and control, per IPM, as bars (one panel per IPM).

    Each panel shows the imbalance of the standardised input covariates (grey, when available),
    of the representation at initialisation and of the trained representation. The panels have
    their own y-scales: the IPMs differ in scale, and the input space is not comparable with
    the representations either -- compare "after" with "before" (same network). The reduction
    ``1 - after/before`` and the permutation p-value (when available) are in each panel's title.

    Parameters
    ----------
    refutation_or_est : refutation result or fitted CFR/TARNet
        A result of the ``representation_balance`` refuter (anything with ``to_frame()``
        returning one row per IPM -- index or ``"ipm"`` column -- and the columns
        ``input_space``, ``before_training``, ``after_training`` and optionally ``reduction``,
        ``p_value``), or a fitted estimator: then nothing is computed, the validation imbalance
        of the training IPM at step 0 and at the best checkpoint is read from ``history_``.
    member : int, default 0
        Ensemble member (estimator input only).
    axes : sequence of matplotlib Axes, optional
        One per IPM.

    Returns
    -------
    matplotlib.figure.Figure
    """
    _pyplot()
    table, title, note = _balance_table(refutation_or_est, member)
    if len(table) == 0:
        raise ValueError("the balance table has no rows (no IPM)")
    n = len(table)
    fig, axs = _axes(axes, n, figsize=(max(3.6 * n + 0.6, 5.5), 4))
    spaces = [(k, label, color) for k, label, color in _BALANCE_SPACES if k in table.columns]
    for ax, (ipm, row) in zip(axs, table.iterrows()):
        labels = [label for _, label, _ in spaces]
        heights = [float(row[k]) for k, _, _ in spaces]
        colors = [color for _, _, color in spaces]
        hatches = ["//" if k == "input_space" else "" for k, _, _ in spaces]
        bars = ax.bar(np.arange(len(spaces)), heights, color=colors,
                      edgecolor="0.2", tick_label=labels)
        for bar, hatch in zip(bars, hatches):
            if hatch:
                bar.set_hatch(hatch)
        ax.bar_label(bars, labels=[f"{v:.3g}" if np.isfinite(v) else "n/a" for v in heights],
                     fontsize=8)
        ax.tick_params(axis="x", labelrotation=20)
        ax.margins(y=0.12)  # room for the value labels
        ax.set_ylabel(f"imbalance ({_ipm_label(ipm)})")
        detail = []
        if "reduction" in row and np.isfinite(row["reduction"]):
            detail.append(f"reduction {100 * row['reduction']:.0f}%")
        if "p_value" in row and np.isfinite(row["p_value"]):
            detail.append(f"p = {row['p_value']:.3g}")
        ax.set_title(_ipm_label(ipm) + ("\n" + ", ".join(detail) if detail else ""))
    sep = " -- " if n > 1 else "\n"  # one narrow panel: two lines
    fig.suptitle(title + (f"{sep}{note}" if note else ""))
    if axes is None:
        fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- representation
def _rows(A, idx):
    if A is None:
        return None
    if hasattr(A, "iloc"):
        return A.iloc[idx]
    return np.asarray(A)[idx]


def _embed(Z: np.ndarray, method: str, random_state, perplexity: float) -> np.ndarray:
    """2-D embedding of the rows of Z (PCA or t-SNE)."""
    Z = np.asarray(Z, dtype=float)
    if Z.shape[1] < 2:  # one feature: nothing to reduce, pad a zero coordinate
        Z = np.hstack([Z, np.zeros((Z.shape[0], 2 - Z.shape[1]))])
    if method == "pca":
        from sklearn.decomposition import PCA

        if Z.shape[1] == 2:
            return Z - Z.mean(0)
        return PCA(n_components=2, random_state=random_state).fit_transform(Z)
    from sklearn.manifold import TSNE

    perp = float(min(perplexity, max(1.0, (Z.shape[0] - 1) / 3.0)))
    return TSNE(n_components=2, perplexity=perp, init="pca", random_state=random_state)\
        .fit_transform(Z)


def _treated_mask(est, T, n: int) -> tuple[np.ndarray, list]:
    """Boolean treated indicator as the estimator encodes T, and [control, treated] labels."""
    t = np.asarray(T)
    if t.ndim == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.ndim != 1 or t.shape[0] != n:
        raise ValueError(f"T must be one-dimensional with {n} entries (one per row of X); got "
                         f"shape {np.shape(T)}")
    fitted = getattr(est, "fitted_", None)
    if fitted is not None:
        cats = fitted.encoding.categories
        unknown = sorted({v for v in t.tolist() if v not in cats}, key=str)
        if unknown:
            raise ValueError(f"T has values {unknown} the estimator did not see at fit "
                             f"(categories {cats})")
        return fitted.encoding.arms(t) == 1, cats[:2]
    vals = np.unique(t)
    if len(vals) != 2:
        raise ValueError(f"T must have two arms; got values {vals.tolist()}")
    return t == vals[1], vals.tolist()


def plot_representation(est, X, T, W=None, *, method: str = "tsne", random_state=0,
                        max_points: int = 1000, member: int = 0, perplexity: float = 30.0,
                        axes=None):
    """2-D map of the covariates and of the learned representation, coloured by arm.

    Left: the input covariates (X, and W if used), each standardised to mean 0 and standard
    deviation 1 over the plotted units; right: the trained representation ``Phi(x)``
    (:meth:`CFR.transform`). Both are embedded in 2-D by t-SNE (as in Figure 4 of the paper's
    supplement) or PCA. A balanced representation mixes treated and control units.

    Parameters
    ----------
    est : fitted CFR or TARNet
    X, W : array_like
        Covariates, as passed to ``fit`` (W only if the estimator was fitted with W).
    T : array_like, shape (n,)
        Treatment of the same units (colours).
    method : {"tsne", "pca"}, default "tsne"
        ``sklearn.manifold.TSNE`` (slow for thousands of points) or ``sklearn.decomposition.PCA``.
    random_state : int, default 0
        Seed of the subsample and of t-SNE.
    max_points : int, default 1000
        Plot a random subsample (without replacement, seeded by ``random_state``) of this many
        units when there are more.
    member : int, default 0
        Ensemble member whose representation is shown.
    perplexity : float, default 30
        t-SNE perplexity (capped at ``(n - 1) / 3`` for small n).
    axes : sequence of two matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    _pyplot()
    if method not in ("tsne", "pca"):
        raise ValueError(f"method={method!r} is invalid: choose 'tsne' or 'pca'")
    V.check_int("max_points", max_points, 2)
    if not hasattr(est, "transform") or getattr(est, "history_", None) is None:
        raise ValueError(f"{type(est).__name__} is not fitted: call fit(Y, T, X=...) first")
    if X is None:
        raise ValueError("X is required: the covariates to embed")
    n = len(X)
    if W is not None and len(W) != n:
        raise ValueError(f"W has {len(W)} rows, X has {n}; they must match")
    treated, cats = _treated_mask(est, T, n)
    idx = np.arange(n)
    if n > max_points:
        rng = np.random.default_rng(random_state)
        idx = np.sort(rng.choice(n, size=int(max_points), replace=False))
    Xs, Ws, ts = _rows(X, idx), _rows(W, idx), treated[idx]
    if len(idx) < 3:
        raise ValueError("need at least 3 units to embed")

    phi = est.transform(Xs, Ws, member=member)  # validates X/W against the fit
    raw = standardize(np.hstack([np.asarray(b, dtype=float).reshape(len(idx), -1)
                                 for b in (Xs, Ws) if b is not None]))

    fig, axs = _axes(axes, 2, figsize=(10, 4.6))
    axis_name = "t-SNE" if method == "tsne" else "PC"
    name = _model_name(est)
    panels = (
        (axs[0], raw, f"Covariates (standardised, {raw.shape[1]} features)"),
        (axs[1], phi, f"Learned representation \u03a6(x) ({name}, {phi.shape[1]} dims)"),
    )
    for ax, Z, title in panels:
        emb = _embed(Z, method, random_state, perplexity)
        for arm, (mask, color) in enumerate(zip((~ts, ts), _ARM_COLORS)):
            role = "control" if arm == 0 else "treated"
            ax.scatter(emb[mask, 0], emb[mask, 1], s=10, alpha=0.6, color=color,
                       label=f"{role} (T={cats[arm]})")
        ax.set_title(title)
        ax.set_xlabel(f"{axis_name} 1")
        ax.set_ylabel(f"{axis_name} 2")
        ax.legend()
    what = "t-SNE" if method == "tsne" else "PCA"
    sub = f", random subsample of {len(idx)} of {n}" if len(idx) < n else ""
    fig.suptitle(f"{what} of covariates and representation, coloured by treatment arm "
                 f"({len(idx)} units{sub})")
    if axes is None:
        fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- policy curve
def _policy_curve(effect, y, t, e=None, n_points: int = 21):
    """(share treated, policy risk) of :func:`dowhy_cfr.metrics.policy_curve`."""
    from .metrics import policy_curve

    curve = policy_curve(effect, y, t, e, n_points=n_points)
    return curve["share_treated"].to_numpy(), curve["policy_risk"].to_numpy()


def plot_policy_curve(effect=None, y=None, t=None, *, e=None, share_treated=None,
                      policy_risk=None, n_points: int = 21, label=None,
                      random_policy: bool = True, ax=None):
    """Policy risk against the share of units treated (Figure 3 of Shalit et al. 2017).

    The policy treats the units with the largest estimated effects; for each share of treated
    units its risk (1 - policy value) is estimated on the randomized units (``e == 1``), see
    :func:`dowhy_cfr.metrics.policy_curve` for the estimator. Lower is better.

    Either give ``effect`` with ``y`` and ``t`` (and ``e``), or precomputed ``share_treated``
    and ``policy_risk`` arrays.

    Parameters
    ----------
    effect : array_like of shape (n,), or dict {label: array_like}
        Estimated effects of the units; a dict draws one curve per entry (e.g. per method).
    y, t : array_like, shape (n,)
        Observed outcome and 0/1 treatment.
    e : array_like of 0/1, shape (n,), optional
        1 for the units of the randomized trial; None uses every unit.
    share_treated, policy_risk : array_like, optional
        A precomputed curve (e.g. the columns of :func:`dowhy_cfr.metrics.policy_curve`).
    n_points : int, default 21
        Shares evaluated, evenly spaced on [0, 1].
    label : str, optional
        Legend label of a single curve.
    random_policy : bool, default True
        Also draw the expected risk of treating a random share of the units (needs y and t).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    _pyplot()
    precomputed = share_treated is not None or policy_risk is not None
    if precomputed and effect is not None:
        raise ValueError("give either effect (with y and t) or share_treated and policy_risk, "
                         "not both")
    curves = {}
    if precomputed:
        if share_treated is None or policy_risk is None:
            raise ValueError("share_treated and policy_risk must be given together")
        s = V.as_vector("share_treated", share_treated)
        r = V.as_vector("policy_risk", policy_risk, s.shape[0])
        curves[label if label is not None else "policy"] = (s, r)
    elif effect is None:
        raise ValueError("give effect (with y and t) or share_treated and policy_risk")
    else:
        if y is None or t is None:
            raise ValueError("y and t are required to compute the policy curve from effect")
        effects = effect if isinstance(effect, dict) else \
            {label if label is not None else "policy": effect}
        if not effects:
            raise ValueError("effect is an empty dict")
        for name, tau in effects.items():
            curves[str(name)] = _policy_curve(tau, y, t, e, n_points)

    fig, (ax,) = _axes(ax, 1, figsize=(6, 4.2), name="ax")
    for name, (s, r) in curves.items():
        ax.plot(s, r, marker="o", markersize=3, label=name)
    if random_policy and y is not None and t is not None:
        from .metrics import randomized_units

        _, yy, tt = randomized_units(np.zeros(len(np.asarray(y))), y, t, e)
        m1, m0 = yy[tt].mean(), yy[~tt].mean()
        ax.plot([0.0, 1.0], [1.0 - m0, 1.0 - m1], color="0.5", linestyle="--",
                label="random policy")
    ax.set_xlabel("share of units treated (inclusion rate)")
    ax.set_ylabel("policy risk (1 \u2212 policy value)")
    where = "" if e is None else " (randomized units)"
    ax.set_title(f"Policy risk vs. share treated{where}")
    ax.set_xlim(-0.02, 1.02)
    ax.legend()
    return fig


# ----------------------------------------------------------------------------- CATE
def _has_inference(est) -> bool:
    if not hasattr(est, "effect_interval"):
        return False
    inference = getattr(est, "_inference", object())
    # CFR's default inference has pointwise intervals only with K-fold bagged members, no W
    return inference is not None and getattr(inference, "pointwise", True)


def plot_cate(est, X, *, alpha: float = 0.05, sort: bool = True, true_effect=None,
              intervals="auto", bins: int = 30, axes=None):
    """Estimated effects ``tau_hat(x)`` of the units of ``X``: histogram and per-unit plot.

    Left: histogram of ``tau_hat`` with its mean (the ATE estimate). Right: ``tau_hat`` per
    unit, sorted by its value when ``sort`` (units in the given order otherwise), with the
    ``1 - alpha`` intervals of ``effect_interval`` as a band when the estimator has them (the
    default K-fold bagged members' jackknife, or ``inference="bootstrap"``). ``true_effect``, when known (simulations),
    is overlaid in both panels.

    Parameters
    ----------
    est : fitted CFR / TARNet (or any EconML-style estimator with ``effect``)
    X : array_like
        Units at which to estimate the effects.
    alpha : float, default 0.05
        Interval level ``1 - alpha``.
    sort : bool, default True
    true_effect : array_like of shape (n,), optional
    intervals : "auto" or bool, default "auto"
        Draw intervals: "auto" when the estimator has inference; True requires it.
    bins : int, default 30
    axes : sequence of two matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    _pyplot()
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must be in (0, 1)")
    if intervals not in ("auto", True, False):
        raise ValueError(f"intervals={intervals!r} is invalid: 'auto', True or False")
    if not hasattr(est, "effect"):
        raise TypeError(f"est must be a fitted CATE estimator with effect(); got "
                        f"{type(est).__name__}")
    if X is None:
        raise ValueError("X is required: the units whose effects are plotted")
    tau = np.asarray(est.effect(X), dtype=float)  # raises ValueError when not fitted
    n = len(X)
    if tau.size != n:
        raise ValueError(f"plot_cate needs one effect per unit (binary treatment, one outcome); "
                         f"effect(X) has shape {tau.shape}")
    tau = tau.reshape(n)
    truth = None if true_effect is None else V.as_vector("true_effect", true_effect, n)
    lo = hi = None
    if intervals is True and not _has_inference(est):
        raise ValueError("intervals=True needs pointwise intervals: the default n_ensemble=5 "
                         "(K-fold bagged members) without W, or "
                         "fit(..., inference='bootstrap')")
    if intervals is not False and _has_inference(est):
        lo, hi = est.effect_interval(X, alpha=alpha)
        lo, hi = np.asarray(lo, dtype=float).reshape(n), np.asarray(hi, dtype=float).reshape(n)

    fig, (ax_hist, ax_unit) = _axes(axes, 2, figsize=(11, 4.2))
    name = _model_name(est)
    edges = np.histogram_bin_edges(tau if truth is None else np.concatenate([tau, truth]),
                                   bins=bins)
    ax_hist.hist(tau, bins=edges, color="tab:blue", alpha=0.7, label="estimated \u03c4\u0302(x)")
    ax_hist.axvline(tau.mean(), color="tab:blue", linestyle="--",
                    label=f"mean (ATE) = {tau.mean():.3g}")
    if truth is not None:
        ax_hist.hist(truth, bins=edges, histtype="step", color="black", linewidth=1.5,
                     label="true effect")
        ax_hist.axvline(truth.mean(), color="black", linestyle=":",
                        label=f"true ATE = {truth.mean():.3g}")
    ax_hist.set_xlabel("effect")
    ax_hist.set_ylabel("number of units")
    ax_hist.set_title(f"Distribution of estimated effects ({name})")
    ax_hist.legend()

    order = np.argsort(tau, kind="stable") if sort else np.arange(n)
    pos = np.arange(n)
    if lo is not None:
        ax_unit.fill_between(pos, lo[order], hi[order], color="tab:blue", alpha=0.25,
                             linewidth=0, label=f"{100 * (1 - alpha):g}% interval")
    ax_unit.plot(pos, tau[order], color="tab:blue", marker="." if n <= 200 else None,
                 linewidth=1, label="estimated \u03c4\u0302(x)")
    if truth is not None:
        ax_unit.scatter(pos, truth[order], s=8, color="black", alpha=0.6, label="true effect",
                        zorder=3)
    ax_unit.axhline(0.0, color="0.6", linewidth=0.8)
    ax_unit.set_xlabel("units, sorted by estimated effect" if sort else "unit")
    ax_unit.set_ylabel("effect")
    ax_unit.set_title("Estimated effect per unit" + (" with intervals" if lo is not None else ""))
    ax_unit.legend()
    if axes is None:
        fig.tight_layout()
    return fig


def plot_dose_response(curves, *, doses=None, truth=None, ax=None, label: str | None = None,
                       color: str = "tab:blue", max_curves: int = 20):
    """A dose-response result (:meth:`dowhy_cfr.CFR.dose_response`) as curves with their bands.

    The average curve (``X=None``) is drawn with its pointwise ``1 - alpha`` band; individual
    curves (rows of X) as thin lines with light bands (at most ``max_curves`` of them).
    ``doses`` (the observed doses) adds a rug along the bottom and ``truth`` (a known curve on
    the same doses, simulations) a dashed line.

    Parameters
    ----------
    curves : dowhy_cfr.dose_response.DoseResponse
    doses : array_like, optional
    truth : array_like, shape (P,) or (m, P), optional
    ax : matplotlib Axes, optional
    label : str, optional
        Legend label of the curve (default: the result's kind and method).
    color : str
    max_curves : int, default 20

    Returns
    -------
    matplotlib.figure.Figure
    """
    _pyplot()
    if not all(hasattr(curves, a) for a in ("t", "estimate", "lower", "upper", "kind")):
        raise TypeError(f"curves must be the result of CFR.dose_response(...); got "
                        f"{type(curves).__name__}")
    fig, (ax,) = _axes(None if ax is None else [ax], 1, figsize=(6.5, 4.2), name="ax")
    t = np.asarray(curves.t, dtype=float)
    level = f"{1 - curves.alpha:.0%}"
    if curves.kind == "average":
        ax.fill_between(t, curves.lower, curves.upper, color=color, alpha=0.25,
                        label=f"{level} pointwise band")
        ax.plot(t, curves.estimate, color=color, lw=2,
                label=label or "average dose-response (doubly robust)")
        if truth is not None:
            ax.plot(t, np.asarray(truth, dtype=float), "k--", lw=1.5, label="true curve")
    else:
        est = np.asarray(curves.estimate)[:max_curves]
        for i, row in enumerate(est):
            ax.fill_between(t, curves.lower[i], curves.upper[i], color=color, alpha=0.06)
            ax.plot(t, row, color=color, lw=1, alpha=0.8,
                    label=(label or "individual curves") if i == 0 else None)
        if truth is not None:
            for i, row in enumerate(np.atleast_2d(np.asarray(truth, dtype=float))[:max_curves]):
                ax.plot(t, row, "k--", lw=0.8, label="true curves" if i == 0 else None)
    if doses is not None:
        d = np.asarray(doses, dtype=float).ravel()
        ax.plot(d, np.full(len(d), 0.02), "|", color="0.4", alpha=0.4, ms=8,
                transform=ax.get_xaxis_transform(), label="observed doses")
    ax.set_xlabel("dose")
    ax.set_ylabel("outcome")
    ax.legend(fontsize=8)
    return fig
