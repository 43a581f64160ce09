"""Node2Vec for [B02]: the node2vec biased random walk (Grover & Leskovec 2016), vectorised over walkers, and
skip-gram embeddings of the walks with gensim's Word2Vec; plus the full-softmax "Node2VecCE" analogue the paper
analyses.

Biased walk. A walker that moved t -> v picks its next node x among v's neighbours with weight

    1/p  if x == t,      1  if x is a neighbour of t,      1/q  otherwise.

Node2VecCE (the paper's analytic model; official ``node2vec_notebook_helpers._train_node2vec_tied``). Tied
embeddings E (N x d), logits s_uv = <e_u, e_v>, cross-entropy over each node's neighbours, no weight decay, no rank
limit, full-batch GD. The official loss *sums over nodes the mean over each node's neighbours*
(``reduction="official"``, the default):

    L(E) = sum_u (1/c_u) sum_(u,v) [ -s_uv + log sum_w exp(s_uw) ]
    dL/dE = (G + G^T) E,   G = P - C / c        (the paper's G = P - Y)

where C_uw counts the facts (u, w), c_u = sum_w C_uw and P = row-softmax(E E^T). ``reduction="edge_mean"`` averages
over the M facts instead, L = (1/M) sum_(u,v) [...], G = (diag(c) P - C) / M; the two agree up to the factor N/M
only on regular graphs (on the path-star their gradients point differently). Official defaults: N(0, 1) init
(``nn.Embedding``), d = 100, lr 0.01, 10,000 epochs, recovery judged by top-5 dot-product neighbours. Gradient
descent on L drifts into the top eigen-directions of the graph's adjacency: the spectral bias.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import torch
from torch import nn

from icml26.harness import validate as v

from .graphs import validate_graph

# biased random walks

def node2vec_walks(G: nx.Graph, num_walks: int = 10, walk_length: int = 20, p: float = 1.0, q: float = 1.0,
                   seed: int = 0) -> np.ndarray:
    """``num_walks`` biased walks from every node, shape (num_walks * N, walk_length), all walkers stepped together.

    Neighbour lists are a padded (N, max_deg) table; each step evaluates the weights of every candidate of every
    walker at once and samples by inverse CDF.
    """
    n = validate_graph(G)
    num_walks, walk_length = v.positive_int("num_walks", num_walks), v.positive_int("walk_length", walk_length, minimum=2)
    p, q, seed = v.positive("p", p), v.positive("q", q), v.non_negative_int("seed", seed)
    rng = np.random.default_rng(seed)
    A = nx.to_numpy_array(G, nodelist=range(n), weight=None) > 0
    np.fill_diagonal(A, False)
    deg = A.sum(1)
    nbr = np.full((n, int(deg.max())), -1, dtype=np.int64)
    for u in range(n):
        nz = np.flatnonzero(A[u])
        nbr[u, : len(nz)] = nz
    valid = nbr >= 0
    walks = np.empty((int(num_walks) * n, int(walk_length)), dtype=np.int64)
    walks[:, 0] = np.tile(np.arange(n), int(num_walks))
    cur = walks[:, 0]
    first = np.minimum((rng.random(len(cur)) * deg[cur]).astype(np.int64), deg[cur] - 1)
    walks[:, 1] = nbr[cur, first]
    for t in range(2, int(walk_length)):
        prev, cur = walks[:, t - 2], walks[:, t - 1]
        cand = nbr[cur]                                               # (W, max_deg)
        ok = valid[cur]
        safe = np.where(ok, cand, 0)
        w = np.where(A[prev[:, None], safe], 1.0, 1.0 / q)
        w = np.where(safe == prev[:, None], 1.0 / p, w) * ok
        cdf = np.cumsum(w, 1)
        r = rng.random(len(cur))[:, None] * cdf[:, -1:]
        idx = np.minimum((cdf <= r).sum(1), cdf.shape[1] - 1)
        walks[:, t] = cand[np.arange(len(cur)), idx]
    return walks


def node2vec_embedding(G: nx.Graph, dim: int = 32, num_walks: int = 20, walk_length: int = 20, window: int = 5,
                       p: float = 1.0, q: float = 1.0, epochs: int = 5, negative: int = 5,
                       seed: int = 0) -> np.ndarray:
    """Node2Vec: skip-gram with negative sampling (gensim ``Word2Vec``, one worker, so it is deterministic) on
    :func:`node2vec_walks`. Returns the (N, dim) input-embedding matrix, row u for node u."""
    dim, window = v.positive_int("dim", dim), v.positive_int("window", window)
    epochs, negative = v.positive_int("epochs", epochs), v.non_negative_int("negative", negative)
    from gensim.models import Word2Vec

    walks = node2vec_walks(G, num_walks, walk_length, p, q, seed)
    sentences = [[str(v) for v in w] for w in walks.tolist()]
    model = Word2Vec(sentences, vector_size=int(dim), window=int(window), min_count=0, sg=1, negative=int(negative),
                     workers=1, seed=int(seed), epochs=int(epochs), hashfxn=_stable_hash)
    return np.stack([model.wv[str(u)] for u in range(G.number_of_nodes())]).astype(np.float64)


def _stable_hash(s: str) -> int:
    """Deterministic string hash for gensim's per-word seeding (Python's ``hash`` changes between processes)."""
    import zlib

    return zlib.crc32(s.encode())


# the analytic model

REDUCTIONS = ("official", "edge_mean")


class Node2VecCE(nn.Module):
    """Full-softmax Node2Vec analogue of [B02]: logits s_uv = <e_u, e'_v> (e' = e when tied), CE over neighbours.

    Defaults are the official ones: d = 100, N(0, init_scale^2) init with init_scale 1, the official reduction
    (sum over nodes of the mean over neighbours); ``fit`` defaults to lr 0.01 and 10,000 GD steps.
    """

    def __init__(self, num_nodes: int, dim: int = 100, tied: bool = True, init_scale: float = 1.0, seed: int = 0,
                 reduction: str = "official"):
        super().__init__()
        num_nodes, dim = v.positive_int("num_nodes", num_nodes, minimum=2), v.positive_int("dim", dim)
        init_scale, seed = v.non_negative("init_scale", init_scale), v.non_negative_int("seed", seed)
        v.one_of("reduction", reduction, REDUCTIONS)
        if not isinstance(tied, (bool, np.bool_)):
            raise TypeError(f"tied must be True or False, got {v.describe(tied)}")
        g = torch.Generator().manual_seed(int(seed))
        self.emb = nn.Parameter(init_scale * torch.randn(int(num_nodes), int(dim), generator=g, dtype=torch.float64))
        self.out = None if tied else nn.Parameter(
            init_scale * torch.randn(int(num_nodes), int(dim), generator=g, dtype=torch.float64))
        self.tied = bool(tied)
        self.reduction = reduction

    def logits(self) -> torch.Tensor:
        return self.emb @ (self.emb if self.out is None else self.out).T

    def _check_edges(self, edges) -> np.ndarray:
        e = np.asarray(v.finite("edges", edges))
        if e.ndim != 2 or e.shape[1] != 2 or e.size == 0:
            raise ValueError(f"edges must be a non-empty (M, 2) array of (u, v), got shape {e.shape}")
        v.indices("edges", e, self.emb.shape[0])
        return e.astype(np.int64)

    def _edges(self, edges) -> torch.Tensor:
        return torch.as_tensor(self._check_edges(edges), dtype=torch.long)

    def loss(self, edges) -> torch.Tensor:
        """Cross-entropy of predicting v from u over the edge facts ``edges`` (M, 2), reduced as ``reduction``."""
        e = self._edges(edges)
        ce = nn.functional.cross_entropy(self.logits()[e[:, 0]], e[:, 1], reduction="none")
        if self.reduction == "edge_mean":
            return ce.mean()
        c = torch.bincount(e[:, 0], minlength=self.emb.shape[0]).to(ce.dtype)
        return (ce / c[e[:, 0]]).sum()

    def _counts(self, edges) -> tuple[np.ndarray, int]:
        e = self._check_edges(edges)
        n = self.emb.shape[0]
        C = np.zeros((n, n))
        np.add.at(C, (e[:, 0], e[:, 1]), 1.0)
        return C, len(e)

    @staticmethod
    def _logit_grad(S: np.ndarray, C: np.ndarray, m: int, reduction: str) -> np.ndarray:
        """dL/dS for logits S: G = (diag(c) P - C) / M (edge_mean) or P - C / c (official), P = softmax rows."""
        P = np.exp(S - S.max(1, keepdims=True))
        P /= P.sum(1, keepdims=True)
        c = C.sum(1, keepdims=True)
        if reduction == "edge_mean":
            return (c * P - C) / m
        return np.where(c > 0, P - C / np.maximum(c, 1.0), 0.0)      # nodes with no facts add nothing

    @staticmethod
    def _grad(E: np.ndarray, C: np.ndarray, m: int, reduction: str = "official") -> np.ndarray:
        G = Node2VecCE._logit_grad(E @ E.T, C, m, reduction)
        return (G + G.T) @ E

    def analytic_grad(self, edges) -> torch.Tensor:
        """dL/dE = (G + G^T) E (tied model only; G as in the module docstring for this ``reduction``)."""
        if not self.tied:
            raise ValueError("the closed-form gradient is for the tied model (tied=True)")
        C, m = self._counts(edges)
        return torch.from_numpy(self._grad(self.emb.detach().numpy(), C, m, self.reduction))

    def fit(self, edges, lr: float = 0.01, steps: int = 10_000, weight_decay: float = 0.0) -> "Node2VecCE":
        """Full-batch gradient descent, E <- E - lr (dL/dE + weight_decay E) (the paper's analysis has no weight
        decay; the official defaults are lr 0.01 and 10,000 epochs). The tied model steps with the closed-form
        gradient in NumPy (equal to autograd, tested); the untied one with its closed form dL/dE = G O, dL/dO = G^T E."""
        lr, steps = v.positive("lr", lr), v.non_negative_int("steps", steps)
        weight_decay = v.non_negative("weight_decay", weight_decay)
        if self.tied:
            C, m = self._counts(edges)
            E = self.emb.detach().numpy().copy()
            for _ in range(int(steps)):
                E -= lr * (self._grad(E, C, m, self.reduction) + weight_decay * E)
            with torch.no_grad():
                self.emb.copy_(torch.from_numpy(E))
            return self
        # untied: dL/dE = G O, dL/dO = G^T E with G = dL/dS (equal to autograd, tested)
        C, m = self._counts(edges)
        E, Out = self.emb.detach().numpy().copy(), self.out.detach().numpy().copy()
        for _ in range(int(steps)):
            G = self._logit_grad(E @ Out.T, C, m, self.reduction)
            E, Out = E - lr * (G @ Out + weight_decay * E), Out - lr * (G.T @ E + weight_decay * Out)
        with torch.no_grad():
            self.emb.copy_(torch.from_numpy(E))
            self.out.copy_(torch.from_numpy(Out))
        return self

    @property
    def embedding(self) -> np.ndarray:
        return self.emb.detach().numpy().copy()
