"""Early-stopping rules and step limits replayed offline on recorded trajectories (IHDP, synthetic
designs).

A model's trajectory does not depend on when it stops, so one run that never stops (``patience=
None``, all ``n_iter`` steps) contains every shorter run: this script records, at every
evaluation, each model's validation objective (Eq. 3 on its validation split) and its outputs on
all units, then replays stopping rules on the record -- which step a rule stops at, which
checkpoint it keeps, and that checkpoint's sqrt(PEHE) (with the estimator's AIPW shift, as
``effect`` reports it) -- without training again.

    python scripts/stopping_replay.py record --method CFR-Wass --realizations 1-100 --stack 25
    python scripts/stopping_replay.py record --method TARNet --realizations 1-100 --stack 25
    python scripts/stopping_replay.py record --design A --n 2000 --datasets 0-39 --stack 20
    python scripts/stopping_replay.py replay --data CFR-Wass,TARNet,A2000 --markdown

A rule: a model stops at the first evaluation s with ``s - s_c >= max(min_wait, relative *
s_c)``, where ``s_c`` is the step of the last best that improved the best objective so far by
more than ``tol`` (relative); the kept checkpoint is the best evaluation up to s (any
improvement). ``tol = 0`` is the estimator's rule (``patience * eval_every = min_wait``).
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import dowhy_cfr.core.training as training
from dowhy_cfr import CFR, TARNet
from dowhy_cfr.benchmarks.report import parse_range
from dowhy_cfr.datasets import ihdp_split, load_ihdp_many
from dowhy_cfr.debiased import average_effect

OUT = Path("scripts/out/stopping_replay")


def _recording(frames: dict, x_all):
    """A ``StackedRun.validate`` that first stores each live model's outputs on all units
    (``x_all``: None = the run's own covariates, else a (K, n_all, d) tensor per model)."""
    original = training.StackedRun.validate

    def validate(run, step):
        with torch.no_grad():
            models = run.model_ids[run.live]
            x = (run.take(run.x, torch.arange(run.x.shape[-2]).expand(len(run.live), -1))
                 if x_all is None else x_all[torch.as_tensor(models)])
            out = run.net(x)[1].numpy().copy()  # (K_live, n_arms, n_all), standardised
        for j, model in enumerate(models):
            frames.setdefault(int(model), []).append((step, out[j]))
        return original(run, step)

    return original, validate


def _row(frames, j, member, **data) -> dict:
    steps = np.array([st for st, _ in frames[j]])
    h = member.history_
    f = member.fitted_
    return dict(steps=steps,
                objective=h.set_index("step")["val_objective"].reindex(steps).to_numpy(),
                outputs=np.stack([o for _, o in frames[j]]).astype(np.float32),
                y_mean=float(f.preprocessing.y_mean[0]), y_scale=float(f.preprocessing.y_scale[0]),
                y=f.debiased.y, arms=f.debiased.arms, e=f.debiased.e,
                best_step=int(member.best_iteration_[0]), **data)


def record(method: str, reals, stack: int, seed: int = 0) -> Path:
    """IHDP: fit ``method`` on ``reals`` with no early stop, recording outputs at every
    evaluation (on all 747 units; the model trains on the realization's within-sample units)."""
    data = load_ihdp_many(reals)
    x, t = data["x"][0], data["t"][0]
    splits = [ihdp_split(len(x), seed=int(r)) for r in reals]
    frames: dict[int, list] = {}
    original, validate = _recording(frames, None)
    cls = TARNet if method == "TARNet" else CFR
    rows = []
    training.StackedRun.validate = validate
    try:
        for s in range(0, len(reals), stack):
            piece = list(range(s, min(s + stack, len(reals))))
            frames.clear()
            start = time.perf_counter()
            est = cls(random_state=seed + s, verbose=0, patience=None, n_iter=3000)
            members = est.fit_stacked(data["yf"][piece], t, X=x,
                                      units=np.stack([splits[i].within for i in piece]))
            print(f"{method}: realizations {reals[piece[0]]}-{reals[piece[-1]]} "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
            for j, (i, m) in enumerate(zip(piece, members)):
                rows.append(_row(frames, j, m, realization=int(reals[i]),
                                 units=splits[i].within, test=splits[i].test,
                                 tau_true=data["mu1"][i] - data["mu0"][i],
                                 effect=m.effect(x).ravel(), ate=float(m.ate(x[splits[i].within]))))
    finally:
        training.StackedRun.validate = original
    return _save(rows, f"{method}_{reals[0]}-{reals[-1]}")


def record_design(design: str, n: int, datasets, stack: int, n_test: int = 1000) -> Path:
    """A synthetic design (designs A-D, data as ``python -m dowhy_cfr.benchmarks coverage``
    draws them): default CFR with no early stop on each data set, the seed of that benchmark's
    fit, outputs on the training units and on ``n_test`` fresh test units."""
    from dowhy_cfr.benchmarks.synthetic import run_data
    from dowhy_cfr.fitting import draw_seeds

    rows = []
    for s in range(0, len(datasets), stack):
        piece = [int(v) for v in datasets[s:s + stack]]
        train, test = zip(*(run_data(design, n, k, n_test=n_test) for k in piece))
        x_all = torch.as_tensor(np.stack([
            (np.vstack([a.x, b.x]) - a.x.mean(0)) / np.where(a.x.std(0) > 0, a.x.std(0), 1.0)
            for a, b in zip(train, test)]), dtype=torch.float32)
        frames: dict[int, list] = {}
        original, validate = _recording(frames, x_all)
        training.StackedRun.validate = validate
        try:
            start = time.perf_counter()
            members = CFR(verbose=0, patience=None, n_iter=3000).fit_stacked(
                [a.y for a in train], [a.t for a in train], X=[a.x for a in train],
                seeds=[draw_seeds(k, 1)[0] for k in piece])
        finally:
            training.StackedRun.validate = original
        print(f"design {design}, n={n}: data sets {piece[0]}-{piece[-1]} "
              f"{time.perf_counter() - start:.0f} s", flush=True)
        for j, (k, m, a, b) in enumerate(zip(piece, members, train, test)):
            rows.append(_row(frames, j, m, realization=k, units=np.arange(n),
                             test=np.arange(n, n + n_test), tau_true=np.concatenate([a.tau, b.tau]),
                             effect=np.concatenate([m.effect(a.x), m.effect(b.x)]).ravel(),
                             ate=float(m.ate(a.x))))
    return _save(rows, f"{design}{n}_{datasets[0]}-{datasets[-1]}")


def _save(rows, name: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.npz"
    np.savez_compressed(path, rows=np.array(rows, dtype=object))
    return path


def at_checkpoint(row, e: int):
    """``(effect on all units, AIPW ATE over the fitted units)`` that the estimator would report
    with the checkpoint of evaluation ``e``."""
    mu_all = (row["outputs"][e].astype(float) * row["y_scale"] + row["y_mean"]).T  # (n, arms)
    mu = mu_all[row["units"]]
    ate = average_effect(row["y"], row["arms"], mu, row["e"])
    shift = ate.estimate - (mu[:, 1] - mu[:, 0]).mean()  # the AIPW shift of the effects
    return mu_all[:, 1] - mu_all[:, 0] + shift, ate


def stop(objective: np.ndarray, steps: np.ndarray, *, min_wait: int, relative: float,
         tol: float, n_iter: int = 3000) -> tuple[int, int]:
    """(evaluation index of the stop, evaluation index of the kept checkpoint) under a rule, with
    at most ``n_iter`` steps; evaluation 0 (the initial state) is never selected."""
    best, best_e, clock = np.inf, None, None
    last = int(np.searchsorted(steps, n_iter, side="right")) - 1
    for e in range(1, last + 1):
        v = objective[e]
        if np.isfinite(v) and v < best:
            if clock is None or v < best - tol * abs(best):
                clock = steps[e]
            best, best_e = v, e
        if clock is not None and steps[e] - clock >= max(min_wait, relative * clock):
            return e, best_e
    return last, best_e


def replay(names, rules) -> pd.DataFrame:
    out = []
    for name in names:
        rows = []
        for path in sorted(OUT.glob(f"{name}_*.npz")):
            rows += list(np.load(path, allow_pickle=True)["rows"])
        kept = [at_checkpoint(r, stop(r["objective"], r["steps"], min_wait=10**9, relative=0,
                                      tol=0)[1]) for r in rows]
        check = max(np.abs(tau - r["effect"]).max() for (tau, _), r in zip(kept, rows))
        check_ate = max([abs(a.estimate - r["ate"]) for (_, a), r in zip(kept, rows)
                         if "ate" in r] or [np.nan])
        print(f"{name}: {len(rows)} data sets; replay of the kept checkpoint against the fitted "
              f"estimator: effect {check:.1e}, ATE {check_ate:.1e} (max abs. differences)")
        for min_wait, relative, tol, n_iter in rules:
            m = dict(within=[], out=[], ate_err=[], covered=[], width=[], steps=[], best=[])
            for r in rows:
                e_stop, e_best = stop(r["objective"], r["steps"], min_wait=min_wait,
                                      relative=relative, tol=tol, n_iter=n_iter)
                tau, ate = at_checkpoint(r, e_best)
                err = tau - r["tau_true"]
                truth = r["tau_true"][r["units"]].mean()
                lo, hi = ate.interval(0.05)
                m["within"].append(np.sqrt(np.mean(err[r["units"]] ** 2)))
                m["out"].append(np.sqrt(np.mean(err[r["test"]] ** 2)))
                m["ate_err"].append(abs(ate.estimate - truth))
                m["covered"].append(lo <= truth <= hi)
                m["width"].append(hi - lo)
                m["steps"].append(r["steps"][e_stop])
                m["best"].append(r["steps"][e_best])
            se = {k: np.std(v) / np.sqrt(len(rows)) for k, v in m.items()}
            out.append(dict(data=name, min_wait=min_wait, relative=relative, tol=tol,
                            n_iter=n_iter, within=np.mean(m["within"]), out=np.mean(m["out"]),
                            out_se=se["out"], out_median=np.median(m["out"]),
                            ate_err=np.mean(m["ate_err"]), ate_err_se=se["ate_err"],
                            coverage=np.mean(m["covered"]), width=np.mean(m["width"]),
                            steps_mean=np.mean(m["steps"]), steps_median=np.median(m["steps"]),
                            best_median=np.median(m["best"]),
                            stack25_max=np.mean([max(m["steps"][i:i + 25])
                                                 for i in range(0, len(rows), 25)]),
                            pehe_out=np.array(m["out"]), ate_abs=np.array(m["ate_err"])))
    return pd.DataFrame(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--method", default="CFR-Wass", choices=["CFR-Wass", "TARNet"])
    r.add_argument("--realizations", default="1-100")
    r.add_argument("--design", default=None, help="a synthetic design A-D instead of IHDP")
    r.add_argument("--n", type=int, default=2000)
    r.add_argument("--datasets", default="0-39")
    r.add_argument("--stack", type=int, default=25)
    r.add_argument("--threads", type=int, default=1)
    s = sub.add_parser("replay")
    s.add_argument("--data", default="CFR-Wass,TARNet",
                   help="recordings: CFR-Wass, TARNet (IHDP) or e.g. A2000")
    s.add_argument("--markdown", action="store_true", help="also print markdown tables")
    a = p.parse_args(argv)
    if a.cmd == "record":
        torch.set_num_threads(a.threads)
        if a.design:
            print(record_design(a.design, a.n, parse_range(a.datasets), a.stack))
        else:
            print(record(a.method, parse_range(a.realizations), a.stack))
        return
    rules = [(100, 1.0, 0.0), (10**9, 0.0, 0.0)]  # the default, and never stopping
    rules += list(itertools.product((50, 100), (0.5, 0.75, 1.0), (0.0, 1e-3, 1e-2)))
    rules += [(100, 1.5, 0.0), (100, 2.0, 0.0), (200, 1.0, 0.0)]
    rules = [(*rule, 3000) for rule in rules]  # min_wait, relative, tol, n_iter
    rules += [(100, 1.0, 0.0, n) for n in (500, 1000, 1500, 2000, 2100)]
    rules += [(100, r, 0.0, n) for r in (1.5, 2.0) for n in (1000, 1500, 2000)]
    table = replay(a.data.split(","), rules)
    pd.set_option("display.width", 250)
    for name, group in table.groupby("data", sort=False):
        ref = group.iloc[0]  # the default rule
        group = group.assign(
            paired_out=[np.mean(g - ref.pehe_out) for g in group.pehe_out],
            paired_out_se=[np.std(g - ref.pehe_out) / np.sqrt(len(g)) for g in group.pehe_out],
            paired_ate=[np.mean(g - ref.ate_abs) for g in group.ate_abs],
            paired_ate_se=[np.std(g - ref.ate_abs) / np.sqrt(len(g)) for g in group.ate_abs])
        group = group.drop_duplicates(subset=["min_wait", "relative", "tol", "n_iter"])
        print(group.drop(columns=["pehe_out", "ate_abs", "data"]).to_string(
            index=False, float_format="%.4g"))
        if a.markdown:
            print(markdown(name, group, len(ref.pehe_out)))


def _rule(g) -> str:
    if g.min_wait >= 10**9:
        return f"never stop: best of {g.n_iter} steps"
    text = f"wait max({g.min_wait:g}, {g.relative:g} x best)"
    if g.tol:
        text += f", tol {g.tol:g}"
    return text + (f", n_iter {g.n_iter:g}" if g.n_iter != 3000 else "")


def markdown(name, group, n) -> str:
    lines = [f"**{name}** ({n} data sets; paired: minus the default rule, same trajectories)", "",
             "| rule | √PEHE within | √PEHE out | paired out | abs. ATE error | paired ATE "
             "| 95% coverage | steps (mean / median) | longest of 25 |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for g in group.itertuples():
        lines.append(
            f"| {_rule(g)} | {g.within:.3f} | {g.out:.3f} ± {g.out_se:.3f} | "
            f"{g.paired_out:+.3f} ± {g.paired_out_se:.3f} | {g.ate_err:.4f} | "
            f"{g.paired_ate:+.4f} ± {g.paired_ate_se:.4f} | {g.coverage:.3f} | "
            f"{g.steps_mean:.0f} / {g.steps_median:.0f} | {g.stack25_max:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
