"""Learning-curve pools and data-mixture runs shared by the scaling-law papers ([A16], [A18]).

Three sources of learning curves, all as a :class:`CurveTable` (one row per configuration: cumulative training
compute in FLOPs and the validation loss recorded there):

- :func:`lm_curve_pool` — tiny Llama-style causal LMs (``causal_lm.build_model``) of several widths, depths and
  learning rates trained on the standard-library code corpus (``causal_lm.encode_split``) with the shared
  ``training.train_steps`` loop; validation loss recorded every ``eval_every`` steps. Trained once, cached.
- :func:`digits_curve_pool` — MLPs of several widths, depths and learning rates on scikit-learn's digits
  (full-batch Adam), validation cross-entropy recorded every ``eval_every`` steps. Trained once, cached.
- :func:`synthetic_curve_pool` — curves with known parameters, Chinchilla form (Hoffmann et al. 2022)
  L(N, D) = E + A / N^a + B / (q D)^b, with a learning-rate quality q in (0, 1] whose optimum shifts with N, a
  warm-up bump and Gaussian noise; nothing trained.

Compute is the usual 6 N D estimate: N = non-embedding parameters plus the (tied) embedding, D = tokens (or
samples x input width for the MLPs) seen so far. Learning rates are constant after a linear warm-up (our
choice), so a curve's prefix is exactly what a shorter run of that configuration gives, and a pool can be
"resumed" by reading further along a row.

:func:`mixture_runs` trains tiny LMs of several sizes on mixtures of three code-corpus domains (top-level modules,
``encodings/``, ``pydoc_data/`` prose) and records the validation loss on each domain plus a held-out
"benchmark": next-token accuracy on the held-out ``email/`` package ([A18]). Cached the same way; the LM
trainer is the same function as the curve pool's.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from .cache import load_cached
from .causal_lm import TOY_1L, CausalLMConfig, TokenizerConfig, build_model, encode_split, load_tokenizer
from .code_corpus import corpus_files, stdlib_root
from .progress import BuildProgress, build_phase
from .training import train_steps

log = logging.getLogger(__name__)


# the table of curves

@dataclass(frozen=True)
class CurveTable:
    """K learning curves of T recorded points each.

    Attributes:
        names: one name per configuration.
        features: ``(K, F)`` numeric description of each configuration (e.g. log2 width, depth, log10 lr).
        feature_names: the F feature names.
        n_params: ``(K,)`` parameter count N of each configuration.
        compute: ``(K, T)`` cumulative training FLOPs at each recorded point, positive and strictly increasing.
        loss: ``(K, T)`` validation loss at each recorded point, finite.
        steps: ``(T,)`` training steps at each recorded point (shared by all rows).
    """

    names: tuple[str, ...]
    features: np.ndarray
    feature_names: tuple[str, ...]
    n_params: np.ndarray
    compute: np.ndarray
    loss: np.ndarray
    steps: np.ndarray
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        c = np.asarray(self.compute, dtype=float)
        L = np.asarray(self.loss, dtype=float)
        if c.ndim != 2 or L.shape != c.shape:
            raise ValueError(f"compute and loss must both be (K, T) arrays of equal shape, got {c.shape} and "
                             f"{L.shape}; pad or truncate curves to a common length (or use CurveTable.from_curves)")
        K, T = c.shape
        if K < 1 or T < 1:
            raise ValueError(f"need at least one curve with one point, got shape {c.shape}")
        if not (np.isfinite(c).all() and np.isfinite(L).all()):
            bad = sorted(set(np.where(~(np.isfinite(c) & np.isfinite(L)))[0].tolist()))[:5]
            raise ValueError(f"compute and loss must be finite; curves {bad} hold NaN or inf (drop those runs)")
        if (c <= 0).any():
            raise ValueError("compute must be positive (FLOPs spent so far); found a zero or negative value")
        if T > 1 and (np.diff(c, axis=1) <= 0).any():
            raise ValueError("compute must increase strictly along each curve")
        feats = np.asarray(self.features, dtype=float).reshape(K, -1)
        if len(self.names) != K or len(np.asarray(self.n_params)) != K or len(np.asarray(self.steps)) != T:
            raise ValueError(f"names, n_params need one entry per curve ({K}) and steps one per point ({T})")
        if len(self.feature_names) != feats.shape[1]:
            raise ValueError(f"feature_names has {len(self.feature_names)} names for {feats.shape[1]} features")
        object.__setattr__(self, "compute", c)
        object.__setattr__(self, "loss", L)
        object.__setattr__(self, "features", feats)
        object.__setattr__(self, "n_params", np.asarray(self.n_params, dtype=float))
        object.__setattr__(self, "steps", np.asarray(self.steps, dtype=float))
        object.__setattr__(self, "names", tuple(self.names))

    @classmethod
    def from_curves(cls, compute: Sequence[Sequence[float]], loss: Sequence[Sequence[float]],
                    n_params: Sequence[float], names: Sequence[str] | None = None,
                    features: np.ndarray | None = None, feature_names: Sequence[str] | None = None) -> "CurveTable":
        """Build a table from per-curve lists; every curve must have the same number of points."""
        lens = {len(x) for x in compute} | {len(x) for x in loss}
        if len(compute) != len(loss):
            raise ValueError(f"got {len(compute)} compute curves but {len(loss)} loss curves")
        if len(lens) != 1:
            raise ValueError(f"curves of unequal length {sorted(lens)}; record every configuration at the same "
                             "steps (or truncate to the shortest) before building a pool")
        K = len(compute)
        n_params = np.asarray(n_params, dtype=float)
        if features is None:
            features, feature_names = np.log10(n_params)[:, None], ("log10 N",)
        T = lens.pop()
        return cls(tuple(names or [f"curve{k}" for k in range(K)]), np.asarray(features, dtype=float),
                   tuple(feature_names or [f"f{j}" for j in range(np.asarray(features).reshape(K, -1).shape[1])]),
                   n_params, np.asarray(compute, dtype=float), np.asarray(loss, dtype=float), np.arange(1, T + 1))

    @property
    def n_curves(self) -> int:
        return self.compute.shape[0]

    @property
    def n_points(self) -> int:
        return self.compute.shape[1]

    def subset(self, idx: Sequence[int]) -> "CurveTable":
        idx = np.asarray(idx, dtype=int)
        return replace(self, names=tuple(self.names[i] for i in idx), features=self.features[idx],
                       n_params=self.n_params[idx], compute=self.compute[idx], loss=self.loss[idx])

    def save(self, folder: Path) -> None:
        np.savez(folder / "curves.npz", features=self.features, n_params=self.n_params, compute=self.compute,
                 loss=self.loss, steps=self.steps)
        (folder / "curves.json").write_text(json.dumps({"names": list(self.names),
                                                        "feature_names": list(self.feature_names),
                                                        "meta": self.meta}, indent=1, default=str))

    @classmethod
    def load(cls, folder: Path) -> "CurveTable":
        z = np.load(folder / "curves.npz")
        j = json.loads((folder / "curves.json").read_text())
        return cls(tuple(j["names"]), z["features"], tuple(j["feature_names"]), z["n_params"], z["compute"],
                   z["loss"], z["steps"], j.get("meta", {}))


# synthetic curves with known parameters

@dataclass(frozen=True)
class SyntheticCurveConfig:
    """Chinchilla-form curves: L = E + A/N^a + B/(q D)^b, times a warm-up bump, plus N(0, noise^2).

    q = exp(-(log10 lr - log10 lr*(N))^2 / (2 width^2)) with lr*(N) = lr0 (N / 1e6)^(-lr_shift): the best
    learning rate falls with size, so the curves of different (N, lr) cross (our choice)."""

    E: float = 1.7
    A: float = 400.0
    B: float = 410.0
    a: float = 0.34
    b: float = 0.28
    sizes: tuple = tuple(float(x) for x in np.geomspace(2e6, 2e8, 8))
    lrs: tuple = (3e-4, 1e-3, 3e-3, 1e-2)
    lr0: float = 3e-3
    lr_shift: float = 0.25
    lr_width: float = 0.6
    tokens: float = 2e9                 # tokens at the last recorded point (points evenly spaced, like steps)
    n_points: int = 64
    warmup_tokens: float = 5e7
    warmup_bump: float = 0.5
    noise: float = 0.01


def synthetic_curve_pool(cfg: SyntheticCurveConfig = SyntheticCurveConfig(), seed: int = 0,
                         noise: float | None = None) -> CurveTable:
    """One curve per (size, learning rate); the noise is drawn from ``seed`` (``noise`` overrides cfg.noise)."""
    sd = cfg.noise if noise is None else float(noise)
    if sd < 0:
        raise ValueError(f"noise must be >= 0, got {sd}")
    rng = np.random.default_rng(seed)
    N = np.repeat(np.asarray(cfg.sizes, dtype=float), len(cfg.lrs))
    lr = np.tile(np.asarray(cfg.lrs, dtype=float), len(cfg.sizes))
    D = cfg.tokens * np.arange(1, cfg.n_points + 1) / cfg.n_points
    q = np.exp(-(np.log10(lr) - np.log10(cfg.lr0 * (N / 1e6) ** -cfg.lr_shift)) ** 2 / (2 * cfg.lr_width ** 2))
    clean = cfg.E + cfg.A / N[:, None] ** cfg.a + cfg.B / (q[:, None] * D[None, :]) ** cfg.b
    clean = clean * (1 + cfg.warmup_bump * np.exp(-D[None, :] / cfg.warmup_tokens))
    loss = clean + sd * rng.standard_normal(clean.shape)
    names = tuple(f"N={n:.2g},lr={rate:g}" for n, rate in zip(N, lr))
    feats = np.stack([np.log10(N), np.log10(lr)], axis=1)
    return CurveTable(names, feats, ("log10 N", "log10 lr"), N, 6 * N[:, None] * D[None, :], loss,
                      np.arange(1, cfg.n_points + 1), {"source": "synthetic", "config": asdict(cfg), "seed": seed,
                                                       "noise": sd, "tokens": D.tolist()})


# tiny causal LMs on the code corpus

@dataclass(frozen=True)
class LMCurvePoolConfig:
    """A grid of tiny Llama configurations trained for ``steps`` steps each, loss recorded every ``eval_every``."""

    widths: tuple = (16, 32, 48, 64)
    depths: tuple = (1, 2)
    lrs: tuple = (1e-3, 3e-3, 1e-2)
    steps: int = 192
    eval_every: int = 4
    batch_size: int = 8
    seq_len: int = 64
    warmup: int = 8
    weight_decay: float = 0.0
    eval_windows: int = 8
    train_bytes: int = 1_000_000
    val_bytes: int = 200_000
    tokenizer: TokenizerConfig = TokenizerConfig()
    seed: int = 0


def lm_config(width: int, depth: int, lr: float, seed: int = 0, tokenizer: TokenizerConfig = TokenizerConfig(),
              ) -> CausalLMConfig:
    """The tiny Llama of the curve pools: heads of 16 dims, SwiGLU width 8/3 x d (rounded to 8)."""
    if width < 8 or width % 8:
        raise ValueError(f"width must be a positive multiple of 8, got {width}")
    return replace(TOY_1L, name=f"w{width}-d{depth}-lr{lr:g}", tokenizer=tokenizer, hidden_size=int(width),
                   num_layers=int(depth), num_heads=max(1, width // 16),
                   intermediate_size=max(8, int(width * 8 / 3) // 8 * 8), lr=float(lr), seed=seed)


def _param_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class _Offset:
    """Adapts one run's ``progress.update(step)`` to a build-wide :class:`BuildProgress`."""

    def __init__(self, progress: BuildProgress, offset: int) -> None:
        self.progress, self.offset = progress, offset

    def update(self, done: int, loss: object = None) -> None:
        self.progress.update(self.offset + done, loss)


def _sampler(data: Sequence[torch.Tensor], weights: Sequence[float], batch_size: int, seq_len: int,
             gen: torch.Generator):
    """Batches of ``batch_size`` windows; each window's source drawn from ``weights`` (one source: plain)."""
    offsets = torch.arange(seq_len + 1)
    w = torch.tensor(weights, dtype=torch.float64)

    def batch() -> torch.Tensor:
        src = torch.multinomial(w, batch_size, replacement=True, generator=gen) if len(data) > 1 \
            else torch.zeros(batch_size, dtype=torch.long)
        rows = []
        for j in range(len(data)):
            n = int((src == j).sum())
            if n:
                starts = torch.randint(0, len(data[j]) - seq_len - 1, (n,), generator=gen)
                rows.append(data[j][starts[:, None] + offsets])
        return torch.cat(rows)

    return batch


def _windows(tokens: torch.Tensor, seq_len: int, n: int) -> torch.Tensor:
    total = (len(tokens) - 1) // (seq_len + 1)
    if total < 1:
        raise ValueError("validation text too short for one window")
    idx = torch.linspace(0, total - 1, min(n, total)).round().long()  # evenly spread, deterministic
    return tokens[: total * (seq_len + 1)].view(total, seq_len + 1)[idx]


@torch.no_grad()
def _eval(model: torch.nn.Module, windows: Sequence[torch.Tensor]) -> list[tuple[float, float]]:
    """(mean next-token cross-entropy, next-token accuracy) on each set of windows."""
    was = model.training
    model.eval()
    out = []
    for w in windows:
        logits = model(input_ids=w[:, :-1], use_cache=False).logits
        ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), w[:, 1:].flatten()).item()
        acc = (logits.argmax(-1) == w[:, 1:]).float().mean().item()
        out.append((ce, acc))
    model.train(was)
    return out


def train_lm_curve(cfg: CausalLMConfig, vocab_size: int, train: Sequence[torch.Tensor], weights: Sequence[float],
                   evals: Sequence[torch.Tensor], steps: int, eval_every: int, warmup: int,
                   progress: BuildProgress | _Offset) -> tuple[np.ndarray, np.ndarray, int]:
    """Train ``cfg`` for ``steps`` steps on batches drawn from the ``train`` sources with probabilities
    ``weights``; every ``eval_every`` steps record (loss, accuracy) on each of ``evals``.

    Returns ``(ce, acc, n_params)`` with ``ce``/``acc`` of shape ``(steps // eval_every, len(evals))``.
    Constant learning rate after a linear warm-up (AdamW, betas (0.9, 0.95)); deterministic for ``cfg.seed``.
    """
    model = build_model(cfg, vocab_size)
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    draw = _sampler(train, weights, cfg.batch_size, cfg.seq_len, gen)
    rec: list[list[tuple[float, float]]] = []

    def batch_loss(step: int) -> torch.Tensor:
        if step > 0 and step % eval_every == 0:
            rec.append(_eval(model, evals))
        batch = draw()
        logits = model(input_ids=batch[:, :-1], use_cache=False).logits
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())

    train_steps(model, opt, sched, steps, batch_loss, progress)  # type: ignore[arg-type]
    rec.append(_eval(model, evals))
    arr = np.asarray(rec, dtype=float)  # (n_evals, n_sets, 2)
    return arr[..., 0], arr[..., 1], _param_count(model)


def _build_lm_pool(cfg: LMCurvePoolConfig, folder: Path) -> None:
    tok = load_tokenizer(cfg.tokenizer)
    with build_phase(log, "lm-curves", "tokenizing the code corpus for the learning-curve pool"):
        train = encode_split(tok, "train", cfg.train_bytes)
        val = _windows(encode_split(tok, "val", cfg.val_bytes), cfg.seq_len, cfg.eval_windows)
    grid = [(w, d, lr) for w in cfg.widths for d in cfg.depths for lr in cfg.lrs]
    n_eval = cfg.steps // cfg.eval_every
    losses, n_params, names, feats = [], [], [], []
    with BuildProgress(log, "lm-curves", cfg.steps * len(grid)) as progress:
        for i, (w, d, lr) in enumerate(grid):
            mcfg = replace(lm_config(w, d, lr, cfg.seed, cfg.tokenizer), batch_size=cfg.batch_size,
                           seq_len=cfg.seq_len, weight_decay=cfg.weight_decay)
            ce, _, n = train_lm_curve(mcfg, len(tok), [train], [1.0], [val], cfg.steps, cfg.eval_every,
                                      cfg.warmup, _Offset(progress, i * cfg.steps))
            losses.append(ce[:n_eval, 0])
            n_params.append(n)
            names.append(mcfg.name)
            feats.append((math.log2(w), d, math.log10(lr)))
    steps = np.arange(1, n_eval + 1) * cfg.eval_every
    tokens = steps * cfg.batch_size * cfg.seq_len
    N = np.asarray(n_params, dtype=float)
    CurveTable(tuple(names), np.asarray(feats), ("log2 width", "depth", "log10 lr"), N,
               6 * N[:, None] * tokens[None, :], np.asarray(losses), steps,
               {"source": "causal LM on stdlib code", "tokens_per_step": cfg.batch_size * cfg.seq_len}).save(folder)


def lm_curve_pool(cfg: LMCurvePoolConfig = LMCurvePoolConfig()) -> CurveTable:
    """The cached pool of tiny-LM learning curves for ``cfg`` (trained on first use, ~1-3 min CPU at default)."""
    if not isinstance(cfg, LMCurvePoolConfig):
        raise TypeError(f"cfg must be an LMCurvePoolConfig, got {type(cfg).__name__}")
    if cfg.steps % cfg.eval_every:
        raise ValueError(f"steps ({cfg.steps}) must be a multiple of eval_every ({cfg.eval_every})")
    return load_cached("lm_curves", asdict(cfg), lambda d: _build_lm_pool(cfg, d), CurveTable.load)


# MLPs on digits

@dataclass(frozen=True)
class DigitsCurvePoolConfig:
    """MLPs (ReLU, ``depth`` hidden layers of ``width``) on digits, Adam on minibatches of ``batch_size``, constant
    lr after warm-up."""

    widths: tuple = (8, 16, 32, 64, 128)
    depths: tuple = (1, 2)
    lrs: tuple = (3e-4, 1e-3, 3e-3, 1e-2)
    steps: int = 256
    eval_every: int = 4
    warmup: int = 8
    n_train: int = 1200
    batch_size: int = 128
    seed: int = 0


def _build_digits_pool(cfg: DigitsCurvePoolConfig, folder: Path) -> None:
    from .digits import digits_tensors, shuffled_indices

    X, y = digits_tensors()
    idx = shuffled_indices(len(y), cfg.seed)
    tr, va = idx[: cfg.n_train], idx[cfg.n_train:]
    grid = [(w, d, lr) for w in cfg.widths for d in cfg.depths for lr in cfg.lrs]
    losses, n_params, names, feats = [], [], [], []
    with BuildProgress(log, "digits-curves", cfg.steps * len(grid)) as progress:
        for i, (w, d, lr) in enumerate(grid):
            torch.manual_seed(cfg.seed)
            dims = [64] + [w] * d
            layers: list[torch.nn.Module] = []
            for a, b in zip(dims[:-1], dims[1:]):
                layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
            model = torch.nn.Sequential(*layers, torch.nn.Linear(dims[-1], 10))
            opt = torch.optim.Adam(model.parameters(), lr=lr)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / cfg.warmup))
            rec: list[float] = []
            gen = torch.Generator().manual_seed(cfg.seed + i)

            def batch_loss(step: int, model=model, rec=rec, gen=gen) -> torch.Tensor:
                if step > 0 and step % cfg.eval_every == 0:
                    with torch.no_grad():
                        rec.append(torch.nn.functional.cross_entropy(model(X[va]), y[va]).item())
                b = tr[torch.randint(0, len(tr), (cfg.batch_size,), generator=gen)]
                return torch.nn.functional.cross_entropy(model(X[b]), y[b])

            train_steps(model, opt, sched, cfg.steps, batch_loss, _Offset(progress, i * cfg.steps))  # type: ignore[arg-type]
            with torch.no_grad():
                rec.append(torch.nn.functional.cross_entropy(model(X[va]), y[va]).item())
            losses.append(rec)
            n_params.append(_param_count(model))
            names.append(f"mlp-w{w}-d{d}-lr{lr:g}")
            feats.append((math.log2(w), d, math.log10(lr)))
    steps = np.arange(1, cfg.steps // cfg.eval_every + 1) * cfg.eval_every
    N = np.asarray(n_params, dtype=float)
    CurveTable(tuple(names), np.asarray(feats), ("log2 width", "depth", "log10 lr"), N,
               6 * N[:, None] * (steps * cfg.batch_size)[None, :], np.asarray(losses), steps,
               {"source": "MLP on digits"}).save(folder)


def digits_curve_pool(cfg: DigitsCurvePoolConfig = DigitsCurvePoolConfig()) -> CurveTable:
    """The cached pool of digits-MLP learning curves for ``cfg`` (trained on first use, seconds)."""
    if not isinstance(cfg, DigitsCurvePoolConfig):
        raise TypeError(f"cfg must be a DigitsCurvePoolConfig, got {type(cfg).__name__}")
    if cfg.steps % cfg.eval_every:
        raise ValueError(f"steps ({cfg.steps}) must be a multiple of eval_every ({cfg.eval_every})")
    return load_cached("digits_curves", asdict(cfg), lambda d: _build_digits_pool(cfg, d), CurveTable.load)


# data-mixture runs [A18]

DOMAINS = ("modules", "encodings", "prose")   # top-level .py modules, encodings/ (codec tables), pydoc_data/
BENCHMARK = "email"                            # held-out package: next-token accuracy is the "benchmark"


def domain_texts(domain: str, max_bytes: int) -> str:
    """The text of one mixture domain (train-split files of the code corpus, joined; at most ``max_bytes``)."""
    if domain not in DOMAINS + (BENCHMARK,):
        raise ValueError(f"unknown domain {domain!r}; use one of {DOMAINS + (BENCHMARK,)}")
    if domain == BENCHMARK:
        return "\n".join((stdlib_root() / r).read_text(encoding="utf-8", errors="replace")
                         for r in corpus_files("heldout") if r.startswith(BENCHMARK + "/"))[:max_bytes]
    pick = {"modules": lambda r: "/" not in r, "encodings": lambda r: r.startswith("encodings/"),
            "prose": lambda r: r.startswith("pydoc_data/")}[domain]
    files = [r for r in corpus_files("train") + corpus_files("val") if pick(r)]
    files.sort(key=lambda r: (len(r) * 7919 + sum(map(ord, r))) % 1009)  # fixed interleaving, not alphabetical
    out, total = [], 0
    for r in files:
        t = (stdlib_root() / r).read_text(encoding="utf-8", errors="replace")
        out.append(t)
        total += len(t)
        if total >= max_bytes:
            break
    return "\n".join(out)[:max_bytes]


@dataclass(frozen=True)
class MixtureRunsConfig:
    """Tiny LMs of several widths trained on mixtures of :data:`DOMAINS` ([A18] testbed).

    Mixtures: the vertices, the centroid and ``n_random`` Dirichlet(1) draws (seeded). Every width is trained on
    every mixture for ``steps`` steps (the same tokens for every size). Validation: the last ``val_frac`` of
    each domain's text; benchmark: next-token accuracy (and loss) on the held-out ``email/`` package."""

    widths: tuple = (16, 24, 32, 48)
    depth: int = 2
    lr: float = 3e-3
    n_random: int = 5
    steps: int = 128
    warmup: int = 8
    batch_size: int = 8
    seq_len: int = 64
    domain_bytes: int = 400_000
    val_frac: float = 0.1
    eval_windows: int = 8
    tokenizer: TokenizerConfig = TokenizerConfig()
    seed: int = 0


@dataclass(frozen=True)
class MixtureRuns:
    """Results of :func:`mixture_runs`: one row per (width, mixture) run.

    ``n_params`` (R,), ``mixtures`` (R, J) on the simplex, ``val_loss`` (R, J) per domain at the end of training,
    ``bench_loss``/``bench_acc`` (R,) on the held-out package, ``cost`` (R,) training FLOPs 6 N D."""

    widths: np.ndarray
    n_params: np.ndarray
    mixtures: np.ndarray
    val_loss: np.ndarray
    bench_loss: np.ndarray
    bench_acc: np.ndarray
    cost: np.ndarray
    domains: tuple[str, ...] = DOMAINS

    def save(self, folder: Path) -> None:
        np.savez(folder / "mixtures.npz", **{k: v for k, v in asdict(self).items() if k != "domains"})

    @classmethod
    def load(cls, folder: Path) -> "MixtureRuns":
        z = np.load(folder / "mixtures.npz")
        return cls(**{k: z[k] for k in z.files})


def mixture_design(n_sources: int, n_random: int, seed: int) -> np.ndarray:
    """Vertices, centroid and ``n_random`` Dirichlet(1) mixtures: an ``(J + 1 + n_random, J)`` array."""
    rng = np.random.default_rng(seed)
    return np.vstack([np.eye(n_sources), np.full((1, n_sources), 1.0 / n_sources),
                      rng.dirichlet(np.ones(n_sources), size=n_random)])


def _mixture_data(cfg: MixtureRunsConfig):
    tok = load_tokenizer(cfg.tokenizer)
    with build_phase(log, "mixture-runs", "tokenizing the mixture domains"):
        train, evals = [], []
        for d in DOMAINS:
            ids = torch.tensor(tok(domain_texts(d, cfg.domain_bytes), add_special_tokens=False)["input_ids"],
                               dtype=torch.long)
            cut = int(len(ids) * (1 - cfg.val_frac))
            train.append(ids[:cut])
            evals.append(_windows(ids[cut:], cfg.seq_len, cfg.eval_windows))
        bench = torch.tensor(tok(domain_texts(BENCHMARK, cfg.domain_bytes // 4), add_special_tokens=False)["input_ids"])
        evals.append(_windows(bench, cfg.seq_len, cfg.eval_windows))
    return tok, train, evals


def _run_row(cfg: MixtureRunsConfig, tok, train, evals, w: int, mix: np.ndarray, progress) -> dict:
    mcfg = replace(lm_config(w, cfg.depth, cfg.lr, cfg.seed, cfg.tokenizer), batch_size=cfg.batch_size,
                   seq_len=cfg.seq_len, weight_decay=0.0)
    ce, acc, n = train_lm_curve(mcfg, len(tok), train, list(map(float, mix)), evals, cfg.steps, cfg.steps,
                                cfg.warmup, progress)
    return {"widths": w, "n_params": n, "mixtures": mix, "val_loss": ce[-1, : len(DOMAINS)],
            "bench_loss": ce[-1, -1], "bench_acc": acc[-1, -1], "cost": 6.0 * n * cfg.steps * cfg.batch_size * cfg.seq_len}


def _build_mixtures(cfg: MixtureRunsConfig, folder: Path, widths: tuple | None = None,
                    mixes: np.ndarray | None = None) -> None:
    tok, train, evals = _mixture_data(cfg)
    mixes = mixture_design(len(DOMAINS), cfg.n_random, cfg.seed) if mixes is None else mixes
    widths = cfg.widths if widths is None else widths
    rows = [(w, m) for w in widths for m in range(len(mixes))]
    out: dict[str, list] = {k: [] for k in ("widths", "n_params", "mixtures", "val_loss", "bench_loss", "bench_acc",
                                            "cost")}
    with BuildProgress(log, "mixture-runs", cfg.steps * len(rows)) as progress:
        for i, (w, m) in enumerate(rows):
            row = _run_row(cfg, tok, train, evals, w, mixes[m], _Offset(progress, i * cfg.steps))
            for k, v in row.items():
                out[k].append(v)
    MixtureRuns(**{k: np.asarray(v, dtype=float) for k, v in out.items()}).save(folder)


def mixture_runs(cfg: MixtureRunsConfig = MixtureRunsConfig()) -> MixtureRuns:
    """The cached mixture runs for ``cfg`` (trained on first use)."""
    if not isinstance(cfg, MixtureRunsConfig):
        raise TypeError(f"cfg must be a MixtureRunsConfig, got {type(cfg).__name__}")
    return load_cached("mixture_runs", asdict(cfg), lambda d: _build_mixtures(cfg, d), MixtureRuns.load)


def mixture_run(cfg: MixtureRunsConfig, width: int, mixture: Sequence[float]) -> MixtureRuns:
    """One extra run (e.g. a law's recommended mixture) with ``cfg``'s recipe, cached; the mixture is rounded to
    4 decimals and renormalised."""
    if not isinstance(cfg, MixtureRunsConfig):
        raise TypeError(f"cfg must be a MixtureRunsConfig, got {type(cfg).__name__}")
    mix = np.asarray(mixture, dtype=float)
    if mix.shape != (len(DOMAINS),) or not np.isfinite(mix).all() or (mix < 0).any():
        raise ValueError(f"mixture must be {len(DOMAINS)} non-negative proportions, got {mixture!r}")
    if abs(mix.sum() - 1) > 1e-6:
        raise ValueError(f"mixture proportions must sum to 1, got {mix.sum():.6g}")
    mix = np.round(mix, 4)
    mix = mix / mix.sum()
    key = {**asdict(cfg), "single": [int(width), mix.round(6).tolist()]}
    return load_cached("mixture_runs", key, lambda d: _build_mixtures(cfg, d, (int(width),), mix[None]),
                       MixtureRuns.load)


__all__ = ["CurveTable", "mixture_run", "SyntheticCurveConfig", "synthetic_curve_pool", "LMCurvePoolConfig", "lm_config",
           "train_lm_curve", "lm_curve_pool", "DigitsCurvePoolConfig", "digits_curve_pool", "DOMAINS", "BENCHMARK",
           "domain_texts", "MixtureRunsConfig", "MixtureRuns", "mixture_design", "mixture_runs"]
