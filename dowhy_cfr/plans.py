"""Member plans: what each network of a stack trains on.

Every way of fitting -- one network, an ensemble, cross-fitting folds, the candidates of
``alpha="auto"``, the datasets of ``fit_stacked`` (DoWhy's refuter simulations), bootstrap
replicas, the candidates of a random search, chunked and distributed training -- is a list of
:class:`MemberPlan`\\ s that :func:`dowhy_cfr.fitting.train_members` trains in one stacked pass.
A plan names the member's seed (its initial weights, validation split and mini-batch order), the
dataset it trains on, the units it may use (or a fixed training/validation split) and its own
hyper-parameters (those that may differ within a stack: ``alpha``, ``weight_decay`` and the
candidates' ``head_form`` of ``head_form="auto"``).

The functions here only build plans; they train nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.utils import check_random_state

from .nuisance import folds, sklearn_seed

__all__ = ["PER_MEMBER", "SEED_HIGH", "MemberPlan", "draw_seeds", "ensemble", "candidates",
           "variants",
           "datasets", "bootstrap", "split_units", "resample_within_arms"]

#: The hyper-parameters that may differ between the members of one stack.
PER_MEMBER = ("alpha", "weight_decay", "head_form")
SEED_HIGH = 2**31 - 1


@dataclass(frozen=True)
class MemberPlan:
    """One network of a stack.

    Attributes
    ----------
    seed : int
        Initial weights, validation split and mini-batch order depend only on it.
    dataset : int
        Index of the dataset it trains on (``fit_stacked``; 0 otherwise).
    rows : array of int or None
        The units of its dataset it may use, split into training and validation by ``seed``
        (None: all units).
    split : (array, array) or None
        A fixed ``(training rows, validation rows)`` instead (rows may repeat: bootstrap).
    params : dict
        Its own values of :data:`PER_MEMBER` hyper-parameters (others: the estimator's).
    ensemble : int
        The ensemble it belongs to: the members whose effects are averaged into one estimate
        (one fit, one dataset of ``fit_stacked``, one alpha candidate, one bootstrap replica);
        they stop together (``CFRConfig.stop_quorum``).
    stop_on_others : bool
        It chooses its checkpoint and stops by the mean validation objective of the other
        members of its ensemble, never by its own (K-fold bagged members, :func:`ensemble`);
        its validation units are then not seen by it (``FittedMembers.seen_mask``).
    """

    seed: int
    dataset: int = 0
    rows: np.ndarray | None = None
    split: tuple | None = None
    params: dict = field(default_factory=dict)
    ensemble: int = 0
    stop_on_others: bool = False


def draw_seeds(random_state, k: int) -> list[int]:
    """``k`` network seeds from a ``random_state`` (int, RandomState, None) or a Generator."""
    if isinstance(random_state, np.random.Generator):
        draws = random_state.integers(0, SEED_HIGH, size=k)
    else:
        draws = check_random_state(random_state).randint(0, SEED_HIGH, size=k)
    return [int(s) for s in draws]


def ensemble(seeds, arms: np.ndarray, *, cross_fit: bool = False, dataset: int = 0,
             groups: np.ndarray | None = None, units: np.ndarray | None = None
             ) -> list[MemberPlan]:
    """The members of one fit: one plan per seed, each on all units (split into training and
    validation by its seed), or (``cross_fit``) the K-fold bagged members: member j trains on
    the units outside the j-th of K treatment-stratified folds (seeded by the first seed;
    ``groups`` keep a unit's copies in one fold), and its validation units are fold j, which
    only the *other* members' stopping reads (``stop_on_others``): member j chooses its
    checkpoint and stops by the other members' validation objectives, each on its own fold,
    so its predictions on fold j are out of fold for the doubly robust stage. ``units``: only
    these rows of the dataset."""
    if not cross_fit:
        return [MemberPlan(int(s), dataset, None if units is None else np.asarray(units),
                           ensemble=dataset) for s in seeds]
    rows = np.arange(len(arms)) if units is None else np.asarray(units)
    groups = None if groups is None else groups[rows]
    return [MemberPlan(int(s), dataset, split=(rows[fit], rows[held_out]), ensemble=dataset,
                       stop_on_others=True)
            for s, (fit, held_out) in zip(seeds, folds(arms[rows], len(seeds), seeds[0], groups))]


def candidates(plans: list[MemberPlan], name: str, values) -> list[MemberPlan]:
    """The ``plans`` once per value of the hyper-parameter ``name`` (candidate-major order:
    candidate g's member j is plan ``g * len(plans) + j``, with member j's seed and units; each
    candidate's members are ensembles of their own)."""
    return variants(plans, [{name: float(v)} for v in values])


def variants(plans: list[MemberPlan], params: list[dict]) -> list[MemberPlan]:
    """The ``plans`` once per dict of :data:`PER_MEMBER` hyper-parameters in ``params``, in
    :func:`candidates`' order (candidate g's member j is plan ``g * len(plans) + j``; each
    candidate's members are ensembles of their own)."""
    for names in params:
        if not set(names) <= set(PER_MEMBER):
            raise ValueError(f"{sorted(set(names) - set(PER_MEMBER))} cannot differ within a "
                             f"stack; choose from {PER_MEMBER}")
    n = 1 + max(p.ensemble for p in plans)
    return [replace(p, params={**p.params, **values}, ensemble=g * n + p.ensemble)
            for g, values in enumerate(params) for p in plans]


def datasets(member_seeds: list[int], n_members: int, *, units=None) -> list[MemberPlan]:
    """The plans of ``fit_stacked``: dataset j's members are plans ``j*E .. j*E+E-1`` with seeds
    ``member_seeds[j*E + i]``, on the units ``units[j]`` (all if None)."""
    return [MemberPlan(int(seed), i // n_members,
                       None if units is None else np.asarray(units[i // n_members]),
                       ensemble=i // n_members)
            for i, seed in enumerate(member_seeds)]


def split_units(arms: np.ndarray, rows: np.ndarray, seed: int, val_fraction: float,
                groups: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The treatment-stratified training/validation split of ``rows`` (of a unit's arms
    ``arms[rows]``) by ``seed``; with ``groups`` whole groups go to one side (stratified by the
    arm of each group's first row)."""
    if groups is None:
        tr, va = train_test_split(np.arange(len(rows)), test_size=val_fraction,
                                  stratify=arms[rows], random_state=sklearn_seed(seed))
        return rows[tr], rows[va]
    labels, first = np.unique(groups[rows], return_index=True)
    g_tr, _ = train_test_split(labels, test_size=val_fraction, stratify=arms[rows][first],
                               random_state=sklearn_seed(seed))
    in_train = np.isin(groups[rows], g_tr)
    return rows[in_train], rows[~in_train]


def resample_within_arms(units: np.ndarray, arms: np.ndarray, rng) -> np.ndarray:
    """Draw ``len(units)`` of ``units`` with replacement, keeping each arm's count (sorted)."""
    parts = [rng.choice(units[arms[units] == a], size=int((arms[units] == a).sum()))
             for a in np.unique(arms[units])]
    return np.sort(np.concatenate(parts))


def bootstrap(arms: np.ndarray, n_replicas: int, n_members: int, rng: np.random.Generator,
              val_fraction: float) -> list[MemberPlan]:
    """Bootstrap replicas: replica b (members ``b*E .. b*E+E-1``, one seed per replica) splits
    the *units* into training and validation with its seed, then resamples each side with
    replacement within each arm. Resampling first would put copies of one unit on both sides,
    and the validation loss would reward memorising the training units."""
    seeds = draw_seeds(rng, n_replicas * n_members)
    units = np.arange(len(arms))
    plans = []
    for b in range(n_replicas):
        tr, va = split_units(arms, units, seeds[b * n_members], val_fraction)
        fixed = (resample_within_arms(tr, arms, rng), resample_within_arms(va, arms, rng))
        plans += [MemberPlan(seeds[b * n_members + i], split=fixed, ensemble=b)
                  for i in range(n_members)]
    return plans
