"""Priors over token sequences pi(z_t | z_<t, c) [A01]: uniform (training-free search) or a tiny AR model.

Every prior samples with a NumPy ``Generator`` through the Gumbel-max trick on noise drawn up front for the whole
request, so the first m rows of a request for n > m sequences equal a request for m (nested samples), and the
same generator state gives the same tokens.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ...harness import validate as v

# helper functions

def _as_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _check_prefix(prefix: np.ndarray | None, n: int | None, L: int, V: int) -> np.ndarray:
    if prefix is None:
        if n is None or n < 1:
            raise ValueError(f"n must be a positive int when no prefix is given, got {n!r}")
        return np.zeros((n, 0), dtype=np.int64)
    z = np.asarray(prefix)
    if z.ndim != 2 or not (np.issubdtype(z.dtype, np.integer) or z.size == 0):
        raise ValueError(f"prefix must be a 2D integer array (n, t), got shape {z.shape}, dtype {z.dtype}")
    if z.shape[1] > L:
        raise ValueError(f"prefix has {z.shape[1]} tokens, more than the sequence length L={L}")
    if z.size and (z.min() < 0 or z.max() >= V):
        raise ValueError(f"prefix token ids must lie in [0, {V})")
    return z.astype(np.int64)


class UniformPrior:
    """pi(z_t | z_<t, c) = 1/V: search without any trained generative model (training-free) [A01]."""

    without_replacement = True   # expand() draws distinct continuations

    def __init__(self, vocab_size: int, seq_len: int) -> None:
        self.V = v.positive_int("vocab_size", vocab_size, minimum=2)
        self.L = v.positive_int("seq_len", seq_len)

    def extend(self, prefix: np.ndarray, cond: np.ndarray | None, n_tokens: int,
               rng: np.random.Generator | int | None = None) -> np.ndarray:
        """Append ``n_tokens`` i.i.d. uniform tokens to each row of ``prefix`` (n, t) -> (n, t + n_tokens)."""
        z = _check_prefix(prefix, None, self.L, self.V)
        n_tokens = min(v.non_negative_int("n_tokens", n_tokens), self.L - z.shape[1])
        return np.concatenate([z, _as_rng(rng).integers(self.V, size=(len(z), n_tokens))], 1)

    def expand(self, prefix: np.ndarray, cond: np.ndarray | None, k: int, s: int,
               rng: np.random.Generator | int | None = None) -> np.ndarray:
        """k distinct s-token continuations per prefix (without replacement; all V^s when k >= V^s).

        Returns (n * k', t + s) with k' = min(k, V^s), rows grouped by prefix.
        """
        k, s = v.positive_int("k", k), v.positive_int("s", s)
        z = _check_prefix(prefix, None, self.L, self.V)
        s = min(s, self.L - z.shape[1])
        total = self.V ** s
        k = min(k, total)
        rng = _as_rng(rng)
        if total <= 4096:                                   # random keys: k smallest of V^s uniforms per prefix
            codes = np.argsort(rng.random((len(z), total)), axis=1)[:, :k]
        else:
            codes = np.stack([rng.choice(total, k, replace=False) for _ in range(len(z))])
        digits = (codes[..., None] // self.V ** np.arange(s - 1, -1, -1)) % self.V    # (n, k, s), base V
        return np.concatenate([np.repeat(z, k, 0), digits.reshape(-1, s)], 1)

    def sample(self, n: int, prefix: np.ndarray | None = None, cond: np.ndarray | None = None,
               rng: np.random.Generator | int | None = None) -> np.ndarray:
        z = _check_prefix(prefix, n, self.L, self.V)
        return self.extend(z, cond, self.L - z.shape[1], rng)


class ARPrior(nn.Module):
    """A tiny class-conditional GRU over tokens: pi(z_t | z_<t, c) [A01].

    Input at position t is emb(z_{t-1}) + pos(t) + cls(c) with z_0 = BOS; class ``n_classes`` is the null
    class (trained with condition dropout), used when ``cond`` is None (unconditional sampling).
    """

    def __init__(self, vocab_size: int, seq_len: int, n_classes: int, d_model: int = 48) -> None:
        super().__init__()
        self.V = v.positive_int("vocab_size", vocab_size, minimum=2)
        self.L, self.n_classes = v.positive_int("seq_len", seq_len), v.positive_int("n_classes", n_classes)
        d_model = v.positive_int("d_model", d_model)
        self.tok = nn.Embedding(self.V + 1, d_model)            # last id = BOS
        self.pos = nn.Embedding(self.L, d_model)
        self.cls = nn.Embedding(self.n_classes + 1, d_model)    # last id = null class
        self.rnn = nn.GRU(d_model, d_model, batch_first=True)
        self.head = nn.Linear(d_model, self.V)

    def _cond(self, cond: np.ndarray | torch.Tensor | int | None, n: int) -> torch.Tensor:
        if cond is None:
            return torch.full((n,), self.n_classes, dtype=torch.long)
        c = torch.as_tensor(np.broadcast_to(np.asarray(cond), (n,)).copy(), dtype=torch.long)
        if c.numel() and (c.min() < 0 or c.max() >= self.n_classes):
            raise ValueError(f"class labels must lie in [0, {self.n_classes}), got range [{c.min()}, {c.max()}]")
        return c

    def forward(self, tokens: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """Logits (n, t + 1, V) for z_1..z_{t+1} given tokens z_1..z_t (t < L) and class ids (n,)."""
        n, t = tokens.shape
        bos = torch.full((n, 1), self.V, dtype=torch.long)
        inp = torch.cat([bos, tokens], 1)[:, : self.L]
        h = self.tok(inp) + self.pos.weight[: inp.shape[1]] + self.cls(cond)[:, None]
        return self.head(self.rnn(h)[0])

    @torch.no_grad()
    def extend(self, prefix: np.ndarray, cond: np.ndarray | None, n_tokens: int,
               rng: np.random.Generator | int | None = None) -> np.ndarray:
        """Sample ``n_tokens`` more tokens for each row of ``prefix`` (n, t) -> (n, t + n_tokens)."""
        z = _check_prefix(prefix, None, self.L, self.V)
        n, t = z.shape
        n_tokens = min(v.non_negative_int("n_tokens", n_tokens), self.L - t)
        gumbel = _as_rng(rng).gumbel(size=(n, n_tokens, self.V))
        if n_tokens == 0:
            return z
        c = self.cls(self._cond(cond, n))[:, None]
        inp = torch.cat([torch.full((n, 1), self.V, dtype=torch.long), torch.as_tensor(z)], 1)
        out, hid = self.rnn(self.tok(inp) + self.pos.weight[: t + 1] + c)   # read the prefix once
        new = []
        for j in range(n_tokens):               # autoregressive: one position at a time, all rows at once
            nxt = torch.as_tensor((self.head(out[:, -1]).double().numpy() + gumbel[:, j]).argmax(1))
            new.append(nxt)
            if j + 1 < n_tokens:
                x = self.tok(nxt)[:, None] + self.pos.weight[t + j + 1] + c
                out, hid = self.rnn(x, hid)
        return np.concatenate([z, torch.stack(new, 1).numpy()], 1)

    def expand(self, prefix: np.ndarray, cond: np.ndarray | None, k: int, s: int,
               rng: np.random.Generator | int | None = None) -> np.ndarray:
        """k i.i.d. s-token continuations per prefix: (n * k, t + s), rows grouped by prefix."""
        k, s = v.positive_int("k", k), v.positive_int("s", s)
        z = _check_prefix(prefix, None, self.L, self.V)
        c = None if cond is None else np.repeat(np.broadcast_to(np.asarray(cond), (len(z),)), k)
        return self.extend(np.repeat(z, k, 0), c, s, rng)

    def sample(self, n: int, prefix: np.ndarray | None = None, cond: np.ndarray | int | None = None,
               rng: np.random.Generator | int | None = None) -> np.ndarray:
        """n sequences (n, L), continuing ``prefix`` when given; ``cond`` None samples unconditionally."""
        z = _check_prefix(prefix, n, self.L, self.V)
        return self.extend(z, cond, self.L - z.shape[1], rng)

    @torch.no_grad()
    def log_prob(self, tokens: np.ndarray, cond: np.ndarray | None) -> np.ndarray:
        """log pi(z | c) of full sequences (n, L)."""
        z = torch.as_tensor(_check_prefix(tokens, None, self.L, self.V))
        lp = torch.log_softmax(self(z[:, :-1], self._cond(cond, len(z))), -1)
        return lp.gather(-1, z[..., None])[..., 0].sum(1).double().numpy()


def train_ar_prior(tokens: np.ndarray, labels: np.ndarray, vocab_size: int, n_classes: int, *, steps: int = 300,
                   d_model: int = 48, lr: float = 5e-3, cond_dropout: float = 0.3, batch_size: int = 128,
                   seed: int = 0) -> ARPrior:
    """Fit an :class:`ARPrior` by teacher-forced cross-entropy, dropping the class with prob ``cond_dropout``."""
    vocab_size, n_classes = v.positive_int("vocab_size", vocab_size, minimum=2), v.positive_int("n_classes", n_classes)
    steps, batch_size = v.positive_int("steps", steps), v.positive_int("batch_size", batch_size)
    lr, cond_dropout = v.positive("lr", lr), v.probability("cond_dropout", cond_dropout)
    tokens = np.asarray(v.non_empty("tokens", tokens))
    if tokens.ndim != 2 or tokens.shape[1] == 0:
        raise ValueError(f"tokens must be a 2D integer array (n_sequences, L) with L >= 1, got shape {tokens.shape}")
    z = torch.as_tensor(_check_prefix(tokens, None, tokens.shape[1], vocab_size))
    labels = v.indices("labels", np.asarray(labels), n_classes)
    if len(z) != len(labels):
        raise ValueError(f"tokens and labels differ in length: {len(z)} vs {len(labels)}")
    y = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = ARPrior(vocab_size, z.shape[1], n_classes, d_model)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for _ in range(steps):
        idx = torch.randint(len(z), (min(batch_size, len(z)),), generator=g)
        zb, yb = z[idx], y[idx].clone()
        yb[torch.rand(len(yb), generator=g) < cond_dropout] = n_classes
        loss = nn.functional.cross_entropy(model(zb[:, :-1], yb).reshape(-1, vocab_size), zb.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return model.eval()
