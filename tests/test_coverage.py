"""End to end: does the default ATE interval cover the population ATE at its nominal 95%?

K = 300 independent small data sets of the confounded design of ``helpers.make_confounded``
(n = 400; x ~ N(0, I_5), P(T = 1 | x) = sigmoid(1.5 x0), tau(x) = 1 + x1, so the population ATE
is E[tau] = 1 exactly; mu0 = 2 x0 + x2, noise sd 0.5) are fitted in one stacked pass
(``fit_stacked``), and each fit's default interval ``ate_interval()`` (the analytic AIPW interval
over its fitted units, ``debias="aipw"``) is checked against 1.

What is the default here and what is not, to keep the test near a minute on one core:

* the training is the default's: ``n_iter="auto"`` (1,500 steps at n = 400, early stopping),
  batch 100, alpha 0.05, learning rate and decay, validation split;
* the network is ``benchmarks.methods.TINY_NET`` (1 x 20 representation, 1 x 10 heads) instead
  of 3 x 200 / 3 x 100: measured on the first 20 data sets, the default architecture's
  estimates had the same bias (0.034) and standard errors (0.086 vs 0.088) as TINY_NET's;
* the IPM is linear MMD instead of Wasserstein (half the time): on the same 300 data sets
  Wasserstein gave coverage 0.913, bias 0.022, sd 0.094, mean standard error 0.088; MMD 0.900,
  0.028, 0.094, 0.088;
* the propensity is the default's logistic candidate (standardised covariates, L2 logistic
  regression, C = 1) rather than the default's choice between it and boosting, whose 300
  cross-fittings would cost more than the networks; on this logistic design the default kept
  the logistic model on 30 of 30 data sets measured.

Measured (this configuration, CPU time 47 s single-threaded on a shared 2-core machine): coverage
0.900 of the population ATE; mean AIPW estimate 1.028 (bias 0.028, from the in-sample heads: the
plug-in's bias is 0.059), sd of the estimates 0.094 against a mean standard error of 0.088.
"""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from dowhy_cfr import CFR
from dowhy_cfr.benchmarks.methods import TINY_NET
from helpers import make_confounded

K, N = 300, 400
POPULATION_ATE = 1.0  # E[1 + x1] with x1 ~ N(0, 1)
NOMINAL = 0.95
#: binomial (Monte Carlo) standard error of the coverage of K intervals at nominal coverage
MC_SE = np.sqrt(NOMINAL * (1 - NOMINAL) / K)  # 0.0126
#: nominal +- 2 Monte Carlo standard errors: [0.925, 0.975]. A procedure with 95% coverage lands
#: here with probability 0.95; the target of the fix is 0.93-0.97, and today's 0.900 is 4 SE low.
BAND = (NOMINAL - 2 * MC_SE, NOMINAL + 2 * MC_SE)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="under-coverage of in-sample heads at small n, issue #29 "
                                       "defect 4 (measured coverage 0.900 of the population ATE)")
def test_default_ate_interval_covers_the_population_ate():
    data = [make_confounded(n=N, seed=k) for k in range(K)]
    propensity = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000))
    template = CFR(**TINY_NET, ipm="mmd2_lin", model_propensity=propensity, verbose=0)
    fits = template.fit_stacked([d[2] for d in data], [d[1] for d in data],
                                X=[d[0] for d in data], seeds=np.arange(K))
    intervals = np.array([f.ate_interval() for f in fits])  # alpha=0.05
    assert intervals.shape == (K, 2) and np.all(intervals[:, 0] < intervals[:, 1])
    covered = (intervals[:, 0] <= POPULATION_ATE) & (POPULATION_ATE <= intervals[:, 1])
    assert BAND[0] <= covered.mean() <= BAND[1], covered.mean()
