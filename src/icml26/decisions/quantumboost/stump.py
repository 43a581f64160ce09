"""Decision stumps that minimise the weighted 0-1 error exactly: the default weak learner of [B10].

A stump is h(x) = s if x_f > theta else -s (s in {+1, -1}). For presorted features, the weighted error of every
(f, theta, s) is a cumulative sum, so the best stump costs O(m d) per boosting round after one O(m d log m) sort.
(sklearn's depth-1 tree minimises Gini impurity instead, and re-sorts at every fit; it is ~10x slower here.)
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data


def binary_targets(y: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """classes_ and labels in {-1, +1} (classes_[1] -> +1); clear errors for anything not binary."""
    check_classification_targets(y)
    y_type = type_of_target(y, input_name="y", raise_unknown=True)
    if y_type != "binary":
        raise ValueError(f"Only binary classification is supported. The type of the target is {y_type}. "
                         f"{name} is a binary booster; for multiclass problems wrap it in "
                         "sklearn.multiclass.OneVsRestClassifier")
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(f"{name} needs 2 classes in y, got only one class: {classes[0]!r}")
    return classes, np.where(y == classes[1], 1, -1)


_TIE = 1e-12  # weighted errors closer than this are ties


class StumpSearch:
    """Presorted (X, y) for repeated exact weighted-error stump search [B10]."""

    def __init__(self, X: np.ndarray, y_pm: np.ndarray) -> None:
        # feature-major (d, m) layout so that the cumulative sums run over contiguous memory
        self.order = np.argsort(X.T, axis=1, kind="stable")                  # (d, m)
        xs = np.take_along_axis(X.T, self.order, axis=1)
        self.valid = xs[:, 1:] > xs[:, :-1]                                  # a threshold fits between p, p+1
        self.thresholds = 0.5 * (xs[:, 1:] + xs[:, :-1])
        self.sign = np.where(y_pm[self.order] > 0, 1.0, -1.0)
        self.neg = y_pm < 0

    def best(self, w: np.ndarray) -> tuple[int, float, int, float]:
        """(feature, threshold, polarity, weighted error) of the best stump for weights w >= 0.

        Polarity +1 predicts -1 on the left (x_f <= theta), so err(p) = W_neg + sum_{j <= p} w_j y_j.
        """
        w = w / w.sum()
        w_neg = float(w[self.neg].sum())
        err = w_neg + np.cumsum(w[self.order] * self.sign, axis=1)[:, :-1]   # (d, m - 1)
        score = np.where(self.valid, np.minimum(err, 1.0 - err), np.inf)
        best_const = min(w_neg, 1.0 - w_neg)
        if score.size == 0 or not best_const > score.min() + _TIE:             # constant stump wins ties
            pol = 1 if w_neg <= 1.0 - w_neg else -1
            return 0, -np.inf, pol, float(best_const)
        # ties (up to rounding) go to the first feature, then the lowest threshold, whatever the sample order
        f, p = np.unravel_index(int(np.argmax(score <= score.min() + _TIE)), score.shape)
        pol = 1 if err[f, p] <= 1.0 - err[f, p] else -1
        return int(f), float(self.thresholds[f, p]), pol, float(score[f, p])


def stump_votes(X: np.ndarray, features: np.ndarray, thresholds: np.ndarray, polarities: np.ndarray) -> np.ndarray:
    """Votes h_t(x_i) in {-1, +1} of T stumps on n points, shape (T, n)."""
    return np.where(X[:, features] > thresholds, polarities, -polarities).T.astype(float)


class DecisionStump(ClassifierMixin, BaseEstimator):
    """Binary threshold classifier minimising the weighted 0-1 error exactly (weak learner of [B10]).

    Attributes: ``feature_``, ``threshold_`` (``-inf`` for a constant stump), ``polarity_`` (+1: x_f > theta
    predicts ``classes_[1]``), ``weighted_error_``.
    """

    def fit(self, X, y, sample_weight=None) -> "DecisionStump":
        X, y = validate_data(self, X, y, dtype=np.float64)
        self.classes_, y_pm = binary_targets(y, type(self).__name__)
        w = _check_sample_weight(sample_weight, X, ensure_non_negative=True)
        if not w.sum() > 0:
            raise ValueError("sample_weight sums to 0; give at least one sample a positive weight")
        self.feature_, self.threshold_, self.polarity_, self.weighted_error_ = StumpSearch(X, y_pm).best(w)
        return self

    def _set_fitted(self, feature: int, threshold: float, polarity: int, n_features: int) -> "DecisionStump":
        """A fitted stump on labels {-1, +1} from known parameters (the booster's fast path)."""
        self.classes_, self.n_features_in_ = np.array([-1, 1]), int(n_features)
        self.feature_, self.threshold_, self.polarity_, self.weighted_error_ = feature, threshold, polarity, np.nan
        return self

    def decision_function(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return stump_votes(X, np.array([self.feature_]), np.array([self.threshold_]), np.array([self.polarity_]))[0]

    def predict(self, X) -> np.ndarray:
        d = self.decision_function(X)
        return self.classes_[(d > 0).astype(int)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags
