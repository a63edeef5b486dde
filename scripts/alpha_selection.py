"""Choosing alpha without ground truth: how often each validation criterion picks the
oracle-best alpha, and the weight_decay rescaling, on IHDP and the synthetic designs A-E.

    python scripts/alpha_selection.py run ihdp --realizations 1-100 --out ihdp.csv
    python scripts/alpha_selection.py run synthetic --designs A,B,C,D,E --seeds 0-19 --out syn.csv
    python scripts/alpha_selection.py summary ihdp.csv syn.csv [--grid 0.01,0.05,0.2]

The measurements quoted in ``docs/parameters.md`` ("Choosing alpha without ground truth") are in
``scripts/results/alpha_selection/*.csv.gz``: ``summary scripts/results/alpha_selection/*``.

Protocol (``run``). A *task* is one data set: an IHDP realization r (``ihdp_split(747, seed=r)``;
fitted on the within-sample units, judged on the 75 test units) or a synthetic design/seed
(n = 2000 fitted units, 2000 fresh test units from the same design; design E's covariates are
``[X | W]``). Every task gets a stratified 30% validation split of its fitted units (seed of the
task) and one seed for the networks, shared by all its candidates (common random numbers). The
candidates are every alpha of ``--grid`` with ``weight_decay`` as configured (``wd=fixed``) and,
for the alphas of ``--wd-alphas``, ``weight_decay / var(y)`` (``wd=rescaled``: the paper's
strength relative to the loss, since the loss is computed on the standardised outcome). All
candidates of all tasks train in ONE stacked pass of ``dowhy_cfr.core.train_cfr``.

For every candidate the script records the true sqrt(PEHE) on the test units (the oracle) and on
the fitted units, and the three criteria of ``dowhy_cfr.metrics.selection_scores`` on the
candidate's validation units (nearest-neighbour PEHE, R-loss, DR pseudo-outcome loss), the last
two with two nuisance learners (``hgb``: gradient boosting + logistic regression, the package's
default; ``lin``: ridge + logistic regression), cross-fitted over the task's fitted units.

``summary`` picks, per task and criterion, the grid value with the lowest criterion, and reports
how often that is the oracle-best alpha of the grid, the mean sqrt(PEHE) of the picks, of the
oracle and of alpha = 0.05, the paired difference to alpha = 0.05 (mean +- standard error), and
the weight_decay comparison. ``--grid`` restricts the choice to a sub-grid of the one run.

On a machine without EconML (e.g. a GPU machine), the IHDP covariates come from ``--ihdp-cache``
(an .npz written by ``python scripts/alpha_selection.py cache-ihdp FILE`` where EconML is
installed), and only the package's sub-modules are imported.
"""

from __future__ import annotations

import argparse
import multiprocessing
import pathlib
import sys
import time
import types

import numpy as np
import pandas as pd
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
try:
    import dowhy_cfr  # noqa: F401
except ImportError:  # no EconML/DoWhy here: load the sub-packages without the estimator
    sys.modules.pop("dowhy_cfr", None)
    _pkg = types.ModuleType("dowhy_cfr")
    _pkg.__path__ = [str(ROOT / "dowhy_cfr")]
    sys.modules["dowhy_cfr"] = _pkg

from sklearn.linear_model import LogisticRegression, RidgeCV  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from dowhy_cfr.core import CFRConfig, train_cfr  # noqa: E402
from dowhy_cfr.metrics import cross_fit_nuisances, selection_scores  # noqa: E402

CRITERIA = ("nn_pehe", "r_loss_hgb", "dr_loss_hgb", "r_loss_lin", "dr_loss_lin")


def _range(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


# ----------------------------------------------------------------------------------- tasks
def ihdp_tasks(realizations, cache=None):
    if cache and pathlib.Path(cache).is_file():
        d = dict(np.load(cache))
        index = {int(r): i for i, r in enumerate(d["realization"])}
        rows = [index[r] for r in realizations]
        x, t = d["x"], d["t"]
        yf, mu0, mu1 = d["yf"][rows], d["mu0"][rows], d["mu1"][rows]
    else:
        from dowhy_cfr.datasets import load_ihdp_many

        d = load_ihdp_many(realizations)
        x, t, yf, mu0, mu1 = d["x"][0], d["t"][0], d["yf"], d["mu0"], d["mu1"]
    from dowhy_cfr.datasets.ihdp import ihdp_split

    tasks = []
    for i, r in enumerate(realizations):
        s = ihdp_split(747, seed=r)
        tasks.append(dict(name=f"ihdp{r}", data="ihdp", x=np.asarray(x, float),
                          t=np.asarray(t, int), y=yf[i], tau=mu1[i] - mu0[i],
                          fit=np.sort(s.within), test=np.sort(s.test), seed=r))
    return tasks


def synthetic_tasks(designs, seeds, n, n_test):
    from dowhy_cfr.datasets.synthetic import simulate

    tasks = []
    for design in designs:
        for seed in seeds:
            a = simulate(design, n + n_test, random_state=1000 * seed + ord(design))
            x = a.x if a.w is None else np.hstack([a.x, a.w])
            tasks.append(dict(name=f"{design}{seed}", data=f"synthetic-{design}", x=x, t=a.t,
                              y=a.y, tau=a.tau, fit=np.arange(n), test=np.arange(n, n + n_test),
                              seed=seed))
    return tasks


# ------------------------------------------------------------------------------------- run
def _nuisances(task):
    f = task["fit"]
    x, y, t = task["x"][f], task["y"][f], task["t"][f]
    hgb = cross_fit_nuisances(x, y, t, random_state=task["seed"])
    lin = cross_fit_nuisances(
        x, y, t, random_state=task["seed"],
        outcome_model=make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))),
        propensity_model=make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)))
    return hgb, lin


def run(tasks, grid, wd_alphas, overrides, device, n_jobs):
    config = CFRConfig(**overrides).validate()
    t0 = time.time()
    with multiprocessing.get_context("fork").Pool(n_jobs) as pool:  # workers inherit modules
        nuis = pool.map(_nuisances, tasks)
    print(f"nuisances: {time.time() - t0:.0f} s", flush=True)
    cands, xs, ts, ys, tr, va, seeds, alphas, wds = [], [], [], [], [], [], [], [], []
    for i, task in enumerate(tasks):
        f = task["fit"]
        x_mean, x_sd = task["x"][f].mean(0), task["x"][f].std(0)
        x_std = (task["x"] - x_mean) / np.where(x_sd > 0, x_sd, 1.0)
        y_mean, y_sd = task["y"][f].mean(), task["y"][f].std()
        a, b = train_test_split(np.arange(len(f)), test_size=config.val_fraction,
                                stratify=task["t"][f], random_state=task["seed"])
        settings = [(al, "fixed", config.weight_decay) for al in grid]
        settings += [(al, "rescaled", config.weight_decay / y_sd**2) for al in wd_alphas]
        for al, mode, wd in settings:
            cands.append(dict(task=i, alpha=al, wd=mode, wd_value=wd, y_mean=y_mean,
                              y_sd=y_sd, val_pos=b))
            xs.append(x_std)
            ts.append(task["t"])
            ys.append((task["y"] - y_mean) / y_sd)
            tr.append(f[a])
            va.append(f[b])
            seeds.append(task["seed"])
            alphas.append(al)
            wds.append(wd)
    k = len(cands)
    x_t = torch.as_tensor(np.stack(xs), dtype=torch.float32)
    t1 = time.time()
    res = train_cfr(x_t, torch.as_tensor(np.stack(ts)), torch.as_tensor(np.stack(ys),
                                                                         dtype=torch.float32),
                    train_idx=torch.as_tensor(np.stack(tr)), val_idx=torch.as_tensor(np.stack(va)),
                    config=config, seeds=seeds, alpha=alphas, weight_decay=wds,
                    per_model_data=True, device=device)
    train_s = time.time() - t1
    print(f"K={k} models trained in one stack: {train_s:.0f} s on {device}", flush=True)
    res.net.eval()
    taus = []
    with torch.no_grad():  # all models at once, a chunk of units at a time
        for start in range(0, x_t.shape[1], 512):
            _, out = res.net(x_t[:, start:start + 512].to(device))
            taus.append((out[:, 1] - out[:, 0]).double().cpu().numpy())
    taus = np.concatenate(taus, axis=1)
    rows = []
    for j, c in enumerate(cands):
        task = tasks[c["task"]]
        tau = taus[j] * c["y_sd"]
        f, te = task["fit"], task["test"]
        row = dict(task=task["name"], data=task["data"], alpha=c["alpha"], wd=c["wd"],
                   wd_value=c["wd_value"], var_y=c["y_sd"] ** 2, best_step=int(res.best_step[j]),
                   failed=bool(res.failed[j]),
                   pehe_test=float(np.sqrt(np.mean((tau[te] - task["tau"][te]) ** 2))),
                   pehe_fit=float(np.sqrt(np.mean((tau[f] - task["tau"][f]) ** 2))),
                   ate_err_test=float(abs(tau[te].mean() - task["tau"][te].mean())))
        x_f, y_f, t_f = task["x"][f], task["y"][f], task["t"][f]
        for label, nu in zip(("hgb", "lin"), nuis[c["task"]]):
            s = selection_scores(tau[f], c["val_pos"], x_f, y_f, t_f, nu)
            row.update({f"r_loss_{label}": s["r_loss"], f"dr_loss_{label}": s["dr_loss"]})
            row["nn_pehe"] = s["nn_pehe"]
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["train_seconds"] = train_s
    return out


# --------------------------------------------------------------------------------- summary
def summary(df: pd.DataFrame, grid=None, default=0.05) -> pd.DataFrame:
    """Per data set and criterion: share of tasks where the pick is the oracle-best grid alpha,
    mean test sqrt(PEHE) of the picks, and the oracle's and the default's."""
    fixed = df[df.wd == "fixed"].reset_index(drop=True)
    if grid is not None:
        fixed = fixed[np.isclose(fixed.alpha.values[:, None], np.asarray(grid)[None]).any(1)]
    rows = []
    for data, g in fixed.groupby("data", sort=False):
        per_task = g.groupby("task", sort=False)
        oracle_idx = per_task.pehe_test.idxmin()
        oracle = g.loc[oracle_idx].set_index("task")
        dflt = g[np.isclose(g.alpha, default)].set_index("task")
        row = dict(data=data, tasks=len(oracle), oracle=oracle.pehe_test.mean(),
                   **{f"alpha={default}": dflt.pehe_test.mean()})
        for crit in CRITERIA:
            pick = g.loc[per_task[crit].idxmin()].set_index("task")
            row[f"{crit} hit"] = float((pick.alpha == oracle.alpha).mean())
            row[f"{crit} pehe"] = pick.pehe_test.mean()
        rows.append(row)
    return pd.DataFrame(rows)


def paired(df: pd.DataFrame, grid=None, default=0.05) -> pd.DataFrame:
    """Mean paired difference (pick - alpha=default) of the test sqrt(PEHE), +- its standard
    error, per criterion, for IHDP and for all synthetic tasks together."""
    fixed = df[df.wd == "fixed"].reset_index(drop=True)
    if grid is not None:
        fixed = fixed[np.isclose(fixed.alpha.values[:, None], np.asarray(grid)[None]).any(1)]
    fixed = fixed.assign(group=np.where(fixed.data == "ihdp", "ihdp", "synthetic"))
    rows = []
    for group, g in fixed.groupby("group"):
        base = g[np.isclose(g.alpha, default)].set_index("task").pehe_test
        row = {"group": group, "tasks": base.size}
        for crit in CRITERIA:
            pick = g.loc[g.groupby("task")[crit].idxmin()].set_index("task").pehe_test
            d = pick - base.loc[pick.index]
            row[crit] = f"{d.mean():+.3f} ± {d.std() / np.sqrt(d.size):.3f}"
        rows.append(row)
    return pd.DataFrame(rows)


def weight_decay_table(df: pd.DataFrame) -> pd.DataFrame:
    """Mean test/fitted sqrt(PEHE) per data set, alpha and weight_decay mode (paired tasks)."""
    alphas = df[df.wd == "rescaled"].alpha.unique()
    sub = df[df.alpha.isin(alphas)]
    return (sub.groupby(["data", "alpha", "wd"]).agg(tasks=("task", "size"),
                                                      pehe_test=("pehe_test", "mean"),
                                                      pehe_fit=("pehe_fit", "mean"),
                                                      ate_err=("ate_err_test", "mean"),
                                                      best_step=("best_step", "median"))
            .reset_index())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("data", choices=["ihdp", "synthetic"])
    r.add_argument("--realizations", default="1-10")
    r.add_argument("--designs", default="A,B,C,D,E")
    r.add_argument("--seeds", default="0-3")
    r.add_argument("--n", type=int, default=2000)
    r.add_argument("--n-test", type=int, default=2000)
    r.add_argument("--grid", default="0,0.005,0.01,0.02,0.05,0.1,0.2,0.5,1")
    r.add_argument("--wd-alphas", default="0,0.05")
    r.add_argument("--config", default="{}", help="CFRConfig overrides as JSON")
    r.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--n-jobs", type=int, default=1)
    r.add_argument("--ihdp-cache", default=None)
    r.add_argument("--out", required=True)
    s = sub.add_parser("summary")
    s.add_argument("files", nargs="+")
    s.add_argument("--grid", default=None)
    c = sub.add_parser("cache-ihdp")
    c.add_argument("file")
    c.add_argument("--realizations", default="1-100")
    a = p.parse_args(argv)
    if a.cmd == "cache-ihdp":
        from dowhy_cfr.datasets import load_ihdp_many

        d = load_ihdp_many(_range(a.realizations))
        np.savez_compressed(a.file, x=d["x"][0], t=d["t"][0], yf=d["yf"], mu0=d["mu0"],
                            mu1=d["mu1"], realization=d["realization"])
        return
    if a.cmd == "summary":
        import json  # noqa: F401

        df = pd.concat([pd.read_csv(f) for f in a.files], ignore_index=True)
        grid = None if a.grid is None else [float(v) for v in a.grid.split(",")]
        pd.set_option("display.width", 250)
        pd.set_option("display.max_columns", 30)
        print(summary(df, grid).round(3).to_string(index=False))
        print()
        print(paired(df, grid).to_string(index=False))
        print()
        print(weight_decay_table(df).round(3).to_string(index=False))
        return
    import json

    torch.set_num_threads(a.threads)
    grid = [float(v) for v in a.grid.split(",")]
    wd_alphas = [float(v) for v in a.wd_alphas.split(",")] if a.wd_alphas else []
    if a.data == "ihdp":
        tasks = ihdp_tasks(_range(a.realizations), a.ihdp_cache)
    else:
        tasks = synthetic_tasks(a.designs.split(","), _range(a.seeds), a.n, a.n_test)
    df = run(tasks, grid, wd_alphas, json.loads(a.config), a.device, a.n_jobs)
    df.to_csv(a.out, index=False)
    print(summary(df).round(3).to_string(index=False))
    print(weight_decay_table(df).round(3).to_string(index=False))


if __name__ == "__main__":
    main()
