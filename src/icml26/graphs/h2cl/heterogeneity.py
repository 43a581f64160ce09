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

from .hypergraph import Hypergraph, check_features


def edge_mean(f: torch.Tensor, hg: Hypergraph, w: torch.Tensor | None = None) -> torch.Tensor:
    """g_e = sum_{v in e} w_ve f_v / sum w_ve (w = 1: plain mean); ``[num_edges, dim]``."""
    v, e = hg.incidence
    if w is None:
        return scatter(f[v], e, 0, dim_size=hg.num_edges, reduce="mean")
    num = scatter(w.unsqueeze(-1) * f[v], e, 0, dim_size=hg.num_edges, reduce="sum")
    den = scatter(w, e, 0, dim_size=hg.num_edges, reduce="sum").clamp_min(1e-12)
    return num / den.unsqueeze(-1)


def node_update(x: torch.Tensor, g: torch.Tensor, hg: Hypergraph, w: torch.Tensor, lam: float) -> torch.Tensor:
    """f_v = (lam x_v + sum_{e ni v} w_ve g_e) / (lam + sum_{e ni v} w_ve); isolated nodes keep x_v (lam > 0)."""
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
    return float((w * h).sum() / w.sum().clamp_min(1e-12))


def dirichlet_energy(f: torch.Tensor, g: torch.Tensor, hg: Hypergraph, w: torch.Tensor, x: torch.Tensor,
                     lam: float = 1.0) -> torch.Tensor:
    """E(F, G; w) = sum_{(v,e)} w_ve ||f_v - g_e||^2 + lam sum_v ||f_v - x_v||^2 [B08, theory]."""
    v, e = hg.incidence
    return (w * (f[v] - g[e]).pow(2).sum(-1)).sum() + lam * (f - x).pow(2).sum()


def coordinate_descent_sweep(f: torch.Tensor, x: torch.Tensor, hg: Hypergraph, w: torch.Tensor,
                             lam: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """One exact block-coordinate-descent sweep on E: G <- argmin_G E(F, .), then F <- argmin_F E(., G)."""
    g = edge_mean(f, hg, w)
    return node_update(x, g, hg, w, lam), g
