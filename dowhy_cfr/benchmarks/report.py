"""Summaries and output files of the benchmarks: mean +- standard error in the paper's layout."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["n_iter_label", "summarize", "paper_table", "median_table", "wall_line", "write_outputs",
           "parse_range", "parse_choices"]


def n_iter_label(n_iter) -> str:
    """How a report names a run's step limit: the number given, else the estimator's default."""
    return "default (auto)" if n_iter is None else str(n_iter)


def parse_range(spec: str) -> list[int]:
    """``"1-100"`` -> 1..100; ``"1,5,9-11"`` -> [1, 5, 9, 10, 11]; ``"7"`` -> [7]."""
    out: list[int] = []
    for part in str(spec).split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            lo, hi = int(a), int(b)
            if hi < lo:
                raise ValueError(f"empty range {part!r}")
            out.extend(range(lo, hi + 1))
        else:
            out.append(int(part))
    if not out:
        raise ValueError(f"no numbers in {spec!r}")
    return out


def summarize(raw: pd.DataFrame, metrics: list[str], by: str = "method") -> pd.DataFrame:
    """Mean, standard error (sd / sqrt(n), ddof=1), median and count of each metric per ``by``.

    Returns one row per group, columns ``<metric>_mean``, ``<metric>_se``, ``<metric>_median``,
    ``n`` and ``time_s_mean`` (if ``time_s`` is present), groups in order of appearance.
    """
    rows = []
    for key, g in raw.groupby(by, sort=False):
        row = {by: key, "n": len(g)}
        for m in metrics:
            v = g[m].to_numpy(dtype=float)
            row[f"{m}_mean"] = float(np.mean(v))
            row[f"{m}_se"] = float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else np.nan
            row[f"{m}_median"] = float(np.median(v))
        if "time_s" in g:
            row["time_s_mean"] = float(g["time_s"].mean())
            row["time_s_total"] = float(g["time_s"].sum())
        rows.append(row)
    return pd.DataFrame(rows)


def _pm(mean: float, se: float, digits: int) -> str:
    if np.isnan(se):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def paper_table(summary: pd.DataFrame, columns: list[tuple[str, str, str]], *,
                digits: int = 2, by: str = "method") -> str:
    """Markdown table: one row per method, ``mean ± se`` per metric, as in the paper's tables.

    ``columns`` is a list of ``(group, label, metric)``, e.g. ``("within-sample", "√PEHE",
    "within_pehe")``; a last column gives the mean wall time per dataset.
    """
    header1 = [by] + [f"{grp}: {label}" for grp, label, _ in columns] + ["time / dataset (s)"]
    lines = ["| " + " | ".join(header1) + " |", "|" + "---|" * len(header1)]
    for _, row in summary.iterrows():
        cells = [str(row[by])]
        for _, _, m in columns:
            cells.append(_pm(row[f"{m}_mean"], row[f"{m}_se"], digits))
        cells.append(f"{row['time_s_mean']:.2f}" if "time_s_mean" in row else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def wall_line(walls: dict, workers: int) -> str:
    """One line with the end-to-end wall time of each method (``{method: seconds}``)."""
    parts = ", ".join(f"{m} {s:.0f} s" for m, s in walls.items())
    return (f"Wall time per method, all datasets, {workers} worker process(es): {parts}.")


def median_table(summary: pd.DataFrame, metrics: list[tuple[str, str]], *, digits: int = 2,
                 by: str = "method") -> str:
    """Markdown table of medians (heavy-tailed realizations dominate the means on IHDP)."""
    header = [by] + [label for label, _ in metrics]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in summary.iterrows():
        lines.append("| " + " | ".join([str(row[by])] + [f"{row[f'{m}_median']:.{digits}f}"
                                                         for _, m in metrics]) + " |")
    return "\n".join(lines)


def write_outputs(out_dir: str | os.PathLike | None, name: str, raw: pd.DataFrame,
                  summary: pd.DataFrame, markdown: str) -> dict[str, Path]:
    """Write ``<name>_raw.csv``, ``<name>_summary.csv`` and ``<name>.md`` into ``out_dir``.

    Returns the paths written (empty if ``out_dir`` is None).
    """
    if out_dir is None:
        return {}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "raw": out / f"{name}_raw.csv",
        "summary": out / f"{name}_summary.csv",
        "markdown": out / f"{name}.md",
    }
    raw.to_csv(paths["raw"], index=False)
    summary.to_csv(paths["summary"], index=False)
    paths["markdown"].write_text(markdown + "\n", encoding="utf-8")
    return paths


def parse_choices(value: str, options, what: str, aliases: dict | None = None) -> list[str]:
    """Comma-separated names from ``options`` (case-insensitive, ``aliases`` allowed) or
    ``'all'``, for the command-line options; unknown names raise ``ArgumentTypeError``."""
    import argparse

    if value.strip().lower() == "all":
        return list(options)
    lookup = {o.lower(): o for o in options}
    lookup.update(aliases or {})
    out = []
    for name in value.split(","):
        key = name.strip().lower()
        if key not in lookup:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {name.strip()!r}; choose from {', '.join(options)} or 'all'")
        out.append(lookup[key])
    if not out:
        raise argparse.ArgumentTypeError(f"no {what} given")
    return out
