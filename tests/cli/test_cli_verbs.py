"""The verbs around a session: `report` re-renders a results JSON, `baselines` shows, diffs,
promotes and prunes stored sets through the store, `run` is the nightly over the installed
suites, `setup` makes the parts, `doctor` says what would run and skip with the suites' own
reasons. Real sessions where a session is what the verb starts."""

from __future__ import annotations

import io
import json
import math
import os
import re
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pytest_hpccomm.__main__ import main
from pytest_hpccomm.baselines.store import JsonBaselineStore
from pytest_hpccomm.baselines.verdict import MIN_SESSIONS, Outcome
from pytest_hpccomm.bootstrap import Part, build_guest, run_parts
from pytest_hpccomm.doctor import command_line as doctor_args
from pytest_hpccomm.nightly import command_line as run_args
from pytest_hpccomm.report.markdown import markdown_summary
from pytest_hpccomm.report.results_json import load_results, write_results
from tests.builders import make_measurement, make_result

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


# -- report -----------------------------------------------------------------------------------


def test_report_renders_the_sessions_verdicts_again(tmp_path: Path) -> None:
    results = [
        make_result(
            benchmark="osu_latency",
            outcome=Outcome.REGRESSION,
            baseline=0.8,
            message="REGRESSION: osu_latency 8 B slower",
        ),
        make_result(benchmark="osu_bw", unit="MB/s", outcome=Outcome.PASS),
    ]
    src = write_results(
        tmp_path / "r.json",
        results,
        {"system": "s", "fabric": "ethernet", "started": 0, "finished": 1},
    )
    code, out, err = run(
        "report", str(src), "--html", str(tmp_path / "r.html"), "--markdown", str(tmp_path / "s.md")
    )
    assert code == 0, err
    html = (tmp_path / "r.html").read_text()
    assert "osu_latency size=8B ranks=2: osu_latency 8 B slower" in html and "osu_bw" in html
    again, session = load_results(src)
    assert (tmp_path / "s.md").read_text() == markdown_summary(again, session)


@pytest.mark.parametrize(
    "argv", [["report", "missing.json", "--html", "x.html"], ["report", "{src}"]]
)
def test_report_usage_errors(tmp_path: Path, argv: list[str]) -> None:
    src = write_results(tmp_path / "r.json", [make_result()], {"system": "s"})
    code, _, err = run(*[a.replace("{src}", str(src)) for a in argv])
    assert code == 2 and "hpccomm report: error" in err


# -- baselines --------------------------------------------------------------------------------


def _store(root: Path, system: str, scale: float = 1.0, sessions: int = 3) -> JsonBaselineStore:
    store = JsonBaselineStore(root)
    for n in range(sessions):
        ms = [make_measurement([x * scale for x in (10.0, 10.2, 9.8)], size=s) for s in (8, 64)]
        store.update(
            system,
            "ethernet",
            "mpi",
            ms,
            {"kernel": "6.1"},
            timestamp=f"2026-01-0{n + 1}T00:00:00+00:00",
        )
    return store


def test_baselines_show_lists_the_sets_and_one_sets_entries(tmp_path: Path) -> None:
    _store(tmp_path, "a")
    code, out, _ = run("baselines", "--root", str(tmp_path), "show")
    assert code == 0 and re.search(r"a\s+ethernet\s+mpi\s+2\s+3\s+2026-01-03", out), out
    code, out, _ = run(
        "baselines",
        "--root",
        str(tmp_path),
        "show",
        "--system",
        "a",
        "--fabric",
        "ethernet",
        "--stack",
        "mpi",
        "--entries",
    )
    assert code == 0
    assert re.search(r'osu_latency\{"ranks":2,"size":8\}\s+3\s+10\s+us\s+0\.0%', out), out


def test_baselines_show_gives_the_spread_the_verdicts_use(tmp_path: Path) -> None:
    # sessions at 1.0, 1.1 and 1.2 times 10: the sd of their log medians (the verdicts' spread)
    for n, scale in enumerate((1.0, 1.1, 1.2)):
        JsonBaselineStore(tmp_path).update(
            "a",
            "ethernet",
            "mpi",
            [make_measurement([10.0 * scale] * 3, size=8)],
            {"kernel": "6.1"},
            timestamp=f"2026-01-0{n + 1}T00:00:00+00:00",
        )
        argv = ["--root", str(tmp_path), "show", "--system", "a", "--stack", "mpi", "--entries"]
        code, out, _ = run("baselines", *argv)
        assert code == 0
        want = (
            "-"
            if n + 1 < MIN_SESSIONS
            else f"{statistics.stdev(math.log(x) for x in (1.0, 1.1, 1.2)):.1%}"
        )
        # below MIN_SESSIONS the verdicts have no spread, and neither does the table
        assert re.search(rf"\s{n + 1}\s+\S+\s+us\s+{re.escape(want)}\s", out), (n, out)


def test_baselines_diff_gives_the_ratio_of_medians(tmp_path: Path) -> None:
    _store(tmp_path, "a")
    _store(tmp_path, "b", scale=1.1)
    code, out, _ = run("baselines", "--root", str(tmp_path), "diff", "a", "b")
    assert code == 0
    assert out.count("1.100") == 2, out


def test_baselines_promote_copies_under_the_new_name_and_refuses_to_overwrite(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path, "candidate")
    code, _, err = run("baselines", "--root", str(tmp_path), "promote", "candidate", "nightly")
    assert code == 0, err
    assert store.load("nightly", "ethernet", "mpi") == store.load("candidate", "ethernet", "mpi")
    doc = json.loads(store.path("nightly", "ethernet", "mpi").read_text())
    assert doc["system"] == "nightly"
    code, _, err = run("baselines", "--root", str(tmp_path), "promote", "candidate", "nightly")
    assert code == 2 and "--force" in err


def test_baselines_prune_keeps_the_last_sessions_and_drops_by_key(tmp_path: Path) -> None:
    store = _store(tmp_path, "a", sessions=4)
    before = store.path("a", "ethernet", "mpi").read_text()
    code, out, _ = run(
        "baselines",
        "--root",
        str(tmp_path),
        "prune",
        "--system",
        "a",
        "--sessions",
        "3",
        "--dry-run",
    )
    assert code == 0 and "would have" in out
    assert store.path("a", "ethernet", "mpi").read_text() == before
    run("baselines", "--root", str(tmp_path), "prune", "--system", "a", "--sessions", "3")
    entries = store.load("a", "ethernet", "mpi")
    assert [len(e.sessions) for e in entries.values()] == [3, 3]
    assert all(e.sessions[0][0].startswith("2026-01-02") for e in entries.values())
    run("baselines", "--root", str(tmp_path), "prune", "--system", "a", "--key", '*"size":64}')
    assert len(store.load("a", "ethernet", "mpi")) == 1
    run("baselines", "--root", str(tmp_path), "prune", "--system", "a", "--before", "2027")
    assert not store.path("a", "ethernet", "mpi").exists()  # an emptied set is removed


# -- run, doctor, setup -------------------------------------------------------------------------


def test_run_defaults_to_every_suite_with_its_reports_and_keeps_the_users_options() -> None:
    got = run_args(["--hpc-fabric=ib", "-k", "osu_latency", "--out", "r"])
    assert got[-2:] == ["--pyargs", "hpccomm_suites"]
    assert "--hpc-results=r/results.json" in got and "--junitxml=r/junit.xml" in got
    assert got.index("-k") + 1 == got.index("osu_latency")
    got = run_args(
        ["--suite", "mpi", "--suite", "hpccomm_suites.grpc", "--hpc-results", "mine.json"]
    )
    assert got[-3:] == ["--pyargs", "hpccomm_suites.mpi", "hpccomm_suites.grpc"]
    assert not [a for a in got if a.startswith("--hpc-results=")]


def _hpccomm(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    return subprocess.run(
        [sys.executable, "-m", "pytest_hpccomm", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_run_runs_the_installed_fabric_suite_and_writes_its_reports(tmp_path: Path) -> None:
    proc = _hpccomm(
        [
            "run",
            "--suite",
            "fabric",
            "--hpc-fabric=ethernet",
            "--hpc-history=none",
            "-p",
            "no:cacheprovider",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"\d+ passed", proc.stdout), proc.stdout[-2000:]
    assert (tmp_path / "results" / "junit.xml").is_file()


def _skip_reasons(junit: Path) -> Counter[str]:
    """The reason of every skipped item of a session's JUnit XML, counted."""
    import xml.etree.ElementTree as ET

    got: Counter[str] = Counter()
    for skipped in ET.parse(junit).getroot().iter("skipped"):
        got[str(skipped.get("message", "")).removeprefix("Skipped: ")] += 1
    return got


# MPI: a 0-byte osu_bw point skips in its fixture (bandwidth is undefined); doctor foresees it
# through the stack's pytest_hpccomm_foreseen_skip
MPI_BW = ["-k", "osu_bw", "--hpc-sizes=0,8", "--hpc-mpi=openmpi", "--hpc-launcher=local"]
# MPI across hosts (placements marker) and ULFM under MPICH (its fixture asks the MPI);
# gRPC's proof of path under stock gRPC (the grpc_runtime marker)
MPI_HOSTS_ULFM = ["-k", "rdma_transport or ulfm", "--hpc-mpi=mpich"]
GRPC_PATH = ["-k", "test_calls_take_the_runtimes_path"]
# an RDMA runtime on Ethernet: its items' fixtures skip (no device, the virtual cluster), the
# marked ones at collection (the compression item counts bytes on a kernel-TCP relay)
GRPC_RDMA = ["--hpc-grpc-preset=rsocket-compat"]


@pytest.mark.parametrize(
    ("suite", "extra"),
    [
        ("fabric", []),
        ("verbs", []),
        ("mpi", MPI_BW),
        ("mpi", MPI_HOSTS_ULFM),
        ("grpc", GRPC_PATH),
        ("grpc", GRPC_RDMA),
    ],
    ids=["fabric", "verbs", "mpi-bw", "mpi-hosts-ulfm", "grpc-path", "grpc-rdma-runtime"],
)
def test_doctor_says_what_a_suite_would_skip_with_the_suites_own_reasons(
    tmp_path: Path, suite: str, extra: list[str]
) -> None:
    doctor = _hpccomm(["doctor", "--suite", suite, "--hpc-fabric=ethernet", *extra], tmp_path)
    assert doctor.returncode == 0, doctor.stdout[-3000:] + doctor.stderr[-2000:]
    lines = doctor.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith(f"{suite}: "))
    said: Counter[str] = Counter()
    for line in lines[head + 1 :]:
        m = re.match(r"  skip +(\d+): (.*)$", line)
        if not m:
            break
        said[m.group(2)] += int(m.group(1))
    real = _hpccomm(
        [
            "run",
            "--suite",
            suite,
            "--hpc-fabric=ethernet",
            "--hpc-history=none",
            "-p",
            "no:cacheprovider",
            "--out",
            str(tmp_path / "r"),
            *extra,
        ],
        tmp_path,
    )
    assert real.returncode in (0, 5), real.stdout[-3000:]
    assert said == _skip_reasons(tmp_path / "r" / "junit.xml"), doctor.stdout[-2000:]
    if extra is MPI_BW:  # the point the fixture skips was foreseen, not only collected
        assert said == {"bandwidth of 0-byte messages is undefined (OSU starts at 1 B)": 1}
    if extra is MPI_HOSTS_ULFM:
        assert sum(n for r, n in said.items() if "no ULFM run-time" in r) == 2, said
        assert sum(n for r, n in said.items() if r.startswith("runs across hosts")) == 4, said
    if extra is GRPC_PATH:
        assert list(said) == [
            "gRPC runtime grpc has no RDMA path to prove: it runs over kernel TCP"
        ]
    runs = int(re.match(rf"{suite}: (\d+) would run", lines[head]).group(1))  # type: ignore[union-attr]
    passed = re.search(r"(\d+) passed", real.stdout)
    assert runs == (int(passed.group(1)) if passed else 0), (lines[head], real.stdout[-500:])


def test_doctor_lists_what_the_machine_offers(tmp_path: Path) -> None:
    proc = _hpccomm(["doctor", "--suite", "fabric", "--hpc-fabric=ethernet"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for head in (
        "session fabric: ethernet",
        "fabric ib: ",
        "stack mpi: ",
        "MPI environment openmpi: ",
        "network namespaces (virtual cluster): ",
        "RDMA guests ",
    ):
        assert head in proc.stdout, (head, proc.stdout[-3000:])


def test_doctor_hands_pytest_its_options() -> None:
    got = doctor_args(["--suite", "mpi", "--hpc-fabric=ib", "-m", "conformance"])
    assert got[:2] == ["--collect-only", "-qq"]
    assert got[-2:] == ["--pyargs", "hpccomm_suites.mpi"] and "--hpc-fabric=ib" in got


def test_setup_guest_part_skips_outside_a_checkout_and_where_the_host_cannot_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # fakes of ci/guest/build.sh: what is under test is the part's own logic
    assert build_guest(tmp_path / "absent.sh") == 0
    assert capsys.readouterr().out.startswith("skipped: no ")
    cannot = tmp_path / "cannot.sh"
    cannot.write_text('echo "build.sh: debootstrap is not installed" >&2; exit 1\n')
    assert build_guest(cannot) == 0
    assert capsys.readouterr().out == "skipped: build.sh: debootstrap is not installed\n"
    builds = tmp_path / "builds.sh"
    builds.write_text('[ "${1:-}" = --check ] && exit 0; echo /cache/guest/abc\n')
    assert build_guest(builds) == 0
    assert capsys.readouterr().out.startswith("guest: /cache/guest/abc (")
    broken = tmp_path / "broken.sh"
    broken.write_text('[ "${1:-}" = --check ] && exit 0; echo "no space left" >&2; exit 3\n')
    assert build_guest(broken) == 1
    assert "exit 3" in capsys.readouterr().out


def test_setup_counts_a_part_that_says_skipped_and_fails_on_a_failed_one() -> None:
    def says(text: str, code: int) -> Part:
        def go() -> int:
            print(text)
            return code

        return Part(text.split(":")[0], "a part", go)

    def crashes() -> int:
        raise RuntimeError("boom")

    out = io.StringIO()
    done = run_parts(
        [
            says("a: built", 0),
            says("skipped: no toolchain", 0),
            says("c: broken", 1),
            Part("d", "crashes", crashes),
        ],
        out,
    )
    assert [how for _, how, _ in done] == ["ok", "skipped", "failed", "failed"]
    assert "[2/4] skipped" in out.getvalue() and "RuntimeError: boom" in out.getvalue()


def test_setup_of_a_made_environment_says_cached() -> None:
    code, out, err = run("setup", "mpi-openmpi")
    assert code == 0, err
    assert "(cached)" in out and "mpi-openmpi ok" in out


def test_setup_names_an_unknown_part() -> None:
    code, _, err = run("setup", "nccl")
    assert code == 2 and "no part nccl" in err
