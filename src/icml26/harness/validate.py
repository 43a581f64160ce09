"""Argument checks shared by every paper's public entry points.

A library that researchers put their own data through must refuse bad input at the door: say which argument was
wrong, what it got and what it expects, before any work is done, instead of returning a number computed from
garbage or failing deep inside torch. These helpers raise ``TypeError`` (wrong kind of object) or ``ValueError``
(right kind, wrong value) with such a message, and return the value (converted where that is useful) so a check
reads as an assignment::

    from icml26.harness import validate as v

    def top_k_recall(scores, labels, k=5):
        k = v.positive_int("k", k)
        scores = v.finite("scores", scores)
        v.same_length(scores=scores, labels=labels)

Arrays may be numpy arrays, torch tensors or nested sequences; torch is never imported here (tensors are
recognised by their methods), so importing this module stays cheap. The checks are O(size of the input).
"""

from __future__ import annotations

import importlib
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any

__all__ = [
    "positive_int", "non_negative_int", "positive", "non_negative", "finite_number", "in_range", "probability",
    "one_of", "finite", "non_empty", "probability_vector", "ndim", "shape", "same_length", "indices",
    "require_fitted", "require_package", "describe", "keys",
]


def describe(value: Any) -> str:
    """A short description of ``value`` for an error message: its repr, or its type and shape for arrays."""
    shape_ = getattr(value, "shape", None)
    if shape_ is not None and not isinstance(value, numbers.Number):
        return f"{type(value).__name__} of shape {tuple(shape_)}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "detach") and hasattr(value, "isfinite")


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers.Integral):
        return True
    return _is_tensor(value) and getattr(value, "ndim", 1) == 0 and not value.is_floating_point()


def positive_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """An integer ``>= minimum`` (default 1): sizes, counts, dimensions, number of steps."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {describe(value)}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def non_negative_int(name: str, value: Any) -> int:
    """An integer ``>= 0``."""
    return positive_int(name, value, minimum=0)


def finite_number(name: str, value: Any) -> float:
    """A real, finite number (not NaN, not ±inf, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if _is_tensor(value) and getattr(value, "ndim", 1) == 0:
            value = float(value)
        else:
            raise TypeError(f"{name} must be a real number, got {describe(value)}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def positive(name: str, value: Any) -> float:
    """A finite number ``> 0``: step sizes, temperatures, scales, tolerances."""
    value = finite_number(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def non_negative(name: str, value: Any) -> float:
    """A finite number ``>= 0``."""
    value = finite_number(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def in_range(name: str, value: Any, low: float, high: float, *, low_open: bool = False,
             high_open: bool = False) -> float:
    """A finite number in the interval from ``low`` to ``high`` (closed unless ``low_open``/``high_open``)."""
    value = finite_number(name, value)
    below = value <= low if low_open else value < low
    above = value >= high if high_open else value > high
    if below or above:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be in {interval}, got {value}")
    return value


def probability(name: str, value: Any, *, open_: bool = False) -> float:
    """A number in [0, 1] (in (0, 1) with ``open_=True``): probabilities, fractions, quantiles."""
    return in_range(name, value, 0.0, 1.0, low_open=open_, high_open=open_)


def one_of(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """``value`` must be one of ``choices`` (strings such as a mode or a method name)."""
    options = list(choices)
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def _as_array(name: str, value: Any) -> Any:
    """numpy array or torch tensor as given; sequences become float numpy arrays."""
    if _is_tensor(value) or hasattr(value, "__array__") and hasattr(value, "shape"):
        return value
    import numpy as np

    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, Iterable)):
        raise TypeError(f"{name} must be an array (numpy, torch or a sequence of numbers), got {describe(value)}")
    try:
        return np.asarray(list(value) if not isinstance(value, Sequence) else value, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be an array of numbers, got {describe(value)} ({err})") from None


def finite(name: str, value: Any) -> Any:
    """An array with no NaN or ±inf entries; returned as given (sequences as a float numpy array)."""
    array = _as_array(name, value)
    if _is_tensor(array):
        if array.is_floating_point() or array.is_complex():
            bad = int((~array.detach().isfinite()).sum())
            if bad:
                raise ValueError(f"{name} has {bad} NaN or infinite entries (of {array.numel()}); "
                                 "clean or mask them before calling")
        return array
    import numpy as np

    arr = np.asarray(array)
    if arr.dtype.kind in "fc":
        bad = int((~np.isfinite(arr)).sum())
        if bad:
            raise ValueError(f"{name} has {bad} NaN or infinite entries (of {arr.size}); "
                             "clean or mask them before calling")
    elif arr.dtype.kind not in "biu":
        raise TypeError(f"{name} must hold numbers, got an array of dtype {arr.dtype}")
    return array


def non_empty(name: str, value: Any) -> Any:
    """A sequence, mapping or array with at least one element."""
    size = getattr(value, "size", None)
    if callable(size):  # torch
        size = value.numel()
    if size is None:
        try:
            size = len(value)
        except TypeError:
            raise TypeError(f"{name} must be a sequence or an array, got {describe(value)}") from None
    if int(size) == 0:
        raise ValueError(f"{name} is empty; pass at least one element")
    return value


def probability_vector(name: str, value: Any, *, atol: float = 1e-6) -> Any:
    """Entries in [0, 1] that sum to 1 along the last axis (within ``atol``)."""
    array = finite(name, value)
    if _is_tensor(array):
        data = array.detach().double()
        low, sums = float(data.min()) if data.numel() else 0.0, data.sum(-1)
        worst = float((sums - 1).abs().max()) if sums.numel() else 0.0
    else:
        import numpy as np

        data = np.asarray(array, dtype=float)
        low = float(data.min()) if data.size else 0.0
        worst = float(np.abs(data.sum(-1) - 1).max()) if data.size else 0.0
    non_empty(name, array)
    if low < 0:
        raise ValueError(f"{name} must be a probability vector: it has a negative entry ({low})")
    if worst > atol:
        raise ValueError(f"{name} must be a probability vector summing to 1 along its last axis; "
                         f"a sum is off by {worst:.3g} (normalise it first)")
    return array


def ndim(name: str, value: Any, *dims: int) -> Any:
    """An array with one of the given numbers of dimensions."""
    array = _as_array(name, value)
    if array.ndim not in dims:
        want = " or ".join(str(d) for d in dims)
        raise ValueError(f"{name} must have {want} dimensions, got {describe(array)}")
    return array


def shape(name: str, value: Any, expected: Sequence[int | None]) -> Any:
    """An array whose shape matches ``expected``; ``None`` entries match any size."""
    array = _as_array(name, value)
    got = tuple(array.shape)
    if len(got) != len(expected) or any(e is not None and g != e for g, e in zip(got, expected)):
        want = "(" + ", ".join("any" if e is None else str(e) for e in expected) + ")"
        raise ValueError(f"{name} must have shape {want}, got shape {got}")
    return array


def same_length(**arrays: Any) -> int:
    """Every argument has the same first dimension (``len``); returns it."""
    lengths = {}
    for key, value in arrays.items():
        shape_ = getattr(value, "shape", None)
        lengths[key] = int(shape_[0]) if shape_ is not None and len(shape_) else len(value)
    if len(set(lengths.values())) > 1:
        text = ", ".join(f"{k} has {n}" for k, n in lengths.items())
        raise ValueError(f"arguments must have the same length: {text}")
    return next(iter(lengths.values()), 0)


def indices(name: str, value: Any, size: int) -> Any:
    """Integer labels / indices in ``[0, size)`` (class labels, node ids, actions)."""
    array = _as_array(name, value)
    if _is_tensor(array):
        if array.is_floating_point() or array.is_complex():
            raise TypeError(f"{name} must hold integers, got a {array.dtype} tensor")
        low = int(array.min()) if array.numel() else 0
        high = int(array.max()) if array.numel() else 0
    else:
        import numpy as np

        arr = np.asarray(array)
        if arr.dtype.kind not in "biu":
            if arr.dtype.kind == "f" and arr.size and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
                arr = arr.astype(int)
            else:
                raise TypeError(f"{name} must hold integers, got an array of dtype {arr.dtype}")
        low = int(arr.min()) if arr.size else 0
        high = int(arr.max()) if arr.size else 0
    if low < 0 or high >= size:
        raise ValueError(f"{name} must hold indices in [0, {size}), got values from {low} to {high}")
    return array


def require_fitted(obj: Any, *attributes: str, fit: str = "fit") -> None:
    """Raise a ``ValueError`` saying to call ``fit`` first when any of ``attributes`` is missing or None."""
    missing = [a for a in attributes if getattr(obj, a, None) is None]
    if missing:
        raise ValueError(f"this {type(obj).__name__} is not fitted yet: call .{fit}(...) before using it "
                         f"(missing {', '.join(missing)})")


def require_package(module: str, extra: str, *, purpose: str = "") -> ModuleType:
    """Import an optional dependency, or say which extra of icml26 installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        what = f" for {purpose}" if purpose else ""
        raise ModuleNotFoundError(
            f"the optional package {module!r} is needed{what} but is not installed: "
            f"pip install 'icml26[{extra}]' (or pip install {module.split('.')[0]})"
        ) from err


def keys(name: str, value: Mapping[str, Any], allowed: Iterable[str]) -> Mapping[str, Any]:
    """A mapping whose keys are all in ``allowed`` (catches misspelt options)."""
    options = set(allowed)
    unknown = sorted(set(value) - options)
    if unknown:
        raise ValueError(f"{name} has unknown keys {unknown}; allowed: {sorted(options)}")
    return value
