"""Early-exit wrapper around a Hugging Face causal LM (Llama- or GPT-2-style) [A19].

``forward`` scores a teacher-forced batch: it runs every layer of the backbone (later positions attend to the K/V
of earlier positions at every depth), applies the exit rule per token and returns the logits each token gets when
decoded at its exit layer, lm_head(final_norm(h_{l_exit})). The head runs once per token, on the exited states
only (a confidence rule additionally pays its per-layer lens, which is its decision cost). Its ``flops_fraction``
= mean(l_exit) / L counts block FLOPs (the head is paid once either way): the decision quality of the rule, as the
paper reports it.

``generate`` is greedy decoding that really stops early: the prompt is prefilled at full depth; for each new token
the blocks run one at a time and the token leaves at its exit layer. In a batch, each block runs only on the rows
that have not exited; the K/V of the skipped blocks are computed from the exited state h_l (CALM-style state
propagation), so later tokens find a full cache. Its ``flops_fraction`` counts exactly what ran: the blocks
applied to each row plus those K/V projections (``block_rows`` and ``kv_rows`` give the raw counts).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .adapters import _cache_keyword, get_adapter, new_cache
from .criteria import ExitCriterion, ExitState, GeometricExitCriterion
from .geometry import Trajectory, _validate_ids, collect_trajectory


@dataclass
class EarlyExitOutput:
    """``logits`` [B, T, V] decoded at each token's exit layer; ``exit_layers`` [B, T] in 1..L;
    ``flops_fraction`` = mean(exit_layers) / L; ``trajectory`` the full-depth trajectory it was decided on."""

    logits: torch.Tensor
    exit_layers: torch.Tensor
    flops_fraction: float
    trajectory: Trajectory


@dataclass
class EarlyExitGeneration:
    """``sequences`` [B, T + n] prompt + greedy tokens; ``exit_layers`` [B, n] (the first new token comes from the
    full-depth prefill, so its entry is L); ``flops_fraction`` block FLOPs per new token over full depth, K/V
    propagation into skipped blocks included; ``block_rows`` (token-rows that went through a block) and ``kv_rows``
    (token-rows whose K/V were propagated into a skipped block), counted while decoding tokens 2..n."""

    sequences: torch.Tensor
    exit_layers: torch.Tensor
    flops_fraction: float
    block_rows: int = 0
    kv_rows: int = 0


class _RowSlot:
    """A one-layer stand-in for the KV cache, seen by a block (or ``fill_kv``) that runs on a subset of the rows.

    ``update`` returns the past K/V of those rows with the new ones appended, as ``Cache.update`` does, and keeps
    the new K/V so the caller can write them back into the full batch's cache.
    """

    def __init__(self, keys: torch.Tensor | None, values: torch.Tensor | None):
        self.keys, self.values = keys, values
        self.new: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(self, key_states, value_states, layer_idx=None, *args, **kwargs):
        self.new = (key_states, value_states)
        if self.keys is None:
            return key_states, value_states
        return torch.cat([self.keys, key_states], -2), torch.cat([self.values, value_states], -2)


class GeometricEarlyExitLM(nn.Module):
    """Wrap ``model`` (left unchanged) with an exit rule; the default rule never exits.

    >>> ee = GeometricEarlyExitLM(model, GeometricExitCriterion(tau_step=0.2, tau_cos=0.5))
    >>> out = ee(input_ids); out.exit_layers, out.flops_fraction
    >>> gen = ee.generate(input_ids, max_new_tokens=20)
    """

    def __init__(self, model: nn.Module, criterion: ExitCriterion | None = None):
        super().__init__()
        self.adapter = get_adapter(model)
        if criterion is None:
            criterion = GeometricExitCriterion.disabled()
        if not isinstance(criterion, ExitCriterion):
            raise TypeError(f"criterion must be an ExitCriterion (e.g. GeometricExitCriterion), got {type(criterion).__name__}")
        criterion.resolve_min_layer(self.adapter.num_layers)
        self.model = model
        self.criterion = criterion

    @property
    def num_layers(self) -> int:
        return self.adapter.num_layers

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor) -> EarlyExitOutput:
        traj = collect_trajectory(self.model, input_ids, with_lens=self.criterion.needs_lens, with_logits=False)
        exit_layers = self.criterion.exit_layers(traj)                       # [B, T]
        # h_{l_exit} of every token, decoded with the model's own head: one head application per token
        idx = exit_layers[None, ..., None].expand(1, *exit_layers.shape, traj.hidden.shape[-1])
        logits = self.adapter.lens(traj.hidden.gather(0, idx)[0])
        return EarlyExitOutput(logits, exit_layers, float(exit_layers.double().mean() / self.num_layers), traj)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, max_new_tokens: int = 20) -> EarlyExitGeneration:
        """Greedy decoding with per-token early exit. Rows must be unpadded prompts of equal length.

        Each block runs only on the rows still iterating; exited rows get the skipped blocks' K/V projected from
        their exited state, and the FLOPs count is exactly what ran.
        """
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
        ad, L = self.adapter, self.num_layers
        ids = _validate_ids(input_ids, ad.vocab_size, ad.max_positions, max_new_tokens - 1).to(ad.head.weight.device)
        B, T = ids.shape
        cache = new_cache(self.model)
        out = self.model(input_ids=ids, use_cache=True, **{_cache_keyword(self.model.forward): cache})
        kv = [(layer.keys, layer.values) for layer in cache.layers]          # per block: [B, heads, T, head_dim]
        token = out.logits[:, -1].argmax(-1)
        tokens, exits = [token], [torch.full((B,), L, dtype=torch.long, device=ids.device)]
        lens = ad.lens if self.criterion.needs_lens else None
        block_rows = kv_rows = 0
        for t in range(T, T + max_new_tokens - 1):
            pos = torch.full((B, 1), t, dtype=torch.long, device=ids.device)
            h = ad.embed(token[:, None], pos)                                 # [B, 1, d]
            state = ExitState.start(B, L, ids.device)
            for i in range(L):
                active = ~state.done
                h_new = h
                if bool(active.any()):
                    rows = active.nonzero().flatten()
                    slot = _RowSlot(*((x if bool(active.all()) else x[rows]) for x in kv[i]))
                    h_run = ad.run_block(i, h[rows], pos[rows], slot, ad.decode_context(h[rows], pos[rows]))
                    h_new = h.index_copy(0, rows, h_run)
                    block_rows += len(rows)
                    new_rows = [(rows, slot.new)]
                else:
                    new_rows = []
                if not bool(active.all()):
                    # CALM-style: the K/V of block i for exited rows, projected from their exited state h_l
                    rows = (~active).nonzero().flatten()
                    slot = _RowSlot(None, None)
                    ad.fill_kv(i, h[rows], pos[rows], slot, ad.decode_context(h[rows], pos[rows]))
                    kv_rows += len(rows)
                    new_rows.append((rows, slot.new))
                k_col = torch.empty(B, *new_rows[0][1][0].shape[1:], dtype=kv[i][0].dtype, device=ids.device)
                v_col = torch.empty(B, *new_rows[0][1][1].shape[1:], dtype=kv[i][1].dtype, device=ids.device)
                for rows, (k, v) in new_rows:
                    k_col[rows], v_col[rows] = k, v
                kv[i] = (torch.cat([kv[i][0], k_col], -2), torch.cat([kv[i][1], v_col], -2))
                if bool(active.any()):
                    self.criterion.update(state, h[:, 0], h_new[:, 0], lens)   # exited rows keep their state
                    h = h_new
                else:
                    state.layer += 1
            token = ad.lens(h[:, 0]).argmax(-1)
            tokens.append(token)
            exits.append(state.exit_layer)
        exit_layers = torch.stack(exits, 1)
        e = exit_layers.double()
        flops = (e + (L - e) * ad.kv_cost()).mean() / L
        return EarlyExitGeneration(torch.cat([ids, torch.stack(tokens, 1)], 1), exit_layers, float(flops),
                                   block_rows, kv_rows)
