"""[B02] Geometric vs associative memory of atomic facts, and the Node2Vec connection.

"Deep sequence models tend to memorize geometrically; it is unclear why" (Noroozizadeh, Nagarajan, Rosenfeld,
Kumar; ICML 2026, arXiv 2510.26745).
"""

from .graphs import (
                     PathDataset,
                     cycle_graph,
                     edge_memorization_dataset,
                     grid_graph,
                     path_dataset,
                     path_star_graph,
                     validate_graph,
)
from .hooks import GeometryReport, embedding_geometry, find_layers, node_representations
from .model import TinyGraphTransformer, edge_accuracy, encode, path_token_accuracy, train_memorizer
from .navigation import geometric_first_hop, geometric_first_hop_correct
from .node2vec import Node2VecCE, node2vec_embedding, node2vec_walks
from .spectral import (
                     chance_edge_recovery,
                     edge_recovery_per_node,
                     geometric_edge_recovery,
                     graph_eigenbasis,
                     graph_operator,
                     laplacian_spectrum,
                     spectral_energy_profile,
                     subspace_overlap,
                     topk_edge_recovery,
                     topk_energy_fraction,
)

__all__ = [
    "path_star_graph", "cycle_graph", "grid_graph", "validate_graph", "edge_memorization_dataset", "path_dataset",
    "PathDataset",
    "laplacian_spectrum", "graph_operator", "graph_eigenbasis", "spectral_energy_profile", "topk_energy_fraction",
    "geometric_edge_recovery", "edge_recovery_per_node", "topk_edge_recovery", "chance_edge_recovery", "subspace_overlap",
    "Node2VecCE", "node2vec_walks", "node2vec_embedding",
    "TinyGraphTransformer", "encode", "train_memorizer", "path_token_accuracy", "edge_accuracy",
    "geometric_first_hop", "geometric_first_hop_correct",
    "node_representations", "embedding_geometry", "find_layers", "GeometryReport",
]
