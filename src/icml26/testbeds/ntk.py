"""Empirical NTK machinery shared by the kernel papers (A13 spectral position, B14 OAK; reusable by A02, A06).

For a model f(x; theta) with C outputs and P trainable parameters, the Jacobian on n inputs is
J in R^{(n C) x P} and the empirical neural tangent kernel is

    K = J P J^T            (P = I: the eNTK; P = diag(p): a preconditioned kernel such as OAK [B14])

``trace_outputs=True`` sums the C x C output blocks, K_ij = sum_c J_ic P J_jc^T, giving an n x n kernel.

Two ways to work with K:

- **dense** (``jacobian``, ``empirical_ntk``): materialise J with ``torch.func.vmap(jacrev)``; memory n C P.
  Exact, for small models.
- **matrix-free** (``NTKOperator``): K v = J (P (J^T v)), one vector-Jacobian product (reverse mode) and one
  Jacobian-vector product (forward mode, ``torch.func.linearize``) per product. Memory O(P + activations of the
  n inputs), never n x P. Top-k spectra come from Lanczos (SciPy's ARPACK ``eigsh`` on the operator) or a
  randomised subspace iteration (Halko, Martinsson & Tropp 2011); ``ntk_trace`` gives Tr K from chunked
  per-sample gradients or Hutchinson probes.

Plus power-law spectrum helpers (``power_law_spectrum``: lambda_k ∝ k^-a; ``fit_power_law``) and Gaussian-kernel
maps for infinite-width (NNGP) kernels: ``gaussian_expectation`` E[phi(u) psi(v)] for a bivariate Gaussian by
Gauss-Hermite quadrature, closed forms ``relu_expectation`` (arc-cosine) and ``erf_expectation``, and
``nngp_kernel`` iterating the layer map on a Gram matrix.
"""

from __future__ import annotations

import math
import warnings
from typing import Callable, Literal

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, jacrev, linearize, vjp, vmap

__all__ = [
    "trainable_parameters", "jacobian", "empirical_ntk", "NTKOperator", "topk_eigh", "ntk_topk", "ntk_trace",
    "per_sample_grad_norms", "power_law_spectrum", "fit_power_law", "gaussian_expectation", "relu_expectation",
    "erf_expectation", "nngp_kernel",
]

Params = dict[str, torch.Tensor]


# helper functions

def trainable_parameters(model: nn.Module) -> Params:
    """Name -> parameter for every parameter with ``requires_grad``; raises if there is none."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    if not params:
        raise ValueError("the model has no trainable parameters (every parameter has requires_grad=False); "
                         "the NTK is defined over trainable parameters, so unfreeze at least one")
    return params


def _as_input(model: nn.Module, X: torch.Tensor, name: str = "X") -> torch.Tensor:
    if not isinstance(X, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(X).__name__}")
    if X.ndim < 1 or X.shape[0] == 0:
        raise ValueError(f"{name} must have a leading batch dimension with at least one input, got shape "
                         f"{tuple(X.shape)}")
    p = next(iter(trainable_parameters(model).values()))
    if X.is_floating_point():
        X = X.to(dtype=p.dtype, device=p.device)
        if not torch.isfinite(X).all():
            raise ValueError(f"{name} contains NaN or inf")
    return X


def _batch_fn(model: nn.Module, params: Params) -> Callable[[Params, torch.Tensor], torch.Tensor]:
    """f(params, X) -> outputs flattened to (n * C,), sample-major; buffers are held fixed."""
    buffers = dict(model.named_buffers())
    frozen = {k: p.detach() for k, p in model.named_parameters() if k not in params}

    def f(p: Params, X: torch.Tensor) -> torch.Tensor:
        return functional_call(model, {**frozen, **buffers, **p}, (X,)).reshape(-1)
    return f


def _n_outputs(model: nn.Module, X: torch.Tensor) -> int:
    with torch.no_grad():
        out = model(X[:1])
    return int(out.numel())


def _flat_precond(precond: torch.Tensor | Params | None, params: Params) -> Params | None:
    """A flat (P,) diagonal or a name -> tensor dict, as a dict shaped like ``params``."""
    if precond is None:
        return None
    if isinstance(precond, dict):
        missing = set(params) - set(precond)
        if missing:
            raise ValueError(f"precond lacks entries for parameters {sorted(missing)[:3]}")
        out = {k: precond[k].to(params[k]) for k in params}
    elif isinstance(precond, torch.Tensor):
        n = sum(p.numel() for p in params.values())
        if precond.ndim != 1 or precond.numel() != n:
            raise ValueError(f"precond must be a flat diagonal of length {n} (the trainable parameters), got shape "
                             f"{tuple(precond.shape)}")
        out, i = {}, 0
        for k, p in params.items():
            out[k] = precond[i:i + p.numel()].reshape(p.shape).to(p)
            i += p.numel()
    else:
        raise TypeError(f"precond must be a tensor, a dict of tensors or None, got {type(precond).__name__}")
    if any((v < 0).any() or not torch.isfinite(v).all() for v in out.values()):
        raise ValueError("precond must be finite and non-negative (a diagonal PSD preconditioner)")
    return out


# dense Jacobian and kernel

def jacobian(model: nn.Module, X: torch.Tensor, *, chunk_size: int | None = None) -> torch.Tensor:
    """Dense Jacobian J of shape (n, C, P): d f_c(x_i) / d theta, parameters flattened in ``named_parameters``
    order. Per-sample ``vmap(jacrev)``, so memory is n C P floats: use ``NTKOperator`` for large models."""
    params = trainable_parameters(model)
    X = _as_input(model, X)
    f = _batch_fn(model, params)
    detached = {k: v.detach() for k, v in params.items()}

    def single(p: Params, x: torch.Tensor) -> torch.Tensor:
        return f(p, x.unsqueeze(0))
    jac = vmap(jacrev(single), in_dims=(None, 0), chunk_size=chunk_size)(detached, X)
    n = X.shape[0]
    return torch.cat([jac[k].reshape(n, jac[k].shape[1], -1) for k in params], dim=2)


def empirical_ntk(model: nn.Module, X1: torch.Tensor, X2: torch.Tensor | None = None, *,
                  precond: torch.Tensor | Params | None = None, trace_outputs: bool = True) -> torch.Tensor:
    """Dense (preconditioned) eNTK K(X1, X2) = J1 diag(precond) J2^T.

    Returns (n1, n2) when ``trace_outputs`` (sum over the C outputs) else (n1 C, n2 C), sample-major.
    """
    params = trainable_parameters(model)
    J1 = jacobian(model, X1)
    J2 = J1 if X2 is None else jacobian(model, X2)
    if precond is not None:
        d = _flat_precond(precond, params)
        diag = torch.cat([d[k].reshape(-1) for k in params])
        J1s = J1 * diag
    else:
        J1s = J1
    if trace_outputs:
        return torch.einsum("icp,jcp->ij", J1s, J2)
    n1, c, p = J1.shape
    return J1s.reshape(n1 * c, p) @ J2.reshape(-1, p).T


# matrix-free operator

class NTKOperator:
    """Matrix-free K = J P J^T on fixed inputs X (not traced over outputs: size n C).

    ``matvec(v)`` costs one VJP and one JVP through the model on X; ``matmat(V)`` vectorises over columns
    with ``vmap``. Memory: O(P) for the vectors plus the linearised graph of one forward pass on X.
    The model's parameters are read once at construction (the operator is the kernel at that theta).
    """

    def __init__(self, model: nn.Module, X: torch.Tensor, *, precond: torch.Tensor | Params | None = None) -> None:
        params = trainable_parameters(model)
        X = _as_input(model, X)
        self.names = list(params)
        self.params = {k: v.detach() for k, v in params.items()}
        self.n_params = sum(v.numel() for v in self.params.values())
        self.dtype = next(iter(self.params.values())).dtype
        f = _batch_fn(model, params)
        g = lambda p: f(p, X)  # noqa: E731
        self._g = g
        self.outputs, self._vjp = vjp(g, self.params)
        self._jvp_fn: Callable[[Params], torch.Tensor] | None = None
        self.outputs = self.outputs.detach()
        self.shape = (self.outputs.numel(), self.outputs.numel())
        self.precond = _flat_precond(precond, self.params)
        self.n_matvec = 0

    def _jvp(self, t: Params) -> torch.Tensor:
        if self._jvp_fn is None:   # traced once, on first use (r^T K r needs only the VJP)
            with warnings.catch_warnings():   # torch.fx const-folding inside linearize warns about get_attr nodes
                warnings.simplefilter("ignore", UserWarning)
                _, self._jvp_fn = linearize(self._g, self.params)
        return self._jvp_fn(t)

    def rmatvec(self, v: torch.Tensor) -> Params:
        """J^T v as a name -> tensor dict (a gradient-shaped tangent)."""
        (g,) = self._vjp(v.to(self.dtype))
        return g

    def _apply_p(self, g: Params) -> Params:
        return g if self.precond is None else {k: g[k] * self.precond[k] for k in g}

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        """K v for v of shape (n C,)."""
        if v.shape != (self.shape[0],):
            raise ValueError(f"v must have shape ({self.shape[0]},), got {tuple(v.shape)}")
        self.n_matvec += 1
        return self._jvp(self._apply_p(self.rmatvec(v)))

    def matmat(self, V: torch.Tensor) -> torch.Tensor:
        """K V for V of shape (n C, m), vectorised over the m columns."""
        if V.ndim != 2 or V.shape[0] != self.shape[0]:
            raise ValueError(f"V must have shape ({self.shape[0]}, m), got {tuple(V.shape)}")
        self.n_matvec += V.shape[1]
        out = vmap(lambda v: self._jvp(self._apply_p(self._vjp(v.to(self.dtype))[0])), in_dims=1, out_dims=1)(V)
        return out

    def quad(self, r: torch.Tensor) -> float:
        """r^T K r = |P^{1/2} J^T r|^2 from one VJP."""
        g = self.rmatvec(r)
        if self.precond is None:
            return float(sum((t * t).sum() for t in g.values()))
        return float(sum((t * t * self.precond[k]).sum() for k, t in g.items()))

    def dense(self) -> torch.Tensor:
        """K materialised column by column (n C matvecs; for testing on small n)."""
        return self.matmat(torch.eye(self.shape[0], dtype=self.dtype))


# top-k spectra

def topk_eigh(op: NTKOperator, k: int, *, method: Literal["lanczos", "randomized"] = "lanczos",
              tol: float = 1e-10, oversample: int = 10, n_iter: int = 6, seed: int = 0
              ) -> tuple[np.ndarray, np.ndarray]:
    """Top-k eigenpairs of a PSD ``NTKOperator`` (eigenvalues descending; eigenvectors (n C, k), float64).

    - ``lanczos``: implicitly restarted Lanczos (SciPy ``eigsh``, ARPACK) on the operator, float64 vectors.
    - ``randomized``: subspace iteration on a Gaussian sketch of k + ``oversample`` columns with ``n_iter``
      power steps, then Rayleigh-Ritz (Halko et al. 2011, Alg. 4.4/5.3). Accurate when the spectrum decays.
    """
    n = op.shape[0]
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        raise ValueError(f"k must be an integer in [1, {n}] (the kernel size), got {k!r}")
    if method == "lanczos":
        from scipy.sparse.linalg import LinearOperator, eigsh
        if k >= n - 1:   # ARPACK needs k < n - 1; fall back to the dense matrix (small n only)
            evals, evecs = np.linalg.eigh(op.dense().double().numpy())
            return evals[::-1][:k].copy(), evecs[:, ::-1][:, :k].copy()

        def mv(v: np.ndarray) -> np.ndarray:
            return op.matvec(torch.from_numpy(np.ascontiguousarray(v).ravel())).double().numpy()
        lin = LinearOperator((n, n), matvec=mv, dtype=np.float64)
        v0 = np.random.default_rng(seed).standard_normal(n)
        evals, evecs = eigsh(lin, k=k, which="LA", tol=tol, v0=v0, ncv=min(n, max(2 * k + 1, 20)))
        order = np.argsort(evals)[::-1]
        return evals[order], evecs[:, order]
    if method == "randomized":
        m = min(n, k + oversample)
        g = torch.Generator().manual_seed(seed)
        Q = torch.linalg.qr(torch.randn(n, m, generator=g, dtype=torch.float64))[0]
        for _ in range(n_iter):
            Q = torch.linalg.qr(op.matmat(Q.to(op.dtype)).double())[0]
        B = Q.T @ op.matmat(Q.to(op.dtype)).double()
        evals, W = torch.linalg.eigh(0.5 * (B + B.T))
        evals, W = evals.flip(0)[:k], W.flip(1)[:, :k]
        return evals.numpy(), (Q @ W).numpy()
    raise ValueError(f"unknown method {method!r}; use 'lanczos' or 'randomized'")


def ntk_topk(model: nn.Module, X: torch.Tensor, k: int, *, method: Literal["lanczos", "randomized"] = "lanczos",
             precond: torch.Tensor | Params | None = None, **kw) -> tuple[np.ndarray, np.ndarray]:
    """Top-k eigenpairs of the (preconditioned) eNTK on X, matrix-free (see ``topk_eigh``)."""
    return topk_eigh(NTKOperator(model, X, precond=precond), k, method=method, **kw)


# traces and per-sample gradients

def per_sample_grad_norms(model: nn.Module, X: torch.Tensor, *, chunk_size: int = 64) -> torch.Tensor:
    """|d f_c(x_i)/d theta|^2 summed over outputs c, per sample: shape (n,). The diagonal of the traced eNTK.
    Memory chunk_size x C x P (per-sample Jacobians of one chunk at a time)."""
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    params = trainable_parameters(model)
    X = _as_input(model, X)
    f = _batch_fn(model, params)
    detached = {k: v.detach() for k, v in params.items()}

    def single(p: Params, x: torch.Tensor) -> torch.Tensor:
        jac = jacrev(lambda q: f(q, x.unsqueeze(0)))(p)
        return sum((t.reshape(t.shape[0], -1) ** 2).sum() for t in jac.values())
    return torch.cat([vmap(single, in_dims=(None, 0))(detached, xc) for xc in X.split(chunk_size)])


def ntk_trace(model: nn.Module, X: torch.Tensor, *, method: Literal["exact", "hutchinson"] = "exact",
              n_probes: int = 32, seed: int = 0, chunk_size: int = 64) -> float:
    """Tr K (traced over outputs: equal to the trace of the full nC x nC kernel).

    ``exact``: sum of per-sample squared gradient norms. ``hutchinson``: mean over Rademacher probes z of
    |J^T z|^2 (one VJP each; unbiased, relative s.d. about sqrt(2/n_probes) for a flat spectrum).
    """
    if method == "exact":
        return float(per_sample_grad_norms(model, X, chunk_size=chunk_size).sum())
    if method == "hutchinson":
        if not isinstance(n_probes, int) or n_probes < 1:
            raise ValueError(f"n_probes must be a positive integer, got {n_probes!r}")
        op = NTKOperator(model, X)
        g = torch.Generator().manual_seed(seed)
        Z = torch.randint(0, 2, (n_probes, op.shape[0]), generator=g).to(op.dtype) * 2 - 1
        return float(np.mean([op.quad(z) for z in Z]))
    raise ValueError(f"unknown method {method!r}; use 'exact' or 'hutchinson'")


# power-law spectra

def power_law_spectrum(n: int, exponent: float, *, normalize: Literal["trace", "first"] | None = "trace"
                       ) -> np.ndarray:
    """lambda_k = k^-a for k = 1..n, scaled to unit trace (``"trace"``), lambda_1 = 1 (``"first"``) or raw."""
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not math.isfinite(exponent) or exponent <= 0:
        raise ValueError(f"exponent must be a positive finite number (lambda_k ∝ k^-a), got {exponent!r}")
    lam = np.arange(1, n + 1, dtype=float) ** -float(exponent)
    if normalize == "trace":
        return lam / lam.sum()
    if normalize in ("first", None):
        return lam
    raise ValueError(f"unknown normalize {normalize!r}; use 'trace', 'first' or None")


def fit_power_law(values: np.ndarray, ranks: np.ndarray | None = None, *, lo: int = 0, hi: int | None = None
                  ) -> tuple[float, float]:
    """Least-squares fit of log values = log c - a log ranks on entries [lo, hi); returns (a, c).

    ``ranks`` defaults to 1..len(values) (an eigenvalue spectrum sorted descending); pass times or sample
    sizes to fit a decay in them. Non-positive values are rejected.
    """
    v = np.asarray(values, dtype=float)
    r = np.arange(1, len(v) + 1, dtype=float) if ranks is None else np.asarray(ranks, dtype=float)
    if v.ndim != 1 or r.shape != v.shape:
        raise ValueError(f"values and ranks must be 1-D of equal length, got {v.shape} and {r.shape}")
    v, r = v[lo:hi], r[lo:hi]
    if len(v) < 2:
        raise ValueError("need at least two points in [lo, hi) to fit a power law")
    if (v <= 0).any() or (r <= 0).any() or not (np.isfinite(v).all() and np.isfinite(r).all()):
        raise ValueError("values and ranks must be positive and finite to fit in log-log")
    slope, intercept = np.polyfit(np.log(r), np.log(v), 1)
    return float(-slope), float(np.exp(intercept))


# Gaussian-kernel maps (NNGP / mean-field signal propagation)

def gaussian_expectation(phi: Callable[[np.ndarray], np.ndarray], q1: np.ndarray | float, q2: np.ndarray | float,
                         c: np.ndarray | float, *, psi: Callable[[np.ndarray], np.ndarray] | None = None,
                         n_quad: int = 64) -> np.ndarray:
    """E[phi(u) psi(v)] for (u, v) ~ N(0, [[q1, c sqrt(q1 q2)], [c sqrt(q1 q2), q2]]) (psi defaults to phi).

    Tensor-product Gauss-Hermite quadrature with u = sqrt(q1) z1, v = sqrt(q2) (c z1 + sqrt(1 - c^2) z2);
    broadcasts over array-valued q1, q2, c. Exact for polynomials of degree < 2 n_quad; for kinked phi
    (ReLU) the error decays algebraically, so prefer the closed forms where they exist.
    """
    if not isinstance(n_quad, int) or n_quad < 2:
        raise ValueError(f"n_quad must be an integer >= 2, got {n_quad!r}")
    q1, q2, c = (np.asarray(a, dtype=float) for a in (q1, q2, c))
    if (q1 < 0).any() or (q2 < 0).any():
        raise ValueError("variances q1, q2 must be non-negative")
    if (np.abs(c) > 1 + 1e-12).any():
        raise ValueError("correlation c must lie in [-1, 1]")
    c = np.clip(c, -1.0, 1.0)
    psi = phi if psi is None else psi
    z, w = np.polynomial.hermite_e.hermegauss(n_quad)          # weight exp(-z^2/2)
    w = w / w.sum()
    shape = np.broadcast(q1, q2, c).shape
    q1, q2, c = (np.broadcast_to(a, shape)[..., None, None] for a in (q1, q2, c))
    z1, z2 = z[:, None], z[None, :]
    u = np.sqrt(q1) * z1
    v = np.sqrt(q2) * (c * z1 + np.sqrt(1 - c ** 2) * z2)
    return (phi(u) * psi(v) * (w[:, None] * w[None, :])).sum(axis=(-1, -2))


def relu_expectation(q1: np.ndarray | float, q2: np.ndarray | float, c: np.ndarray | float) -> np.ndarray:
    """E[relu(u) relu(v)] = sqrt(q1 q2) / (2 pi) (sin t + (pi - t) cos t), t = arccos c (arc-cosine kernel, n=1)."""
    q1, q2, c = (np.asarray(a, dtype=float) for a in (q1, q2, c))
    t = np.arccos(np.clip(c, -1.0, 1.0))
    return np.sqrt(q1 * q2) / (2 * np.pi) * (np.sin(t) + (np.pi - t) * np.cos(t))


def erf_expectation(q1: np.ndarray | float, q2: np.ndarray | float, c: np.ndarray | float) -> np.ndarray:
    """E[erf(u) erf(v)] = (2/pi) arcsin(2 q12 / sqrt((1 + 2 q1)(1 + 2 q2))), q12 = c sqrt(q1 q2) (Williams 1997)."""
    q1, q2, c = (np.asarray(a, dtype=float) for a in (q1, q2, c))
    q12 = c * np.sqrt(q1 * q2)
    return 2 / np.pi * np.arcsin(2 * q12 / np.sqrt((1 + 2 * q1) * (1 + 2 * q2)))


_CLOSED = {"relu": relu_expectation, "erf": erf_expectation}


def nngp_kernel(X: np.ndarray, *, depth: int = 1, activation: str | Callable[[np.ndarray], np.ndarray] = "relu",
                sigma_w2: float = 2.0, sigma_b2: float = 0.0, n_quad: int = 64) -> np.ndarray:
    """Infinite-width NNGP kernel of a depth-L fully connected network on the rows of X (n, d).

    K^0 = sigma_w2 X X^T / d + sigma_b2;  K^{l+1}_ij = sigma_w2 E[phi(u_i) phi(u_j)] + sigma_b2 with
    u ~ N(0, K^l restricted to {i, j}); closed forms for "relu" and "erf", quadrature for "tanh" or a callable.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or not np.isfinite(X).all():
        raise ValueError("X must be a finite 2-D array (n, d)")
    if not isinstance(depth, int) or depth < 0:
        raise ValueError(f"depth must be a non-negative integer, got {depth!r}")
    if sigma_w2 <= 0 or sigma_b2 < 0:
        raise ValueError("sigma_w2 must be positive and sigma_b2 non-negative")
    if isinstance(activation, str):
        if activation == "tanh":
            expect = lambda a, b, c: gaussian_expectation(np.tanh, a, b, c, n_quad=n_quad)  # noqa: E731
        elif activation in _CLOSED:
            expect = _CLOSED[activation]
        else:
            raise ValueError(f"unknown activation {activation!r}; use 'relu', 'erf', 'tanh' or a callable")
    else:
        expect = lambda a, b, c: gaussian_expectation(activation, a, b, c, n_quad=n_quad)  # noqa: E731
    K = sigma_w2 * X @ X.T / X.shape[1] + sigma_b2
    for _ in range(depth):
        q = np.diag(K).copy()
        denom = np.sqrt(np.outer(q, q))
        c = np.divide(K, denom, out=np.zeros_like(K), where=denom > 0)
        K = sigma_w2 * expect(q[:, None], q[None, :], c) + sigma_b2
    return K
