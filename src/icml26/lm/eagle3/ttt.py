"""[B04] Training the EAGLE-3 draft: target-regenerated data, training-time test (TTT), online / offline modes.

Loss (SpecForge): with K unrolled TTT steps and decay 0.8,

    L = sum_{k<K} 0.8^k * mean_t[ -m^k_t * sum_{v in V_d} p_T(v | x_{<=t+k+1}) log q_k(v | t) ]

where p_T is the softmax of the target logits restricted to V_d, q_k the draft's step-k distribution (row t of
step k predicts x_{t+k+2}), and m^k_t = loss_mask[t+k+2] * [argmax target logits at t+k+1 is in V_d].

Mask alignment. By default (``mask_alignment="target"``) the loss mask is read at the predicted token x_{t+k+2}:
a prediction counts when the token it predicts is a response token. SpecForge reads it at t+k (after its
one-position shift of ids and logits it keeps ``loss_mask`` unshifted, then shifts it once per TTT step), i.e.
two positions before the predicted token: it skips predicting the first two response tokens and trains on the
two tokens after the response (in chat data, end-of-turn template tokens). ``mask_alignment="specforge"``
reproduces that exactly (tested against a transcription of SpecForge's per-step view and loss); the two agree
wherever the mask is constant over the window.

Target-draft decoupling: ``online`` runs the frozen target on every batch; ``offline`` captures the fused aux
features and the target's last hidden state once (logits are recomputed with the target's head) and then
trains without running the target's decoder stack.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from icml26.harness import validate

from .decoding import _new_cache, _target_forward, validate_generation_inputs
from .draft import Eagle3Draft, num_decoder_layers, target_vocab_size

log = logging.getLogger(__name__)

# target features


@torch.no_grad()
def capture_aux_hidden_states(target: nn.Module, ids: torch.Tensor, aux_layers: Sequence[int],
                              return_last_hidden: bool = False):
    """Run the target once: fused features ``aux [B, T, len(aux_layers) * d]`` and ``logits [B, T, V]``.

    ``aux_layers`` are 0-based decoder layers; the feature of layer l is the hidden state after layer l
    (``hidden_states[l + 1]`` in Hugging Face's convention). With ``return_last_hidden`` the third output is the
    final (normed) hidden state, from which the logits are recomputed in offline mode.
    """
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long or ids.ndim != 2 or ids.shape[1] == 0:
        raise ValueError("ids must be a non-empty LongTensor of shape [batch, seq_len]")
    n = num_decoder_layers(target)
    if not aux_layers or any(not 0 <= int(i) < n for i in aux_layers):
        raise ValueError(f"aux_layers must name decoder layers in [0, {n}), got {tuple(aux_layers)}")
    if int(ids.max()) >= target_vocab_size(target) or int(ids.min()) < 0:
        raise ValueError(f"ids outside the target's vocabulary [0, {target_vocab_size(target)})")
    out = target(input_ids=ids, use_cache=False, output_hidden_states=True)
    aux = torch.cat([out.hidden_states[int(i) + 1] for i in aux_layers], dim=-1)
    if return_last_hidden:
        return aux, out.logits, out.hidden_states[-1]
    return aux, out.logits


@torch.inference_mode()
def regenerate_responses(target: nn.Module, prompts: torch.Tensor, new_tokens: int, batch_size: int = 64
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's own greedy continuations of ``prompts [N, P]`` (batched, KV-cached) [B04].

    Returns ``(ids [N, P + new_tokens], loss_mask)`` with the loss mask set on the response tokens only.
    """
    if not isinstance(prompts, torch.Tensor) or prompts.ndim != 2:
        raise ValueError("prompts must be a LongTensor of shape [n_prompts, prompt_len] (equal-length prompts)")
    validate_generation_inputs(target, prompts[:1], new_tokens)
    batch_size = validate.positive_int("batch_size", batch_size)
    rows = []
    for chunk in prompts.split(batch_size):
        cache = _new_cache(target)
        logits, _, cache = _target_forward(target, chunk, cache, None)
        toks = [logits[:, -1].argmax(-1)]
        for _ in range(new_tokens - 1):
            logits, _, cache = _target_forward(target, toks[-1][:, None], cache, None)
            toks.append(logits[:, -1].argmax(-1))
        rows.append(torch.cat([chunk, torch.stack(toks, 1)], 1))
    ids = torch.cat(rows)
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[:, prompts.shape[1]:] = True
    return ids, mask


# the loss


def _shift(x: torch.Tensor, n: int) -> torch.Tensor:
    """x[:, t + n] at row t (zero past the end)."""
    pad = [0, 0] * (x.ndim - 2) + [0, n]
    return F.pad(x[:, n:], pad)


MASK_OFFSET = {"target": 2, "specforge": 0}  # m^k_t reads loss_mask[t + k + offset]


def eagle3_ttt_loss(draft: Eagle3Draft, ids: torch.Tensor, aux: torch.Tensor, target_logits: torch.Tensor,
                    loss_mask: torch.Tensor, ttt_length: int = 7, decay: float = 0.8,
                    mask_alignment: str = "target") -> tuple[torch.Tensor, torch.Tensor]:
    """The decayed multi-step TTT loss [B04]; returns ``(loss, step_acc [K])``.

    ``ids [B, T]`` token ids, ``aux [B, T, k*d]`` fused target features, ``target_logits [B, T, V]`` (row t
    predicts x_{t+1}), ``loss_mask [B, T]`` set on the tokens to learn (the responses). ``step_acc[k]`` is the
    draft's top-1 agreement with the target at TTT step k on the counted positions. ``mask_alignment``:
    ``"target"`` (the mask at the predicted token) or ``"specforge"`` (two positions earlier, as SpecForge).
    """
    if mask_alignment not in MASK_OFFSET:
        raise ValueError(f"mask_alignment must be one of {sorted(MASK_OFFSET)}, got {mask_alignment!r}")
    if not isinstance(ttt_length, int) or ttt_length < 1:
        raise ValueError(f"ttt_length must be a positive int, got {ttt_length!r}")
    if not 0 < decay <= 1:
        raise ValueError(f"decay must be in (0, 1], got {decay!r}")
    validate.finite("aux", aux)
    validate.finite("target_logits", target_logits)
    B, T = ids.shape
    if aux.shape[:2] != (B, T) or target_logits.shape[:2] != (B, T) or loss_mask.shape != (B, T):
        raise ValueError(f"ids {tuple(ids.shape)}, aux {tuple(aux.shape[:2])}, target_logits "
                         f"{tuple(target_logits.shape[:2])} and loss_mask {tuple(loss_mask.shape)} must share [B, T]")
    if target_logits.shape[-1] != draft.config.vocab_size:
        raise ValueError(f"target_logits have {target_logits.shape[-1]} classes, the draft maps into "
                         f"{draft.config.vocab_size}")
    target_logits = target_logits.float()
    p_all = torch.softmax(target_logits[..., draft.d2t], dim=-1)  # p_T restricted to V_d (renormalised)
    target_d = target_logits[..., draft.d2t].argmax(-1)
    in_vocab = draft.t2d[target_logits.argmax(-1)].float()
    mask = loss_mask.float()
    states = draft.ttt_states(ids, aux, ttt_length)
    loss = aux.new_zeros(())
    acc = []
    for k, a in enumerate(states):
        m = _shift(mask, k + MASK_OFFSET[mask_alignment]) * _shift(in_vocab, k + 1)
        logq = torch.log_softmax(draft.logits(a).float(), dim=-1)
        ce = -(_shift(p_all, k + 1) * logq).sum(-1)
        loss = loss + decay ** k * (m * ce).mean()
        with torch.no_grad():
            hit = (logq.argmax(-1) == _shift(target_d, k + 1)).float()
            acc.append((hit * m).sum() / m.sum().clamp_min(1.0))
    return loss, torch.stack(acc)


# the trainer


class Eagle3Trainer:
    """Train an :class:`Eagle3Draft` against a frozen target with TTT, online or offline [B04].

    ``fit(batches, epochs, lr)`` takes a list of ``(ids [B, T], loss_mask [B, T])`` batches. Offline mode
    captures (aux, last hidden) per batch once (``capture_time_``; to ``cache_dir`` when given) and recomputes
    the target logits with the target's output head, so the losses equal online mode's for the same batches.
    After ``fit``: ``losses_`` (per step), ``step_acc_`` ([steps, K]), ``epoch_times_`` (seconds per epoch).
    """

    def __init__(self, target: nn.Module, draft: Eagle3Draft, mode: str = "online", cache_dir: str | Path | None = None,
                 ttt_length: int = 7, decay: float = 0.8, weight_decay: float = 0.0, clip: float = 0.5, warmup_steps: int = 10, seed: int = 0,
                 mask_alignment: str = "target", logits_atol: float = 1e-4):
        if mode not in ("online", "offline"):
            raise ValueError(f"mode must be 'online' or 'offline', got {mode!r}")
        if mask_alignment not in MASK_OFFSET:
            raise ValueError(f"mask_alignment must be one of {sorted(MASK_OFFSET)}, got {mask_alignment!r}")
        if not isinstance(draft, Eagle3Draft):
            raise TypeError(f"draft must be an Eagle3Draft, got {type(draft).__name__}")
        if draft.config.vocab_size != target_vocab_size(target):
            raise ValueError(f"draft vocabulary map covers {draft.config.vocab_size} target tokens, the target has "
                             f"{target_vocab_size(target)}: build the draft with Eagle3Draft.from_target(target)")
        validate.positive("clip", clip)
        validate.non_negative("weight_decay", weight_decay)
        validate.non_negative_int("warmup_steps", warmup_steps)
        self.target, self.draft, self.mode = target, draft, mode
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.ttt_length, self.decay, self.weight_decay, self.clip, self.seed = ttt_length, decay, weight_decay, clip, seed
        self.warmup_steps, self.mask_alignment, self.logits_atol = warmup_steps, mask_alignment, logits_atol
        self._offline: list | None = None

    def _features(self, i: int, ids: torch.Tensor):
        aux_layers = self.draft.config.aux_layers
        if self.mode == "online":
            return capture_aux_hidden_states(self.target, ids, aux_layers)
        aux, last = self._offline[i] if self.cache_dir is None else torch.load(self._offline[i], weights_only=True)
        with torch.no_grad():
            return aux, self.target.get_output_embeddings()(last)

    def capture(self, batches: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> "Eagle3Trainer":
        """Offline mode: run the target once over ``batches`` and keep (aux, last hidden) per batch."""
        t0 = time.perf_counter()
        store = []
        if self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        for i, (ids, _) in enumerate(batches):
            aux, logits, last = capture_aux_hidden_states(self.target, ids, self.draft.config.aux_layers, True)
            if i == 0:
                self._check_head_recomputes_logits(last, logits)
            if self.cache_dir is None:
                store.append((aux, last))
            else:
                path = self.cache_dir / f"batch{i:06d}.pt"
                torch.save((aux, last), path)
                store.append(path)
        self._offline, self.capture_time_ = store, time.perf_counter() - t0
        return self

    @torch.no_grad()
    def _check_head_recomputes_logits(self, last: torch.Tensor, logits: torch.Tensor) -> None:
        """Offline mode recomputes logits as ``output_embeddings(last hidden)``; models that scale or soft-cap
        their logits after the head (Gemma-2's final soft-capping, Cohere's logit scale, ...) would then train
        the draft against different targets than online mode, so the first captured batch is checked."""
        head = self.target.get_output_embeddings()
        if head is None:
            raise ValueError("offline mode recomputes the logits with the target's output head, but "
                             "target.get_output_embeddings() is None: use mode='online'")
        err = float((head(last).float() - logits.float()).abs().max())
        if not err <= self.logits_atol:
            raise ValueError(f"offline mode cannot reproduce the target's logits from its last hidden state "
                             f"(max |difference| {err:.3g} > logits_atol={self.logits_atol:g}): the model "
                             "transforms its logits after the output head (scaling or soft-capping?). "
                             "Use mode='online', or raise logits_atol if the difference is rounding")

    def fit(self, batches: Sequence[tuple[torch.Tensor, torch.Tensor]], epochs: int = 1, lr: float = 1e-3
            ) -> "Eagle3Trainer":
        if not batches:
            raise ValueError("batches is empty: pass a list of (ids, loss_mask) batches")
        if not isinstance(epochs, int) or epochs < 1 or not lr > 0:
            raise ValueError(f"epochs must be a positive int and lr > 0, got epochs={epochs!r}, lr={lr!r}")
        for ids, mask in batches:
            if ids.shape != mask.shape or ids.ndim != 2:
                raise ValueError("each batch must be (ids [B, T], loss_mask [B, T])")
        if self.mode == "offline" and (self._offline is None or len(self._offline) != len(batches)):
            self.capture(batches)
        self.target.eval()
        draft = self.draft.train()
        params = [p for p in draft.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=self.weight_decay)
        # linear warmup, then constant: the schedule does not depend on the number of epochs
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, self.warmup_steps)))
        g = torch.Generator().manual_seed(self.seed)
        self.losses_, self.step_acc_, self.epoch_times_ = [], [], []
        for epoch in range(epochs):
            t0 = time.perf_counter()
            for i in torch.randperm(len(batches), generator=g).tolist():
                ids, mask = batches[i]
                aux, logits = self._features(i, ids)
                loss, acc = eagle3_ttt_loss(draft, ids, aux, logits, mask, self.ttt_length, self.decay,
                                            self.mask_alignment)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, self.clip)
                opt.step()
                sched.step()
                self.losses_.append(loss.item())
                self.step_acc_.append(acc.tolist())
            self.epoch_times_.append(time.perf_counter() - t0)
            log.info("eagle3 %s epoch %d loss %.3f acc %s (%.1f s)", self.mode, epoch, self.losses_[-1],
                     [round(a, 2) for a in self.step_acc_[-1]], self.epoch_times_[-1])
        draft.eval()
        return self
