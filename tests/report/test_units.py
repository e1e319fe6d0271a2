from __future__ import annotations

import pytest

from pytest_hpccomm.report.units import (
    bytes_per_second,
    fmt_range,
    fmt_seconds,
    fmt_size,
    fmt_value,
    is_byte_rate,
    link_fraction,
)


@pytest.mark.parametrize(
    "value,unit,ref,text",
    [
        (1.234, "us", None, "1.23 us"),  # OSU: latency in us, 2 decimals
        (0.45, "us", None, "0.45 us"),
        (450.0, "ns", None, "0.45 us"),
        (2.5e-3, "s", None, "2500.00 us"),
        (250.0, "ms", None, "250.00 ms"),
        (99.0, "ms", 101.0, "99.00 ms"),  # the row's reference picks one scale for both numbers
        (12000.0, "MB/s", None, "12000.00 MB/s"),  # byte rates unscaled, as OSU prints them
        (3.5e6, "msg/s", None, "3.50M msg/s"),
        (None, "us", None, "-"),
        (float("nan"), "MB/s", None, "-"),
        (0.93, "%", None, "0.93 %"),
    ],
)
def test_fmt_value(value, unit, ref, text) -> None:
    assert fmt_value(value, unit, ref=ref) == text


def test_micro_sign_only_off_the_terminal() -> None:
    assert fmt_value(1.0, "us", ascii_only=False) == "1.00 µs"
    assert fmt_range(1.0, 2.0, "us", ascii_only=False) == "1.00 – 2.00 µs"


@pytest.mark.parametrize(
    "n,text",
    [
        (0, "0B"),
        (8, "8B"),
        (1000, "1000B"),
        (1024, "1KiB"),
        (1536, "1536B"),
        (4 << 20, "4MiB"),
        (1 << 30, "1GiB"),
    ],
)
def test_fmt_size(n, text) -> None:
    assert fmt_size(n) == text


def test_byte_rates_convert_with_each_sources_megabyte() -> None:
    assert bytes_per_second(12000.0, "MB/s") == pytest.approx(12e9)  # OSU, TF-gRPC-Bench: 10^6
    # perftest's MB/sec (2^20 B/s), recorded as MiB/s
    assert bytes_per_second(1000.0, "MiB/s") == pytest.approx(1000.0 * 2**20)
    assert bytes_per_second(9.5, "GB/s") == pytest.approx(9.5e9)  # nccl-tests' busbw
    assert bytes_per_second(100.0, "Gbit/s") == pytest.approx(12.5e9)
    assert is_byte_rate("MB/s") and not is_byte_rate("msg/s")


def test_link_fraction_and_seconds() -> None:
    assert link_fraction(12.5e9, 100.0) == pytest.approx(1.0)
    assert link_fraction(6.25e9, 100.0) == pytest.approx(0.5)
    assert fmt_seconds(1.5e-6) == "1.50 µs" and fmt_seconds(0.25) == "250.00 ms"
    assert fmt_seconds(None) == "-"
