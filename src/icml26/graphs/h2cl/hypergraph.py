"""Hypergraph container and the data used by [B08] H2CL.

A hypergraph is stored as its incidence list ``incidence`` (LongTensor ``[2, nnz]``: row 0 node ids, row 1
hyperedge ids), the same layout as ``torch_geometric.nn.HypergraphConv``'s ``hyperedge_index``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import torch

from icml26.harness import validate as chk

log = logging.getLogger(__name__)


@dataclass
class Hypergraph:
    """Incidence-list hypergraph [B08].

    Args:
        incidence: LongTensor ``[2, nnz]``; ``incidence[0]`` node ids in ``[0, num_nodes)``, ``incidence[1]``
            hyperedge ids in ``[0, num_edges)``. Duplicate (node, edge) pairs are rejected.
        num_nodes: number of nodes (isolated nodes, in no hyperedge, are allowed and counted in
            ``isolated_nodes``; the encoder keeps their own features for them).
        num_edges: number of hyperedges. Every hyperedge id in ``[0, num_edges)`` must have a member: drop empty
            hyperedges with :meth:`from_edge_list` (which does it and says how many) before building.
    """

    incidence: torch.Tensor
    num_nodes: int
    num_edges: int
    isolated_nodes: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        inc = self.incidence
        if not isinstance(inc, torch.Tensor):
            raise TypeError(f"incidence must be a torch.LongTensor [2, nnz], got {type(inc).__name__}")
        if inc.dim() != 2 or inc.shape[0] != 2:
            raise ValueError(f"incidence must have shape [2, nnz] (node ids; hyperedge ids), got {tuple(inc.shape)}")
        if inc.dtype != torch.long:
            raise TypeError(f"incidence must be integer (torch.long), got {inc.dtype}; use .long()")
        for name, v in (("num_nodes", self.num_nodes), ("num_edges", self.num_edges)):
            if not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"{name} must be a non-negative int, got {v!r}")
        self.num_nodes, self.num_edges = int(self.num_nodes), int(self.num_edges)
        if inc.shape[1] == 0:
            raise ValueError("the hypergraph has no incidences (every hyperedge is empty); give at least one "
                             "hyperedge with a member")
        if int(inc[0].min()) < 0 or int(inc[0].max()) >= self.num_nodes:
            raise ValueError(f"node ids must lie in [0, {self.num_nodes}); got range "
                             f"[{int(inc[0].min())}, {int(inc[0].max())}]")
        if int(inc[1].min()) < 0 or int(inc[1].max()) >= self.num_edges:
            raise ValueError(f"hyperedge ids must lie in [0, {self.num_edges}); got range "
                             f"[{int(inc[1].min())}, {int(inc[1].max())}]")
        size = torch.bincount(inc[1], minlength=self.num_edges)
        if bool((size == 0).any()):
            empty = torch.nonzero(size == 0).flatten()[:5].tolist()
            raise ValueError(f"{int((size == 0).sum())} hyperedge(s) are empty (e.g. ids {empty}); remove them or "
                             "build with Hypergraph.from_edge_list(..., drop_empty=True)")
        key = inc[0] * self.num_edges + inc[1]
        if key.unique().numel() != key.numel():
            raise ValueError("incidence holds duplicate (node, hyperedge) pairs; list each membership once")
        self.isolated_nodes = int((self.node_degree() == 0).sum())

    # helper views

    @property
    def nnz(self) -> int:
        return int(self.incidence.shape[1])

    def node_degree(self) -> torch.Tensor:
        return torch.bincount(self.incidence[0], minlength=self.num_nodes)

    def edge_size(self) -> torch.Tensor:
        return torch.bincount(self.incidence[1], minlength=self.num_edges)

    def edges(self) -> list[list[int]]:
        """Members of each hyperedge (sorted node ids)."""
        out: list[list[int]] = [[] for _ in range(self.num_edges)]
        for v, e in self.incidence.t().tolist():
            out[e].append(v)
        return [sorted(m) for m in out]

    def to_dense(self) -> torch.Tensor:
        """Dense incidence matrix H (num_nodes x num_edges), H[v, e] = 1 when v in e."""
        H = torch.zeros(self.num_nodes, self.num_edges)
        H[self.incidence[0], self.incidence[1]] = 1.0
        return H

    def subset_incidences(self, keep: torch.Tensor) -> "Hypergraph":
        """Keep the incidences where ``keep`` is True; hyperedges left empty are removed and renumbered."""
        inc = self.incidence[:, keep]
        if inc.shape[1] == 0:
            inc = self.incidence[:, :1]
        used, new_e = torch.unique(inc[1], return_inverse=True)
        return Hypergraph(torch.stack([inc[0], new_e]), self.num_nodes, int(used.numel()))

    # constructors

    @classmethod
    def from_edge_list(cls, edges: Iterable[Sequence[int]], num_nodes: int | None = None, *,
                       drop_empty: bool = True) -> "Hypergraph":
        """Build from a list of hyperedges (each a sequence of node ids); repeated members count once.

        Empty hyperedges are dropped with a logged warning (``drop_empty=True``) or rejected.
        """
        edges = [list(dict.fromkeys(int(v) for v in e)) for e in edges]
        empty = sum(1 for e in edges if not e)
        if empty:
            if not drop_empty:
                raise ValueError(f"{empty} hyperedge(s) are empty; pass drop_empty=True to drop them")
            log.warning("dropped %d empty hyperedge(s)", empty)
            edges = [e for e in edges if e]
        if not edges:
            raise ValueError("no non-empty hyperedges given; a hypergraph needs at least one hyperedge")
        nodes = [v for e in edges for v in e]
        if min(nodes) < 0:
            raise ValueError(f"node ids must be >= 0, got {min(nodes)}")
        n = max(nodes) + 1 if num_nodes is None else int(num_nodes)
        eids = [i for i, e in enumerate(edges) for _ in e]
        inc = torch.tensor([nodes, eids], dtype=torch.long)
        return cls(inc, n, len(edges))

    @classmethod
    def from_incidence_matrix(cls, H: "np.ndarray | torch.Tensor") -> "Hypergraph":
        """Build from a dense 0/1 incidence matrix (num_nodes x num_edges); all-zero columns are dropped."""
        H = torch.as_tensor(np.asarray(H) if not isinstance(H, torch.Tensor) else H)
        if H.dim() != 2:
            raise ValueError(f"incidence matrix must be 2-D (nodes x hyperedges), got shape {tuple(H.shape)}")
        cols = (H != 0).any(0)
        if int((~cols).sum()):
            log.warning("dropped %d empty hyperedge column(s)", int((~cols).sum()))
        H = H[:, cols]
        v, e = torch.nonzero(H != 0, as_tuple=True)
        return cls(torch.stack([v, e]).long(), int(H.shape[0]), int(H.shape[1]))


def check_features(x: torch.Tensor, hg: Hypergraph, name: str = "x") -> torch.Tensor:
    """Validate node features against a hypergraph; returns float32 features."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor [num_nodes, dim], got {type(x).__name__}")
    if not isinstance(hg, Hypergraph):
        raise TypeError(f"hg must be a Hypergraph, got {type(hg).__name__}")
    if x.dim() != 2 or x.shape[0] != hg.num_nodes:
        raise ValueError(f"{name} must have shape [num_nodes={hg.num_nodes}, dim], got {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or inf; clean or impute the features first")
    return x.float()


# data

@dataclass
class HypergraphData:
    """Features, labels, hypergraph and the ground truth of which incidences are noise (for evaluation)."""

    x: torch.Tensor
    y: torch.Tensor
    hg: Hypergraph
    noisy: torch.Tensor   # bool [nnz]: incidence was injected as structural noise

    def __post_init__(self) -> None:
        check_features(self.x, self.hg)
        if not isinstance(self.y, torch.Tensor) or self.y.dim() != 1 or self.y.shape[0] != self.hg.num_nodes:
            raise ValueError(f"y must be a 1-D tensor of {self.hg.num_nodes} labels, got {chk.describe(self.y)}")
        chk.indices("y", self.y, int(self.y.max()) + 1 if self.y.numel() else 1)
        if (not isinstance(self.noisy, torch.Tensor) or self.noisy.dtype != torch.bool
                or tuple(self.noisy.shape) != (self.hg.nnz,)):
            raise ValueError(f"noisy must be a bool tensor of shape ({self.hg.nnz},) (one flag per incidence), got "
                             f"{chk.describe(self.noisy)}")


def hypergraph_sbm(num_nodes: int = 600, num_classes: int = 4, num_edges: int = 300, edge_size: int = 6,
                   homophily: float = 1.0, dim: int = 32, feature_snr: float = 0.6,
                   seed: int = 0) -> HypergraphData:
    """Hypergraph stochastic block model with Gaussian class features [B08, our testbed].

    Each hyperedge picks a class c uniformly and draws ``edge_size`` members: each from class c with probability
    ``homophily``, else from another class. Features x_v = mu_{y_v} + N(0, I) with random class means of norm
    ``feature_snr`` (in noise standard deviations), so a feature-only probe is imperfect and the hypergraph carries
    the rest of the signal.
    """
    num_nodes, num_edges, dim = (chk.positive_int("num_nodes", num_nodes), chk.positive_int("num_edges", num_edges),
                                 chk.positive_int("dim", dim))
    num_classes, edge_size = chk.positive_int("num_classes", num_classes), chk.positive_int("edge_size", edge_size)
    homophily = chk.in_range("homophily", homophily, 0.0, 1.0)
    feature_snr = chk.non_negative("feature_snr", feature_snr)
    seed = chk.non_negative_int("seed", seed)
    if edge_size < 2 or num_classes < 2 or num_nodes < num_classes * edge_size:
        raise ValueError("need edge_size >= 2, num_classes >= 2 and num_nodes >= num_classes * edge_size")
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(num_nodes) % num_classes)
    by_class = [np.flatnonzero(y == c) for c in range(num_classes)]
    mu = rng.standard_normal((num_classes, dim))
    mu *= feature_snr / np.linalg.norm(mu, axis=1, keepdims=True)
    x = mu[y] + rng.standard_normal((num_nodes, dim))
    edges, noisy = [], []
    for _ in range(num_edges):
        c = int(rng.integers(num_classes))
        members: list[int] = []
        flags: list[bool] = []
        while len(members) < edge_size:
            own = rng.random() < homophily
            pool = by_class[c] if own else np.flatnonzero(y != c)
            v = int(rng.choice(pool))
            if v not in members:
                members.append(v)
                flags.append(not own)
        edges.append(members)
        noisy.append(flags)
    hg = Hypergraph.from_edge_list(edges, num_nodes)
    return HypergraphData(torch.tensor(x, dtype=torch.float32), torch.tensor(y), hg,
                          torch.tensor([f for fl in noisy for f in fl]))


def digits_knn_hypergraph(k: int = 8, num_nodes: int | None = None, seed: int = 0) -> HypergraphData:
    """HGNN-style kNN hypergraph on scikit-learn's bundled digits [B08 testbed].

    Node = image (64 pixel features, scaled to [0, 1]); each node with its k nearest neighbours (Euclidean on
    pixels) forms one hyperedge. ``num_nodes`` subsamples the 1,797 images (seeded).
    """
    from sklearn.datasets import load_digits
    from sklearn.neighbors import NearestNeighbors

    k = chk.positive_int("k", k)
    seed = chk.non_negative_int("seed", seed)
    if num_nodes is not None:
        num_nodes = chk.positive_int("num_nodes", num_nodes, minimum=k + 1)
    X, y = load_digits(return_X_y=True)
    if num_nodes is not None and num_nodes < len(y):
        idx = np.sort(np.random.default_rng(seed).choice(len(y), num_nodes, replace=False))
        X, y = X[idx], y[idx]
    X = X / 16.0
    nn_ = NearestNeighbors(n_neighbors=k + 1).fit(X)
    _, nbr = nn_.kneighbors(X)
    edges = [[i] + [int(j) for j in row if j != i][:k] for i, row in enumerate(nbr)]
    hg = Hypergraph.from_edge_list(edges, len(y))
    # a kNN hyperedge's "class" is its centre's label; a member of another class is a natural noisy incidence
    yc = np.repeat(y, [len(e) for e in edges])
    noisy = torch.tensor(y[hg.incidence[0].numpy()] != yc)
    return HypergraphData(torch.tensor(X, dtype=torch.float32), torch.tensor(y), hg, noisy)


def add_structural_noise(data: HypergraphData, frac: float, seed: int = 0) -> HypergraphData:
    """Replace a share ``frac`` of each hyperedge's members by random nodes of other classes [B08].

    The "class" of a hyperedge is the majority label of its members. Replaced incidences are flagged in
    ``noisy``; the hyperedge keeps its size (a replacement already in the hyperedge is redrawn).
    """
    if not isinstance(data, HypergraphData):
        raise TypeError(f"data must be a HypergraphData, got {type(data).__name__}")
    frac = chk.in_range("frac", frac, 0.0, 1.0, high_open=True)
    seed = chk.non_negative_int("seed", seed)
    rng = np.random.default_rng(seed)
    y = data.y.numpy()
    inc, noisy0 = data.hg.incidence.numpy(), data.noisy.numpy()
    new_edges, new_noisy = [], []
    order = np.argsort(inc[1], kind="stable")
    starts = np.r_[0, np.cumsum(np.bincount(inc[1], minlength=data.hg.num_edges))]
    for e in range(data.hg.num_edges):
        pos = order[starts[e]:starts[e + 1]]
        mem, fl = list(inc[0, pos]), list(noisy0[pos])
        c = int(np.bincount(y[mem]).argmax())
        n_rep = int(round(frac * len(mem)))
        others = np.flatnonzero(y != c)
        for j in rng.choice(len(mem), n_rep, replace=False):
            while True:
                v = int(rng.choice(others))
                if v not in mem:
                    break
            mem[j], fl[j] = v, True
        new_edges.append(mem)
        new_noisy.extend(fl)
    hg = Hypergraph.from_edge_list(new_edges, data.hg.num_nodes)
    return HypergraphData(data.x, data.y, hg, torch.tensor(new_noisy))
