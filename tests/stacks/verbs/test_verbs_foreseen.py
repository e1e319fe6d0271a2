"""The verbs stack's forecast (pytest_hpccomm_foreseen_skip, read by `hpccomm doctor`): on an
iWARP fabric the manual QP walks and UD skip, with the fixtures' own texts; a perftest program
that is not on PATH skips its cross-check, and so does libfabric's without fi_info; elsewhere
nothing is foreseen. The suite is collected (no device is opened: this host has none) and the
hook asked per item."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpccomm.stacks.verbs.skips import MANUAL_ONLY_IWARP, fi_info_missing


def _foreseen(pytester: pytest.Pytester, fabric: str) -> dict[str, str | None]:
    items, _ = pytester.inline_genitems(
        "-p", "no:cacheprovider", f"--hpc-fabric={fabric}", "--pyargs", "hpccomm_suites.verbs"
    )
    assert items, "the verbs suite collected nothing"
    return {i.nodeid: i.config.hook.pytest_hpccomm_foreseen_skip(item=i) for i in items}


def test_iwarp_foresees_the_manual_walks_and_ud(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"  # every perftest program present but ib_read_bw
    bin_dir.mkdir()
    for name in ("ib_send_lat", "ib_write_lat", "ib_read_lat", "ib_atomic_lat", "ib_send_bw"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    (bin_dir / "ib_write_bw").symlink_to(bin_dir / "ib_send_bw")
    (bin_dir / "ib_atomic_bw").symlink_to(bin_dir / "ib_send_bw")
    monkeypatch.setenv("PATH", str(bin_dir))  # nothing else: a host with perftest has ib_read_bw
    got = _foreseen(pytester, "iwarp")
    manual = {n for n, r in got.items() if r == MANUAL_ONLY_IWARP}
    assert manual and all("test_conformance_qp" in n for n in manual), sorted(manual)
    assert not any("test_new_qp_is_in_reset" in n for n in manual)
    ud = {n for n, r in got.items() if r == "iWARP has no UD transport"}
    assert ud and all("UD" in n for n in ud), sorted(ud)
    missing = {n: r for n, r in got.items() if r and "not found" in r}
    fi_info = {n: r for n, r in missing.items() if "test_libfabric_crosscheck" in n}
    assert list(fi_info.values()) == [fi_info_missing()], missing  # no fi_info on this PATH
    perftest = [r for n, r in missing.items() if n not in fi_info]
    assert perftest == ["ib_read_bw not found (install perftest)"], missing

    on_roce = _foreseen(pytester, "softroce")
    assert not any(r in (MANUAL_ONLY_IWARP, "iWARP has no UD transport") for r in on_roce.values())
