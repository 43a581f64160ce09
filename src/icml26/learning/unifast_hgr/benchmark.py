"""Cost of a loss's forward + backward as the feature dimension K grows [A17], with a time cap ("DNF")."""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable, Literal, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from icml26.harness import validate as v

LossFn = Callable[[Tensor, Tensor], Tensor]
Clock = Literal["wall", "cpu"]
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _fwd_bwd(loss: LossFn, f: Tensor, g: Tensor, clock: Callable[[], float]) -> tuple[float, bool]:
    """Seconds for loss(f, g) plus its gradient w.r.t. f and g, and whether loss and gradients are finite."""
    t0 = clock()
    value = loss(f, g)
    grads = torch.autograd.grad(value, (f, g))
    dt = clock() - t0
    finite = bool(torch.isfinite(value)) and all(bool(torch.isfinite(gr).all()) for gr in grads)
    return dt, finite


def benchmark_loss_scaling(
    losses: Mapping[str, LossFn],
    *,
    m: int,
    Ks: Sequence[int],
    reps: int = 5,
    warmup: int = 2,
    time_cap_s: float = 5.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    clock: Clock = "wall",
) -> dict[str, dict[str, list]]:
    """Time forward + backward of each loss on random (m, K) feature pairs for K in `Ks` (ascending).

    Per (loss, K): `warmup` untimed calls (fewer once a call takes > cap/4: big calls have no warm-up cost),
    then up to `reps` timed calls, stopping early once their total passes `time_cap_s`. A loss is stopped
    ("DNF") for the rest of the sweep once a call exceeds `time_cap_s`, or before a call whose projected time,
    last time * (K / K_prev)^p with p = max(1, the last local log-log slope), exceeds the cap (so a K^2 / K^3
    baseline is never started at a K where it would run for minutes or exhaust memory).

    Returns name -> {"K", "min_s", "median_s", "status", "finite"} lists aligned with `Ks`; times are NaN
    where the loss did not finish, status is "ok", "DNF (call > cap)" or "DNF (projected > cap)".
    clock="cpu" measures process CPU time (``time.process_time``) instead of wall time: with one torch thread
    it is the compute cost, unaffected by other processes sharing the CPU (the cap then applies to CPU time).
    """
    if not isinstance(losses, Mapping):
        raise TypeError(f"losses must be a mapping name -> loss(f, g), got {v.describe(losses)}")
    if not losses:
        raise ValueError("losses must name at least one loss")
    not_callable = [name for name, loss in losses.items() if not callable(loss)]
    if not_callable:
        raise TypeError(f"losses must map names to callables loss(f, g) -> scalar; not callable: {not_callable}")
    if isinstance(Ks, (str, bytes)) or not hasattr(Ks, "__iter__"):
        raise TypeError(f"Ks must be a sequence of positive ints, got {v.describe(Ks)}")
    Ks = [v.positive_int("each K in Ks", k) for k in Ks]
    if not Ks or Ks != sorted(Ks):
        raise ValueError(f"Ks must be a non-empty ascending list of positive ints, got {Ks}")
    if not isinstance(m, int) or isinstance(m, bool) or m < 2:
        raise ValueError(f"m must be an int >= 2, got {m!r}")
    reps, warmup = v.positive_int("reps", reps), v.non_negative_int("warmup", warmup)
    if not isinstance(time_cap_s, (int, float)) or isinstance(time_cap_s, bool) or not 0 < time_cap_s < math.inf:
        raise ValueError(f"need time_cap_s > 0 (finite seconds), got {time_cap_s!r}")
    v.non_negative_int("seed", seed)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    if clock not in CLOCKS:
        raise ValueError(f"unknown clock {clock!r}; use 'wall' or 'cpu'")
    tick = CLOCKS[clock]

    out = {name: {"K": list(Ks), "min_s": [], "median_s": [], "status": [], "finite": []} for name in losses}
    stopped: dict[str, str] = {}
    for K in Ks:
        gen = torch.Generator().manual_seed(seed * 1_000_003 + K)
        f = torch.randn(m, K, generator=gen, dtype=dtype).requires_grad_()
        g = (f.detach() + torch.randn(m, K, generator=gen, dtype=dtype)).requires_grad_()
        for name, loss in losses.items():
            rec = out[name]
            if name not in stopped:
                projected = _projected_time(rec, K)
                if projected > time_cap_s:
                    stopped[name] = "DNF (projected > cap)"
            if name in stopped:
                for key, val in (("min_s", math.nan), ("median_s", math.nan), ("status", stopped[name]), ("finite", False)):
                    rec[key].append(val)
                continue
            times, finite = [], True
            for _ in range(warmup):
                dt, ok = _fwd_bwd(loss, f, g, tick)
                finite &= ok
                if dt > time_cap_s / 4:
                    times.append(dt)  # a call this long has no warm-up overhead left to hide: count it
                    break
            while len(times) < reps and sum(times) <= time_cap_s and (not times or max(times) <= time_cap_s):
                dt, ok = _fwd_bwd(loss, f, g, tick)
                times.append(dt)
                finite &= ok
            if min(times) > time_cap_s:
                stopped[name] = "DNF (call > cap)"
                rec["min_s"].append(math.nan)
                rec["median_s"].append(math.nan)
                rec["status"].append(stopped[name])
            else:
                rec["min_s"].append(min(times))
                rec["median_s"].append(statistics.median(times))
                rec["status"].append("ok")
            rec["finite"].append(finite)
    return out


def _projected_time(rec: dict[str, list], K: int) -> float:
    done = [(k, t) for k, t in zip(rec["K"], rec["min_s"]) if math.isfinite(t)]
    if not done:
        return 0.0
    (k1, t1) = done[-1]
    p = 1.0
    if len(done) >= 2:
        (k0, t0) = done[-2]
        p = max(1.0, math.log(t1 / t0) / math.log(k1 / k0))
    return t1 * (K / k1) ** p


def loglog_slope(Ks: Sequence[float], times: Sequence[float], *, k_min: float = 0.0) -> float:
    """Least-squares slope of log(time) against log(K) over finite times with K >= k_min (NaN if < 2 points).

    ``Ks`` must be finite and positive; ``times`` may hold NaN (a loss that did not finish), which is skipped.
    """
    if isinstance(Ks, (str, bytes)) or isinstance(times, (str, bytes)):
        raise TypeError("Ks and times must be sequences of numbers, not strings")
    Ks_arr = v.finite("Ks", Ks)
    v.ndim("Ks", Ks_arr, 1)
    times_arr = np.asarray(v.ndim("times", times, 1), dtype=float)
    v.same_length(Ks=Ks_arr, times=times_arr)
    if len(Ks_arr) and float(np.min(Ks_arr)) <= 0:
        raise ValueError(f"Ks must be positive (log scale), got a minimum of {float(np.min(Ks_arr))}")
    k_min = v.finite_number("k_min", k_min)
    pts = [(k, t) for k, t in zip(Ks, times) if k >= k_min and math.isfinite(t) and t > 0]
    if len(pts) < 2:
        return math.nan
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])
