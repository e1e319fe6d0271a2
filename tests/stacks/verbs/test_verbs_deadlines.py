"""A dead link or a silent peer fails its verbs item within a bounded time, Hypothesis does not
shrink on it, and the next item still runs (issue 11: a siw link TERMINATEd inside a property
hung the guest until its job timeout).

Orchestration only: the peers are fakes behind the real Peer / VerbsPair code (no pyverbs on
this host), answering as a peer on a dead link does — no completions, the QP in ERR — or not
at all. The real thing runs in the guest (test_verbs_guest.py).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from pytest_hpccomm.stacks.verbs import watchdog
from tests.stacks.verbs.test_verbs_plugin import plugin_args, tree, with_pyverbs

FAKES = '''
import itertools
import time
from types import SimpleNamespace

from pytest_hpccomm.stacks.verbs.driver import Peer, Side, VerbsPair


class FakeJob:
    label = "fake peer"

    def peek_output(self):
        return "", ""

    def poll(self):
        return None

    def wait(self, timeout=None):
        return 0

    def stop(self):
        pass


class FakeChannel:
    """dead: executes/polls return no completions, diagnose finds the QP in ERR after a
    DISCONNECTED; silent: takes requests and never answers."""

    def __init__(self, mode):
        self.mode, self.replies, self.requests = mode, [], []

    def send(self, msg):
        self.requests.append(msg["op"])
        if self.mode == "silent" or "id" not in msg:
            return
        result = None
        if msg["op"] in ("execute", "poll"):
            result = []
        elif msg["op"] == "diagnose":
            result = {"qp_state": "ERR", "cm_events": ["RDMA_CM_EVENT_DISCONNECTED"]}
        self.replies.append({"id": msg["id"], "ok": True, "result": result})

    def recv(self, timeout=None):
        if self.replies:
            return self.replies.pop(0)
        time.sleep(timeout or 0)
        raise TimeoutError(f"no message within {timeout}s")

    def request(self, msg, timeout=30.0):
        return "bye"

    def close(self):
        pass


class FakePair(VerbsPair):
    generation = itertools.count()
    call_margin = 0.5  # a silent peer is given up on after its wait + 0.5 s

    def __init__(self, mode):
        self.mode = mode
        sel = SimpleNamespace(device="siw0", driver="siw", address="10.77.0.1")
        super().__init__(*self._peers(), sel)

    def _peers(self):
        n = next(self.generation)
        return [Peer(f"peer{i}.{n}", FakeJob(), FakeChannel(self.mode), {"iwarp": True})
                for i in range(2)]

    def restart(self):
        self.mode = "dead"  # the new peers answer again
        self.a, self.b = self._peers()
        self.restarts += 1

    def side(self):
        return Side(self.a, 1, {})
'''

CONFTEST = """
import pytest

from pytest_hpccomm.stacks.verbs.plugin import PAIR_KEY
from fakes import FakePair


@pytest.fixture(scope="session")
def verbs_pair(pytestconfig):
    pair = FakePair(pytestconfig.getoption("--fake-mode"))
    pytestconfig.stash[PAIR_KEY] = pair
    yield pair
    del pytestconfig.stash[PAIR_KEY]


def pytest_addoption(parser):
    parser.addoption("--fake-mode", default="dead")
"""

ITEMS = """
import time

import pytest
from hypothesis import given, settings, strategies as st

pytestmark = pytest.mark.stack("verbs")
EXAMPLES = []


def test_dead_link(verbs_pair):
    @settings(max_examples=50, deadline=None, database=None)
    @given(st.integers(0, 1 << 20))
    def prop(size):
        EXAMPLES.append(size)
        wr = {"opcode": "RDMA_READ", "length": size, "wr_id": 7}
        verbs_pair.execute(verbs_pair.side(), [wr], timeout=0.2)

    started = time.monotonic()
    try:
        prop()
    finally:
        print(f"EXAMPLES {len(EXAMPLES)} in {time.monotonic() - started:.1f} s")


def test_next_item_runs(verbs_pair):
    print(f"NEXT ran after {verbs_pair.restarts} restart(s)")
    assert not verbs_pair.broken
"""


def run(pytester: pytest.Pytester, mode: str, *args: str) -> tuple[pytest.RunResult, float]:
    with_pyverbs(pytester)
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_items=ITEMS)
    started = time.monotonic()
    result = pytester.runpytest(
        "-s",
        "-p",
        "no:cacheprovider",
        *plugin_args(),
        "--hpc-fabric=softroce",
        tree("softroce-rxe"),
        f"--fake-mode={mode}",
        *args,
    )
    return result, time.monotonic() - started


def test_dead_link_fails_its_item_at_once_with_the_evidence(pytester: pytest.Pytester) -> None:
    result, took = run(pytester, "dead")
    result.assert_outcomes(passed=1, failed=1)
    # one example, no shrinking on the dead link: LinkDown is outside what Hypothesis catches
    result.stdout.fnmatch_lines(["*EXAMPLES 1 in *", "*NEXT ran after 0 restart(s)*"])
    text = result.stdout.str()
    assert "LinkDown: siw0: 0 of 1 send completions within 0.2 s (none for RDMA_READ#7)" in text
    assert "QP state as the device reports it: ERR" in text
    assert "rdma_cm events: RDMA_CM_EVENT_DISCONNECTED" in text
    assert took < 30, f"took {took:.0f} s"


def test_silent_peer_fails_its_item_and_the_pair_is_restarted(pytester: pytest.Pytester) -> None:
    result, took = run(pytester, "silent")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*EXAMPLES 1 in *",
            "*NEXT ran after 1 restart(s)*",
            "*PeerError: peer0.*: no message within 0.*",
        ]
    )
    assert took < 30, f"took {took:.0f} s"


SHRINKS_FOREVER = """
import time

import pytest
from hypothesis import given, settings, strategies as st

pytestmark = pytest.mark.stack("verbs")


def test_property_that_never_ends():
    # every example fails slowly and differently, as examples on a dead link did; pytest's
    # Failed (what pytest-timeout's signal method raises) would be one more failing example
    @settings(max_examples=10_000, deadline=None, database=None)
    @given(st.lists(st.integers()))
    def prop(xs):
        time.sleep(0.05)
        pytest.fail(f"failing example {xs}")

    prop()


def test_after():
    print("AFTER ran")
"""


def test_item_deadline_ends_a_property_hypothesis_would_shrink_on(
    pytester: pytest.Pytester,
) -> None:
    with_pyverbs(pytester)
    pytester.makepyfile(test_forever=SHRINKS_FOREVER)
    started = time.monotonic()
    result = pytester.runpytest(
        "-s",
        "-p",
        "no:cacheprovider",
        *plugin_args(),
        "--hpc-fabric=softroce",
        tree("softroce-rxe"),
        "--hpc-verbs-deadline=2",
    )
    took = time.monotonic() - started
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*AFTER ran*", "*ItemDeadline*past its verbs deadline of 2 s*"])
    assert took < 30, f"took {took:.0f} s"


def test_deadline_stays_below_pytest_timeout(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_timeout")
    with_pyverbs(pytester)
    pytester.makepyfile("""
        import pytest
        from pytest_hpccomm.stacks.verbs.plugin import item_deadline

        pytestmark = pytest.mark.stack("verbs")

        def test_default(request):
            print("DEADLINE", item_deadline(request.node))

        @pytest.mark.timeout(10)
        def test_marked(request):
            print("DEADLINE", item_deadline(request.node))
    """)
    result = pytester.runpytest(
        "-s",
        "-p",
        "no:cacheprovider",
        *plugin_args(),
        "--hpc-fabric=softroce",
        tree("softroce-rxe"),
        "--timeout=100",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*DEADLINE 80.0*", "*DEADLINE 8.0*"])


def test_a_late_watchdog_signal_is_ignored() -> None:
    with watchdog.deadline(60, "quick item") as armed:
        assert armed is not None and not armed.fired
    os.kill(os.getpid(), watchdog.SIGNAL)  # after its item: must neither raise nor kill
    time.sleep(0.05)
    assert signal.getsignal(watchdog.SIGNAL) is not signal.SIG_DFL
