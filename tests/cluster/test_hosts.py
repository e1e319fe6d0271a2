"""Host lists, MPI hostfiles and SLURM node lists: real-world forms and malformed ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpccomm.cluster.hosts import (
    Host,
    HostSpecError,
    expand_slurm_nodelist,
    hosts_from_slurm,
    parse_host_list,
    parse_hostfile,
)


def one_line_error(excinfo: pytest.ExceptionInfo[HostSpecError], *needles: str) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg and msg
    for n in needles:
        assert n in msg, msg
    return msg


# -- --hpc-hosts ------------------------------------------------------------------------------


def test_host_list_slots_default_and_explicit() -> None:
    assert parse_host_list("a,b:2,c") == [Host("a"), Host("b", 2), Host("c")]
    assert parse_host_list(" node01.cluster , 10.0.0.7:4 ") == [
        Host("node01.cluster"),
        Host("10.0.0.7", 4),
    ]


def test_host_list_repeated_host_adds_slots_like_hydra() -> None:
    assert parse_host_list("a,b,a:3") == [Host("a", 4), Host("b")]


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("", "empty"),
        ("a,,b", "empty entry"),
        ("a,", "empty entry"),
        ("a:0", "not a positive integer"),
        ("a:x", "not a positive integer"),
        ("a:-1", "not a positive integer"),
        ("a b", "not a valid host name"),
        ("-a", "not a valid host name"),
        ("a;rm -rf /", "not a valid host name"),
        ("$(reboot)", "not a valid host name"),
    ],
)
def test_host_list_malformed(spec: str, problem: str) -> None:
    with pytest.raises(HostSpecError) as ei:
        parse_host_list(spec)
    one_line_error(ei, repr(spec), problem)


def test_host_spec_error_is_a_value_error() -> None:
    assert issubclass(HostSpecError, ValueError)


# -- hostfiles --------------------------------------------------------------------------------

OPENMPI_HOSTFILE = """\
# Open MPI hostfile of a small cluster
node01 slots=4 max_slots=8
node02 slots=4   # a trailing comment

node03
node04 slots=2 max-slots=2
"""

HYDRA_HOSTFILE = """\
# MPICH / Hydra
node01:4
node02:2

node03
"""


def test_hostfile_openmpi(tmp_path: Path) -> None:
    f = tmp_path / "hosts"
    f.write_text(OPENMPI_HOSTFILE)
    assert parse_hostfile(f) == [
        Host("node01", 4),
        Host("node02", 4),
        Host("node03", 1),
        Host("node04", 2),
    ]


def test_hostfile_hydra(tmp_path: Path) -> None:
    f = tmp_path / "hosts"
    f.write_text(HYDRA_HOSTFILE)
    assert parse_hostfile(f) == [Host("node01", 4), Host("node02", 2), Host("node03", 1)]


def test_hostfile_repeated_lines_add_slots(tmp_path: Path) -> None:
    f = tmp_path / "hosts"
    f.write_text("n1\nn1\nn2 slots=2\nn1:2\n")
    assert parse_hostfile(f) == [Host("n1", 4), Host("n2", 2)]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("node01 slots=4 bogus=1\n", "unknown field 'bogus=1'"),
        ("node01 slots=9 max_slots=8\n", "exceeds max_slots=8"),
        ("node01 slots=four\n", "not a positive integer"),
        ("node01:0\n", "not a positive integer"),
        ("node01:2 slots=2\n", "slot count given twice"),
        ("node01 4\n", "unknown field '4'"),
        ("node_01!\n", "not a valid host name"),
        ("# only comments\n\n", "no hosts"),
    ],
)
def test_hostfile_malformed(tmp_path: Path, text: str, problem: str) -> None:
    f = tmp_path / "hosts"
    f.write_text("node00\n" + text if "only comments" not in text else text)
    with pytest.raises(HostSpecError) as ei:
        parse_hostfile(f)
    msg = one_line_error(ei, str(f), problem)
    if "no hosts" not in problem:
        assert "line 2" in msg


def test_hostfile_missing(tmp_path: Path) -> None:
    with pytest.raises(HostSpecError) as ei:
        parse_hostfile(tmp_path / "nope")
    one_line_error(ei, "nope", "cannot read")


# -- SLURM ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nodelist, expected",
    [
        (
            "node[01-04,07],gpu-a[1-2],login",
            ["node01", "node02", "node03", "node04", "node07", "gpu-a1", "gpu-a2", "login"],
        ),
        ("nid[00001-00003]", ["nid00001", "nid00002", "nid00003"]),
        ("cn[8-10]", ["cn8", "cn9", "cn10"]),
        ("cn[08-10]", ["cn08", "cn09", "cn10"]),
        ("login01", ["login01"]),
        ("r[1-2]n[08-09]", ["r1n08", "r1n09", "r2n08", "r2n09"]),
        (
            "rack[1-2]-node[1,3]-ib",
            ["rack1-node1-ib", "rack1-node3-ib", "rack2-node1-ib", "rack2-node3-ib"],
        ),
        ("a[1],b", ["a1", "b"]),
        ("node[001-002,010]", ["node001", "node002", "node010"]),
    ],
)
def test_slurm_nodelist(nodelist: str, expected: list[str]) -> None:
    assert expand_slurm_nodelist(nodelist) == expected


@pytest.mark.parametrize(
    "nodelist, problem",
    [
        ("", "empty"),
        ("node[1-2", "'[' without ']'"),
        ("node1-2]", "']' without '['"),
        ("node[[1-2]]", "nested"),
        ("node[]", "empty brackets"),
        ("node[3-1]", "runs backwards"),
        ("node[a-b]", "bad range"),
        ("node[1-]", "bad range"),
        ("node[1-99999999]", "larger than"),
        ("n[1-300]m[1-300]", "more than"),
        ("node1,,node2", "empty entry"),
        ("-node[1-2]", "not a valid host name"),
    ],
)
def test_slurm_nodelist_malformed(nodelist: str, problem: str) -> None:
    with pytest.raises(HostSpecError) as ei:
        expand_slurm_nodelist(nodelist)
    one_line_error(ei, "SLURM node list", problem)


def test_hosts_from_slurm_tasks_per_node() -> None:
    env = {"SLURM_JOB_NODELIST": "node[01-04]", "SLURM_TASKS_PER_NODE": "2(x3),1"}
    assert hosts_from_slurm(env) == [
        Host("node01", 2),
        Host("node02", 2),
        Host("node03", 2),
        Host("node04", 1),
    ]


def test_hosts_from_slurm_ntasks_per_node_wins() -> None:
    env = {
        "SLURM_JOB_NODELIST": "c[1-2]",
        "SLURM_NTASKS_PER_NODE": "4",
        "SLURM_TASKS_PER_NODE": "1(x2)",
    }
    assert hosts_from_slurm(env) == [Host("c1", 4), Host("c2", 4)]


def test_hosts_from_slurm_defaults_and_fallback_variable() -> None:
    assert hosts_from_slurm({"SLURM_NODELIST": "a,b"}) == [Host("a"), Host("b")]


@pytest.mark.parametrize(
    "env, problem",
    [
        ({}, "SLURM_JOB_NODELIST is not set"),
        (
            {"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x2)"},
            "gives 2 nodes but the node list has 3",
        ),
        ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(3)"}, "bad entry"),
        ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS_PER_NODE": "0"}, "not a positive integer"),
        ({"SLURM_JOB_NODELIST": "n1,n1"}, "names a node twice"),
    ],
)
def test_hosts_from_slurm_malformed(env: dict[str, str], problem: str) -> None:
    with pytest.raises(HostSpecError) as ei:
        hosts_from_slurm(env)
    one_line_error(ei, problem)
