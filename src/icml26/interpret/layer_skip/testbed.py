"""[A14] The tiny vision-language testbed: digit VQA and ``TinyVLM``.

Data (``digit_vqa``): scikit-learn's 1797 8x8 digits. Each image becomes 16 vision tokens (a 4x4 grid of 2x2
pixel patches, raster order). Five question types, each with two phrasings (our choice), answered by one token:

    digit   "which digit ?"      -> 0..9
    parity  "is it even ?"       -> yes / no
    gt4     "is it above four ?" -> yes / no
    top     "ink mostly top ?"   -> yes / no   (share of ink in rows 0-3 above the dataset median)
    left    "ink mostly left ?"  -> yes / no   (share of ink in columns 0-3 above the dataset median)

A sequence is [16 vision tokens | 4 text tokens] (LLaVA order: vision first); the answer is read at the last
text position. Images are split 80/20 into train / held-out by a fixed seed, so no held-out image is trained on.

Model (``TinyVLM``): patch-linear + 2D (row + column) position embedding for vision tokens, token + position
embedding for text tokens, ``num_layers`` pre-LN causal transformer blocks (``model.layers``; each block's
attention module ``block.self_attn`` returns ``(output, probabilities)`` like Hugging Face's eager attention),
a final LayerNorm and a linear head over the vocabulary. Blocks carry no positional state, so a block run on a
subset of tokens (vision exit, late entry, FastV pruning) is causal attention among those tokens.

Trained once per config with AdamW and cached (cache kind ``"tiny_vlm"``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from icml26.harness import validate as v
from icml26.testbeds.cache import load_cached
from icml26.testbeds.digits import digits_tensors, shuffled_indices
from icml26.testbeds.progress import BuildProgress
from icml26.testbeds.training import pinned_training, train_steps

log = logging.getLogger(__name__)

GRID = (4, 4)           # vision tokens per image (rows, columns)
PATCH = 2               # pixels per patch side
N_VISION = GRID[0] * GRID[1]
QTYPES = ("digit", "parity", "gt4", "top", "left")
ANSWERS = tuple(str(i) for i in range(10)) + ("yes", "no")
_PHRASES = {
    "digit": (("which", "digit"), ("what", "number")),
    "parity": (("is", "even"), ("even", "number")),
    "gt4": (("above", "four"), ("is", "large")),
    "top": (("ink", "top"), ("top", "heavy")),
    "left": (("ink", "left"), ("left", "heavy")),
}
_WORDS = sorted({w for ph in _PHRASES.values() for p in ph for w in p})
VOCAB = ANSWERS + ("<img>", "?") + tuple(_WORDS)
TOKEN = {t: i for i, t in enumerate(VOCAB)}
N_TEXT = 4              # "<img>" w1 w2 "?"


@dataclass(frozen=True)
class TinyVLMConfig:
    """Architecture and training recipe of a :class:`TinyVLM` (AdamW, warmup + cosine, fixed steps)."""

    name: str = "vlm-6L"
    num_layers: int = 6
    hidden_size: int = 64
    num_heads: int = 4
    ffn_size: int = 128
    steps: int = 1200
    batch_size: int = 64
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.05
    split_seed: int = 0     # the train / held-out image split (fixed: every model sees the same held-out images)
    seed: int = 0           # initialisation and batch order

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string, got {v.describe(self.name)}")
        for f in ("num_layers", "hidden_size", "num_heads", "ffn_size", "steps", "batch_size", "warmup"):
            v.positive_int(f, getattr(self, f))
        v.non_negative_int("split_seed", self.split_seed)
        v.non_negative_int("seed", self.seed)
        v.positive("lr", self.lr)
        v.non_negative("weight_decay", self.weight_decay)
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})")


VLM_6L = TinyVLMConfig()
VLM_8L = replace(VLM_6L, name="vlm-8L", num_layers=8)
#: the quick budget's model. It was 3 blocks, d = 32, 250 steps of batch 32 (accuracy 0.43: vision barely mattered,
#: a V-skip moved 1 of 300 pairs); 4 blocks and 800 steps of batch 64 reach about 0.9 (about 40 s of CPU).
VLM_QUICK = replace(VLM_6L, name="vlm-4L-d32", num_layers=4, hidden_size=32, ffn_size=64, steps=800, batch_size=64)


# data

@dataclass
class DigitVQA:
    """Tensors of all (image, question) pairs. ``patches`` [M, 16, 4], ``input_ids`` [M, 4], ``answer`` [M]
    (a vocabulary id), ``qtype`` [M] (index into ``QTYPES``), ``image`` [M] (image index), ``label`` [M] (the
    answer as a class index within its question type's answers), ``train`` [M] bool (the image is in the
    training split)."""

    patches: torch.Tensor
    input_ids: torch.Tensor
    answer: torch.Tensor
    qtype: torch.Tensor
    image: torch.Tensor
    train: torch.Tensor

    def __post_init__(self) -> None:
        for name in ("patches", "input_ids", "answer", "qtype", "image", "train"):
            if not torch.is_tensor(getattr(self, name)):
                raise TypeError(f"{name} must be a tensor, got {v.describe(getattr(self, name))}")
        v.shape("patches", self.patches, (None, N_VISION, PATCH * PATCH))
        v.shape("input_ids", self.input_ids, (None, N_TEXT))
        v.same_length(patches=self.patches, input_ids=self.input_ids, answer=self.answer, qtype=self.qtype,
                      image=self.image, train=self.train)

    def __len__(self) -> int:
        return len(self.answer)

    def subset(self, idx: torch.Tensor) -> "DigitVQA":
        """The pairs at integer positions ``idx`` (a tensor, array, range or sequence of ints in [0, len)), or
        where a bool mask of length len is True."""
        if isinstance(idx, range):
            idx = list(idx)
        if torch.is_tensor(idx) and idx.dtype == torch.bool:
            v.shape("idx (a bool mask)", idx, (len(self),))
            idx = torch.nonzero(idx).squeeze(1)
        v.non_empty("idx", idx)
        v.indices("idx", idx, len(self))
        idx = idx.long() if torch.is_tensor(idx) else torch.as_tensor(np.asarray(idx), dtype=torch.long)
        return DigitVQA(*(getattr(self, f)[idx] for f in ("patches", "input_ids", "answer", "qtype", "image",
                                                         "train")))

    def inputs(self) -> dict[str, torch.Tensor]:
        """Keyword arguments of :meth:`TinyVLM.forward`."""
        return {"patches": self.patches, "input_ids": self.input_ids}


def image_patches(images: torch.Tensor) -> torch.Tensor:
    """[M, 64] (8x8 images, row-major) -> [M, 16, 4]: 2x2 patches in raster order over the 4x4 grid."""
    m = images.shape[0]
    x = images.view(m, GRID[0], PATCH, GRID[1], PATCH).permute(0, 1, 3, 2, 4)
    return x.reshape(m, N_VISION, PATCH * PATCH)


def digit_vqa(split_seed: int = 0) -> DigitVQA:
    """All 1797 x 5 = 8985 (image, question) pairs, each question in a phrasing picked by a seeded draw; images
    split 80/20 (train / held-out) by ``split_seed``."""
    split_seed = v.non_negative_int("split_seed", split_seed)
    X, y = digits_tensors()
    img = X.view(-1, 8, 8)
    ink = img.sum((1, 2)).clamp_min(1e-6)
    top_share = img[:, :4].sum((1, 2)) / ink
    left_share = img[:, :, :4].sum((1, 2)) / ink
    top = top_share > top_share.median()
    left = left_share > left_share.median()
    yes, no = TOKEN["yes"], TOKEN["no"]
    answers = {
        "digit": y.clone(),
        "parity": torch.where(y % 2 == 0, yes, no),
        "gt4": torch.where(y > 4, yes, no),
        "top": torch.where(top, yes, no),
        "left": torch.where(left, yes, no),
    }
    n = len(y)
    g = torch.Generator().manual_seed(10_000 + split_seed)
    perm = shuffled_indices(n, split_seed)
    is_train = torch.zeros(n, dtype=torch.bool)
    is_train[perm[: int(round(0.8 * n))]] = True
    patches = image_patches(X)
    rows_ids, rows_ans, rows_q, rows_img = [], [], [], []
    for q, name in enumerate(QTYPES):
        phr = torch.tensor([[TOKEN["<img>"], TOKEN[a], TOKEN[b], TOKEN["?"]] for a, b in _PHRASES[name]])
        pick = torch.randint(0, len(phr), (n,), generator=g)
        rows_ids.append(phr[pick])
        rows_ans.append(answers[name])
        rows_q.append(torch.full((n,), q))
        rows_img.append(torch.arange(n))
    image = torch.cat(rows_img)
    return DigitVQA(patches=patches[image], input_ids=torch.cat(rows_ids), answer=torch.cat(rows_ans),
                    qtype=torch.cat(rows_q), image=image, train=is_train[image])


# model

class Attention(nn.Module):
    """Causal multi-head self-attention, eager: returns ``(output, probabilities [B, H, N, N])``."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        if d % heads:
            raise ValueError(f"hidden_size {d} must be divisible by num_heads {heads}")
        self.h, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.o_proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, N, d = x.shape
        q, k, val = self.qkv(x).view(B, N, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
        causal = torch.ones(N, N, dtype=torch.bool, device=x.device).triu(1)
        probs = scores.masked_fill(causal, float("-inf")).softmax(-1)
        out = (probs @ val).transpose(1, 2).reshape(B, N, d)
        return self.o_proj(out), probs


class Block(nn.Module):
    """Pre-LN block: h + attn(ln1(h)), then + mlp(ln2(h)) (GELU MLP)."""

    def __init__(self, d: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.self_attn = Attention(d, heads)
        self.mlp = nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        a, _ = self.self_attn(self.ln1(hidden_states))
        h = hidden_states + a
        return h + self.mlp(self.ln2(h))


class TinyVLM(nn.Module):
    """[A14] A tiny LLaVA-ordered vision-language model: ``forward(patches [B,16,4], input_ids [B,T]) -> logits
    [B, 16+T, V]``; the answer is ``logits[:, -1].argmax(-1)``. ``vision_mask`` ([16+T] bool) marks the vision
    tokens, ``grid`` is their (rows, columns) layout, ``layers`` the blocks."""

    def __init__(self, cfg: TinyVLMConfig = VLM_6L) -> None:
        super().__init__()
        if not isinstance(cfg, TinyVLMConfig):
            raise TypeError(f"cfg must be a TinyVLMConfig (e.g. VLM_6L), got {v.describe(cfg)}")
        d = cfg.hidden_size
        self.cfg = cfg
        self.grid = GRID
        self.patch_embed = nn.Linear(PATCH * PATCH, d)
        self.row_embed = nn.Parameter(torch.randn(GRID[0], d) * 0.02)
        self.col_embed = nn.Parameter(torch.randn(GRID[1], d) * 0.02)
        self.tok_embed = nn.Embedding(len(VOCAB), d)
        self.text_pos = nn.Parameter(torch.randn(N_TEXT, d) * 0.02)
        self.layers = nn.ModuleList(Block(d, cfg.num_heads, cfg.ffn_size) for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, len(VOCAB))

    @property
    def vision_mask(self) -> torch.Tensor:
        return torch.arange(N_VISION + N_TEXT) < N_VISION

    def embed(self, patches: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        if not torch.is_tensor(patches) or not torch.is_tensor(input_ids):
            raise TypeError(f"patches and input_ids must be tensors, got {v.describe(patches)} and "
                            f"{v.describe(input_ids)}")
        if patches.ndim != 3 or patches.shape[1:] != (N_VISION, PATCH * PATCH):
            raise ValueError(f"patches must be [B, {N_VISION}, {PATCH * PATCH}], got {tuple(patches.shape)}")
        if input_ids.ndim != 2 or input_ids.shape[1] != N_TEXT or input_ids.shape[0] != patches.shape[0]:
            raise ValueError(f"input_ids must be [B, {N_TEXT}] with the same B as patches, got "
                             f"{tuple(input_ids.shape)}")
        v.finite("patches", patches)
        v.indices("input_ids", input_ids, len(VOCAB))
        pos = (self.row_embed[:, None] + self.col_embed[None]).reshape(N_VISION, -1)
        vis = self.patch_embed(patches) + pos
        t = self.tok_embed(input_ids) + self.text_pos
        return torch.cat([vis, t], 1)

    def forward(self, patches: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(patches, input_ids)
        for block in self.layers:
            h = block(h)
        return self.head(self.norm(h))


def train_tiny_vlm(cfg: TinyVLMConfig, folder: Path | None = None) -> TinyVLM:
    """Train a :class:`TinyVLM` on the training images of :func:`digit_vqa` (CE on the answer token)."""
    torch.manual_seed(cfg.seed)
    model = TinyVLM(cfg)
    data = digit_vqa(cfg.split_seed)
    tr = data.subset(torch.nonzero(data.train).squeeze(1))
    g = torch.Generator().manual_seed(cfg.seed)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=cfg.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / cfg.warmup) * 0.5 * (
        1 + math.cos(math.pi * min(1.0, s / cfg.steps))))

    def batch_loss(step: int) -> torch.Tensor:
        idx = torch.randint(0, len(tr), (cfg.batch_size,), generator=g)
        logits = model(tr.patches[idx], tr.input_ids[idx])[:, -1]
        return F.cross_entropy(logits, tr.answer[idx])

    # one thread, deterministic algorithms: the cached VLM does not depend on the builder's thread count
    with pinned_training(1), BuildProgress(log, cfg.name, cfg.steps) as progress:
        train_steps(model, opt, sched, cfg.steps, batch_loss, progress)
    model.eval()
    if folder is not None:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "model.safetensors"))
    return model


def _load(cfg: TinyVLMConfig, folder: Path) -> TinyVLM:
    from safetensors.torch import load_file

    model = TinyVLM(cfg)
    model.load_state_dict(load_file(str(folder / "model.safetensors")))
    return model.eval()


def load_tiny_vlm(cfg: TinyVLMConfig = VLM_6L) -> TinyVLM:
    """The trained :class:`TinyVLM` for ``cfg`` (trained once, then loaded from the cache, kind ``"tiny_vlm"``)."""
    if not isinstance(cfg, TinyVLMConfig):
        raise TypeError(f"cfg must be a TinyVLMConfig (e.g. VLM_6L), got {type(cfg).__name__}")
    return load_cached("tiny_vlm", asdict(cfg), lambda d: train_tiny_vlm(cfg, d), lambda d: _load(cfg, d))


@torch.no_grad()
def answer_correct(model: nn.Module, data: DigitVQA, batch_size: int = 2048) -> torch.Tensor:
    """Per pair: 1.0 where the argmax of the last-position logits is the answer token ([M] float)."""
    out = []
    for i in range(0, len(data), batch_size):
        sl = slice(i, i + batch_size)
        logits = model(data.patches[sl], data.input_ids[sl])
        logits = logits.logits if hasattr(logits, "logits") else logits
        out.append((logits[:, -1].argmax(-1) == data.answer[sl]).float())
    return torch.cat(out)


__all__ = ["TinyVLM", "TinyVLMConfig", "VLM_6L", "VLM_8L", "VLM_QUICK", "DigitVQA", "digit_vqa", "image_patches",
           "train_tiny_vlm", "load_tiny_vlm", "answer_correct", "QTYPES", "ANSWERS", "VOCAB", "TOKEN", "GRID",
           "N_VISION", "N_TEXT"]
