"""Hybrid baseline for OCMB [B12]: the same order and candidate parents, one CI test per candidate parent.

"Order + regression" hybrids (e.g. the pruning step of CAM/SCORE-style methods) keep i -> j when X_i still
explains X_j given j's other candidate parents:

    keep i -> j  iff  i in CandPa[j]  and  X_i not _||_ X_j | X_{CandPa[j] \\ {i}}      (Fisher-z, level alpha)

which for Gaussian data is the t-test of i's coefficient in the OLS regression of X_j on CandPa[j]. Run on
OCMB's own stage-1 output (its order and ``cand_parents_``), it isolates what OCMB's Markov-blanket stage
adds: both methods see the same candidates, only the validation differs. When the order is topological
and CandPa[j] contains Pa(j), every non-parent candidate is a non-descendant of j, so with exact tests this
baseline is exact too; it differs from OCMB only through finite-sample errors and conditioning-set sizes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .ci import CITester, FisherZ


def ordered_regression(X: np.ndarray, cand_parents: Sequence[Sequence[int]], alpha: float = 0.01,
                       test=None) -> dict:
    """The hybrid baseline [B12]: one CI test of i -> j given CandPa[j] \\ {i} per candidate parent.

    Args:
        X: data (n_samples, n_variables).
        cand_parents: CandPa[j] for every j (e.g. ``OCMB(...).fit(X).cand_parents_``); must respect an order.
        alpha: Fisher-z level.
        test: optional CI test object with ``dependence(t, xs, S)`` (e.g. ``DSeparation``) instead of Fisher-z.

    Returns ``{"adj": (d, d) 0/1 matrix, "n_ci_tests": distinct tests, "max_cond_set": largest |S|}``.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_variables), got shape {X.shape}")
    d = X.shape[1]
    if len(cand_parents) != d:
        raise ValueError(f"cand_parents needs one entry per variable ({d}), got {len(cand_parents)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    tester = CITester(FisherZ(X, alpha) if test is None else test)
    adj = np.zeros((d, d), dtype=int)
    for j, cand in enumerate(cand_parents):
        cand = [int(i) for i in cand]
        if j in cand or any(not 0 <= i < d for i in cand):
            raise ValueError(f"cand_parents[{j}] must hold indices in 0..{d - 1} other than {j}, got {cand}")
        for i in cand:
            if tester.dependence(j, [i], [z for z in cand if z != i])[1][0]:
                adj[i, j] = 1
    return {"adj": adj, "n_ci_tests": tester.n_tests, "max_cond_set": tester.max_cond}
