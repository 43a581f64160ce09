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

from icml26.harness import validate as chk

Data = tuple[np.ndarray, ...]


def _callable(name: str, f: Any, *, optional: bool = False) -> Any:
    if (f is None and optional) or callable(f):
        return f
    raise TypeError(f"{name} must be a callable{' or None' if optional else ''}, got {chk.describe(f)}")


def _data(data: Any) -> Data:
    if not isinstance(data, tuple) or not data:
        raise TypeError(f"data must be a non-empty tuple of arrays sharing a sample axis, got {chk.describe(data)}")
    return data


# filters

class VerifierFilter:
    """Binary acceptance (coarse signal): weight 1[v(data)] per sample. ``v`` carries outside information.

    ``noise`` (default 0: a perfect verifier) flips each verdict independently with that probability, drawn from
    the loop's generator: an imperfect verifier that accepts a wrong output with probability ``noise`` and rejects
    a right one with the same probability. Loops decided by a perfect oracle are near-guaranteed to improve; a
    noisy one can fail (it injects less than one bit of task information per verdict)."""

    def __init__(self, verifier: Callable[[Data], np.ndarray], noise: float = 0.0) -> None:
        noise = chk.in_range("noise (flip probability)", noise, 0.0, 0.5, high_open=True)
        self.verifier, self.noise = _callable("verifier", verifier), noise

    def __call__(self, data: Data, rng: np.random.Generator) -> tuple[Data, np.ndarray]:
        v = np.asarray(self.verifier(_data(data)))
        if v.dtype != bool and not np.isin(v, (0, 1)).all():
            raise ValueError("the verifier must return one boolean (or 0/1) verdict per sample")
        v = v.astype(bool)
        if self.noise > 0:
            v = v ^ (rng.random(v.shape) < self.noise)
        return data, v.astype(float)


class RubricWeighting:
    """Graded scores in [0, 1] as sample weights (fine signal)."""

    def __init__(self, score: Callable[[Data], np.ndarray]) -> None:
        self.score = _callable("score", score)

    def __call__(self, data: Data, rng: np.random.Generator) -> tuple[Data, np.ndarray]:
        w = np.asarray(self.score(_data(data)), dtype=float)
        if np.any((w < 0) | (w > 1)) or not np.all(np.isfinite(w)):
            raise ValueError("rubric scores must be finite and in [0, 1]")
        return data, w


class AcceptedRubric:
    """Fine signal among acceptable outputs: ``score(data, rng)`` in [0, 1], zero outside the acceptable set
    (e.g. ``accepted_posterior_rubric``); the generator lets the score share a noisy verifier's flips."""

    def __init__(self, score: Callable[[Data, np.random.Generator], np.ndarray]) -> None:
        self.score = _callable("score", score)

    def __call__(self, data: Data, rng: np.random.Generator) -> tuple[Data, np.ndarray]:
        w = np.asarray(self.score(_data(data), rng), dtype=float)
        if np.any((w < 0) | (w > 1)) or not np.all(np.isfinite(w)):
            raise ValueError("rubric scores must be finite and in [0, 1]")
        return data, w


class ImitationTarget:
    """Instance-level supervision: replace each sample's output (last array) by the reference output."""

    def __init__(self, reference: Callable[[Data], np.ndarray]) -> None:
        self.reference = _callable("reference", reference)

    def __call__(self, data: Data, rng: np.random.Generator) -> tuple[Data, np.ndarray]:
        out = np.asarray(self.reference(_data(data)))
        return (*data[:-1], out), np.ones(out.shape, dtype=float)


class MajorityVoteFilter:
    """Keep the samples whose output (last array) is the plurality output of their group (first array).

    Looks like a filter but uses only the model's own samples: information-closed. Ties go to the smallest
    output id. Data: (group ids (n,), outputs (n,)) with integer ids.
    """

    def __call__(self, data: Data, rng: np.random.Generator) -> tuple[Data, np.ndarray]:
        data = _data(data)
        g, a = (np.asarray(x) for x in (data[0], data[-1]))
        chk.same_length(group_ids=g, outputs=a)
        chk.non_empty("data[0] (group ids)", g)
        for name, x in (("data[0] (group ids)", g), ("data[-1] (outputs)", a)):
            if x.dtype.kind not in "iu":
                raise TypeError(f"{name} must hold integer ids, got dtype {x.dtype}")
            if x.min() < 0:
                raise ValueError(f"{name} must hold ids >= 0, got a minimum of {x.min()}")
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
        _callable("fit", self.fit)
        _callable("sample", self.sample)
        _callable("filter", self.filter, optional=True)
        _callable("metrics", self.metrics, optional=True)
        self.n_per_round = chk.positive_int("n_per_round", self.n_per_round)
        self.rounds = chk.non_negative_int("rounds", self.rounds)
        self.mix_real = chk.probability("mix_real", self.mix_real)
        self.axis = chk.non_negative_int("axis", self.axis)

    def run(self, model: Any, real: Data | None = None, rng: np.random.Generator | int | None = None
            ) -> list[dict[str, Any]]:
        """History: one dict per generation (0 = the initial model) with the metrics and ``model``."""
        if self.mix_real > 0 and real is None:
            raise ValueError("mix_real > 0 needs real data: pass real=(arrays...)")
        if real is not None:
            _data(real)
        if not (rng is None or isinstance(rng, np.random.Generator)):
            rng = np.random.default_rng(chk.non_negative_int("rng (a seed)", rng))
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
