"""benchmarks/history_series.py rebuilds the recorded change-point series from a canary dump:
flat = every round's no-change run, step = no-change runs of the first half, then canary runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def trial(rnd: int, factor: float, size: int, median: float) -> dict[str, object]:
    return {
        "round": rnd,
        "factor": factor,
        "cur": {"params": {"size": size}, "samples": [median * 0.99, median, median * 1.01]},
    }


def test_series_are_spliced_from_the_rounds(tmp_path: Path) -> None:
    trials = [
        trial(r, f, s, (10.0 + r) * f)
        for r in range(6)
        for f in (1.0, 1.10)
        for s in (8, 1024, 65536)
    ]
    dump = tmp_path / "trials.json"
    dump.write_text(json.dumps(trials))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "history_series.py"), str(dump)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    s = doc["series"]["1024"]
    assert s["flat"] == [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    assert s["step"] == [10.0, 11.0, 12.0, 14.3, 15.4, 16.5]
    assert "spliced" in doc["about"] and "index 3" in doc["about"]


def test_the_recorded_file_is_what_the_script_describes() -> None:
    doc = json.loads((ROOT / "tests/baselines/data/recorded_osu_latency_medians.json").read_text())
    for series in doc["series"].values():
        half = len(series["flat"]) // 2
        assert series["step"][:half] == series["flat"][:half]  # the same runs, as said
    assert "spliced" in doc["about"]
