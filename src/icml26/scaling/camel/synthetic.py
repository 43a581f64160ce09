"""A known capacity-aware mixture law to generate synthetic runs from [A18 synthetic arm] (parameters: our choice).

Three sources, three validation domains, each helped mostly by its own source; domain 3's benefit from source 3
grows with size (s_33 < 0, "capacity-hungry", like arithmetic), so source 3's weight in the optimal mixture
grows with N."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .law import CAMELLaw, check_mixtures, check_sizes


def _default_params() -> np.ndarray:
    # rows: domains; columns: E, A, alpha, t_1..t_3, s_1..s_3
    return np.array([
        [1.2, 1.0, 0.30, -1.2, -0.2, -0.1, 0.00, 0.00, 0.00],
        [1.0, 1.2, 0.35, -0.2, -1.2, -0.1, 0.00, 0.00, 0.00],
        [1.5, 0.8, 0.25, -0.1, -0.2, -0.8, 0.00, 0.00, -0.20],
    ])


@dataclass
class SyntheticMixtureLaw:
    """Ground-truth CAMEL law with log-normal noise ``noise`` on each loss."""

    params: np.ndarray = field(default_factory=_default_params)
    N0: float = 1e6
    weights: np.ndarray = field(default_factory=lambda: np.full(3, 1 / 3))
    noise: float = 0.005

    def law(self) -> CAMELLaw:
        law = CAMELLaw()
        law.params_, law.N0_, law.weights_, law.n_sources_ = np.asarray(self.params, dtype=float), self.N0, \
            np.asarray(self.weights, dtype=float), (self.params.shape[1] - 3) // 2
        law.stderr_ = np.zeros_like(law.params_)
        return law

    def losses(self, N: np.ndarray, R: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """Per-domain losses (n, D) of runs (N, R); noisy when ``rng`` is given."""
        R, N = check_mixtures(R), check_sizes(N)
        L = self.law().predict(N, R)
        return L if rng is None else L * np.exp(self.noise * rng.standard_normal(L.shape))


__all__ = ["SyntheticMixtureLaw"]
