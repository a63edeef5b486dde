"""Re-evaluate the AIPW ATE of saved fits (the ``.npz`` files of ``scripts/debias_variants.py``)
with the estimator's default propensity, without refitting the networks.

Per design: mean |ATE error| of the plug-in and of the AIPW estimate, coverage of the 95%
interval, mean width. Usage::

    python scripts/debias_offline.py "scripts/out/dv_*.npz"
"""

import glob
import sys
import warnings

import numpy as np
import pandas as pd

from dowhy_cfr.debiased import average_effect, cross_fit_propensity
from dowhy_cfr.fitting import draw_seeds


def main():
    rows = []
    for f in sorted(glob.glob(sys.argv[1])):
        z = np.load(f)
        tag = f.split(".")[-2]  # e.g. A0single
        design, seed = tag[0], int(tag[1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e = cross_fit_propensity(None, z["x"], z["arms"], n_arms=2,
                                     random_state=draw_seeds(seed, 1)[0], min_propensity=0.05)
        r = average_effect(z["y"], z["arms"], z["mu"], e)
        lo, hi = r.interval(0.05)
        rows.append(dict(design=design, seed=seed, plugin=abs(r.plugin - z["ate_true"]),
                         plugin_signed=r.plugin - z["ate_true"],
                         aipw=abs(r.estimate - z["ate_true"]),
                         aipw_signed=r.estimate - z["ate_true"],
                         covered=lo <= z["ate_true"] <= hi, width=hi - lo))
    df = pd.DataFrame(rows)
    print(df.round(3).to_string(index=False))
    print(df.groupby("design")[["plugin", "aipw", "covered", "width"]].agg(["mean", "sem"])
          .round(3).to_string())


if __name__ == "__main__":
    main()
