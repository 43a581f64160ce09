"""Geometry of a user's own model's node representations. [B02]

``node_representations`` reads the token-embedding rows of the node tokens (``layer=None``), or the hidden state
after block ``layer`` when each node token is fed alone, captured with a forward hook that is removed before
returning (the model's outputs, training flag and hooks are left as they were). ``embedding_geometry`` then
applies the diagnostics of :mod:`.spectral`. Works on Hugging Face causal LMs (``model.model.layers``,
``model.transformer.h``, ``model.gpt_neox.layers``) and on any ``nn.Module`` with a ``layers`` ModuleList.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch
from torch import nn

from icml26.harness import validate as v

from .graphs import validate_graph
from .spectral import chance_edge_recovery, geometric_edge_recovery, spectral_energy_profile

_LAYER_PATHS = ("layers", "model.layers", "transformer.h", "gpt_neox.layers", "model.decoder.layers",
                "encoder.layer")


def find_layers(model: nn.Module) -> nn.ModuleList:
    """The model's list of blocks, looked up at the usual attribute paths; ``ValueError`` when there is none."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"expected a torch.nn.Module, got {type(model).__name__}")
    for path in _LAYER_PATHS:
        obj = model
        for name in path.split("."):
            obj = getattr(obj, name, None)
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList) and len(obj) > 0:
            return obj
    raise ValueError(f"{type(model).__name__} has none of the expected layer lists ({', '.join(_LAYER_PATHS)}); "
                     "use layer=None (token embeddings) or give the model a `layers` ModuleList")


def _input_embeddings(model: nn.Module) -> torch.Tensor:
    if hasattr(model, "get_input_embeddings"):
        return model.get_input_embeddings().weight
    if isinstance(getattr(model, "tok", None), nn.Embedding):
        return model.tok.weight
    raise ValueError(f"{type(model).__name__} has no get_input_embeddings() and no `tok` embedding")


@torch.no_grad()
def node_representations(model: nn.Module, node_token_ids, layer: int | None = None) -> np.ndarray:
    """(N, d) representation of each node token: its embedding row (``layer=None``) or the output of block
    ``layer`` (negative counts from the end) at that token, fed as a one-token sequence."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {v.describe(model)}")
    if layer is not None and (isinstance(layer, bool) or not isinstance(layer, (int, np.integer))):
        raise TypeError(f"layer must be an integer block index or None (token embeddings), got {v.describe(layer)}")
    v.finite("node_token_ids", node_token_ids)
    ids = torch.as_tensor(np.asarray(node_token_ids), dtype=torch.long)
    if ids.ndim != 1 or ids.numel() < 2:
        raise ValueError(f"node_token_ids must be a 1-D array of at least 2 token ids, got shape {tuple(ids.shape)}")
    if layer is None:
        W = _input_embeddings(model)
        if int(ids.min()) < 0 or int(ids.max()) >= W.shape[0]:
            raise ValueError(f"node token ids must be in 0..{W.shape[0] - 1}")
        return W[ids].detach().double().cpu().numpy()
    n_tok = _input_embeddings(model).shape[0] if (hasattr(model, "get_input_embeddings") or hasattr(model, "tok")) \
        else None
    if n_tok is not None and (int(ids.min()) < 0 or int(ids.max()) >= n_tok):
        raise ValueError(f"node token ids must be in 0..{n_tok - 1}")
    layers = find_layers(model)
    n = len(layers)
    if not isinstance(layer, (int, np.integer)) or not -n <= int(layer) < n:
        raise ValueError(f"layer {layer!r} is out of range: the model has {n} layers (use 0..{n - 1}, or negative "
                         "indices from the end)")
    captured: list[torch.Tensor] = []

    def grab(_module, _inputs, output):
        captured.append((output[0] if isinstance(output, tuple) else output).detach())

    handle = layers[int(layer)].register_forward_hook(grab)
    was_training = model.training
    try:
        model.eval()
        model(ids[:, None].to(next(model.parameters()).device))
    finally:
        handle.remove()
        model.train(was_training)
    h = captured[0]
    return h.reshape(ids.numel(), -1, h.shape[-1])[:, -1].double().cpu().numpy()


@dataclass(frozen=True)
class GeometryReport:
    """Embedding-geometry diagnostics of one set of node representations."""

    edge_recovery: float          # fraction of true edges recovered from <e_u, e_v> (top-deg(u))
    chance_recovery: float        # what a random ranking gets
    topk_fraction: float          # energy on the top-k non-trivial eigenvectors
    uniform_fraction: float       # k / (N - 1): an isotropic embedding
    k: int
    eigenvalues: np.ndarray
    energy: np.ndarray


def embedding_geometry(model_or_emb, G: nx.Graph, node_token_ids=None, layer: int | None = None, k: int = 2,
                       normalize: str = "rw") -> GeometryReport:
    """Spectral energy and edge recovery of a model's node representations (or of an (N, d) array). [B02]

    ``node_token_ids[u]`` is the token of graph node u (default: token u).
    """
    n = validate_graph(G)
    k = v.positive_int("k", k)
    if isinstance(model_or_emb, nn.Module):
        ids = np.arange(n) if node_token_ids is None else np.asarray(node_token_ids)
        if ids.shape != (n,):
            raise ValueError(f"node_token_ids must give one token per graph node ({n}), got shape {ids.shape}")
        E = node_representations(model_or_emb, ids, layer)
    else:
        E = model_or_emb.detach().cpu().numpy() if hasattr(model_or_emb, "detach") else model_or_emb
        E = np.asarray(v.finite("model_or_emb", E), dtype=float)
    w, energy = spectral_energy_profile(E, G, normalize)
    if not 1 <= int(k) <= len(energy):
        raise ValueError(f"k must be in 1..{len(energy)}, got {k}")
    return GeometryReport(geometric_edge_recovery(E, G), chance_edge_recovery(G), float(energy[: int(k)].sum()),
                          int(k) / (n - 1), int(k), w, energy)
