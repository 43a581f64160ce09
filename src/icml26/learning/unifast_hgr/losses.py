"""UniFast-HGR and OptFast-HGR [A17], and the baselines they are measured against.

Notation: a local batch of paired features F, G in R^{m x K} (m samples, K feature dimensions).

HGR maximal correlation asks for features f(X), g(Y) with maximal E[f^T g] under whitening constraints.
Two classical finite-sample surrogates:

    Soft-HGR (Wang et al., AAAI 2019):   H_soft = E[f^T g] - 1/2 tr(Sigma_f Sigma_g)        O(m K^2) time, K^2 memory
    whitened HGR / DCCA (Andrew 2013):  H_cca  = sum_k sigma_k(Sigma_ff^-1/2 Sigma_fg Sigma_gg^-1/2)   O(m K^2 + K^3)

Both baselines also have a batch (Gram, "dual") form whose cost is linear in K (``form="gram"``):
    tr(Sigma_f Sigma_g) = ||F0 G0^T||_F^2 / (m-1)^2                                             O(m^2 K)
    canonical correlations depend on the data only through K_f = F0 F0^T and K_g = G0 G0^T (linear-kernel
    CCA): with any X_f X_f^T = K_f (we take the Cholesky factor), they are those of the m-column data X_f, X_g.
                                                                                               O(m^2 K + m^3)
These are the honest fast baselines for UniFast-HGR's cost claims.

UniFast-HGR [A17] (our reconstruction, see README) keeps Soft-HGR's target but works in batch (Gram) space:

    1. centre over the batch:            F_bar = F - 1 mean(F)
    2. l2-normalise each row:            f_hat_i = f_bar_i / max(||f_bar_i||, eps)
    3. cross Gram of cosines:            S = F_hat G_hat^T                          (m x m)
    4. alignment:                        A = tr(S) / m
    5. structural term, Gram form:       ||S||_F^2 = tr(F_hat^T F_hat G_hat^T G_hat) (Soft-HGR's trace term, O(m^2 K))
       Trivial Spectrum Suppression:     R = (||S||_F^2 - sum_i S_ii^2) / (m (m - 1))
    6. score                             H = A - (lam / 2) R,   loss = -H,  H in [-1.5, 1] for lam = 1

OptFast-HGR [A17] replaces ||S||_F^2 by the Hutchinson estimate (1/s) ||F_hat (G_hat^T Omega)||_F^2 with
Rademacher probes Omega in {+-1}^{m x s}: unbiased, O(m K s) time, no m x m matrix.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as fn
from torch import Tensor, nn

from icml26.harness import validate as v

Penalty = Literal["cross", "within"]
_PENALTIES = ("cross", "within")
Form = Literal["covariance", "gram"]
_FORMS = ("covariance", "gram")
GramDtype = Literal["float64", "input"]
_GRAM_DTYPES = ("float64", "input")
#: jitter of the input-dtype Gram, relative to its mean diagonal: above float32 round-off of a K-long dot product
GRAM_INPUT_JITTER = 1e-5

# helper functions


def _check_pair(f: Tensor, g: Tensor, *, same_dim: bool = True) -> None:
    """Validate a pair of feature batches before any work (raises TypeError / ValueError)."""
    for name, x in (("f", f), ("g", g)):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape (m, K), got {type(x).__name__}")
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}; cast with .float()")
        if x.ndim != 2:
            raise ValueError(
                f"{name} must be 2-D (batch m, features K), got shape {tuple(x.shape)}; "
                "use x.unsqueeze(1) for scalar features or x.flatten(1) for feature maps"
            )
    if f.dtype != g.dtype:
        raise TypeError(f"f and g must share a dtype, got {f.dtype} and {g.dtype}")
    if f.shape[0] != g.shape[0]:
        raise ValueError(f"f and g must hold the same number of paired samples, got {f.shape[0]} and {g.shape[0]}")
    if same_dim and f.shape[1] != g.shape[1]:
        raise ValueError(
            f"f and g must have the same feature dimension K, got {f.shape[1]} and {g.shape[1]}; "
            "add a linear projection head to one of them"
        )
    if f.shape[0] < 2:
        raise ValueError(f"need a batch of at least 2 paired samples (centring and the off-diagonal term), got {f.shape[0]}")
    if f.shape[1] < 1:
        raise ValueError("feature dimension K must be at least 1")
    if not (bool(torch.isfinite(f).all()) and bool(torch.isfinite(g).all())):
        raise ValueError("f and g must be finite; found NaN or inf (check the encoder's outputs)")


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")


def _check_generator(generator: object) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")


def _check_ridge(ridge: object) -> None:
    if not _is_number(ridge) or not ridge > 0:
        raise ValueError(f"ridge must be a finite positive number (whitening needs it when K >= m), got {ridge!r}")


def _check_tau(tau: object) -> None:
    if not _is_number(tau) or not tau > 0:
        raise ValueError(f"tau must be a finite positive temperature, got {tau!r}")


def _check_options(lam: float, penalty: str, center: object = True, tss: object = True) -> None:
    if not _is_number(lam) or not lam >= 0:
        raise ValueError(f"lam must be a finite non-negative number, got {lam!r}")
    _check_flag("center", center)
    _check_flag("tss", tss)
    if penalty not in _PENALTIES:
        raise ValueError(f"unknown penalty {penalty!r}; choose 'cross' (Soft-HGR's term) or 'within'")


def _check_min_features(f: Tensor) -> None:
    """Cosine features need K >= 2: with one feature every normalised row is +-1, so the score is piecewise
    constant and its gradient is exactly zero."""
    if f.shape[1] < 2:
        raise ValueError(
            f"UniFast/OptFast-HGR need feature dimension K >= 2, got K={f.shape[1]}: with one feature each "
            "l2-normalised row is +-1, so the score is constant and every gradient is exactly zero; use K >= 2 "
            "(or soft_hgr for scalar features)"
        )


def _check_form(form: object) -> None:
    if form not in _FORMS:
        raise ValueError(f"unknown form {form!r}; choose 'covariance' (K x K, O(m K^2)) or 'gram' (m x m, O(m^2 K))")


def _check_gram_dtype(gram_dtype: object) -> None:
    if gram_dtype not in _GRAM_DTYPES:
        raise ValueError(f"unknown gram_dtype {gram_dtype!r}; choose 'float64' (K-long Gram matmul in float64) or "
                         "'input' (matmul in the input dtype, m x m Cholesky in float64)")


def _check_positive_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def cosine_features(x: Tensor, *, center: bool = True, eps: float = 1e-8) -> Tensor:
    """Steps 1-2 of [A17]: centre over the batch (optional), then l2-normalise each row.

    f_hat_i = (f_i - mean_j f_j) / max(||f_i - mean_j f_j||, eps).
    """
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor of shape (m, K), got {v.describe(x)}")
    v.ndim("x", x, 2)
    v.non_empty("x", x)
    v.finite("x", x)
    _check_flag("center", center)
    v.positive("eps", eps)
    return _cosine_features(x, center=center, eps=eps)


def _cosine_features(x: Tensor, *, center: bool = True, eps: float = 1e-8) -> Tensor:
    """cosine_features without the argument checks (the scores have checked f and g already)."""
    if center:
        x = x - x.mean(dim=0, keepdim=True)
    return x / x.norm(dim=1, keepdim=True).clamp_min(eps)


def _score(align: Tensor, total: Tensor, diag: Tensor, m: int, lam: float, tss: bool) -> Tensor:
    """H = A - lam/2 R, with R the off-diagonal (TSS) or full mean of the squared structural entries."""
    r = (total - diag) / (m * (m - 1)) if tss else total / (m * m)
    return align.mean() - 0.5 * lam * r


# main functions


def unifast_hgr(
    f: Tensor, g: Tensor, *, lam: float = 1.0, center: bool = True, tss: bool = True, penalty: Penalty = "cross"
) -> Tensor:
    """UniFast-HGR score H = A - (lam/2) R of a paired batch [A17]; maximise it (the loss is -H).

    A = tr(S)/m with S = F_hat G_hat^T the m x m cross Gram of (centred) cosine features;
    R = (||S||_F^2 - sum_i S_ii^2) / (m(m-1))  (penalty="cross": Soft-HGR's tr(Sigma_f Sigma_g) in Gram form,
    trivial diagonal removed by TSS), or R = sum_{i!=j} (F_hat F_hat^T)_ij (G_hat G_hat^T)_ij / (m(m-1))
    (penalty="within"). tss=False keeps the diagonal and divides by m^2. Cost O(m^2 K), memory O(m^2 + mK).

    Args:
        f, g: paired features, shape (m, K), m >= 2, K >= 2 (K = 1 has zero gradient and raises).
        lam: weight of the structural term (1.0 reproduces Soft-HGR's 1/2).
        center: centre over the batch before normalising (False: the ICLR version's simplified normalisation).
        tss: Trivial Spectrum Suppression (drop the diagonal of the structural term).
        penalty: "cross" or "within", see above.
    """
    _check_pair(f, g)
    _check_min_features(f)
    _check_options(lam, penalty, center, tss)
    fh, gh = _cosine_features(f, center=center), _cosine_features(g, center=center)
    align = (fh * gh).sum(dim=1)  # S_ii, O(mK)
    if penalty == "cross":
        total = (fh @ gh.T).square().sum()  # ||F_hat G_hat^T||_F^2, O(m^2 K)
        diag = align.square().sum()
    else:
        total = ((fh @ fh.T) * (gh @ gh.T)).sum()  # = ||F_hat^T G_hat||_F^2, O(m^2 K)
        diag = (fh.square().sum(dim=1) * gh.square().sum(dim=1)).sum()
    return _score(align, total, diag, f.shape[0], lam, tss)


def rademacher_probes(
    rows: int, num_probes: int, *, like: Tensor, generator: torch.Generator | None = None
) -> Tensor:
    """Omega in {-1, +1}^{rows x num_probes} with E[Omega Omega^T] = num_probes * I (Hutchinson probes)."""
    _check_positive_int("rows", rows)
    _check_positive_int("num_probes", num_probes)
    if not isinstance(like, Tensor) or not like.is_floating_point():
        raise TypeError(f"like must be a floating-point torch.Tensor (its dtype and device are used), "
                        f"got {v.describe(like)}")
    _check_generator(generator)
    bits = torch.randint(0, 2, (rows, num_probes), generator=generator, device=like.device)
    return bits.to(like.dtype).mul_(2).sub_(1)


def optfast_hgr(
    f: Tensor,
    g: Tensor,
    *,
    num_probes: int = 32,
    generator: torch.Generator | None = None,
    lam: float = 1.0,
    center: bool = True,
    tss: bool = True,
    penalty: Penalty = "cross",
) -> Tensor:
    """OptFast-HGR score [A17]: UniFast-HGR with the structural term estimated by stochastic projection.

    penalty="cross": ||S||_F^2 ~ (1/s) ||F_hat (G_hat^T Omega)||_F^2, Omega in {+-1}^{m x s}.
    penalty="within": ||F_hat^T G_hat||_F^2 ~ (1/s) ||F_hat^T (G_hat Omega)||_F^2, Omega in {+-1}^{K x s}.
    Both are unbiased (E[Omega Omega^T] = s I); the diagonal sum_i S_ii^2 is exact (row-wise dots).
    Cost O(m K s), memory O((m + K) s); no m x m or K x K matrix. Fresh probes every call unless a
    seeded `generator` is passed.
    """
    _check_pair(f, g)
    _check_min_features(f)
    _check_options(lam, penalty, center, tss)
    _check_positive_int("num_probes", num_probes)
    _check_generator(generator)
    fh, gh = _cosine_features(f, center=center), _cosine_features(g, center=center)
    align = (fh * gh).sum(dim=1)
    if penalty == "cross":
        omega = rademacher_probes(f.shape[0], num_probes, like=f, generator=generator)
        total = (fh @ (gh.T @ omega)).square().sum() / num_probes
        diag = align.square().sum()
    else:
        omega = rademacher_probes(f.shape[1], num_probes, like=f, generator=generator)
        total = (fh.T @ (gh @ omega)).square().sum() / num_probes
        diag = (fh.square().sum(dim=1) * gh.square().sum(dim=1)).sum()
    return _score(align, total, diag, f.shape[0], lam, tss)


# baselines


def soft_hgr(f: Tensor, g: Tensor, *, form: Form = "covariance") -> Tensor:
    """Soft-HGR score (Wang et al., AAAI 2019): mean_i f0_i^T g0_i - 1/2 tr(Sigma_f Sigma_g).

    f0, g0 are batch-centred; Sigma = f0^T f0 / (m - 1).
    form="covariance": tr(Sigma_f Sigma_g) = sum(Sigma_f * Sigma_g) (both symmetric), O(m K^2) time, O(K^2) memory.
    form="gram": the same number as ||F0 G0^T||_F^2 / (m-1)^2 (the m x m cross Gram), O(m^2 K) time, O(m^2) memory.
    """
    _check_pair(f, g)
    _check_form(form)
    m = f.shape[0]
    f0, g0 = f - f.mean(dim=0, keepdim=True), g - g.mean(dim=0, keepdim=True)
    corr = (f0 * g0).sum(dim=1).mean()
    if form == "gram":  # tr(F0^T F0 G0^T G0) = ||F0 G0^T||_F^2 (not <F0 F0^T, G0 G0^T> = ||F0^T G0||_F^2)
        return corr - 0.5 * (f0 @ g0.T).square().sum() / (m - 1) ** 2
    cov_f, cov_g = f0.T @ f0 / (m - 1), g0.T @ g0 / (m - 1)
    return corr - 0.5 * (cov_f * cov_g).sum()


class _InvSqrtm(torch.autograd.Function):
    """A^{-1/2} of a symmetric positive-definite A via eigh, with a backward that stays finite at repeated
    eigenvalues (Daleckii-Krein divided differences; torch's eigh backward divides by lambda_i - lambda_j and
    blows up when K > m leaves many eigenvalues equal to the ridge)."""

    @staticmethod
    def forward(ctx, a: Tensor, floor: float) -> Tensor:  # type: ignore[override]
        lam, v = torch.linalg.eigh(a)
        lam = lam.clamp_min(floor)
        ctx.save_for_backward(lam, v)
        return (v * lam.rsqrt()) @ v.T

    @staticmethod
    def backward(ctx, gy: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        lam, v = ctx.saved_tensors
        s = lam.sqrt()
        # (l_i^-1/2 - l_j^-1/2) / (l_i - l_j) = -1 / (s_i s_j (s_i + s_j)); equals f'(l) = -l^{-3/2}/2 at i = j.
        dd = -1.0 / (s[:, None] * s[None, :] * (s[:, None] + s[None, :]))
        gbar = v.T @ (0.5 * (gy + gy.T)) @ v
        return v @ (gbar * dd) @ v.T, None


def _cca_of_rows(x: Tensor, y: Tensor, ridge: float, r: int) -> Tensor:
    """Top r singular values of Sxx^-1/2 Sxy Syy^-1/2 for already-centred rows x (m x p), y (m x q)."""
    m = x.shape[0]
    eye_x = torch.eye(x.shape[1], dtype=x.dtype, device=x.device)
    eye_y = torch.eye(y.shape[1], dtype=y.dtype, device=y.device)
    sxx = x.T @ x / (m - 1) + ridge * eye_x
    syy = y.T @ y / (m - 1) + ridge * eye_y
    sxy = x.T @ y / (m - 1)
    t = _InvSqrtm.apply(sxx, ridge) @ sxy @ _InvSqrtm.apply(syy, ridge)
    eig = torch.linalg.eigvalsh(t.T @ t).flip(0)[:r]  # eigvalsh has stable gradients at repeated values
    return eig.clamp_min(torch.finfo(eig.dtype).eps).sqrt()


def _gram_rows(x0: Tensor, ridge: float, gram_dtype: GramDtype = "float64") -> Tensor:
    """An m x m matrix L (float64) with L L^T = x0 x0^T + jitter, when K > m; for K <= m, x0 itself (in float64),
    whose rows already have the right Gram.

    Linear-kernel CCA sees the data only through x0 x0^T, so L's rows stand in for x0's. The jitter makes the
    centred (rank <= m-1) Gram positive definite.

    gram_dtype="float64": the K-long Gram matmul in float64 (~2x a float32 matmul), jitter eps I with
    eps = 1e-6 (m-1) ridge; it adds a spurious canonical correlation of about eps / (eps + (m-1) ridge) = 1e-6
    along the all-ones direction, below every correlation that is kept.

    gram_dtype="input": the K-long matmul in the input dtype (float32: the fast way), the m x m Gram cast to float64
    and double-centred there (removing the input-dtype round-off along the all-ones direction, which the centred
    Gram must annihilate), then jitter eps = GRAM_INPUT_JITTER x mean diagonal on the complement of the all-ones
    direction (above float32 round-off, which a ridge-sized jitter is not at large K) and 1e-6 (m-1) ridge along
    it, and the Cholesky in float64. The relative jitter adds eps / (m-1) to the ridge in the Gram's eigenbasis: it
    agrees with the float64 form when the centred Gram has full rank m-1 with eigenvalues well above eps (random
    features, K = 4096 and 65536: ~1e-7 in value, ~2e-5 in gradient, tested). It does not for rank-deficient
    features (rank < m-1 with K > m): each null direction gets a canonical correlation near eps / (eps + (m-1) ridge),
    close to 1 once the features' scale is large, so use "float64" there (a float32 Gram cannot resolve a
    ridge-sized eigenvalue at large K).
    """
    m = x0.shape[0]
    if x0.shape[1] <= m:  # x0 itself already satisfies X X^T = x0 x0^T with <= m columns: no factor needed
        return x0.double()
    if gram_dtype == "input":
        gram = (x0 @ x0.T).double()
        gram = gram - gram.mean(dim=0, keepdim=True)
        gram = gram - gram.mean(dim=1, keepdim=True)  # P K P, P = I - 11^T/m: exact in exact arithmetic
        eps = GRAM_INPUT_JITTER * gram.diagonal().mean()
        delta = 1e-6 * (m - 1) * ridge
        eye = torch.eye(m, dtype=gram.dtype, device=gram.device)
        ones = torch.full((m, m), 1.0 / m, dtype=gram.dtype, device=gram.device)
        return torch.linalg.cholesky(gram + eps * (eye - ones) + delta * ones)
    xd = x0.double()
    gram = xd @ xd.T
    eps = 1e-6 * (m - 1) * ridge
    return torch.linalg.cholesky(gram + eps * torch.eye(m, dtype=gram.dtype, device=gram.device))


def canonical_correlations(f: Tensor, g: Tensor, *, ridge: float = 1e-3, form: Form = "covariance",
                           gram_dtype: GramDtype = "float64") -> Tensor:
    """Batch canonical correlations: the top r = min(K_f, K_g, m - 1) singular values of
    T = Sigma_ff^-1/2 Sigma_fg Sigma_gg^-1/2, descending (the rest are 0: centred data has rank <= m - 1).

    Sigma_ff = f0^T f0/(m-1) + ridge I (likewise g); sigma_k = sqrt(eig_k(T^T T)) as in Andrew et al.'s DCCA
    code. form="covariance": whitening in K x K space, O(m K^2 + K^3) time, O(K^2) memory.
    form="gram": the same correlations from the m x m Grams (dual / linear-kernel CCA; Cholesky rows in
    float64), O(m^2 K + m^3) time, O(m^2 + mK) memory; equal to the covariance form up to ~1e-6.
    gram_dtype (form="gram" only): "float64" forms the K-long Gram matmul in float64; "input" forms it in the
    input dtype (float32: about half the cost) with a jitter relative to the Gram's diagonal (see _gram_rows).
    """
    _check_pair(f, g, same_dim=False)
    _check_form(form)
    _check_ridge(ridge)
    _check_gram_dtype(gram_dtype)
    f0, g0 = f - f.mean(dim=0, keepdim=True), g - g.mean(dim=0, keepdim=True)
    r = min(f.shape[1], g.shape[1], f.shape[0] - 1)
    if form == "gram":
        rows_f, rows_g = _gram_rows(f0, ridge, gram_dtype), _gram_rows(g0, ridge, gram_dtype)
        return _cca_of_rows(rows_f, rows_g, ridge, r).to(f.dtype)
    return _cca_of_rows(f0, g0, ridge, r)


def whitened_hgr(f: Tensor, g: Tensor, *, k: int | None = None, ridge: float = 1e-3,
                 form: Form = "covariance", gram_dtype: GramDtype = "float64") -> Tensor:
    """Whitened HGR / DCCA score (Andrew et al., 2013): the sum of the top-k batch canonical correlations
    (k=None: all of them, i.e. the trace norm of T); ``form`` and ``gram_dtype`` as in
    :func:`canonical_correlations`."""
    if k is not None:
        _check_positive_int("k", k)
        _check_pair(f, g, same_dim=False)
        r = min(f.shape[1], g.shape[1], f.shape[0] - 1)
        if k > r:
            raise ValueError(f"k={k} exceeds the number of batch canonical correlations r = min(K_f, K_g, m - 1) "
                             f"= {r}; use k <= {r} or k=None (all of them)")
    return canonical_correlations(f, g, ridge=ridge, form=form, gram_dtype=gram_dtype)[:k].sum()


def info_nce_loss(f: Tensor, g: Tensor, *, tau: float = 0.1) -> Tensor:
    """Symmetric InfoNCE (CLIP) loss: mean of the cross-entropies of cos(f_i, g_j)/tau over rows and columns."""
    _check_pair(f, g)
    _check_tau(tau)
    logits = fn.normalize(f, dim=1) @ fn.normalize(g, dim=1).T / tau
    labels = torch.arange(f.shape[0], device=f.device)
    return 0.5 * (fn.cross_entropy(logits, labels) + fn.cross_entropy(logits.T, labels))


# loss modules (forward(f, g) -> scalar loss to minimise)


class UniFastHGRLoss(nn.Module):
    """Loss -H of :func:`unifast_hgr` [A17]."""

    def __init__(self, lam: float = 1.0, *, center: bool = True, tss: bool = True, penalty: Penalty = "cross") -> None:
        super().__init__()
        _check_options(lam, penalty, center, tss)
        self.lam, self.center, self.tss, self.penalty = lam, center, tss, penalty

    def forward(self, f: Tensor, g: Tensor) -> Tensor:
        return -unifast_hgr(f, g, lam=self.lam, center=self.center, tss=self.tss, penalty=self.penalty)

    def extra_repr(self) -> str:
        return f"lam={self.lam}, center={self.center}, tss={self.tss}, penalty={self.penalty!r}"


class OptFastHGRLoss(nn.Module):
    """Loss -H of :func:`optfast_hgr` [A17]; fresh Rademacher probes each call (from `generator` if given)."""

    def __init__(
        self,
        num_probes: int = 32,
        lam: float = 1.0,
        *,
        center: bool = True,
        tss: bool = True,
        penalty: Penalty = "cross",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        _check_positive_int("num_probes", num_probes)
        _check_options(lam, penalty, center, tss)
        _check_generator(generator)
        self.num_probes, self.lam, self.center, self.tss, self.penalty = num_probes, lam, center, tss, penalty
        self.generator = generator

    def forward(self, f: Tensor, g: Tensor) -> Tensor:
        return -optfast_hgr(f, g, num_probes=self.num_probes, generator=self.generator, lam=self.lam,
                            center=self.center, tss=self.tss, penalty=self.penalty)

    def extra_repr(self) -> str:
        return f"num_probes={self.num_probes}, lam={self.lam}, center={self.center}, tss={self.tss}, penalty={self.penalty!r}"


class SoftHGRLoss(nn.Module):
    """Loss -H_soft of :func:`soft_hgr` (Wang et al., AAAI 2019); form="gram" is the O(m^2 K) batch form."""

    def __init__(self, *, form: Form = "covariance") -> None:
        super().__init__()
        _check_form(form)
        self.form = form

    def forward(self, f: Tensor, g: Tensor) -> Tensor:
        return -soft_hgr(f, g, form=self.form)

    def extra_repr(self) -> str:
        return f"form={self.form!r}"


class DCCALoss(nn.Module):
    """Loss -(sum of top-k canonical correlations) of :func:`whitened_hgr` (deep CCA, Andrew et al., 2013);
    ``gram_dtype="input"`` (with form="gram") forms the Gram matmul in the input dtype."""

    def __init__(self, k: int | None = None, ridge: float = 1e-3, *, form: Form = "covariance",
                 gram_dtype: GramDtype = "float64") -> None:
        super().__init__()
        if k is not None:
            _check_positive_int("k", k)
        _check_ridge(ridge)
        _check_form(form)
        _check_gram_dtype(gram_dtype)
        self.k, self.ridge, self.form, self.gram_dtype = k, ridge, form, gram_dtype

    def forward(self, f: Tensor, g: Tensor) -> Tensor:
        return -whitened_hgr(f, g, k=self.k, ridge=self.ridge, form=self.form, gram_dtype=self.gram_dtype)

    def extra_repr(self) -> str:
        return f"k={self.k}, ridge={self.ridge}, form={self.form!r}, gram_dtype={self.gram_dtype!r}"


class InfoNCELoss(nn.Module):
    """Symmetric InfoNCE loss of :func:`info_nce_loss`."""

    def __init__(self, tau: float = 0.1) -> None:
        super().__init__()
        _check_tau(tau)
        self.tau = tau

    def forward(self, f: Tensor, g: Tensor) -> Tensor:
        return info_nce_loss(f, g, tau=self.tau)

    def extra_repr(self) -> str:
        return f"tau={self.tau}"
