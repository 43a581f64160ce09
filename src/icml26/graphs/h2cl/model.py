"""H2CL: heterogeneity-aware view generator, re-weighting hypergraph encoder, contrastive objective [B08].

View generator (GCA-style adaptive incidence dropping, reconstructed):
    p_ve = min(p_cap, p_m (h_ve - h_min) / (mean(h) - h_min)),   then uniform feature masking.
Encoder layer (``HHConv``), with u_v = W1 f_v (messages) and s_v = W0 f_v (self term):
    gbar_e = mean_{v in e} u_v;   a_ve = exp(-beta d(u_v, gbar_e));   g_e = sum_v a_ve u_v / sum_v a_ve
    b_ve = exp(-beta d(u_v, g_e));   f_v' = act((lam s_v + sum_{e ni v} b_ve g_e) / (lam + sum_e b_ve))
    d = 1 - cos; beta learnable (init 1); lam = 1. With ``reweight=False`` a = b = 1 (plain mean encoder).
Objective: symmetric GRACE InfoNCE (tau = 0.5) between projected node embeddings of the two views.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from icml26.harness import validate as chk

from .heterogeneity import edge_mean, heterogeneity, node_update
from .hypergraph import Hypergraph, check_features

# view generation

@dataclass
class HeteroAwareViewGenerator:
    """Drop incidences with probability growing with heterogeneity, then mask feature columns [B08].

    p_ve = min(p_cap, p_mean (h_ve - h_min) / (mean h - h_min)); if every h is equal the drop is uniform at
    p_mean. ``uniform=True`` ignores h (the TriCL-style random augmentation baseline).
    """

    p_mean: float = 0.3
    p_cap: float = 0.7
    feat_drop: float = 0.2
    uniform: bool = False

    def __post_init__(self) -> None:
        for name in ("p_mean", "p_cap", "feat_drop"):
            setattr(self, name, chk.in_range(name, getattr(self, name), 0.0, 1.0, high_open=True))

    def drop_probabilities(self, h: torch.Tensor) -> torch.Tensor:
        if not isinstance(h, torch.Tensor):
            raise TypeError(f"h must be a torch.Tensor (heterogeneity per incidence), got {type(h).__name__}")
        chk.ndim("h", h, 1)
        chk.non_empty("h", h)
        chk.finite("h", h)
        if self.uniform:
            return torch.full_like(h, min(self.p_mean, self.p_cap))
        h_min, h_mean = h.min(), h.mean()
        if float(h_mean - h_min) <= 1e-12:
            return torch.full_like(h, min(self.p_mean, self.p_cap))
        return (self.p_mean * (h - h_min) / (h_mean - h_min)).clamp(max=self.p_cap)

    def __call__(self, x: torch.Tensor, hg: Hypergraph, h: torch.Tensor,
                 generator: torch.Generator | None = None) -> tuple[torch.Tensor, Hypergraph]:
        check_features(x, hg)
        if h.shape != (hg.nnz,):
            raise ValueError(f"h must have shape ({hg.nnz},) (one value per incidence), got {tuple(h.shape)}")
        p = self.drop_probabilities(h)
        keep = torch.rand(p.shape, generator=generator) >= p
        cols = (torch.rand(x.shape[1], generator=generator) >= self.feat_drop).to(x.dtype)
        return x * cols, hg.subset_incidences(keep)


# encoder

def _cos_dist(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return 1.0 - F.cosine_similarity(a, b, dim=-1, eps=1e-8)


class HHConv(nn.Module):
    """One heterogeneity-aware hypergraph layer (node -> hyperedge -> node with re-weighting) [B08]."""

    def __init__(self, in_dim: int, out_dim: int, *, beta: float = 1.0, lam: float = 1.0, reweight: bool = True,
                 act: bool = True) -> None:
        in_dim, out_dim = chk.positive_int("in_dim", in_dim), chk.positive_int("out_dim", out_dim)
        beta, lam = chk.finite_number("beta", beta), chk.positive("lam", lam)
        super().__init__()
        self.W0 = nn.Linear(in_dim, out_dim)
        self.W1 = nn.Linear(in_dim, out_dim, bias=False)
        self.beta = nn.Parameter(torch.tensor(float(beta)))
        self.lam, self.reweight, self.act = float(lam), bool(reweight), bool(act)

    def forward(self, f: torch.Tensor, hg: Hypergraph) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns (node features [N, out], hyperedge features [E, out], node->edge weights a_ve [nnz])."""
        f = check_features(f, hg, "f")
        if f.shape[1] != self.W0.in_features:
            raise ValueError(f"f must have {self.W0.in_features} feature columns (in_dim), got {f.shape[1]}")
        v, e = hg.incidence
        u, s = self.W1(f), self.W0(f)
        if self.reweight:
            gbar = edge_mean(u, hg)
            a = torch.exp(-self.beta * _cos_dist(u[v], gbar[e]))
            g = edge_mean(u, hg, a)
            b = torch.exp(-self.beta * _cos_dist(u[v], g[e]))
        else:
            a = b = torch.ones(hg.nnz, device=f.device)
            g = edge_mean(u, hg)
        out = node_update(s, g, hg, b, self.lam)
        return (F.elu(out) if self.act else out), g, a


class H2CLEncoder(nn.Module):
    """Stack of ``HHConv`` layers [B08]; ``forward`` returns node embeddings, edge embeddings, per-layer weights."""

    def __init__(self, in_dim: int, hid: int = 128, layers: int = 2, *, beta: float = 1.0, lam: float = 1.0,
                 reweight: bool = True) -> None:
        super().__init__()
        in_dim, hid, layers = (chk.positive_int("in_dim", in_dim), chk.positive_int("hid", hid),
                               chk.positive_int("layers", layers))
        dims = [in_dim] + [hid] * layers
        self.convs = nn.ModuleList(HHConv(dims[i], dims[i + 1], beta=beta, lam=lam, reweight=reweight,
                                          act=i < layers - 1) for i in range(layers))

    def forward(self, x: torch.Tensor, hg: Hypergraph) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        ws, g = [], None
        for conv in self.convs:
            x, g, a = conv(x, hg)
            ws.append(a)
        return x, g, ws


# objective

def info_nce(z1: torch.Tensor, z2: torch.Tensor, tau: float = 0.5) -> torch.Tensor:
    """Symmetric GRACE loss (Zhu et al. 2020): for anchor i in view 1, positive z2_i, negatives every other
    node in both views:  l_i = -log( e^{s(1i,2i)/tau} / (e^{s(1i,2i)/tau} + sum_{k!=i} e^{s(1i,1k)/tau}
    + sum_{k!=i} e^{s(1i,2k)/tau}) ), s = cosine; loss = mean over i and both directions."""
    for name, z in (("z1", z1), ("z2", z2)):
        if not isinstance(z, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor [N, d], got {type(z).__name__}")
    if z1.shape != z2.shape or z1.dim() != 2:
        raise ValueError(f"z1 and z2 must be [N, d] of equal shape, got {tuple(z1.shape)} and {tuple(z2.shape)}")
    if z1.shape[0] < 2:
        raise ValueError(f"z1 and z2 need at least 2 rows (a positive and a negative), got {z1.shape[0]}")
    chk.finite("z1", z1)
    chk.finite("z2", z2)
    tau = chk.positive("tau", tau)
    z1, z2 = F.normalize(z1, dim=-1), F.normalize(z2, dim=-1)

    def half(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        refl = torch.exp(a @ a.t() / tau)
        btw = torch.exp(a @ b.t() / tau)
        pos = btw.diagonal()
        return -torch.log(pos / (refl.sum(1) - refl.diagonal() + btw.sum(1)))

    return 0.5 * (half(z1, z2) + half(z2, z1)).mean()


def _check_h(h: torch.Tensor, hg: Hypergraph) -> torch.Tensor:
    if not isinstance(h, torch.Tensor):
        raise TypeError(f"h must be a torch.Tensor (heterogeneity per incidence), got {type(h).__name__}")
    chk.shape("h", h, (hg.nnz,))
    return chk.finite("h", h)


class H2CL(nn.Module):
    """H2CL model: view generator + re-weighting encoder + projection head + InfoNCE [B08].

    Switches give the baselines in one class: ``reweight=False`` (mean encoder), ``uniform_views=True``
    (random incidence dropping); both off is a TriCL-style plain hypergraph contrastive method (node-level term).
    """

    def __init__(self, in_dim: int, hid: int = 128, layers: int = 2, *, beta: float = 1.0, lam: float = 1.0,
                 reweight: bool = True, uniform_views: bool = False, p_views: tuple[float, float] = (0.2, 0.4),
                 feat_drop: tuple[float, float] = (0.2, 0.3), p_cap: float = 0.7, tau: float = 0.5) -> None:
        for name, pair in (("p_views", p_views), ("feat_drop", feat_drop)):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError(f"{name} must be a pair (one value per view), got {pair!r}")
        tau = chk.positive("tau", tau)
        super().__init__()
        self.encoder = H2CLEncoder(in_dim, hid, layers, beta=beta, lam=lam, reweight=reweight)
        self.proj = nn.Sequential(nn.Linear(hid, hid), nn.ELU(), nn.Linear(hid, hid))
        self.views = [HeteroAwareViewGenerator(p, p_cap, fd, uniform=uniform_views)
                      for p, fd in zip(p_views, feat_drop)]
        self.tau = tau

    def loss(self, x: torch.Tensor, hg: Hypergraph, h: torch.Tensor | None = None,
             generator: torch.Generator | None = None) -> torch.Tensor:
        """Contrastive loss of two generated views; ``h`` (heterogeneity per incidence) is computed if None."""
        x = check_features(x, hg)
        h = heterogeneity(x, hg) if h is None else _check_h(h, hg)
        zs = []
        for view in self.views:
            xv, hv = view(x, hg, h, generator)
            zs.append(self.proj(self.encoder(xv, hv)[0]))
        return info_nce(zs[0], zs[1], self.tau)

    @torch.no_grad()
    def embed(self, x: torch.Tensor, hg: Hypergraph) -> torch.Tensor:
        x = check_features(x, hg)
        return self.encoder(x, hg)[0]


def train_h2cl(model: H2CL, x: torch.Tensor, hg: Hypergraph, *, epochs: int = 100, lr: float = 1e-3,
               weight_decay: float = 1e-5, seed: int = 0, h: torch.Tensor | None = None) -> list[float]:
    """Full-batch Adam training of the contrastive loss; returns the loss per epoch. ``h`` overrides the
    heterogeneity that guides the views (e.g. a shuffled control)."""
    if not isinstance(model, H2CL):
        raise TypeError(f"model must be an H2CL, got {type(model).__name__}")
    epochs = chk.positive_int("epochs", epochs)
    lr, weight_decay = chk.positive("lr", lr), chk.non_negative("weight_decay", weight_decay)
    seed = chk.non_negative_int("seed", seed)
    x = check_features(x, hg)
    if x.shape[1] != model.encoder.convs[0].W0.in_features:
        raise ValueError(f"x has {x.shape[1]} feature columns, the model expects "
                         f"{model.encoder.convs[0].W0.in_features} (in_dim)")
    h = heterogeneity(x, hg) if h is None else _check_h(h, hg)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    model.train()
    for _ in range(epochs):
        opt.zero_grad()
        loss = model.loss(x, hg, h, gen)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


# baselines

class HGNN(nn.Module):
    """Supervised HGNN (Feng et al. 2019) via torch_geometric's ``HypergraphConv`` (2 layers)."""

    def __init__(self, in_dim: int, hid: int, num_classes: int, dropout: float = 0.5) -> None:
        in_dim, hid = chk.positive_int("in_dim", in_dim), chk.positive_int("hid", hid)
        num_classes = chk.positive_int("num_classes", num_classes, minimum=2)
        dropout = chk.in_range("dropout", dropout, 0.0, 1.0, high_open=True)
        super().__init__()
        from torch_geometric.nn import HypergraphConv

        self.c1, self.c2 = HypergraphConv(in_dim, hid), HypergraphConv(hid, num_classes)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, hg: Hypergraph) -> torch.Tensor:
        x = check_features(x, hg)
        idx = hg.incidence
        z = F.elu(self.c1(x, idx, num_edges=hg.num_edges))
        z = F.dropout(z, self.dropout, self.training)
        return self.c2(z, idx, num_edges=hg.num_edges)


def train_hgnn(x: torch.Tensor, y: torch.Tensor, hg: Hypergraph, train_idx: torch.Tensor, *, hid: int = 64,
               epochs: int = 200, lr: float = 1e-2, weight_decay: float = 5e-4, seed: int = 0) -> HGNN:
    """Train ``HGNN`` with cross-entropy on the labelled nodes ``train_idx``."""
    x = check_features(x, hg)
    if not isinstance(y, torch.Tensor) or y.shape != (hg.num_nodes,):
        raise ValueError(f"y must be a tensor of {hg.num_nodes} class labels, got {chk.describe(y)}")
    if y.is_floating_point():
        raise TypeError(f"y must hold integer class labels, got a {y.dtype} tensor")
    if int(y.min()) < 0:
        raise ValueError(f"y must hold class labels >= 0, got min {int(y.min())}")
    if not isinstance(train_idx, torch.Tensor):
        raise TypeError(f"train_idx must be a torch.Tensor of node ids, got {type(train_idx).__name__}")
    chk.non_empty("train_idx", train_idx)
    chk.indices("train_idx", train_idx, hg.num_nodes)
    hid, epochs = chk.positive_int("hid", hid), chk.positive_int("epochs", epochs)
    lr, weight_decay = chk.positive("lr", lr), chk.non_negative("weight_decay", weight_decay)
    torch.manual_seed(seed)
    model = HGNN(x.shape[1], hid, int(y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(x, hg)[train_idx], y[train_idx]).backward()
        opt.step()
    model.eval()
    return model


def incidence_weights(model: H2CL, x: torch.Tensor, hg: Hypergraph) -> list[torch.Tensor]:
    """The encoder's node->hyperedge weights a_ve at each layer on the full (un-augmented) hypergraph."""
    if not isinstance(model, H2CL):
        raise TypeError(f"model must be an H2CL, got {type(model).__name__}")
    with torch.no_grad():
        return [w.detach() for w in model.encoder(check_features(x, hg), hg)[2]]


__all__ = ["HeteroAwareViewGenerator", "HHConv", "H2CLEncoder", "H2CL", "info_nce", "train_h2cl", "HGNN",
           "train_hgnn", "incidence_weights"]
