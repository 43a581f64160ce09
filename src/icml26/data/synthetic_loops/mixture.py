"""Gaussian-mixture loops [A05]: class-conditional 1D mixtures refitted by weighted EM, batched over paths.

A path is one task: a joint p*(x, y) = pi*_y sum_j w*_yj N(x; mu*_yj, s*_yj^2) over a class y in {0..C-1} and a
real x. The model has the same form, p_theta(x, y) = pi_y sum_j w_yj N(x; m_yj, v_yj). Synthetic data are
(x, y) ~ p_theta; ``fit_mixture`` refits theta by weighted maximum likelihood (class priors in closed form, each
class's mixture by EM warm-started at the previous fit). A closed loop refits on its own samples; open loops weight
them with a signal that knows p*: a binary verifier (1 when y is the Bayes label of x, coarse) or a graded rubric
(the true posterior p*(y | x), fine).

Task-relevant information, per path, computed against the true p* on a grid of cells whose probabilities under p*
are exact (differences of normal CDFs, the two outer cells reaching to -inf / +inf):

    I(Y; Y_hat) = sum_{y, yh} P(y, yh) log P(y, yh) / (P(y) P(yh)),  P(y, yh) = sum_cells P*(x in cell, y) 1[yh(cell) = yh]

with yh(cell) = argmax_y p_theta(x_mid, y) the model's decision (exact up to the cells a decision boundary cuts;
for one Gaussian per class with equal variances and the boundary on a cell edge it is the closed form
log 2 - H_b(Phi(-delta / (2 s)))). Also the usable information H(Y) - E*[-log p_theta(Y | X)] of the soft
posterior, and the quality KL(p* || p_theta) of the joint (midpoint rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from icml26.harness import validate as chk

LOG2PI = np.log(2 * np.pi)


def _model(name: str, m: object) -> "MixtureModel":
    if not isinstance(m, MixtureModel):
        raise TypeError(f"{name} must be a MixtureModel, got {chk.describe(m)}")
    return m


def _rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {chk.describe(rng)}")
    return rng


def _xy(x: np.ndarray, y: np.ndarray, P: int, C: int) -> tuple[np.ndarray, np.ndarray]:
    """x (P, n) finite floats and y (P, n) integer class labels in [0, C)."""
    x = np.asarray(chk.finite("x", x), dtype=float)
    if x.ndim != 2 or x.shape[0] != P or x.shape[1] == 0:
        raise ValueError(f"x must be (P={P}, n >= 1), got shape {x.shape}")
    y = np.asarray(chk.shape("y", chk.indices("y (class labels)", y, C), x.shape)).astype(int)
    return x, y


def logsumexp(a: np.ndarray, axis: int = -1, keepdims: bool = False) -> np.ndarray:
    """log sum exp along ``axis`` (all -inf gives -inf); faster than scipy's for our small last axes."""
    mx = np.max(a, axis=axis, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - mx), axis=axis, keepdims=True)) + mx
    return out if keepdims else np.squeeze(out, axis=axis)


@dataclass
class MixtureModel:
    """P class-conditional 1D Gaussian mixtures: ``pi`` (P, C), ``w``/``m``/``v`` (P, C, J) [A05]."""

    pi: np.ndarray
    w: np.ndarray
    m: np.ndarray
    v: np.ndarray

    def __post_init__(self) -> None:
        self.pi, self.w, self.m, self.v = (np.asarray(chk.finite(n, a), dtype=float) for n, a in
                                           (("pi", self.pi), ("w", self.w), ("m", self.m), ("v", self.v)))
        if self.pi.ndim != 2 or self.w.ndim != 3 or self.w.shape[:2] != self.pi.shape:
            raise ValueError(f"need pi (P, C) and w, m, v (P, C, J); got pi {self.pi.shape}, w {self.w.shape}")
        if not (self.w.shape == self.m.shape == self.v.shape):
            raise ValueError(f"w, m, v must share one shape, got {self.w.shape}, {self.m.shape}, {self.v.shape}")
        if np.any(self.v <= 0) or not np.all(np.isfinite(self.v)) or not np.all(np.isfinite(self.m)):
            raise ValueError("variances must be positive and finite, means finite")
        if np.any(self.pi < 0) or not np.allclose(self.pi.sum(1), 1.0):
            raise ValueError("class priors pi must be non-negative rows summing to 1")
        if np.any(self.w < 0) or not np.allclose(self.w.sum(2), 1.0):
            raise ValueError("component weights w must be non-negative and sum to 1 within each class")

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.w.shape  # type: ignore[return-value]

    def log_joint(self, x: np.ndarray) -> np.ndarray:
        """log p(x, y) for x (P, n): (P, n, C)."""
        x = np.asarray(chk.finite("x", x), dtype=float)
        if x.ndim != 2 or x.shape[0] != self.shape[0]:
            raise ValueError(f"x must be (P={self.shape[0]}, n), got shape {x.shape}")
        x = x[None, :, :, None]                        # (1, P, n, 1)
        w, m, v = (np.moveaxis(a, -1, 0)[:, :, None, :] for a in (self.w, self.m, self.v))   # (J, P, 1, C)
        with np.errstate(divide="ignore"):
            lw = np.log(w) + np.log(self.pi)[None, :, None, :]
        return logsumexp(lw - 0.5 * (LOG2PI + np.log(v) + (x - m) ** 2 / v), axis=0)

    def posterior(self, x: np.ndarray) -> np.ndarray:
        """p(y | x) for x (P, n): (P, n, C)."""
        lj = self.log_joint(x)
        return np.exp(lj - logsumexp(lj, axis=-1, keepdims=True))

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """n draws (x, y) per path: two (P, n) arrays (x float, y int)."""
        n = chk.positive_int("n", n)
        _rng(rng)
        P, C, J = self.shape
        y = (rng.random((P, n))[..., None] > np.cumsum(self.pi, 1)[:, None, :-1]).sum(-1)
        wy = np.take_along_axis(self.w, y[..., None], 1)                       # (P, n, J)
        j = (rng.random((P, n))[..., None] > np.cumsum(wy, -1)[..., :-1]).sum(-1)
        flat = y * J + j
        m = np.take_along_axis(self.m.reshape(P, C * J), flat, 1)
        v = np.take_along_axis(self.v.reshape(P, C * J), flat, 1)
        return m + np.sqrt(v) * rng.standard_normal((P, n)), y


def fit_mixture(x: np.ndarray, y: np.ndarray, weight: np.ndarray, init: MixtureModel, iters: int = 20,
                reg_var: float = 1e-2) -> MixtureModel:
    """Weighted ML refit of ``init`` on data (x, y) (P, n) with weights (P, n) [A05].

    pi_y = sum_i w_i 1[y_i = y] / sum_i w_i. Per class, ``iters`` EM steps from ``init``:
    r_ij = w_i 1[y_i = y] w_yj N(x_i; m_yj, v_yj) / sum_k w_yk N(x_i; m_yk, v_yk),
    N_j = sum_i r_ij, w_yj = N_j / sum_k N_k, m_yj = sum_i r_ij x_i / N_j, v_yj = sum_i r_ij (x_i - m_yj)^2 / N_j + reg_var
    (sklearn's ``reg_covar``). A component with no responsibility keeps its mean and variance at weight 0 (a lost
    mode); a class or path with no weight keeps its previous parameters.
    """
    init = _model("init", init)
    x, y, wt = (np.asarray(a) for a in (x, y, weight))
    if x.shape != y.shape or x.shape != wt.shape or x.ndim != 2 or x.shape[0] != init.shape[0]:
        raise ValueError(f"x, y, weight must all be (P={init.shape[0]}, n); got {x.shape}, {y.shape}, {wt.shape}")
    x, y = _xy(x, y, init.shape[0], init.shape[1])
    wt = np.asarray(chk.finite("weight", wt), dtype=float)
    if np.any(wt < 0):
        raise ValueError("weights must be finite and non-negative")
    iters, reg_var = chk.positive_int("iters", iters), chk.positive("reg_var", reg_var)
    P, C, J = init.shape
    r = wt[:, None, :] * (y[:, None, :] == np.arange(C)[None, :, None])        # (P, C, n)
    tot = r.sum(-1)                                                              # (P, C)
    pi = np.where(tot.sum(1, keepdims=True) > 0, tot / np.maximum(tot.sum(1, keepdims=True), 1e-300), init.pi)
    # component axis first: (J, P, C) parameters, (J, P, C, n) responsibilities (fast reductions over J)
    w, m, v = (np.moveaxis(a, -1, 0).copy() for a in (init.w, init.m, init.v))
    xe = x[None, :, None, :]                                                     # (1, P, 1, n)
    has = tot[None] > 0
    for _ in range(iters):
        with np.errstate(divide="ignore"):
            ll = np.log(w)[..., None] - 0.5 * (np.log(v)[..., None] + (xe - m[..., None]) ** 2 / v[..., None])
        resp = np.exp(ll - logsumexp(ll, axis=0, keepdims=True)) * r[None]    # (J, P, C, n)
        Nk = resp.sum(-1)                                                         # (J, P, C)
        live = Nk > 1e-10
        Ns = np.maximum(Nk, 1e-300)
        m_new = np.where(live, (resp * xe).sum(-1) / Ns, m)
        v_new = np.where(live, (resp * (xe - m_new[..., None]) ** 2).sum(-1) / Ns + reg_var, v)
        w = np.where(has, Nk / np.maximum(tot[None], 1e-300), w)
        m, v = np.where(has, m_new, m), np.where(has, v_new, v)
        w = w / w.sum(0, keepdims=True)
    w, m, v = (np.moveaxis(a, 0, -1) for a in (w, m, v))
    return MixtureModel(pi, w, m, v)


def initial_fit(x: np.ndarray, y: np.ndarray, n_classes: int, n_components: int, iters: int = 50,
                reg_var: float = 1e-2) -> MixtureModel:
    """theta_0 from real labelled data (P, n): EM started at the class mean +- k x the class std (our choice)."""
    n_classes = chk.positive_int("n_classes", n_classes)
    n_components = chk.positive_int("n_components", n_components)
    iters, reg_var = chk.positive_int("iters", iters), chk.positive("reg_var", reg_var)
    x = np.asarray(chk.ndim("x", chk.finite("x", x), 2), float)
    x, y = _xy(x, y, x.shape[0], n_classes)
    P = x.shape[0]
    oh = (y[:, None, :] == np.arange(n_classes)[None, :, None]).astype(float)   # (P, C, n)
    cnt = oh.sum(-1)
    mu = np.where(cnt > 0, (oh * x[:, None]).sum(-1) / np.maximum(cnt, 1), 0.0)
    var = np.where(cnt > 1, (oh * (x[:, None] - mu[..., None]) ** 2).sum(-1) / np.maximum(cnt, 1), 1.0) + reg_var
    offs = np.linspace(-1, 1, n_components) if n_components > 1 else np.zeros(1)
    init = MixtureModel(np.full((P, n_classes), 1.0 / n_classes),
                        np.full((P, n_classes, n_components), 1.0 / n_components),
                        mu[..., None] + offs * np.sqrt(var)[..., None],
                        np.repeat(var[..., None], n_components, -1))
    return fit_mixture(x, y, np.ones_like(x), init, iters=iters, reg_var=reg_var)


def _batch_mi(joint: np.ndarray) -> np.ndarray:
    """I(A; B) (nats) of a batch of joint tables (..., A, B) summing to 1."""
    pa, pb = joint.sum(-1, keepdims=True), joint.sum(-2, keepdims=True)
    denom = pa * pb
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(joint > 0, joint * np.log(joint / np.where(denom > 0, denom, 1.0)), 0.0)
    return t.sum((-2, -1))


@dataclass
class MixtureGrid:
    """The truth's exact cell probabilities P*(x in cell, y) on a grid, for the information measures [A05]."""

    truth: MixtureModel
    lo: float = -8.0
    hi: float = 8.0
    cells: int = 800

    def __post_init__(self) -> None:
        _model("truth", self.truth)
        self.lo, self.hi = chk.finite_number("lo", self.lo), chk.finite_number("hi", self.hi)
        self.cells = chk.positive_int("cells", self.cells, minimum=2)
        if not (self.hi > self.lo) or self.cells < 2:
            raise ValueError(f"need hi > lo and cells >= 2, got lo={self.lo}, hi={self.hi}, cells={self.cells}")
        t = self.truth
        e = np.linspace(self.lo, self.hi, self.cells - 1)                        # inner edges; outer cells unbounded
        self.mid = np.concatenate([[e[0] - (e[1] - e[0]) / 2], (e[1:] + e[:-1]) / 2, [e[-1] + (e[1] - e[0]) / 2]])
        cdf = ndtr((e[None, None, None, :] - t.m[..., None]) / np.sqrt(t.v)[..., None])   # (P, C, J, E)
        cdf = np.concatenate([np.zeros(cdf.shape[:-1] + (1,)), cdf, np.ones(cdf.shape[:-1] + (1,))], -1)
        mass = np.einsum("pcj,pcjk->pck", t.w, np.diff(cdf, axis=-1)) * t.pi[..., None]   # (P, C, K)
        self.mass = np.transpose(mass, (0, 2, 1))                                 # (P, K, C)
        self.truth_log_joint = t.log_joint(np.broadcast_to(self.mid, (t.shape[0], self.cells)))

    def measures(self, model: MixtureModel) -> dict[str, np.ndarray]:
        """Per path: ``information`` I(Y; Y_hat), ``usable`` H(Y) - CE, ``kl`` KL(p* || p_theta), ``accuracy``."""
        _model("model", model)
        if model.shape[:2] != self.truth.shape[:2]:
            raise ValueError(f"model must have the truth's paths and classes {self.truth.shape[:2]}, got "
                             f"{model.shape[:2]}")
        P = model.shape[0]
        lj = model.log_joint(np.broadcast_to(self.mid, (P, self.cells)))          # (P, K, C)
        dec = lj.argmax(-1)
        conf = np.einsum("pkc,pkd->pcd", self.mass, np.eye(lj.shape[-1])[dec])
        post = lj - logsumexp(lj, axis=-1, keepdims=True)
        py = self.mass.sum(1)
        with np.errstate(divide="ignore", invalid="ignore"):
            hy = -np.sum(np.where(py > 0, py * np.log(py), 0.0), -1)
            pos = self.mass > 0
            ce = -np.sum(np.where(pos, self.mass * post, 0.0), (1, 2))
            kl = np.sum(np.where(pos, self.mass * (self.truth_log_joint - lj), 0.0), (1, 2))
        return {"information": _batch_mi(conf), "usable": hy - ce, "kl": kl,
                "accuracy": np.trace(conf, axis1=1, axis2=2)}

    def bayes(self) -> dict[str, np.ndarray]:
        """The measures of the truth itself: ``information`` is I(Y; Bayes decision), ``usable`` is I(Y; X)."""
        return self.measures(self.truth)


def interleaved_task(paths: int, rng: np.random.Generator, sep: float = 2.0, s: float = 0.7,
                     jitter: float = 0.3) -> MixtureModel:
    """Truths of the reproduction (our choice): two classes, each a two-component mixture, components at
    (-1.5, -0.5, 0.5, 1.5) x sep (+ N(0, jitter^2) per path) with alternating classes, std s, equal weights."""
    paths = chk.positive_int("paths", paths)
    _rng(rng)
    chk.positive("sep", sep)
    chk.positive("s", s)
    chk.non_negative("jitter", jitter)
    base = np.array([[-1.5, 0.5], [-0.5, 1.5]]) * sep                           # class 0, class 1
    m = base[None] + jitter * rng.standard_normal((paths, 2, 2))
    return MixtureModel(np.full((paths, 2), 0.5), np.full((paths, 2, 2), 0.5), m, np.full((paths, 2, 2), s * s))


def bayes_verifier(truth: MixtureModel):
    """Binary (coarse) signal: accept (x, y) when y is the Bayes label of x under p*."""
    _model("truth", truth)

    def verify(data: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        x, y = data
        return truth.log_joint(x).argmax(-1) == y
    return verify


def accepted_posterior_rubric(truth: MixtureModel, noise: float = 0.0):
    """Fine signal among acceptable outputs: weight 1[y is the Bayes label of x] p*(y | x) (in [1/2, 1] for an
    accepted sample, 0 otherwise: no credit to a wrong label). ``noise`` flips the acceptance like
    ``VerifierFilter(noise=...)`` (a flipped-in wrong label gets its own p*(y | x)). Use with ``RubricWeighting``;
    the flips need a generator, so it returns ``score(data, rng)``; see ``AcceptedRubric``."""
    _model("truth", truth)
    noise = chk.in_range("noise (flip probability)", noise, 0.0, 0.5, high_open=True)
    verify, post = bayes_verifier(truth), posterior_rubric(truth)

    def score(data: tuple[np.ndarray, np.ndarray], rng: np.random.Generator | None = None) -> np.ndarray:
        v = np.asarray(verify(data), dtype=bool)
        if noise > 0:
            if rng is None:
                raise ValueError("noise > 0 needs a generator")
            v = v ^ (rng.random(v.shape) < noise)
        return v * post(data)
    return score


def posterior_rubric(truth: MixtureModel):
    """Graded signal p*(y | x) in [0, 1] (credits wrong labels too: a label against the Bayes decision still
    gets its posterior)."""
    _model("truth", truth)

    def score(data: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        x, y = data
        return np.take_along_axis(truth.posterior(x), np.asarray(y)[..., None], -1)[..., 0]
    return score
