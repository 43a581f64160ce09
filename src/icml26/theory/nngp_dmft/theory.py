"""Mode-wise DMFT of kernel / random-feature regression dynamics on power-law spectra [A02].

Setting (our formulation of the paper's): N kernel eigen-features psi_k(x) with E[psi_k psi_l] = lambda_k delta_kl,
teacher w*, labels y = w* . psi + eps, eps ~ N(0, sigma2), P samples, empirical covariance
Sigma_hat = Psi^T Psi / P. Gradient flow on L = (1/2P) sum_mu (w . psi_mu - y_mu)^2 with weight decay gamma from
w(0) = 0:

    dDelta/dt = -(Sigma_hat + gamma) Delta - gamma w* + Psi^T eps / P,   Delta = w - w*,  Delta(0) = -w*

Laplace transform (z = gamma + s):

    Delta_hat(s) = (Sigma_hat + z)^-1 [ -w* z / s + Psi^T eps / (P s) ]

Excess test error E_g(t) = Delta(t)^T Sigma Delta(t) (label noise sigma2 not added). Its typical value follows
from the deterministic equivalents (Atanasov, Zavatone-Veth & Pehlevan 2024) with the collective response
kappa(z), the renormalised ridge, solving

    kappa (1 - (1/P) sum_k lambda_k / (lambda_k + kappa)) = z                                     (1)
    (Sigma_hat + z)^-1 ~ (kappa / z) (Sigma + kappa)^-1                                             (2)
    z1 z2 (Sigma_hat+z1)^-1 Sigma (Sigma_hat+z2)^-1 ~ k1 k2 (Sigma+k1)^-1 Sigma (Sigma+k2)^-1 / D12   (3)
    D12 = 1 - (1/P) sum_k lambda_k^2 / ((lambda_k + k1)(lambda_k + k2))

so the N eigenmodes evolve independently, coupled only through kappa (the collective response) and D12 (the
common statistics of the effective noise). In Laplace space (our derivation from (1)-(3))

    E_g(s1, s2) = k1 k2 / (s1 s2 D12) sum_k lambda_k w*_k^2 / ((lambda_k + k1)(lambda_k + k2))
                + sigma2 k1 / (P s1 s2 z1) [ sum_k lambda_k/(lambda_k + k1)
                                             - (k2 / D12) sum_k lambda_k / ((lambda_k + k1)(lambda_k + k2)) ]

and E_g(t) is its double inverse Laplace transform at t1 = t2 = t, by a fixed-Talbot rule (Abate & Valko
2004) in each variable. Mode k's own error lambda_k E[Delta_k^2] needs the two-point equivalent of a general
matrix B, z1 z2 (Sigma_hat+z1)^-1 B (Sigma_hat+z2)^-1 ~ k1 k2 R1 [B + Sigma Tr(B Sigma R1 R2) / (P D12)] R2 with
R = (Sigma + kappa)^-1 (B = w* w*^T for the signal, B = 1 for the noise): the collective part lands on mode k in
proportion to lambda_k^2 R1 R2, not with its own signal; summed over k it gives the 1/D12 above. The pairwise sums over
Talbot nodes are matrix products, so the cost is O(M N) for (1) plus one (2M-1) x N x (2M-1) complex matmul
per time. t -> infinity with gamma > 0 gives the ridge deterministic equivalent (``ridge_equivalent``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from icml26.harness import validate as v
from icml26.testbeds.ntk import power_law_spectrum

__all__ = ["PowerLawTask", "renormalized_ridge", "ridge_equivalent", "bayes_limit", "dmft_generalization_curve",
           "gradient_flow_infinite_data", "optimal_stopping_time"]


@dataclass(frozen=True)
class PowerLawTask:
    """lambda_k ∝ k^-a (unit trace) and a teacher with lambda_k w*_k^2 ∝ k^-b (sum lambda w*^2 = 1) [A02].

    ``sigma2`` is the label-noise variance. ``lam`` and ``w2`` give the spectrum and the squared teacher.
    """

    N: int
    a: float = 1.5
    b: float = 2.0
    sigma2: float = 0.05

    def __post_init__(self) -> None:
        v.positive_int("N (number of eigenmodes)", self.N, minimum=2)
        v.positive("a", self.a)
        v.positive("b", self.b)
        v.non_negative("sigma2 (label-noise variance)", self.sigma2)

    @property
    def lam(self) -> np.ndarray:
        return power_law_spectrum(int(self.N), float(self.a), normalize="trace")

    @property
    def w2(self) -> np.ndarray:
        target = power_law_spectrum(int(self.N), float(self.b), normalize="trace")   # lambda_k w*_k^2
        return target / self.lam


# helper functions

def _check_spectrum(lam: np.ndarray, w2: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    lam = np.asarray(v.non_empty("lam", v.ndim("lam", v.finite("lam", lam), 1)), dtype=float)
    if (lam <= 0).any():
        raise ValueError(f"lam must hold positive eigenvalues, got a minimum of {lam.min():g}")
    if w2 is not None:
        w2 = np.asarray(v.shape("w2", v.finite("w2", w2), lam.shape), dtype=float)
        if (w2 < 0).any():
            raise ValueError(f"w2 (squared teacher weights) must be >= 0, got a minimum of {w2.min():g}")
    return lam, w2


def _check_P(P: int) -> int:
    return v.positive_int("P (number of samples)", P)


def _check_nonneg(name: str, value: float) -> float:
    return v.non_negative(name, value)


def _check_times(t: np.ndarray, *, allow_zero: bool, allow_inf: bool = False) -> np.ndarray:
    """A non-empty 1-D array of times: no NaN, > 0 (>= 0 with ``allow_zero``), +inf only with ``allow_inf``."""
    t = np.asarray(v.non_empty("t", v.ndim("t", t, 1)), dtype=float)
    bad = np.isnan(t) | (np.isinf(t) if not allow_inf else np.isneginf(t)) | ((t < 0) if allow_zero else (t <= 0))
    if bad.any():
        want = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"t must hold times {want}{' (np.inf allowed)' if allow_inf else ', finite'}; "
                         f"got {int(bad.sum())} bad entries, e.g. {t[bad][0]!r}")
    return t


def renormalized_ridge(z: np.ndarray | complex, lam: np.ndarray, P: int, *, tol: float = 1e-13,
                       max_iter: int = 200) -> np.ndarray:
    """kappa(z) solving kappa (1 - P^-1 sum_k lambda_k / (lambda_k + kappa)) = z, eq. (1) [A02].

    Vectorised over an array of z (real > 0 or complex off the negative real axis). Newton's method from
    kappa = z + 1 (the physical branch: kappa > 0 for z > 0, Im kappa of the sign of Im z); each step is an
    O(N) reduction per z.
    """
    lam, _ = _check_spectrum(lam)
    P = _check_P(P)
    v.positive("tol", tol)
    max_iter = v.positive_int("max_iter", max_iter)
    if isinstance(z, (str, bytes)) or not np.issubdtype(np.asarray(z).dtype, np.number):
        raise TypeError(f"z must be a number or an array of (complex) numbers, got {v.describe(z)}")
    z = np.asarray(z)
    complex_in = np.iscomplexobj(z)
    zc = z.astype(complex).ravel()
    if not np.isfinite(zc).all():
        raise ValueError("z must be finite")
    if not complex_in and (zc.real <= 0).any():
        raise ValueError("real z must be positive (for z <= 0 kappa sits on the branch cut); pass complex z")
    k = zc + 1.0
    active = np.arange(k.size)
    for _ in range(max_iter):                               # Newton on the rows not yet converged
        ka, za = k[active], zc[active]
        r = lam[None, :] / (lam[None, :] + ka[:, None])     # (n_active, N)
        g = ka * (1 - r.sum(1) / P) - za
        dg = 1 - np.einsum("ij,ij->i", r, r) / P
        step = g / dg
        k[active] = ka - step
        active = active[np.abs(step) > tol * np.maximum(1.0, np.abs(ka))]
        if active.size == 0:
            break
    out = k.reshape(z.shape)
    return out if complex_in else out.real


def ridge_equivalent(lam: np.ndarray, w2: np.ndarray, P: int, ridge: float, sigma2: float = 0.0,
                     *, per_mode: bool = False, self_consistent: bool = True) -> float | np.ndarray:
    """Deterministic-equivalent excess test error of ridge regression with ridge ``ridge`` > 0 [A02 limit]:

        E = [kappa^2 sum_k lambda_k w_k^2 / (lambda_k + kappa)^2 + sigma2 df2 / P] / (1 - df2 / P),
        df2 = sum_k lambda_k^2 / (lambda_k + kappa)^2,  kappa = kappa(ridge)

    (Canatar, Bordelon & Pehlevan 2021; the t -> infinity limit of gradient flow with weight decay = ridge).
    ``self_consistent=False`` is the control with the collective response switched off: kappa = ridge and no
    1 / (1 - df2 / P) factor (every mode sees the bare ridge; label noise still enters as sigma2 df2 / P).
    ``per_mode=True``: mode k's error kappa^2 lambda_k [w_k^2 + lambda_k S / (P (1 - df2/P))] / (lambda_k + kappa)^2
    + sigma2 q_k^2 / (P (1 - df2/P)), S = sum_j lambda_j w_j^2 / (lambda_j + kappa)^2, q = lambda / (lambda + kappa)
    (the renormalisation of the signal lands on each mode in proportion to q_k^2, not to its own signal).
    """
    lam, w2 = _check_spectrum(lam, w2)
    P = _check_P(P)
    ridge, sigma2 = v.positive("ridge", ridge), _check_nonneg("sigma2", sigma2)
    k = float(renormalized_ridge(np.array([ridge]), lam, P)[0]) if self_consistent else float(ridge)
    q = lam / (lam + k)
    df2 = (q * q).sum() / P if self_consistent else 0.0
    # per mode: the signal's collective part (the 1 / (1 - df2) renormalisation) lands on mode k in proportion to
    # lambda_k^2 / (lambda_k + kappa)^2, not to its own signal; the noise term is sigma2 q_k^2 / (P (1 - df2)) exactly
    S = (lam * w2 / (lam + k) ** 2).sum()
    signal = k * k * lam * (w2 + lam * S / (P * (1 - df2)) * self_consistent) / (lam + k) ** 2
    modes = signal + sigma2 * q * q / P / (1 - df2)
    return modes if per_mode else float(modes.sum())


def _talbot(M: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Full fixed-Talbot contour, nodes s (nt, 2M-1) and weights c so that f(t) ~ sum_j c_j F(s_j).

    s(theta) = r theta (cot theta + i), r = 2M / (5t), theta_j = j pi / M, j = -(M-1)..(M-1);
    c_j = (r / 2M) e^{s_j t} (1 + i sigma(theta_j)), sigma = theta + (theta cot theta - 1) cot theta.
    """
    th = np.arange(-(M - 1), M) * np.pi / M
    th_safe = np.where(th == 0, 1.0, th)
    cot = np.cos(th_safe) / np.sin(th_safe)
    tcot = np.where(th == 0, 1.0, th_safe * cot)
    sig = np.where(th == 0, 0.0, th_safe + (tcot - 1) * cot)
    r = 2 * M / (5 * t)[:, None]
    s = r * (tcot + 1j * th)[None, :]
    c = r / (2 * M) * np.exp(s * t[:, None]) * (1 + 1j * sig)[None, :]
    return s, c


def dmft_generalization_curve(t: np.ndarray, lam: np.ndarray, w2: np.ndarray, P: int, *, sigma2: float = 0.0,
                              weight_decay: float = 0.0, temperature: float = 0.0, n_talbot: int = 16,
                              per_mode: bool = False, self_consistent: bool = True) -> np.ndarray:
    """DMFT prediction of the typical excess test error E_g(t) of gradient flow (with weight decay) or Langevin
    dynamics dw = -(grad L + gamma w) dt + sqrt(2T) dB (temperature T > 0) [A02].

    Langevin adds the thermal term, averaged over the Brownian noise,
        T Tr[Sigma (Sigma_hat+gamma)^-1 (1 - e^{-2(Sigma_hat+gamma)t})]  ->  Laplace: (T/s) Tr[Sigma (Sigma_hat + gamma + s/2)^-1]
    with the one-point equivalent Tr[Sigma (Sigma_hat + z)^-1] ~ (kappa/z) sum_k lambda_k/(lambda_k + kappa), inverted
    by a single fixed-Talbot rule.

    Args:
        t: training times (> 0), shape (nt,).
        lam, w2: eigenvalues lambda_k and squared teacher weights w*_k^2, shape (N,).
        P: number of training samples.
        sigma2: label-noise variance; weight_decay: gamma >= 0; temperature: T >= 0 (Langevin).
        n_talbot: M, Talbot nodes per variable (M = 16 and 24 agree to ~1e-8 on our tasks; M > 32 loses digits).
        per_mode: return (nt, N): mode k's error lambda_k E[Delta_k(t)^2] (the two-point equivalent of w* w*^T
            and of the noise, read on the diagonal; see the module docstring); their sum over modes is E_g.
        self_consistent: False switches the DMFT's collective response off (the control of the reproduction):
            kappa(z) = z and D12 = 1, i.e. each mode evolves with the population eigenvalue and sees the label
            noise at rate 1/P with no renormalisation (signal part = population gradient flow).

    Returns E_g(t), shape (nt,) (or (nt, N)). See the module docstring for the equations.
    """
    lam, w2 = _check_spectrum(lam, w2)
    P = _check_P(P)
    sigma2, gamma = _check_nonneg("sigma2", sigma2), _check_nonneg("weight_decay", weight_decay)
    temp = _check_nonneg("temperature", temperature)
    t = _check_times(t, allow_zero=False)                  # t = 0 is sum lambda w^2 (the Talbot rule needs t > 0)
    n_talbot = v.positive_int("n_talbot", n_talbot, minimum=4)
    if n_talbot > 64:
        raise ValueError(f"n_talbot must be an integer in [4, 64], got {n_talbot}")
    # small matrix products per time: extra BLAS threads only add synchronisation (14 s instead of 0.15 s for the
    # README's curve on a loaded 2-core machine), so the solve runs on one thread
    with threadpool_limits(limits=1):
        return _curve(t, lam, w2, P, sigma2, gamma, temp, int(n_talbot), per_mode, self_consistent)


def _curve(t: np.ndarray, lam: np.ndarray, w2: np.ndarray, P: int, sigma2: float, gamma: float, temp: float, M: int,
           per_mode: bool, self_consistent: bool) -> np.ndarray:
    """The fixed-Talbot double inversion of ``dmft_generalization_curve`` (arguments already checked)."""
    s, c = _talbot(M, t)                                   # (nt, 2M-1); node M-1 is theta = 0
    z = s + gamma
    # kappa(conj z) = conj kappa(z): solve on theta >= 0 only
    kh = renormalized_ridge(z[:, M - 1:], lam, P) if self_consistent else z[:, M - 1:]   # (nt, M) complex
    kap = np.concatenate([np.conj(kh[:, :0:-1]), kh], axis=1)
    # the double sum is real and F(conj s1, conj s2) = conj F(s1, s2): the outer variable runs over
    # theta >= 0 with weight 2 (1 at theta = 0) and the real part is taken
    half = np.r_[1.0, 2.0 * np.ones(M - 1)]
    out = []
    for i in range(len(t)):
        A = 1.0 / (lam[None, :] + kap[i][:, None])         # (2M-1, N) inner variable
        Ao = A[M - 1:]                                     # (M, N) outer variable
        ki, zi, si, ci = kap[i], z[i], s[i], c[i]
        ko, zo, so = ki[M - 1:], zi[M - 1:], si[M - 1:]
        co = ci[M - 1:] * half
        cs, cso = ci / si, co / so                         # the 1/s factor of each variable
        D = 1 - ((Ao * lam ** 2) @ A.T) / P if self_consistent else np.ones((M, 2 * M - 1))  # (M, 2M-1)
        if per_mode:
            # the two-point equivalent of a general matrix B (B = w* w*^T for the signal, B = 1 for the noise):
            #   z1 z2 (Sigma_hat+z1)^-1 B (Sigma_hat+z2)^-1 ~ k1 k2 R1 [B + Sigma Tr(B Sigma R1 R2) / (P D12)] R2,
            # R = (Sigma + k)^-1; its (k, k) entry times lambda_k is mode k's error. The collective part
            # (second term) lands on mode k in proportion to lambda_k^2 R1 R2, not spread with the signal.
            u, uo = ci * ki / si, cso * ko
            U = uo[:, None] * u[None, :]                   # (M, 2M-1)
            S = (Ao * (lam * w2)) @ A.T                    # sum_j lam w2 / ((lam+k1)(lam+k2))
            T2 = (Ao * lam) @ A.T                          # sum_j lam / ((lam+k1)(lam+k2))
            coll = 1 / (P * D) if self_consistent else np.zeros_like(D)   # control: no collective part
            sig_mode = (np.einsum("jk,jl,lk->k", Ao, U, A) * lam * w2
                        + np.einsum("jk,jl,lk->k", Ao, U * S * coll, A) * lam ** 2)
            v1 = cso * ko / zo                             # weights of the one-point noise term
            noise_1 = (v1[:, None] * Ao).sum(0) * cs.sum() * lam
            W2 = v1[:, None] * (cs * ki)[None, :]
            noise_2 = (np.einsum("jk,jl,lk->k", Ao, W2, A) * lam
                       + np.einsum("jk,jl,lk->k", Ao, W2 * T2 * coll, A) * lam ** 2)
            modes = sig_mode + sigma2 / P * (noise_1 - noise_2)
            out.append(modes.real)
        else:
            S = (Ao * (lam * w2)) @ A.T                    # sum_k lam w2 / ((lam+k1)(lam+k2))
            T1 = Ao @ lam                                  # sum_k lam / (lam + k1)
            T2 = (Ao * lam) @ A.T                          # sum_k lam / ((lam+k1)(lam+k2))
            F = np.outer(ko, ki) / D * S + sigma2 / P * (ko / zo)[:, None] * (T1[:, None] - ki[None, :] / D * T2)
            out.append((cso[:, None] * cs[None, :] * F).sum().real)
    out = np.array(out)
    if temp > 0:
        zt = gamma + s[:, M - 1:] / 2                      # (nt, M), theta >= 0
        kt = renormalized_ridge(zt, lam, P) if self_consistent else zt
        wt = c[:, M - 1:] * half * temp / s[:, M - 1:] * kt / zt
        if per_mode:
            out = out + (wt[..., None] * lam / (lam + kt[..., None])).sum(1).real
        else:
            out = out + (wt * (lam / (lam + kt[..., None])).sum(-1)).sum(1).real
    return out


def bayes_limit(lam: np.ndarray, w2: np.ndarray, P: int, weight_decay: float, temperature: float,
                sigma2: float = 0.0, *, self_consistent: bool = True) -> float:
    """t -> infinity of Langevin training with gamma, T > 0: the Bayesian GP posterior with likelihood variance
    P T and prior variance T / gamma [A02]. Expected excess error of a posterior sample:

        E_Bayes = E_ridge(gamma) + T (kappa / gamma) sum_k lambda_k / (lambda_k + kappa),   kappa = kappa(gamma)

    (the posterior mean is the ridge estimator; the posterior covariance T (Sigma_hat + gamma)^-1 adds the second
    term through the one-point equivalent). ``self_consistent=False``: kappa = gamma (the control).
    """
    temp = _check_nonneg("temperature", temperature)
    v.positive("weight_decay", weight_decay)                 # gamma = 0: the posterior prior variance T / gamma is infinite
    e = ridge_equivalent(lam, w2, P, weight_decay, sigma2, self_consistent=self_consistent)
    lam = np.asarray(lam, dtype=float)
    k = float(renormalized_ridge(np.array([float(weight_decay)]), lam, P)[0]) if self_consistent else float(weight_decay)
    return float(e + temp * k / weight_decay * (lam / (lam + k)).sum())


def gradient_flow_infinite_data(t: np.ndarray, lam: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """P -> infinity limit: E_g(t) = sum_k lambda_k w*_k^2 exp(-2 lambda_k t) (population gradient flow)."""
    lam, w2 = _check_spectrum(lam, w2)
    t = _check_times(t, allow_zero=True, allow_inf=True)
    return (lam * w2 * np.exp(-2 * np.outer(t, lam))).sum(1)


def optimal_stopping_time(t: np.ndarray, errors: np.ndarray) -> tuple[float, float]:
    """(t_opt, E_opt): the minimum of a test-error curve on the grid t, refined by a parabola in log t
    through the grid minimum and its neighbours (an interior minimum only)."""
    t = _check_times(t, allow_zero=False)
    e = np.asarray(v.shape("errors", v.finite("errors", errors), t.shape), dtype=float)
    if len(t) < 3:
        raise ValueError(f"t and errors need at least 3 points for a parabola, got {len(t)}")
    i = int(np.argmin(e))
    if i == 0 or i == len(t) - 1:
        return float(t[i]), float(e[i])
    x, y = np.log(t[i - 1:i + 2]), e[i - 1:i + 2]
    a2, a1, a0 = np.polyfit(x, y, 2)
    if a2 <= 0:
        return float(t[i]), float(e[i])
    xo = -a1 / (2 * a2)
    return float(np.exp(xo)), float(a0 + a1 * xo + a2 * xo * xo)
