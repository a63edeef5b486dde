"""What n_ensemble does to sqrt(PEHE) on IHDP: n_ensemble=1 vs n_ensemble=5, realizations 1..R.

    python scripts/ensemble.py --realizations 10 --members 5

Protocol as in the IHDP benchmark: fit on ihdp_split(747, seed=r).within, sqrt(PEHE) within-sample
and on the test units; default CFR (CFR-Wass) settings; wall time per fit.
"""

import argparse
import time

import numpy as np
import torch

from dowhy_cfr import CFR
from dowhy_cfr.datasets import ihdp_split, load_ihdp


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--realizations", type=int, default=10)
    p.add_argument("--members", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    res = {1: [], args.members: []}
    secs = {1: 0.0, args.members: 0.0}
    for r in range(1, args.realizations + 1):
        d, s = load_ihdp(r), ihdp_split(747, seed=r)
        ite = d.mu1 - d.mu0
        for k in res:
            t0 = time.perf_counter()
            est = CFR(n_ensemble=k, random_state=r, verbose=0).fit(d.yf[s.within], d.t[s.within],
                                                                   X=d.x[s.within])
            secs[k] += time.perf_counter() - t0
            te = est.effect(d.x)
            res[k].append((np.sqrt(np.mean((te[s.within] - ite[s.within]) ** 2)),
                           np.sqrt(np.mean((te[s.test] - ite[s.test]) ** 2))))
        print(r, {k: np.round(v[-1], 3).tolist() for k, v in res.items()}, flush=True)
    for k, v in res.items():
        v = np.array(v)
        se = v.std(0, ddof=1) / np.sqrt(len(v))
        print(f"n_ensemble={k}: within {v[:, 0].mean():.3f} ± {se[0]:.3f} (median "
              f"{np.median(v[:, 0]):.3f}), out-of-sample {v[:, 1].mean():.3f} ± {se[1]:.3f} "
              f"(median {np.median(v[:, 1]):.3f}); {secs[k] / len(v):.1f} s per fit")


if __name__ == "__main__":
    main()
