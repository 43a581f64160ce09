"""Oracle-query accounting for QuantumBoost, classically [B10].

Two kinds of count are kept side by side:

* ``classical_*``: what this classical implementation actually spends (samples it really draws, entries it
  really reads).
* ``quantum_model_*``: an ANALYTIC COST MODEL of what the quantum subroutines of [B10] would spend for the same
  task. Nothing quantum is simulated; the numbers come from the textbook query bounds below.

Density estimation (mean mu >= mu_lo of a [0,1]-valued array to relative error kappa, failure <= eta):
  classical (multiplicative Chernoff, P(|mu_hat - mu| > kappa mu) <= 2 exp(-kappa^2 mu s / (2 + kappa))):
      s = ceil((2 + kappa) ln(2 / eta) / (kappa^2 mu_lo))                       ~ 1 / (kappa^2 delta)
  quantum model (amplitude estimation, Brassard-Hoyer-Mosca-Tapp 2002 Thm 12: Q queries give
  |a_hat - a| <= 2 pi sqrt(a(1-a)) / Q + pi^2 / Q^2 with probability >= 8 / pi^2; median of R runs):
      Q = ceil(3 pi / (kappa sqrt(mu_lo))),  R = ceil(ln(1 / eta) / (2 (8/pi^2 - 1/2)^2)),  cost Q * R
                                                                              ~ 1 / (kappa sqrt(delta))
Sampling one index from D = M / |M| (M in [0,1]^m, density mu):
  classical rejection sampling: pick i uniformly, accept w.p. M_i: 1 / mu queries per sample (we count the
  trials actually made); quantum model (amplitude amplification): ceil(pi / (4 sqrt(mu))) per sample.
An exact projection reads all m entries in both columns (no quantum speed-up is modelled for it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

AE_SUCCESS = 8.0 / math.pi**2  # success probability of one amplitude-estimation run
MODEL_NOTE = ("quantum_model_* counts are an analytic cost model (amplitude estimation / amplification query "
              "bounds), not a circuit simulation; classical_* counts are what this code actually spent")


def _check_rates(mu_lo: float, kappa: float, eta: float) -> None:
    if not 0.0 < mu_lo <= 1.0:
        raise ValueError(f"mu_lo must be in (0, 1], got {mu_lo}")
    if not 0.0 < kappa < 1.0:
        raise ValueError(f"kappa (relative accuracy) must be in (0, 1), got {kappa}")
    if not 0.0 < eta < 1.0:
        raise ValueError(f"eta (failure probability) must be in (0, 1), got {eta}")


def classical_estimate_queries(mu_lo: float, kappa: float, eta: float) -> int:
    """Uniform samples for a (1 +- kappa) estimate of a mean >= mu_lo w.p. >= 1 - eta (Chernoff) [B10]."""
    _check_rates(mu_lo, kappa, eta)
    return math.ceil((2.0 + kappa) * math.log(2.0 / eta) / (kappa**2 * mu_lo))


def quantum_estimate_queries(mu_lo: float, kappa: float, eta: float) -> int:
    """MODELLED oracle calls of median-of-R amplitude estimation for the same task (not simulated) [B10]."""
    _check_rates(mu_lo, kappa, eta)
    q = math.ceil(3.0 * math.pi / (kappa * math.sqrt(mu_lo)))
    r = math.ceil(math.log(1.0 / eta) / (2.0 * (AE_SUCCESS - 0.5) ** 2))
    return q * r


def quantum_sample_queries(mu: float) -> int:
    """MODELLED oracle calls of amplitude amplification to draw one index from M / |M| of density mu [B10]."""
    if not 0.0 < mu <= 1.0:
        raise ValueError(f"mu must be in (0, 1], got {mu}")
    return math.ceil(math.pi / (4.0 * math.sqrt(mu)))


@dataclass
class QueryCounter:
    """Running totals of oracle queries, classical (spent) and quantum (modelled) [B10]. See module docstring."""

    exact_reads: int = 0
    density_estimates: int = 0
    classical_density: int = 0
    quantum_model_density: int = 0
    samples_drawn: int = 0
    classical_sampling: int = 0
    quantum_model_sampling: int = 0

    def add_exact(self, m: int) -> None:
        """An exact projection or density read all m entries."""
        self.exact_reads += int(m)

    def add_estimate(self, mu_lo: float, kappa: float, eta: float) -> int:
        """Book one density estimate; returns the classical sample size s to draw."""
        s = classical_estimate_queries(mu_lo, kappa, eta)
        self.density_estimates += 1
        self.classical_density += s
        self.quantum_model_density += quantum_estimate_queries(mu_lo, kappa, eta)
        return s

    def add_sampling(self, n_samples: int, n_trials: int, mu: float) -> None:
        """Book n_samples draws from D that took n_trials rejection-sampling trials."""
        self.samples_drawn += int(n_samples)
        self.classical_sampling += int(n_trials)
        self.quantum_model_sampling += int(n_samples) * quantum_sample_queries(mu)

    @property
    def classical_total(self) -> int:
        return self.exact_reads + self.classical_density + self.classical_sampling

    @property
    def quantum_model_total(self) -> int:
        return self.exact_reads + self.quantum_model_density + self.quantum_model_sampling

    def as_dict(self) -> dict[str, int | str]:
        d: dict[str, int | str] = dict(asdict(self))
        d["classical_total"] = self.classical_total
        d["quantum_model_total"] = self.quantum_model_total
        d["note"] = MODEL_NOTE
        return d
