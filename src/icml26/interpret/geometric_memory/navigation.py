"""Path-finding from geometry alone: the l-fold composition becomes a 1-step navigation. [B02]

On a path-star graph the first non-trivial token of the centre->leaf path, a_1 (the centre's neighbour on the
leaf's arm), needs l hops leaf -> parent -> ... -> a_1 from a lookup table of edges. If the memory is geometric
(nodes of one arm close together) it is one step: among the centre's neighbours pick the one nearest the leaf,

    a_1_hat(leaf) = argmax_{a in N(c)} cos(e_leaf, e_a)       (cosine: our choice, so norms do not decide).

A lookup-table (associative) memory has no such geometry and scores about 1 / deg(c).
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from icml26.harness import validate as v

from .graphs import validate_graph
from .spectral import _as_embedding


def geometric_first_hop(emb, G: nx.Graph, leaves, center: int | None = None) -> np.ndarray:
    """Predicted first hop a_1 for each leaf: the centre neighbour with the largest cosine to the leaf."""
    n = validate_graph(G)
    E = _as_embedding(emb, n)
    c = G.graph.get("center") if center is None else v.non_negative_int("center", center)
    if c is None or c not in G:
        raise ValueError("pass center=... (the graph has no 'center' attribute)")
    nb = np.array(sorted(G.neighbors(c)), dtype=np.int64)
    leaves = np.asarray(leaves, dtype=np.int64)
    if leaves.ndim != 1 or leaves.size == 0 or leaves.min() < 0 or leaves.max() >= n:
        raise ValueError(f"leaves must be a non-empty 1-D array of node ids in 0..{n - 1}")
    U = E / np.maximum(np.linalg.norm(E, axis=1, keepdims=True), 1e-12)
    return nb[np.argmax(U[leaves] @ U[nb].T, axis=1)]


def geometric_first_hop_correct(emb, G: nx.Graph, leaves, paths, center: int | None = None) -> np.ndarray:
    """Per leaf: 1.0 when :func:`geometric_first_hop` equals the true a_1 (``paths[:, 1]``), else 0.0."""
    paths = np.asarray(v.ndim("paths", v.finite("paths", paths), 2))
    if paths.shape[0] != np.size(leaves) or paths.shape[1] < 2:
        raise ValueError(f"paths must be (n, l + 1) with one centre->leaf path per leaf ({np.size(leaves)}), got shape "
                         f"{paths.shape}")
    return (geometric_first_hop(emb, G, leaves, center) == paths[:, 1]).astype(float)
