"""The gRPC stack's options: defaults, payload settings, one-line usage errors."""

from __future__ import annotations

import pytest

PLUGIN: tuple[str, ...] = ()  # the hpccomm_grpc entry point loads the plugin

SHOW_RUNTIME = """
def test_show(grpc_options):
    print("RUNTIME", grpc_options.runtime, grpc_options.spec.env, grpc_options.build,
          grpc_options.clients)
"""

SHOW = """
def test_show(grpc_options):
    o = grpc_options
    print("OPTS", o.runtime, o.peers, o.modes, o.payload.buffers, o.payload.large,
          o.payload.skew, o.workers, o.ps, o.examples, o.max_message, o.clients)
"""


def test_defaults_and_overrides(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_show=SHOW)
    r = pytester.runpytest(*PLUGIN, "-s", "--hpc-history=none")
    r.stdout.fnmatch_lines(
        [
            "*OPTS grpc ('python', 'python-aio', 'native') ('serialized', 'raw') "
            "10 1048576 (60.0, 30.0, 10.0) 2 2 25 22020096 ('python', 'native')*"
        ]
    )
    r = pytester.runpytest(
        *PLUGIN,
        "-s",
        "--hpc-history=none",
        "--hpc-grpc-runtime=ar-grpc",
        "--hpc-grpc-peers=native",
        "--hpc-grpc-modes=raw",
        "--hpc-grpc-buffers=4",
        "--hpc-grpc-large=2M",
        "--hpc-grpc-skew=1,1,2",
        "--hpc-profile=full",
        "--hpc-grpc-clients=python",
    )
    r.stdout.fnmatch_lines(
        ["*OPTS ar-grpc ('native',) ('raw',) 4 2097152 (1.0, 1.0, 2.0) 2 2 200 * ('python',)"]
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--hpc-grpc-peers=python,jython"],
            "--hpc-grpc-peers: jython: choose from python, python-aio, native",
        ),
        (["--hpc-grpc-modes="], None),  # empty: the default applies
        (
            ["--hpc-grpc-clients=native,java"],
            "--hpc-grpc-clients: java: choose from python, native",
        ),
        (
            ["--hpc-grpc-small=2K"],
            "--hpc-grpc payload: small buffers must be 1..1023 bytes, not 2048",
        ),
        (["--hpc-grpc-buffers=many"], "--hpc-grpc-buffers: expected a number, got 'many'"),
        (["--hpc-grpc-skew=1,2"], "skew needs three non-negative weights"),
        (
            ["--hpc-grpc-plant-bug=segv"],
            "--hpc-grpc-plant-bug: 'segv': choose from drop-last-buffer",
        ),
        (["--hpc-grpc-runtime=a b"], "--hpc-grpc-runtime: 'a b': letters, digits"),
        (
            ["--hpc-base=grpc=system", "--hpc-candidate=grpc=/opt/g", "--hpc-grpc-prefix=/opt/g"],
            "--hpc-grpc-prefix cannot be combined with a paired A/B run of grpc",
        ),
        (
            ["--hpc-base=grpc=system", "--hpc-candidate=grpc=/opt/g", "--hpc-grpc-peers=python"],
            "a paired A/B run of grpc compares native peers",
        ),
        (
            ["--hpc-grpc-preset=ar-grpc"],
            "--hpc-grpc-preset: 'ar-grpc': choose from rsocket, "
            "rsocket-compat, rr-compound-bp, rr-compound-bpev, rdma",
        ),
        (
            ["--hpc-grpc-preset=rr-compound-bp"],
            "--hpc-grpc-preset rr-compound-bp: the runtime is a "
            "build of your own: name its install prefix",
        ),
        (
            ["--hpc-grpc-env=GRPC_PLATFORM_TYPE"],
            "--hpc-grpc-env: 'GRPC_PLATFORM_TYPE': expected KEY=VALUE",
        ),
        (["--hpc-grpc-env=X={gid}"], "--hpc-grpc-env X: unknown placeholder {gid}"),
        (
            ["--hpc-base=grpc=system", "--hpc-candidate=grpc=/opt/g", "--hpc-grpc-preset=rsocket"],
            "a paired A/B run of grpc builds both sides here, on stock gRPC",
        ),
    ],
)
def test_bad_values_are_one_line_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str | None
) -> None:
    pytester.makepyfile(test_show=SHOW)
    r = pytester.runpytest(*PLUGIN, "--hpc-history=none", *args)
    if message is None:
        assert r.ret == 0
        return
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([f"*{message}*"])


def test_runtime_options_and_ini(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_show=SHOW_RUNTIME)
    pytester.makeini("[pytest]\nhpc_grpc_env =\n    A=1\n    B={device}\n")
    peer = pytester.mkdir("peer")  # --hpc-grpc-build must be a directory (a usage error else)
    r = pytester.runpytest(
        *PLUGIN,
        "-s",
        "--hpc-history=none",
        "--hpc-grpc-preset=rsocket",
        "--hpc-grpc-env=C=3",
        f"--hpc-grpc-build={peer}",
    )
    # under a runtime the conformance calls are the native peer's (grpcio stays outside it)
    r.stdout.fnmatch_lines(
        [f"*RUNTIME rsocket (('A', '1'), ('B', '{{device}}'), ('C', '3')) {peer} ('native',)*"]
    )


PEER_ITEMS = """
import pytest

@pytest.mark.perf
def test_timed(grpc_peer):
    pass

def test_checked(grpc_peer):
    pass
"""


@pytest.mark.parametrize(
    "args, timed",
    [
        ([], ["native"]),  # quick: the Python peers' per-RPC cost hides the transport
        (["--hpc-profile=full"], ["python", "python-aio", "native"]),
        (["--hpc-grpc-peers=python,native"], ["python", "native"]),  # named: taken as named
    ],
)
def test_quick_profile_times_the_native_peer_unless_peers_are_named(
    pytester: pytest.Pytester, args: list[str], timed: list[str]
) -> None:
    pytester.makepyfile(test_peers=PEER_ITEMS)
    r = pytester.runpytest(*PLUGIN, "--collect-only", "-q", "--hpc-history=none", *args)
    ids = [line.split("::")[1] for line in r.outlines if "::" in line]
    assert sorted(i for i in ids if i.startswith("test_timed")) == sorted(
        f"test_timed[{p}]" for p in timed
    )
    checked = ["python", "python-aio", "native"] if "--hpc-grpc-peers" not in str(args) else timed
    assert sorted(i for i in ids if i.startswith("test_checked")) == sorted(
        f"test_checked[{p}]" for p in checked
    )
    narrowed = "*quick profile: grpc perf items time the native peer only*"
    if args:
        r.stdout.no_fnmatch_line(narrowed)
    else:
        r.stdout.fnmatch_lines([narrowed])
