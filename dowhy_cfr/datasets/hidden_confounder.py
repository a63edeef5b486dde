r"""A simulation with a hidden confounder of known strength, for checking sensitivity bounds.

A binary confounder :math:`U \sim \text{Bernoulli}(\pi)` is left out of the covariates:

.. math::

    X_0 \sim N(0, 1), \qquad
    P(T = 1 \mid X, U) = \operatorname{expit}(0.3 + 0.5 X_0 + \gamma (U - \pi)), \qquad
    Y = (1 + X_0 / 2)\, T + X_0 + \delta U + \varepsilon, \quad \varepsilon \sim N(0, 1),

with ``n_noise`` further N(0, 1) covariates that play no part. The causal ("long") ATE is 1 for
every :math:`\gamma, \delta`; an analysis given X only estimates the "short" effect of the
regression :math:`g(t, x) = E[Y \mid T = t, X = x]`. :meth:`HiddenConfounder.truth` computes
exactly (Gauss-Hermite quadrature over :math:`X_0`, sums over U and T) both effects and the
confounder's strengths as Chernozhukov et al. (2022) define them -- :math:`c_y`, :math:`c_t`,
:math:`\rho`, and :math:`\sigma^2`, :math:`\nu^2` -- for the ATE, ATT and ATC, so that the bounds
of :mod:`dowhy_cfr.sensitivity` can be checked against the truth. ``gamma = delta = 0``: no
confounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

__all__ = ["HiddenConfounder"]

_TARGETS = ("ate", "att", "atc")


@dataclass(frozen=True)
class HiddenConfounder:
    """The design of the module docstring.

    Attributes
    ----------
    gamma : float, U's effect on the treatment's logit
    delta : float, U's effect on the outcome
    pi_u : float, P(U = 1)
    n_noise : int, covariates besides X_0 that play no part
    """

    gamma: float = 2.0
    delta: float = 1.0
    pi_u: float = 0.3
    n_noise: int = 0

    # ------------------------------------------------------------------ the nuisances
    def e_long(self, x, u):
        """:math:`P(T = 1 \\mid X_0 = x, U = u)`."""
        return expit(0.3 + 0.5 * x + self.gamma * (u - self.pi_u))

    def e_short(self, x):
        """:math:`P(T = 1 \\mid X_0 = x)`, the propensity an analysis without U estimates."""
        return self.pi_u * self.e_long(x, 1) + (1 - self.pi_u) * self.e_long(x, 0)

    def g_long(self, t, x, u):
        """:math:`E[Y \\mid T = t, X_0 = x, U = u]`."""
        return (1 + x / 2) * t + x + self.delta * u

    def g_short(self, t, x):
        """:math:`E[Y \\mid T = t, X_0 = x]`: U averaged over its law given T and X."""
        e = self.e_short(x)
        p_u = np.where(t == 1, self.pi_u * self.e_long(x, 1) / e,
                       self.pi_u * (1 - self.e_long(x, 1)) / (1 - e))
        return (1 + x / 2) * t + x + self.delta * p_u

    # ------------------------------------------------------------------ data
    def sample(self, n: int, seed: int) -> dict:
        """``n`` units: ``x`` (n, 1 + n_noise), ``t``, ``y``, the hidden ``u``, and the exact
        short nuisances ``mu`` (n, 2) (per arm) and ``e`` (n, 2) (per arm) given X."""
        rng = np.random.default_rng(seed)
        x0, u = rng.normal(size=n), rng.binomial(1, self.pi_u, n)
        t = rng.binomial(1, self.e_long(x0, u))
        y = self.g_long(t, x0, u) + rng.normal(size=n)
        x = np.column_stack([x0, rng.normal(size=(n, self.n_noise))])
        e1 = self.e_short(x0)
        return {"x": x, "t": t, "y": y, "u": u,
                "mu": np.column_stack([self.g_short(0, x0), self.g_short(1, x0)]),
                "e": np.column_stack([1 - e1, e1])}

    # ------------------------------------------------------------------ the truth
    def truth(self, target: str = "ate") -> dict:
        """The exact population quantities of ``target`` ("ate", "att", "atc").

        Returns
        -------
        dict
            ``long`` (the causal effect), ``short`` (the effect given X only), ``bias`` (short -
            long), ``c_y``, ``c_t``, ``rho`` (the confounder's strengths), ``sigma2`` and ``nu2``
            (the scales of the bound), ``bound``
            (:math:`\\sqrt{c_y c_t / (1 - c_t)\\,\\sigma^2\\nu^2}`, the largest bias at these
            strengths; ``|rho|`` times it is ``|bias|``); and the terms of the bias identity:
            ``cross`` = E[(g_s - g)(alpha_s - alpha)] (= long - short), ``da2`` = E[(alpha_s -
            alpha)^2] and ``nu2_gain`` = E[alpha_s^2] - E[alpha^2] (equal to ``da2``).
        """
        target = str(target).lower()
        if target not in _TARGETS:
            raise ValueError(f"target={target!r} is invalid: choose one of {_TARGETS}")
        x, w = np.polynomial.hermite_e.hermegauss(120)
        w = w / w.sum()
        p1 = float(np.sum(w * self.e_short(x)))

        def mean(f):  # E[f(t, x, u)] over the joint law
            return sum(np.sum(w * pu * np.where(t, self.e_long(x, u), 1 - self.e_long(x, u))
                              * f(t, x, u))
                       for u, pu in ((0, 1 - self.pi_u), (1, self.pi_u)) for t in (0, 1))

        def representer(t, e):
            if target == "ate":
                return t / e - (1 - t) / (1 - e)
            if target == "att":
                return (t - (1 - t) * e / (1 - e)) / p1
            return (t * (1 - e) / e - (1 - t)) / (1 - p1)

        weight = {"ate": lambda t: 1.0, "att": lambda t: t / p1,
                  "atc": lambda t: (1 - t) / (1 - p1)}[target]
        dg = lambda t, x, u: self.g_long(t, x, u) - self.g_short(t, x)  # noqa: E731
        da = lambda t, x, u: (representer(t, self.e_long(x, u))  # noqa: E731
                              - representer(t, self.e_short(x)))
        nu2 = mean(lambda t, x, u: representer(t, self.e_short(x)) ** 2)
        nu2_long = mean(lambda t, x, u: representer(t, self.e_long(x, u)) ** 2)
        dg2, da2 = mean(lambda t, x, u: dg(t, x, u) ** 2), mean(lambda t, x, u: da(t, x, u) ** 2)
        sigma2 = 1.0 + dg2
        long = mean(lambda t, x, u: weight(t) * (self.g_long(1, x, u) - self.g_long(0, x, u)))
        short = mean(lambda t, x, u: weight(t) * (self.g_short(1, x) - self.g_short(0, x)))
        c_y, c_t = dg2 / sigma2, 1 - nu2 / nu2_long
        cross = mean(lambda t, x, u: dg(t, x, u) * da(t, x, u))
        rho = cross / np.sqrt(dg2 * da2) if dg2 > 0 and da2 > 0 else 0.0
        return {"long": float(long), "short": float(short), "bias": float(short - long),
                "c_y": float(c_y), "c_t": float(c_t), "rho": float(rho), "sigma2": float(sigma2),
                "nu2": float(nu2), "cross": float(cross), "da2": float(da2),
                "nu2_gain": float(nu2_long - nu2),
                "bound": float(np.sqrt(c_y * c_t / (1 - c_t) * sigma2 * nu2)) if c_t < 1 else
                float("inf")}
