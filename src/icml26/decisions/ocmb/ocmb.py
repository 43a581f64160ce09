"""OCMB: ordering-constrained Markov-blanket causal discovery [B12].

Two stages (paper: "Global Directional Priors with Local Statistical Validation for Scalable Causal
Discovery", ICML 2026):

1. an ordering backbone gives a topological order pi and parent scores P (see ``ordering.py``);
2. per node, a Markov blanket is validated by CI tests *only inside a small candidate set*:

   CandPa[j]  = top-K predecessors i of j in pi by P[i, j], keeping only P[i, j] >= tau
   CandCh[i]  = { j : i in CandPa[j] }
   CandNei[i] = CandPa[i] u CandCh[i] u ( u_{c in CandCh[i]} CandPa[c] )          (spouse closure)

   constrained IAMB for target T over CandNei[T]:
     forward:  add argmax_x dep(T; x | CMB) while that dependence is significant
     backward: drop x from CMB if T _||_ x | CMB \\ {x}
   symmetry 'delete': keep x in MB[T] only if T in MB[x] ('add': the union);

   orientation: x -> T iff x in MB[T], pi(x) < pi(T), x in CandPa[T], and (spouse pruning, ours)
                dep(T; x | E_T \\ {x}) with E_T = { z in MB[T] : pi(z) < pi(T) } (T's earlier blanket).

Why the pruning: a spouse s (s -> c <- T) that precedes T is in MB[T], and when tau = 0 pads CandPa[T] with
zero-score predecessors it can sit in CandPa[T]; the paper's rule would then orient s -> T. When pi is a
topological order, E_T holds only non-descendants of T and contains Pa(T), so by the local Markov property
T _||_ s | E_T \\ {s} for every non-parent s, while a true parent stays dependent on T given any set.
With a d-separation oracle and any topological order whose CandPa[T] contains Pa(T), OCMB is then exact.

Every conditioning set is a subset of CandNei[T] \\ {x}, so |S| <= |CandNei[T]| - 1 whatever the hub degree
(and <= ``max_cond_size`` when set). The estimator measures both the number of distinct CI tests and the
largest conditioning set actually used.
"""

from __future__ import annotations

import time
from numbers import Integral, Real
from typing import Callable

import networkx as nx
import numpy as np
from sklearn.base import BaseEstimator

from icml26.harness import validate as v

from .ci import CallableTest, CITester, DSeparation, FisherZ, KnnCMI, _check_not_collinear
from .ordering import check_order, eqvar_order, lingam_order, ols_parent_scores, oracle_order, random_order, stein_order

ORDERERS = ("eqvar", "lingam", "stein", "caps", "oracle", "random")
CI_TESTS = ("fisherz", "knn_cmi", "dsep")

# helper functions


def candidate_sets(order: np.ndarray, parent_scores: np.ndarray, max_parents: int = 10,
                   score_threshold: float = 0.0, spouse_closure: bool = True,
                   rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Ordering-constrained candidate sets [B12].

    Returns boolean matrices ``pa`` with pa[i, j] = (i in CandPa[j]) and ``nei`` with nei[i, x] =
    (x in CandNei[i]). Ties in the scores are broken at random (``rng``), as in the official code.
    """
    parent_scores = np.asarray(v.finite("parent_scores", parent_scores), dtype=float)
    if parent_scores.ndim != 2 or parent_scores.shape[0] != parent_scores.shape[1]:
        raise ValueError(f"parent_scores must be a square (d, d) array, got shape {parent_scores.shape}")
    d = parent_scores.shape[0]
    order = check_order(order, d)
    max_parents = v.positive_int("max_parents", max_parents)
    score_threshold = v.finite_number("score_threshold", score_threshold)
    if not isinstance(spouse_closure, (bool, np.bool_)):
        raise TypeError(f"spouse_closure must be True or False, got {spouse_closure!r}")
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)) or None, got {v.describe(rng)}")
    rng = np.random.default_rng(0) if rng is None else rng
    pos = np.empty(d, dtype=int)
    pos[order] = np.arange(d)
    allowed = (pos[:, None] < pos[None, :]) & (parent_scores >= score_threshold)
    tiebreak = rng.random((d, d))
    pa = np.zeros((d, d), dtype=bool)
    for j in range(d):
        cand = np.flatnonzero(allowed[:, j])
        top = cand[np.lexsort((tiebreak[cand, j], -parent_scores[cand, j]))[:max_parents]]
        pa[top, j] = True
    nei = pa.T | pa  # row i: CandPa[i] u CandCh[i]
    if spouse_closure:
        nei |= (pa.astype(np.int64) @ pa.T.astype(np.int64)) > 0  # i, s share a candidate child
    np.fill_diagonal(nei, False)
    return pa, nei


def constrained_iamb(target: int, candidates: np.ndarray, tester: CITester,
                     max_cond_size: int | None = None) -> list[int]:
    """IAMB for ``target`` searching only ``candidates`` [B12]; returns the blanket (insertion order)."""
    _check_tester(tester)
    if max_cond_size is not None:
        max_cond_size = v.non_negative_int("max_cond_size", max_cond_size)
    cmb: list[int] = []
    rest = [int(c) for c in candidates]
    limit = np.inf if max_cond_size is None else max_cond_size
    while rest and len(cmb) <= limit:  # forward: grow with the most dependent candidate
        strength, dependent = tester.dependence(target, rest, cmb)
        best = int(np.argmax(strength))
        if not dependent[best]:
            break
        cmb.append(rest.pop(best))
    for x in list(cmb):  # backward: shrink false positives
        others = [z for z in cmb if z != x]
        if not tester.dependence(target, [x], others, backward=True)[1][0]:
            cmb.remove(x)
    return cmb


def prune_spouses(adjacency: np.ndarray, blankets: list[np.ndarray], order: np.ndarray, tester: CITester,
                  max_cond_size: int | None = None) -> np.ndarray:
    """Keep x -> T only if dep(T; x | E_T \\ {x}), E_T = T's blanket members before T in ``order`` [B12, ours].

    Edges whose conditioning set would exceed ``max_cond_size`` are kept untested. Returns a new matrix.
    """
    _check_tester(tester)
    adjacency = np.asarray(adjacency)
    if adjacency.ndim != 2 or adjacency.shape[0] != adjacency.shape[1]:
        raise ValueError(f"adjacency must be a square (d, d) matrix, got shape {adjacency.shape}")
    d = adjacency.shape[0]
    order = check_order(order, d)
    if len(blankets) != d:
        raise ValueError(f"blankets needs one entry per variable ({d}), got {len(blankets)}")
    for t, b in enumerate(blankets):
        v.indices(f"blankets[{t}]", np.asarray(b, dtype=int), d)
    if max_cond_size is not None:
        max_cond_size = v.non_negative_int("max_cond_size", max_cond_size)
    pos = np.empty(len(order), dtype=int)
    pos[order] = np.arange(len(order))
    out = adjacency.copy()
    for t in range(len(order)):
        earlier = [int(z) for z in blankets[t] if pos[z] < pos[t]]
        for x in np.flatnonzero(adjacency[:, t]):
            S = [z for z in earlier if z != x]
            if max_cond_size is not None and len(S) > max_cond_size:
                continue
            if not tester.dependence(t, [int(x)], S)[1][0]:
                out[x, t] = 0
    return out


def _check_tester(tester) -> None:
    if not isinstance(tester, CITester):
        raise TypeError(f"tester must be a CITester (CITester(FisherZ(X)) for example), got {v.describe(tester)}")


def _check_X(X) -> np.ndarray:
    if isinstance(X, (str, bytes)) or not hasattr(X, "__len__"):
        raise TypeError(f"X must be a 2-D array-like of numbers, got {type(X).__name__}")
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise TypeError("X must hold numbers only (a 2-D float array of shape (n_samples, n_variables))") from None
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_variables), got shape {X.shape}")
    n, d = X.shape
    if d < 2:
        raise ValueError(f"X needs at least 2 variables (columns), got {d}")
    if not np.all(np.isfinite(X)):
        bad = np.unique(np.nonzero(~np.isfinite(X))[1]).tolist()
        raise ValueError(f"X contains NaN or inf (columns {bad[:10]}); impute or drop those rows first")
    if n <= d:
        raise ValueError(f"OCMB needs more samples than variables (n_samples > n_variables, so that the "
                         f"correlation matrix is invertible); got n={n}, d={d}. Collect more samples or "
                         "select fewer variables.")
    const = np.flatnonzero(X.std(0) <= 1e-12 * np.maximum(1.0, np.abs(X).max(0))).tolist()
    if const:
        raise ValueError(f"columns {const[:10]} are constant; a constant variable has no causal signal and "
                         "makes the correlation matrix singular. Drop it before fitting.")
    _check_not_collinear(X)
    return X


# main class


class OCMB(BaseEstimator):
    """Ordering-constrained Markov-blanket causal discovery (scikit-learn style) [B12].

    Args:
        orderer: 'eqvar' | 'lingam' | 'stein' (alias 'caps') | 'oracle' (needs ``fit(..., true_adj=)``) |
            'random' | a callable ``f(X) -> order`` or ``-> (order, parent_scores)`` | an explicit order.
        ci_test: 'fisherz' (``alpha`` is a p-value level) | 'knn_cmi' (``alpha`` thresholds the CMI value,
            as in the official code) | 'dsep' (d-separation oracle on ``fit(..., true_adj=)``, for checking
            the algorithm) | a callable ``f(X, i, j, S) -> p-value``.
        max_parents: K, the size of CandPa.
        alpha: test level (Fisher-z / callable) or CMI threshold (kNN-CMI).
        k_mb: k of the kNN-CMI estimator.
        symmetry: 'delete' (x in MB[T] and T in MB[x]) or 'add' (either).
        spouse_closure: add the candidate parents of candidate children to CandNei.
        score_threshold: tau; candidates with P[i, j] < tau are never considered.
        score_threshold_quantile: if given (in [0, 1)), tau is this quantile of the nonzero parent scores
            instead (the official ``score_threshold_quantile``; it takes precedence over ``score_threshold``).
        max_cond_size: optional hard cap on |S| for every CI test.
        prune_spouses: drop x -> T when x is independent of T given T's other earlier blanket members (our
            fix for spouses padded into CandPa; ``False`` gives the paper's orientation rule as written).
        random_state: seed for the random orderer, DirectLiNGAM and tie-breaking.

    Attributes after ``fit``: ``order_``, ``parent_scores_``, ``cand_parents_`` (list of arrays),
    ``cand_neighbors_``, ``blankets_`` (list of arrays), ``adjacency_`` (d x d, adjacency_[i, j] = 1 for
    i -> j), ``n_ci_tests_`` (distinct (pair, conditioning set) tests), ``n_ci_calls_`` (all evaluations),
    ``max_cond_set_`` (largest conditioning set used), ``effective_tau_`` (the tau used),
    ``ci_scores_`` (d x d, symmetric: the largest test strength seen for each pair during the run, 0 for pairs
    never tested, as the official ``ci_scores_``; rank edges by it for AUPR), ``timings_``, ``n_features_in_``.
    """

    def __init__(self, orderer: str | Callable | np.ndarray = "eqvar", ci_test: str | Callable = "fisherz",
                 max_parents: int = 10, alpha: float = 0.01, k_mb: int = 5, symmetry: str = "delete",
                 spouse_closure: bool = True, score_threshold: float = 0.0, max_cond_size: int | None = None,
                 prune_spouses: bool = True, random_state: int | None = None,
                 score_threshold_quantile: float | None = None):
        self.orderer = orderer
        self.ci_test = ci_test
        self.max_parents = max_parents
        self.alpha = alpha
        self.k_mb = k_mb
        self.symmetry = symmetry
        self.spouse_closure = spouse_closure
        self.score_threshold = score_threshold
        self.max_cond_size = max_cond_size
        self.prune_spouses = prune_spouses
        self.random_state = random_state
        self.score_threshold_quantile = score_threshold_quantile

    # validation

    def _check_params(self, n: int) -> None:
        o = self.orderer
        if isinstance(o, str):
            if o not in ORDERERS:
                raise ValueError(f"unknown orderer {o!r}; choose one of {ORDERERS}, a callable or an order array")
        elif not (callable(o) or isinstance(o, (list, tuple, np.ndarray))):
            raise TypeError(f"orderer must be a name, a callable or an order array, got {type(o).__name__}")
        if isinstance(self.ci_test, str):
            if self.ci_test not in CI_TESTS:
                raise ValueError(f"unknown ci_test {self.ci_test!r}; choose one of {CI_TESTS} or a callable")
        elif not callable(self.ci_test):
            raise TypeError(f"ci_test must be a name or a callable, got {type(self.ci_test).__name__}")
        if not isinstance(self.max_parents, Integral) or self.max_parents < 1:
            raise ValueError(f"max_parents must be an int >= 1, got {self.max_parents!r}")
        if not isinstance(self.alpha, Real) or not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if not isinstance(self.k_mb, Integral) or not 1 <= self.k_mb < n - 1:
            raise ValueError(f"k_mb must be an int in [1, n_samples - 2], got {self.k_mb!r}")
        if self.symmetry not in ("delete", "add"):
            raise ValueError(f"symmetry must be 'delete' or 'add', got {self.symmetry!r}")
        if not isinstance(self.score_threshold, Real) or not np.isfinite(self.score_threshold):
            raise ValueError(f"score_threshold must be a finite number, got {self.score_threshold!r}")
        if self.max_cond_size is not None and (not isinstance(self.max_cond_size, Integral)
                                               or self.max_cond_size < 0):
            raise ValueError(f"max_cond_size must be None or an int >= 0, got {self.max_cond_size!r}")
        q = self.score_threshold_quantile
        if q is not None and (not isinstance(q, Real) or not 0 <= q < 1):
            raise ValueError(f"score_threshold_quantile must be None or in [0, 1), got {q!r}")
        for name in ("prune_spouses", "spouse_closure"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")

    def _ordering(self, X: np.ndarray, true_adj: np.ndarray | None, rng: np.random.Generator):
        d = X.shape[1]
        o = self.orderer
        if isinstance(o, (list, tuple, np.ndarray)):
            order = check_order(o, d)
            return order, ols_parent_scores(X, order)
        if callable(o):
            out = o(X)
            if isinstance(out, tuple) and len(out) == 2:
                order = check_order(out[0], d)
                P = np.asarray(out[1], dtype=float)
                if P.shape != (d, d) or not np.all(np.isfinite(P)):
                    raise ValueError(f"the orderer's parent scores must be a finite ({d}, {d}) array, "
                                     f"got shape {P.shape}")
                return order, P
            order = check_order(out, d)
            return order, ols_parent_scores(X, order)
        if o == "eqvar":
            return eqvar_order(X)
        if o == "lingam":
            return lingam_order(X, random_state=self.random_state)
        if o in ("stein", "caps"):
            return stein_order(X)
        if o == "oracle":
            if true_adj is None:
                raise ValueError("orderer='oracle' needs the true graph: call fit(X, true_adj=A)")
            return oracle_order(true_adj)
        return random_order(d, rng)

    # fit

    def fit(self, X, y=None, true_adj=None) -> "OCMB":
        """Learn the DAG of ``X`` (n_samples x n_variables). ``true_adj`` is only read by the oracle orderer
        and the 'dsep' test."""
        X = _check_X(X)
        n, d = X.shape
        self._check_params(n)
        if true_adj is not None:
            true_adj = np.asarray(true_adj)
            if true_adj.shape != (d, d):
                raise ValueError(f"true_adj must have shape ({d}, {d}), got {true_adj.shape}")
        if self.ci_test == "dsep" and true_adj is None:
            raise ValueError("ci_test='dsep' (the d-separation oracle) needs the true graph: call fit(X, true_adj=A)")
        rng = np.random.default_rng(self.random_state)
        timings = {}

        t0 = time.perf_counter()
        self.order_, self.parent_scores_ = self._ordering(X, true_adj, rng)
        timings["ordering"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        tau = self.score_threshold
        nonzero = self.parent_scores_[self.parent_scores_ > 0]
        if self.score_threshold_quantile is not None and nonzero.size:
            tau = float(np.quantile(nonzero, self.score_threshold_quantile))
        self.effective_tau_ = float(tau)
        pa, nei = candidate_sets(self.order_, self.parent_scores_, self.max_parents, tau,
                                 self.spouse_closure, rng)
        self.cand_parents_ = [np.flatnonzero(pa[:, j]) for j in range(d)]
        self.cand_neighbors_ = [np.flatnonzero(nei[i]) for i in range(d)]
        timings["candidates"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        if self.ci_test == "fisherz":
            test = FisherZ(X, self.alpha)
        elif self.ci_test == "knn_cmi":
            test = KnnCMI(X, self.alpha, self.k_mb)
        elif self.ci_test == "dsep":
            test = DSeparation(true_adj)
        else:
            test = CallableTest(self.ci_test, X, self.alpha)
        tester = CITester(test)
        mb = np.zeros((d, d), dtype=bool)
        for t in range(d):
            mb[t, constrained_iamb(t, self.cand_neighbors_[t], tester, self.max_cond_size)] = True
        mb = (mb & mb.T) if self.symmetry == "delete" else (mb | mb.T)
        self.blankets_ = [np.flatnonzero(mb[t]) for t in range(d)]
        timings["blankets"] = time.perf_counter() - t0

        # orientation: x -> T iff x in MB[T], x before T in pi, x in CandPa[T] (pa already implies "before"),
        # then drop spouses: x -> T survives only if dep(T; x | T's other earlier blanket members)
        t0 = time.perf_counter()
        adjacency = (mb.T & pa).astype(int)
        if self.prune_spouses:
            adjacency = prune_spouses(adjacency, self.blankets_, self.order_, tester, self.max_cond_size)
        self.adjacency_ = adjacency
        timings["orientation"] = time.perf_counter() - t0
        self.n_ci_tests_ = tester.n_tests
        self.n_ci_calls_ = tester.n_calls
        self.max_cond_set_ = tester.max_cond
        self.ci_scores_ = tester.score_matrix(d)
        self.max_candidate_size_ = int(nei.sum(1).max())
        self.timings_ = timings
        self.n_features_in_ = d
        return self

    def to_networkx(self) -> nx.DiGraph:
        """The learned DAG as a networkx DiGraph on nodes 0..d-1."""
        if not hasattr(self, "adjacency_"):
            raise ValueError("call fit(X) before to_networkx()")
        g = nx.DiGraph()
        g.add_nodes_from(range(self.n_features_in_))
        g.add_edges_from(zip(*np.nonzero(self.adjacency_)))
        return g
