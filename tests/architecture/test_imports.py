"""The package's shape, checked from its imports: no cycles, and peer programs that stay on
their side of the control channel.

The peer rule: what runs on the hosts lives in each stack's `peer/` subpackage (its program is
`peer/__main__.py`, `python -m pytest_hpccomm.stacks.<stack>.peer`; further programs beside
it). It runs often under mpirun and in another Python environment, and may import only the
shared peer-side helpers (pytest_hpccomm.peer), its own stack's `peer/` and `wire` and
third-party libraries; never pytest, Hypothesis, the core (plugin, session, cluster, measure,
baselines, report, ...) or the rest of its stack. The orchestrator, in turn, never imports a
peer program (a module of `peer/` run as `__main__`): names both sides share live in the
stack's standard-library-only wire module.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.architecture.imports import PACKAGE, ROOT, closure, cycles, graph

GRAPH = graph()
# every module of a stack's peer/ subpackage: the host side
PEER_SIDE = sorted(
    m
    for m in GRAPH
    if m.startswith(f"{PACKAGE}.stacks.") and m.count(".") >= 3 and m.split(".")[3] == "peer"
)


def _is_program(module: str) -> bool:
    path = ROOT.parent / (module.replace(".", "/") + ".py")
    if not path.is_file():
        path = ROOT.parent / module.replace(".", "/") / "__init__.py"
    return module.endswith(".__main__") or 'if __name__ == "__main__"' in path.read_text()


PEERS = [m for m in PEER_SIDE if _is_program(m)]  # the programs run with python -m
TEST_TOOLS = ("pytest", "_pytest", "hypothesis", "pluggy")


def stack_of(module: str) -> str:
    return ".".join(module.split(".")[:3])  # pytest_hpccomm.stacks.<stack>


def test_there_are_peer_programs_to_check() -> None:
    assert f"{PACKAGE}.stacks.mpi.peer.__main__" in PEERS and len(PEERS) >= 5, PEERS


@pytest.mark.parametrize("stack", ["grpc", "horovod", "mpi", "tf", "verbs"])
def test_every_stack_has_its_host_side_in_peer(stack: str) -> None:
    assert f"{PACKAGE}.stacks.{stack}.peer.__main__" in PEERS, PEERS


def test_no_import_cycles() -> None:
    found = cycles(GRAPH)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_import_cycles_in_the_types_either() -> None:
    # an `if TYPE_CHECKING:` import back into a module that imports this one is a cycle of
    # design, hidden from the interpreter: a Protocol where the user is, or a narrower argument
    found = cycles(graph(typing=True))
    assert not found, "type-level cycles: " + "; ".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("peer", PEER_SIDE)
def test_the_host_side_imports_no_orchestrator_code(peer: str) -> None:
    stack = stack_of(peer)
    allowed = {PACKAGE, f"{PACKAGE}.stacks", stack, f"{stack}.wire"}
    bad = [
        m
        for m in sorted(closure(peer, GRAPH))
        if m in TEST_TOOLS
        or (
            m.startswith(PACKAGE)
            and m not in allowed
            and not m.startswith((f"{PACKAGE}.peer", f"{stack}.peer"))
        )
    ]
    assert not bad, f"{peer} imports (maybe through others) orchestrator code: {bad}"


@pytest.mark.parametrize("peer", PEERS)
def test_a_peer_program_loads_without_pytest_in_a_fresh_interpreter(peer: str) -> None:
    """What really happens at import (the static walk above also sees lazy imports)."""
    code = (
        f"import sys, importlib; importlib.import_module({peer!r}); "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {TEST_TOOLS!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT.parent
    )
    if out.returncode != 0 and "ModuleNotFoundError" in out.stderr:
        missing = out.stderr.strip().splitlines()[-1]
        if f"'{PACKAGE}" not in missing:  # a stack's runtime (pyverbs, grpc) not installed here
            pytest.skip(f"{peer}: {missing}")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"{peer} pulled in {out.stdout.strip()}"


def test_the_orchestrator_imports_no_peer_program() -> None:
    bad = {m: sorted(GRAPH[m] & set(PEERS)) for m in GRAPH if m not in PEERS}
    bad = {m: peers for m, peers in bad.items() if peers}
    assert not bad, f"orchestrator modules import peer programs (use the wire module): {bad}"


PLUGINS = (
    "pytest_hpccomm.plugin",
    "pytest_hpccomm.stacks.grpc.plugin",
    "pytest_hpccomm.stacks.mpi.plugin",
    "pytest_hpccomm.stacks.verbs.plugin",
    "pytest_hpccomm.stacks.horovod.plugin",
    "pytest_hpccomm.stacks.tf.plugin",
)


def test_loading_the_plugins_does_not_load_scipy_stats() -> None:
    """scipy.stats is most of the plugins' import cost: every pytest session, a collect-only
    one, a conformance-only one or a guest's, would pay it before its first test; it loads
    when a verdict is first computed (the modules use it as scipy.stats, which scipy loads
    on first access)."""
    code = (
        f"import sys, importlib; [importlib.import_module(m) for m in {PLUGINS!r}]; "
        "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT.parent
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"the plugins pulled in {out.stdout.strip()}"
