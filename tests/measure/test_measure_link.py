"""The link-rate arithmetic the reports' "% of link" rests on (measure/link.py)."""

from __future__ import annotations

import math

import pytest

from pytest_hpccomm.measure.link import (
    LinkRate,
    RateError,
    format_bit_rate,
    gbit_per_s,
    is_bandwidth,
    link_fraction,
    link_of,
    parse_bit_rate,
    with_link_rate,
)
from pytest_hpccomm.measure.measurement import Direction, Measurement


def record(unit: str, direction: Direction = Direction.HIGHER_IS_BETTER) -> Measurement:
    return Measurement(
        "mpi", "osu_bw", {"size": 1 << 20}, (100.0, 110.0), unit, direction, extra={"timer_us": 0.1}
    )


@pytest.mark.parametrize(
    ("value", "unit", "gbit"),
    [
        (125.0, "MB/s", 1.0),  # OSU's MB is 10^6 bytes
        (1.0, "GB/s", 8.0),  # nccl-tests' GB is 10^9 bytes
        (1.0, "GiB/s", 8 * 2**30 / 1e9),
        (1.0, "MiB/s", 8 * 2**20 / 1e9),
        (2.5, "Gbit/s", 2.5),
        (2.5, "Gb/s", 2.5),  # b: bits, as IB ports say "100 Gb/sec"
        (1e9, "bit/s", 1.0),
        (100.0, " Mbit/s ", 0.1),
    ],
)
def test_data_rates_convert_to_gbit(value: float, unit: str, gbit: float) -> None:
    got = gbit_per_s(value, unit)
    assert got is not None and math.isclose(got, gbit)


@pytest.mark.parametrize("unit", ["msg/s", "rpc/s", "us", "ms", "", "images/s"])
def test_other_units_have_no_data_rate(unit: str) -> None:
    assert gbit_per_s(1.0, unit) is None
    assert link_fraction(1.0, unit, 1.0) is None


def test_fraction_of_the_link() -> None:
    assert math.isclose(link_fraction(118.75, "MB/s", 1.0) or 0, 0.95)
    assert math.isclose(link_fraction(11.875, "GB/s", 100.0) or 0, 0.95)
    # a bidirectional result counts both directions: above 1 is honest, not clipped
    assert math.isclose(link_fraction(237.5, "MB/s", 1.0) or 0, 1.9)


@pytest.mark.parametrize("rate", [None, 0.0, -1.0, math.nan, math.inf])
def test_unknown_link_has_no_fraction(rate: float | None) -> None:
    assert link_fraction(118.75, "MB/s", rate) is None


def test_only_bandwidths_carry_the_link() -> None:
    link = LinkRate(1.0, "tbf fab0 on h0,h1: 1 Gbit/s")
    bw = with_link_rate(record("MB/s"), link)
    assert bw.extra == {
        "timer_us": 0.1,
        "link_rate_gbps": 1.0,
        "link_rate_source": "tbf fab0 on h0,h1: 1 Gbit/s",
    }
    assert link_of(bw.extra) == link
    assert is_bandwidth(record("GB/s")) and not is_bandwidth(record("msg/s"))
    for other in (record("msg/s"), record("us", Direction.LOWER_IS_BETTER)):
        assert with_link_rate(other, link) is other
    # unknown: neither key, so no report can show a made-up 100 %
    unknown = with_link_rate(record("MB/s"), None)
    assert "link_rate_gbps" not in unknown.extra and "link_rate_source" not in unknown.extra
    assert link_of(unknown.extra) is None
    # survives the results JSON round trip
    assert link_of(type(bw).from_json(bw.to_json()).extra) == link


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_a_link_rate_is_positive(bad: float) -> None:
    with pytest.raises(ValueError):
        LinkRate(bad, "x")


@pytest.mark.parametrize(
    ("text", "bit_s"),
    [
        ("1G", 1e9),
        ("1g", 1e9),
        ("1Gbit", 1e9),
        ("1gbit/s", 1e9),
        ("2.5G", 2.5e9),
        ("100M", 1e8),
        ("100mbit", 1e8),
        ("1e9", 1e9),
        ("1000000000", 1e9),
        (" 10Gb/s ", 1e10),
    ],
)
def test_bit_rates_parse_as_tc_writes_them(text: str, bit_s: float) -> None:
    assert parse_bit_rate(text) == bit_s


@pytest.mark.parametrize("text", ["500k", "0", "1T"])
def test_bit_rates_out_of_range_say_the_range(text: str) -> None:
    with pytest.raises(RateError, match="1 Mbit/s to 400 Gbit/s"):
        parse_bit_rate(text)


@pytest.mark.parametrize("text", ["", "fast", "1GB", "1gbps", "1 G bit", "-1G", "1G/h", "G"])
def test_bad_bit_rates_are_refused(text: str) -> None:
    with pytest.raises(RateError):
        parse_bit_rate(text)


def test_rates_print_as_people_write_them() -> None:
    assert format_bit_rate(1e9) == "1 Gbit/s"
    assert format_bit_rate(2.5e8) == "250 Mbit/s"
    assert format_bit_rate(1.5e10) == "15 Gbit/s"
    assert format_bit_rate(500.0) == "500 bit/s"
