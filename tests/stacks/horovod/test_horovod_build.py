"""The Horovod build's own logic: the patch, the cache key, finding the MPI Horovod links,
accepting a user's Horovod (a real Python: the cached build, and one without Horovod), and the
peers refusing what they cannot run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.stacks.horovod import env as hvd_env
from pytest_hpccomm.stacks.horovod.driver import (
    HorovodError,
    HorovodPeers,
    HostsSite,
    controller_list,
)
from pytest_hpccomm.stacks.horovod.env import (
    HorovodBuildError,
    HorovodEnv,
    cache_key,
    env_from_probe,
    user_env,
)
from pytest_hpccomm.stacks.horovod.wire import static_process_sets

# The lines of Horovod 0.28.1's sdist around what cxx17.patch changes (CMakeLists.txt 16-22,
# horovod/torch/CMakeLists.txt 64-70), at their line numbers.
TOP = [
    "",
    "project(horovod CXX)",
    "",
    "set(CMAKE_CXX_STANDARD 14)",
    "set(CMAKE_CXX_STANDARD_REQUIRED ON)",
    "set(CMAKE_CXX_EXTENSIONS OFF)",
    "",
]
TORCH = [
    "add_definitions(-DPYTORCH_VERSION=${VERSION_DEC} -DTORCH_API_INCLUDE_EXTENSION_H=1)",
    "set(Pytorch_CXX11 ${Pytorch_CXX11} PARENT_SCOPE)",
    'if(NOT Pytorch_VERSION VERSION_LESS "1.5.0")',
    "    set(CMAKE_CXX_STANDARD 14)",
    "endif()",
    "",
    "# PyTorch SOURCES",
]


def _tree(root: Path) -> None:
    (root / "horovod" / "torch").mkdir(parents=True)
    (root / "CMakeLists.txt").write_text("\n".join(["# l"] * 15 + TOP + ["# end"]) + "\n")
    (root / "horovod" / "torch" / "CMakeLists.txt").write_text(
        "\n".join(["# l"] * 63 + TORCH + ["# end"]) + "\n"
    )


def test_patch_sets_cxx17_in_both_cmake_files(tmp_path: Path) -> None:
    _tree(tmp_path)
    subprocess.run(
        ["patch", "-p1", "--forward", "--batch", "-i", str(hvd_env.PATCH)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=30,
    )
    for path in (tmp_path / "CMakeLists.txt", tmp_path / "horovod" / "torch" / "CMakeLists.txt"):
        text = path.read_text()
        assert "CMAKE_CXX_STANDARD 17" in text and "CMAKE_CXX_STANDARD 14" not in text, path


def test_cache_key_follows_every_input(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tools = {"cxx": "g++ 12", "mpi": "Open MPI 5.0.11", "python": "3.11"}
    key = cache_key(tools)
    assert key == cache_key(dict(tools))
    assert key != cache_key({**tools, "mpi": "Open MPI 5.0.12"})
    patch = tmp_path / "other.patch"
    patch.write_bytes(hvd_env.PATCH.read_bytes() + b"\n")
    monkeypatch.setattr(hvd_env, "PATCH", patch)
    patched = cache_key(tools)
    assert patched != key
    monkeypatch.setattr(hvd_env, "RECIPE", hvd_env.RECIPE + 1)
    assert cache_key(tools) not in (key, patched)


def test_mpirun_is_found_beside_the_libmpi_horovod_links(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib" / "libmpi.so.40").write_text("")
    (tmp_path / "bin" / "mpirun").write_text("")
    env = env_from_probe(
        Path(sys.executable),
        {
            "horovod": "0.28.1",
            "torch": "2.13.0",
            "libmpi": str(tmp_path / "lib" / "libmpi.so.40"),
            "built": {"mpi": True, "gloo": True, "nccl": False},
        },
        "user",
    )
    assert env.controllers == ("mpi", "gloo") and env.operations == ("mpi", "gloo")
    assert env.mpirun == tmp_path / "bin" / "mpirun"
    finger = env.fingerprint()
    assert finger["horovod"] == "0.28.1" and finger["horovod_controllers"] == "mpi,gloo"
    assert finger["horovod_origin"] == "user"


def test_a_python_without_horovod_is_a_clear_failure() -> None:
    with pytest.raises(HorovodBuildError, match="importing horovod.torch failed"):
        user_env(sys.executable)
    with pytest.raises(HorovodBuildError, match="is not a Python executable"):
        user_env("/nonexistent/python")


def test_the_cached_build_is_accepted_as_a_users_horovod(horovod_env: HorovodEnv) -> None:
    """A venv directory works as well as its python; the facts are read from it."""
    mine = user_env(horovod_env.python.parent.parent)
    assert (mine.version, mine.origin) == (horovod_env.version, "user")
    assert set(mine.controllers) == {"mpi", "gloo"}
    assert mine.mpirun == horovod_env.mpirun


def test_peers_refuse_what_they_cannot_run() -> None:
    gloo_only = HorovodEnv(
        Path(sys.executable), "0.28.1", "2.13.0", ("gloo",), ("gloo",), None, "user"
    )
    with pytest.raises(HorovodError, match="built without the mpi controller"):
        HorovodPeers(gloo_only, "mpi", "loopback")
    with pytest.raises(HorovodError, match="hosts placement needs at least 2 hosts"):
        HorovodPeers(gloo_only, "gloo", "hosts")
    one = HostsSite((Host("h0"),), "10.0.0.1", "eth0")
    with pytest.raises(HorovodError, match="hosts placement needs at least 2 hosts"):
        HorovodPeers(gloo_only, "gloo", "hosts", one)
    with pytest.raises(HorovodError, match="placement 'slurm'"):
        HorovodPeers(gloo_only, "gloo", "slurm")
    with pytest.raises(HorovodError, match="needs the session's virtual cluster"):
        HorovodPeers(gloo_only, "gloo", "netns")
    with pytest.raises(ValueError, match="unknown controller"):
        HorovodPeers(gloo_only, "nccl", "loopback")


def test_controller_lists_and_process_sets() -> None:
    assert controller_list("gloo, mpi") == ["gloo", "mpi"]
    with pytest.raises(ValueError, match="not nccl"):
        controller_list("mpi,nccl")
    with pytest.raises(ValueError):
        controller_list(" , ")
    # two sets that partition the ranks: no rank ever sits out a process-set case
    assert static_process_sets(2) == [[0], [1]]
    assert static_process_sets(3) == [[0, 1], [2]]
    assert static_process_sets(4) == [[0, 1], [2, 3]]
    assert static_process_sets(1) == []


def test_a_test_for_one_controller_gets_items_of_that_controller_only(
    pytester: pytest.Pytester,
) -> None:
    """@pytest.mark.horovod_controllers: an item per chosen controller it names; when none of
    them is chosen, one item that skips naming what it needs and what was chosen."""
    pytester.makepyfile("""
        import pytest

        @pytest.mark.horovod_controllers("gloo")
        def test_gloo_only(horovod_controller):
            assert horovod_controller == "gloo"

        def test_any(horovod_controller):
            pass
    """)
    both = pytester.runpytest_subprocess("--hpc-history=none", "-v", timeout=120)
    both.assert_outcomes(passed=3)
    both.stdout.fnmatch_lines(["*test_gloo_only?gloo? PASSED*"])
    mpi = pytester.runpytest_subprocess(
        "--hpc-history=none", "--hpc-horovod-controllers=mpi", "-rs", timeout=120
    )
    mpi.assert_outcomes(passed=1, skipped=1)
    mpi.stdout.fnmatch_lines(
        ["*applies to the gloo controller only; --hpc-horovod-controllers chose mpi*"]
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--hpc-horovod-controllers=mpi,nccl"], "--hpc-horovod-controllers: controllers must be"),
        (
            ["--hpc-horovod-python=/nonexistent/python"],
            "--hpc-horovod-python: /nonexistent/python does not exist",
        ),
    ],
)
def test_bad_options_are_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    res = pytester.runpytest_subprocess("--hpc-history=none", *args, timeout=120)
    assert res.ret == 4
    assert message in res.stderr.str()


def test_opting_out_skips_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.stack("horovod")
        def test_needs_horovod():
            pass
    """)
    res = pytester.runpytest_subprocess(
        "--hpc-history=none", "--hpc-horovod-python=none", "-rs", timeout=120
    )
    res.assert_outcomes(skipped=1)
    assert "Horovod opted out (--hpc-horovod-python=none)" in res.stdout.str()


def test_a_failed_build_fails_the_items_with_the_logs_tail(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Orchestrator logic only (a stand-in build): a build that fails is every Horovod
    item's failure, carrying the log's last lines, never a skip; the build is tried once."""
    from pytest_hpccomm.stacks.horovod import plugin

    calls = []

    def broken() -> HorovodEnv:
        calls.append(1)
        raise HorovodBuildError(
            "Horovod build: pip wheel failed (exit 1):\nerror: 'c10' has not been declared"
        )

    monkeypatch.setattr(plugin, "ensure_built", broken)
    monkeypatch.setattr(plugin.IMPLS, "_got", {})
    pytester.makepyfile("""
        def test_one(horovod_env):
            pass

        def test_two(horovod_env):
            pass
    """)
    res = pytester.runpytest_inprocess("--hpc-history=none", "-p", "no:cacheprovider")
    res.assert_outcomes(errors=2)
    assert "error: 'c10' has not been declared" in res.stdout.str()
    assert calls == [1]
