"""A small decoder-only Transformer that memorises graph edges in its weights, and its training recipe. [B02]

Tokens: the N node ids, then ``SEP`` (the "=" of "u = v") and ``PAD``. Training sentences:

    edge fact   u = v                       loss on v
    path        leaf = c a_1 ... a_l        loss on c, a_1, ..., a_l (teacher forcing)

Edges and paths are trained together when ``encode`` gets both (the official code's "mixed" mode, used by the
reproduction: the edges are not forgotten while the paths are learned). The associative control is the same
network with its token embeddings frozen at their random initialisation: it can still memorise every edge (in
its attention/MLP weights: a lookup table), but its embeddings cannot carry the graph's geometry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icml26.harness import validate as v


class TinyGraphTransformer(nn.Module):
    """Pre-LN causal Transformer over node tokens; ``tied`` shares the input and output embeddings.

    ``freeze_embeddings=True`` keeps the token embeddings at their random initialisation (associative control).
    """

    def __init__(self, vocab: int, d_model: int = 64, n_layers: int = 2, n_heads: int = 2, max_len: int = 16,
                 freeze_embeddings: bool = False, tied: bool = True, seed: int = 0):
        super().__init__()
        vocab, d_model = v.positive_int("vocab", vocab, minimum=3), v.positive_int("d_model", d_model)
        n_layers, n_heads = v.positive_int("n_layers", n_layers), v.positive_int("n_heads", n_heads)
        max_len, seed = v.positive_int("max_len", max_len, minimum=2), v.non_negative_int("seed", seed)
        for name, flag in (("freeze_embeddings", freeze_embeddings), ("tied", tied)):
            if not isinstance(flag, (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {v.describe(flag)}")
        if int(d_model) % int(n_heads):
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        with torch.random.fork_rng(devices=[]):       # seeded init without touching the caller's RNG state
            torch.manual_seed(int(seed))
            self.tok = nn.Embedding(int(vocab), int(d_model))
            nn.init.normal_(self.tok.weight, std=1.0 / np.sqrt(d_model))
            self.pos = nn.Embedding(int(max_len), int(d_model))
            nn.init.normal_(self.pos.weight, std=0.02)
            self.layers = nn.ModuleList([Block(int(d_model), int(n_heads)) for _ in range(int(n_layers))])
            self.norm = nn.LayerNorm(int(d_model))
            self.head = None if tied else nn.Linear(int(d_model), int(vocab), bias=False)
        self.tok.weight.requires_grad_(not freeze_embeddings)
        self.max_len = int(max_len)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, L) token ids -> (B, L, vocab) next-token logits."""
        if not isinstance(ids, torch.Tensor):
            raise TypeError(f"ids must be a torch.LongTensor of token ids, got {v.describe(ids)}")
        if ids.ndim != 2 or ids.shape[1] > self.max_len or ids.shape[1] < 1:
            raise ValueError(f"ids must have shape (batch, 1 <= length <= {self.max_len}), got {tuple(ids.shape)}")
        v.indices("ids", ids, self.tok.num_embeddings)
        L = ids.shape[1]
        h = self.tok(ids) + self.pos.weight[:L]
        for layer in self.layers:
            h = layer(h)
        h = self.norm(h)
        return h @ self.tok.weight.T if self.head is None else self.head(h)

    def node_embeddings(self, num_nodes: int) -> np.ndarray:
        """Rows 0..num_nodes-1 of the token-embedding matrix (the node tokens)."""
        num_nodes = v.positive_int("num_nodes", num_nodes)
        if num_nodes > self.tok.num_embeddings:
            raise ValueError(f"num_nodes must be at most the vocabulary ({self.tok.num_embeddings}), got {num_nodes}")
        return self.tok.weight[: int(num_nodes)].detach().double().numpy().copy()


class Block(nn.Module):
    """Pre-LN block: h + Attn(LN(h)) (causal), then h + MLP(LN(h)) with a 4x GELU MLP."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        self.n_heads = n_heads

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        B, L, D = h.shape
        q, k, v = self.qkv(self.ln1(h)).view(B, L, 3, self.n_heads, D // self.n_heads).permute(2, 0, 3, 1, 4)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.proj(a.transpose(1, 2).reshape(B, L, D))
        return h + self.mlp(self.ln2(h))


# data -> token tensors

@dataclass(frozen=True)
class Batch:
    ids: torch.Tensor        # (B, L)
    targets: torch.Tensor    # (B, L), -100 where no loss


def encode(num_nodes: int, edges: np.ndarray | None = None, leaves: np.ndarray | None = None,
           paths: np.ndarray | None = None) -> Batch:
    """Token batch of edge facts "u = v" and path sentences "leaf = c a_1 .. a_l" (padded to a common length)."""
    num_nodes = v.positive_int("num_nodes", num_nodes, minimum=2)
    sep, pad = num_nodes, num_nodes + 1
    rows, tgts = [], []
    if edges is not None and len(edges):
        e = np.asarray(v.indices("edges", edges, num_nodes))
        if e.ndim != 2 or e.shape[1] != 2:
            raise ValueError(f"edges must be an (M, 2) array of (u, v) node ids, got shape {e.shape}")
        rows += [[int(u), sep, int(v)] for u, v in e]
        tgts += [[-100, int(v), -100] for _, v in e]
    if paths is not None and len(paths):
        if leaves is None:
            raise ValueError("paths need their leaves: pass leaves=... (one per path)")
        leaves, paths = _check_paths(leaves, paths, num_nodes)
        for leaf, path in zip(leaves, paths):
            rows.append([int(leaf), sep] + [int(x) for x in path])
            tgts.append([-100] + [int(x) for x in path] + [-100])
    if not rows:
        raise ValueError("nothing to encode: pass edges and/or leaves with paths")
    L = max(len(r) for r in rows)
    ids = torch.full((len(rows), L), pad, dtype=torch.long)
    tg = torch.full((len(rows), L), -100, dtype=torch.long)
    for i, (r, t) in enumerate(zip(rows, tgts)):
        ids[i, : len(r)] = torch.tensor(r)
        tg[i, : len(t)] = torch.tensor(t)
    return Batch(ids, tg)


def _check_paths(leaves, paths, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    leaves = np.asarray(v.indices("leaves", v.ndim("leaves", leaves, 1), num_nodes))
    paths = np.asarray(v.indices("paths", v.ndim("paths", paths, 2), num_nodes))
    if len(leaves) != len(paths):
        raise ValueError(f"leaves and paths must have one path per leaf, got {len(leaves)} leaves and {len(paths)} "
                         "paths")
    return leaves, paths


def train_memorizer(model: TinyGraphTransformer, batch: Batch, steps: int, lr: float = 1e-3,
                    weight_decay: float = 0.0, batch_size: int | None = None, seed: int = 0) -> list[float]:
    """AdamW on next-token cross-entropy over the batch's target positions; full batch unless ``batch_size``.
    Returns the loss every step."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (e.g. TinyGraphTransformer), got {v.describe(model)}")
    if not isinstance(batch, Batch):
        raise TypeError(f"batch must be a Batch from encode(...), got {v.describe(batch)}")
    steps, lr = v.non_negative_int("steps", steps), v.positive("lr", lr)
    weight_decay, seed = v.non_negative("weight_decay", weight_decay), v.non_negative_int("seed", seed)
    batch_size = None if batch_size is None else v.positive_int("batch_size", batch_size)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    g = torch.Generator().manual_seed(int(seed))
    n = batch.ids.shape[0]
    losses = []
    model.train()
    for _ in range(int(steps)):
        idx = slice(None) if batch_size is None or batch_size >= n else torch.randperm(n, generator=g)[:batch_size]
        logits = model(batch.ids[idx])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.targets[idx].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def path_token_accuracy(model: TinyGraphTransformer, num_nodes: int, leaves: np.ndarray,
                        paths: np.ndarray) -> np.ndarray:
    """Per example and path position: is the teacher-forced argmax (over node tokens) the true token? (n, l+1)"""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (e.g. TinyGraphTransformer), got {v.describe(model)}")
    num_nodes = v.positive_int("num_nodes", num_nodes, minimum=2)
    leaves, paths = _check_paths(leaves, paths, num_nodes)
    v.non_empty("leaves", leaves)
    b = encode(num_nodes, leaves=leaves, paths=paths)
    logits = model(b.ids)[:, :, :num_nodes]
    L = paths.shape[1]
    pred = logits[:, 1: 1 + L].argmax(-1).numpy()
    return pred == np.asarray(paths)


@torch.no_grad()
def edge_accuracy(model: TinyGraphTransformer, num_nodes: int, edges: np.ndarray) -> float:
    """Fraction of nodes u whose top-deg(u) predictions after "u =" are exactly u's neighbours (memorisation)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (e.g. TinyGraphTransformer), got {v.describe(model)}")
    num_nodes = v.positive_int("num_nodes", num_nodes, minimum=2)
    e = np.asarray(v.indices("edges", v.non_empty("edges", edges), num_nodes))
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"edges must be an (M, 2) array of (u, v) node ids, got shape {e.shape}")
    us = np.unique(e[:, 0])
    ids = torch.tensor([[int(u), num_nodes] for u in us])
    logits = model(ids)[:, -1, :num_nodes].numpy()
    ok = 0
    for i, u in enumerate(us):
        nb = set(e[e[:, 0] == u, 1].tolist())
        top = np.argsort(-logits[i])[: len(nb)]
        ok += set(top.tolist()) == nb
    return ok / len(us)
