"""Barak-Hardt-Kale boosting with greedy or lazy (triggered) KL projections: QuantumBoost, classically [B10].

Data (x_i, y_i), y_i in {+1, -1}, i = 1..m; density delta = target training error epsilon.
Greedy BHK (projection="greedy"):
    M_1 = delta * 1
    round t: D_t = M_t / |M_t|;  h_t = WL(D_t);  l_t(i) = 1[h_t(x_i) = y_i]
             N_{t+1} = M_t * (1 - gamma)^{l_t};  M_{t+1} = Pi(N_{t+1})        (Pi: KL projection, projection.py)
    T = ceil(4 ln(1/delta) / gamma^2) rounds; output sign(sum_t h_t). If WL has advantage gamma on every
    delta-dense measure, the vote errs on fewer than delta m training points.
Lazy (projection="lazy"; our reconstruction of [B10]'s lazy strategy, dual-averaging style):
    keep only the cumulative unprojected weights N_t(i) = delta (1 - gamma)^{k_t(i)}, k_t(i) = sum_{s<t} l_s(i),
    and one scale c_t:  M_t(i) = min(1, c_t N_t(i)). c_t is recomputed from N_t (never from the previous M) only
    when the density bound b_t falls below trigger * delta, or every `project_every` rounds. The bound costs no
    queries: since min(1, a (1-gamma)) >= (1-gamma) min(1, a),
        mu(M_{t+1}) >= mu(M_t) (1 - gamma acc_t),   acc_t = sum_i D_t(i) l_t(i)  (the weak learner's accuracy),
    so b_{t+1} = b_t (1 - gamma acc_t) and, with trigger = 1/2, every D_t is 1/(trigger delta m)-smooth.
    Without capping (min(1, .) never active) Pi is a pure rescaling and lazy == greedy exactly.
Projections are exact (water-filling, m reads) or approximate (approx=True: binary search on log c with sampled
density estimates; the step [B10] accelerates with amplitude estimation, here only in the query-count model).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, has_fit_parameter, validate_data

from icml26.harness import validate

from .projection import _approx_log_scale, _check_delta, _exact_log_scale, _measure
from .queries import QueryCounter
from .stump import DecisionStump, StumpSearch, binary_targets, stump_votes

PROJECTIONS = ("lazy", "greedy", "none")


# helper functions

def bhk_rounds(gamma: float, delta: float) -> int:
    """T = ceil(4 ln(1/delta) / gamma^2) (the constant 4 is our choice; BHK prove O(log(1/delta)/gamma^2)).

    ``gamma`` (the weak learner's advantage) must be in (0, 1) and ``delta`` (the target error) in (0, 1]."""
    gamma = validate.in_range("gamma", gamma, 0.0, 1.0, low_open=True, high_open=True)
    delta = validate.in_range("delta", delta, 0.0, 1.0, low_open=True)
    return max(1, math.ceil(4.0 * math.log(1.0 / delta) / gamma**2))


def _check_params(gamma, delta, n_rounds, projection, project_every, trigger, kappa, eta, weak_sample_size) -> None:
    def real_in(name, v, lo, hi, hi_closed=False):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {type(v).__name__}")
        if not (lo < v < hi or (hi_closed and v == hi)):
            raise ValueError(f"{name} must be in ({lo}, {hi}{']' if hi_closed else ')'}, got {v}")

    def pos_int_or_none(name, v):
        if v is None:
            return
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{name} must be a positive int or None, got {type(v).__name__}")
        if v < 1:
            raise ValueError(f"{name} must be a positive int (>= 1) or None, got {v}")

    real_in("gamma (the weak learner's advantage)", gamma, 0.0, 1.0)
    _check_delta(delta)
    pos_int_or_none("n_estimators (number of boosting rounds)", n_rounds)
    if projection not in PROJECTIONS:
        raise ValueError(f"projection must be one of {PROJECTIONS}, got {projection!r}")
    pos_int_or_none("project_every", project_every)
    real_in("trigger", trigger, 0.0, 1.0, hi_closed=True)
    real_in("kappa", kappa, 0.0, 1.0)
    real_in("eta", eta, 0.0, 1.0)
    pos_int_or_none("weak_sample_size", weak_sample_size)


def _rejection_sample(M: np.ndarray, s: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """s indices from D = M / |M|: pick i uniformly, accept w.p. M_i. Returns (indices, trials made)."""
    m, mu = M.size, float(M.mean())
    out, trials, need = [], 0, s
    while need > 0:
        batch = max(64, math.ceil(1.2 * need / mu))
        i = rng.integers(0, m, size=batch)
        hit = np.flatnonzero(rng.random(batch) < M[i])
        if hit.size >= need:
            out.append(i[hit[:need]])
            trials += int(hit[need - 1]) + 1
            break
        out.append(i[hit])
        trials += batch
        need -= hit.size
    return np.concatenate(out), trials


# main loop

@dataclass
class BoostingTrace:
    """Everything a boosting run produced, round by round [B10]."""

    hypotheses: list                     # fitted weak learners (DecisionStump for the default)
    stumps: tuple | None                 # (features, thresholds, polarities) when all are default stumps
    n_projections: int
    projection_rounds: list[int]         # rounds t after which c was recomputed
    smoothness: np.ndarray               # max_i D_t(i) * m, shape (T,)
    density: np.ndarray                  # mu(M_t), shape (T,)
    advantage: np.ndarray                # sum_i D_t(i) l_t(i) - 1/2, shape (T,)
    capped: np.ndarray                   # whether min(1, .) was active in M_t, shape (T,)
    counter: QueryCounter = field(default_factory=QueryCounter)
    measures: np.ndarray | None = None   # M_t, shape (T, m), only with record_measures=True

    def votes(self, X: np.ndarray) -> np.ndarray:
        """h_t(x) in {-1, +1}, shape (T, n)."""
        if self.stumps is not None:
            return stump_votes(X, *self.stumps)
        return np.stack([h.predict(X) for h in self.hypotheses]).astype(float)


def boost(X: np.ndarray, y: np.ndarray, *, weak_learner=None, gamma: float = 0.1, delta: float = 0.1,
          n_rounds: int | None = None, projection: str = "lazy", project_every: int | None = None,
          trigger: float = 0.5, approx: bool = True, kappa: float = 0.1, eta: float = 0.05,
          weak_sample_size: int | None = None, random_state=None, record_measures: bool = False) -> BoostingTrace:
    """Run greedy / lazy BHK boosting on (X, y), y in {-1, +1}; see the module docstring for the equations [B10].

    weak_learner: any sklearn classifier whose ``fit`` takes ``sample_weight`` (None: exact weighted stump).
    weak_sample_size: if set, WL is trained on that many points drawn from D_t by rejection sampling (the
    sampling model of [B10]) instead of on all points with weights D_t.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise ValueError(f"need X of shape (m, d) and y of shape (m,), got {X.shape} and {y.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or inf; impute or drop those entries first")
    if not np.all(np.isin(y, (-1, 1))):
        raise ValueError("y must hold labels in {-1, +1}; LazyProjectionBoost maps other binary labels for you")
    _check_params(gamma, delta, n_rounds, projection, project_every, trigger, kappa, eta, weak_sample_size)
    if weak_learner is not None and weak_sample_size is None and not has_fit_parameter(weak_learner, "sample_weight"):
        raise TypeError(f"{type(weak_learner).__name__}.fit does not take sample_weight; use another weak learner "
                        "or set weak_sample_size to train it on samples drawn from D_t")
    rng = np.random.default_rng(check_random_state(random_state).randint(2**31 - 1))
    m, T = X.shape[0], n_rounds or bhk_rounds(gamma, delta)
    log1mg = math.log1p(-gamma)
    search = StumpSearch(X, y) if weak_learner is None and weak_sample_size is None else None

    log_w = np.full(m, math.log(delta))  # lazy: log N_t (cumulative, unprojected); greedy: log of the current M
    log_c, mu_bound = 0.0, delta
    counter = QueryCounter()
    hyps, proj_rounds = [], []
    smooth, dens, adv, capped = (np.empty(T) for _ in range(4))
    measures = np.empty((T, m)) if record_measures else None
    for t in range(T):
        M = _measure(log_w, log_c)
        mu = float(M.mean())
        smooth[t], dens[t], capped[t] = M.max() / mu, mu, bool(np.any(log_c + log_w >= 0.0))
        if record_measures:
            measures[t] = M

        # weak learner on D_t = M_t / |M_t| (all points with weights, or a sample drawn from D_t)
        if search is not None:
            f, thr, pol, _ = search.best(M)
            h = DecisionStump()._set_fitted(f, thr, pol, X.shape[1])
            pred = stump_votes(X, np.array([f]), np.array([thr]), np.array([pol]))[0]
        else:
            if weak_sample_size is not None:
                idx, trials = _rejection_sample(M, weak_sample_size, rng)
                counter.add_sampling(weak_sample_size, trials, mu)
                Xs, ys, ws = X[idx], y[idx], None
            else:
                Xs, ys, ws = X, y, M / mu  # weights of mean 1, so regularised learners see the usual scale
            if np.unique(ys).size < 2:  # a one-class sample: the best hypothesis on it is constant
                h = DecisionStump()._set_fitted(0, -np.inf, int(ys[0]), X.shape[1])
            elif weak_learner is None:
                f, thr, pol, _ = StumpSearch(Xs, ys).best(np.ones(ys.size))
                h = DecisionStump()._set_fitted(f, thr, pol, X.shape[1])
            else:
                h = clone(weak_learner)
                if "random_state" in h.get_params():
                    h.set_params(random_state=int(rng.integers(2**31 - 1)))
                h.fit(Xs, ys) if ws is None else h.fit(Xs, ys, sample_weight=ws)
            pred = np.asarray(h.predict(X), dtype=float)
        hyps.append(h)
        correct = pred == y
        acc_true = float(M[correct].sum() / M.sum())
        adv[t] = acc_true - 0.5
        if t == T - 1:
            break

        # multiplicative update N_{t+1} = M_t (1 - gamma)^{l_t}, then (maybe) project
        acc = acc_true if weak_sample_size is None else float(correct[idx].mean())
        log_w = log_w + correct * log1mg
        mu_bound *= 1.0 - gamma * acc
        if projection == "none":
            continue
        due = project_every is not None and (t + 1) % project_every == 0
        if projection == "greedy" or mu_bound < trigger * delta or due:
            if approx:
                # known bound on c: every entry of N is >= delta (1 - gamma)^(t + 1)
                log_c_hi = -(math.log(delta) + (t + 1) * log1mg)
                log_c, mu_hat, _ = _approx_log_scale(log_w, delta, kappa, eta, rng, log_c_hi, counter)
                mu_bound = mu_hat / (1.0 + kappa / 3.0)  # lower confidence bound on the new density
            else:
                log_c = _exact_log_scale(log_w, delta)
                counter.add_exact(m)
                mu_bound = float(_measure(log_w, log_c).mean())
            proj_rounds.append(t)
            if projection == "greedy":  # greedy keeps only the projected measure
                log_w, log_c = np.minimum(0.0, log_c + log_w), 0.0

    n = len(hyps)
    stump_arrays = None
    if weak_learner is None:
        stump_arrays = tuple(np.array(a) for a in zip(*[(h.feature_, h.threshold_, h.polarity_) for h in hyps]))
    return BoostingTrace(hyps, stump_arrays, len(proj_rounds), proj_rounds, smooth[:n], dens[:n], adv[:n],
                         capped[:n].astype(bool), counter, None if measures is None else measures[:n])


# main class

class LazyProjectionBoost(ClassifierMixin, BaseEstimator):
    """Smooth boosting with lazy approximate KL projections: QuantumBoost [B10], classically.

    Parameters
    ----------
    weak_learner : sklearn classifier or None. None: an exact weighted-error decision stump.
    gamma : assumed weak-learner advantage, in (0, 1); the update is (1 - gamma)^{l_t}.
    epsilon : target training error = density delta of the measures, in (0, 1].
    n_estimators : boosting rounds T; None: T = ceil(4 ln(1/epsilon) / gamma^2).
    projection : "lazy" (scale recomputed from cumulative weights when triggered), "greedy" (BHK: project
        every round) or "none" (plain multiplicative weights).
    project_every : lazy only: also project every this many rounds (None: only on the trigger).
    trigger : lazy only: project when the density bound falls below trigger * epsilon.
    approx : approximate projections from sampled density estimates (True) or exact water-filling (False).
    kappa, eta : relative accuracy and failure probability of one approximate projection.
    weak_sample_size : train the weak learner on this many draws from D_t (None: on all points, weighted).
    random_state : seed for sampling and the weak learner.

    Attributes
    ----------
    classes_, n_features_in_, estimators_ (the h_t), n_estimators_ (T), n_projections_, projection_rounds_,
    smoothness_history_ (max_i D_t(i) m per round), density_history_ (mu(M_t)), advantage_history_,
    query_counts_ (dict: classical counts spent and quantum counts from an analytic MODEL, see queries.py).

    Only binary targets are supported: others raise ``ValueError("Only binary classification is supported...")``,
    and the estimator tag ``classifier_tags.multi_class = False`` tells ``check_estimator`` so.
    """

    def __init__(self, weak_learner=None, *, gamma: float = 0.1, epsilon: float = 0.1,
                 n_estimators: int | None = None, projection: str = "lazy", project_every: int | None = None,
                 trigger: float = 0.5, approx: bool = True, kappa: float = 0.1, eta: float = 0.05,
                 weak_sample_size: int | None = None, random_state=None) -> None:
        self.weak_learner = weak_learner
        self.gamma = gamma
        self.epsilon = epsilon
        self.n_estimators = n_estimators
        self.projection = projection
        self.project_every = project_every
        self.trigger = trigger
        self.approx = approx
        self.kappa = kappa
        self.eta = eta
        self.weak_sample_size = weak_sample_size
        self.random_state = random_state

    def fit(self, X, y) -> "LazyProjectionBoost":
        _check_params(self.gamma, self.epsilon, self.n_estimators, self.projection, self.project_every,
                      self.trigger, self.kappa, self.eta, self.weak_sample_size)
        X, y = validate_data(self, X, y, dtype=np.float64)
        self.classes_, y_pm = binary_targets(y, type(self).__name__)
        trace = boost(X, y_pm, weak_learner=self.weak_learner, gamma=self.gamma, delta=self.epsilon,
                      n_rounds=self.n_estimators, projection=self.projection, project_every=self.project_every,
                      trigger=self.trigger, approx=bool(self.approx), kappa=self.kappa, eta=self.eta,
                      weak_sample_size=self.weak_sample_size, random_state=self.random_state)
        self.trace_ = trace
        self.estimators_ = trace.hypotheses
        self.n_estimators_ = len(trace.hypotheses)
        self.n_projections_ = trace.n_projections
        self.projection_rounds_ = trace.projection_rounds
        self.smoothness_history_ = trace.smoothness
        self.density_history_ = trace.density
        self.advantage_history_ = trace.advantage
        self.query_counts_ = trace.counter.as_dict()
        return self

    def _votes(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.trace_.votes(X)

    def decision_function(self, X) -> np.ndarray:
        """(1/T) sum_t h_t(x) in [-1, 1]; > 0 means classes_[1]."""
        return self._votes(X).mean(axis=0)

    def predict(self, X) -> np.ndarray:
        """Majority vote sign(sum_t h_t(x)); ties go to classes_[0]."""
        d = self.decision_function(X)
        return self.classes_[(d > 0).astype(int)]

    def staged_decision_function(self, X):
        """Yield the decision function after rounds 1, 2, ..., T."""
        votes = self._votes(X)
        for t, s in enumerate(np.cumsum(votes, axis=0)):
            yield s / (t + 1)

    def staged_predict(self, X):
        """Yield the majority-vote predictions after rounds 1, 2, ..., T."""
        for d in self.staged_decision_function(X):
            yield self.classes_[(d > 0).astype(int)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # binary only: fit raises "Only binary classification ..."
        return tags
