"""Simplicity bias: learning locks onto the most information-efficient signal component [A05].

A binary label y is carried by two components of the input, both fully predictive in training: a linear one
(one coordinate, x_lin = (2y - 1) margin + noise) and a harder one (a slab: y = 1 iff |u| < w for a uniform u, or
an XOR: y = 1[sign(u1) != sign(u2)]). At test time the two are decorrelated (drawn from independent labels), so a
model's predictions show which component it learned. The thesis predicts the simpler (linear) component wins,
whichever of the two is the intended one: reward hacking when it is spurious, faster learning when it is the core.
"""

from __future__ import annotations

import numpy as np

from icml26.harness import validate as chk

COMPONENTS = ("linear", "slab", "xor")


def _component(kind: str, y: np.ndarray, rng: np.random.Generator, margin: float = 1.0, scale: float = 1.0
               ) -> np.ndarray:
    n = len(y)
    if kind == "linear":
        return (scale * ((2 * y - 1) * margin + 0.3 * rng.standard_normal(n)))[:, None]
    if kind == "slab":        # three slabs on [-1, 1]: the middle third is class 1
        u = rng.uniform(-1 / 3, 1 / 3, n)
        side = rng.choice([-1.0, 1.0], n) * rng.uniform(1 / 3 + 0.05, 1.0, n)
        return np.where(y == 1, u * 0.85, side)[:, None]
    if kind == "xor":
        a = rng.choice([-1.0, 1.0], n)
        b = np.where(y == 1, -a, a)
        return np.column_stack([a * rng.uniform(0.1, 1, n), b * rng.uniform(0.1, 1, n)])
    raise ValueError(f"unknown component {kind!r}; use 'linear', 'slab' or 'xor'")


def simplicity_bias_dataset(n: int, core: str = "slab", spurious: str = "linear", corr: float = 1.0,
                            seed: int | None = None, noise_dims: int = 0, linear_scale: float = 1.0
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs [core | spurious | noise], the core label y and the label the spurious component encodes.

    With ``corr`` = 1 the spurious component encodes y itself (training); with ``corr`` = 0.5 it encodes an
    independent label (test, decorrelated). ``linear_scale`` multiplies the linear coordinate (its margin and noise
    together, so it stays as predictive): at 1 its margin (about 1) is far wider than the slab's gaps (0.05), at
    0.03 about equal. Returns ``(X, y_core, y_spurious)``.
    """
    n = chk.positive_int("n", n)
    corr = chk.probability("corr", corr)
    chk.one_of("core", core, COMPONENTS)
    chk.one_of("spurious", spurious, COMPONENTS)
    noise_dims = chk.non_negative_int("noise_dims", noise_dims)
    linear_scale = chk.positive("linear_scale", linear_scale)
    if seed is not None:
        chk.non_negative_int("seed", seed)
    if core == spurious:
        raise ValueError("core and spurious must be different components")
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    ys = np.where(rng.random(n) < corr, y, 1 - y)
    X = np.column_stack([_component(core, y, rng, scale=linear_scale), _component(spurious, ys, rng, scale=linear_scale),
                         rng.standard_normal((n, noise_dims))])
    return X, y, ys


def which_component(model, core: str, spurious: str, n: int = 2000, seed: int = 0, linear_scale: float = 1.0
                    ) -> dict[str, np.ndarray]:
    """Per test point: agreement of ``model.predict`` on decorrelated data with the core / the spurious label."""
    if not callable(getattr(model, "predict", None)):
        raise TypeError(f"model must have a predict(X) method (a fitted classifier), got {chk.describe(model)}")
    X, y, ys = simplicity_bias_dataset(n, core, spurious, corr=0.5, seed=seed, linear_scale=linear_scale)
    p = model.predict(X)
    return {"follows_core": (p == y).astype(float), "follows_spurious": (p == ys).astype(float)}


def fit_mlp(X: np.ndarray, y: np.ndarray, seed: int = 0, hidden: tuple = (32, 32), max_iter: int = 200):
    """The learner of the simplicity-bias study: a scikit-learn MLP (Adam), quiet about convergence."""
    import warnings

    X = chk.non_empty("X", chk.ndim("X", chk.finite("X", X), 2))
    y = chk.ndim("y", chk.finite("y", y), 1)
    chk.same_length(X=X, y=y)
    chk.non_negative_int("seed", seed)
    if not isinstance(hidden, tuple) or not hidden:
        raise TypeError(f"hidden must be a non-empty tuple of layer widths, got {chk.describe(hidden)}")
    for h in hidden:
        chk.positive_int("hidden (a layer width)", h)
    chk.positive_int("max_iter", max_iter)
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return MLPClassifier(hidden, max_iter=max_iter, random_state=seed).fit(X, y)
