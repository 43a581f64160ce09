"""[A07] Sliding-window attention with attention sinks (the lossless short-term memory of an AHN model).

Query t attends to key j iff  j <= t  and  (j > t - W  or  j < S):  the last W tokens (t included) plus the first S
"sink" tokens (StreamingLLM). With S = 0 this is Mistral's ``sliding_window = W``; with W >= T it is full causal
attention. Cost accounting for the AHN model vs full attention lives here too.
"""

from __future__ import annotations

import torch


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
    check_window(window, num_sinks)
    t = torch.arange(T, dtype=torch.float64)
    if window is None:
        return int((t + 1).sum())
    in_window = (t + 1).clamp(max=window)                   # the last W tokens (t included)
    sinks_outside = (t + 1 - window).clamp(min=0, max=num_sinks)  # sinks that have left the window
    return int((in_window + sinks_outside).sum())


def attention_flops(T: int, *, num_layers: int, num_heads: int, head_dim: int, window: int | None = None,
                    num_sinks: int = 0, memory: bool = False) -> float:
    """Attention FLOPs of a length-T forward (scores + weighted sum: 4·H·d per attended pair per layer), plus, with
    ``memory``, the AHN's per-token cost of absorbing an evicted token and reading the state (~6·H·d² per layer:
    k^T S, the rank-1 update, q^T S). Projections and MLPs are the same for both and left out [A07]."""
    pairs = attended_keys(T, window, num_sinks)
    flops = 4.0 * num_heads * head_dim * pairs * num_layers
    if memory and window is not None:
        active = max(0, T - window - num_sinks)
        flops += 6.0 * num_heads * head_dim * head_dim * active * num_layers
    return flops


def kv_cache_bytes(T: int, *, num_layers: int, num_kv_heads: int, head_dim: int, window: int | None = None,
                   num_sinks: int = 0, num_heads: int | None = None, memory: bool = False,
                   dtype_bytes: int = 4) -> int:
    """Bytes of one sequence's decoding cache after T tokens: K and V for min(T, S + W) tokens per layer (all T for full
    attention), plus with ``memory`` one d x d state per query head and layer and the two gate scalars per windowed
    token [A07]."""
    check_window(window, num_sinks)
    kept = T if window is None else min(T, num_sinks + window)
    b = 2 * num_layers * num_kv_heads * head_dim * kept * dtype_bytes
    if memory:
        h = num_heads or num_kv_heads
        b += num_layers * h * (head_dim * head_dim + 2 * min(T, window or T)) * 4
    return int(b)
