"""Verifiers r(x, c) that steer the search, and the held-out evaluator that judges its output [A01].

The verifier is log p(c | x) of a classifier trained on split A; the evaluator is a different classifier
(RBF SVM) trained on a disjoint split B plus a realism score (distance to the nearest real image of B), so a
search that exploits the verifier's quirks (verifier hacking) shows up as verifier success without evaluator
success, or as images far from every real one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import NearestNeighbors
from sklearn.svm import SVC

from ...harness import validate as v


def check_cond(cond: np.ndarray | list | int, classes: np.ndarray, n: int | None = None) -> np.ndarray:
    """Class labels as a 1D int array, each one of ``classes``; ``n`` broadcasts a scalar."""
    c = np.asarray(cond)
    if c.ndim == 0 and n is not None:
        c = np.full(n, c.item())
    if c.ndim != 1 or c.size == 0:
        raise ValueError(f"cond (the prompt classes) must be a non-empty 1D array of class labels, got shape "
                         f"{c.shape}; pass one label per target, e.g. np.arange(10)")
    if not np.issubdtype(c.dtype, np.integer):
        raise TypeError(f"cond must hold integer class labels, got dtype {c.dtype}")
    bad = ~np.isin(c, classes)
    if bad.any():
        raise ValueError(f"cond has labels {np.unique(c[bad]).tolist()} that the verifier does not know; "
                         f"known classes: {np.asarray(classes).tolist()}")
    if n is not None and len(c) != n:
        raise ValueError(f"cond has {len(c)} labels for {n} images")
    return c.astype(np.int64)


class SklearnClassifierVerifier:
    """r(x, c) = log p(c | x) from a fitted scikit-learn classifier with ``predict_log_proba`` [A01].

    ``verifier(images, cond) -> scores``: one call scores a whole batch (a beam); ``n_calls`` counts the images
    scored and ``n_batches`` the calls.
    """

    def __init__(self, clf) -> None:
        if not hasattr(clf, "predict_log_proba") or not hasattr(clf, "classes_"):
            raise TypeError("clf must be a fitted scikit-learn classifier with predict_log_proba and classes_")
        self.clf = clf
        self.classes_ = np.asarray(clf.classes_)
        self.n_calls = 0
        self.n_batches = 0

    def __call__(self, images: np.ndarray, cond: np.ndarray) -> np.ndarray:
        X = np.asarray(images, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.clf.n_features_in_:
            raise ValueError(f"images must have shape (n, {self.clf.n_features_in_}), got {X.shape}")
        v.finite("images", X)
        c = check_cond(cond, self.classes_, len(X))
        self.n_calls += len(X)
        self.n_batches += 1
        col = np.searchsorted(self.classes_, c)
        return self.clf.predict_log_proba(X)[np.arange(len(X)), col]


def _check_xy(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(v.non_empty("X", X), dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2D array (n_images, n_pixels), got shape {X.shape}")
    v.finite("X", X)
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be a 1D array of class labels, got shape {y.shape}")
    v.same_length(X=X, y=y)
    if len(np.unique(y)) < 2:
        raise ValueError(f"y must hold at least 2 classes to train a verifier, got {np.unique(y).tolist()}")
    return X, y


def fit_logistic_verifier(X: np.ndarray, y: np.ndarray, C: float = 1.0, seed: int = 0) -> SklearnClassifierVerifier:
    """The verifier of the digits experiments: multinomial logistic regression on pixels."""
    X, y = _check_xy(X, y)
    C = v.positive("C", C)
    return SklearnClassifierVerifier(LogisticRegression(C=C, max_iter=2000, random_state=seed).fit(X, y))


def fit_mlp_verifier(X: np.ndarray, y: np.ndarray, hidden: int = 64, seed: int = 0) -> SklearnClassifierVerifier:
    """A second verifier for the role-of-verifier study: a one-hidden-layer MLP classifier on pixels."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    X, y = _check_xy(X, y)
    hidden = v.positive_int("hidden", hidden)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = MLPClassifier((hidden,), alpha=1e-3, max_iter=300, random_state=seed).fit(X, y)
    return SklearnClassifierVerifier(clf)


@dataclass
class HeldOutEvaluator:
    """Judge of generated images [A01]: an RBF SVM (Platt-calibrated) on a disjoint split and the distance to the
    nearest real image of that split."""

    clf: CalibratedClassifierCV
    reference: NearestNeighbors

    def __post_init__(self) -> None:
        if not hasattr(self.clf, "predict_proba") or not hasattr(self.clf, "classes_"):
            raise TypeError(f"clf must be a fitted classifier with predict_proba and classes_ (build the evaluator "
                            f"with HeldOutEvaluator.fit(X, y)), got {v.describe(self.clf)}")
        if not hasattr(self.reference, "kneighbors"):
            raise TypeError(f"reference must be a fitted sklearn NearestNeighbors, got {v.describe(self.reference)}")

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, seed: int = 0) -> "HeldOutEvaluator":
        X, y = _check_xy(X, y)
        clf = CalibratedClassifierCV(SVC(kernel="rbf", C=10.0, gamma="scale", random_state=seed),
                                     ensemble=False).fit(X, y)
        return cls(clf, NearestNeighbors(n_neighbors=1).fit(X))

    def __call__(self, images: np.ndarray, cond: np.ndarray) -> dict[str, np.ndarray]:
        """Per image: ``success`` (SVM predicts c), ``log_prob`` (Platt log p(c|x)), ``realism_dist``."""
        X = np.asarray(images, dtype=np.float64)
        n_features = self.reference.n_features_in_
        if X.ndim != 2 or X.shape[1] != n_features:
            raise ValueError(f"images must have shape (n, {n_features}), got {X.shape}")
        v.finite("images", X)
        c = check_cond(cond, self.clf.classes_, len(X))
        col = np.searchsorted(self.clf.classes_, c)
        lp = np.log(np.clip(self.clf.predict_proba(X)[np.arange(len(X)), col], 1e-12, 1.0))
        return {"success": (self.clf.predict(X) == c).astype(float), "log_prob": lp,
                "realism_dist": self.reference.kneighbors(X)[0][:, 0]}
