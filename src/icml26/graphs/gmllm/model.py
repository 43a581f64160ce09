"""Node encoders, the GNNs trained on project labels only, and their attributions [A04].

Node features  x_v = [ encoder(text_v) ; structure_v ],  structure = type one-hot, log degrees, depth, behaviour
multi-hot. Two graph classifiers:

``CodeGNN`` (default, ``arch="rgcn"``): 3 relational GCN layers (relation-specific weights, the math of
torch_geometric's ``RGCNConv`` with mean aggregation, in one message-passing call so that explainers can mask
edges):
    h_v^(l+1) = ReLU( W_0 h_v^(l) + b + sum_r sum_{u in N_r(v)} m_uv W_r h_u^(l) / |N_r(v)| ),   r over the
                typed edges and their reverses, m_uv = 1 (an explainer's edge mask when explaining);
    p(malicious | G) = softmax( MLP( [max_v h_v ; mean_v h_v] ) ).
``OfficialGCN`` (``arch="gcn"``): the official repository's ``GCNWithBehavior`` layout: 2 ``GCNConv`` layers
(hidden 64, ReLU, dropout 0.7), mean-pool readout, one linear layer; edge types are not used.

Interpretation (``node_attribution``):
    ``"grad_x_input"``: s_v = | sum_j x_vj * d(logit_1 - logit_0)/d x_vj |;
    ``"gnnexplainer"``: GNNExplainer (Ying et al. 2019; torch_geometric.explain) learns an edge mask
        M = sigmoid(W) maximising log p(y_hat | G masked by M) - 0.005 sum(M) - 1.0 mean(entropy(M));
        s_v = sum of M over the edges incident to v (the official ``extract2Json``: row + column sums of the
        masked adjacency).
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icml26.harness import validate

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
        self.dim = validate.positive_int("dim", dim)
        self.n_features = validate.positive_int("n_features", n_features)
        self.random_state = random_state

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

    if not callable(getattr(encoder, "transform", None)):
        raise TypeError(f"encoder must be a fitted NodeEncoder (with .transform(texts)), got {type(encoder).__name__}")
    if label is not None and label not in (0, 1):
        raise ValueError(f"label must be 0 (benign), 1 (malicious) or None, got {label!r}")
    x = np.hstack([encoder.transform(node_texts(g)), degree_features(g)])
    ei, et = g.edge_index()
    ei = np.hstack([ei, ei[::-1]])
    et = np.concatenate([et, et + len(EDGE_TYPES)])
    d = Data(x=torch.from_numpy(x), edge_index=torch.from_numpy(ei.copy()), edge_type=torch.from_numpy(et))
    if label is not None:
        d.y = torch.tensor([int(label)])
    return d


def _rel_conv_class():
    from torch_geometric.nn import MessagePassing

    class RelGraphConv(MessagePassing):
        """Relational graph convolution with per-relation mean aggregation (``RGCNConv``'s math, no bases), as
        one ``propagate`` over all edges so that torch_geometric's explainers can put a mask on every message."""

        def __init__(self, in_dim: int, out_dim: int, num_relations: int) -> None:
            super().__init__(aggr="add")
            self.in_dim, self.out_dim, self.num_relations = in_dim, out_dim, num_relations
            self.weight = nn.Parameter(torch.empty(num_relations, in_dim, out_dim))
            self.root = nn.Parameter(torch.empty(in_dim, out_dim))
            self.bias = nn.Parameter(torch.zeros(out_dim))
            nn.init.xavier_uniform_(self.weight)
            nn.init.xavier_uniform_(self.root)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor) -> torch.Tensor:
            n = x.shape[0]
            xw = torch.einsum("ni,rio->nro", x, self.weight).reshape(n, -1)
            dst = edge_index[1]
            key = dst * self.num_relations + edge_type
            cnt = torch.bincount(key, minlength=n * self.num_relations).to(x.dtype)
            norm = 1.0 / cnt[key].clamp_min(1.0)
            out = self.propagate(edge_index, xw=xw, edge_type=edge_type, norm=norm, size=(n, n))
            return out + x @ self.root + self.bias

        def message(self, xw_j: torch.Tensor, edge_type: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
            xw_j = xw_j.view(-1, self.num_relations, self.out_dim)
            return xw_j[torch.arange(xw_j.shape[0]), edge_type] * norm.unsqueeze(-1)

    return RelGraphConv


class CodeGNN(nn.Module):
    """Relational GCN graph classifier with max + mean readout [A04]."""

    def __init__(self, in_dim: int, hid: int = 64, layers: int = 3, num_relations: int = NUM_RELATIONS) -> None:
        super().__init__()
        for name, value in (("in_dim", in_dim), ("hid", hid), ("layers", layers), ("num_relations", num_relations)):
            validate.positive_int(name, value)
        conv = _rel_conv_class()
        dims = [in_dim] + [hid] * layers
        self.convs = nn.ModuleList(conv(dims[i], dims[i + 1], num_relations) for i in range(layers))
        self.head = nn.Sequential(nn.Linear(2 * hid, hid), nn.ReLU(), nn.Linear(hid, 2))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor,
                batch: torch.Tensor | None = None) -> torch.Tensor:
        from torch_geometric.nn import global_max_pool, global_mean_pool

        for conv in self.convs:
            x = F.relu(conv(x, edge_index, edge_type))
        if batch is None:
            batch = torch.zeros(x.shape[0], dtype=torch.long)
        return self.head(torch.cat([global_max_pool(x, batch), global_mean_pool(x, batch)], -1))


class OfficialGCN(nn.Module):
    """The official code's classifier layout (``GCNWithBehavior`` in ``distinguish_GNN_2.py``) on our node
    features: x -> GCNConv -> ReLU -> dropout(0.7) -> GCNConv -> ReLU -> dropout -> mean pool -> dropout -> linear.
    (The official model embeds each node's qualified name (64-d) and type (16-d) and concatenates the behaviour
    multi-hot; here the hashed name/call text and the structure features play that part.) ``edge_type`` is
    accepted and ignored, so both classifiers share one call signature."""

    def __init__(self, in_dim: int, hid: int = 64, dropout: float = 0.7) -> None:
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.conv1, self.conv2 = GCNConv(in_dim, hid), GCNConv(hid, hid)
        self.classifier = nn.Linear(hid, 2)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor | None = None,
                batch: torch.Tensor | None = None) -> torch.Tensor:
        from torch_geometric.nn import global_mean_pool

        x = self.dropout(self.conv1(x, edge_index).relu())
        x = self.dropout(self.conv2(x, edge_index).relu())
        if batch is None:
            batch = torch.zeros(x.shape[0], dtype=torch.long)
        return self.classifier(self.dropout(global_mean_pool(x, batch)))


ARCHS = {"rgcn": CodeGNN, "gcn": OfficialGCN}


def train_gnn(data: list, *, hid: int = 64, epochs: int = 60, lr: float = 5e-3, batch_size: int = 16,
              seed: int = 0, arch: str = "rgcn", weight_decay: float = 1e-4, class_weighted: bool = True
              ) -> nn.Module:
    """Train a graph classifier on graph labels only (cross-entropy, Adam, mini-batches).

    ``arch``: ``"rgcn"`` (:class:`CodeGNN`, default) or ``"gcn"`` (:class:`OfficialGCN`, the official layout).
    ``epochs=0`` returns the randomly initialised model (the untrained control), in eval mode.
    ``class_weighted``: weight the loss by inverse class frequency (ours); the official ``distinguish_GNN_2.py``
    recipe is ``epochs=60, batch_size=128, weight_decay=1e-3, class_weighted=False`` (it also passes edge weights,
    which our graphs do not have).
    """
    from torch_geometric.loader import DataLoader

    if not data:
        raise ValueError("no training graphs")
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}; use one of {sorted(ARCHS)}")
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"epochs must be an int >= 0, got {epochs!r}")
    validate.positive_int("hid", hid)
    validate.positive_int("batch_size", batch_size)
    validate.positive("lr", lr)
    weight_decay = validate.non_negative("weight_decay", weight_decay)
    if not isinstance(class_weighted, bool):
        raise TypeError(f"class_weighted must be True or False, got {class_weighted!r}")
    torch.manual_seed(seed)
    y = torch.cat([d.y for d in data])
    counts = torch.bincount(y, minlength=2).float().clamp_min(1)
    weight = counts.sum() / (2 * counts) if class_weighted else None
    model = ARCHS[arch](data[0].x.shape[1], hid)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
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
def predict_proba(model: nn.Module, data: list) -> np.ndarray:
    """p(malicious) per graph."""
    from torch_geometric.loader import DataLoader

    if not data:
        raise ValueError("no graphs to score: pass a non-empty list of to_pyg graphs")
    out = []
    for b in DataLoader(data, batch_size=64):
        out.append(torch.softmax(model(b.x, b.edge_index, b.edge_type, b.batch), -1)[:, 1])
    return torch.cat(out).numpy()


ATTRIBUTIONS = ("grad_x_input", "gnnexplainer")


def node_attribution(model: nn.Module, d, method: str = "grad_x_input", *, epochs: int = 100, lr: float = 0.1,
                     seed: int = 0) -> np.ndarray:
    """Score of every node for the model's malicious-vs-benign decision on graph ``d`` [A04 interpretation].

    ``method="grad_x_input"``: |sum_j x_vj d(logit_1 - logit_0)/d x_vj|.
    ``method="gnnexplainer"``: GNNExplainer's edge mask (``epochs`` Adam steps at ``lr``; the official run uses
    100 steps at 0.1), explaining the model's own prediction; node score = sum of the mask over incident edges.
    """
    if method not in ATTRIBUTIONS:
        raise ValueError(f"unknown attribution {method!r}; use one of {ATTRIBUTIONS}")
    model.eval()
    if method == "grad_x_input":
        x = d.x.clone().requires_grad_(True)
        logits = model(x, d.edge_index, d.edge_type)
        (logits[0, 1] - logits[0, 0]).backward()
        return (x.grad * x).sum(-1).abs().detach().numpy()
    edge_mask = explain_edges(model, d.x, d.edge_index, d.edge_type, epochs=epochs, lr=lr, seed=seed)
    s = torch.zeros(d.x.shape[0])
    s.index_add_(0, d.edge_index[0], edge_mask)
    s.index_add_(0, d.edge_index[1], edge_mask)
    return s.numpy()


def explain_edges(model: nn.Module, x: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor | None = None,
                  *, epochs: int = 100, lr: float = 0.1, seed: int = 0) -> torch.Tensor:
    """GNNExplainer edge mask (one value in [0, 1] per edge) for a graph classifier's prediction on one graph,
    via ``torch_geometric.explain`` (PyG's defaults for the size and entropy penalties: 0.005 and 1.0).

    As in the official GNNExplainer (``explainer/explain.py``) a feature mask is learned jointly with the edge
    mask (``node_mask_type="common_attributes"``; PyG's feature penalties 1.0 and 0.1 are the official
    ``feat_size`` / ``feat_ent``), and the edge mask is symmetrised, (M + M^T) / 2: each edge's value is averaged
    with its reverse edge's where the reverse is in ``edge_index``."""
    from torch_geometric.explain import Explainer, GNNExplainer

    if edge_index.shape[1] == 0:
        return torch.zeros(0)

    class _Wrap(nn.Module):
        def __init__(self, m: nn.Module) -> None:
            super().__init__()
            self.m = m

        def forward(self, x, edge_index, edge_type=None):
            return self.m(x, edge_index, edge_type)

    torch.manual_seed(seed)
    explainer = Explainer(_Wrap(model), GNNExplainer(epochs=epochs, lr=lr), explanation_type="model",
                          edge_mask_type="object", node_mask_type="common_attributes",
                          model_config=dict(mode="multiclass_classification", task_level="graph", return_type="raw"))
    kw = {} if edge_type is None else {"edge_type": edge_type}
    m = explainer(x, edge_index, **kw).edge_mask.detach()
    return symmetrise_edge_mask(m, edge_index)


def symmetrise_edge_mask(mask: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """(M + M^T) / 2 on an edge list: each edge (i, j) gets the mean of its value and the mean value of the
    (j, i) edges; edges without a reverse keep their value."""
    if mask.ndim != 1 or mask.shape[0] != edge_index.shape[1]:
        raise ValueError("mask must have one value per column of edge_index")
    n = int(edge_index.max()) + 1 if edge_index.numel() else 0
    key = edge_index[0] * n + edge_index[1]
    rkey = edge_index[1] * n + edge_index[0]
    uniq, inv = torch.unique(key, return_inverse=True)
    tot = torch.zeros(len(uniq), dtype=mask.dtype).index_add_(0, inv, mask)
    cnt = torch.zeros(len(uniq), dtype=mask.dtype).index_add_(0, inv, torch.ones_like(mask))
    mean = tot / cnt
    pos = torch.searchsorted(uniq, rkey).clamp(max=max(len(uniq) - 1, 0))
    has = uniq[pos] == rkey
    out = mask.clone()
    out[has] = 0.5 * (mask[has] + mean[pos[has]])
    return out
