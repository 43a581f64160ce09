"""Early-exit wrapper around a Hugging Face causal LM (Llama- or GPT-2-style) [A19].

``forward`` scores a teacher-forced batch: it runs every layer (later positions attend to the K/V of earlier
positions at every depth), applies the exit rule per token and returns the logits each token gets when decoded at
its exit layer, lm_head(final_norm(h_{l_exit})). Its ``flops_fraction`` = mean(l_exit) / L counts block FLOPs
(the head is paid once either way): the decision quality of the rule, as the paper reports it.

``generate`` is greedy decoding that really stops early: the prompt is prefilled at full depth; for each new token
the blocks run one at a time and the token leaves at its exit layer. The K/V of the skipped blocks are computed
from the exited state h_l (CALM-style state propagation), so later tokens find a full cache; those projections are
counted in its ``flops_fraction``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .adapters import get_adapter, new_cache, _cache_keyword
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
    propagation into skipped blocks included."""

    sequences: torch.Tensor
    exit_layers: torch.Tensor
    flops_fraction: float


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
        traj = collect_trajectory(self.model, input_ids, with_lens=self.criterion.needs_lens)
        exit_layers = self.criterion.exit_layers(traj)                       # [B, T]
        logits = traj.logits.clone()
        early = exit_layers < self.num_layers
        if early.any():
            # gather h_{l_exit} of the early tokens only and decode them with the model's own head
            h = traj.hidden.permute(1, 2, 0, 3)[early, exit_layers[early]]   # [n_early, d]
            logits[early] = self.adapter.lens(h).to(logits.dtype)
        return EarlyExitOutput(logits, exit_layers, float(exit_layers.double().mean() / self.num_layers), traj)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, max_new_tokens: int = 20) -> EarlyExitGeneration:
        """Greedy decoding with per-token early exit. Rows must be unpadded prompts of equal length."""
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
        ad, L = self.adapter, self.num_layers
        ids = _validate_ids(input_ids, ad.vocab_size).to(ad.head.weight.device)
        B, T = ids.shape
        cache = new_cache(self.model)
        out = self.model(input_ids=ids, use_cache=True, **{_cache_keyword(self.model.forward): cache})
        token = out.logits[:, -1].argmax(-1)
        tokens, exits = [token], [torch.full((B,), L, dtype=torch.long, device=ids.device)]
        lens = ad.lens if self.criterion.needs_lens else None
        for t in range(T, T + max_new_tokens - 1):
            pos = torch.full((B, 1), t, dtype=torch.long, device=ids.device)
            h = ad.embed(token[:, None], pos)                                 # [B, 1, d]
            ctx = ad.decode_context(h, pos)
            state = ExitState.start(B, L, ids.device)
            for i in range(L):
                if bool(state.done.all()):
                    ad.fill_kv(i, h, pos, cache, ctx)                         # CALM: K/V of skipped block from h_l
                    continue
                # exited rows run on their frozen state, which writes the same propagated K/V for them
                h_new = ad.run_block(i, h, pos, cache, ctx)
                was_done = state.done.clone()
                self.criterion.update(state, h[:, 0], h_new[:, 0], lens)
                h = torch.where(was_done[:, None, None], h, h_new)
            token = ad.lens(h[:, 0]).argmax(-1)
            tokens.append(token)
            exits.append(state.exit_layer)
        exit_layers = torch.stack(exits, 1)
        kv = ad.kv_cost()
        flops = (exit_layers + (L - exit_layers) * kv).double().mean() / L
        return EarlyExitGeneration(torch.cat([ids, torch.stack(tokens, 1)], 1), exit_layers, float(flops))
