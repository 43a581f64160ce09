"""[A14] Redundancy measures computed from a :class:`HiddenTrace` (the first three need no labels).

Block index i = 0..L-1 (0-based; the spec's layer l = i + 1); hidden index l = 0..L (h_0 = embeddings).

    (a) functional redundancy   R_i(S) = mean_{b, n in S} cos(h_i[b,n], h_{i+1}[b,n])          per token type S
        ShortGPT block influence BI_i  = 1 - R_i(all tokens)                                    (baseline)
    (b) inter-token redundancy  D_l    = mean over spatially adjacent vision pairs (n, m) of cos(h_l[n], h_l[m])
    (c) cross-modal usage       A_i    = mean_{b, heads, text queries q} sum_{k in V} attn_i[b, h, q, k]
    (d) unique visual info      U_l    = CE(probe(pool_T h_l)) - CE(probe(pool_T h_l, pool_V h_l))   (nats,
                                         cross-validated linear probes for the answer; U ~ 0: V carries no
                                         information about the answer that the text tokens do not already hold)
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.nn import functional as F

from icml26.harness import validate as v

from .skip import SkipPlan
from .trace import HiddenTrace


def _trace(trace: HiddenTrace) -> HiddenTrace:
    if not isinstance(trace, HiddenTrace):
        raise TypeError(f"trace must be a HiddenTrace (from collect_trace), got {v.describe(trace)}")
    return trace


def _mask(trace: HiddenTrace, mask: torch.Tensor | str | None) -> torch.Tensor:
    """The token set S as [B, N] bool; padding (``trace.valid``) is never in it."""
    _trace(trace)
    B, N = trace.hidden.shape[1:3]
    if mask is None or (isinstance(mask, str) and mask == "all"):
        return trace.valid.to(trace.hidden.device)
    if isinstance(mask, str):
        if mask == "vision":
            return trace.vision_mask
        if mask == "text":
            return trace.text_mask
        raise ValueError(f"unknown token type {mask!r}; use 'vision', 'text', 'all' or a bool mask")
    if not torch.is_tensor(mask) or mask.dtype != torch.bool:
        raise TypeError("mask must be a bool tensor [N] or [B, N], or one of 'vision', 'text', 'all'")
    if mask.ndim == 1:
        mask = mask[None].expand(B, -1)
    if mask.shape != (B, N):
        raise ValueError(f"mask has shape {tuple(mask.shape)}, the trace is [B={B}, N={N}]")
    return mask & trace.valid.to(mask.device)


def per_example_redundancy(trace: HiddenTrace, mask: torch.Tensor | str | None = "vision") -> torch.Tensor:
    """[L, B] mean over the masked tokens of example b of cos(h_i, h_{i+1}) (NaN where b has no masked token)."""
    m = _mask(trace, mask).to(trace.hidden.dtype)
    cos = F.cosine_similarity(trace.hidden[:-1], trace.hidden[1:], dim=-1)  # [L, B, N]
    return (cos * m).sum(-1) / m.sum(-1)


def layer_redundancy(trace: HiddenTrace, mask: torch.Tensor | str | None = "vision") -> torch.Tensor:
    """R_i(S) = mean over the tokens in S of cos(h_i, h_{i+1}), for each block i [A14]. ``mask``: 'vision',
    'text', 'all', or a bool mask [N] / [B, N]. Returns [L] (NaN when S is empty)."""
    m = _mask(trace, mask).to(trace.hidden.dtype)
    cos = F.cosine_similarity(trace.hidden[:-1], trace.hidden[1:], dim=-1)  # [L, B, N]
    return (cos * m).sum((1, 2)) / m.sum()


def block_influence(trace: HiddenTrace, mask: torch.Tensor | str | None = "all") -> torch.Tensor:
    """ShortGPT's Block Influence BI_i = 1 - mean cos(h_i, h_{i+1}) over all tokens (the baseline) [L]."""
    return 1.0 - layer_redundancy(trace, mask)


def adjacent_token_redundancy(trace: HiddenTrace, grid: tuple[int, int], per_example: bool = False) -> torch.Tensor:
    """D_l: mean cosine similarity of horizontally and vertically adjacent vision tokens at every hidden layer
    l = 0..L [L+1]. Vision tokens are taken in raster order on a ``grid`` = (rows, columns) layout, the same
    positions in every example. ``per_example``: [L+1, B] (the mean over each example's adjacent pairs)."""
    _trace(trace)
    if not isinstance(grid, (tuple, list)) or len(grid) != 2:
        raise ValueError(f"grid must be (rows, columns), got {v.describe(grid)}")
    r, c = v.positive_int("grid rows", grid[0]), v.positive_int("grid columns", grid[1])
    vm = trace.vision_mask
    if not bool((vm == vm[0]).all()):
        raise ValueError("adjacent_token_redundancy needs the vision tokens at the same positions in every example")
    pos = torch.nonzero(vm[0]).squeeze(1)
    if len(pos) != r * c:
        raise ValueError(f"grid {grid} has {r * c} cells but there are {len(pos)} vision tokens")
    u = F.normalize(trace.hidden[:, :, pos], dim=-1).view(trace.hidden.shape[0], trace.hidden.shape[1], r, c, -1)
    sims = []
    if c > 1:
        sims.append((u[:, :, :, 1:] * u[:, :, :, :-1]).sum(-1).flatten(2))
    if r > 1:
        sims.append((u[:, :, 1:] * u[:, :, :-1]).sum(-1).flatten(2))
    if not sims:
        raise ValueError("a 1x1 grid has no adjacent tokens")
    pairs = torch.cat(sims, -1)                                   # [L+1, B, pairs]
    return pairs.mean(2) if per_example else pairs.mean((1, 2))


def cross_modal_attention(trace: HiddenTrace, per_example: bool = False) -> torch.Tensor:
    """A_i: attention mass from text queries onto vision keys, averaged over heads and text queries, per block
    [L] (``per_example``: [L, B]). Text queries are the valid non-vision tokens (padding is left out)."""
    _trace(trace)
    if trace.attn is None:
        raise ValueError("the trace has no attention probabilities; collect it with attentions=True (and eager "
                         "attention)")
    N = trace.hidden.shape[2]
    if tuple(trace.attn.shape[-2:]) != (N, N):
        raise ValueError(f"the trace's attention covers {trace.attn.shape[-1]} of its {N} tokens (it was collected "
                         "under a plan that drops tokens); collect the trace without a plan to measure A")
    vm = trace.vision_mask.to(trace.attn.dtype)          # [B, N]
    tm = trace.text_mask.to(trace.attn.dtype)
    mass = (trace.attn * vm[None, :, None, None, :]).sum(-1).mean(2)  # [L, B, N] mass on V per query
    per_b = (mass * tm[None]).sum(-1) / tm.sum(-1).clamp_min(1)       # [L, B]
    return per_b if per_example else per_b.mean(1)


def uniform_vision_share(vision_mask: torch.Tensor, causal: bool = True, valid: torch.Tensor | None = None) -> float:
    """|V|/N as seen by the text queries: the attention mass on vision keys that uniform attention over the
    visible keys would give, averaged over text queries (and rows of a [B, N] mask). With a causal mask a text query
    at position q sees keys 0..q, so its uniform share is |V ∩ [0, q]| / (q + 1); without, |V| / N. This is the scale
    against which A_i is read: A_i / uniform_vision_share < 1 means text attends to V less than uniformly [A14].
    ``valid`` ([N] or [B, N] bool, False at padding): padded keys and queries are left out (as an attention mask
    leaves them out)."""
    vm = _bool_mask("vision_mask", vision_mask)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {v.describe(causal)}")
    vm = vm[None] if vm.ndim == 1 else vm
    if vm.shape[1] == 0:
        raise ValueError(f"vision_mask must be [N] or [B, N] booleans with N >= 1, got shape {tuple(vm.shape)}")
    ok = torch.ones_like(vm) if valid is None else _bool_mask("valid", valid)
    ok = ok[None].expand(vm.shape[0], -1) if ok.ndim == 1 else ok
    if ok.shape[1] != vm.shape[1] or ok.shape[0] not in (1, vm.shape[0]):
        raise ValueError(f"valid has shape {tuple(ok.shape)}, vision_mask {tuple(vm.shape)}; they must match")
    vm = vm & ok
    tm = ~vm & ok
    if not tm.any():
        raise ValueError("vision_mask marks every (valid) token as vision: no text queries")
    N = vm.shape[1]
    if causal:
        share = vm.double().cumsum(1) / ok.double().cumsum(1).clamp_min(1)
    else:
        share = (vm.double().sum(1, keepdim=True) / ok.double().sum(1, keepdim=True)).expand(-1, N)
    return float((share * tm).sum() / tm.sum())


def _bool_mask(name: str, mask) -> torch.Tensor:
    """A bool mask ([N] or [B, N]; torch or numpy) as a bool tensor; ``TypeError``/``ValueError`` otherwise."""
    if isinstance(mask, np.ndarray) and mask.dtype == bool:
        mask = torch.from_numpy(mask)
    if not torch.is_tensor(mask) or mask.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool tensor (or bool numpy array) of shape [N] or [B, N], got "
                        f"{v.describe(mask)}{'' if not hasattr(mask, 'dtype') else f' of dtype {mask.dtype}'}")
    if mask.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape [N] or [B, N], got {tuple(mask.shape)}")
    return mask


def _pool(h: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    m = m.to(h.dtype)[..., None]
    return (h * m).sum(-2) / m.sum(-2).clamp_min(1)


def unique_information_probe(trace: HiddenTrace, y: torch.Tensor | np.ndarray, *, layers: list[int] | None = None,
                             n_folds: int = 5, C: float = 0.5, seed: int = 0, max_iter: int = 100) -> np.ndarray:
    """U_l = CE(probe(pool_T h_l)) - CE(probe([pool_T h_l, pool_V h_l])) in nats, per hidden layer [A14].

    Linear (multinomial logistic, L2 strength 1/C, standardised features) probes for the labels ``y`` [B],
    cross-validated over ``n_folds`` stratified folds (the CE is on held-out folds). ``layers``: the hidden
    indices 0..L to probe (default all). With no vision tokens U is exactly 0.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    _trace(trace)
    y = v.finite("y", y.detach().cpu().numpy() if torch.is_tensor(y) else y)
    y = np.asarray(y)
    B = trace.hidden.shape[1]
    if y.shape != (B,):
        raise ValueError(f"y must have one label per example, shape ({B},), got {y.shape}")
    n_folds = v.positive_int("n_folds", n_folds, minimum=2)
    if n_folds > B:
        raise ValueError(f"n_folds must be <= the number of examples ({B}), got {n_folds}")
    C = v.positive("C", C)
    max_iter = v.positive_int("max_iter", max_iter)
    seed = v.non_negative_int("seed", seed)
    L = trace.num_layers
    layers = list(range(L + 1)) if layers is None else [v.non_negative_int("layers entry", x) for x in
                                                         v.non_empty("layers", layers)]
    for layer in layers:
        if not 0 <= layer <= L:
            raise ValueError(f"hidden layer {layer} is out of range 0..{L}")
    classes, yi = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError("y has a single class; a probe needs at least two")
    if not bool(trace.vision_mask.any()):
        return np.zeros(len(layers))
    folds = list(StratifiedKFold(n_folds, shuffle=True, random_state=seed).split(np.zeros(B), yi))

    def cv_ce(X: np.ndarray) -> float:
        total = 0.0
        for tr, te in folds:
            clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter))
            with warnings.catch_warnings():   # max_iter caps the fit (early stopping); the CE is held-out anyway
                warnings.simplefilter("ignore", ConvergenceWarning)
                clf.fit(X[tr], yi[tr])
            p = np.full((len(te), len(classes)), 1e-12)
            p[:, clf.classes_] = np.clip(clf.predict_proba(X[te]), 1e-12, 1.0)
            total += -np.log(p[np.arange(len(te)), yi[te]]).sum()
        return total / B

    out = []
    for layer in layers:
        h = trace.hidden[layer].double()
        t = _pool(h, trace.text_mask).cpu().numpy()
        vis = _pool(h, trace.vision_mask).cpu().numpy()
        out.append(cv_ce(t) - cv_ce(np.concatenate([t, vis], 1)))
    return np.asarray(out)


@dataclass
class RedundancyReport:
    """The per-layer measures of one model and the decision rules of [A14] (thresholds are our choice).

    ``R_vision``, ``R_text``, ``A``: per block [L]; ``D``, ``U``: per hidden layer [L+1] (``U`` optional);
    ``A_uniform``: :func:`uniform_vision_share` of the inputs (optional; lets ``recommend`` read tau_A relative to
    |V|/N)."""

    R_vision: np.ndarray
    R_text: np.ndarray
    A: np.ndarray
    D: np.ndarray | None = None
    U: np.ndarray | None = None
    extra: dict = field(default_factory=dict)
    A_uniform: float | None = None

    def __post_init__(self) -> None:
        self.R_vision = np.asarray(v.finite("R_vision", v.non_empty("R_vision", v.ndim("R_vision", self.R_vision, 1))),
                                   dtype=float)
        L = len(self.R_vision)
        self.R_text = np.asarray(v.shape("R_text", self.R_text, (L,)), dtype=float)   # may be NaN (no text)
        self.A = np.asarray(v.finite("A", v.shape("A", self.A, (L,))), dtype=float)
        for name in ("D", "U"):
            if getattr(self, name) is not None:
                setattr(self, name, np.asarray(v.finite(name, v.shape(name, getattr(self, name), (L + 1,))),
                                               dtype=float))
        if self.A_uniform is not None:
            self.A_uniform = v.in_range("A_uniform", self.A_uniform, 0.0, 1.0, low_open=True)
        if not isinstance(self.extra, dict):
            raise TypeError(f"extra must be a dict, got {v.describe(self.extra)}")

    @classmethod
    def from_trace(cls, trace: HiddenTrace, grid: tuple[int, int] | None = None, y=None,
                   **probe_kw) -> "RedundancyReport":
        """All measures from one trace (``grid``: the vision tokens' layout for D; ``y``: labels for the probes U;
        ``probe_kw``: options of :func:`unique_information_probe`)."""
        _trace(trace)
        v.keys("probe_kw", probe_kw, ("layers", "n_folds", "C", "seed", "max_iter"))
        if "layers" in probe_kw:
            raise ValueError("probe_kw may not set layers: the report needs U at every hidden layer 0..L")
        return cls(R_vision=layer_redundancy(trace, "vision").numpy(), R_text=layer_redundancy(trace, "text").numpy(),
                   A=cross_modal_attention(trace).numpy(),
                   D=None if grid is None else adjacent_token_redundancy(trace, grid).numpy(),
                   U=None if y is None else unique_information_probe(trace, y, **probe_kw),
                   A_uniform=uniform_vision_share(trace.vision_mask, valid=trace.valid))

    @property
    def num_layers(self) -> int:
        return len(self.R_vision)

    def recommend(self, tau_R: float = 0.97, tau_A: float = 0.05, eps_U: float = 0.02, *,
                  relative_A: bool = False) -> SkipPlan:
        """The skip plan of the decision rules [A14] (reconstructed):

        - "A_i <= tau_A" below reads A_i <= tau_A * A_uniform when ``relative_A`` (tau_A relative to the share
          |V|/N that uniform attention would give, :func:`uniform_vision_share`; needs ``A_uniform``), else as an
          absolute attention mass;
        - skip block i for V when R_i(V) >= tau_R;
        - vision exit e: the smallest e such that A_i <= tau_A for every block i >= e and U_l <= eps_U for every
          hidden layer l >= e (V is dropped from blocks e..L-1; e = L: no exit);
        - late entry s: the largest s <= e such that A_i <= tau_A for every block i < s (V joins, with its
          layer-0 states, at block s).
        """
        tau_R = v.in_range("tau_R", tau_R, -1.0, 1.0)
        tau_A = v.probability("tau_A", tau_A)
        eps_U = v.finite_number("eps_U", eps_U)
        if not isinstance(relative_A, bool):
            raise TypeError(f"relative_A must be True or False, got {v.describe(relative_A)}")
        if relative_A and not (self.A_uniform is not None and self.A_uniform > 0):
            raise ValueError("relative_A=True needs A_uniform (the uniform vision share, uniform_vision_share(mask))")
        if relative_A:
            tau_A = tau_A * float(self.A_uniform)
        L = self.num_layers
        U = np.zeros(L + 1) if self.U is None else np.asarray(self.U)
        exit_ = L
        for e in range(L, -1, -1):
            if all(self.A[i] <= tau_A for i in range(e, L)) and all(U[layer] <= eps_U for layer in range(e, L + 1)):
                exit_ = e
            else:
                break
        entry = 0
        for s in range(0, exit_ + 1):
            if all(self.A[i] <= tau_A for i in range(s)):
                entry = s
            else:
                break
        skip = tuple(i for i in range(entry, exit_) if self.R_vision[i] >= tau_R)
        return SkipPlan(skip_vision=skip, vision_exit=exit_ if exit_ < L else None, vision_entry=entry)


def spearman(x, y) -> float:
    """Spearman rank correlation (scipy), NaN when either side is constant. ``x``, ``y``: 1-D, equal length >= 2,
    finite."""
    from scipy.stats import spearmanr

    x = np.asarray(v.finite("x", v.ndim("x", x, 1)), dtype=float)
    y = np.asarray(v.finite("y", v.ndim("y", y, 1)), dtype=float)
    v.same_length(x=x, y=y)
    if len(x) < 2:
        raise ValueError(f"spearman needs at least 2 paired values, got {len(x)}")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


__all__ = ["layer_redundancy", "per_example_redundancy", "block_influence", "adjacent_token_redundancy",
           "cross_modal_attention", "unique_information_probe", "RedundancyReport", "spearman",
           "uniform_vision_share"]
