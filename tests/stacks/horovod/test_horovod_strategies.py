"""The conformance strategies draw inputs no reduction over n ranks can overflow: the extreme
elements, reduced over n ranks with the largest scales, stay finite and in range."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hpccomm.stacks.horovod.conformance import element, element_bound
from pytest_hpccomm.stacks.horovod.wire import DTYPES, INT_DTYPES


@pytest.mark.parametrize("n", [2, 3, 8, 64])
@pytest.mark.parametrize("dtype", DTYPES)
def test_extreme_inputs_reduce_without_overflow(dtype: str, n: int) -> None:
    top = np.iinfo(dtype).max if dtype in INT_DTYPES else np.finfo(dtype).max
    product = element_bound(dtype, "product", n)
    assert product is not None and product >= 1 and float(product) ** n <= top
    total = element_bound(dtype, "sum", n)
    assert total is not None and 9.0 * n * float(total) <= top
    assert element_bound(dtype, "min", n) is None if dtype in INT_DTYPES else True


@settings(max_examples=30, derandomize=True, database=None)
@given(data=st.data())
@pytest.mark.parametrize("dtype", DTYPES)
def test_drawn_elements_stay_within_the_bound(dtype: str, data: st.DataObject) -> None:
    """Hypothesis accepts the bounds at the dtype's width, and draws within them."""
    for op in ("sum", "product", "min"):
        x = data.draw(element(dtype, op, 3))
        bound = element_bound(dtype, op, 3)
        assert bound is None or abs(x) <= bound


def test_the_bounds_shrink_with_the_number_of_ranks() -> None:
    assert element_bound("float16", "product", 2) == 8
    assert element_bound("float16", "product", 8) == 3  # 3 ** 8 < 65504 < 4 ** 8
    assert element_bound("float16", "sum", 64) == 64.0  # a power of two under 65504 / 576
