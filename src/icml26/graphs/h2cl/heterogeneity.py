"""Node-hyperedge heterogeneity, weighted Dirichlet energy and its block-coordinate minimisers [B08].

    h_ve = 1 - cos(x_v, m_e^(-v)),  m_e^(-v) = (sum_{u in e} x_u - x_v) / (|e| - 1)   (leave-one-out mean; h = 0
                                                                                       for singleton hyperedges)
    E(F, G; w) = sum_{(v,e)} w_ve ||f_v - g_e||^2 + lam sum_v ||f_v - x_v||^2
    argmin_G E: g_e = sum_{v in e} w_ve f_v / sum_{v in e} w_ve
    argmin_F E: f_v = (lam x_v + sum_{e ni v} w_ve g_e) / (lam + sum_{e ni v} w_ve)

so one encoder layer with identity weights and activation and fixed w is one block-coordinate-descent sweep.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_geometric.utils import scatter

from icml26.harness import validate as chk

from .hypergraph import Hypergraph, check_features


def _weights(name: str, w: torch.Tensor, hg: Hypergraph) -> torch.Tensor:
    """Per-incidence non-negative finite weights of shape [nnz]."""
    if not isinstance(w, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape [nnz={hg.nnz}], got {type(w).__name__}")
    chk.shape(name, w, (hg.nnz,))
    chk.finite(name, w)
    if bool((w < 0).any()):
        raise ValueError(f"{name} must be non-negative (one weight per incidence), got min {float(w.min()):.3g}")
    return w


def _edge_features(name: str, g: torch.Tensor, hg: Hypergraph, dim: int) -> torch.Tensor:
    if not isinstance(g, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor [num_edges, dim], got {type(g).__name__}")
    chk.shape(name, g, (hg.num_edges, dim))
    return chk.finite(name, g)


def edge_mean(f: torch.Tensor, hg: Hypergraph, w: torch.Tensor | None = None) -> torch.Tensor:
    """g_e = sum_{v in e} w_ve f_v / sum w_ve (w = 1: plain mean); ``[num_edges, dim]``."""
    check_features(f, hg, "f")
    if w is not None:
        _weights("w", w, hg)
    v, e = hg.incidence
    if w is None:
        return scatter(f[v], e, 0, dim_size=hg.num_edges, reduce="mean")
    num = scatter(w.unsqueeze(-1) * f[v], e, 0, dim_size=hg.num_edges, reduce="sum")
    den = scatter(w, e, 0, dim_size=hg.num_edges, reduce="sum").clamp_min(1e-12)
    return num / den.unsqueeze(-1)


def node_update(x: torch.Tensor, g: torch.Tensor, hg: Hypergraph, w: torch.Tensor, lam: float) -> torch.Tensor:
    """f_v = (lam x_v + sum_{e ni v} w_ve g_e) / (lam + sum_{e ni v} w_ve); isolated nodes keep x_v (lam > 0)."""
    check_features(x, hg)
    _edge_features("g", g, hg, x.shape[1])
    _weights("w", w, hg)
    lam = chk.positive("lam", lam)
    v, e = hg.incidence
    num = lam * x + scatter(w.unsqueeze(-1) * g[e], v, 0, dim_size=hg.num_nodes, reduce="sum")
    den = lam + scatter(w, v, 0, dim_size=hg.num_nodes, reduce="sum")
    return num / den.clamp_min(1e-12).unsqueeze(-1)


def heterogeneity(x: torch.Tensor, hg: Hypergraph) -> torch.Tensor:
    """h_ve = 1 - cos(x_v, leave-one-out mean of the other members of e), in [0, 2]; 0 for singletons [B08]."""
    x = check_features(x, hg)
    v, e = hg.incidence
    size = hg.edge_size().float()
    total = scatter(x[v], e, 0, dim_size=hg.num_edges, reduce="sum")
    n_other = (size[e] - 1.0).unsqueeze(-1)
    loo = (total[e] - x[v]) / n_other.clamp_min(1.0)
    h = 1.0 - F.cosine_similarity(x[v], loo, dim=-1, eps=1e-8)
    return torch.where(size[e] > 1, h, torch.zeros_like(h))


def weighted_heterogeneity(h: torch.Tensor, w: torch.Tensor) -> float:
    """sum(w h) / sum(w): the heterogeneity a weighted aggregation actually sees (equals mean h for w = 1)."""
    for name, t in (("h", h), ("w", w)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor (one value per incidence), got {type(t).__name__}")
        chk.ndim(name, t, 1)
        chk.non_empty(name, t)
        chk.finite(name, t)
    if h.shape != w.shape:
        raise ValueError(f"h and w must have the same shape (one value per incidence), got {tuple(h.shape)} and "
                         f"{tuple(w.shape)}")
    if bool((w < 0).any()) or float(w.sum()) <= 0:
        raise ValueError("w must be non-negative with a positive sum")
    return float((w * h).sum() / w.sum().clamp_min(1e-12))


def dirichlet_energy(f: torch.Tensor, g: torch.Tensor, hg: Hypergraph, w: torch.Tensor, x: torch.Tensor,
                     lam: float = 1.0) -> torch.Tensor:
    """E(F, G; w) = sum_{(v,e)} w_ve ||f_v - g_e||^2 + lam sum_v ||f_v - x_v||^2 [B08, theory]."""
    check_features(x, hg)
    check_features(f, hg, "f")
    if f.shape != x.shape:
        raise ValueError(f"f must have the shape of x {tuple(x.shape)}, got {tuple(f.shape)}")
    _edge_features("g", g, hg, x.shape[1])
    _weights("w", w, hg)
    lam = chk.non_negative("lam", lam)
    v, e = hg.incidence
    return (w * (f[v] - g[e]).pow(2).sum(-1)).sum() + lam * (f - x).pow(2).sum()


def coordinate_descent_sweep(f: torch.Tensor, x: torch.Tensor, hg: Hypergraph, w: torch.Tensor,
                             lam: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """One exact block-coordinate-descent sweep on E: G <- argmin_G E(F, .), then F <- argmin_F E(., G)."""
    check_features(x, hg)
    check_features(f, hg, "f")
    if f.shape != x.shape:
        raise ValueError(f"f must have the shape of x {tuple(x.shape)}, got {tuple(f.shape)}")
    _weights("w", w, hg)
    lam = chk.positive("lam", lam)
    g = edge_mean(f, hg, w)
    return node_update(x, g, hg, w, lam), g
