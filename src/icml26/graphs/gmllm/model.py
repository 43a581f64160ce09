"""Node encoders, the relational GNN trained on project labels only, and its attribution [A04].

Node features  x_v = [ encoder(text_v) ; structure_v ],  structure = type one-hot, log degrees, depth, behaviour
multi-hot. GNN (3 layers, relation-specific weights, torch_geometric ``RGCNConv``):
    h_v^(l+1) = ReLU( W_0 h_v^(l) + sum_r sum_{u in N_r(v)} W_r h_u^(l) / |N_r(v)| ),   r over the typed edges
                and their reverses;
    p(malicious | G) = softmax( MLP( [max_v h_v ; mean_v h_v] ) ).
Interpretation: node score s_v = | sum_j x_vj * d(logit_1 - logit_0)/d x_vj |  (gradient x input).
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .codegraph import EDGE_TYPES, CodeGraph, degree_features

NUM_RELATIONS = 2 * len(EDGE_TYPES)


class NodeEncoder(Protocol):
    """Pluggable node text encoder: ``fit`` on training graphs' node texts, ``transform`` to a float matrix."""

    def fit(self, texts: Sequence[str]) -> "NodeEncoder": ...

    def transform(self, texts: Sequence[str]) -> np.ndarray: ...


class HashingEncoder:
    """Weight-free default encoder: identifier words + call names, stable feature hashing (unigrams and
    bigrams), TF-IDF and truncated SVD to ``dim`` dimensions. Deterministic given ``random_state``."""

    def __init__(self, dim: int = 32, n_features: int = 2 ** 12, random_state: int = 0) -> None:
        self.dim, self.n_features, self.random_state = dim, n_features, random_state

    def fit(self, texts: Sequence[str]) -> "HashingEncoder":
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer

        self.hv_ = HashingVectorizer(n_features=self.n_features, alternate_sign=False, ngram_range=(1, 2),
                                     token_pattern=r"[A-Za-z_][A-Za-z0-9_]+", norm=None)
        counts = self.hv_.transform(texts)
        self.tfidf_ = TfidfTransformer().fit(counts)
        k = max(1, min(self.dim, counts.shape[1] - 1, counts.shape[0] - 1))
        self.svd_ = TruncatedSVD(k, random_state=self.random_state).fit(self.tfidf_.transform(counts))
        return self

    def transform(self, texts: Sequence[str]) -> np.ndarray:
        if not hasattr(self, "svd_"):
            raise RuntimeError("HashingEncoder is not fitted; call fit(texts) on training node texts first")
        z = self.svd_.transform(self.tfidf_.transform(self.hv_.transform(texts))).astype(np.float32)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, : z.shape[1]] = z
        return out


def node_texts(g: CodeGraph) -> list[str]:
    return [f"{n.kind} {n.text}" for n in g.nodes]


def to_pyg(g: CodeGraph, encoder: NodeEncoder, label: int | None = None):
    """``torch_geometric.data.Data`` with x, edge_index (both directions; reverse edges get their own relation),
    edge_type, y (when given) and the node kinds."""
    from torch_geometric.data import Data

    x = np.hstack([encoder.transform(node_texts(g)), degree_features(g)])
    ei, et = g.edge_index()
    ei = np.hstack([ei, ei[::-1]])
    et = np.concatenate([et, et + len(EDGE_TYPES)])
    d = Data(x=torch.from_numpy(x), edge_index=torch.from_numpy(ei.copy()), edge_type=torch.from_numpy(et))
    if label is not None:
        d.y = torch.tensor([int(label)])
    return d


class CodeGNN(nn.Module):
    """Relational GCN graph classifier with max + mean readout [A04]."""

    def __init__(self, in_dim: int, hid: int = 64, layers: int = 3, num_relations: int = NUM_RELATIONS) -> None:
        super().__init__()
        from torch_geometric.nn import RGCNConv

        dims = [in_dim] + [hid] * layers
        self.convs = nn.ModuleList(RGCNConv(dims[i], dims[i + 1], num_relations) for i in range(layers))
        self.head = nn.Sequential(nn.Linear(2 * hid, hid), nn.ReLU(), nn.Linear(hid, 2))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor,
                batch: torch.Tensor | None = None) -> torch.Tensor:
        from torch_geometric.nn import global_max_pool, global_mean_pool

        for conv in self.convs:
            x = F.relu(conv(x, edge_index, edge_type))
        if batch is None:
            batch = torch.zeros(x.shape[0], dtype=torch.long)
        return self.head(torch.cat([global_max_pool(x, batch), global_mean_pool(x, batch)], -1))


def train_gnn(data: list, *, hid: int = 64, epochs: int = 60, lr: float = 5e-3, batch_size: int = 16,
              seed: int = 0) -> CodeGNN:
    """Train ``CodeGNN`` on graph labels only (class-weighted cross-entropy, Adam, mini-batches)."""
    from torch_geometric.loader import DataLoader

    if not data:
        raise ValueError("no training graphs")
    torch.manual_seed(seed)
    y = torch.cat([d.y for d in data])
    counts = torch.bincount(y, minlength=2).float().clamp_min(1)
    weight = counts.sum() / (2 * counts)
    model = CodeGNN(data[0].x.shape[1], hid)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(seed)
    loader = DataLoader(data, batch_size=batch_size, shuffle=True, generator=gen)
    model.train()
    for _ in range(epochs):
        for b in loader:
            opt.zero_grad()
            F.cross_entropy(model(b.x, b.edge_index, b.edge_type, b.batch), b.y, weight=weight).backward()
            opt.step()
    model.eval()
    return model


@torch.no_grad()
def predict_proba(model: CodeGNN, data: list) -> np.ndarray:
    """p(malicious) per graph."""
    from torch_geometric.loader import DataLoader

    out = []
    for b in DataLoader(data, batch_size=64):
        out.append(torch.softmax(model(b.x, b.edge_index, b.edge_type, b.batch), -1)[:, 1])
    return torch.cat(out).numpy()


def node_attribution(model: CodeGNN, d) -> np.ndarray:
    """Gradient x input score of every node for the malicious-vs-benign logit margin [A04 interpretation]."""
    x = d.x.clone().requires_grad_(True)
    logits = model(x, d.edge_index, d.edge_type)
    (logits[0, 1] - logits[0, 0]).backward()
    return (x.grad * x).sum(-1).abs().detach().numpy()
