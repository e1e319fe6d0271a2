"""End to end through pytest itself (pytester): options, ini keys, usage errors, markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import usage_error_line

TREES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
SIMPLE = "def test_one():\n    pass\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--hpc-fabric=bogus"], "--hpc-fabric: invalid value 'bogus'"),
        (["--hpc-launcher=ssh"], "--hpc-launcher: invalid value 'ssh'"),
        (["--hpc-profile=huge"], "--hpc-profile: invalid value 'huge'"),
        (["--hpc-sizes=1:banana"], "--hpc-sizes: bad message size 'banana'"),
        (["--hpc-sizes=4M:1"], "--hpc-sizes: bad size range"),
        (["--hpc-hostfile=/nonexistent/hosts"], "--hpc-hostfile: cannot read '/nonexistent/hosts'"),
        (["--hpc-tolerance=lots"], "--hpc-tolerance: expected a number"),
        (["--hpc-tolerance=1.5"], "--hpc-tolerance: must be in (0, 1)"),
        (["--hpc-tolerance=0"], "--hpc-tolerance: must be in (0, 1) (0.05 = 5 %), got 0.0"),
        (["--hpc-require-armed=1.5"], "--hpc-require-armed: a fraction in [0, 1], got 1.5"),
        (["--hpc-inject-slowdown=0.5"], "--hpc-inject-slowdown: must be >= 1.0"),
        (["--hpc-update-baselines=some"], "--hpc-update-baselines: invalid value 'some'"),
        (["--hpc-repeats=0"], "--hpc-repeats: must be 1..20, got 0"),
        (["--hpc-repeats=two"], "--hpc-repeats: expected"),
        (
            ["--hpc-repeats=4", "--hpc-max-repeats=3"],
            "--hpc-max-repeats: must be --hpc-repeats (4)..50, got 3",
        ),
        (["--hpc-max-repeats=51"], "--hpc-max-repeats: must be --hpc-repeats (3)..50, got 51"),
        (["--hpc-bind=socket"], "--hpc-bind: invalid value 'socket'"),
        (
            ["--hpc-repeat-for=all"],
            "--hpc-repeat-for: invalid value 'all' (choose from changes, undecided)",
        ),
        (["--hpc-sysfs-root=/nonexistent"], "--hpc-sysfs-root:"),
        (["--hpc-base=openmpi4", "--hpc-candidate=mpi=openmpi"], "--hpc-base: expected STACK=IMPL"),
        (["--hpc-base=mpi=openmpi4"], "--hpc-base names stack 'mpi' but --hpc-candidate does not"),
        (["--hpc-candidate=mpi=openmpi"], "--hpc-candidate names stack 'mpi' but --hpc-base"),
        (
            ["--hpc-base=mpi=a", "--hpc-base=mpi=b", "--hpc-candidate=mpi=c"],
            "--hpc-base: stack 'mpi' given twice",
        ),
        (
            ["--hpc-base=mpi=openmpi4", "--hpc-candidate=mpi=openmpi", "--hpc-update-baselines"],
            "cannot be combined with --hpc-update-baselines",
        ),
        (["--hpc-ab-rounds=2"], "--hpc-ab-rounds: must be 3..100, got 2"),
        (
            ["--hpc-base=nccl=a", "--hpc-candidate=nccl=b"],
            "stack 'nccl' cannot run a paired A/B comparison (stacks that can: ",
        ),
        (
            ["--hpc-base=mpi=opnmpi4", "--hpc-candidate=mpi=openmpi"],
            "--hpc-base: mpi='opnmpi4' is neither an MPI environment name",
        ),
        (["--hpc-mpi=openmpi,mpihc"], "--hpc-mpi: 'mpihc' is neither an MPI environment name"),
        (
            ["--hpc-mpi=openmpi", "--hpc-base=mpi=openmpi4", "--hpc-candidate=mpi=openmpi"],
            "--hpc-mpi cannot be combined with a paired A/B run of mpi",
        ),
    ],
)
def test_bad_values_are_one_line_usage_errors(
    pytester: pytest.Pytester, args: list[str], expected: str
) -> None:
    pytester.makepyfile(SIMPLE)
    line = usage_error_line(pytester.runpytest_subprocess(*args))
    assert expected in line


def test_ini_keys_set_options_and_command_line_wins(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nhpc_profile = full\nhpc_system = lab-a\n")
    pytester.makepyfile(
        "def test_cfg(hpc_config):\n"
        "    assert hpc_config.profile == 'full'\n"
        "    assert hpc_config.system == 'lab-b'\n"
        "    assert hpc_config.message_sizes[-1] == 64 << 20\n"
    )
    result = pytester.runpytest("--hpc-system=lab-b")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("args", "scope"),
    [
        ([], "changes"),
        (["--hpc-profile=full"], "undecided"),
        (["--hpc-repeat-for=undecided"], "undecided"),
        (["--hpc-profile=full", "--hpc-repeat-for=changes"], "changes"),
    ],
)
def test_the_profile_sets_which_points_repeats_grow(
    pytester: pytest.Pytester, args: list[str], scope: str
) -> None:
    pytester.makepyfile(
        f"def test_cfg(hpc_config):\n    assert hpc_config.repeat_scope == {scope!r}\n"
    )
    pytester.runpytest(*args).assert_outcomes(passed=1)


def test_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nhpc_fabric = infiniband\n")
    pytester.makepyfile(SIMPLE)
    assert "--hpc-fabric: invalid value 'infiniband'" in usage_error_line(
        pytester.runpytest_subprocess()
    )


def test_markers_are_registered_for_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.conformance
        @pytest.mark.perf
        @pytest.mark.slow
        @pytest.mark.stack("mpi")
        @pytest.mark.fabric("ethernet", "ipoib")
        def test_marked():
            pass
    """)
    result = pytester.runpytest(
        "--strict-markers", "--hpc-fabric=ethernet", "-p", "no:randomly", "--co", "-q"
    )
    assert result.ret == 0, result.stdout.str()
    markers = pytester.runpytest("--markers").stdout.str()
    for name in (
        "conformance",
        "perf",
        "stack(name)",
        "fabric(*kinds)",
        "needs_root",
        "slow",
        "quick_placements(*placements)",
        "placements(*placements)",
        "needs_hosts",
        "grpc_runtime(kind, why=...)",
    ):
        assert f"@pytest.mark.{name}" in markers


def test_misspelt_stack_or_fabric_marker_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.stack("mpy")
        def test_typo():
            pass
    """)
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "expected one of" in result.stderr.str()
    pytester.makepyfile("""
        import pytest
        @pytest.mark.fabric("infiniband")
        def test_typo():
            pass
    """)
    assert pytester.runpytest_subprocess().ret == pytest.ExitCode.USAGE_ERROR


QUICK_PLACED = """
import pytest

@pytest.mark.stack("grpc")
@pytest.mark.quick_placements("loopback")
def test_tcp(hpc_placement, hpc_size):
    pass

@pytest.mark.stack("mpi")
def test_transport_changes(hpc_placement):
    pass
"""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # quick: powers of 4; a TCP-only stack at loopback only, said in the header
        (
            [],
            {
                "test_tcp[1B-loopback]",
                "test_tcp[4B-loopback]",
                "test_tcp[4MiB-loopback]",
                "test_transport_changes[loopback]",
                "test_transport_changes[netns]",
            },
        ),
        # full: powers of 2 to 64 MiB, every placement
        (
            ["--hpc-profile=full"],
            {"test_tcp[2B-netns]", "test_tcp[64MiB-loopback]", "test_transport_changes[netns]"},
        ),
        # an explicit launcher is what the user asked for: the profile keeps it
        (["--hpc-launcher=netns"], {"test_tcp[4B-netns]", "test_transport_changes[netns]"}),
    ],
)
def test_the_profile_sets_sizes_and_placements(
    pytester: pytest.Pytester, args: list[str], expected: set[str]
) -> None:
    pytester.makepyfile(QUICK_PLACED)
    result = pytester.runpytest("--hpc-fabric=ethernet", "--co", "-q", *args)
    assert result.ret == 0, result.stdout.str()
    ids = {ln.split("::")[-1] for ln in result.stdout.lines if "::" in ln}
    assert expected <= ids, sorted(ids)
    tcp = {i for i in ids if i.startswith("test_tcp[")}
    if not args:
        assert len(tcp) == 12 and not any("netns" in i or "2B" in i for i in tcp)
        result.stdout.fnmatch_lines(["hpccomm: quick profile: grpc timed at loopback only *"])
    elif args == ["--hpc-profile=full"]:
        assert len(tcp) == 27 * 2
        assert "quick profile:" not in result.stdout.str()


def test_a_quick_placement_that_is_no_placement_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.quick_placements("lo")
        def test_typo(hpc_placement):
            pass
    """)
    result = pytester.runpytest_subprocess("--hpc-fabric=ethernet")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "quick_placements('lo',): placements are loopback, netns" in result.stderr.str()


def test_placements_marker_skips_other_placements_at_collection(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.placements("hosts")
        def test_across(hpc_placement):
            pass
        @pytest.mark.placements("netns")
        def test_netns(hpc_placement):
            pass
    """)
    result = pytester.runpytest("--hpc-fabric=ethernet", "-rs", "--hpc-launcher=netns")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*runs across hosts (--hpc-hosts); placement netns"])
    pytester.makepyfile("""
        import pytest
        @pytest.mark.placements("node1")
        def test_typo(hpc_placement):
            pass
    """)
    result = pytester.runpytest_subprocess("--hpc-fabric=ethernet")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "placements('node1',): placements are loopback, netns, hosts" in result.stderr.str()


def test_fabric_marker_made_counts_a_link_the_session_would_create(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """made=True: an absent rxe that hpc_rdma_fabric would create is no reason to skip at
    collection; one it cannot create (here: a recorded sysfs tree) is, saying why."""
    pytester.makepyfile("""
        import pytest
        @pytest.mark.fabric("softroce", made=True)
        def test_made():
            pass
        @pytest.mark.fabric("softroce")
        def test_there():
            pass
    """)
    (tmp_path / "sys" / "class" / "net").mkdir(parents=True)
    result = pytester.runpytest(
        "--hpc-fabric=softroce", f"--hpc-sysfs-root={tmp_path / 'sys'}", "-rs"
    )
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        ["*no SoftRoCE (rxe) device*; cannot create one: reading a recorded sysfs tree*"]
    )


def test_needs_hosts_marker_skips_a_one_host_session_at_collection(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.needs_hosts
        def test_across():
            pass
    """)
    result = pytester.runpytest("--hpc-fabric=ethernet", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs two hosts (--hpc-hosts a,b, *one host"])


@pytest.mark.parametrize(
    ("preset", "outcomes"),
    [("", {"passed": 1, "skipped": 1}), ("rsocket-compat", {"passed": 1, "skipped": 1})],
)
def test_grpc_runtime_marker_skips_the_other_kind_at_collection(
    pytester: pytest.Pytester, preset: str, outcomes: dict[str, int]
) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.grpc_runtime("rdma", why="runtime {runtime} runs over kernel TCP")
        def test_rdma():
            pass
        @pytest.mark.grpc_runtime("tcp", why="runtime {runtime} is an RDMA one")
        def test_tcp():
            pass
    """)
    args = ["--hpc-fabric=ethernet", "-rs"] + ([f"--hpc-grpc-preset={preset}"] if preset else [])
    result = pytester.runpytest(*args)
    result.assert_outcomes(**outcomes)
    if preset:
        result.stdout.fnmatch_lines(["*runtime rsocket-compat is an RDMA one"])
    else:
        result.stdout.fnmatch_lines(["*runtime grpc runs over kernel TCP"])
    pytester.makepyfile("""
        import pytest
        @pytest.mark.grpc_runtime("infiniband", why="x")
        def test_typo():
            pass
    """)
    result = pytester.runpytest_subprocess("--hpc-fabric=ethernet")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "kinds are rdma, tcp" in result.stderr.str()


def test_header_names_fabric_and_system(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SIMPLE)
    result = pytester.runpytest("--hpc-fabric=ethernet", "--hpc-system=ci-box")
    result.stdout.fnmatch_lines(
        ["hpccomm: fabric=ethernet -> ethernet: *", "hpccomm: system=ci-box profile=quick*"]
    )


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ({"args": ["--hpc-hosts=node1,,node2"]}, "--hpc-hosts:"),
        ({"hostfile": "node1 slots=four\n"}, "--hpc-hostfile:"),
        ({"hostfile": "node1:0\n"}, "--hpc-hostfile:"),
        ({"env": {"SLURM_JOB_NODELIST": "node[04-01]"}}, "SLURM_JOB_NODELIST:"),
        (
            {"env": {"SLURM_JOB_NODELIST": "node[01-03", "SLURM_TASKS_PER_NODE": "1"}},
            "SLURM_JOB_NODELIST:",
        ),
    ],
)
def test_malformed_hosts_are_one_line_usage_errors(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, setup: dict, expected: str
) -> None:
    pytester.makepyfile(SIMPLE)
    args = list(setup.get("args", []))
    if "hostfile" in setup:
        path = pytester.path / "hosts"
        path.write_text(setup["hostfile"])
        args.append(f"--hpc-hostfile={path}")
    for name, value in setup.get("env", {}).items():
        monkeypatch.setenv(name, value)
    assert expected in usage_error_line(pytester.runpytest_subprocess(*args))


def test_hosts_resolve_from_hostfile_and_slurm(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    (pytester.path / "hosts").write_text("# Open MPI\nnode1 slots=4\nnode2 slots=4 max_slots=8\n")
    pytester.makepyfile("""
        def test_hosts(hpc_config):
            import os
            names = [(h.name, h.slots) for h in hpc_config.host_list]
            assert names == eval(os.environ["WANT"])
    """)
    monkeypatch.setenv("WANT", "[('node1', 4), ('node2', 4)]")
    pytester.runpytest("--hpc-hostfile=hosts").assert_outcomes(passed=1)
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[01-02,07]")
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "2(x3)")
    monkeypatch.setenv("WANT", "[('gpu01', 2), ('gpu02', 2), ('gpu07', 2)]")
    pytester.runpytest().assert_outcomes(passed=1)


def test_disabling_the_plugin_leaves_a_plain_pytest(pytester: pytest.Pytester) -> None:
    """`-p no:hpccomm` must also quiet the stack plugins, which lean on the core's options."""
    pytester.makepyfile(SIMPLE)
    result = pytester.runpytest_subprocess("-p", "no:hpccomm")
    result.assert_outcomes(passed=1)
    assert "hpccomm:" not in result.stdout.str()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("fast", "--hpc-vlink-rate: expected a bit rate such as 1G, 100M or 2.5Gbit, got 'fast'"),
        ("1GB", "--hpc-vlink-rate: expected a bit rate"),  # bytes: refused, not guessed
        ("10k", "--hpc-vlink-rate: '10k' is 10 kbit/s: must be 1 Mbit/s to 400 Gbit/s"),
    ],
)
def test_bad_vlink_rate_is_a_usage_error_line(
    pytester: pytest.Pytester, value: str, expected: str
) -> None:
    pytester.makepyfile(SIMPLE)
    assert expected in usage_error_line(pytester.runpytest_subprocess(f"--hpc-vlink-rate={value}"))


def test_vlink_rate_is_read_in_bit_s(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nhpc_vlink_rate = 100M\n")
    pytester.makepyfile(
        "def test_cfg(hpc_config):\n"
        "    assert hpc_config.vlink_rate == 1e9\n"
        "def test_default(hpc_config):\n"
        "    pass\n"
    )
    pytester.runpytest("--hpc-vlink-rate=1G").assert_outcomes(passed=2)
    pytester.makepyfile("def test_cfg(hpc_config):\n    assert hpc_config.vlink_rate == 1e8\n")
    pytester.runpytest().assert_outcomes(passed=1)
