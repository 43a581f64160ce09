"""Embedding-anchored tool selection on a Hugging Face causal LM [B18].

The policy reads the context (instruction and history) with a causal LM; the hidden state h at each ``<tool>``
token is projected to an anchor a_theta(h), a tool encoder embeds each description, e_phi(desc_j), and

    pi_theta(j | h) = softmax_{j in T} ( cos(a_theta(h), e_phi(desc_j)) / tau ),   tau = 0.1 (our choice)

over the episode's current inventory T. An unseen tool needs only its description. The closed-set baseline
instead puts a linear head over the ids of the tools seen in training: it cannot select a tool it has no output
unit for.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from icml26.harness import validate as v
from icml26.testbeds.llama import tiny_llama as testbed_llama

__all__ = ["ToolEncoder", "AnchorToolSelector", "ClosedSetToolSelector", "AutoToolPolicy", "tiny_llama"]


def tiny_llama(vocab_size: int, *, hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4,
               intermediate_size: int = 128, max_positions: int = 64, seed: int = 0):
    """A tiny ``LlamaForCausalLM`` built from a config (random init, no download; the caller's torch random
    stream is left alone)."""
    with torch.random.fork_rng():
        return testbed_llama(vocab_size, hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads,
                             intermediate_size=intermediate_size, max_positions=max_positions, pad_token_id=0,
                             bos_token_id=1, eos_token_id=2, seed=seed)


class ToolEncoder(nn.Module):
    """e_phi(desc): mean of word embeddings of the description, then a linear map (a bag-of-words encoder)."""

    def __init__(self, vocab_size: int, dim: int = 64, pad_id: int = 0):
        super().__init__()
        vocab_size, dim = v.positive_int("vocab_size", vocab_size), v.positive_int("dim", dim)
        v.in_range("pad_id", v.non_negative_int("pad_id", pad_id), 0, vocab_size - 1)
        self.emb = nn.Embedding(vocab_size, dim, padding_idx=pad_id)
        self.proj = nn.Linear(dim, dim)
        self.pad_id = pad_id

    def forward(self, desc: Tensor) -> Tensor:
        """``desc [N, L]`` token ids -> ``[N, dim]``."""
        keep = (desc != self.pad_id).unsqueeze(-1).float()
        bag = (self.emb(desc) * keep).sum(1) / keep.sum(1).clamp_min(1.0)
        return self.proj(bag)


class AnchorToolSelector(nn.Module):
    """logits_j = cos(W h, e_j) / tau over the inventory (empty slots get -inf)."""

    def __init__(self, hidden_size: int, dim: int = 64, tau: float = 0.1):
        super().__init__()
        if not tau > 0:
            raise ValueError(f"tau must be > 0, got {tau!r}")
        self.anchor = nn.Linear(hidden_size, dim)
        self.tau = tau

    def forward(self, hidden: Tensor, tool_emb: Tensor, inventory: Tensor) -> Tensor:
        """``hidden [B, S, H]``, ``tool_emb [N, dim]`` (all tools), ``inventory [B, M]`` -> logits ``[B, S, M]``."""
        a = F.normalize(self.anchor(hidden), dim=-1)
        e = F.normalize(tool_emb, dim=-1)[inventory.clamp_min(0)]              # [B, M, dim]
        logits = torch.einsum("bsd,bmd->bsm", a, e) / self.tau
        return logits.masked_fill((inventory < 0)[:, None, :], float("-inf"))


class ClosedSetToolSelector(nn.Module):
    """A linear head over the tools seen in training; unseen tools have no output unit (masked out, unless an
    inventory holds no seen tool at all, when it picks uniformly)."""

    def __init__(self, hidden_size: int, seen_tools: Tensor):
        super().__init__()
        hidden_size = v.positive_int("hidden_size", hidden_size)
        v.ndim("seen_tools", seen_tools, 1)
        if not bool(torch.as_tensor(seen_tools).bool().any()):
            raise ValueError("seen_tools must mark at least one tool as seen (a closed-set head needs an output unit)")
        seen_tools = torch.as_tensor(seen_tools, dtype=torch.bool)
        self.register_buffer("seen", seen_tools)
        self.register_buffer("unit", torch.cumsum(seen_tools.long(), 0) - 1)   # tool id -> output unit
        self.head = nn.Linear(hidden_size, int(seen_tools.sum()))

    def forward(self, hidden: Tensor, tool_emb: Tensor | None, inventory: Tensor) -> Tensor:
        inv = inventory.clamp_min(0)
        out = self.head(hidden)                                                 # [B, S, n_seen]
        logits = out.gather(-1, self.unit[inv].clamp_min(0)[:, None, :].expand(-1, out.shape[1], -1))
        ok = (inventory >= 0) & self.seen[inv]
        none = ~ok.any(1, keepdim=True)
        ok = torch.where(none, inventory >= 0, ok)
        logits = torch.where(none[:, None, :], torch.zeros_like(logits), logits)
        return logits.masked_fill(~ok[:, None, :], float("-inf"))


class AutoToolPolicy(nn.Module):
    """A causal LM + a tool selector [B18].

    Args:
        lm: any Hugging Face causal LM (``output_hidden_states`` supported); e.g. :func:`tiny_llama`.
        tool_desc: ``[N, L]`` token ids of every tool's description (in the LM's vocabulary).
        selector: ``"anchor"`` (embedding-anchored, AutoTool) or ``"closed"`` (closed-set tool-id head).
        seen_tools: ``[N]`` bool, required for ``"closed"``.
    """

    def __init__(self, lm: nn.Module, tool_desc: Tensor, *, selector: str = "anchor", dim: int = 64,
                 tau: float = 0.1, seen_tools: Tensor | None = None):
        super().__init__()
        if not isinstance(lm, nn.Module) or not hasattr(getattr(lm, "config", None), "hidden_size"):
            raise TypeError(f"lm must be a Hugging Face causal LM module (with config.hidden_size), got "
                            f"{v.describe(lm)}")
        if selector not in ("anchor", "closed"):
            raise ValueError(f"selector must be 'anchor' or 'closed', got {selector!r}")
        tool_desc = torch.as_tensor(tool_desc, dtype=torch.long)
        if tool_desc.ndim != 2 or tool_desc.shape[0] == 0:
            raise ValueError("tool_desc must be [N, L] description token ids with N >= 1 tools (a catalogue of size "
                             "0 offers nothing to select)")
        self.lm = lm
        hidden = lm.config.hidden_size
        self.register_buffer("tool_desc", tool_desc)
        self.kind = selector
        if selector == "anchor":
            self.encoder = ToolEncoder(lm.config.vocab_size, dim)
            self.selector = AnchorToolSelector(hidden, dim, tau)
        else:
            if seen_tools is None:
                raise ValueError("selector='closed' needs seen_tools (which tools have an output unit)")
            self.encoder = None
            self.selector = ClosedSetToolSelector(hidden, seen_tools)

    def forward(self, input_ids: Tensor, anchor_pos: Tensor, inventory: Tensor) -> Tensor:
        """Tool logits ``[B, S, M]`` at the anchor positions ``anchor_pos [S]`` of ``input_ids [B, T]``."""
        if inventory.ndim != 2 or inventory.shape[1] == 0:
            raise ValueError("the tool inventory has size 0: pass inventory [B, M] with M >= 1 tools")
        if inventory.shape[0] != input_ids.shape[0]:
            raise ValueError(f"inventory has {inventory.shape[0]} rows, input_ids {input_ids.shape[0]}")
        out = self.lm(input_ids=input_ids, output_hidden_states=True, use_cache=False)
        h = out.hidden_states[-1][:, anchor_pos]                                # [B, S, H]
        emb = self.encoder(self.tool_desc) if self.encoder is not None else None
        return self.selector(h, emb, inventory)
