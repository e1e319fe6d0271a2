"""host-probes.json: round trip, the last sessions kept, malformed files, the band."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_hpccomm.baselines import host_probes
from pytest_hpccomm.baselines.host_probes import HOST_BAND, HostProbesError
from pytest_hpccomm.baselines.store import JsonBaselineStore
from pytest_hpccomm.measure.host_speed import METHOD, HostSpeed, speed_ratio


def speed(f: float) -> HostSpeed:
    return HostSpeed({"python": 36.0 * f, "hash": 1100.0 * f, "copy": 6.5 * f, "wake": 13.0 * f})


def test_record_and_load_keep_the_last_sessions(tmp_path: Path) -> None:
    path = JsonBaselineStore(tmp_path).host_file("ci-2c", "ethernet")
    assert path == tmp_path / "ci-2c" / "ethernet" / "host-probes.json"
    assert host_probes.load(path) == []
    for i in range(7):
        host_probes.record(path, speed(1.0 + i / 100), f"2026-11-27T12:0{i}:00+00:00", limit=5)
    got = host_probes.load(path)
    assert [t for t, _, _ in got] == [f"2026-11-27T12:0{i}:00+00:00" for i in range(2, 7)]
    assert got[-1][1].rates["python"] == pytest.approx(36.0 * 1.06)
    assert {m for _, _, m in got} == {METHOD}  # each session keeps the probe's method
    assert not list(path.parent.glob("*.tmp"))  # written atomically, nothing left over


@pytest.mark.parametrize(
    "text",
    [
        "{ not json",
        json.dumps({"schema": "other"}),
        json.dumps(
            {"schema": host_probes.SCHEMA, "schema_version": 1, "sessions": [{"timestamp": "t"}]}
        ),
    ],
)
def test_a_malformed_file_fails_naming_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "host-probes.json"
    path.write_text(text)
    with pytest.raises(HostProbesError, match="host probe file .*host-probes.json"):
        host_probes.load(path)


def test_within_the_band_and_described() -> None:
    recorded = [speed(1.0), speed(1.04), speed(0.97)]
    assert host_probes.within(speed(0.93), recorded, HOST_BAND)
    assert not host_probes.within(speed(0.77), recorded, HOST_BAND)
    assert not host_probes.within(speed(1.2), recorded, HOST_BAND)
    said = host_probes.describe(speed(0.77), recorded)
    assert said.startswith("0.77x the speed of the baseline set's 3 sessions (python 0.77,"), said


def test_the_band_holds_the_readings_own_noise() -> None:
    """Known answers: a reading without rounds (a stored one) and a quiet one keep HOST_BAND;
    one whose own noise is 0.06 (own_noise) gets expm1(1.96 x 0.06) = 12.5 %, and a reading of
    that host 1.11x the set's speed, outside HOST_BAND, lies inside its own band."""
    import math

    from pytest_hpccomm.measure.host_speed import own_noise

    assert host_probes.band_for(speed(1.0)) == HOST_BAND
    flat = (1.0, 1.0, 1.0, 1.0)
    assert host_probes.band_for(HostSpeed(speed(1.0).rates, rounds={"copy": flat})) == HOST_BAND
    # one component of four with a robust spread of s: own_noise = sqrt2 1.2533 s / 2 / 4
    s = 0.06 * 4 * 2 / (math.sqrt(2.0) * 1.2533)
    a = s / 1.4826
    e = math.exp
    spread = (e(-1.5 * a), e(-0.5 * a), e(0.5 * a), e(1.5 * a))
    rounds = {"copy": spread, "python": flat, "hash": flat, "wake": flat}
    noisy = HostSpeed(speed(1.11).rates, rounds=rounds)
    assert own_noise(noisy) == pytest.approx(0.06, rel=1e-6)
    band = host_probes.band_for(noisy)
    assert band == pytest.approx(math.expm1(1.96 * 0.06), rel=1e-6)  # 0.1248
    recorded = [speed(1.0)]
    assert not host_probes.within(noisy, recorded, HOST_BAND)
    assert host_probes.within(noisy, recorded, band)


def test_a_session_without_a_method_is_method_1(tmp_path: Path) -> None:
    path = tmp_path / "host-probes.json"
    path.write_text(
        json.dumps(
            {
                "schema": host_probes.SCHEMA,
                "schema_version": 1,
                "sessions": [{"timestamp": "t", "rates": speed(1.0).to_json()}],
            }
        )
    )
    assert [m for _, _, m in host_probes.load(path)] == [1]


def test_a_custom_probe_component_counts_in_the_ratio() -> None:
    """A pytest_hpccomm_host_probe hook may time its own component: it is compared too."""
    now = HostSpeed({**speed(1.0).rates, "ib_loop": 2.0})
    then = HostSpeed({**speed(1.0).rates, "ib_loop": 1.0})
    ratio, parts = speed_ratio(now, then)
    assert parts["ib_loop"] == 2.0 and ratio == pytest.approx(2.0 ** (1 / 5))
