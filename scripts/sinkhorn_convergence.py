"""Measurement only (issue 45, item 2; docs/parameters.md, item 39): how far the Wasserstein term
the members train with (Sinkhorn truncated at ``wass_iterations``) is from the converged entropic
distance, at the initial weights and on the fitted members' representations.

For each design, one default CFR fit (n = 1,500, seed 0, the realistic benchmark's protocol);
then, five times, a batch of 100 fitted units and one member's representation of them (at its
initial weights and as fitted): the Wasserstein term after each count of iterations as a share of
its value after 1,000, and the relative distance ``|g_k - g_1000| / |g_1000|`` of its gradient
with respect to the representation. Prints the means over the five batches. The batches come
from one random stream over the designs in the order given, so docs/parameters.md's figures are
those of the command below.

    python scripts/sinkhorn_convergence.py nmes-smooth,hi-categorical,cps-heavy,lalonde-linear
"""
import sys
import warnings

import numpy as np
import torch

from dowhy_cfr.core.ipm import wasserstein

from crossfit_compare import fit_realistic  # this script's folder is on sys.path

warnings.simplefilter("ignore")

COUNTS, CONVERGED = (5, 10, 30), 1000


def term_and_gradient(phi0: torch.Tensor, t: torch.Tensor, n_iter: int):
    phi = phi0.clone().requires_grad_(True)
    value = wasserstein(phi, t, n_iter=n_iter)
    value.backward()
    return float(value), phi.grad.clone()


def main(designs: list[str]) -> None:
    rng = np.random.default_rng(0)
    print(f"share of the converged value / relative gradient distance after {COUNTS} iterations")
    for design in designs:
        est, data, _ = fit_realistic(design, 1500, 0, {})
        fitted = est.fitted_
        xw = fitted.preprocessing.x(fitted.columns.block("X", data.X))
        for at_init in (True, False):
            shares, distances = [], []
            for rep in range(5):
                rows = rng.choice(len(xw), 100, replace=False)
                member = rep % fitted.members.n_models
                phi0 = torch.as_tensor(np.asarray(
                    fitted.representation(xw[rows], member, at_init=at_init)), dtype=torch.float32)
                t = torch.as_tensor(np.asarray(data.T)[rows], dtype=torch.float32)
                ref_value, ref_grad = term_and_gradient(phi0, t, CONVERGED)
                runs = [term_and_gradient(phi0, t, k) for k in COUNTS]
                shares.append([v / ref_value for v, _ in runs])
                distances.append([float((g - ref_grad).norm() / ref_grad.norm()) for _, g in runs])
            print(f"{design:16s} {'initial' if at_init else 'fitted ':8s} "
                  f"{np.round(np.mean(shares, 0), 3)} / {np.round(np.mean(distances, 0), 3)}",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1].split(","))
