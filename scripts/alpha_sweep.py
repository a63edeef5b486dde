"""CFR-Wass on IHDP realizations 1..R for several values of alpha, all in one stack.

    python scripts/alpha_sweep.py 10 0,0.01,0.05,0.2        # R=10 realizations, 4 alphas
    python scripts/alpha_sweep.py 10 0.3,1.0 '{"n_iter": 3000}'   # optional CFRConfig overrides

Protocol: ihdp_split(747, seed=r); fit on the within-sample units with a stratified 30%
validation split (seed r), outcome standardised per realization; sqrt(PEHE) within-sample and on
the test units. Every (alpha, realization) pair is one model of a single train_cfr stack.
"""

import json
import sys
import time

import numpy as np
import torch
from sklearn.model_selection import train_test_split

from dowhy_cfr.core import CFRConfig, predict, train_cfr
from dowhy_cfr.datasets import ihdp_split, load_ihdp

torch.set_num_threads(1)
R = int(sys.argv[1])
alphas = [float(a) for a in sys.argv[2].split(",")]
extra = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
ds = [load_ihdp(r) for r in range(1, R + 1)]
sp = [ihdp_split(747, seed=r) for r in range(1, R + 1)]
X, T = ds[0].x, ds[0].t.astype(int)
xs = X.std(0)
x = torch.tensor((X - X.mean(0)) / np.where(xs > 0, xs, 1), dtype=torch.float32)
ys, tr, va, ysd, al, meta = [], [], [], [], [], []
for a in alphas:
    for r, (d, s) in enumerate(zip(ds, sp)):
        w = s.within
        m, sd = d.yf[w].mean(), d.yf[w].std()
        a_i, b_i = train_test_split(w, test_size=0.3, stratify=T[w], random_state=r)
        ys.append((d.yf - m) / sd)
        ysd.append(sd)
        tr.append(a_i)
        va.append(b_i)
        al.append(a)
        meta.append((a, r))
k = len(al)
t0 = time.time()
res = train_cfr(x.expand(k, -1, -1), torch.tensor(T).expand(k, -1),
                torch.tensor(np.stack(ys), dtype=torch.float32),
                train_idx=torch.tensor(np.stack(tr)), val_idx=torch.tensor(np.stack(va)),
                config=CFRConfig(**extra), seeds=list(range(k)), alpha=al, per_model_data=True)
elapsed = time.time() - t0
out = predict(res.net, x).double().numpy()
rows = {}
for i, (a, r) in enumerate(meta):
    d, s = ds[r], sp[r]
    te = (out[i, 1] - out[i, 0]) * ysd[i]
    ite = d.mu1 - d.mu0
    rows.setdefault(a, []).append((np.sqrt(np.mean((te[s.within] - ite[s.within]) ** 2)),
                                   np.sqrt(np.mean((te[s.test] - ite[s.test]) ** 2)),
                                   res.best_step[i]))
print("K", k, "time", round(elapsed), "s", extra)
for a, v in rows.items():
    v = np.array(v)
    print(f"alpha={a}: within {v[:, 0].mean():.3f} (med {np.median(v[:, 0]):.3f}) "
          f"out {v[:, 1].mean():.3f} (med {np.median(v[:, 1]):.3f}) "
          f"best {v[:, 2].astype(int).tolist()}")
