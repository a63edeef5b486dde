"""Training from Parquet files larger than the memory the fit is allowed to use.

    python scripts/parquet_stream.py --rows 5000000 --n-iter 3000

Writes ``--rows`` units of the Nie & Wager (2021) setup A design (see ``scaling.py``; d = 50
float32 covariates) to ``--dir`` as Parquet in row groups of ``--group`` rows, generated group
by group so the writer never holds the table either. Then, in a fresh subprocess (so that peak
resident memory is the fit's own), ``CFR.fit_chunks`` trains from
``dowhy_cfr.streaming.parquet_chunks`` with a held-out in-memory validation set, and tau(x) is
predicted for a separate in-memory test set. Reported: file size, the size the covariates would
take as one float32 array, the fit's peak RSS, wall times and the test sqrt(PEHE).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaling import nie_wager_a  # noqa: E402

D = 50


def write(path: Path, rows: int, group: int, seed: int = 0) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = ["y", "t"] + [f"x{j}" for j in range(D)]
    schema = pa.schema([("y", pa.float32()), ("t", pa.int8())]
                       + [(f"x{j}", pa.float32()) for j in range(D)])
    with pq.ParquetWriter(path, schema) as writer:
        for i, start in enumerate(range(0, rows, group)):
            n = min(group, rows - start)
            X, T, Y, _ = nie_wager_a(n, d=D, seed=[seed, i])
            cols = [Y.astype(np.float32), T.astype(np.int8)] + [
                X[:, j].astype(np.float32) for j in range(D)]
            writer.write_table(pa.Table.from_arrays(cols, names=names), row_group_size=n)


def fit(path: Path, n_iter: int, threads: int, n_val: int) -> dict:
    import resource

    import numpy as np
    import torch

    from dowhy_cfr import CFR
    from dowhy_cfr.streaming import parquet_chunks

    torch.set_num_threads(threads)
    Xv, Tv, Yv, _ = nie_wager_a(n_val, d=D, seed=[1, 0])
    Xt, _, _, tau_t = nie_wager_a(n_val, d=D, seed=[2, 0])
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    est = CFR(n_iter=n_iter, random_state=0, verbose=0).fit_chunks(
        parquet_chunks(path, y="y", t="t"), validation=(Yv, Tv, Xv))
    t_fit = time.perf_counter() - t0
    tau_hat = est.effect(Xt)
    return {
        "fit_s": round(t_fit, 1), "n_steps": int(est.n_iter_),
        "best_step": int(est.best_iteration_[0]),
        "test_sqrt_pehe": round(float(np.sqrt(np.mean((tau_hat - tau_t) ** 2))), 4),
        "test_sd_tau": round(float(np.std(tau_t)), 4),
        "rss_before_fit_mb": round(rss0),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--group", type=int, default=250_000, help="rows per row group")
    p.add_argument("--n-iter", type=int, default=3000)
    p.add_argument("--n-val", type=int, default=20_000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dir", default="scripts/out/parquet")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        print(json.dumps(fit(Path(args.child), args.n_iter, args.threads, args.n_val)))
        return
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"train_{args.rows}.parquet"
    t0 = time.perf_counter()
    if not path.exists():
        write(path, args.rows, args.group)
    t_write = time.perf_counter() - t0
    res = subprocess.run([sys.executable, __file__, "--child", str(path), "--n-iter",
                          str(args.n_iter), "--threads", str(args.threads), "--n-val",
                          str(args.n_val)], capture_output=True, text=True)
    if res.returncode != 0:
        sys.stderr.write(res.stderr)
        sys.exit(res.returncode)
    result = json.loads(res.stdout.strip().splitlines()[-1])
    result.update({
        "rows": args.rows, "d": D, "row_group": args.group, "write_s": round(t_write, 1),
        "file_mb": round(os.path.getsize(path) / 2**20),
        "covariates_as_float32_mb": round(args.rows * D * 4 / 2**20),
        "threads": args.threads,
    })
    print(json.dumps(result))


if __name__ == "__main__":
    main()
