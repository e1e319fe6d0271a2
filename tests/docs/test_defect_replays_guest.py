"""The defects catalogue's replay that needs an RDMA device: UCX's UD destination-GID check on
rxe (docs/examples/defects/ucx_ud_dgid_check_rxe.sh), in the SoftRoCE guest's shared boot.
Two processes over UD on the guest's one rxe device: on the UCX the catalogue names as
affected (1.13, Debian 12's) the check-on run must die with "unhandled timeout error" while
the control (UCX_UD_ETH_DGID_CHECK=n) completes; on any other UCX the check-on run must
complete, or the catalogue's versions are wrong."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.guests import Session, SessionResult, junit, session

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]

SCRIPT = "ucx_ud_dgid_check_rxe.sh"  # docs/examples/defects, run by guest_ucx_ud_replay.py
AFFECTED = ("1.13.",)  # UCX releases the catalogue names (a version prefix)
SYMPTOM = "unhandled timeout error"


@session("softroce", "ucx-ud")
def _ucx_ud(_: Path) -> Session:
    return Session("ucx-ud", targets="tests/docs/guest_ucx_ud_replay.py", timeout=420)


@pytest.mark.guest("softroce", "ucx-ud")
def test_ucx_ud_dgid_replay_fails_on_the_affected_ucx(guest_session: SessionResult) -> None:
    got = junit(guest_session.results)
    assert not got["failed"], f"UCX UD replay: {got['failed']}\n{guest_session.tail()}"
    assert guest_session.returncode == 0, f"{guest_session.describe()}\n{guest_session.tail()}"
    root = ET.parse(guest_session.results / "junit.xml").getroot()
    props = {str(p.get("name")): str(p.get("value")) for p in root.iter("property")}
    assert "replay_exit" in props, f"the replay did not run: {props}\n{guest_session.tail()}"
    version, code, out = props["ucx_version"], int(props["replay_exit"]), props["replay_output"]
    affected = version.startswith(AFFECTED)
    if affected:
        assert code == 1 and SYMPTOM in out, f"UCX {version}: the defect did not show\n{out}"
    else:
        assert code == 0, f"UCX {version}, not named affected, shows the defect:\n{out}"
