"""Replay: the two head forms on alternate folds instead of both forms on every fold.

``head_form="auto"`` trains both forms (separate heads and Robinson's, ``docs/parameters.md``,
items 41-45) on every one of the K folds, ten networks, and averages them where their mean
fold losses are within 5 %. This probe asks whether K networks, separate heads on the even
folds and Robinson's form on the odd ones, keep that gain at the defaults' cost, and whether
the fold losses, now of *different* folds, still tell IHDP's realizations (where Robinson's form
doubles the error) from the tables. Each data set is fitted twice on the same folds (``CFR()``
and ``CFR(head_form="robinson", alpha=0)``, the same ``random_state``), and the members'
effects at the test units are recombined (item 46)::

    python scripts/alternate_forms_replay.py realistic held-out 0 > ho.jsonl
    python scripts/alternate_forms_replay.py realistic default 0,1 > dev.jsonl
    python scripts/alternate_forms_replay.py ihdp 1 40 > ihdp.jsonl
    python scripts/alternate_forms_replay.py score ho.jsonl dev.jsonl ihdp.jsonl
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np
import torch

FORMS = {"S": {}, "R": {"head_form": "robinson", "alpha": 0.0}}


def member_effects(est, x) -> np.ndarray:
    """Each member's effect at ``x`` (K, m), with the fit's debiasing shift (the heads' effects
    of :meth:`~dowhy_cfr.fitted.FittedCFR.unit_effects`, member by member)."""
    from dowhy_cfr.fitted import effects_of

    f = est.fitted_
    shift = 0.0 if f.debiased is None else f.debiased.shift
    return np.stack([effects_of(o) + shift for o in f.outputs(f.features(x))])[..., 0]


def row(name: str, seed: int, fits: dict, tau: np.ndarray) -> dict:
    """The fold losses and the heads' root PEHE of each combination of the two forms."""
    ms, mr = fits["S"][1], fits["R"][1]
    odd = np.arange(len(ms)) % 2 == 1

    def pehe(e):
        return float(np.sqrt(np.mean((e - tau) ** 2)))

    return dict(design=name, seed=seed,
                loss_S=fits["S"][0].fitted_.members.kept_val_loss().tolist(),
                loss_R=fits["R"][0].fitted_.members.kept_val_loss().tolist(),
                S=pehe(ms.mean(0)), R=pehe(mr.mean(0)), paired=pehe(0.5 * (ms + mr).mean(0)),
                alternate=pehe(0.5 * ms[~odd].mean(0) + 0.5 * mr[odd].mean(0)))


def realistic(designs: str, seeds: str) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from crossfit_compare import fit_realistic  # this script's folder

    from dowhy_cfr.benchmarks import realistic as R
    from dowhy_cfr.datasets.realistic import DEFAULT_DESIGNS

    names = DEFAULT_DESIGNS if designs == "default" else R.parse_designs(designs)
    for name in names:
        for seed in (int(s) for s in seeds.split(",")):
            fits = {}
            for form, params in FORMS.items():
                est, data, _ = fit_realistic(name, 1500, seed, params)
                fits[form] = (est, member_effects(est, data.test.X))
            print(json.dumps(row(name, seed, fits, data.test.tau)), flush=True)


def ihdp(first: int, last: int) -> None:
    from dowhy_cfr import CFR
    from dowhy_cfr.datasets import ihdp_split, load_ihdp

    for r in range(first, last + 1):
        d = load_ihdp(r)
        split = ihdp_split(d.x.shape[0], seed=r)
        fits = {}
        for form, params in FORMS.items():
            est = CFR(random_state=r, verbose=0, **params).fit(
                d.yf[split.within], d.t[split.within], X=d.x[split.within])
            fits[form] = (est, member_effects(est, d.x[split.test]))
        print(json.dumps(row("ihdp", r, fits, (d.mu1 - d.mu0)[split.test])), flush=True)


def choose(r: dict, alternate: bool, within: float = 0.05) -> tuple[float, str]:
    """``head_form="auto"``'s rule on the paired fold losses (every fold, both forms) or on the
    alternate folds' (separate heads' even folds against Robinson's odd ones)."""
    ls, lr = np.asarray(r["loss_S"]), np.asarray(r["loss_R"])
    if alternate:
        ls, lr = ls[0::2], lr[1::2]
    s, q = np.nanmean(ls), np.nanmean(lr)
    if abs(q - s) <= within * s:
        return r["alternate" if alternate else "paired"], "both"
    return (r["S"], "S") if s < q else (r["R"], "R")


def score(files: list) -> None:
    for path in files:
        rows = [json.loads(line) for line in open(path)]
        base = np.array([r["S"] for r in rows])
        print(f"{path}: {len(rows)} data sets, separate heads {base.mean():.4f}")
        for label, values in [("Robinson's form", [r["R"] for r in rows]),
                              ("both on every fold, averaged", [r["paired"] for r in rows]),
                              ("alternate folds, averaged", [r["alternate"] for r in rows]),
                              ("auto's rule, paired losses", [choose(r, False)[0] for r in rows]),
                              ("auto's rule, alternate folds", [choose(r, True)[0] for r in rows])]:
            d = np.asarray(values) - base
            print(f"  {label:30s} {np.mean(values):.4f}  {d.mean():+.4f} ± "
                  f"{d.std(ddof=1) / np.sqrt(len(d)):.4f}  worst {d.max():+.3f}")
        picks = [choose(r, True)[1] for r in rows]
        print("  alternate folds' choice:", {c: picks.count(c) for c in ("both", "S", "R")})


def main() -> None:
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    what = sys.argv[1]
    if what == "realistic":
        realistic(sys.argv[2], sys.argv[3])
    elif what == "ihdp":
        ihdp(int(sys.argv[2]), int(sys.argv[3]))
    elif what == "score":
        score(sys.argv[2:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
