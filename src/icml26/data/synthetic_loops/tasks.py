"""Tasks and policies for the loops [A05]: the Gaussian-mean task and questions a + b mod p.

Gaussian-mean task. Each path has its own task mu ~ N(0, tau^2 I_d); the model is N(m, sigma^2 I) (known noise,
our choice, so the closed loop's information has a closed form). Open signals know mu: a binary verifier accepts
x when |x - mu|^2 <= r^2 (r^2 the median of sigma^2 chi^2_d: half of the true distribution passes), a graded rubric
weights x by exp(-|x - mu|^2 / (2 sigma^2 d)) in (0, 1].

Modular addition. Questions q = (a, b), a, b in 0..p-1, answer y = (a + b) mod p. ``TabularPolicy`` holds
pi(answer | question) as a table; its weighted refit is the empirical (weighted) answer distribution of each
question with data, and the previous row where a question has no weight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import chi2

from icml26.harness import validate as chk

from .information import discrete_mutual_information, entropy


def _rng(rng: np.random.Generator) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), got {chk.describe(rng)}")
    return rng

# Gaussian-mean task

@dataclass
class GaussianMeanTask:
    """P independent paths of the Gaussian-mean task in d dimensions (vectorised over paths)."""

    mu: np.ndarray          # (P, d) task per path
    sigma2: float = 1.0

    def __post_init__(self) -> None:
        self.mu = np.asarray(chk.non_empty("mu", chk.ndim("mu", chk.finite("mu", self.mu), 2)), dtype=float)
        self.sigma2 = chk.positive("sigma2", self.sigma2)

    @classmethod
    def draw(cls, paths: int, d: int, tau2: float, sigma2: float, rng: np.random.Generator) -> "GaussianMeanTask":
        paths, d = chk.positive_int("paths", paths), chk.positive_int("d", d)
        tau2 = chk.positive("tau2", tau2)
        return cls(np.sqrt(tau2) * _rng(rng).standard_normal((paths, d)), sigma2)

    @property
    def d(self) -> int:
        return self.mu.shape[1]

    def real_mean(self, n0: int, rng: np.random.Generator) -> np.ndarray:
        """m_0: the mean of n0 real draws per path."""
        n0 = chk.positive_int("n0", n0)
        return self.mu + np.sqrt(self.sigma2 / n0) * rng.standard_normal(self.mu.shape)

    def sample(self, m: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray]:
        """(P, n, d) draws of N(m, sigma^2 I) per path."""
        m = chk.shape("m", chk.finite("m", m), self.mu.shape)
        n = chk.positive_int("n", n)
        return (m[:, None] + np.sqrt(self.sigma2) * rng.standard_normal((len(m), n, self.d)),)

    def fit(self, data: tuple[np.ndarray], w: np.ndarray, prev: np.ndarray) -> np.ndarray:
        """Weighted mean per path; paths with no weight keep their previous mean."""
        x = chk.finite("data[0]", data[0])
        if x.ndim != 3 or x.shape[0] != len(self.mu) or x.shape[2] != self.d:
            raise ValueError(f"data[0] must be (P={len(self.mu)}, n, d={self.d}) samples, got shape {x.shape}")
        w = chk.shape("w", chk.finite("w", w), x.shape[:2])
        if np.any(w < 0):
            raise ValueError("w (sample weights) must be >= 0")
        tot = w.sum(1, keepdims=True)
        m = np.einsum("pn,pnd->pd", w, x) / np.maximum(tot, 1e-300)
        return np.where(tot > 0, m, prev)

    def verifier(self, data: tuple[np.ndarray]) -> np.ndarray:
        """Binary (coarse): |x - mu|^2 <= median of sigma^2 chi^2_d."""
        r2 = self.sigma2 * chi2.median(self.d)
        return ((data[0] - self.mu[:, None]) ** 2).sum(-1) <= r2

    def rubric(self, data: tuple[np.ndarray]) -> np.ndarray:
        """Graded (fine): exp(-|x - mu|^2 / (2 sigma^2 d)) in (0, 1]."""
        return np.exp(-((data[0] - self.mu[:, None]) ** 2).sum(-1) / (2 * self.sigma2 * self.d))


# modular addition

def modular_addition(p: int = 11) -> tuple[np.ndarray, np.ndarray]:
    """Questions as (a, b) pairs (p^2, 2) and their answers (a + b) mod p."""
    p = chk.positive_int("p", p, minimum=2)
    ab = np.array([(a, b) for a in range(p) for b in range(p)])
    return ab, ab.sum(1) % p


class TabularPolicy:
    """pi(answer | question) as a (Q, A) table [A05]; numpy only."""

    def __init__(self, probs: np.ndarray) -> None:
        p = np.asarray(chk.probability_vector("probs", chk.ndim("probs", probs, 2)), dtype=float)
        self.probs = p

    @classmethod
    def from_labels(cls, answers: np.ndarray, labelled: np.ndarray, n_answers: int, strength: float = 3.0,
                    alpha: float = 0.5) -> "TabularPolicy":
        """A weak start: pseudo-counts ``strength`` on the answer of labelled questions, ``alpha`` everywhere."""
        n_answers = chk.positive_int("n_answers", n_answers, minimum=2)
        answers = np.asarray(chk.indices("answers", chk.ndim("answers", answers, 1), n_answers)).astype(int)
        labelled = np.asarray(chk.ndim("labelled", labelled, 1))
        if labelled.dtype != bool:
            raise TypeError(f"labelled must be a boolean mask, got dtype {labelled.dtype}")
        chk.same_length(answers=answers, labelled=labelled)
        chk.non_negative("strength", strength)
        chk.positive("alpha", alpha)
        counts = np.full((len(answers), n_answers), alpha)
        counts[np.flatnonzero(labelled), answers[labelled]] += strength
        return cls(counts / counts.sum(1, keepdims=True))

    def sample(self, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """k answers per question: (question ids (Q*k,), answers (Q*k,)) by inverse CDF."""
        k = chk.positive_int("k", k)
        _rng(rng)
        cdf = np.cumsum(self.probs, 1)
        u = rng.random((len(cdf), k))
        a = (u[..., None] > cdf[:, None, :-1]).sum(-1)
        return np.repeat(np.arange(len(cdf)), k), a.ravel()

    def fit(self, data: tuple[np.ndarray, np.ndarray], w: np.ndarray) -> "TabularPolicy":
        """Weighted empirical answer distribution per question; rows without weight stay as they are."""
        if not isinstance(data, tuple) or len(data) != 2:
            raise TypeError(f"data must be a tuple (question ids, answers), got {chk.describe(data)}")
        q = np.asarray(chk.indices("data[0] (question ids)", data[0], len(self.probs))).astype(int)
        a = np.asarray(chk.indices("data[1] (answers)", data[1], self.probs.shape[1])).astype(int)
        w = np.asarray(chk.finite("w", w), dtype=float)
        chk.same_length(question_ids=q, answers=a, w=w)
        if np.any(w < 0):
            raise ValueError("w (sample weights) must be >= 0")
        counts = np.zeros_like(self.probs)
        np.add.at(counts, (q, a), w)
        tot = counts.sum(1, keepdims=True)
        return TabularPolicy(np.where(tot > 0, counts / np.maximum(tot, 1e-300), self.probs))

    def metrics(self, answers: np.ndarray) -> dict[str, Any]:
        """pass@1, mean entropy, mean support size, and ``errors``: the offset distribution
        e -> mean_q pi((y_q + e) mod A | q), from which ``task_information`` computes I(Y; A)."""
        Q, A = self.probs.shape
        answers = np.asarray(chk.shape("answers", chk.indices("answers", answers, A), (Q,))).astype(int)
        offs = (answers[:, None] + np.arange(A)) % A
        return {"accuracy": float(self.probs[np.arange(Q), answers].mean()),
                "entropy": float(entropy(self.probs).mean()),
                "support": float((self.probs > 0).sum(1).mean()),
                "errors": self.probs[np.arange(Q)[:, None], offs].mean(0)}


def task_information(errors: np.ndarray) -> float:
    """I(Y; A) (nats) of the answer channel with offset distribution ``errors`` [A05].

    Under a task prior that shifts each question's answer by its own uniform c_q, independently across questions
    (y_q = (a + b + c_q) mod A), and loop dynamics that commute with such shifts (all filters here do),
    p(a | y) = errors[(a - y) mod A] for a question drawn at random, so I(Y; A) = log A - H(errors). Pass the
    offset distribution averaged over replicate runs to marginalise the run's randomness. With independent shifts
    a labelled row reveals only its own c_q, so a closed loop started from a fraction f of labelled rows obeys
    I(Y; A_t) <= f log A (under one shared c, a single labelled row would reveal it and the bound would be log A).
    """
    e = np.asarray(chk.probability_vector("errors", chk.ndim("errors", errors, 1)), dtype=float)
    A = len(e)
    joint = np.stack([np.roll(e, y) for y in range(A)]) / A           # p(y, a) = errors[(a - y) mod A] / A
    return discrete_mutual_information(joint)


def circular_distance(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """min(|a - b| mod p, p - |a - b| mod p) elementwise, for integer residues."""
    p = chk.positive_int("p", p)
    for name, x in (("a", a), ("b", b)):
        arr = np.asarray(chk.finite(name, np.atleast_1d(x)))
        if arr.dtype.kind not in "biu" and not np.all(arr == np.round(arr)):
            raise TypeError(f"{name} must hold integers, got {chk.describe(x)} with non-integer values")
    d = np.abs(np.asarray(a) - np.asarray(b)) % p
    return np.minimum(d, p - d)


# digits self-training

class DigitsSelfTraining:
    """A digits classifier whose synthetic data are its own labels, sampled on an unlabelled pool [A05].

    Data of one round: (pool indices, sampled labels y_hat ~ p_theta(. | x)). ``fit`` retrains logistic
    regression on the small labelled seed set plus the weighted pool samples. Closed loop: no filter. Open loops
    filter the labels with information from outside the model (a verifier of the true label, or a teacher
    trained on other data: binary = the teacher's argmax agrees, graded = the teacher's probability of y_hat).
    """

    def __init__(self, X_seed: np.ndarray, y_seed: np.ndarray, X_pool: np.ndarray, C: float = 1.0,
                 n_classes: int = 10) -> None:
        if len(X_seed) != len(y_seed) or len(X_seed) == 0:
            raise ValueError("X_seed and y_seed must be non-empty and of equal length")
        n_classes = chk.positive_int("n_classes", n_classes, minimum=2)
        X_seed = chk.ndim("X_seed", chk.finite("X_seed", X_seed), 2)
        X_pool = chk.shape("X_pool", chk.ndim("X_pool", chk.finite("X_pool", X_pool), 2), (None, X_seed.shape[1]))
        chk.non_empty("X_pool", X_pool)
        y_seed = np.asarray(chk.indices("y_seed", y_seed, n_classes))
        C = chk.positive("C", C)
        self.X_seed, self.y_seed, self.X_pool, self.C, self.K = X_seed, y_seed, X_pool, C, n_classes

    def _clf(self):
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(C=self.C, max_iter=500)

    def initial(self):
        return self._clf().fit(self.X_seed, self.y_seed)

    def fit(self, data: tuple[np.ndarray, np.ndarray], w: np.ndarray, prev):
        if not isinstance(data, tuple) or len(data) != 2:
            raise TypeError(f"data must be a tuple (pool indices, labels), got {chk.describe(data)}")
        idx = np.asarray(chk.indices("data[0] (pool indices)", data[0], len(self.X_pool))).astype(int)
        lab = np.asarray(chk.indices("data[1] (labels)", data[1], self.K)).astype(int)
        w = np.asarray(chk.finite("w", w), dtype=float)
        chk.same_length(pool_indices=idx, labels=lab, w=w)
        if np.any(w < 0):
            raise ValueError("w (sample weights) must be >= 0")
        keep = w > 0
        X = np.concatenate([self.X_seed, self.X_pool[idx[keep]]])
        y = np.concatenate([self.y_seed, lab[keep]])
        sw = np.concatenate([np.ones(len(self.y_seed)), w[keep]])
        return self._clf().fit(X, y, sample_weight=sw)

    def proba(self, clf, X: np.ndarray) -> np.ndarray:
        """p_theta(y | x) over all K classes (columns for classes the model has not seen are 0)."""
        P = np.zeros((len(X), self.K))
        P[:, clf.classes_] = clf.predict_proba(X)
        return P

    def sample(self, clf, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """n pool images and labels sampled from the model's predictive distribution (temperature 1)."""
        n = chk.positive_int("n", n)
        idx = rng.permutation(len(self.X_pool))[:n]
        cdf = np.cumsum(self.proba(clf, self.X_pool[idx]), 1)
        lab = (rng.random(len(idx))[:, None] > cdf[:, :-1]).sum(1)
        return idx, lab

    def sample_greedy(self, clf, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """n pool images labelled by the model's argmax (classic pseudo-labelling; still information-closed in
        the labels)."""
        n = chk.positive_int("n", n)
        idx = rng.permutation(len(self.X_pool))[:n]
        return idx, self.proba(clf, self.X_pool[idx]).argmax(1)

    def metrics(self, clf, X_test: np.ndarray, y_test: np.ndarray) -> dict[str, Any]:
        """Test accuracy, p(correct) per test image, I(Y; Y_hat) of the decisions (argmax; plug-in from the
        confusion matrix) and of the soft predictive joint (nats)."""
        X_test = chk.shape("X_test", chk.finite("X_test", X_test), (None, self.X_seed.shape[1]))
        y_test = np.asarray(chk.indices("y_test", y_test, self.K)).astype(int)
        chk.same_length(X_test=X_test, y_test=y_test)
        P = self.proba(clf, X_test)
        hard, soft = np.zeros((self.K, self.K)), np.zeros((self.K, self.K))
        np.add.at(hard, (y_test, P.argmax(1)), 1.0)
        np.add.at(soft, y_test, P)
        return {"accuracy": float((P.argmax(1) == y_test).mean()), "p_correct": P[np.arange(len(P)), y_test],
                "correct": (P.argmax(1) == y_test).astype(float),
                "information": discrete_mutual_information(hard), "soft_information": discrete_mutual_information(soft)}
