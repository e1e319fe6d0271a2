"""The verbs suite inside the SoftRoCE / iWARP guest (ci/guest): rxe and siw under QEMU.

Builds (or reuses) the cached guest and reads the guest's JUnit XML; the single-guest items of a
fabric share one boot with the other stacks' guest items (tests/guests.py), one session each:
- softroce / iwarp: `pytest --hpc-fabric=<kind> hpccomm_suites/verbs` must pass; the suite provisions
  rxe0 / siw0 itself; perftest's programs run next to it as a cross-check; an xfail is allowed
  only as a known defect observed in that run (stacks/verbs/defects.py), and the guest's kernel
  and driver go into this test's properties; test_verbs_canary_stretch.py runs beside it
  (under --hpc-inject-slowdown the verbs peers' timed work must take about F times as long)
- paired: a paired A/B run of verbs (`--hpc-base verbs=/usr/bin/python3 --hpc-candidate
  verbs=VENV`, a second environment over the guest's pyverbs): both sides' peers run every
  selected perf point and both medians are reported, with no verdict on the emulated device
- planted: the peers register MRs without REMOTE_WRITE (--hpc-verbs-plant); the conformance
  suite must catch it: the RDMA WRITE tests fail with a remote access error
- cluster: two guests (run.sh --hosts 2) on SoftRoCE, verbs with one peer per guest and MPI
  over Debian's Open MPI + UCX across them (the items only two hosts have, perftest, one OSU
  sweep); both hosts' rxe counters must show the payload crossed, and a cut RDMA path must
  fail a verbs QP and an MPI job in bounds

Skips with the reason when the host cannot build or boot the guest (not root, no QEMU, no
debootstrap or kernel headers: `ci/guest/build.sh --check` says which).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.stacks.verbs.perftest import OBSERVED as PERFTEST_OBSERVED
from tests.guests import (
    Session,
    SessionResult,
    boot,
    fingerprint,
    guest_image_or_skip,
    junit,
    session,
    tail,
)

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]

PLANTED_TESTS = "remote_write_lands or payload_integrity"
CANARY = "tests/stacks/verbs/test_verbs_canary_stretch.py"  # needs a verbs pair: guests only


@pytest.fixture(scope="module")
def guest_image() -> str:
    return guest_image_or_skip()


@session("softroce", "verbs")
@session("iwarp", "verbs")
def _verbs_suite(_: Path) -> Session:
    return Session("verbs", (CANARY,))


def unexplained_xfails(xfailed: dict[str, str], device: str) -> dict[str, str]:
    """The guest suite's xfails that name no known defect observed in that run: the driver's
    (stacks/verbs/defects.py, "known siw defect KEY: observed ...") or perftest's own
    (stacks/verbs/perftest.py, "known perftest defect: observed ...")."""

    def known(reason: str) -> bool:
        driver = reason.startswith(f"known {device} defect ") and ": observed " in reason
        return driver or reason.startswith(PERFTEST_OBSERVED)

    return {k: v for k, v in xfailed.items() if not known(v)}


def test_an_xfail_counts_only_as_a_known_defect_observed_in_that_run() -> None:
    # the siw run's perftest crash of one cold CI: an xfail of the suite's own rule
    perftest = (
        "known perftest defect: observed client refused by RDMA CM ('Connection refused'), "
        "then killed by SIGSEGV. perftest before 26.04.17 (linux-rdma/perftest 3d9d8d0) ..."
    )
    siw = "known siw defect read-no-remote-check: observed READ of an MR without REMOTE_READ"
    got = {"a": perftest, "b": siw, "c": "known rxe defect x: observed y", "d": "flaky, skip"}
    assert unexplained_xfails(got, "siw") == {"c": got["c"], "d": got["d"]}
    assert unexplained_xfails({"b": siw.replace(": observed", ":")}, "siw")  # nothing observed


# conformance tests that must pass: iWARP has no UD, siw no atomics, and its QPs reach RTS only
# through rdma_cm (the manual state-machine walk is skipped there)
@pytest.mark.parametrize(
    "fabric,device,at_least",
    [
        pytest.param("softroce", "rxe", 35, marks=pytest.mark.guest("softroce", "verbs")),
        pytest.param("iwarp", "siw", 12, marks=pytest.mark.guest("iwarp", "verbs")),
    ],
)
def test_verbs_suite_passes_in_the_guest(
    guest_session: SessionResult, fabric: str, device: str, at_least: int, record_property: Any
) -> None:
    results = guest_session.results
    got = junit(results)
    canary = [n for n in got["passed"] if "test_canary_stretches" in n]
    conformance = [n for n in got["passed"] if ".test_conformance_" in n]
    crosscheck = [n for n in got["passed"] if "test_perftest_crosscheck" in n]
    env = fingerprint(results)
    record_property("guest_kernel", env.get("kernel", "unknown"))
    record_property("guest_driver", env.get("driver", "unknown"))
    record_property("guest_seconds", guest_session.seconds)
    record_property("guest_passed", len(got["passed"]))
    record_property("guest_conformance_passed", len(conformance))
    record_property("guest_skipped", len(got["skipped"]))
    record_property("guest_xfailed", len(got["xfailed"]))
    for name, reason in got["xfailed"].items():
        record_property(f"guest_xfail {name.rsplit('.', 1)[-1]}", reason[:500])
    assert not got["failed"], f"{fabric} in the guest: {len(got['failed'])} failed: " + "; ".join(
        f"{k}: {v[:2000]}" for k, v in list(got["failed"].items())[:5]
    )
    unexplained = unexplained_xfails(got["xfailed"], device)
    assert not unexplained, f"xfails that are no observed known defect: {unexplained}"
    assert guest_session.returncode == 0, f"{guest_session.describe()}\n{guest_session.tail()}"
    assert len(conformance) >= at_least, f"only {len(conformance)} conformance tests passed"
    assert crosscheck, "no perftest program ran next to the suite"
    assert len(canary) == 4, f"the canary's stretch of the verbs peers was not shown: {canary}"
    log = (results / "pytest.log").read_text(errors="replace")
    assert f"{device}0" in log, f"the suite did not run on a provisioned {device}0"


PAIRED_POINTS = "test_perftest and (ib_send_lat or ib_write_bw or ib_read_lat)"


def _venv_over(python: str, where: Path) -> Path:
    """A venv in `where` over `python` and its site-packages (made by hand: the guest has
    Debian's python3, whose venv module lacks ensurepip): a second environment, prefix and
    all, with the same pyverbs; the guest resolves the link to its own interpreter."""
    (where / "bin").mkdir(parents=True)
    (where / "bin" / "python").symlink_to(python)
    (where / "pyvenv.cfg").write_text(
        f"home = {Path(python).parent}\ninclude-system-site-packages = true\n"
    )
    return where


@session("softroce", "paired")
def _paired(where: Path) -> Session:
    venv = _venv_over("/usr/bin/python3", where / "cand")
    args = ["-m", "perf", "-k", PAIRED_POINTS, "--hpc-sizes", "64,64K"]
    args += ["--hpc-base", "verbs=/usr/bin/python3"]
    args += ["--hpc-candidate", f"verbs=/mnt/job/stage/{venv.name}"]
    return Session("paired", tuple(args), stage=(venv,))


@pytest.mark.guest("softroce", "paired")
def test_paired_run_reports_both_sides_in_the_guest(guest_session: SessionResult) -> None:
    results = guest_session.results
    venv = guest_session.session.stage[0]
    got = junit(results)
    assert not got["failed"], f"paired verbs run: {got['failed']}\n{guest_session.tail()}"
    assert guest_session.returncode == 0, f"{guest_session.describe()}\n{guest_session.tail()}"
    root = ET.parse(results / "junit.xml").getroot()
    suite = {
        str(p.get("name")): str(p.get("value"))
        for p in root.iter("property")
        if "verbs_p" in str(p.get("name"))
    }
    # each side's peers ran by its own Python, in its own environment
    assert suite.get("verbs_python") == f"/mnt/job/stage/{venv.name}/bin/python", suite
    assert suite.get("verbs_prefix") == f"/mnt/job/stage/{venv.name}", suite
    assert suite.get("base_verbs_python") == "/usr/bin/python3", suite
    assert suite.get("base_verbs_prefix") == "/usr", suite
    points = 0
    for case in root.iter("testcase"):
        if case.find("skipped") is not None or "test_perftest" not in str(case.get("name")):
            continue
        props = {str(p.get("name")): str(p.get("value")) for p in case.iter("property")}
        assert float(props["median"]) > 0 and float(props["baseline_median"]) > 0, props
        assert props["verdict"] == "new" and "emulated device rxe0" in props["no_verdict"], props
        points += 1
    # 8 selected: send_lat (RC, UD), read_lat, write_bw x 64 B, 64 KiB; UD's 64 KiB is above
    # the path MTU and skips
    assert points >= 7, f"{points} paired points reported: {got['passed']}"


@session("softroce", "planted")
def _planted(_: Path) -> Session:
    args = ("--hpc-verbs-plant=mr-no-remote-write", "-m", "conformance", "-k", PLANTED_TESTS)
    return Session("planted", args)


@pytest.mark.guest("softroce", "planted")
def test_planted_mr_without_remote_write_is_caught(guest_session: SessionResult) -> None:
    got = junit(guest_session.results)
    assert guest_session.returncode == 1, (
        f"the planted bug went unnoticed: {guest_session.describe()}"
    )
    caught = {k: v for k, v in got["failed"].items() if "remote access error" in v}
    assert any("test_rdma_write_into_mr_with_remote_write_lands" in k for k in caught), (
        f"the MR-rights test did not catch the planted bug: {sorted(got['failed'])}"
    )
    assert any("RDMA_WRITE" in k for k in caught), (
        f"the RDMA_WRITE integrity property did not catch it: {sorted(got['failed'])}"
    )


CLUSTER_TIMEOUT = 1500
# What fits a few minutes: the items only two hosts have (the payload on both hosts' rxe counters, a cut
# link) for verbs and MPI, perftest's programs with their server on h1, and osu_latency at two
# sizes, one job each: that they run across the hosts, not their statistics. The single-guest
# tests run the whole verbs suite; the two-host run of everything (every OSU benchmark, up to
# 4 MiB) is `bash ci/guest/run.sh --hosts 2 --fabric softroce`.
CLUSTER_SELECTION = (
    "hpccomm_suites/verbs/test_host_to_host.py",
    "hpccomm_suites/verbs/test_perftest_crosscheck.py",
    "hpccomm_suites/mpi/test_rdma_transport.py",
    "hpccomm_suites/mpi/test_perf_osu.py",
    "-k",
    "not test_perf_osu or osu_latency",
    "--hpc-sizes",
    "8,64K",
    "--hpc-repeats",
    "1",
)
# the items that only a two-host run has, and what each must leave in the JUnit properties
CLUSTER_ITEMS = {
    "test_host_to_host.test_payload_crosses_the_link[SEND]": "counters",
    "test_host_to_host.test_payload_crosses_the_link[RDMA_WRITE]": "counters",
    "test_host_to_host.test_payload_crosses_the_link[RDMA_READ]": "counters",
    "test_host_to_host.test_cut_link_fails_the_qp_with_retry_exceeded": "fault_outcome",
    "test_rdma_transport.test_mpi_payload_goes_through_the_rdma_device": "counters",
    "test_rdma_transport.test_mpi_job_over_a_cut_link_ends_with_an_error": "fault_outcome",
}


# extended: ~6.5 min of two emulated guests; two-host placement runs by default in the
# virtual cluster (tests/cluster) and over ssh (the stacks' test_*_hosts.py) on Ethernet
@pytest.mark.extended
def test_two_guest_cluster_carries_verbs_and_mpi_over_rxe(
    guest_image: str, tmp_path: Path, record_property: Any
) -> None:
    job = boot(
        guest_image, tmp_path, "softroce", *CLUSTER_SELECTION, hosts=2, job_timeout=CLUSTER_TIMEOUT
    )
    got = junit(tmp_path)
    record_property("cluster_seconds", round(job.elapsed, 1))
    record_property("cluster_passed", len(got["passed"]))
    record_property("cluster_skipped", len(got["skipped"]))
    assert not got["failed"], f"two-guest cluster: {len(got['failed'])} failed: " + "; ".join(
        f"{k}: {v[:2000]}" for k, v in list(got["failed"].items())[:5]
    )
    assert job.ok, f"cluster run failed: {job.describe()}\n{tail(tmp_path)}"
    root = ET.parse(tmp_path / "junit.xml").getroot()
    suite = {
        p.get("name"): p.get("value")
        for p in root.iter("property")
        if p.get("name", "").startswith("verbs_")
    }
    assert suite.get("verbs_path") == "host to host: h0 -> h1", suite
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}"
        key = next((k for k in CLUSTER_ITEMS if name.startswith(k)), None)
        if key is None:
            continue
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        want = CLUSTER_ITEMS.pop(key)
        assert props.get(want), f"{name} left no {want!r} property: {props}"
        record_property(f"cluster {name}", props[want])
    assert not CLUSTER_ITEMS, f"cluster items that did not run: {sorted(CLUSTER_ITEMS)}"
    osu = [n for n in got["passed"] if "test_osu_p2p" in n and "osu_latency" in n]
    assert osu, "no osu_latency point ran across the hosts"
    perftest = [
        c
        for c in root.iter("testcase")
        if "crosscheck" in c.get("classname", "")
        and c.find("failure") is None
        and c.find("skipped") is None
    ]
    servers = {
        p.get("value")
        for c in perftest
        for p in c.iter("property")
        if p.get("name") == "perftest_server"
    }
    assert servers == {"h1"}, f"perftest's own programs ran their server on {servers}"
    assert (tmp_path / "console-h1.log").is_file(), "no console log from the second guest"
