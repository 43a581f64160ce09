"""Image tokenizers with prefix readouts [A01]: a 1D ordered (coarse-to-fine) one and a 2D grid one.

Both map an image x (a flattened H x W array) to L tokens z in [V]^L and back, and both can decode a *prefix*
z_{1:t}: the readout x_hat_t fills every unseen part with its training mean, so ``decode(z, prefix_len=0)`` is the
mean image and ``decode(z)`` with all L tokens is the full reconstruction.

- ``OrderedPCATokenizer``: token t is the quantile bin of the t-th principal-component coefficient,
  c_t = u_t^T (x - mean), and decodes to the mean coefficient of its bin. The readout of z_{1:t} is
  x_hat_t = mean + sum_{k<=t} c_hat_k(z_k) u_k, with the unseen coefficients at 0 (their conditional mean).
  Nested dropout on a linear autoencoder recovers exactly this PCA order (Rippel et al., ICML 2014), the
  principle behind FlexTok's coarse-to-fine 1D tokens.
- ``GridVQTokenizer``: a k-means codebook of V entries over p x p patches, tokens in raster order (L = HW/p^2);
  unseen patches take their position's mean patch.
- ``NestedDropoutTokenizer``: a learned MLP autoencoder with finite scalar quantisation (FSQ, one latent per
  token, V levels) trained with nested dropout (keep z_{1:t}, t ~ U{1..L}), so earlier tokens carry coarser
  content. Optional (torch).
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.cluster import KMeans

from ...harness import validate as v

# helper functions

def check_images(X: np.ndarray, name: str = "X", n_features: int | None = None, fitted_shape: tuple | None = None
                 ) -> np.ndarray:
    """Float 2D array (n, D) of finite values; with ``n_features``, D must match the fitted image size."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty 2D array (n_images, n_pixels) of flattened images, "
                         f"got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or inf; clean the images first")
    if n_features is not None and X.shape[1] != n_features:
        shape = f" ({fitted_shape[0]}x{fitted_shape[1]})" if fitted_shape else ""
        raise ValueError(f"this tokenizer was fitted on images with {n_features} pixels{shape}, got images with "
                         f"{X.shape[1]} pixels; refit it on images of this size or resize the images")
    return X


def check_tokens(tokens: np.ndarray, L: int, V: int, prefix_len: int | None) -> tuple[np.ndarray, int]:
    z = np.asarray(tokens)
    if z.ndim == 1:
        z = z[None]
    if z.ndim != 2 or not np.issubdtype(z.dtype, np.integer):
        raise ValueError(f"tokens must be a 2D integer array (n, t) with t <= {L}, got shape {z.shape} "
                         f"and dtype {z.dtype}")
    if z.shape[1] > L:
        raise ValueError(f"tokens have {z.shape[1]} positions but this tokenizer has L={L}")
    if z.size and (z.min() < 0 or z.max() >= V):
        raise ValueError(f"token ids must lie in [0, {V}), got range [{z.min()}, {z.max()}]")
    t = z.shape[1] if prefix_len is None else int(prefix_len)
    if not 0 <= t <= z.shape[1]:
        raise ValueError(f"prefix_len must be in [0, {z.shape[1]}] (the number of tokens given), got {prefix_len}")
    return z, t


def _check_sizes(n_tokens: int, vocab_size: int) -> None:
    v.positive_int("n_tokens", n_tokens)
    v.positive_int("vocab_size", vocab_size, minimum=2)


class _Fitted:
    def _require_fit(self) -> None:
        v.require_fitted(self, "mean_")

    @property
    def seq_len(self) -> int:
        return self.n_tokens

    @property
    def vocab(self) -> int:
        return self.vocab_size


# main classes

class OrderedPCATokenizer(_Fitted):
    """1D coarse-to-fine tokens: quantile bins of the leading principal-component coefficients [A01].

    Args:
        n_tokens: L, the number of tokens (principal components kept).
        vocab_size: V, the number of quantile bins per coefficient.
        rotation_seed: None (default: the ordered PCA basis). An int gives the *unordered control*: the same
            L-dimensional PCA subspace in a random orthonormal basis U' = Q U (Q Haar-random, seeded), so every
            token carries a mix of components and the coarse-to-fine order is removed.
    """

    def __init__(self, n_tokens: int = 16, vocab_size: int = 16, rotation_seed: int | None = None) -> None:
        _check_sizes(n_tokens, vocab_size)
        if rotation_seed is not None and not isinstance(rotation_seed, (int, np.integer)):
            raise TypeError(f"rotation_seed must be an int or None, got {type(rotation_seed).__name__}")
        self.n_tokens, self.vocab_size, self.rotation_seed = int(n_tokens), int(vocab_size), rotation_seed

    def fit(self, X: np.ndarray) -> "OrderedPCATokenizer":
        X = check_images(X)
        if self.n_tokens > min(X.shape):
            raise ValueError(f"n_tokens={self.n_tokens} exceeds min(n_images, n_pixels)={min(X.shape)}")
        self.n_features_in_ = X.shape[1]
        self.mean_ = X.mean(0)
        _, _, vt = np.linalg.svd(X - self.mean_, full_matrices=False)
        comp = vt[: self.n_tokens]
        comp *= np.sign(comp[np.arange(len(comp)), np.abs(comp).argmax(1)])[:, None]   # deterministic signs
        if self.rotation_seed is not None:                                             # unordered control
            q, r = np.linalg.qr(np.random.default_rng(self.rotation_seed).standard_normal((len(comp),) * 2))
            comp = (q * np.sign(np.diag(r))) @ comp
        self.components_ = comp                                                        # (L, D), orthonormal
        c = (X - self.mean_) @ comp.T                                                  # (n, L)
        qs = np.arange(1, self.vocab_size) / self.vocab_size
        self.edges_ = np.quantile(c, qs, axis=0).T                                     # (L, V-1)
        z = self._bin(c)
        counts = np.zeros((self.n_tokens, self.vocab_size))
        sums = np.zeros_like(counts)
        pos = np.broadcast_to(np.arange(self.n_tokens), z.shape)
        np.add.at(counts, (pos, z), 1.0)
        np.add.at(sums, (pos, z), c)
        mids = np.concatenate([self.edges_[:, :1], (self.edges_[:, 1:] + self.edges_[:, :-1]) / 2,
                               self.edges_[:, -1:]], axis=1)
        self.centroids_ = np.where(counts > 0, sums / np.maximum(counts, 1), mids)     # (L, V) bin means
        return self

    def _bin(self, c: np.ndarray) -> np.ndarray:
        return (c[:, :, None] > self.edges_[None]).sum(-1)

    def encode(self, X: np.ndarray) -> np.ndarray:
        """Tokens (n, L) int64."""
        self._require_fit()
        X = check_images(X, n_features=self.n_features_in_)
        return self._bin((X - self.mean_) @ self.components_.T).astype(np.int64)

    def decode(self, tokens: np.ndarray, prefix_len: int | None = None) -> np.ndarray:
        """Prefix readout x_hat_t = mean + sum_{k<=t} c_hat_k(z_k) u_k, t = prefix_len (default: all given)."""
        self._require_fit()
        z, t = check_tokens(tokens, self.n_tokens, self.vocab_size, prefix_len)
        c = self.centroids_[np.arange(t), z[:, :t]]
        return self.mean_ + c @ self.components_[:t]


class GridVQTokenizer(_Fitted):
    """2D grid tokens: a k-means codebook over p x p patches, raster order [A01].

    Args:
        patch: p, the patch side (must divide both image sides).
        vocab_size: V, the codebook size.
        image_shape: (H, W); default: square, inferred from the number of pixels at ``fit``.
        random_state: seed of k-means.
        order: "raster" (default) or "variance": patches sorted by their training-set pixel variance, highest
            first (an ordered grid: the most informative patches come first in every prefix).
    """

    def __init__(self, patch: int = 2, vocab_size: int = 16, image_shape: tuple[int, int] | None = None,
                 random_state: int = 0, order: str = "raster") -> None:
        v.positive_int("patch", patch)
        v.positive_int("vocab_size", vocab_size, minimum=2)
        if order not in ("raster", "variance"):
            raise ValueError(f"order must be 'raster' or 'variance', got {order!r}")
        self.patch, self.vocab_size, self.image_shape, self.random_state = int(patch), int(vocab_size), \
            image_shape, random_state
        self.order = order

    def fit(self, X: np.ndarray) -> "GridVQTokenizer":
        X = check_images(X)
        D = X.shape[1]
        if self.image_shape is None:
            side = math.isqrt(D)
            if side * side != D:
                raise ValueError(f"images with {D} pixels are not square; pass image_shape=(H, W)")
            H = W = side
        else:
            H, W = self.image_shape
            if H * W != D:
                raise ValueError(f"image_shape {self.image_shape} has {H * W} pixels but X has {D}")
        p = self.patch
        if H % p or W % p:
            raise ValueError(f"patch={p} must divide both image sides, got {H}x{W}")
        self.shape_ = (H, W)
        self.n_features_in_ = D
        self.n_tokens = (H // p) * (W // p)
        P = self._patches(X)                                                           # (n, L, p*p)
        km = KMeans(self.vocab_size, n_init=4, random_state=self.random_state).fit(P.reshape(-1, p * p))
        self.codebook_ = km.cluster_centers_                                           # (V, p*p)
        self.mean_patches_ = P.mean(0)                                                 # (L, p*p)
        self.mean_ = X.mean(0)
        var = P.var(0).sum(-1)                                                         # (L,)
        self.order_ = (np.arange(self.n_tokens) if self.order == "raster"
                       else np.argsort(-var, kind="stable"))                           # token k -> patch order_[k]
        return self

    def _patches(self, X: np.ndarray) -> np.ndarray:
        (H, W), p = self.shape_, self.patch
        x = X.reshape(len(X), H // p, p, W // p, p).transpose(0, 1, 3, 2, 4)
        return x.reshape(len(X), -1, p * p)

    def _fold(self, P: np.ndarray) -> np.ndarray:
        (H, W), p = self.shape_, self.patch
        x = P.reshape(len(P), H // p, W // p, p, p).transpose(0, 1, 3, 2, 4)
        return x.reshape(len(P), H * W)

    def encode(self, X: np.ndarray) -> np.ndarray:
        """Tokens (n, L) int64: the nearest codebook entry of each patch, in ``order_`` (raster by default)."""
        self._require_fit()
        X = check_images(X, n_features=self.n_features_in_, fitted_shape=self.shape_)
        P = self._patches(X)
        d = (P ** 2).sum(-1)[..., None] - 2 * P @ self.codebook_.T + (self.codebook_ ** 2).sum(-1)
        return d.argmin(-1).astype(np.int64)[:, self.order_]

    def decode(self, tokens: np.ndarray, prefix_len: int | None = None) -> np.ndarray:
        """Readout: the first t patches from the codebook, the rest at their position's mean patch."""
        self._require_fit()
        z, t = check_tokens(tokens, self.n_tokens, self.vocab_size, prefix_len)
        P = np.broadcast_to(self.mean_patches_, (len(z),) + self.mean_patches_.shape).copy()
        P[:, self.order_[:t]] = self.codebook_[z[:, :t]]
        return self._fold(P)


class NestedDropoutTokenizer(_Fitted):
    """Learned 1D ordered tokens: MLP autoencoder + FSQ, trained with nested dropout [A01] (optional, torch).

    Each of the L latents is squashed to (-1, 1) and rounded to one of V levels (FSQ, straight-through); during
    training a truncation t ~ U{1..L} zeroes the latents after t (nested dropout), so the decoder learns to read
    any prefix and earlier tokens carry the coarse content. A zero latent is the "unseen" value; the readout
    of z_{1:t} decodes the first t quantised latents with the rest at 0.
    """

    def __init__(self, n_tokens: int = 16, vocab_size: int = 16, hidden: int = 128, steps: int = 1000,
                 lr: float = 3e-3, random_state: int = 0) -> None:
        _check_sizes(n_tokens, vocab_size)
        self.n_tokens, self.vocab_size, self.hidden, self.steps, self.lr, self.random_state = \
            int(n_tokens), int(vocab_size), v.positive_int("hidden", hidden), v.positive_int("steps", steps), \
            v.positive("lr", lr), random_state

    def _levels(self):
        import torch

        return torch.linspace(-1.0, 1.0, self.vocab_size)

    def _build(self, D: int) -> None:
        from torch import nn

        h, L = self.hidden, self.n_tokens
        self.enc_ = nn.Sequential(nn.Linear(D, h), nn.GELU(), nn.Linear(h, L), nn.Tanh())
        self.dec_ = nn.Sequential(nn.Linear(L, h), nn.GELU(), nn.Linear(h, D))

    def state_dict(self) -> dict:
        """Everything a fitted tokenizer needs (for ``torch.save``)."""
        self._require_fit()
        return {"mean": self.mean_, "enc": self.enc_.state_dict(), "dec": self.dec_.state_dict()}

    def load_state_dict(self, state: dict) -> "NestedDropoutTokenizer":
        if not isinstance(state, dict) or not {"mean", "enc", "dec"} <= set(state):
            raise ValueError("state must be a dict from NestedDropoutTokenizer.state_dict() with keys 'mean', "
                             f"'enc' and 'dec', got {v.describe(state if not isinstance(state, dict) else sorted(state))}")
        v.finite("state['mean']", np.asarray(state["mean"]))
        self.mean_ = np.asarray(state["mean"])
        self.n_features_in_ = len(self.mean_)
        self._build(self.n_features_in_)
        self.enc_.load_state_dict(state["enc"])
        self.dec_.load_state_dict(state["dec"])
        return self

    def fit(self, X: np.ndarray) -> "NestedDropoutTokenizer":
        import torch

        X = check_images(X)
        self.n_features_in_, self.mean_ = X.shape[1], X.mean(0)
        g = torch.Generator().manual_seed(self.random_state)
        torch.manual_seed(self.random_state)
        D, L = X.shape[1], self.n_tokens
        self._build(D)
        xt = torch.tensor(X - self.mean_, dtype=torch.float32)
        opt = torch.optim.Adam([*self.enc_.parameters(), *self.dec_.parameters()], lr=self.lr)
        ar = torch.arange(L)
        for _ in range(self.steps):
            q = self._quantise(self.enc_(xt))
            t = torch.randint(1, L + 1, (len(xt), 1), generator=g)
            loss = ((self.dec_(q * (ar < t)) - xt) ** 2).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return self

    def _quantise(self, u):
        step = 2.0 / (self.vocab_size - 1)
        return u + (torch_round((u + 1) / step) * step - 1 - u).detach()

    def encode(self, X: np.ndarray) -> np.ndarray:
        import torch

        self._require_fit()
        X = check_images(X, n_features=self.n_features_in_)
        with torch.no_grad():
            u = self.enc_(torch.tensor(X - self.mean_, dtype=torch.float32))
        return torch_round((u + 1) * (self.vocab_size - 1) / 2).long().clamp(0, self.vocab_size - 1).numpy()

    def decode(self, tokens: np.ndarray, prefix_len: int | None = None) -> np.ndarray:
        import torch

        self._require_fit()
        z, t = check_tokens(tokens, self.n_tokens, self.vocab_size, prefix_len)
        q = torch.zeros(len(z), self.n_tokens)
        q[:, :t] = self._levels()[torch.as_tensor(z[:, :t])]
        with torch.no_grad():
            return self.mean_ + self.dec_(q).double().numpy()


def torch_round(x):
    import torch

    return torch.round(x)
