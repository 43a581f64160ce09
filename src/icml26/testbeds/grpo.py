"""A small GRPO core shared by the RL papers ([B07] HeRL, [B18] AutoTool, [B06] Retro-Expert).

Policies are Hugging Face causal LMs (any ``PreTrainedModel``; also any module returning ``.logits`` or a logits
tensor), so the same code runs on a tiny Llama testbed on CPU or a real checkpoint on a GPU.

GRPO (Shao et al. 2024), as in trl's ``GRPOTrainer``:

    group advantage     A_i = (r_i - mean_g r) / (std_g r + eps)        (std with Bessel's correction, like trl)
    ratio               rho_t = exp(log pi_theta(y_t|.) - log pi_old(y_t|.))
    clipped surrogate   l_t = -min(rho_t A, clip(rho_t, 1 - eps_lo, 1 + eps_hi) A)
    k3 KL to reference  kl_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1,   l_t += beta kl_t
    aggregation         grpo: mean over sequences of the per-sequence token mean
                        bnpo / dapo: sum over all tokens / number of tokens (one process, no accumulation)
                        dr_grpo: sum over all tokens / (B * max_completion_length)

Rollouts are group-contiguous: prompt i's ``G`` samples are rows ``i*G .. i*G+G-1``. Prompts are left-padded.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from torch import Tensor, nn

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")


# advantages

def group_advantages(rewards: Tensor, group_size: int, *, scale: bool = True, eps: float = 1e-4) -> Tensor:
    """Group-normalised advantages ``(r - group mean) / (group std + eps)`` for group-contiguous rewards ``[N]``.

    ``scale=False`` gives Dr. GRPO's unscaled ``r - mean``. Raises ``ValueError`` for ``group_size < 2`` (a
    group of one has no baseline) or when ``N`` is not a multiple of ``group_size``.
    """
    if isinstance(group_size, bool) or not isinstance(group_size, int):
        raise TypeError(f"group_size must be an int, got {type(group_size).__name__}")
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2 (GRPO needs at least two samples per prompt for a baseline), "
                         f"got {group_size}")
    if not isinstance(rewards, Tensor):
        raise TypeError(f"rewards must be a torch.Tensor, got {type(rewards).__name__}")
    if rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards must be 1-D with a length that is a multiple of group_size={group_size}, got "
                         f"shape {tuple(rewards.shape)}")
    r = rewards.float().view(-1, group_size)
    adv = r - r.mean(dim=1, keepdim=True)
    if scale:
        adv = adv / (r.std(dim=1, keepdim=True) + eps)
    return adv.reshape(-1)


def zero_advantage_fraction(rewards: Tensor, group_size: int) -> float:
    """Fraction of groups whose rewards are all equal (zero advantage, no learning signal; cf. trl #3452)."""
    r = rewards.view(-1, group_size)
    return float((r.max(dim=1).values == r.min(dim=1).values).float().mean())


# log-probabilities

def _accepts(model: nn.Module, name: str) -> bool:
    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False


def position_ids_from_mask(attention_mask: Tensor) -> Tensor:
    """Positions that skip left padding (the convention of HF ``generate``): cumsum(mask) - 1, clamped at 0."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def _logits(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, **kw) -> tuple[Tensor, object]:
    kwargs = {"input_ids": input_ids}
    if _accepts(model, "attention_mask"):
        kwargs["attention_mask"] = attention_mask
    if _accepts(model, "position_ids") and "position_ids" not in kw:
        kwargs["position_ids"] = position_ids_from_mask(attention_mask)
    kwargs.update(kw)
    out = model(**kwargs)
    logits = out.logits if hasattr(out, "logits") else out
    if not isinstance(logits, Tensor):
        raise TypeError("model must return an object with .logits or a logits tensor [B, T, V]")
    return logits, getattr(out, "past_key_values", None)


def _check_ids(input_ids: Tensor, attention_mask: Tensor) -> None:
    if not isinstance(input_ids, Tensor) or input_ids.dtype not in (torch.long, torch.int, torch.int32):
        raise TypeError("input_ids must be an integer torch.Tensor [B, T]")
    if input_ids.dim() != 2 or input_ids.shape[1] < 2:
        raise ValueError(f"input_ids must be [B, T] with T >= 2, got shape {tuple(input_ids.shape)}")
    if not isinstance(attention_mask, Tensor) or attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask must be a tensor with the shape of input_ids {tuple(input_ids.shape)}")


def token_logprobs(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """``log p(input_ids[:, 1:] | prefix)`` as ``[B, T-1]`` float32 (position ids skip left padding)."""
    _check_ids(input_ids, attention_mask)
    logits, _ = _logits(model, input_ids, attention_mask)
    logits = logits[:, :-1].float()
    tgt = input_ids[:, 1:].unsqueeze(-1)
    return logits.gather(-1, tgt).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def token_logprobs_and_entropy(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """``(log p(input_ids[:, 1:] | prefix), entropy of p(. | prefix))``, both ``[B, T-1]`` float32, from one forward
    pass (as :func:`token_logprobs`; the entropy is for an entropy bonus, verl's ``entropy_coeff``)."""
    _check_ids(input_ids, attention_mask)
    logits, _ = _logits(model, input_ids, attention_mask)
    logits = logits[:, :-1].float()
    logp_all = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    logp = logp_all.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return logp, -(logp_all.exp() * logp_all).sum(-1)


# loss

def grpo_loss(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, *, ref_logp: Tensor | None = None,
              clip_eps: float = 0.2, clip_eps_high: float | None = None, beta: float = 0.0, loss_type: str = "grpo",
              max_completion_length: int | None = None) -> tuple[Tensor, dict]:
    """Token-level clipped GRPO loss with optional k3 KL to a reference, aggregated as trl's ``GRPOTrainer``.

    ``logp``, ``old_logp``, ``ref_logp``, ``mask``: ``[B, T]``; ``advantages``: ``[B]`` (per sequence) or
    ``[B, T]``. ``max_completion_length`` is Dr. GRPO's constant denominator (default ``mask.shape[1]``).
    Returns ``(loss, metrics)`` with ``clip_fraction`` (low, high), ``kl``, ``ratio_mean`` (masked means).
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    if logp.shape != old_logp.shape or logp.shape != mask.shape:
        raise ValueError(f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)} and mask "
                         f"{tuple(mask.shape)} must have the same [B, T] shape")
    if beta != 0.0 and ref_logp is None:
        raise ValueError("beta != 0 needs ref_logp (log-probs of the reference policy)")
    if not clip_eps >= 0:
        raise ValueError(f"clip_eps must be >= 0, got {clip_eps}")
    eps_hi = clip_eps if clip_eps_high is None else clip_eps_high
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    mask = mask.to(logp.dtype)
    coef_1 = torch.exp(logp - old_logp)
    coef_2 = torch.clamp(coef_1, 1 - clip_eps, 1 + eps_hi)
    per_token = -torch.min(coef_1 * adv, coef_2 * adv)
    kl = None
    if beta != 0.0:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1
        per_token = per_token + beta * kl
    n_tok = mask.sum().clamp(min=1.0)
    if loss_type == "grpo":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif loss_type in ("bnpo", "dapo"):
        loss = (per_token * mask).sum() / n_tok
    else:  # dr_grpo
        L = mask.shape[1] if max_completion_length is None else max_completion_length
        loss = (per_token * mask).sum() / (per_token.size(0) * L)
    with torch.no_grad():
        low = ((coef_1 < 1 - clip_eps) & (adv < 0)).to(mask.dtype)
        high = ((coef_1 > 1 + eps_hi) & (adv > 0)).to(mask.dtype)
        metrics = {"clip_fraction": float(((low + high) * mask).sum() / n_tok),
                   "clip_low": float((low * mask).sum() / n_tok), "clip_high": float((high * mask).sum() / n_tok),
                   "ratio_mean": float((coef_1 * mask).sum() / n_tok),
                   "kl": float((kl * mask).sum() / n_tok) if kl is not None else 0.0,
                   "loss": float(loss.detach())}
    return loss, metrics


# generation

@dataclass
class Rollout:
    """Sampled sequences, group-contiguous. ``completion_mask[:, t]`` refers to token ``sequences[:, t+1]``: 1 on
    generated tokens (after the prompt, up to and including EOS). ``old_logp`` is ``token_logprobs`` of the
    sampling policy (temperature 1), ``[B, T-1]``. Prompts occupy columns ``< prompt_len`` (left-padded)."""

    sequences: Tensor
    attention_mask: Tensor
    completion_mask: Tensor
    old_logp: Tensor
    prompt_len: int
    num_return_sequences: int = 1

    @property
    def completion_ids(self) -> Tensor:
        """``[B, T - prompt_len]`` generated tokens (padding after EOS is masked in ``completion_mask``)."""
        return self.sequences[:, self.prompt_len:]

    @property
    def completion_token_mask(self) -> Tensor:
        """``[B, T - prompt_len]`` mask aligned with ``completion_ids``."""
        return self.completion_mask[:, self.prompt_len - 1:]

    def __len__(self) -> int:
        return self.sequences.shape[0]


def _sample(logits: Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None) -> Tensor:
    logits = logits.float()
    if temperature == 0.0:
        return logits.argmax(-1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate_with_logprobs(model: nn.Module, prompt_ids: Tensor, prompt_mask: Tensor, *, num_return_sequences: int,
                           max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                           eos_token_id: int | None = None, generator: torch.Generator | None = None,
                           pad_token_id: int | None = None) -> Rollout:
    """Sample ``num_return_sequences`` completions per (left-padded) prompt with a KV cache when the model supports
    one (``use_cache``), else by recomputing the prefix. Rows are group-contiguous. ``temperature=0`` is greedy.
    Same ``generator`` state -> same samples. ``old_logp`` is recomputed by one full forward pass, so it equals
    ``token_logprobs(model, sequences, attention_mask)`` exactly."""
    if prompt_ids.dim() != 2 or prompt_mask.shape != prompt_ids.shape:
        raise ValueError(f"prompt_ids and prompt_mask must both be [P, L], got {tuple(prompt_ids.shape)} and "
                         f"{tuple(prompt_mask.shape)}")
    if int(num_return_sequences) < 1 or int(max_new_tokens) < 1:
        raise ValueError(f"num_return_sequences and max_new_tokens must be >= 1, got {num_return_sequences}, "
                         f"{max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be None or >= 1, got {top_k}")
    was_training = model.training
    model.eval()
    G, L = int(num_return_sequences), prompt_ids.shape[1]
    ids = prompt_ids.repeat_interleave(G, dim=0)
    attn = prompt_mask.to(torch.long).repeat_interleave(G, dim=0)
    B, dev = ids.shape[0], ids.device
    pad = pad_token_id if pad_token_id is not None else (eos_token_id if eos_token_id is not None else 0)
    # newer transformers take the KV cache as ``cache`` (``past_key_values`` is deprecated there), older ones as
    # ``past_key_values``; the cache object is updated in place and also returned as ``out.past_key_values``
    cache_kw = "cache" if _accepts(model, "cache") else "past_key_values"
    use_cache = _accepts(model, "use_cache") and _accepts(model, cache_kw)
    finished = torch.zeros(B, dtype=torch.bool, device=dev)
    out_tokens, out_valid = [], []
    past = None
    if use_cache:
        logits, past = _logits(model, ids, attn, use_cache=True)
    else:
        logits, _ = _logits(model, ids, attn)
    seq, mask = ids, attn
    for _ in range(int(max_new_tokens)):
        nxt = _sample(logits[:, -1], temperature, top_k, generator)
        valid = ~finished
        nxt = torch.where(valid, nxt, torch.full_like(nxt, pad))
        out_tokens.append(nxt)
        out_valid.append(valid)
        if eos_token_id is not None:
            finished = finished | (nxt == eos_token_id)
        seq = torch.cat([seq, nxt[:, None]], dim=1)
        mask = torch.cat([mask, valid.long()[:, None]], dim=1)
        if bool(finished.all()) or len(out_tokens) == int(max_new_tokens):
            break
        if use_cache:
            pos = position_ids_from_mask(mask)[:, -1:]
            logits, new_past = _logits(model, nxt[:, None], mask, use_cache=True, position_ids=pos, **{cache_kw: past})
            past = past if new_past is None else new_past
        else:
            logits, _ = _logits(model, seq, mask)
    comp_valid = torch.stack(out_valid, dim=1).long()
    completion_mask = torch.cat([torch.zeros(B, L - 1, dtype=torch.long, device=dev), comp_valid], dim=1)
    old_logp = token_logprobs(model, seq, mask)
    model.train(was_training)
    return Rollout(sequences=seq, attention_mask=mask, completion_mask=completion_mask.float(), old_logp=old_logp,
                   prompt_len=L, num_return_sequences=G)


# one optimisation step

@dataclass
class GRPOConfig:
    """GRPO hyper-parameters (``max_grad_norm``: gradient clipping, ``None`` to disable; ``clip_eps_high``: DAPO's
    asymmetric upper clip, ``None`` = ``clip_eps``)."""

    group_size: int = 8
    clip_eps: float = 0.2
    beta: float = 0.0
    loss_type: str = "grpo"
    lr: float = 1e-4
    max_new_tokens: int = 16
    temperature: float = 1.0
    clip_eps_high: float | None = None
    max_grad_norm: float | None = 1.0

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (GRPO needs a group baseline), got {self.group_size}")
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}")
        if self.clip_eps < 0 or self.beta < 0 or self.lr <= 0 or self.max_new_tokens < 1 or self.temperature < 0:
            raise ValueError("need clip_eps >= 0, beta >= 0, lr > 0, max_new_tokens >= 1, temperature >= 0; got "
                             f"{self}")


def grpo_step(model: nn.Module, optimizer: torch.optim.Optimizer, rollout: Rollout, advantages: Tensor,
              cfg: GRPOConfig, *, ref_model: nn.Module | None = None) -> dict:
    """One optimizer step on the GRPO loss of ``rollout`` (advantages ``[B]`` or ``[B, T-1]``). Returns metrics."""
    if advantages.shape[0] != len(rollout):
        raise ValueError(f"advantages has {advantages.shape[0]} rows, rollout {len(rollout)}")
    if cfg.beta != 0.0 and ref_model is None:
        raise ValueError("cfg.beta > 0 needs a ref_model")
    model.train()
    ref_logp = None
    if cfg.beta != 0.0:
        with torch.no_grad():
            ref_logp = token_logprobs(ref_model, rollout.sequences, rollout.attention_mask)
    logp = token_logprobs(model, rollout.sequences, rollout.attention_mask)
    loss, metrics = grpo_loss(logp, rollout.old_logp, advantages.to(logp.dtype), rollout.completion_mask,
                              ref_logp=ref_logp, clip_eps=cfg.clip_eps, clip_eps_high=cfg.clip_eps_high,
                              beta=cfg.beta, loss_type=cfg.loss_type, max_completion_length=cfg.max_new_tokens)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.max_grad_norm is not None:
        metrics["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm))
    optimizer.step()
    return metrics


__all__ = ["LOSS_TYPES", "GRPOConfig", "Rollout", "generate_with_logprobs", "group_advantages", "grpo_loss",
           "grpo_step", "position_ids_from_mask", "token_logprobs", "zero_advantage_fraction"]
