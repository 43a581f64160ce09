"""Task-relevant information measures and the closed-form self-consuming chains [A05].

- ``discrete_mutual_information(joint)``: I(A; B) = sum p(a,b) log p(a,b) / (p(a) p(b)) in nats, exact for a
  joint table.
- Gaussian mean task (known noise): the task is mu ~ N(0, tau^2 I_d); the real data are n_0 draws of N(mu, sigma^2 I)
  and m_0 is their mean. In the closed loop each generation draws n points from N(m_t, sigma^2 I) and refits the
  mean, so m_t = mu + e_0 + ... + e_t with Var(m_t - mu) = sigma^2 (1/n_0 + t/n) per coordinate, and

      I(mu; m_t) = (d/2) log(1 + tau^2 / (sigma^2 (1/n_0 + t/n)))          (strictly decreasing in t)

  ``gaussian_information_estimate`` is the plug-in estimate -1/2 log(1 - rho^2) per coordinate from simulated
  paths (exact in the limit for jointly Gaussian (mu, m_t), used for open loops where no closed form exists).
- ``self_consuming_gaussian``: refit (mean, MLE variance) on n own samples: E[s_t^2] = ((n - 1)/n)^t s_0^2.
- ``self_consuming_categorical``: refit a categorical on n own samples: support can only shrink.
"""

from __future__ import annotations

import numpy as np

from icml26.harness import validate as chk


def _seed(seed: int | None) -> int | None:
    return None if seed is None else chk.non_negative_int("seed", seed)


def discrete_mutual_information(joint: np.ndarray) -> float:
    """I(A; B) in nats of a 2D table of joint probabilities (or counts; normalised here)."""
    p = np.asarray(chk.non_empty("joint", chk.ndim("joint", chk.finite("joint", joint), 2)), dtype=float)
    if np.any(p < 0) or p.sum() <= 0:
        raise ValueError("joint must hold non-negative entries with a positive sum (probabilities or counts)")
    p = p / p.sum()
    pa, pb = p.sum(1, keepdims=True), p.sum(0, keepdims=True)
    nz = p > 0
    return float(np.sum(p[nz] * np.log(p[nz] / (pa @ pb)[nz])))


def entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    """Shannon entropy in nats along ``axis`` of probability vectors (entries in [0, 1] summing to 1 there)."""
    p = np.asarray(chk.non_empty("p", chk.finite("p", p)), dtype=float)
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool) or not -max(p.ndim, 1) <= axis < max(p.ndim, 1):
        raise ValueError(f"axis must be an integer axis of p (ndim {p.ndim}), got {axis!r}")
    chk.probability_vector("p", np.moveaxis(p, axis, -1) if p.ndim else p[None])
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=axis)


def closed_loop_gaussian_information(tau2: float, sigma2: float, n0: int, n: int, t: int | np.ndarray,
                                     d: int = 1) -> np.ndarray:
    """Exact I(mu; m_t) (nats) of the closed Gaussian-mean loop (see the module docstring)."""
    chk.positive("tau2", tau2)
    chk.positive("sigma2", sigma2)
    chk.positive_int("n0", n0)
    chk.positive_int("n", n)
    chk.positive_int("d", d)
    t = np.asarray(chk.finite("t", np.atleast_1d(t) if np.ndim(t) == 0 else t), dtype=float).reshape(np.shape(t))
    if np.any(t < 0):
        raise ValueError(f"t (generations) must be >= 0, got a minimum of {t.min():g}")
    return 0.5 * d * np.log1p(tau2 / (sigma2 * (1.0 / n0 + t / n)))


def gaussian_information_estimate(mu: np.ndarray, m: np.ndarray) -> float:
    """Plug-in I(mu; m) = -d/2 log(1 - rho^2) from paths (P, d), rho pooled over coordinates (nats)."""
    mu, m = np.asarray(chk.finite("mu", mu), float), np.asarray(chk.finite("m", m), float)
    if mu.shape != m.shape or mu.ndim != 2 or len(mu) < 3:
        raise ValueError(f"mu and m must be (paths >= 3, d) arrays of one shape, got {mu.shape} and {m.shape}")
    a, b = mu - mu.mean(0), m - m.mean(0)
    rho2 = np.clip(np.sum(a * b) ** 2 / (np.sum(a * a) * np.sum(b * b)), 0.0, 1 - 1e-12)
    return float(-0.5 * mu.shape[1] * np.log1p(-rho2))


def gaussian_kl(mu: np.ndarray, sigma2: float, m: np.ndarray, v: np.ndarray | float) -> np.ndarray:
    """KL(N(mu, sigma^2 I) || N(m, v I)) per path, for (P, d) means (the model's quality on the truth)."""
    mu, m = np.atleast_2d(chk.finite("mu", mu)), np.atleast_2d(chk.finite("m", m))
    if mu.shape != m.shape or mu.ndim != 2:
        raise ValueError(f"mu and m must be (paths, d) arrays of one shape, got {mu.shape} and {m.shape}")
    sigma2 = chk.positive("sigma2", sigma2)
    v = np.asarray(chk.finite("v", np.atleast_1d(v)), dtype=float)
    if np.any(v <= 0):
        raise ValueError(f"v (the model's variance) must be > 0, got a minimum of {v.min():g}")
    if v.size > 1:
        chk.shape("v", v, (mu.shape[0],))
    else:
        v = v.reshape(())
    d = mu.shape[1]
    r = sigma2 / v
    return 0.5 * d * (r - 1 - np.log(r)) + np.sum((mu - m) ** 2, axis=1) / (2 * v)


def self_consuming_gaussian(mu: float, sigma: float, n: int, rounds: int, seed: int | None = None,
                            paths: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Means and MLE standard deviations (rounds + 1, paths) of Gaussians refitted on n own samples each round."""
    chk.finite_number("mu", mu)
    chk.positive("sigma", sigma)
    chk.positive_int("n", n, minimum=2)
    chk.non_negative_int("rounds", rounds)
    paths = chk.positive_int("paths", paths)
    rng = np.random.default_rng(_seed(seed))
    m, s = np.full(paths, float(mu)), np.full(paths, float(sigma))
    ms, ss = [m], [s]
    for _ in range(rounds):
        x = m[:, None] + s[:, None] * rng.standard_normal((paths, n))
        m, s = x.mean(1), x.std(1)
        ms.append(m)
        ss.append(s)
    return np.array(ms), np.array(ss)


def self_consuming_categorical(p0: np.ndarray, n: int, rounds: int, seed: int | None = None, paths: int = 1
                               ) -> np.ndarray:
    """Categoricals (rounds + 1, paths, K) refitted (empirical frequencies) on n own samples each round."""
    p0 = np.asarray(chk.probability_vector("p0", chk.ndim("p0", p0, 1)), dtype=float)
    chk.positive_int("n", n)
    chk.non_negative_int("rounds", rounds)
    paths = chk.positive_int("paths", paths)
    rng = np.random.default_rng(_seed(seed))
    p = np.tile(p0, (paths, 1))
    out = [p]
    for _ in range(rounds):
        p = rng.multinomial(n, p) / n
        out.append(p)
    return np.array(out)
