"""The shared argument checks: each refuses what it should, with a message naming the argument, and lets
good values through unchanged."""

import math

import numpy as np
import pytest
import torch

from icml26.harness import validate as v


@pytest.mark.parametrize("fn, args, error, fragment", [
    (v.positive_int, ("dim", 0), ValueError, "dim must be an integer >= 1, got 0"),
    (v.positive_int, ("dim", -3), ValueError, "got -3"),
    (v.positive_int, ("dim", 2.5), TypeError, "dim must be an integer"),
    (v.positive_int, ("dim", True), TypeError, "dim must be an integer"),
    (v.positive_int, ("dim", "4"), TypeError, "'4'"),
    (v.non_negative_int, ("k", -1), ValueError, "k must be an integer >= 0"),
    (v.finite_number, ("lr", float("nan")), ValueError, "lr must be finite"),
    (v.finite_number, ("lr", None), TypeError, "lr must be a real number"),
    (v.positive, ("sigma", 0.0), ValueError, "sigma must be > 0"),
    (v.positive, ("sigma", float("inf")), ValueError, "finite"),
    (v.non_negative, ("gamma", -1), ValueError, "gamma must be >= 0"),
    (v.probability, ("p", 1.5), ValueError, "p must be in [0.0, 1.0]"),
    (v.in_range, ("frac", 1.0, 0.0, 1.0), None, None),
    (v.one_of, ("mode", "fast", ("exact", "approx")), ValueError, "mode must be one of ['exact', 'approx']"),
    (v.finite, ("x", np.array([1.0, np.nan])), ValueError, "x has 1 NaN or infinite entries"),
    (v.finite, ("x", torch.tensor([[1.0, float("inf")]])), ValueError, "x has 1 NaN"),
    (v.finite, ("x", "abc"), TypeError, "x must be an array"),
    (v.non_empty, ("items", []), ValueError, "items is empty"),
    (v.non_empty, ("items", torch.zeros(0, 3)), ValueError, "items is empty"),
    (v.probability_vector, ("p", [0.5, 0.7]), ValueError, "summing to 1"),
    (v.probability_vector, ("p", [-0.5, 1.5]), ValueError, "negative entry"),
    (v.probability_vector, ("p", torch.tensor([[0.2, 0.8], [0.1, 0.1]])), ValueError, "summing to 1"),
    (v.ndim, ("x", np.zeros((2, 3)), 3), ValueError, "x must have 3 dimensions"),
    (v.shape, ("w", np.zeros((2, 3)), (2, 4)), ValueError, "w must have shape (2, 4), got shape (2, 3)"),
    (v.shape, ("w", torch.zeros(2, 3), (None, 3, 1)), ValueError, "(any, 3, 1)"),
    (v.indices, ("labels", [0, 3], 3), ValueError, "labels must hold indices in [0, 3), got values from 0 to 3"),
    (v.indices, ("labels", np.array([-1, 0]), 3), ValueError, "from -1"),
    (v.indices, ("labels", torch.tensor([0.5]), 3), TypeError, "labels must hold integers"),
    (v.keys, ("options", {"lr": 1, "lrr": 2}, ("lr", "steps")), ValueError, "unknown keys ['lrr']"),
])
def test_checks_refuse_bad_values_naming_the_argument(fn, args, error, fragment):
    if error is None:
        fn(*args)
        return
    with pytest.raises(error) as info:
        fn(*args)
    assert fragment in str(info.value)


def test_checks_pass_good_values_through():
    assert v.positive_int("n", np.int64(3)) == 3 and isinstance(v.positive_int("n", 3), int)
    assert v.positive("t", 2) == 2.0 and v.probability("q", 0) == 0.0
    x = torch.tensor([0.25, 0.75])
    assert v.finite("x", x) is x and v.probability_vector("p", x) is x
    assert np.array_equal(v.finite("x", [1, 2]), np.array([1.0, 2.0]))
    assert v.same_length(a=[1, 2], b=np.zeros((2, 5)), c=torch.zeros(2)) == 2
    assert v.indices("y", torch.tensor([0, 2]), 3) is not None
    assert v.in_range("f", 0.5, 0.0, 1.0, low_open=True, high_open=True) == 0.5
    assert math.isclose(v.finite_number("z", torch.tensor(1.5)), 1.5)


def test_same_length_names_every_argument():
    with pytest.raises(ValueError, match="a has 2, b has 3"):
        v.same_length(a=[1, 2], b=[1, 2, 3])


def test_open_interval_and_fitted_and_missing_package():
    with pytest.raises(ValueError, match=r"\(0.0, 1.0\)"):
        v.probability("p", 0.0, open_=True)

    class Model:
        coef_ = None

    with pytest.raises(ValueError, match=r"not fitted yet: call .fit\(...\)"):
        v.require_fitted(Model(), "coef_")
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'icml26\[peers\]'"):
        v.require_package("a_package_that_is_not_there", "peers", purpose="the peer comparison")
    assert v.require_package("math", "peers") is math
