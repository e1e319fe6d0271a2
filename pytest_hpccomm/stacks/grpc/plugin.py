"""pytest plugin of the gRPC stack (pytest11: hpccomm_grpc): options, probes, parametrization.

The session's lab (build, runtimes, servers, sweeps) is lab.py; the fixtures the suites ask
for are fixtures.py (loaded as this plugin's pytest_plugins).

More: docs/explanation/internals.md (pytest_hpccomm.stacks.grpc.plugin).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.placement import NETNS
from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.session import hpc_session_of
from pytest_hpccomm.stack_probes import ImportProbe, StackProbe
from pytest_hpccomm.stacks.contract import stack_params
from pytest_hpccomm.stacks.grpc.build import (
    prefix_error,
)
from pytest_hpccomm.stacks.grpc.env import labels, no_device_reason
from pytest_hpccomm.stacks.grpc.options import GrpcOptions, add_options, parse_options
from pytest_hpccomm.stacks.grpc.python_env import is_release
from pytest_hpccomm.stacks.grpc.python_env import spec_error as python_spec_error
from pytest_hpccomm.stacks.grpc.skips import (
    RUNTIME_MARK,
    RUNTIME_MARK_LINE,
    netns_reason,
    on_tcp_reason,
    python_client_reason,
    python_peer_reason,
    runtime_kind_reason,
)

pytest_plugins = ["pytest_hpccomm.stacks.grpc.fixtures"]  # the fixtures the suites ask for

OPTIONS_KEY = pytest.StashKey[GrpcOptions]()
SYSTEM = "system"  # --hpc-base grpc=system: the system's gRPC (libgrpc++-dev)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(optionalhook=True)  # the core plugin declares it; `-p no:hpccomm` does not
def pytest_hpccomm_stack_probes(config: pytest.Config) -> list[StackProbe]:
    return [
        ImportProbe(
            "grpc",
            ("grpc",),
            ("grpcio", "grpcio-tools", "protobuf"),
            (),
            "pip install 'pytest-hpccomm[grpc]'",
        )
    ]


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_paired_stacks(config: pytest.Config) -> list[str]:
    return ["grpc"]  # the native peer built against two gRPC installations (--hpc-base grpc=)


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_under_test(config: pytest.Config, stack: str) -> str | None:
    """The gRPC the native peer is built against: --hpc-grpc-prefix, else the system's."""
    if stack != "grpc":
        return None
    return str(config.getoption("hpc_grpc_prefix") or SYSTEM)


@pytest.hookimpl(trylast=True)  # after the core plugin's, which builds the HpcConfig
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", RUNTIME_MARK_LINE)
    if not config.pluginmanager.has_plugin("hpccomm"):
        return  # `-p no:hpccomm`: the core plugin and its options are off
    opts = parse_options(config)  # bad values: usage error before tests
    cfg = hpc_session_of(config).cfg
    sides = cfg.paired("grpc")
    if sides is not None and any(is_release(side) for side in sides):
        opts = paired_python_options(opts, sides)
    elif sides is not None:
        prefix = config.getoption("hpc_grpc_prefix")
        opts = paired_options(opts, bool(prefix) and not cfg.tested_by_option("grpc", prefix))
    check_named(opts, sides)
    config.stash[OPTIONS_KEY] = opts


def check_named(opts: GrpcOptions, sides: tuple[str, str] | None) -> None:
    """A gRPC installation or build the user names must be there: a usage error now, not a
    skip of every native item later (a skip would leave a merge gate green)."""
    if opts.prefix is not None:
        error = prefix_error(opts.prefix)
        if error:
            raise pytest.UsageError(f"--hpc-grpc-prefix {opts.prefix}: {error}")
    if opts.build is not None and not opts.build.is_dir():
        raise pytest.UsageError(f"--hpc-grpc-build {opts.build}: not a directory")
    error = python_spec_error(opts.python)
    if error:
        raise pytest.UsageError(error)
    for flag, impl in zip(("--hpc-base", "--hpc-candidate"), sides or ()):
        if is_release(impl):
            error = python_spec_error(impl, f"{flag} grpc={impl}")
            if error:
                raise pytest.UsageError(error)
            continue
        prefix = prefix_of(impl)
        error = prefix_error(prefix) if prefix is not None else None
        if error:
            raise pytest.UsageError(f"{flag} grpc={impl}: {error} (an install prefix or {SYSTEM})")


def prefix_of(impl: str) -> Path | None:
    """A paired run's gRPC implementation: `system` (the system's gRPC) or an install prefix."""
    return None if impl == SYSTEM else Path(impl).expanduser()


def paired_options(opts: GrpcOptions, prefix_given: bool) -> GrpcOptions:
    """A paired A/B run of gRPC swaps the native peer's gRPC: only that peer is measured (the
    python peer runs this interpreter's grpcio on both sides)."""
    if prefix_given:
        raise pytest.UsageError(
            "--hpc-grpc-prefix cannot be combined with a paired A/B run of "
            "grpc: --hpc-base/--hpc-candidate grpc=PREFIX|system name both"
        )
    if opts.build is not None or not opts.spec.stock:
        raise pytest.UsageError(
            "a paired A/B run of grpc builds both sides here, on stock "
            "gRPC: drop --hpc-grpc-build, --hpc-grpc-preset, --hpc-grpc-env"
        )
    if "native" not in opts.peers:
        raise pytest.UsageError(
            "a paired A/B run of grpc compares native peers: --hpc-grpc-peers must include native"
        )
    return dataclasses.replace(opts, peers=("native",), perf_peers=("native",))


def paired_python_options(opts: GrpcOptions, sides: tuple[str, str]) -> GrpcOptions:
    """A paired A/B run between two grpcio releases (`--hpc-base grpc=grpcio==1.60.1`)
    measures the Python peers, each side's servers and clients in its release's venv."""
    if not all(is_release(side) for side in sides):
        raise pytest.UsageError(
            "a paired A/B run of grpc compares two grpcio releases or two gRPC "
            f"installations, not one of each: {sides[0]} and {sides[1]}"
        )
    if opts.python:
        raise pytest.UsageError(
            "--hpc-grpc-python cannot be combined with a paired A/B run of grpcio "
            "releases: --hpc-base/--hpc-candidate grpc=grpcio==VERSION name both"
        )
    if not opts.spec.stock:
        raise pytest.UsageError(
            "a paired A/B run of grpcio releases runs the Python peers, which use grpcio's "
            "own core: drop --hpc-grpc-preset and --hpc-grpc-env"
        )
    peers = tuple(p for p in opts.peers if p != "native")
    if not peers:
        raise pytest.UsageError(
            "a paired A/B run of grpcio releases compares Python peers: --hpc-grpc-peers must "
            "include python or python-aio"
        )
    return dataclasses.replace(opts, peers=peers, perf_peers=peers)


@pytest.hookimpl(trylast=True)  # after the core plugin's skips, which come first
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The grpc_runtime marker: an item for another kind of runtime skips at collection."""
    opts = config.stash.get(OPTIONS_KEY, None)
    if opts is None:
        return
    for item in items:
        mark = item.get_closest_marker(RUNTIME_MARK)
        if mark is None:
            continue
        try:
            reason = runtime_kind_reason(mark.args[0], mark.kwargs["why"], opts.spec)
        except (IndexError, KeyError, ValueError) as exc:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.{RUNTIME_MARK}{mark.args!r}: {exc} "
                "(expected a kind and why=)"
            ) from None
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(optionalhook=True)
def pytest_hpccomm_foreseen_skip(item: pytest.Item) -> str | None:
    """The skips the gRPC fixtures make that the options and the fabric already tell: stock
    gRPC off a TCP fabric, an RDMA runtime without a device or in the virtual cluster, a
    Python peer or client outside the runtime under test."""
    params = stack_params(item, "grpc")
    opts = item.config.stash.get(OPTIONS_KEY, None)
    if params is None or opts is None:
        return None
    fixtures = getattr(item, "fixturenames", ())
    hpc = hpc_session_of(item.config)
    spec = opts.spec
    if "grpc_server" in fixtures or "grpc_bench" in fixtures:
        reason = on_tcp_reason(spec, hpc)
        if reason:
            return reason
    if "hpc_virtual_cluster" in fixtures and "grpc_bench" not in fixtures:  # p2p_across
        reason = netns_reason(spec, opts.runtime, NETNS)
        if reason:
            return reason
    sel = hpc.selection if isinstance(hpc.selection, FabricSelection) else None
    if "grpc_bench" in fixtures or params.get("grpc_client_kind") == "native":
        reason = no_device_reason(spec, sel, hpc.fabric_kind)  # resolving the runtime
        if reason:
            return reason
    if "grpc_bench" in fixtures:
        label = str(params.get("grpc_runtime", opts.runtime))
        if params.get("grpc_peer", "native") != "native" and not spec.stock:
            return python_peer_reason(label, str(params["grpc_peer"]))
        reason = netns_reason(spec, opts.runtime, str(params.get("hpc_placement")))
        if reason:
            return reason
    if params.get("grpc_client_kind") == "python" and "grpc_connect" in fixtures:
        return python_client_reason(spec)
    return None


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    opts = config.stash.get(OPTIONS_KEY, None)
    if opts is None or opts.perf_peers == opts.peers:
        return []
    return [
        f"hpccomm: quick profile: grpc perf items time the {', '.join(opts.perf_peers)} "
        "peer only (a Python peer's per-RPC cost hides the transport; conformance runs "
        "every peer; --hpc-profile=full or --hpc-grpc-peers times them)"
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if OPTIONS_KEY not in metafunc.config.stash:
        return
    opts = metafunc.config.stash[OPTIONS_KEY]
    if "grpc_peer" in metafunc.fixturenames:
        perf = metafunc.definition.get_closest_marker("perf") is not None
        metafunc.parametrize("grpc_peer", opts.perf_peers if perf else opts.peers, scope="session")
    if "grpc_mode" in metafunc.fixturenames:
        metafunc.parametrize("grpc_mode", opts.modes, scope="session")
    if "grpc_client_kind" in metafunc.fixturenames:
        metafunc.parametrize("grpc_client_kind", opts.clients, scope="session")
    if "grpc_runtime" in metafunc.fixturenames and len(labels(opts.spec)) > 1:
        metafunc.parametrize("grpc_runtime", labels(opts.spec), scope="session")
