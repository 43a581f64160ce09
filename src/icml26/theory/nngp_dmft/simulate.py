"""Exact finite-size simulation of gradient flow on kernel eigen-features [A02], for checking the DMFT.

Per draw: Psi (P x N) with Psi_{mu k} = sqrt(lambda_k) g_{mu k}, g ~ N(0, 1); y = Psi w* + eps. With the thin SVD
Psi / sqrt(P) = U S V^T, Sigma_hat = V S^2 V^T, and any f(Sigma_hat) v = V f(S^2) V^T v + f(0) (v - V V^T v). The
linear dynamics are solved in closed form (no time stepping):

    Delta(t) = e^{-(Sigma_hat+gamma) t} (-w*) + (Sigma_hat+gamma)^-1 (1 - e^{-(Sigma_hat+gamma) t}) (-gamma w* + b)
    b = Psi^T eps / P,  E_g(t) = sum_k lambda_k Delta_k(t)^2

(for gamma = 0 the null-space part of the second term is t (-gamma w* + b) = 0 since b lies in the row space).
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from icml26.harness import validate as v

from .theory import _check_nonneg, _check_P, _check_spectrum, _check_times

__all__ = ["draw_problem", "simulate_run", "sample_langevin_error", "simulate_generalization_curve",
           "ridge_weights", "gp_posterior_error"]


def _check_rng(rng: np.random.Generator | int) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(v.non_negative_int("rng (a seed)", rng))
    raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)) or an integer seed, "
                    f"got {v.describe(rng)}")


def _check_data(Psi: np.ndarray, y: np.ndarray, w_star: np.ndarray | None = None, lam: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Psi (P >= 1, N) finite, y (P,) finite and w* (N,) finite, with N = len(lam) when given."""
    N = None if lam is None else len(lam)
    Psi = np.asarray(v.shape("Psi", v.ndim("Psi", v.finite("Psi", Psi), 2), (None, N)), dtype=float)
    if Psi.shape[0] == 0 or Psi.shape[1] == 0:
        raise ValueError(f"Psi must have at least one row (sample) and one column (mode), got shape {Psi.shape}")
    y = np.asarray(v.shape("y", v.finite("y", y), (Psi.shape[0],)), dtype=float)
    if w_star is not None:
        w_star = np.asarray(v.shape("w_star", v.finite("w_star", w_star), (Psi.shape[1],)), dtype=float)
    return Psi, y, w_star


def draw_problem(lam: np.ndarray, w2: np.ndarray, P: int, sigma2: float, rng: np.random.Generator,
                 *, teacher_signs: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Psi (P, N), y (P,), w* (N,)): Gaussian features with covariance diag(lambda), a teacher with |w*_k| =
    sqrt(w2_k) (random signs when ``teacher_signs``), labels with N(0, sigma2) noise."""
    lam, w2 = _check_spectrum(lam, w2)
    P = _check_P(P)
    sigma2 = _check_nonneg("sigma2", sigma2)
    rng = _check_rng(rng)
    w = np.sqrt(w2) * (rng.choice([-1.0, 1.0], size=lam.size) if teacher_signs else 1.0)
    Psi = rng.standard_normal((P, lam.size)) * np.sqrt(lam)
    y = Psi @ w + np.sqrt(sigma2) * rng.standard_normal(P)
    return Psi, y, w


def simulate_run(t: np.ndarray, lam: np.ndarray, Psi: np.ndarray, y: np.ndarray, w_star: np.ndarray,
                 *, weight_decay: float = 0.0, temperature: float = 0.0, per_mode: bool = False) -> np.ndarray:
    """Exact excess test error E_g(t) = (w(t) - w*)^T Sigma (w(t) - w*) of gradient flow from w = 0 on one data
    set, shape (nt,); t may contain np.inf (the converged ridge / minimum-norm solution).

    With ``temperature`` T > 0 (Langevin dw = -(grad L + gamma w) dt + sqrt(2T) dB) the error is averaged exactly
    over the Brownian noise given the data: + T Tr[Sigma (Sigma_hat+gamma)^-1 (1 - e^{-2(Sigma_hat+gamma)t})]
    (t = inf with gamma > 0: the Bayesian posterior). ``sample_langevin_error`` draws actual trajectories.
    ``per_mode=True`` returns the (nt, N) terms lambda_k Delta_k(t)^2 (plus mode k's thermal term) that sum to it."""
    gamma = _check_nonneg("weight_decay", weight_decay)
    temp = _check_nonneg("temperature", temperature)
    t = _check_times(t, allow_zero=True, allow_inf=True)
    lam, _ = _check_spectrum(lam)
    Psi, y, w_star = _check_data(Psi, y, w_star, lam)
    if temp > 0 and gamma == 0 and np.isinf(t).any():
        raise ValueError("Langevin without weight decay has no stationary law (t = inf); pass weight_decay > 0")
    P = Psi.shape[0]
    U, S, Vt = np.linalg.svd(Psi / np.sqrt(P), full_matrices=False)
    mu = S ** 2                                              # nonzero spectrum of Sigma_hat (<= min(P, N))
    b = Psi.T @ (y - Psi @ w_star) / P                       # Psi^T eps / P
    f = -gamma * w_star + b
    w0 = -w_star
    # components in the row space (V) and the orthogonal complement
    w0_v, f_v = Vt @ w0, Vt @ f
    w0_n, f_n = w0 - Vt.T @ w0_v, f - Vt.T @ f_v
    rate = mu + gamma                                        # (r,)
    with np.errstate(over="ignore", invalid="ignore"):
        E = np.exp(-np.outer(t, rate))                       # (nt, r)
        G = np.where(rate > 0, (1 - E) / np.where(rate > 0, rate, 1.0), np.outer(t, np.ones_like(rate)))
    coef = E * w0_v + G * f_v                                # (nt, r)
    if gamma > 0:
        e0, g0 = np.exp(-gamma * t), (1 - np.exp(-gamma * t)) / gamma
    else:
        e0, g0 = np.ones_like(t), np.where(np.isinf(t), 0.0, t)   # f_n = 0 up to round-off when gamma = 0
    delta = coef @ Vt + e0[:, None] * w0_n + g0[:, None] * f_n
    err = delta ** 2 * lam
    if temp > 0:
        with np.errstate(over="ignore", invalid="ignore"):
            h = np.where(rate > 0, (1 - np.exp(-2 * np.outer(t, rate))) / np.where(rate > 0, rate, 1.0),
                         2 * np.outer(t, np.ones_like(rate)))
        h0 = (1 - np.exp(-2 * gamma * t)) / gamma if gamma > 0 else 2 * t
        v2 = Vt ** 2                                         # (r, N)
        err = err + temp * lam * (h @ v2 + h0[:, None] * (1 - v2.sum(0)))
    return err if per_mode else err.sum(1)


def sample_langevin_error(t: float, lam: np.ndarray, Psi: np.ndarray, y: np.ndarray, w_star: np.ndarray, *,
                          weight_decay: float, temperature: float, n_samples: int, rng: np.random.Generator
                          ) -> np.ndarray:
    """E_g(t) of ``n_samples`` Langevin trajectories on one data set, drawn from the exact Ornstein-Uhlenbeck
    transition w(t) ~ N(m(t), T (H)^-1 (1 - e^{-2 H t})), H = Sigma_hat + gamma (dense eigendecomposition; for
    testing on small N)."""
    gamma, temp = _check_nonneg("weight_decay", weight_decay), _check_nonneg("temperature", temperature)
    t = v.non_negative("t", t)
    lam, _ = _check_spectrum(lam)
    Psi, y, w_star = _check_data(Psi, y, w_star, lam)
    n_samples = v.positive_int("n_samples", n_samples)
    rng = _check_rng(rng)
    P, N = Psi.shape
    mu, V = np.linalg.eigh(Psi.T @ Psi / P + gamma * np.eye(N))
    mu = np.maximum(mu, 0.0)
    b = Psi.T @ y / P                                         # dw/dt = -H w + b
    a = V.T @ b
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.where(mu > 0, (1 - np.exp(-mu * t)) / np.where(mu > 0, mu, 1.0), t)
        var = temp * np.where(mu > 0, (1 - np.exp(-2 * mu * t)) / np.where(mu > 0, mu, 1.0), 2 * t)
    mean = V @ (g * a)
    W = mean + (rng.standard_normal((n_samples, N)) * np.sqrt(var)) @ V.T
    return ((W - w_star) ** 2 * lam).sum(1)


def simulate_generalization_curve(t: np.ndarray, lam: np.ndarray, w2: np.ndarray, P: int, *, sigma2: float = 0.0,
                                  weight_decay: float = 0.0, temperature: float = 0.0, n_draws: int = 16,
                                  seed: int = 0) -> np.ndarray:
    """E_g(t) of ``n_draws`` independent data sets (fresh features, labels and teacher signs), shape
    (n_draws, nt); average over axis 0 for the typical curve the DMFT predicts."""
    n_draws = v.positive_int("n_draws", n_draws)
    seed = v.non_negative_int("seed", seed)
    _check_times(t, allow_zero=True, allow_inf=True)
    _check_spectrum(lam, w2)
    _check_P(P)
    for name, value in (("sigma2", sigma2), ("weight_decay", weight_decay), ("temperature", temperature)):
        _check_nonneg(name, value)
    rng = np.random.default_rng(seed)
    out = []
    with threadpool_limits(limits=1):      # one small SVD per draw: BLAS threads only add synchronisation
        for _ in range(int(n_draws)):
            Psi, y, w = draw_problem(lam, w2, P, sigma2, rng)
            out.append(simulate_run(t, lam, Psi, y, w, weight_decay=weight_decay, temperature=temperature))
    return np.array(out)


def ridge_weights(Psi: np.ndarray, y: np.ndarray, ridge: float) -> np.ndarray:
    """argmin_w (1/2P)|Psi w - y|^2 + (ridge/2)|w|^2 = (Sigma_hat + ridge)^-1 Psi^T y / P (the t -> inf limit of
    gradient flow with weight decay ``ridge``), by a P x P solve (kernel form)."""
    Psi, y, _ = _check_data(Psi, y)
    ridge = v.positive("ridge", ridge)
    P = Psi.shape[0]
    alpha = np.linalg.solve(Psi @ Psi.T / P + ridge * np.eye(P), y / P)
    return Psi.T @ alpha


def gp_posterior_error(lam: np.ndarray, Psi: np.ndarray, y: np.ndarray, w_star: np.ndarray, *, weight_decay: float,
                       temperature: float) -> float:
    """Expected excess error of a Bayesian GP posterior sample, by scikit-learn's GaussianProcessRegressor (peer):
    linear kernel k(x, x') = (T/gamma) x.x' (prior w ~ N(0, T/gamma)), noise variance P T, no hyper-parameter
    fitting. Test points sqrt(lambda_k) e_k give sum_k lambda_k [(m_k - w*_k)^2 + Var_k] = (m - w*)^T Sigma (m - w*)
    + Tr[Sigma Cov_post]."""
    weight_decay, temperature = v.positive("weight_decay", weight_decay), v.positive("temperature", temperature)
    lam, _ = _check_spectrum(lam)
    Psi, y, w_star = _check_data(Psi, y, w_star, lam)
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, DotProduct
    P, N = Psi.shape
    kern = ConstantKernel(temperature / weight_decay, "fixed") * DotProduct(0.0, "fixed")
    gp = GaussianProcessRegressor(kern, alpha=P * temperature, optimizer=None, normalize_y=False)
    gp.fit(Psi, y)
    Xt = np.diag(np.sqrt(lam))
    m, sd = gp.predict(Xt, return_std=True)
    return float(((m - np.sqrt(lam) * w_star) ** 2).sum() + (sd ** 2).sum())
