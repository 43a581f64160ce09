"""[A07] Sliding-window attention with attention sinks (the lossless short-term memory of an AHN model).

Query t attends to key j iff  j <= t  and  (j > t - W  or  j < S):  the last W tokens (t included) plus the first S
"sink" tokens (StreamingLLM). With S = 0 this is Mistral's ``sliding_window = W``; with W >= T it is full causal
attention. Cost accounting for the AHN model vs full attention lives here too.
"""

from __future__ import annotations

import torch

from icml26.harness import validate as v


def check_window(window: int | None, num_sinks: int = 0) -> None:
    """Raise ``ValueError`` unless window is None (full attention) or an int >= 1 and num_sinks an int >= 0."""
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be a positive int (tokens kept in the sliding window) or None for full "
                         f"attention, got {window!r}; pass e.g. window=32")
    if isinstance(num_sinks, bool) or not isinstance(num_sinks, int) or num_sinks < 0:
        raise ValueError(f"num_sinks must be an int >= 0 (attention-sink tokens kept at the start), got {num_sinks!r}")


def sliding_window_mask(T: int, window: int | None, num_sinks: int = 0, *,
                        device: torch.device | None = None) -> torch.Tensor:
    """Boolean [T, T] mask, True where query t may attend to key j: j <= t and (t - j < W or j < S) [A07]."""
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ValueError(f"T must be a positive int, got {T!r}")
    check_window(window, num_sinks)
    i = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None, :]
    mask = j <= i
    if window is not None:
        mask &= (j > i - window) | (j < num_sinks)
    return mask


def attended_keys(T: int, window: int | None, num_sinks: int = 0) -> int:
    """Number of (query, key) pairs attended over a length-T sequence (sum over t of min(t+1, |sinks ∪ window|))."""
    v.positive_int("T", T)
    check_window(window, num_sinks)
    t = torch.arange(T, dtype=torch.float64)
    if window is None:
        return int((t + 1).sum())
    in_window = (t + 1).clamp(max=window)                   # the last W tokens (t included)
    sinks_outside = (t + 1 - window).clamp(min=0, max=num_sinks)  # sinks that have left the window
    return int((in_window + sinks_outside).sum())


def _sizes(**kw: int) -> None:
    for name, val in kw.items():
        v.positive_int(name, val)


def attention_flops(T: int, *, num_layers: int, num_heads: int, head_dim: int, window: int | None = None,
                    num_sinks: int = 0, memory: bool = False) -> float:
    """Attention FLOPs of a length-T forward (scores + weighted sum: 4·H·d per attended pair per layer), plus, with
    ``memory``, the AHN's per-token cost of absorbing an evicted token and reading the state (~6·H·d² per layer:
    k^T S, the rank-1 update, q^T S). Projections and MLPs are the same for both and left out (see
    :func:`decoder_flops` for the whole model) [A07]."""
    _sizes(T=T, num_layers=num_layers, num_heads=num_heads, head_dim=head_dim)
    pairs = attended_keys(T, window, num_sinks)
    flops = 4.0 * num_heads * head_dim * pairs * num_layers
    if memory and window is not None:
        active = max(0, T - window - num_sinks)
        flops += 6.0 * num_heads * head_dim * head_dim * active * num_layers
    return flops


def decoder_flops(T: int, *, num_layers: int, hidden_size: int, intermediate_size: int, num_heads: int,
                  num_kv_heads: int, head_dim: int, vocab_size: int, window: int | None = None, num_sinks: int = 0,
                  memory: bool = False) -> float:
    """FLOPs of a length-T forward of a Llama-style decoder (2 per multiply-add): the linear layers per token
    (q, k, v, o; the gated MLP's three matrices; the LM head) plus :func:`attention_flops`; with ``memory`` also the
    AHN's own projections per reading token (three per-head gates from the hidden state and the per-head d x d
    output blocks: 2·(3·hidden·H + H·d²) per layer) [A07]."""
    _sizes(T=T, num_layers=num_layers, hidden_size=hidden_size, intermediate_size=intermediate_size,
           num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, vocab_size=vocab_size)
    per_token = num_layers * (hidden_size * num_heads * head_dim * 2 + 2 * hidden_size * num_kv_heads * head_dim
                              + 3 * hidden_size * intermediate_size) + hidden_size * vocab_size
    flops = 2.0 * per_token * T + attention_flops(T, num_layers=num_layers, num_heads=num_heads, head_dim=head_dim,
                                                  window=window, num_sinks=num_sinks, memory=memory)
    if memory and window is not None:
        active = max(0, T - window - num_sinks)
        flops += 2.0 * num_layers * (3 * hidden_size * num_heads + num_heads * head_dim * head_dim) * active
    return flops


def kv_cache_bytes(T: int, *, num_layers: int, num_kv_heads: int, head_dim: int, window: int | None = None,
                   num_sinks: int = 0, num_heads: int | None = None, memory: bool = False,
                   dtype_bytes: int = 4, state_bytes: int | None = None) -> int:
    """Bytes of one sequence's decoding cache after T tokens: K and V for min(T, S + W) tokens per layer (all T for full
    attention) at ``dtype_bytes`` each, plus with ``memory`` one d x d state per query head and layer and the two
    gate scalars per windowed token at ``state_bytes`` each (default ``dtype_bytes``; this package's
    :class:`AHNCache` keeps states and gates in float32 for float32 / half-precision models, ``state_bytes=4``, and
    in float64 for a float64 model) [A07]."""
    v.non_negative_int("T", T)
    _sizes(num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=head_dim, dtype_bytes=dtype_bytes)
    if num_heads is not None:
        v.positive_int("num_heads", num_heads)
    sb = dtype_bytes if state_bytes is None else v.positive_int("state_bytes", state_bytes)
    check_window(window, num_sinks)
    kept = T if window is None else min(T, num_sinks + window)
    b = 2 * num_layers * num_kv_heads * head_dim * kept * dtype_bytes
    if memory:
        h = num_heads or num_kv_heads
        b += num_layers * h * (head_dim * head_dim + 2 * min(T, window or T)) * sb
    return int(b)
