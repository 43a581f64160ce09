"""Progress of one-time testbed builds (tokenizers, tiny LMs): never silent, never noisy.

A build reports through ``logging`` (loggers under ``icml26.testbeds``) at INFO: one line when it starts, one
at most every ``every_s`` seconds while it runs ("training toy-4L once: step 120/300, loss 2.41, ~35 s left"),
and one when it ends. The CLI shows these lines by default; a library user sees them only if they configure
logging. Progress bars (``icml26 prepare``) subscribe with :func:`listening` and get every step.

    >>> import logging
    >>> with BuildProgress(logging.getLogger("icml26.testbeds.demo"), "demo", total=3) as p:
    ...     for k in range(3):
    ...         p.update(k + 1)
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

# (testbed name, steps done, total steps, what is happening) -> None
Listener = Callable[[str, int, int, str], None]
_LISTENERS: list[Listener] = []
EVERY_S = 10.0


@contextmanager
def listening(fn: Listener) -> Iterator[None]:
    """Call ``fn(name, done, total, message)`` on every step of every build started inside the block."""
    _LISTENERS.append(fn)
    try:
        yield
    finally:
        _LISTENERS.remove(fn)


def _notify(name: str, done: int, total: int, message: str) -> None:
    for fn in list(_LISTENERS):
        fn(name, done, total, message)


class BuildProgress:
    """Reports a build of ``total`` steps: a start line, a line at most every ``every_s`` s, an end line."""

    def __init__(self, logger: logging.Logger, name: str, total: int, what: str = "training",
                 every_s: float | None = None) -> None:
        if total < 1:
            raise ValueError(f"total must be >= 1 step, got {total}")
        self.log, self.name, self.total, self.what = logger, name, int(total), what
        self.every_s = EVERY_S if every_s is None else every_s
        self.t0 = self.last = 0.0

    def __enter__(self) -> "BuildProgress":
        self.t0 = self.last = time.perf_counter()
        self.log.info("%s %s once: %d steps (cached afterwards)", self.what, self.name, self.total)
        _notify(self.name, 0, self.total, f"{self.what} {self.name}")
        return self

    def update(self, done: int, loss: object = None) -> None:
        """``done`` steps of ``total`` are finished; ``loss`` (optional: a number or a 0-d tensor, read only when a
        line is logged) is shown in the log line."""
        now = time.perf_counter()
        _notify(self.name, done, self.total, f"{self.what} {self.name}")
        if now - self.last < self.every_s or done >= self.total:
            return
        self.last = now
        left = (now - self.t0) / max(done, 1) * (self.total - done)
        extra = "" if loss is None else f", loss {float(loss):.3f}"  # type: ignore[arg-type]
        self.log.info("%s %s once: step %d/%d%s, ~%.0f s left", self.what, self.name, done, self.total, extra, left)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            _notify(self.name, self.total, self.total, f"{self.what} {self.name}")
            self.log.info("%s %s: done in %.0f s", self.what, self.name, time.perf_counter() - self.t0)


@contextmanager
def build_phase(logger: logging.Logger, name: str, what: str, every_s: float | None = None) -> Iterator[None]:
    """A build step without a step count (e.g. training a BPE tokenizer): a start line, a "still ..." line
    every ``every_s`` seconds while it runs (from a background thread), and an end line."""
    every = EVERY_S if every_s is None else every_s
    t0 = time.perf_counter()
    done = threading.Event()

    def beat() -> None:
        while not done.wait(every):
            logger.info("still %s (%.0f s so far)", what, time.perf_counter() - t0)

    logger.info("%s once ...", what)
    _notify(name, 0, 0, what)
    thread = threading.Thread(target=beat, name=f"icml26-progress-{name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
    logger.info("%s: done in %.0f s", what, time.perf_counter() - t0)


__all__ = ["BuildProgress", "build_phase", "listening", "Listener"]
