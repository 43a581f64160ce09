"""Planted-motif graphs: which attribution localises the structure a GNN decides on [A04 interpretation].

BA-2Motifs-style graph classification (Luo et al. 2020, the benchmark of GNNExplainer's successors): each graph
is a Barabási-Albert tree (``n_base`` nodes, m = 1) with one motif attached to a random tree node by one edge:
a *house* (5 nodes, 6 edges; label 1) or a *5-cycle* (5 nodes, 5 edges; label 0). Node features are constant,
one-hot degrees (capped at ``dim``), so the label is carried by structure alone and the motif's edges are the ground-truth explanation.

``motif_edge_auroc(scores, truth)``: AUROC of per-edge scores against the motif-edge indicator of one graph.
Edge scores: GNNExplainer's mask directly; node attributions (gradient x input) as the mean of the two
endpoints' scores; random scores as the chance level.
"""

from __future__ import annotations

import numpy as np
import torch


def _house() -> list[tuple[int, int]]:
    return [(0, 1), (1, 2), (2, 3), (3, 0), (0, 4), (1, 4)]


def _cycle() -> list[tuple[int, int]]:
    return [(i, (i + 1) % 5) for i in range(5)]


def make_motif_graph(rng: np.random.Generator, house: bool, n_base: int = 20, dim: int = 8):
    """One graph as ``torch_geometric.data.Data`` (both edge directions) with ``y`` and ``edge_truth`` (1 on the
    motif's edges, the attaching edge excluded)."""
    import networkx as nx
    from torch_geometric.data import Data

    if n_base < 2:
        raise ValueError(f"n_base must be >= 2, got {n_base}")
    base = nx.barabasi_albert_graph(n_base, 1, seed=int(rng.integers(2 ** 31)))
    und = [(int(a), int(b), 0) for a, b in base.edges()]
    motif = _house() if house else _cycle()
    und += [(n_base + a, n_base + b, 1) for a, b in motif]
    und.append((int(rng.integers(n_base)), n_base + int(rng.integers(5)), 0))
    perm = rng.permutation(n_base + 5)                     # no position tells the motif's nodes
    src = [int(perm[a]) for a, b, _ in und] + [int(perm[b]) for a, b, _ in und]
    dst = [int(perm[b]) for a, b, _ in und] + [int(perm[a]) for a, b, _ in und]
    truth = [t for *_, t in und] * 2
    deg = np.bincount(np.array(src), minlength=n_base + 5)
    x = torch.zeros(n_base + 5, dim)
    x[torch.arange(n_base + 5), torch.from_numpy(np.minimum(deg, dim) - 1)] = 1.0
    return Data(x=x, edge_index=torch.tensor([src, dst]), edge_type=torch.zeros(len(src), dtype=torch.long),
                y=torch.tensor([int(house)]), edge_truth=torch.tensor(truth))


def make_motif_dataset(n: int, seed: int | list[int], n_base: int = 20) -> list:
    """``n`` graphs, half with a house (label 1), in a seeded random order."""
    if n < 2:
        raise ValueError(f"need at least 2 graphs, got {n}")
    rng = np.random.default_rng(seed)
    return [make_motif_graph(rng, bool(y), n_base) for y in rng.permutation(np.arange(n) % 2)]


def motif_edge_auroc(scores: np.ndarray, truth: np.ndarray) -> float:
    """AUROC of edge scores against the motif-edge indicator (ties count half)."""
    from sklearn.metrics import roc_auc_score

    scores, truth = np.asarray(scores, float), np.asarray(truth, int)
    if scores.shape != truth.shape:
        raise ValueError(f"scores {scores.shape} and truth {truth.shape} must have the same shape")
    if truth.min() == truth.max():
        raise ValueError("truth needs both motif and non-motif edges")
    return float(roc_auc_score(truth, scores))


def node_to_edge_scores(node_scores: np.ndarray, edge_index: torch.Tensor) -> np.ndarray:
    """Edge score = mean of its two endpoints' node scores."""
    ei = edge_index.numpy()
    return 0.5 * (node_scores[ei[0]] + node_scores[ei[1]])
