"""Conditional-independence tests for OCMB [B12]: Fisher-z, kNN conditional mutual information, and a
d-separation oracle (the exact answer for a known DAG, for checking the algorithm without sampling error).

Both tests answer the same question for a target T, a batch of candidates x and one conditioning set S:
how strongly does x depend on T given S, and is that dependence significant? The constrained IAMB only
needs that pair (a strength to rank candidates, a yes/no to add or drop them), so both tests expose
``dependence(t, xs, S) -> (strength, dependent)``.

A :class:`CITester` wraps a test and *measures* what the paper bounds: the number of distinct CI tests
(pair, conditioning set) evaluated and the largest conditioning set used.
"""

from __future__ import annotations

from typing import Callable, Sequence

import networkx as nx
import numpy as np
from scipy.spatial import cKDTree
from scipy.special import digamma
from scipy.stats import norm

from icml26.harness import validate as v

# helper functions


def _check_data(data, name: str = "data") -> np.ndarray:
    """A finite 2-D float array (n_samples, n_variables) with at least one row."""
    X = v.finite(name, data)
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_variables), got shape {X.shape}")
    v.non_empty(name, X)
    return X


def _check_query(d: int, t, xs, S) -> None:
    """t, every x and every s are variable indices in [0, d); t is not a candidate; S holds neither t nor x."""
    t = int(v.non_negative_int("t", t))
    xs = [int(v.non_negative_int("xs entry", x)) for x in xs]
    S = [int(v.non_negative_int("S entry", z)) for z in S]
    bad = [i for i in [t, *xs, *S] if i >= d]
    if bad:
        raise ValueError(f"variable indices must be in [0, {d}), got {bad[0]}")
    if t in xs or t in S or set(xs) & set(S):
        raise ValueError(f"a CI test needs distinct variables: target t={t}, candidates {xs} and conditioning "
                         f"set {S} must not overlap")


def _check_alpha(alpha) -> float:
    return v.in_range("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)


def fisher_z_pvalue(corr: np.ndarray, n: int, x: int, y: int, S: Sequence[int] = ()) -> float:
    """Fisher-z p-value of X_x _||_ X_y | X_S from the correlation matrix ``corr`` of ``n`` samples [B12].

    r = -P[0,1] / sqrt(P[0,0] P[1,1]) with P the inverse of corr restricted to (x, y, S);
    z = atanh(r) sqrt(n - |S| - 3);  p = 2 (1 - Phi(|z|)). Same formula as causal-learn's ``fisherz``.
    """
    return float(FisherZ.from_corr(corr, n).pvalues(x, [y], S)[0])


def _check_k(k, n: int) -> int:
    k = v.positive_int("k", k)
    if k >= n:
        raise ValueError(f"k must be < n_samples ({n}) for a k-nearest-neighbour estimate, got {k}")
    return k


def knn_cmi(data: np.ndarray, x: int, y: int, S: Sequence[int] = (), k: int = 5) -> float:
    """kNN estimate of I(X_x; X_y | X_S) (Frenzel-Pompe / KSG with the max-norm), clipped at 0 [B12].

    rho_i = distance of sample i to its k-th neighbour in the joint (x, y, S) space, then
    I = < psi(k~_i) - psi(n_xS) - psi(n_yS) + psi(n_S) >, with n_. the number of other samples within rho_i
    (distance <= rho_i) in that subspace (n_S = n when S is empty) and k~_i the number of other samples within
    rho_i in the joint space: k~_i = k without ties, more when several neighbours sit at distance rho_i
    (discrete data), as in the official estimator. ``data`` should be standardised: the value is thresholded.
    """
    data = _check_data(data)
    S = list(S)
    _check_query(data.shape[1], x, [y], S)
    _check_k(k, data.shape[0])
    return _knn_cmi(data, int(x), int(y), [int(z) for z in S], k)


def _knn_cmi(data: np.ndarray, x: int, y: int, S: list[int], k: int) -> float:
    joint = data[:, [x, y, *S]]
    tree = cKDTree(joint)
    rho = tree.query(joint, k=k + 1, p=np.inf)[0][:, -1]

    def count(cols: list[int]) -> np.ndarray:
        sub = data[:, cols]
        return cKDTree(sub).query_ball_point(sub, r=rho, p=np.inf, return_length=True) - 1

    n = data.shape[0]
    k_tilde = tree.query_ball_point(joint, r=rho, p=np.inf, return_length=True) - 1
    n_s = count(S) if S else np.full(n, n)
    est = np.mean(digamma(k_tilde) - digamma(count([x, *S])) - digamma(count([y, *S])) + digamma(n_s))
    return float(max(est, 0.0))


def _check_not_collinear(data: np.ndarray, tol: float = 1e-10) -> None:
    """Refuse duplicated or (near-)collinear columns with a message naming them, instead of a raw LinAlgError
    or a silent infinite statistic later."""
    X = np.asarray(data, dtype=float)
    std = X.std(0)
    const = np.flatnonzero(std <= tol * np.maximum(1.0, np.abs(X).max(0)))
    if const.size:
        raise ValueError(f"columns {const[:10].tolist()} are constant; drop them before fitting")
    corr = np.corrcoef(X, rowvar=False)
    i, j = np.nonzero(np.triu(np.abs(corr) >= 1 - 1e-9, k=1))
    if i.size:
        raise ValueError(f"columns {int(i[0])} and {int(j[0])} are duplicated or perfectly correlated "
                         f"(|corr| = 1); drop one of them before fitting")
    ev = np.linalg.eigvalsh(corr)
    if ev[0] <= tol * ev[-1]:
        raise ValueError(f"the columns are collinear (a column is a linear combination of others: correlation "
                         f"matrix eigenvalue {ev[0]:.2e}); drop redundant columns before fitting")


# main classes


class FisherZ:
    """Fisher-z test on a fixed data set; batched over candidates sharing a conditioning set [B12].

    ``dependence`` returns strength |z| sqrt(n - |S| - 3) (the statistic) and ``p <= alpha``.
    """

    def __init__(self, data: np.ndarray, alpha: float = 0.01):
        data = _check_data(data)
        self.alpha = _check_alpha(alpha)
        _check_not_collinear(data)
        self.n = data.shape[0]
        self.corr = np.corrcoef(data, rowvar=False)
        self.d = self.corr.shape[0]

    @classmethod
    def from_corr(cls, corr: np.ndarray, n: int, alpha: float = 0.01) -> "FisherZ":
        """The test from a (d, d) correlation matrix of ``n`` samples (n > d + 1 for every conditioning set)."""
        corr = np.asarray(v.finite("corr", corr), dtype=float)
        if corr.ndim != 2 or corr.shape[0] != corr.shape[1] or corr.shape[0] < 2:
            raise ValueError(f"corr must be a square (d, d) correlation matrix with d >= 2, got shape {corr.shape}")
        if not np.allclose(corr, corr.T) or np.abs(corr).max() > 1 + 1e-9:
            raise ValueError("corr must be a symmetric correlation matrix with entries in [-1, 1]")
        n = v.positive_int("n", n, minimum=4)
        self = cls.__new__(cls)
        self.n, self.corr, self.alpha, self.d = n, corr, _check_alpha(alpha), corr.shape[0]
        return self

    def _stats(self, t: int, xs: Sequence[int], S: Sequence[int]) -> np.ndarray:
        _check_query(self.d, t, xs, S)
        if self.n - len(S) - 3 < 1:
            raise ValueError(f"Fisher-z with |S| = {len(S)} needs n_samples >= |S| + 4, got n = {self.n}")
        S = sorted(int(s) for s in S)
        xs = np.asarray(xs, dtype=int)
        # one (|S|+2)x(|S|+2) sub-correlation matrix per candidate, [min(t,x), max(t,x), *S] as causal-learn
        a, b = np.minimum(t, xs), np.maximum(t, xs)
        idx = np.column_stack([a, b, np.broadcast_to(np.asarray(S, dtype=int), (len(xs), len(S)))])
        sub = self.corr[idx[:, :, None], idx[:, None, :]]
        try:
            inv = np.linalg.inv(sub)
        except np.linalg.LinAlgError:
            raise ValueError("the correlation matrix is singular (collinear columns); Fisher-z cannot be "
                             "computed. Remove duplicated or deterministic columns.") from None
        r = -inv[:, 0, 1] / np.sqrt(np.abs(inv[:, 0, 0] * inv[:, 1, 1]))
        r = np.clip(r, -(1 - np.finfo(float).eps), 1 - np.finfo(float).eps)
        return np.sqrt(self.n - len(S) - 3) * np.abs(np.arctanh(r))

    def pvalues(self, t: int, xs: Sequence[int], S: Sequence[int] = ()) -> np.ndarray:
        return 2.0 * norm.sf(self._stats(t, xs, S))

    def dependence(self, t: int, xs: Sequence[int], S: Sequence[int],
                   backward: bool = False) -> tuple[np.ndarray, np.ndarray]:
        z = self._stats(t, xs, S)
        return z, 2.0 * norm.sf(z) <= self.alpha


class KnnCMI:
    """kNN-CMI test: strength = CMI value, dependent iff CMI >= alpha (a value threshold, as in OCMB) [B12]."""

    def __init__(self, data: np.ndarray, alpha: float = 0.01, k: int = 5):
        data = _check_data(data)
        self.alpha = v.non_negative("alpha", alpha)
        self.k = _check_k(k, data.shape[0])
        _check_not_collinear(data)
        self.data = (data - data.mean(0)) / data.std(0)
        self.d = data.shape[1]

    def dependence(self, t: int, xs: Sequence[int], S: Sequence[int],
                   backward: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Forward: add when CMI >= alpha; backward: drop when CMI <= alpha (the official IAMB's rules)."""
        _check_query(self.d, t, xs, S)
        S = [int(z) for z in S]
        cmi = np.array([_knn_cmi(self.data, int(t), int(x), S, self.k) for x in xs])
        return cmi, (cmi > self.alpha) if backward else (cmi >= self.alpha)


class DSeparation:
    """d-separation oracle on a known DAG [B12]: X_x _||_ X_y | X_S iff x and y are d-separated by S.

    Usable two ways: as OCMB's ``ci_test="dsep"`` (with ``fit(X, true_adj=A)``), or as a callable
    ``DSeparation(A)(data, x, y, S) -> p-value`` that returns 1.0 when d-separated and 0.0 otherwise (so any
    alpha in (0, 1) reads it exactly). ``dependence`` gives strength 1/0. Answers are cached per
    (unordered pair, conditioning set). A faithful distribution has exactly these independences, so an
    algorithm that is correct in the large-sample limit must be exact with this test.
    """

    def __init__(self, adj: np.ndarray):
        A = np.asarray(adj)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"the d-separation oracle needs a square (d, d) adjacency matrix, got shape {A.shape}")
        self.graph = nx.from_numpy_array((A != 0).astype(int), create_using=nx.DiGraph)
        if np.any(np.diag(A) != 0) or not nx.is_directed_acyclic_graph(self.graph):
            raise ValueError("the d-separation oracle needs a DAG (no self-loops, no directed cycles)")
        self.d = A.shape[0]
        self._cache: dict[tuple[int, int, tuple[int, ...]], bool] = {}

    def separated(self, x: int, y: int, S: Sequence[int] = ()) -> bool:
        """True iff S d-separates x and y in the DAG."""
        x, y = int(x), int(y)
        S = tuple(sorted(int(s) for s in S))
        key = (min(x, y), max(x, y), S)
        if key not in self._cache:
            if x == y or x in S or y in S:
                raise ValueError(f"d-separation needs distinct x, y outside S, got x={x}, y={y}, S={list(S)}")
            _check_query(self.d, x, [y], S)
            self._cache[key] = nx.is_d_separator(self.graph, {x}, {y}, set(S))
        return self._cache[key]

    def __call__(self, data: np.ndarray, x: int, y: int, S: Sequence[int]) -> float:
        return 1.0 if self.separated(x, y, S) else 0.0

    def dependence(self, t: int, xs: Sequence[int], S: Sequence[int],
                   backward: bool = False) -> tuple[np.ndarray, np.ndarray]:
        dep = np.array([not self.separated(t, int(x), S) for x in xs], dtype=bool)
        return dep.astype(float), dep


class CallableTest:
    """A user test ``fn(data, x, y, S) -> p-value``; strength = 1 - p, dependent iff p <= alpha."""

    def __init__(self, fn: Callable[[np.ndarray, int, int, list], float], data: np.ndarray, alpha: float):
        self.fn, self.data, self.alpha = fn, data, alpha
        self.d = np.shape(data)[1]

    def dependence(self, t: int, xs: Sequence[int], S: Sequence[int],
                   backward: bool = False) -> tuple[np.ndarray, np.ndarray]:
        p = np.array([float(self.fn(self.data, t, int(x), list(S))) for x in xs])
        bad = ~np.isfinite(p) | (p < 0) | (p > 1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"the ci_test callable returned {p[i]!r} for ({t}, {int(xs[i])} | {list(S)}): a p-value "
                             "must be a finite number in [0, 1]")
        return 1.0 - p, p <= self.alpha


class CITester:
    """Counts what the paper bounds: distinct CI tests (unordered pair, conditioning set) and max |S|."""

    def __init__(self, test):
        if not callable(getattr(test, "dependence", None)):
            raise TypeError(f"test must be a CI test with a dependence(t, xs, S) method (FisherZ, KnnCMI, "
                            f"DSeparation), got {v.describe(test)}")
        self.test = test
        self.keys: set[tuple[int, int, tuple[int, ...]]] = set()
        self.n_calls = 0
        self.max_cond = 0
        self.scores: dict[tuple[int, int], float] = {}

    def dependence(self, t: int, xs: Sequence[int], S: Sequence[int],
                   backward: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(strength, dependent) of each x with t given S; ``backward=True`` in IAMB's shrinking phase (the
        kNN-CMI test then drops at CMI <= alpha). Records each pair's largest strength in ``scores``."""
        S = tuple(sorted(int(s) for s in S))
        xs = [int(x) for x in xs]
        if not xs:
            return self.test.dependence(t, xs, S, backward=backward)
        self.keys.update((min(t, x), max(t, x), S) for x in xs)
        self.n_calls += len(xs)
        self.max_cond = max(self.max_cond, len(S))
        strength, dependent = self.test.dependence(t, xs, S, backward=backward)
        for x, val in zip(xs, np.asarray(strength, dtype=float)):
            key = (min(t, x), max(t, x))
            self.scores[key] = max(self.scores.get(key, -np.inf), float(val))
        return strength, dependent

    def score_matrix(self, d: int) -> np.ndarray:
        """(d, d) symmetric matrix of the largest strength seen per pair (0 where a pair was never tested)."""
        d = v.positive_int("d", d)
        if self.scores and max(j for _, j in self.scores) >= d:
            raise ValueError(f"d = {d} is smaller than the number of variables tested "
                             f"({max(j for _, j in self.scores) + 1})")
        M = np.zeros((d, d))
        for (i, j), val in self.scores.items():
            M[i, j] = M[j, i] = val
        return M

    @property
    def n_tests(self) -> int:
        return len(self.keys)
