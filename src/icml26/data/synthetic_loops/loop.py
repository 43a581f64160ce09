"""A generation-training loop and its data filters [A05].

Closed loop:  D_t ~ p_theta_t,  theta_{t+1} = Fit(D_t). The chain Y -> theta_0 -> D_0 -> theta_1 -> ... is Markov,
so by the data processing inequality I(Y; theta_{t+1}) <= I(Y; theta_t): task information can only fall.
Open loop:    D_t = Filter(S_t, E), S_t ~ p_theta_t, where the external signal E (verifier, environment, rubric)
depends on Y, so information can grow.

Data are tuples of arrays sharing a sample axis (``axis``); a filter returns the (possibly rewritten) data and a
weight per sample: 0/1 for a binary verifier (coarse), graded in [0, 1] for a rubric (fine), the reference output
for imitation (instance-level), and the plurality answer for majority vote (a filter that is information-closed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

Data = tuple[np.ndarray, ...]


# filters

class VerifierFilter:
    """Binary acceptance (coarse signal): weight 1[v(data)] per sample. ``v`` carries outside information.

    ``noise`` (default 0: a perfect verifier) flips each verdict independently with that probability, drawn from
    the loop's generator: an imperfect verifier that accepts a wrong output with probability ``noise`` and rejects
    a right one with the same probability. Loops decided by a perfect oracle are near-guaranteed to improve; a
    noisy one can fail (it injects less than one bit of task information per verdict)."""

    def __init__(self, verifier: Callable[[Data], np.ndarray], noise: float = 0.0) -> None:
        if not (isinstance(noise, (int, float)) and 0.0 <= noise < 0.5):
            raise ValueError(f"noise must be a flip probability in [0, 0.5), got {noise!r}")
        self.verifier, self.noise = verifier, float(noise)

    def __call__(self, data: Data, rng: np.random.Generator) -> tuple[Data, np.ndarray]:
        v = np.asarray(self.verifier(data), dtype=bool)
        if self.noise > 0:
            v = v ^ (rng.random(v.shape) < self.noise)
        return data, v.astype(float)


class RubricWeighting:
    """Graded scores in [0, 1] as sample weights (fine signal)."""

    def __init__(self, score: Callable[[Data], np.ndarray]) -> None:
        self.score = score

    def __call__(self, data: Data, rng: np.random.Generator) -> tuple[Data, np.ndarray]:
        w = np.asarray(self.score(data), dtype=float)
        if np.any((w < 0) | (w > 1)) or not np.all(np.isfinite(w)):
            raise ValueError("rubric scores must be finite and in [0, 1]")
        return data, w


class AcceptedRubric:
    """Fine signal among acceptable outputs: ``score(data, rng)`` in [0, 1], zero outside the acceptable set
    (e.g. ``accepted_posterior_rubric``); the generator lets the score share a noisy verifier's flips."""

    def __init__(self, score: Callable[[Data, np.random.Generator], np.ndarray]) -> None:
        self.score = score

    def __call__(self, data: Data, rng: np.random.Generator) -> tuple[Data, np.ndarray]:
        w = np.asarray(self.score(data, rng), dtype=float)
        if np.any((w < 0) | (w > 1)) or not np.all(np.isfinite(w)):
            raise ValueError("rubric scores must be finite and in [0, 1]")
        return data, w


class ImitationTarget:
    """Instance-level supervision: replace each sample's output (last array) by the reference output."""

    def __init__(self, reference: Callable[[Data], np.ndarray]) -> None:
        self.reference = reference

    def __call__(self, data: Data, rng: np.random.Generator) -> tuple[Data, np.ndarray]:
        out = np.asarray(self.reference(data))
        return (*data[:-1], out), np.ones(out.shape, dtype=float)


class MajorityVoteFilter:
    """Keep the samples whose output (last array) is the plurality output of their group (first array).

    Looks like a filter but uses only the model's own samples: information-closed. Ties go to the smallest
    output id. Data: (group ids (n,), outputs (n,)) with integer ids.
    """

    def __call__(self, data: Data, rng: np.random.Generator) -> tuple[Data, np.ndarray]:
        g, a = (np.asarray(x) for x in (data[0], data[-1]))
        ng, na = int(g.max()) + 1, int(a.max()) + 1
        counts = np.zeros((ng, na))
        np.add.at(counts, (g, a), 1.0)
        return data, (a == counts.argmax(1)[g]).astype(float)


# loop

@dataclass
class SyntheticDataLoop:
    """Generation-training loop: sample, filter, (accumulate,) refit, for ``rounds`` generations [A05].

    Args:
        fit: ``fit(data, weights, previous_model) -> model`` (weighted fit; keep the previous model where no
            sample has weight).
        sample: ``sample(model, n, rng) -> data``.
        filter: ``None`` (information-closed) or a filter ``(data, rng) -> (data, weights)``.
        keep_previous: train on all data generated so far (accumulate) instead of the last round only.
        mix_real: fraction of ``n_per_round`` drawn from the real data each round (needs ``real``).
        n_per_round: samples generated per round.
        rounds: generations.
        metrics: ``metrics(model) -> dict`` recorded for generation 0 (the initial model) and after each round.
        axis: the sample axis of the data arrays.
    """

    fit: Callable[[Data, np.ndarray, Any], Any]
    sample: Callable[[Any, int, np.random.Generator], Data]
    filter: Callable[[Data, np.random.Generator], tuple[Data, np.ndarray]] | None = None
    keep_previous: bool = False
    mix_real: float = 0.0
    n_per_round: int = 100
    rounds: int = 10
    metrics: Callable[[Any], dict[str, float]] | None = None
    axis: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.n_per_round, (int, np.integer)) or self.n_per_round < 1:
            raise ValueError(f"n_per_round must be a positive int, got {self.n_per_round!r}")
        if not isinstance(self.rounds, (int, np.integer)) or self.rounds < 0:
            raise ValueError(f"rounds must be an int >= 0, got {self.rounds!r}")
        if not 0.0 <= self.mix_real <= 1.0:
            raise ValueError(f"mix_real must be in [0, 1], got {self.mix_real}")

    def run(self, model: Any, real: Data | None = None, rng: np.random.Generator | int | None = None
            ) -> list[dict[str, Any]]:
        """History: one dict per generation (0 = the initial model) with the metrics and ``model``."""
        if self.mix_real > 0 and real is None:
            raise ValueError("mix_real > 0 needs real data: pass real=(arrays...)")
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        history = [self._record(0, model, np.nan)]
        pool: list[tuple[Data, np.ndarray]] = []
        n_real = int(round(self.mix_real * self.n_per_round))
        for t in range(1, self.rounds + 1):
            data = self.sample(model, self.n_per_round - n_real, rng)
            data, w = self.filter(data, rng) if self.filter is not None else (data, np.ones(data[0].shape[
                : self.axis + 1]))
            if n_real:
                n_avail = real[0].shape[self.axis]
                idx = rng.choice(n_avail, n_real, replace=n_real > n_avail)
                rd = tuple(np.take(x, idx, axis=self.axis) for x in real)
                data = tuple(np.concatenate([a, b], axis=self.axis) for a, b in zip(data, rd))
                w = np.concatenate([w, np.ones(w.shape[: self.axis] + (n_real,))], axis=self.axis)
            pool = [*pool, (data, w)] if self.keep_previous else [(data, w)]
            all_data = tuple(np.concatenate([p[0][i] for p in pool], axis=self.axis) for i in range(len(data)))
            all_w = np.concatenate([p[1] for p in pool], axis=self.axis)
            model = self.fit(all_data, all_w, model)
            history.append(self._record(t, model, float(np.mean(w))))
        return history

    def _record(self, t: int, model: Any, kept: float) -> dict[str, Any]:
        rec: dict[str, Any] = {"generation": t, "kept_fraction": kept, "model": model}
        if self.metrics is not None:
            rec |= self.metrics(model)
        return rec
