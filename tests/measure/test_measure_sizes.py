import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_hpccomm.measure.sizes import SizeSpecError, format_size, parse_size, parse_size_spec


def test_osu_range_is_powers_of_two() -> None:
    assert parse_size_spec("1:4M") == [1 << i for i in range(23)]
    assert parse_size_spec("0:8") == [0, 1, 2, 4, 8]


def test_list_and_suffixes_are_binary() -> None:
    assert parse_size_spec("0,8,1K,64KiB,1M,1G") == [0, 8, 1024, 65536, 1 << 20, 1 << 30]
    assert parse_size_spec("8, 8 ,4") == [4, 8]


@pytest.mark.parametrize("spec", ["", "1:", "x", "4M:1", "1,,2", "8Q", "-1", "1.5K"])
def test_bad_specs_raise(spec: str) -> None:
    with pytest.raises(SizeSpecError):
        parse_size_spec(spec)


@given(st.integers(min_value=0, max_value=1 << 40))
def test_format_round_trips(n: int) -> None:
    assert parse_size(format_size(n)) == n
