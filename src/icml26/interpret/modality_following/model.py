"""A small multimodal classifier for the conflict task, trained with modality dropout and cached [B03].

Tokens: [CLS] + 2 image tokens (the 8x8 digit cut into two 4x8 row bands, each through a small MLP) + 2 text
tokens (the mean embedding of text tokens 1-4 and of tokens 5-8: an embedding bag per half); learned position
and modality-type embeddings. Five tokens keep CPU training to seconds. A pre-norm transformer of ``n_layers``
blocks fuses them; logits = head(norm(h_L[CLS])). Because the blocks are pre-norm, head(norm(h_l[CLS])) is a
logit lens at every layer l.

A modality is masked by removing its tokens from every attention (key padding): p_V = p(. | v, text masked),
p_T = p(. | t, image masked).

Training (our choice, following the spec): each example is image-only (``p_image_only``), text-only
(``p_text_only``) or a consistent pair; difficulties v, t ~ U(0, 1); AdamW with cosine decay. Afterwards one
temperature T is fitted on the validation split (image-only, text-only and consistent pairs) by minimising the
NLL of softmax(logits / T), so that unimodal entropies do not bunch near 0.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from scipy.optimize import minimize_scalar
from torch import nn

from icml26.harness import validate as check
from icml26.testbeds.cache import load_cached
from icml26.testbeds.digits import digits_tensors
from icml26.testbeds.progress import BuildProgress
from icml26.testbeds.training import pinned_training, train_steps

from .task import N_CLASSES, TEXT_LEN, VOCAB, corrupt_images, make_texts, split_indices

log = logging.getLogger("icml26.testbeds.modality_following")
N_IMAGE_TOKENS = 2
N_TEXT_TOKENS = 2


@dataclass(frozen=True)
class ToyConfig:
    """Architecture and training of the toy classifier (the cache key)."""

    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 6
    d_ff: int = 64
    steps: int = 600
    batch: int = 64
    lr: float = 3e-3
    p_image_only: float = 0.25
    p_text_only: float = 0.25
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "n_layers", "d_ff", "steps", "batch"):
            check.positive_int(name, getattr(self, name))
        check.non_negative_int("seed", self.seed)
        check.positive("lr", self.lr)
        check.probability("p_image_only", self.p_image_only)
        check.probability("p_text_only", self.p_text_only)
        if self.p_image_only + self.p_text_only > 1:
            raise ValueError(f"p_image_only + p_text_only must be <= 1 (the rest are consistent pairs), got "
                             f"{self.p_image_only} + {self.p_text_only}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")


# main classes

class Block(nn.Module):
    """Pre-norm transformer block: h + attn(ln(h)), then + mlp(ln(h))."""

    def __init__(self, d: int, n_heads: int, d_ff: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Linear(d_ff, d))

    def forward(self, h: torch.Tensor, attend: torch.Tensor | None = None) -> torch.Tensor:
        b, s, d = h.shape
        q, k, v = self.qkv(self.ln1(h)).view(b, s, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        # five tokens: broadcast products beat (batched) matmul kernels on CPU
        att = (q[:, :, :, None] * k[:, :, None]).sum(-1) / math.sqrt(d // self.n_heads)
        if attend is not None:
            att = att.masked_fill(~attend, float("-inf"))
        a = (att.softmax(-1)[..., None] * v[:, :, None]).sum(-2)
        h = h + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return h + self.mlp(self.ln2(h))


class ToyMultimodalClassifier(nn.Module):
    """Image + text digit classifier with a CLS readout available at every fusion layer [B03].

    ``forward(image (B, 64) in [0, 1], text (B, 8) token ids, drop_image=None, drop_text=None) -> logits (B, 10)``;
    ``drop_*``: (B,) bool, True removes that modality's tokens from attention for that example.
    """

    def __init__(self, cfg: ToyConfig = ToyConfig()):
        super().__init__()
        _config(cfg)
        d = cfg.d_model
        self.cfg = cfg
        self.image_mlp = nn.Sequential(nn.Linear(64 // N_IMAGE_TOKENS, d), nn.GELU(), nn.Linear(d, d))
        self.text_emb = nn.Embedding(VOCAB, d)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 1 + N_IMAGE_TOKENS + N_TEXT_TOKENS, d))
        self.type_emb = nn.Embedding(3, d)  # 0 CLS, 1 image, 2 text
        self.register_buffer("types", torch.tensor([0] + [1] * N_IMAGE_TOKENS + [2] * N_TEXT_TOKENS), persistent=False)
        self.layers = nn.ModuleList(Block(d, cfg.n_heads, cfg.d_ff) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, N_CLASSES)

    def forward(self, image: torch.Tensor, text: torch.Tensor, drop_image: torch.Tensor | None = None,
                drop_text: torch.Tensor | None = None) -> torch.Tensor:
        if not isinstance(image, torch.Tensor) or not isinstance(text, torch.Tensor):
            raise TypeError(f"image and text must be tensors, got {type(image).__name__} and {type(text).__name__}")
        if image.dim() != 2 or image.shape[1] != 64 or text.dim() != 2 or text.shape[1] != TEXT_LEN \
                or image.shape[0] != text.shape[0]:
            raise ValueError(f"expected image (B, 64) and text (B, {TEXT_LEN}) with the same B, got "
                             f"{tuple(image.shape)} and {tuple(text.shape)}")
        if text.is_floating_point():
            raise TypeError(f"text must hold integer token ids, got a {text.dtype} tensor")
        b = image.shape[0]
        if b and (int(text.min()) < 0 or int(text.max()) >= VOCAB):
            raise ValueError(f"text token ids must be in [0, {VOCAB}), got values from {int(text.min())} to "
                             f"{int(text.max())}")
        for name, drop in (("drop_image", drop_image), ("drop_text", drop_text)):
            if drop is not None and (not isinstance(drop, torch.Tensor) or drop.dtype != torch.bool
                                     or drop.shape != (b,)):
                raise ValueError(f"{name} must be a bool tensor of shape ({b},), got {check.describe(drop)}"
                                 + (f" of dtype {drop.dtype}" if isinstance(drop, torch.Tensor) else ""))
        img = self.image_mlp(image.view(b, N_IMAGE_TOKENS, -1))
        h = torch.cat([self.cls.expand(b, 1, -1), img, self.text_emb(text).view(b, N_TEXT_TOKENS, -1, img.shape[-1])
                       .mean(2)], dim=1) + self.pos + self.type_emb(self.types)
        attend = None
        if drop_image is not None or drop_text is not None:
            keep = torch.ones(b, h.shape[1], dtype=torch.bool, device=h.device)
            if drop_image is not None:
                keep[:, 1:1 + N_IMAGE_TOKENS] &= ~drop_image[:, None]
            if drop_text is not None:
                keep[:, 1 + N_IMAGE_TOKENS:] &= ~drop_text[:, None]
            attend = keep[:, None, None, :]
        for block in self.layers:
            h = block(h, attend)
        return self.head(self.norm(h[:, 0]))


# helper functions

def modality_batch(idx: torch.Tensor, X: torch.Tensor, Y: torch.Tensor, cfg: ToyConfig, gen: torch.Generator
                   ) -> tuple[torch.Tensor, ...]:
    """A training/validation batch: images, texts (same label), drop masks, labels."""
    n = len(idx)
    y = Y[idx]
    v, t = torch.rand(n, generator=gen), torch.rand(n, generator=gen)
    u = torch.rand(n, generator=gen)
    drop_text = u < cfg.p_image_only
    drop_image = (u >= cfg.p_image_only) & (u < cfg.p_image_only + cfg.p_text_only)
    return corrupt_images(X[idx], v, gen), make_texts(y, t, gen), drop_image, drop_text, y


def _config(cfg: object) -> None:
    if not isinstance(cfg, ToyConfig):
        raise TypeError(f"cfg must be a ToyConfig, got {type(cfg).__name__}")


def fit_temperature(logits: torch.Tensor, y: torch.Tensor) -> float:
    """T minimising the NLL of softmax(logits / T) (bounded search over log T)."""
    if not isinstance(logits, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError(f"logits and y must be tensors, got {type(logits).__name__} and {type(y).__name__}")
    check.ndim("logits", logits, 2)
    check.finite("logits", check.non_empty("logits", logits))
    check.ndim("y", y, 1)
    check.same_length(logits=logits, y=y)
    check.indices("y", y, logits.shape[1])
    lg = logits.double()
    res = minimize_scalar(lambda lt: F.cross_entropy(lg / math.exp(lt), y).item(), bounds=(-3.0, 3.0),
                          method="bounded")
    return float(math.exp(res.x))


def train_toy_model(cfg: ToyConfig) -> tuple[ToyMultimodalClassifier, float]:
    """Train the classifier with modality dropout, then fit its temperature on the validation split."""
    _config(cfg)
    torch.manual_seed(cfg.seed)
    X, Y = digits_tensors()
    train, val = split_indices("train"), split_indices("val")
    model = ToyMultimodalClassifier(cfg)
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01, foreach=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.1)

    def batch_loss(_step: int) -> torch.Tensor:
        idx = train[torch.randint(len(train), (cfg.batch,), generator=gen)]
        img, txt, di, dt, y = modality_batch(idx, X, Y, cfg, gen)
        return F.cross_entropy(model(img, txt, di, dt), y)

    # one thread, deterministic algorithms: the cached toy does not depend on the builder's thread count
    with pinned_training(1), BuildProgress(log, f"modality-following toy (seed {cfg.seed})", total=cfg.steps) as progress:
        train_steps(model, opt, sched, cfg.steps, batch_loss, progress)
    model.eval()
    vgen = torch.Generator().manual_seed(12345)
    vidx = val.repeat(4)
    img, txt, di, dt, y = modality_batch(vidx, X, Y, cfg, vgen)
    with torch.no_grad():
        temperature = fit_temperature(model(img, txt, di, dt), y)
    return model, temperature


def load_toy_model(cfg: ToyConfig = ToyConfig()) -> tuple[ToyMultimodalClassifier, float]:
    """The trained classifier and its temperature, trained once per config and cached on disk."""
    _config(cfg)

    def build(folder: Path) -> None:
        model, temperature = train_toy_model(cfg)
        torch.save(model.state_dict(), folder / "model.pt")
        (folder / "temperature.json").write_text(json.dumps({"temperature": temperature}))

    def load(folder: Path) -> tuple[ToyMultimodalClassifier, float]:
        model = ToyMultimodalClassifier(cfg)
        model.load_state_dict(torch.load(folder / "model.pt", weights_only=True))
        model.eval()
        return model, float(json.loads((folder / "temperature.json").read_text())["temperature"])

    return load_cached("modality_following_toy", asdict(cfg), build, load)


@torch.no_grad()
def modality_probs(model: nn.Module, image: torch.Tensor, text: torch.Tensor, temperature: float = 1.0
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(p_V, p_T, p_joint): softmax(logits / T) with the text masked, with the image masked, and with both."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    temperature = check.positive("temperature", temperature)
    if not isinstance(image, torch.Tensor) or not isinstance(text, torch.Tensor):
        raise TypeError(f"image and text must be tensors, got {type(image).__name__} and {type(text).__name__}")
    check.finite("image", check.non_empty("image", image))
    n = len(image)
    on, off = torch.ones(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool)
    p_v = torch.softmax(model(image, text, drop_image=off, drop_text=on) / temperature, -1)
    p_t = torch.softmax(model(image, text, drop_image=on, drop_text=off) / temperature, -1)
    p_j = torch.softmax(model(image, text) / temperature, -1)
    return p_v, p_t, p_j


__all__ = ["ToyConfig", "ToyMultimodalClassifier", "train_toy_model", "load_toy_model", "modality_probs",
           "fit_temperature", "modality_batch"]
