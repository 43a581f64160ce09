"""Known mixture laws to generate synthetic runs from [A18 synthetic arm] (parameters: our choice).

Two ground-truth families, so that CAMEL is tested both where it is the true model and where it is not:

- :class:`SyntheticMixtureLaw` (family ``"camel"``): a CAMEL law itself,
  L_i(N, r) = E_i + A_i (N/N0)^-alpha_i + exp( sum_j (t_ij + s_ij log(N/N0)) r_j ).
  Three sources, three validation domains, each helped mostly by its own source; domain 3's benefit from source 3
  grows with size (s_33 < 0, "capacity-hungry", like arithmetic), so source 3's weight in the optimal mixture grows
  with N.
- :class:`PowerMixtureLaw` (family ``"power"``): a law from a different family, with a mixture-dependent size
  exponent and a power law in the effective data of each domain (in the spirit of the joint laws of
  "Scaling Laws for Optimal Data Mixtures", arXiv 2507.09404):
  L_i(N, r) = E_i + A_i (N/N0)^-(alpha_i + sum_j a_ij r_j) + B_i (eps + sum_j c_ij r_j)^-beta_i.
  The capacity-mixture interaction is the exponent term a_33 > 0 (source 3 steepens domain 3's size curve), not
  an exponential in r, so CAMEL and every baseline are misspecified on it; its optimum also moves toward source 3
  with N (r*_3 about 0.22 at 1M, 0.39 at 8M, 0.43 at 8e7).

Both add log-normal noise ``noise`` to each loss and expose ``losses``, ``predict``, ``predict_target`` and
``optimal_mixture``. ``TRUTHS`` also holds ``"camel-skewed"``: the CAMEL truth with unequal target weights
(:data:`SKEWED_WEIGHTS`), whose optimum at N* = 8e7, (0.725, 0, 0.275), lies far from the centroid (regret 0.075)
and from every vertex (>= 0.029), and whose true 8M optimum carried to N* costs 0.0037 (the uniform-weight truth's
optimum at N*, (0.276, 0.355, 0.370), is close to the centroid, regret 0.0007, so a law-free centroid is a strong
choice there). The weights were chosen by these properties of the truth before any law was fitted to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np

from icml26.harness import validate as v

from .law import CAMELLaw, check_mixtures, minimize_on_simplex, sizes_for


def _default_params() -> np.ndarray:
    # rows: domains; columns: E, A, alpha, t_1..t_3, s_1..s_3
    return np.array([
        [1.2, 1.0, 0.30, -1.2, -0.2, -0.1, 0.00, 0.00, 0.00],
        [1.0, 1.2, 0.35, -0.2, -1.2, -0.1, 0.00, 0.00, 0.00],
        [1.5, 0.8, 0.25, -0.1, -0.2, -0.8, 0.00, 0.00, -0.20],
    ])


class _Truth:
    N0: float
    weights: np.ndarray
    noise: float

    def predict(self, N: np.ndarray | float, R: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_common(self) -> None:
        self.N0 = v.positive("N0", self.N0)
        self.noise = v.non_negative("noise", self.noise)
        self.weights = np.asarray(v.probability_vector("weights", self.weights), dtype=float)
        if self.weights.shape != (3,):
            raise ValueError(f"weights must be 3 target weights (one per validation domain), got shape "
                             f"{self.weights.shape}")

    def predict_target(self, N: np.ndarray | float, R: np.ndarray) -> np.ndarray:
        """True target loss sum_i w_i L_i (M,)."""
        return self.predict(N, R) @ np.asarray(self.weights, dtype=float)

    def optimal_mixture(self, N_target: float) -> np.ndarray:
        """The true argmin over the simplex of the target loss at ``N_target``."""
        N_target = v.positive("N_target", N_target)
        return minimize_on_simplex(lambda R: self.predict_target(N_target, R), 3)

    def losses(self, N: np.ndarray, R: np.ndarray, rng: np.random.Generator | None = None,
               z: np.ndarray | None = None) -> np.ndarray:
        """Per-domain losses (n, D) of runs (N, R); noisy (log-normal, sd ``noise``) when ``rng`` is given, or with
        the given standard-normal draws ``z`` (n, D) (common random numbers across designs)."""
        R = check_mixtures(R, "R", n_sources=3)
        N = sizes_for(N, R.shape[0])
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)) or None, got {v.describe(rng)}")
        L = self.predict(N, R)
        if z is not None:
            if rng is not None:
                raise ValueError("pass rng or z (the noise draws), not both")
            z = np.asarray(v.finite("z", z), dtype=float)
            if z.shape != L.shape:
                raise ValueError(f"z must hold one standard-normal draw per loss, shape {L.shape}, got {z.shape}")
            return L * np.exp(self.noise * z)
        return L if rng is None else L * np.exp(self.noise * rng.standard_normal(L.shape))


@dataclass
class SyntheticMixtureLaw(_Truth):
    """Ground-truth CAMEL law (family ``"camel"``) with log-normal noise ``noise`` on each loss."""

    params: np.ndarray = field(default_factory=_default_params)
    N0: float = 1e6
    weights: np.ndarray = field(default_factory=lambda: np.full(3, 1 / 3))
    noise: float = 0.005
    family: str = "camel"

    def __post_init__(self) -> None:
        self._check_common()
        self.params = np.asarray(v.finite("params", self.params), dtype=float)
        if self.params.shape != (3, 9):
            raise ValueError(f"params must be a (3, 9) array, rows (E, A, alpha, t_1..t_3, s_1..s_3) per domain, got "
                             f"shape {self.params.shape}")

    def law(self) -> CAMELLaw:
        law = CAMELLaw()
        law.params_, law.N0_, law.weights_, law.n_sources_ = np.asarray(self.params, dtype=float), self.N0, \
            np.asarray(self.weights, dtype=float), (self.params.shape[1] - 3) // 2
        law.stderr_ = np.zeros_like(law.params_)
        return law

    def predict(self, N: np.ndarray | float, R: np.ndarray) -> np.ndarray:
        """True per-domain losses (M, D) at sizes ``N`` (scalar or (M,)) and mixtures ``R`` (M, 3)."""
        return self.law().predict(N, R)

    def optimal_mixture(self, N_target: float) -> np.ndarray:
        """The true argmin over the simplex of the target loss at ``N_target``."""
        return self.law().optimal_mixture(N_target)


@dataclass
class PowerMixtureLaw(_Truth):
    """Ground truth from a different family (``"power"``; see the module docstring), log-normal noise ``noise``.

    L_i(N, r) = E_i + A_i (N/N0)^-(alpha_i + sum_j a_ij r_j) + B_i (eps + sum_j c_ij r_j)^-beta_i
    """

    E: np.ndarray = field(default_factory=lambda: np.array([1.2, 1.0, 1.5]))
    A: np.ndarray = field(default_factory=lambda: np.array([1.0, 1.2, 1.2]))
    alpha: np.ndarray = field(default_factory=lambda: np.array([0.30, 0.35, 0.10]))
    a: np.ndarray = field(default_factory=lambda: np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.30]]))
    B: np.ndarray = field(default_factory=lambda: np.array([0.5, 0.6, 0.4]))
    c: np.ndarray = field(default_factory=lambda: np.array([[1.0, 0.2, 0.1], [0.2, 1.0, 0.1], [0.1, 0.2, 1.0]]))
    beta: np.ndarray = field(default_factory=lambda: np.array([0.5, 0.5, 0.5]))
    eps: float = 0.05
    N0: float = 1e6
    weights: np.ndarray = field(default_factory=lambda: np.full(3, 1 / 3))
    noise: float = 0.005
    family: str = "power"

    def __post_init__(self) -> None:
        self._check_common()
        for name, shape in (("E", (3,)), ("A", (3,)), ("alpha", (3,)), ("a", (3, 3)), ("B", (3,)), ("c", (3, 3)),
                            ("beta", (3,))):
            value = np.asarray(v.finite(name, getattr(self, name)), dtype=float)
            if value.shape != shape:
                raise ValueError(f"{name} must have shape {shape}, got {value.shape}")
            setattr(self, name, value)
        if (self.c < 0).any():
            raise ValueError("c must be non-negative (the effective data of a domain is eps + sum_j c_ij r_j)")
        self.eps = v.positive("eps", self.eps)

    def predict(self, N: np.ndarray | float, R: np.ndarray) -> np.ndarray:
        """True per-domain losses (M, D) at sizes ``N`` (scalar or (M,)) and mixtures ``R`` (M, 3)."""
        R = check_mixtures(R, "R", n_sources=3)
        N = sizes_for(N, R.shape[0])
        logn = np.log(N / self.N0)[:, None]
        expo = self.alpha[None, :] + R @ np.asarray(self.a, dtype=float).T
        return (self.E[None, :] + self.A[None, :] * np.exp(-expo * logn)
                + self.B[None, :] * (self.eps + R @ np.asarray(self.c, dtype=float).T) ** (-self.beta[None, :]))


#: target weights of the ``"camel-skewed"`` truth (see the module docstring for how they were chosen)
SKEWED_WEIGHTS = (0.6, 0.1, 0.3)

TRUTHS = {"camel": SyntheticMixtureLaw,
          "camel-skewed": partial(SyntheticMixtureLaw, weights=np.array(SKEWED_WEIGHTS), family="camel-skewed"),
          "power": PowerMixtureLaw}

__all__ = ["SyntheticMixtureLaw", "PowerMixtureLaw", "TRUTHS", "SKEWED_WEIGHTS"]
