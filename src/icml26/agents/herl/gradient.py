"""[B07] Closed-form gradient-direction check (spec part A): does HeRL's batch gradient point closer to the ideal
distribution than GRPO's at equal batch size N?

Responses are the 2^K rubric patterns y in {0,1}^K (K = 6), r(y) = mean_k y_k. The policy is a softmax over the
2^K patterns with logits z, initialised factorised: pi(y) = prod_k p^{y_k} (1-p)^{1-y_k}, p = 0.35 (P(all met) ~
0.2%). The ideal distribution pi*(y) ∝ pi(y) exp(r(y) / beta), beta = 0.1, and the target direction is

    g* = E_{pi*}[grad_z log pi(y)] = pi* - pi,              while the policy gradient is  grad_z J = pi ⊙ (r - J).

GRPO's batch estimate: g_hat = (1/N) sum_i A_i (e_{y_i} - pi), A_i = (r_i - mean) / (std + eps).
HeRL: in a batch whose best reward is < 1, every best-reward response is revised (each unmet rubric fixed w.p.
0.8, each met one kept w.p. 0.95); the best revision with r' > max_i r_i replaces a random slot; revised
candidates get the bonus r_c += alpha (r'_c - r_c); advantages over the modified batch; a hindsight sample enters
with weight f'(1) = gamma / (1 + gamma)^2 (the gradient of -A f(rho), f = rho / (rho + gamma), at rho = 1).
A batch whose g_hat is 0 (all rewards equal) has cosine 0.
"""

from __future__ import annotations

import numpy as np

from icml26.harness import validate as v


def patterns(k: int) -> np.ndarray:
    """All 2^k binary rubric patterns, ``[2^k, k]`` (row index = the pattern read as a binary number)."""
    return ((np.arange(2 ** k)[:, None] >> np.arange(k)[None, :]) & 1).astype(np.int64)


def setup(k: int = 6, p: float = 0.35, beta: float = 0.1) -> dict[str, np.ndarray]:
    """pi, pi*, g* = pi* - pi, grad J = pi (r - J), rewards and patterns."""
    Y = patterns(k)
    r = Y.mean(1)
    pi = np.prod(np.where(Y == 1, p, 1 - p), axis=1)
    w = pi * np.exp(r / beta)
    pi_star = w / w.sum()
    J = float(pi @ r)
    return {"Y": Y, "r": r, "pi": pi, "pi_star": pi_star, "g_star": pi_star - pi, "grad_J": pi * (r - J)}


def _study_params(*, k: int = 6, p: float = 0.35, fix_prob: float = 0.8, keep_prob: float = 0.95,
                  alpha: float = 0.05, gamma: float = 1.0, beta: float = 0.1) -> None:
    if v.positive_int("k", k) > 16:
        raise ValueError(f"k must be at most 16 (2^k response patterns are enumerated), got {k}")
    v.probability("p", p, open_=True)
    v.probability("fix_prob", fix_prob)
    v.probability("keep_prob", keep_prob)
    v.in_range("alpha", alpha, 0.0, 1.0)
    v.non_negative("gamma", gamma)
    v.positive("beta", beta)


def _cos(G: np.ndarray, v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(G, axis=1) * np.linalg.norm(v)
    return np.where(n > 0, G @ v / np.where(n > 0, n, 1.0), 0.0)


def _advantages(R: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    return (R - R.mean(1, keepdims=True)) / (R.std(1, ddof=1, keepdims=True) + eps)


def _grad(idx: np.ndarray, coef: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """(1/N) sum_i coef_i (e_{idx_i} - pi) for each batch row: ``[M, 2^K]``."""
    M, N = idx.shape
    G = np.zeros((M, pi.size))
    np.add.at(G, (np.repeat(np.arange(M), N), idx.ravel()), coef.ravel())
    return (G - coef.sum(1, keepdims=True) * pi[None, :]) / N


def batch_gradients(n: int, batches: int, rng: np.random.Generator, *, k: int = 6, p: float = 0.35,
                    fix_prob: float = 0.8, keep_prob: float = 0.95, alpha: float = 0.05, gamma: float = 1.0,
                    beta: float = 0.1) -> dict[str, np.ndarray]:
    """GRPO and HeRL batch gradients on the same ``batches`` x ``n`` samples (common random numbers).

    The simulated HeRL inserts a revision only when it is strictly better than the group's best (the trainer's
    ``replace_rule="strict"``), not the official rule the trainer uses by default (a revision at least as good as
    the best, else a copy of the best original): this check studies the direction of the revision's own
    contribution."""
    n = v.positive_int("batch size n", n, minimum=2)            # a group baseline needs two samples
    batches = v.positive_int("batches", batches)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {v.describe(rng)}")
    _study_params(k=k, p=p, fix_prob=fix_prob, keep_prob=keep_prob, alpha=alpha, gamma=gamma, beta=beta)
    s = setup(k, p, beta)
    Y, r, pi = s["Y"], s["r"], s["pi"]
    weights = 2 ** np.arange(k)
    idx = rng.choice(pi.size, size=(batches, n), p=pi)
    R = r[idx]
    g_grpo = _grad(idx, _advantages(R), pi)
    # HeRL: revise every best-reward sample of batches whose best is < 1
    best = R.max(1, keepdims=True)
    cand = (np.abs(R - best) < 1e-12) & (best < 1.0)
    y = Y[idx]
    u = rng.random(y.shape)
    y_rev = np.where(y == 1, u < keep_prob, u < fix_prob).astype(np.int64)
    idx_rev = y_rev @ weights
    R_rev = np.where(cand, r[idx_rev], -np.inf)
    R_mod = np.where(cand, R + alpha * (R_rev - R), R)
    j = R_rev.argmax(1)
    accept = R_rev[np.arange(batches), j] > best[:, 0]
    slot = rng.integers(0, n, size=batches)
    rows = np.nonzero(accept)[0]
    idx_h, he = idx.copy(), np.zeros_like(cand)
    idx_h[rows, slot[rows]] = idx_rev[rows, j[rows]]
    R_mod[rows, slot[rows]] = R_rev[rows, j[rows]]
    he[rows, slot[rows]] = True
    w = np.where(he, gamma / (1 + gamma) ** 2 if gamma > 0 else 1.0, 1.0)
    g_herl = _grad(idx_h, w * _advantages(R_mod), pi)
    return {"grpo": g_grpo, "herl": g_herl, "accept_rate": accept.mean(keepdims=True),
            "revised_batches": cand.any(1).mean(keepdims=True)}


def direction_study(ns=(4, 8, 16), batches: int = 3000, seed: int = 0, **kw) -> list[dict]:
    """Per N: mean per-batch cos(g_hat, g*) for GRPO and HeRL (and the per-batch paired differences), and the
    cosine of each method's *expected* gradient (batch mean) with grad J (HeRL's bias w.r.t. the true gradient)."""
    v.keys("kw", kw, ("k", "p", "fix_prob", "keep_prob", "alpha", "gamma", "beta"))
    _study_params(**kw)
    v.non_empty("ns", ns)
    ns = [v.positive_int("ns entry", x, minimum=2) for x in ns]
    batches = v.positive_int("batches", batches)
    seed = v.non_negative_int("seed", seed)
    s = setup(kw.get("k", 6), kw.get("p", 0.35), kw.get("beta", 0.1))
    rng = np.random.default_rng(seed)
    out = []
    for n in ns:
        g = batch_gradients(n, batches, rng, **kw)
        cg, ch = _cos(g["grpo"], s["g_star"]), _cos(g["herl"], s["g_star"])
        out.append({"n": n, "cos_star_grpo": float(cg.mean()), "cos_star_herl": float(ch.mean()),
                    "paired": ch - cg,
                    "cos_gradJ_grpo": float(_cos(g["grpo"].mean(0, keepdims=True), s["grad_J"])[0]),
                    "cos_gradJ_herl": float(_cos(g["herl"].mean(0, keepdims=True), s["grad_J"])[0]),
                    "accept_rate": float(g["accept_rate"][0]), "revised_batches": float(g["revised_batches"][0])})
    return out


__all__ = ["batch_gradients", "direction_study", "patterns", "setup"]
