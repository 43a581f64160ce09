"""Graph-memorisation tasks of [B02]: path-star, cycle, grid graphs and their edge / path datasets.

Edge facts are the sentences "u = v" for every edge, in both directions (Noroozizadeh et al., "Deep sequence
models tend to memorize geometrically; it is unclear why", ICML 2026). The path-star graph (Bachmann & Nagarajan
2024) has a centre c and d arms, each a path of l nodes (1 + d*l nodes); the in-weights path task reads a leaf
and writes the centre->leaf path c, a_1, ..., a_l. Its first non-trivial token a_1 needs an l-fold composition
of stored edges (leaf -> parent -> ... -> a_1) if the edges are stored as a lookup table.

Every graph here is an undirected ``networkx.Graph`` on the integer nodes 0..N-1 (the token ids).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from icml26.harness import validate as v

# helper functions

def validate_graph(G: nx.Graph) -> int:
    """Check that ``G`` is an undirected graph on nodes 0..N-1 with no isolated node; return N.

    Raises ``TypeError`` for a non-graph or a directed graph and ``ValueError`` for other node labels, fewer than
    two nodes, or isolated nodes (a node with no edge has no fact to memorise and no place in the geometry).
    """
    if not isinstance(G, nx.Graph):
        raise TypeError(f"expected a networkx.Graph, got {type(G).__name__}")
    if G.is_directed():
        raise TypeError("expected an undirected graph; pass G.to_undirected() (edge facts go both ways)")
    n = G.number_of_nodes()
    if n < 2:
        raise ValueError(f"the graph needs at least 2 nodes, got {n}")
    if set(G.nodes) != set(range(n)):
        raise ValueError("graph nodes must be the integers 0..N-1 (token ids); relabel with "
                         "nx.convert_node_labels_to_integers(G)")
    isolated = sorted(nx.isolates(G))
    if isolated:
        raise ValueError(f"the graph has {len(isolated)} isolated node(s) {isolated[:10]}: every node needs at least "
                         "one edge (remove them, or connect them)")
    return n


def _relabel(G: nx.Graph, seed: int | None) -> tuple[nx.Graph, np.ndarray]:
    """Randomly permute node labels (as the official datasets do), so token ids carry no structure."""
    n = G.number_of_nodes()
    perm = np.arange(n) if seed is None else np.random.default_rng(v.non_negative_int("seed", seed)).permutation(n)
    return nx.relabel_nodes(G, {i: int(perm[i]) for i in range(n)}), perm


# graphs

def path_star_graph(degree: int, path_length: int, seed: int | None = None) -> nx.Graph:
    """Path-star graph: a centre and ``degree`` arms of ``path_length`` nodes each (1 + degree*path_length nodes).

    With ``seed=None`` the centre is 0 and arm i holds 1 + i*l, ..., (i+1)*l (leaf last); with a seed the labels
    are randomly permuted. ``G.graph`` stores ``center``, ``arms`` (list of node lists, centre-side first) and
    ``leaves``.
    """
    d = v.positive_int("degree", degree, minimum=2)
    length = v.positive_int("path_length", path_length)
    G = nx.Graph()
    G.add_nodes_from(range(1 + d * length))
    arms = [[1 + i * length + j for j in range(length)] for i in range(d)]
    for arm in arms:
        nx.add_path(G, [0] + arm)
    H, perm = _relabel(G, seed)
    H = nx.convert_node_labels_to_integers(H, ordering="sorted") if seed is not None else H
    H.graph["center"] = int(perm[0])
    H.graph["arms"] = [[int(perm[v]) for v in arm] for arm in arms]
    H.graph["leaves"] = [arm[-1] for arm in H.graph["arms"]]
    return H


def cycle_graph(n: int, seed: int | None = None) -> nx.Graph:
    """Cycle on ``n`` nodes (0-1-...-(n-1)-0 for ``seed=None``; randomly relabelled otherwise)."""
    n = v.positive_int("n", n, minimum=3)
    return _relabel(nx.cycle_graph(n), seed)[0]


def grid_graph(rows: int, cols: int, seed: int | None = None) -> nx.Graph:
    """``rows`` x ``cols`` grid; node r*cols + c (or a random relabelling of it)."""
    rows, cols = v.positive_int("rows", rows), v.positive_int("cols", cols)
    if rows * cols < 2:
        raise ValueError(f"need a grid with at least 2 nodes, got {rows} x {cols}")
    G = nx.convert_node_labels_to_integers(nx.grid_2d_graph(rows, cols), ordering="sorted")
    return _relabel(G, seed)[0]


# datasets

def edge_memorization_dataset(G: nx.Graph, forward: bool = True, backward: bool = True,
                              self_edges: bool = False) -> np.ndarray:
    """Edge facts "u = v" as an int array of (u, v) rows: each edge (u < v) as (u, v) if ``forward`` and (v, u)
    if ``backward``, plus (u, u) for every node if ``self_edges``. Rows are sorted (deterministic)."""
    validate_graph(G)
    for name, flag in (("forward", forward), ("backward", backward), ("self_edges", self_edges)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, got {v.describe(flag)}")
    if not (forward or backward):
        raise ValueError("need forward=True or backward=True (or both): no edge facts otherwise")
    e = np.array(sorted((min(u, v), max(u, v)) for u, v in G.edges() if u != v), dtype=np.int64).reshape(-1, 2)
    parts = ([e] if forward else []) + ([e[:, ::-1]] if backward else [])
    if self_edges:
        nodes = np.arange(G.number_of_nodes())
        parts.append(np.stack([nodes, nodes], 1))
    out = np.concatenate(parts)
    return out[np.lexsort((out[:, 1], out[:, 0]))]


@dataclass(frozen=True)
class PathDataset:
    """In-weights path task on a path-star graph: ``paths[i]`` = (c, a_1, ..., a_l) for the leaf ``leaves[i]``."""

    train_leaves: np.ndarray      # (n_train,)
    train_paths: np.ndarray       # (n_train, l + 1): centre first, leaf last
    test_leaves: np.ndarray
    test_paths: np.ndarray
    center: int

    def __post_init__(self) -> None:
        for leaves, paths, side in ((self.train_leaves, self.train_paths, "train"),
                                    (self.test_leaves, self.test_paths, "test")):
            leaves, paths = np.asarray(leaves), np.asarray(paths)
            if leaves.ndim != 1 or paths.ndim != 2 or len(leaves) != len(paths):
                raise ValueError(f"{side}_leaves must be (n,) and {side}_paths (n, l + 1) with one path per leaf, got "
                                 f"shapes {leaves.shape} and {paths.shape}")
            if len(paths) and not ((paths[:, 0] == self.center).all() and (paths[:, -1] == leaves).all()):
                raise ValueError(f"each of {side}_paths must start at the centre ({self.center}) and end at its leaf")


def path_dataset(G: nx.Graph, center: int | None = None, train_frac: float = 0.8, seed: int = 0) -> PathDataset:
    """Split the leaves of a path-star graph into train / held-out; each example is leaf -> centre..leaf path.

    The path of a leaf is the unique shortest path from ``center`` (default ``G.graph["center"]``) to the leaf.
    At least one leaf goes to each side.
    """
    validate_graph(G)
    train_frac = v.in_range("train_frac", train_frac, 0.0, 1.0, low_open=True, high_open=True)
    seed = v.non_negative_int("seed", seed)
    c = G.graph.get("center") if center is None else v.non_negative_int("center", center)
    if c is None or c not in G:
        raise ValueError("pass center=... (the graph has no 'center' attribute) and make sure it is a node")
    leaves = np.array(sorted(v for v in G.nodes if G.degree(v) == 1 and v != c), dtype=np.int64)
    if len(leaves) < 2:
        raise ValueError(f"need at least 2 leaves to hold some out, the graph has {len(leaves)}")
    lengths = {int(v): len(p) for v, p in nx.single_source_shortest_path(G, c).items()}
    if len({lengths[int(v)] for v in leaves}) != 1:
        raise ValueError("all leaves must be equally far from the centre (a path-star graph)")
    paths = nx.single_source_shortest_path(G, c)
    perm = np.random.default_rng(seed).permutation(len(leaves))
    n_train = min(max(1, int(round(train_frac * len(leaves)))), len(leaves) - 1)
    tr, te = np.sort(leaves[perm[:n_train]]), np.sort(leaves[perm[n_train:]])
    as_paths = lambda ls: np.array([paths[int(v)] for v in ls], dtype=np.int64)  # noqa: E731
    return PathDataset(tr, as_paths(tr), te, as_paths(te), int(c))
