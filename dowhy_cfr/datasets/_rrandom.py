"""A bit-exact re-implementation of the few pieces of R's random number generation that the
IHDP simulation uses.

Only the settings in force in R < 3.6 (the versions the published IHDP realizations were
generated with) are covered:

* ``RNGkind("Mersenne-Twister", normal.kind = "Inversion", sample.kind = "Rounding")``,
* ``set.seed(seed)``                         -- R's ``do_setseed`` / ``RNG_Init`` (RNG.c),
* ``runif``-style uniforms                   -- ``MT_genrand`` + ``fixup`` (RNG.c),
* ``rnorm(n)``                               -- ``norm_rand`` with ``INVERSION`` (snorm.c),
* ``sample(x, 1)``                           -- ``R_unif_index`` with "Rounding" (RNG.c),
* ``sample(k, n, replace = TRUE, prob = p)`` -- ``FixupProb`` + ``ProbSampleReplace`` +
  ``revsort`` (random.c, sort.c).

The Mersenne-Twister core itself is numpy's :class:`numpy.random.MT19937`: its raw 32-bit
outputs (``random_raw``) are exactly MT's ``genrand_int32``, which is what R's ``MT_genrand``
consumes. Everything is vectorised over the raw stream: every uniform consumes exactly one raw
32-bit word and every normal exactly two, so a whole block of draws is one ``random_raw`` call.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import ndtri

__all__ = ["RRandom", "revsort", "r_seed_state"]

_MASK32 = 0xFFFFFFFF
_LCG_MULT = 69069
_MT_N = 624

# RNG.c: MT_genrand's scale, 2^-32 written as R writes it.
_I2_32M1 = 2.3283064365386963e-10
# RNG.c: fixup()'s i2_32m1 = 1/(2^32 - 1).
_FIXUP_I2_32M1 = 2.328306437080797e-10
# snorm.c: BIG for normal.kind = "Inversion".
_BIG = 134217728.0  # 2^27


def r_seed_state(seed: int) -> np.ndarray:
    """Mersenne-Twister state that R's ``set.seed(seed)`` produces.

    Re-implements ``RNG_Init`` (R's RNG.c) for ``kind = MERSENNE_TWISTER``: the seed is
    scrambled by 50 steps of the LCG ``s <- 69069 s + 1 (mod 2^32)``, then 625 further steps
    fill ``dummy[0..624]``. ``dummy[0]`` is MT's position ``mti``, which ``FixupSeeds`` resets
    to 624 (so the first draw regenerates the whole block); ``dummy[1..624]`` is the state.

    Parameters
    ----------
    seed : int
        The argument of ``set.seed``; reduced modulo 2^32 as R's C code does with its
        ``Int32`` seed.

    Returns
    -------
    numpy.ndarray
        The 624 state words (``uint32``), i.e. ``dummy[1..624]``.
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    # The k-th LCG iterate is s_k = A_k s + C_k (mod 2^32); the affine coefficients of steps
    # 51..675 are precomputed, so this is one vectorised uint64 expression (wrap-around mod
    # 2^64 is harmless because 2^32 divides 2^64).
    a_k, c_k = _lcg_coefficients()
    words = (a_k * np.uint64(int(seed) & _MASK32) + c_k) & np.uint64(_MASK32)
    # words[0] is mti, overwritten by FixupSeeds with 624; the state is the rest.
    return words[1:].astype(np.uint32)


@functools.lru_cache(maxsize=1)
def _lcg_coefficients() -> tuple[np.ndarray, np.ndarray]:
    """``(A_k, C_k)`` with ``s_k = A_k s_0 + C_k mod 2^32`` for ``k = 51..675`` (RNG_Init)."""
    a, c = 1, 0
    for _ in range(50):  # RNG_Init: initial scrambling
        a, c = (_LCG_MULT * a) & _MASK32, (_LCG_MULT * c + 1) & _MASK32
    a_k = np.empty(_MT_N + 1, dtype=np.uint64)
    c_k = np.empty(_MT_N + 1, dtype=np.uint64)
    for j in range(_MT_N + 1):  # RNG_Init: fill i_seed[0..624]
        a, c = (_LCG_MULT * a) & _MASK32, (_LCG_MULT * c + 1) & _MASK32
        a_k[j], c_k[j] = a, c
    a_k.setflags(write=False)
    c_k.setflags(write=False)
    return a_k, c_k


def _r_seed_state_loop(seed: int) -> np.ndarray:
    """Plain-loop version of :func:`r_seed_state` (reference for the tests)."""
    s = int(seed) & _MASK32
    for _ in range(50):
        s = (_LCG_MULT * s + 1) & _MASK32
    words = []
    for _ in range(_MT_N + 1):
        s = (_LCG_MULT * s + 1) & _MASK32
        words.append(s)
    return np.array(words[1:], dtype=np.uint32)


def revsort(a, ib=None):
    """Sort ``a`` into descending order by heapsort, permuting ``ib`` alongside.

    Re-implements R's C ``revsort(double *a, int *ib, int n)`` (sort.c) step by step. The
    order in which tied values end up depends on the heapsort's exact sequence of moves, which
    is why R's sampling with unequal probabilities needs this very algorithm, not any
    descending sort.

    Parameters
    ----------
    a : array_like of float
        Values to sort.
    ib : array_like of int, optional
        Companion labels; default ``1..n`` (R's convention), in which case the result holds the
        permutation.

    Returns
    -------
    a_sorted : numpy.ndarray
        ``a`` in descending order.
    ib_sorted : numpy.ndarray
        ``ib`` permuted alongside.
    """
    a = [float(v) for v in np.asarray(a, dtype=float).ravel()]
    n = len(a)
    if ib is None:
        ib = list(range(1, n + 1))
    else:
        ib = [int(v) for v in np.asarray(ib).ravel()]
        if len(ib) != n:
            raise ValueError(f"ib must have the same length as a ({n}), got {len(ib)}")
    if n <= 1:
        return np.array(a, dtype=float), np.array(ib, dtype=int)
    # The C code uses 1-based indices (a--, ib--); pad index 0 to keep the same arithmetic.
    a = [0.0] + a
    ib = [0] + ib
    l = (n >> 1) + 1
    ir = n
    while True:
        if l > 1:
            l -= 1
            ra = a[l]
            ii = ib[l]
        else:
            ra = a[ir]
            ii = ib[ir]
            a[ir] = a[1]
            ib[ir] = ib[1]
            ir -= 1
            if ir == 1:
                a[1] = ra
                ib[1] = ii
                break
        i = l
        j = l << 1
        while j <= ir:
            if j < ir and a[j] > a[j + 1]:
                j += 1
            if ra > a[j]:
                a[i] = a[j]
                ib[i] = ib[j]
                i = j
                j += j
            else:
                j = ir + 1
        a[i] = ra
        ib[i] = ii
    return np.array(a[1:], dtype=float), np.array(ib[1:], dtype=int)


class RRandom:
    """R's random number stream (Mersenne-Twister, Inversion, Rounding), vectorised.

    Parameters
    ----------
    seed : int
        As in R's ``set.seed(seed)``.

    Examples
    --------
    >>> rng = RRandom(42)   # set.seed(42) in R < 3.6
    >>> u = rng.unif_rand(3)  # runif(3)
    >>> z = rng.norm_rand(2)  # rnorm(2)
    """

    def __init__(self, seed: int):
        self.seed = int(seed)
        self._bitgen = np.random.MT19937()
        self._bitgen.state = {
            "bit_generator": "MT19937",
            "state": {"key": r_seed_state(seed), "pos": _MT_N},
        }

    # -- RNG.c: unif_rand() for MERSENNE_TWISTER ------------------------------------------
    def unif_rand(self, n: int = 1) -> np.ndarray:
        """``n`` successive values of R's ``unif_rand()`` (``MT_genrand`` then ``fixup``).

        Parameters
        ----------
        n : int
            Number of draws.

        Returns
        -------
        numpy.ndarray
            Shape ``(n,)``, all strictly inside (0, 1).
        """
        raw = np.asarray(self._bitgen.random_raw(int(n)), dtype=np.uint64)
        u = raw.astype(np.float64) * _I2_32M1
        # RNG.c fixup(): ensure 0 < u < 1
        u = np.where(u <= 0.0, 0.5 * _FIXUP_I2_32M1, u)
        u = np.where(1.0 - u <= 0.0, 1.0 - 0.5 * _FIXUP_I2_32M1, u)
        return u

    # -- snorm.c: norm_rand() with N01_kind == INVERSION -----------------------------------
    def norm_rand(self, n: int = 1) -> np.ndarray:
        """``n`` successive standard normals, as R's ``rnorm(n)`` with ``"Inversion"``.

        Each normal uses two uniforms: ``u = (int)(BIG * u1) + u2; qnorm(u / BIG)`` with
        ``BIG = 2^27``, for 53 bits of resolution.

        Parameters
        ----------
        n : int
            Number of draws.

        Returns
        -------
        numpy.ndarray
            Shape ``(n,)``.
        """
        u = self.unif_rand(2 * int(n)).reshape(-1, 2)
        v = np.floor(_BIG * u[:, 0]) + u[:, 1]  # (int) truncation; BIG*u > 0
        return ndtri(v / _BIG)

    # -- RNG.c: R_unif_index(dn) with sample.kind == ROUNDING ------------------------------
    def unif_index(self, k: int, n: int = 1) -> np.ndarray:
        """``n`` successive values of R's ``R_unif_index(k)`` under ``"Rounding"`` (R < 3.6).

        Parameters
        ----------
        k : int
            Size of the index range; the result lies in ``0..k-1``.
        n : int
            Number of draws.

        Returns
        -------
        numpy.ndarray of int64
        """
        return np.floor(float(k) * self.unif_rand(n)).astype(np.int64)

    # -- random.c: do_sample, replace = TRUE, prob given, no Walker alias ------------------
    def sample_prob_replace(self, prob, size: int) -> np.ndarray:
        """R's ``sample.int(length(prob), size, replace = TRUE, prob = prob)``.

        Re-implements ``FixupProb`` (normalise ``prob`` by its sum) and ``ProbSampleReplace``
        (random.c): the probabilities are sorted in descending order by :func:`revsort`
        together with the labels ``1..n``, accumulated, and each draw returns the label of the
        first cumulative probability ``>= unif_rand()`` among the first ``n - 1`` (else the
        last one). R switches to Walker's alias method only when more than 200 categories
        have ``n * p > 0.1``; that case is not implemented.

        Parameters
        ----------
        prob : array_like of float
            Non-negative category weights.
        size : int
            Number of draws.

        Returns
        -------
        numpy.ndarray of int64
            1-based category labels, as R returns them.
        """
        p = np.asarray(prob, dtype=float).ravel()
        if p.size == 0 or not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
            raise ValueError("prob must be non-empty, finite, non-negative and not all zero")
        n = p.size
        if np.count_nonzero(n * p / p.sum() > 0.1) > 200:
            raise NotImplementedError("R would use Walker's alias method for this prob")
        p = p / p.sum()  # FixupProb
        p_sorted, perm = revsort(p)  # ProbSampleReplace
        cum = np.cumsum(p_sorted)  # sequential sums, same order as the C loop
        ru = self.unif_rand(size)
        # first j < n-1 with ru <= cum[j]; otherwise j = n-1
        j = np.searchsorted(cum[: n - 1], ru, side="left")
        return perm[j].astype(np.int64)
