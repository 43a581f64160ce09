"""Embedding-geometry diagnostics of [B02]: spectral energy profile and geometric edge recovery.

Spectral profile. Let A be the adjacency matrix and D = diag(deg). The graph operator is

    M = D^-1 A + A D^-1          ("rw": the random-walk operator, symmetrised as in the official code)
    M = D^-1/2 A D^-1/2          ("sym")        M = A      ("none")

with orthonormal eigenvectors u_1, ..., u_N sorted by eigenvalue, largest first. u_1 (constant on a regular
graph) is dropped. The energy of an embedding E (N x d) on u_i is ||E^T u_i||^2, normalised to sum 1 over
i = 2..N. A geometric memory concentrates its energy on the top few u_i (the smooth, low-frequency
directions: for a cycle the top 2, cos and sin of 2 pi i / N); a random embedding spreads it evenly, so the
top-k fraction of a Gaussian E is about k / (N - 1).

Geometric edge recovery. For each node u, rank every v != u by <e_u, e_v> (the diagonal is excluded: a tied model
ranks u first), keep the top deg(u), and report the fraction of true edges (u, v) among them. Storage that is a
lookup table scores about chance, deg(u) / (N - 1) per node.

The Laplacian L = D - A of a ring on n nodes has the spectrum 2 - 2 cos(2 pi k / n), k = 0..n-1
(:func:`laplacian_spectrum`).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from scipy.linalg import eigh

from icml26.harness import validate as v

from .graphs import validate_graph

NORMALIZATIONS = ("rw", "sym", "none")


# helper functions

def _as_embedding(emb, n: int) -> np.ndarray:
    if hasattr(emb, "detach"):
        emb = emb.detach().cpu().numpy()
    E = np.asarray(v.finite("embedding", emb), dtype=np.float64)
    if E.ndim != 2 or E.shape[0] != n:
        raise ValueError(f"embedding must have shape (num_nodes={n}, dim), got {E.shape}; take rows 0..N-1 of the "
                         "token-embedding matrix (the node tokens)")
    return E


def graph_operator(G: nx.Graph, normalize: str = "rw") -> np.ndarray:
    """The symmetric graph operator M whose eigenvectors the profile uses (see module docstring)."""
    n = validate_graph(G)
    v.one_of("normalize", normalize, NORMALIZATIONS)
    A = nx.to_numpy_array(G, nodelist=range(n), weight=None)
    np.fill_diagonal(A, 0.0)
    deg = A.sum(1)
    if normalize == "none":
        return A
    if normalize == "sym":
        s = 1.0 / np.sqrt(deg)
        return s[:, None] * A * s[None, :]
    P = A / deg[:, None]
    return P + P.T


def graph_eigenbasis(G: nx.Graph, normalize: str = "rw") -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and orthonormal eigenvectors (columns) of :func:`graph_operator`."""
    w, U = eigh(graph_operator(G, normalize))
    return w[::-1].copy(), U[:, ::-1].copy()


# main functions

def laplacian_spectrum(G: nx.Graph) -> np.ndarray:
    """Eigenvalues of the combinatorial Laplacian L = D - A, ascending (ring: 2 - 2 cos(2 pi k / n))."""
    n = validate_graph(G)
    L = nx.laplacian_matrix(G, nodelist=range(n), weight=None).toarray().astype(np.float64)
    return np.linalg.eigvalsh(L)


def spectral_energy_profile(emb, G: nx.Graph, normalize: str = "rw",
                            drop_top: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues, energy): energy_i = ||E^T u_i||^2 / sum_j ||E^T u_j||^2 over the kept eigenvectors, sorted
    by eigenvalue, largest first; the top (trivial) eigenvector is dropped when ``drop_top``. [B02]"""
    if not isinstance(drop_top, (bool, np.bool_)):
        raise TypeError(f"drop_top must be True or False, got {v.describe(drop_top)}")
    w, U = graph_eigenbasis(G, normalize)
    E = _as_embedding(emb, U.shape[0])
    energy = ((U.T @ E) ** 2).sum(1)
    if drop_top:
        w, energy = w[1:], energy[1:]
    total = energy.sum()
    if total <= 0:
        raise ValueError("the embedding has no energy outside the top eigenvector (it is constant across nodes)")
    return w, energy / total


def topk_energy_fraction(emb, G: nx.Graph, k: int, normalize: str = "rw") -> float:
    """Fraction of the (non-trivial) spectral energy on the top ``k`` eigenvectors. Gaussian E: about k/(N-1)."""
    k = v.positive_int("k", k)
    w, energy = spectral_energy_profile(emb, G, normalize)
    if k > len(energy):
        raise ValueError(f"k must be in 1..{len(energy)} (the non-trivial eigenvectors), got {k}")
    return float(energy[:k].sum())


def edge_recovery_per_node(emb, G: nx.Graph) -> np.ndarray:
    """Per node u: fraction of u's neighbours among the deg(u) nodes v != u with the largest <e_u, e_v>."""
    n = validate_graph(G)
    E = _as_embedding(emb, n)
    S = E @ E.T
    np.fill_diagonal(S, -np.inf)
    A = nx.to_numpy_array(G, nodelist=range(n), weight=None) > 0
    np.fill_diagonal(A, False)
    deg = A.sum(1)
    order = np.argsort(-S, axis=1, kind="stable")           # best first
    hit = np.take_along_axis(A, order, axis=1)               # hit[u, r]: r-th ranked node is a neighbour
    within = np.arange(n)[None, :] < deg[:, None]
    return (hit & within).sum(1) / deg


def geometric_edge_recovery(emb, G: nx.Graph) -> float:
    """Fraction of true edges recovered from embedding geometry alone (top-deg(u) by dot product). [B02]"""
    n = validate_graph(G)
    A = nx.to_numpy_array(G, nodelist=range(n), weight=None) > 0
    np.fill_diagonal(A, False)
    deg = A.sum(1)
    return float((edge_recovery_per_node(emb, G) * deg).sum() / deg.sum())


def topk_edge_recovery(emb, G: nx.Graph, k: int = 5) -> float:
    """The official recovery metric (``metrics.topk_recovery_percent`` / 100): the share of directed edges (u, v)
    whose v is among the k nodes w != u with the largest <e_u, e_w> (one k for every node; official k = 5)."""
    n = validate_graph(G)
    E = _as_embedding(emb, n)
    k = v.positive_int("k", k)
    if k > n - 1:
        raise ValueError(f"k must be an int in 1..{n - 1}, got {k!r}")
    S = E @ E.T
    np.fill_diagonal(S, -np.inf)
    top = np.argsort(-S, axis=1, kind="stable")[:, :int(k)]
    A = nx.to_numpy_array(G, nodelist=range(n), weight=None) > 0
    np.fill_diagonal(A, False)
    return float(np.take_along_axis(A, top, axis=1).sum() / A.sum())


def chance_edge_recovery(G: nx.Graph) -> float:
    """Expected recovery of a random ranking: sum_u deg(u)^2 / (N - 1) / sum_u deg(u)."""
    n = validate_graph(G)
    deg = np.array([d for _, d in G.degree()], dtype=float)
    return float((deg ** 2).sum() / (n - 1) / deg.sum())


def subspace_overlap(X: np.ndarray, Y: np.ndarray) -> float:
    """Mean squared cosine of the principal angles between span(X) and span(Y) (columns), in [0, 1]."""
    X = np.asarray(v.ndim("X", v.finite("X", X), 2), dtype=float)
    Y = np.asarray(v.ndim("Y", v.finite("Y", Y), 2), dtype=float)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows (one per node), got {X.shape} and {Y.shape}")
    if min(X.shape[1], Y.shape[1]) < 1 or X.shape[0] < 1:
        raise ValueError(f"X and Y need at least one row and one column, got {X.shape} and {Y.shape}")
    qx, _ = np.linalg.qr(X)
    qy, _ = np.linalg.qr(Y)
    s = np.linalg.svd(qx.T @ qy, compute_uv=False)
    return float(np.mean(s[: min(qx.shape[1], qy.shape[1])] ** 2))
