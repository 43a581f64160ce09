"""Modality-following curve and balance point [B03].

On a conflict case the image supports y_v and the text y_t != y_v. With unimodal distributions p_V (text
masked), p_T (image masked) and the joint p(.|v, t):

    filter:   keep the case only if argmax p_V = y_v and argmax p_T = y_t (each modality alone is right)
    follow:   text if argmax p(.|v,t) = y_t; vision if it is y_v; otherwise neither
    dU      = U(p_T) - U(p_V)                      (relative preference uncertainty of the text)
    law:      P(follow text | dU) decreases in dU
    balance:  b* solves P(follow text | b*) = P(follow vision | b*). With the logistic fit, on the cases that
              follow one of the two, P(follow text | dU) = sigma(-a (dU - b*)); b* > 0 means text-preferring
              (the text is still followed when it is somewhat less certain than the image).

The interval of b* is a case bootstrap (resample cases with replacement, refit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from icml26.harness import validate as check

from .uncertainty import INDICES, as_probs, relative_uncertainty

RIDGE = 1e-4  # tiny L2 on the standardised slope so a separable replicate keeps a finite b* (our choice)


# helper functions

def _labels(y: Any, n: int, name: str, k: int | None = None) -> np.ndarray:
    arr = np.asarray(y.detach().cpu().numpy() if hasattr(y, "detach") else y)
    if arr.ndim == 0:
        arr = np.full(n, arr)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be {n} integer class labels, got dtype {arr.dtype} and shape {arr.shape}")
    if k is not None:
        check.indices(name, arr, k)
    return arr.astype(np.int64)


def _vector(x: Any, name: str, dtype: Any = np.float64) -> np.ndarray:
    arr = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (one value per case), got shape {arr.shape}")
    if dtype is bool:
        if arr.dtype != bool and not (arr.dtype.kind in "biuf" and np.all((arr == 0) | (arr == 1))):
            raise ValueError(f"{name} must hold booleans (or 0/1), one per case; got values such as "
                             f"{arr[:3].tolist()}")
        return arr.astype(bool)
    arr = np.asarray(check.finite(name, arr), dtype=dtype)
    return arr


def _fit_logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray, iters: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Weighted logistic regression logit = c0 + c1 x for B weight rows at once (damped Newton, batched).

    x, y: (n,); w: (B, n) case weights (bootstrap counts). Returns c0, c1 of shape (B,).
    """
    c = np.zeros((w.shape[0], 2))
    n = w.sum(axis=1, keepdims=True)
    for _ in range(iters):
        z = c[:, :1] + c[:, 1:] * x
        p = 1.0 / (1.0 + np.exp(-z))
        r = w * (p - y) / n
        g = np.stack([r.sum(1), (r * x).sum(1)], axis=1) + np.stack([np.zeros(len(c)), RIDGE * c[:, 1]], axis=1)
        s = w * p * (1 - p) / n
        h00, h01, h11 = s.sum(1) + 1e-12, (s * x).sum(1), (s * x * x).sum(1) + RIDGE
        det = h00 * h11 - h01 ** 2
        step = np.stack([h11 * g[:, 0] - h01 * g[:, 1], h00 * g[:, 1] - h01 * g[:, 0]], axis=1) / det[:, None]
        norm = np.linalg.norm(step, axis=1, keepdims=True)
        c -= step * np.minimum(1.0, 5.0 / np.maximum(norm, 1e-300))  # damped: at most 5 per iteration
        if np.max(norm) < 1e-10:
            break
    return c[:, 0], c[:, 1]


def _binned_crossing(x: np.ndarray, fa: np.ndarray, fb: np.ndarray, n_bins: int, w: np.ndarray | None = None
                     ) -> float:
    """Where the binned P_a - P_b first crosses 0 (linear interpolation between bin means); NaN if it never does."""
    if w is not None:
        keep = np.repeat(np.arange(len(x)), w.astype(int))
        x, fa, fb = x[keep], fa[keep], fb[keep]
    edges = np.quantile(x, np.linspace(0, 1, n_bins + 1))
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, n_bins - 1)
    cnt = np.bincount(idx, minlength=n_bins)
    ok = cnt > 0
    cx = np.bincount(idx, x, n_bins)[ok] / cnt[ok]
    d = (np.bincount(idx, fa.astype(float), n_bins)[ok] - np.bincount(idx, fb.astype(float), n_bins)[ok]) / cnt[ok]
    for i in range(len(d) - 1):
        if d[i] >= 0 > d[i + 1] or d[i] > 0 >= d[i + 1]:
            return float(cx[i] + (cx[i + 1] - cx[i]) * d[i] / (d[i] - d[i + 1]))
    return float("nan")


# outputs

@dataclass
class BalancePoint:
    """Balance point b* with its bootstrap interval [B03].

    ``slope`` is a in P(follow a) = sigma(-a (dU - b*)) (logistic method; NaN for binned); ``boot`` holds the
    bootstrap replicates of b*.
    """

    b: float
    ci: tuple[float, float]
    slope: float
    method: str
    n_used: int
    boot: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        check.one_of("method", self.method, ("logistic", "binned"))
        if not (isinstance(self.ci, (tuple, list)) and len(self.ci) == 2):
            raise ValueError(f"ci must be a (low, high) pair, got {check.describe(self.ci)}")
        self.n_used = check.non_negative_int("n_used", self.n_used)


@dataclass
class Curve:
    """The modality-following curve of one model on one conflict set [B03].

    Per case (all n_total): ``keep`` (both unimodal predictions right), ``delta_u`` (U_T - U_V), ``follow_text``,
    ``follow_vision``. Per bin of dU over the kept cases (quantile bins): ``centers`` (mean dU), ``p_text``,
    ``p_vision`` (fractions of the bin), ``counts``. ``spearman``: rank correlation of ``centers`` and ``p_text``.
    """

    delta_u: np.ndarray
    keep: np.ndarray
    follow_text: np.ndarray
    follow_vision: np.ndarray
    centers: np.ndarray
    p_text: np.ndarray
    p_vision: np.ndarray
    counts: np.ndarray
    spearman: float
    index: str

    def __post_init__(self) -> None:
        check.one_of("index", self.index, INDICES)
        check.same_length(delta_u=self.delta_u, keep=self.keep, follow_text=self.follow_text,
                      follow_vision=self.follow_vision)
        check.same_length(centers=self.centers, p_text=self.p_text, p_vision=self.p_vision, counts=self.counts)

    @property
    def n_total(self) -> int:
        return int(len(self.keep))

    @property
    def n_kept(self) -> int:
        return int(self.keep.sum())

    @property
    def counts_by_outcome(self) -> dict[str, int]:
        """Kept cases by outcome (text, vision, neither) and the cases the unimodal filter dropped."""
        k = self.keep
        t, v = int((self.follow_text & k).sum()), int((self.follow_vision & k).sum())
        return {"text": t, "vision": v, "neither": self.n_kept - t - v, "filtered_out": self.n_total - self.n_kept}

    @property
    def text_ratio(self) -> float:
        """Raw text-following ratio over the kept cases."""
        return float(self.follow_text[self.keep].mean()) if self.n_kept else float("nan")


# main functions

def follow_outcomes(p_joint: Any, y_a: Any, y_b: Any) -> tuple[np.ndarray, np.ndarray]:
    """(follow_a, follow_b): whether argmax p_joint is y_a, resp. y_b, per case (both False: neither)."""
    p = as_probs(p_joint, "p_joint")
    ya, yb = _labels(y_a, len(p), "y_a", p.shape[1]), _labels(y_b, len(p), "y_b", p.shape[1])
    if np.any(ya == yb):
        raise ValueError("a conflict case needs y_a != y_b; drop the cases where both modalities agree")
    top = p.argmax(axis=1)
    return top == ya, top == yb


def modality_following_curve(p_v: Any, p_t: Any, p_joint: Any, y_v: Any, y_t: Any, n_bins: int = 10,
                             index: str = "entropy") -> Curve:
    """Filter conflict cases, classify what the joint prediction follows, and bin P(follow) by dU [B03].

    p_v, p_t, p_joint: (n, K) class distributions with the text masked, the image masked, and both present.
    y_v, y_t: (n,) the labels the image and the text support (y_v != y_t). dU = U(p_t) - U(p_v) under ``index``.
    """
    n_bins = check.positive_int("n_bins", n_bins, minimum=2)
    check.one_of("index", index, INDICES)
    pv, pt, pj = as_probs(p_v, "p_v"), as_probs(p_t, "p_t"), as_probs(p_joint, "p_joint")
    if not (pv.shape == pt.shape == pj.shape):
        raise ValueError(f"p_v, p_t and p_joint must have the same shape, got {pv.shape}, {pt.shape}, {pj.shape}")
    yv, yt = _labels(y_v, len(pv), "y_v", pv.shape[1]), _labels(y_t, len(pv), "y_t", pv.shape[1])
    ft, fv = follow_outcomes(pj, yt, yv)
    keep = (pv.argmax(1) == yv) & (pt.argmax(1) == yt)
    du = relative_uncertainty(pt, pv, index)
    if keep.sum() < n_bins:
        raise ValueError(f"only {int(keep.sum())} conflict cases pass the unimodal filter, fewer than n_bins="
                         f"{n_bins}; use more cases or fewer bins")
    x, a, b = du[keep], ft[keep], fv[keep]
    order = np.argsort(x, kind="stable")
    parts = np.array_split(order, n_bins)  # equal-count bins over the sorted kept cases
    centers = np.array([x[p].mean() for p in parts])
    pt_bin = np.array([a[p].mean() for p in parts])
    pv_bin = np.array([b[p].mean() for p in parts])
    counts = np.array([len(p) for p in parts])
    rho = float(spearmanr(centers, pt_bin).statistic) if np.ptp(pt_bin) > 0 else float("nan")
    return Curve(du, keep, ft, fv, centers, pt_bin, pv_bin, counts, rho, index)


def balance_point(delta_u: Any, follow_a: Any, follow_b: Any, method: str = "logistic", n_boot: int = 200,
                  seed: int = 0, level: float = 0.95, n_bins: int = 10) -> BalancePoint:
    """Balance point b* of P(follow a | dU), where following a and following b are equally likely [B03].

    ``logistic``: fit P(follow a) = sigma(-a (dU - b*)) on the cases that follow a or b (a small ridge on the
    slope keeps separable bootstrap replicates finite). ``binned``: first zero crossing of the binned
    P_a - P_b (quantile bins, linear interpolation). The interval is a case bootstrap with ``n_boot``
    replicates (percentile interval at ``level``). Swapping a and b (and dU -> -dU) maps b* to -b*.
    """
    if method not in ("logistic", "binned"):
        raise ValueError(f"unknown method {method!r}; use 'logistic' or 'binned'")
    n_boot = check.non_negative_int("n_boot", n_boot)
    seed = check.non_negative_int("seed", seed)
    level = check.in_range("level", level, 0.0, 1.0, low_open=True, high_open=True)
    n_bins = check.positive_int("n_bins", n_bins, minimum=2)
    du = _vector(delta_u, "delta_u")
    check.non_empty("delta_u", du)
    fa, fb = _vector(follow_a, "follow_a", bool), _vector(follow_b, "follow_b", bool)
    if not (len(du) == len(fa) == len(fb)):
        raise ValueError(f"delta_u, follow_a and follow_b must have one entry per case, got lengths "
                         f"{len(du)}, {len(fa)}, {len(fb)}")
    if np.any(fa & fb):
        raise ValueError("a case cannot follow both modalities; follow_a and follow_b must be exclusive")
    rng = np.random.default_rng(seed)
    if method == "logistic":
        used = fa | fb
        x, y = du[used], fa[used].astype(float)
        if y.sum() == 0 or y.sum() == len(y):
            raise ValueError("the logistic balance point needs cases following each modality; every used case "
                             "follows the same one (no balance point inside the data)")
        m, s = x.mean(), x.std() or 1.0
        z = (x - m) / s
        w = np.ones((1 + n_boot, len(z)))
        if n_boot:
            w[1:] = 0.0
            idx = rng.integers(0, len(z), size=(n_boot, len(z)))
            np.add.at(w, (np.repeat(np.arange(1, n_boot + 1), len(z)), idx.ravel()), 1.0)
        c0, c1 = _fit_logistic(z, y, w)
        with np.errstate(divide="ignore", invalid="ignore"):
            bs = m - c0 * s / c1
        b, slope, boot, n_used = float(bs[0]), float(-c1[0] / s), bs[1:], int(used.sum())
    else:
        b = _binned_crossing(du, fa, fb, n_bins)
        boot = np.array([_binned_crossing(du, fa, fb, n_bins, np.bincount(rng.integers(0, len(du), len(du)),
                                                                           minlength=len(du)))
                         for _ in range(n_boot)])
        slope, n_used = float("nan"), len(du)
    fin = boot[np.isfinite(boot)]
    ci = (float(np.quantile(fin, (1 - level) / 2)), float(np.quantile(fin, (1 + level) / 2))) if len(fin) \
        else (float("nan"), float("nan"))
    return BalancePoint(b, ci, slope, method, n_used, boot)


def select_boundary_cases(delta_u: Any, b: float, eps: float) -> np.ndarray:
    """Indices of the boundary cases, exactly those with |dU - b| <= eps [B03]."""
    b = check.finite_number("b", b)
    eps = check.non_negative("eps", eps)
    du = _vector(delta_u, "delta_u")
    return np.flatnonzero(np.abs(du - b) <= eps)


__all__ = ["BalancePoint", "Curve", "follow_outcomes", "modality_following_curve", "balance_point",
           "select_boundary_cases"]
