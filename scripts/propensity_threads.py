"""Wall time of the default propensity cross-fit on one BLAS/OpenMP thread against the machine's
default, interleaved in one process (6 repeats, medians), at IHDP size and at 2,000 units.
``cross_fit_propensity`` limits itself to one thread up to ``debiased.ONE_THREAD_UNITS`` units;
the script moves that bound to compare both settings.

    python scripts/propensity_threads.py

Quoted in docs/debiased.md ("One thread for the propensity").
"""
import time

import numpy as np
from dowhy_cfr import debiased
from dowhy_cfr.datasets import load_ihdp_many
from dowhy_cfr.debiased import cross_fit_propensity


def main(repeats: int = 6) -> None:
    ihdp = load_ihdp_many([1])
    rng = np.random.default_rng(0)
    x2 = rng.normal(size=(2000, 10))
    t2 = (rng.random(2000) < 1 / (1 + np.exp(-x2[:, 0]))).astype(int)
    for x, t in ((np.ascontiguousarray(ihdp["x"][0]), ihdp["t"][0].astype(int)), (x2, t2)):
        cross_fit_propensity(None, x, t, n_arms=2)  # warm-up
        seconds = {"one thread": [], "default threads": []}
        for rep in range(repeats):
            for label, bound in (("one thread", len(x)), ("default threads", 0)):
                debiased.ONE_THREAD_UNITS = bound
                start = time.perf_counter()
                cross_fit_propensity(None, x, t, n_arms=2, random_state=rep)
                seconds[label].append(time.perf_counter() - start)
        print(len(x), "units:", {k: round(float(np.median(v)), 3) for k, v in seconds.items()})


if __name__ == "__main__":
    main()
