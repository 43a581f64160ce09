"""H2CL: heterogeneity-aware hypergraph contrastive learning [B08] (reconstructed; no readable official code).

Heterogeneity h_ve = 1 - cos(x_v, leave-one-out hyperedge mean); views drop high-h incidences more; the encoder
re-weights node->hyperedge and hyperedge->node messages by exp(-beta * cosine distance); GRACE InfoNCE.
"""

from .heterogeneity import (
    coordinate_descent_sweep,
    dirichlet_energy,
    edge_mean,
    heterogeneity,
    node_update,
    weighted_heterogeneity,
)
from .hypergraph import (
    Hypergraph,
    HypergraphData,
    add_structural_noise,
    digits_knn_hypergraph,
    hypergraph_sbm,
)
from .model import (
    H2CL,
    HGNN,
    H2CLEncoder,
    HeteroAwareViewGenerator,
    HHConv,
    incidence_weights,
    info_nce,
    train_h2cl,
    train_hgnn,
)

__all__ = [
    "Hypergraph", "HypergraphData", "hypergraph_sbm", "digits_knn_hypergraph", "add_structural_noise",
    "heterogeneity", "weighted_heterogeneity", "dirichlet_energy", "edge_mean", "node_update",
    "coordinate_descent_sweep", "HeteroAwareViewGenerator", "HHConv", "H2CLEncoder", "H2CL", "info_nce",
    "train_h2cl", "HGNN", "train_hgnn", "incidence_weights",
]
