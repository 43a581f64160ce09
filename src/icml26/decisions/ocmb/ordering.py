"""Ordering backbones for OCMB [B12]: a topological order pi and parent scores P[i, j] (evidence for i -> j).

Stage 1 of OCMB is any cheap global orderer; OCMB only needs the order to put the true parents *before* each
node (high recall), not to be globally right. Backbones here:

- ``eqvar_order``   top-down ordering for linear SEMs with equal noise variances (Chen, Drton & Wang 2019):
                    pi_1 = argmin_j Var(X_j);  pi_t = argmin_j Var(X_j | X_{pi_1..pi_{t-1}}).
- ``lingam_order``  DirectLiNGAM's causal order (``lingam`` package), for non-Gaussian linear data.
- ``stein_order``   CaPS-style score orderer: the diagonal of the Hessian of log p estimated with the
                    Stein identity (as in SCORE/CaPS); the node with the largest mean Hessian diagonal is a
                    leaf, removed one at a time. Parent scores P[i, :] = |mean H(without i) - mean H(all)|.
- ``oracle_order``  a topological order of the true DAG, P = true adjacency.
- ``random_order``  a random permutation, random scores (the ablation).

For the linear orderers P[i, j] = |OLS coefficient of i| when the standardised X_j is regressed on all of
its predecessors in pi (our choice), computed for every j at once from one Cholesky factor.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from scipy.linalg import cholesky, solve_triangular

from icml26.harness import validate as v

from ._extras import require

# helper functions


def check_order(order, d: int) -> np.ndarray:
    """Return ``order`` as an int array if it is a permutation of 0..d-1, else raise ValueError."""
    arr = np.asarray(order)
    if arr.ndim != 1 or arr.shape[0] != d or not np.issubdtype(arr.dtype, np.integer) \
            or not np.array_equal(np.sort(arr), np.arange(d)):
        raise ValueError(f"an ordering must be a permutation of 0..{d - 1} (one entry per column of X); "
                         f"got {np.asarray(order).tolist()[:20]!r}")
    return arr.astype(int)


def ols_parent_scores(X: np.ndarray, order: np.ndarray) -> np.ndarray:
    """P[i, j] = |beta_i| in the OLS regression of standardised X_j on its predecessors in ``order``.

    With the correlation matrix permuted into ``order`` factorised as R = C C^T (C lower triangular),
    row j of C^{-1} gives the regression residual, so beta_{j<-i} = -C^{-1}[j, i] / C^{-1}[j, j] for i < j.
    """
    X = _check_data(X)
    d = X.shape[1]
    order = check_order(order, d)
    R = np.corrcoef(X[:, order], rowvar=False)
    C = cholesky(R + 1e-10 * np.eye(d), lower=True)
    Cinv = solve_triangular(C, np.eye(d), lower=True)
    B = np.tril(-Cinv / np.diag(Cinv)[:, None], k=-1)  # B[j, i]: coefficient of pi_i in pi_j's regression
    P = np.zeros((d, d))
    P[np.ix_(order, order)] = np.abs(B.T)
    return P


def _check_data(X) -> np.ndarray:
    X = np.asarray(v.finite("X", X), dtype=float)
    if X.ndim != 2 or X.shape[1] < 2:
        raise ValueError(f"X must be 2-D (n_samples, n_variables) with at least 2 variables, got shape {X.shape}")
    if X.shape[0] < 3:
        raise ValueError(f"X needs at least 3 samples, got {X.shape[0]}")
    const = np.flatnonzero(X.std(0) <= 1e-12 * np.maximum(1.0, np.abs(X).max(0))).tolist()
    if const:
        raise ValueError(f"columns {const[:10]} of X are constant; drop them first")
    return X


# orderers: each returns (order, parent_scores)


def eqvar_order(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Top-down equal-variance order (Chen, Drton & Wang 2019) and OLS parent scores [B12].

    Uses the raw covariance: the rule needs the data on its original scale (do not standardise first).
    """
    X = _check_data(X)
    d = X.shape[1]
    cov = np.cov(X, rowvar=False)
    order: list[int] = []
    rest = list(range(d))
    while rest:
        if order:
            cross = cov[np.ix_(order, rest)]
            cond_var = np.diag(cov)[rest] - np.sum(cross * np.linalg.solve(cov[np.ix_(order, order)], cross), 0)
        else:
            cond_var = np.diag(cov)[rest]
        order.append(rest.pop(int(np.argmin(cond_var))))
    order_arr = np.array(order)
    return order_arr, ols_parent_scores(X, order_arr)


def lingam_order(X: np.ndarray, random_state: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """DirectLiNGAM's causal order (``lingam`` package, in the ``causal`` extra) and OLS parent scores [B12]."""
    X = _check_data(X)
    lingam = require("lingam", "the 'lingam' orderer (DirectLiNGAM)")

    model = lingam.DirectLiNGAM(random_state=random_state).fit(X)
    order = np.asarray(model.causal_order_, dtype=int)
    return order, ols_parent_scores(X, order)


def _stein_hessian_diag(X: np.ndarray, eta_g: float, eta_h: float) -> np.ndarray:
    """diag of the Hessian of log p at each sample via first- and second-order Stein identities (SCORE).

    Gaussian kernel K with median bandwidth s; G = (K + eta_g I)^-1 nabla K estimates the score,
    H = -G^2 + (K + eta_h I)^-1 nabla^2 K its derivative (n x d).
    """
    n = X.shape[0]
    diff = X[:, None, :] - X[None, :, :]  # diff[k, i] = x_k - x_i
    sq = np.einsum("kid,kid->ki", diff, diff)
    s = np.median(np.sqrt(sq))
    K = np.exp(-sq / (2 * s**2)) / s
    nabla_k = -np.einsum("kid,ik->kd", diff, K) / s**2
    nabla2_k = np.einsum("kid,ik->kd", -1 / s**2 + diff**2 / s**4, K)
    eye = np.eye(n)
    G = np.linalg.solve(K + eta_g * eye, nabla_k)
    return -G**2 + np.linalg.solve(K + eta_h * eye, nabla2_k)


def stein_order(X: np.ndarray, eta_g: float = 1e-3, eta_h: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """CaPS-style Stein-Hessian order and parent scores (our numpy port of the idea; O(d n^3)) [B12].

    Meant for nonlinear additive-noise data at n <= 1000 (memory n^2 d). Order: repeatedly drop the node
    with the largest mean Hessian diagonal (a leaf), then reverse. P[i, j] = |mean_k H_j(X without i) -
    mean_k H_j(X)|: removing a parent i changes the curvature seen at its child j.
    """
    X = _check_data(X)
    eta_g, eta_h = v.positive("eta_g", eta_g), v.positive("eta_h", eta_h)
    Z = (X - X.mean(0)) / X.std(0)
    d = Z.shape[1]
    active = list(range(d))
    leaves: list[int] = []
    while len(active) > 1:
        H = _stein_hessian_diag(Z[:, active], eta_g, eta_h).mean(0)
        leaves.append(active.pop(int(np.argmax(H))))
    order = np.array(active + leaves[::-1])
    full = _stein_hessian_diag(Z, eta_g, eta_h).mean(0)
    P = np.zeros((d, d))
    for i in range(d):
        keep = [j for j in range(d) if j != i]
        P[i, keep] = np.abs(_stein_hessian_diag(Z[:, keep], eta_g, eta_h).mean(0) - full[keep])
    return order, P


def oracle_order(true_adj: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A topological order of the true DAG and P = the true adjacency (the paper's upper bound)."""
    A = np.asarray(true_adj)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"true_adj must be a square (d, d) adjacency matrix, got shape {A.shape}")
    g = nx.from_numpy_array(A != 0, create_using=nx.DiGraph)
    if not nx.is_directed_acyclic_graph(g):
        raise ValueError("true_adj has a directed cycle; the oracle ordering needs a DAG")
    order = np.array(list(nx.lexicographical_topological_sort(g)), dtype=int)
    P = (np.asarray(true_adj) != 0).astype(float)
    np.fill_diagonal(P, 0.0)
    return order, P


def random_order(d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A uniformly random order and U(0, 1) scores (the ablation that should collapse)."""
    d = v.positive_int("d", d, minimum=2)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {v.describe(rng)}")
    order = rng.permutation(d)
    P = rng.random((d, d))
    np.fill_diagonal(P, 0.0)
    return order, P
