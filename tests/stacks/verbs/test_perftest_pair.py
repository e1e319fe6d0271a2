"""How one perftest pair is run and judged: the client starts once (a failed client leaves its
server mid-protocol, so a second one would fail for that); the server is stopped, not waited
for, when the client failed; a hang says so; perftest's own known defect (a refused RDMA CM
connect, then SIGSEGV in its retry) is told apart from any other failure. The jobs are
stand-ins: what is under test is the rule."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_hpccomm.proc.jobs import JobResult
from pytest_hpccomm.stacks.verbs import perftest

REFUSED = JobResult(("ib_send_lat",), -11, " ERRNO: Connection refused.\n", "", 0.8, False)
REFUSED_EXIT = JobResult(("ib_send_lat",), 1, " ERRNO: Connection refused.\n", "", 0.8, False)
OK = JobResult(("ib_send_lat",), 0, "t_avg 10.0\n", "", 1.0, False)
CRASH = JobResult(("ib_send_lat",), -11, "", "", 0.8, False)
EXCHANGE = JobResult(
    ("ib_write_lat",),
    1,
    "",
    "Bad wc status -- 5 -- 1\nFailed to exchange data between server and clients\n",
    0.5,
    False,
)


class Server:
    def __init__(self, gone: bool = False) -> None:
        self.gone = gone

    def poll(self) -> int | None:
        return 0 if self.gone else None


def clients(monkeypatch: pytest.MonkeyPatch, results: list[JobResult]) -> list[Any]:
    calls: list[Any] = []

    def fake(argv: Any, *a: Any, **kw: Any) -> JobResult:
        calls.append(argv)
        return results[len(calls) - 1]

    monkeypatch.setattr(perftest, "run_job", fake)
    monkeypatch.setattr(perftest.time, "sleep", lambda s: None)
    return calls


@pytest.mark.parametrize(
    "client,defect",
    [
        (REFUSED, "client refused by RDMA CM ('Connection refused'), then killed by SIGSEGV"),
        (REFUSED_EXIT, ""),  # refused, but no crash: not this defect's symptom
        (CRASH, ""),  # a crash without a refusal is the program's own failure
        (EXCHANGE, ""),
    ],
)
def test_a_failed_client_runs_once_and_names_a_known_defect_only_by_its_symptom(
    monkeypatch: pytest.MonkeyPatch, client: JobResult, defect: str
) -> None:
    made = clients(monkeypatch, [client, OK])
    server = WaitingServer(OK)
    monkeypatch.setattr(perftest, "start_job", lambda *a, **kw: server)
    monkeypatch.setattr(perftest, "command", lambda *a: ["ib_send_lat"])
    monkeypatch.setattr(perftest, "listening", lambda port: True)
    with pytest.raises(perftest.PerftestFailed) as failed:
        perftest.run_pair(
            "ib_send_lat",
            SimpleNamespace(address="10.0.0.1"),  # type: ignore[arg-type]
            64,
            200,
        )
    # line-buffered: what a side killed on its timeout printed reaches the message
    assert made == [[*perftest.line_buffered(), "ib_send_lat", "10.0.0.1"]]
    assert perftest.line_buffered() == ["stdbuf", "-oL"]  # coreutils: there on every host
    assert failed.value.defect == defect
    assert server.waited == 0, "the server was waited for after its client failed"
    # what the program printed before its last line is in the message (the cause, usually)
    for line in (client.stderr + client.stdout).strip().splitlines():
        assert line.strip() in str(failed.value)


HUNG = JobResult(("ib_send_lat",), -9, "", "", 120.4, True)


class WaitingServer(Server):
    def __init__(self, result: JobResult) -> None:
        super().__init__()
        self.result = result
        self.waited = 0

    def peek_output(self) -> tuple[str, str]:
        return perftest.LISTENING, ""

    def wait(self, timeout: float) -> JobResult:
        self.waited += 1
        return self.result

    def stop(self) -> JobResult:
        return self.result


@pytest.mark.parametrize("client,hung", [(HUNG, True), (CRASH, False)])
def test_a_pair_that_outlived_its_timeout_says_it_hung(
    monkeypatch: pytest.MonkeyPatch, client: JobResult, hung: bool
) -> None:
    # a hang says so (the item's failure names it)
    clients(monkeypatch, [client])
    monkeypatch.setattr(perftest, "start_job", lambda *a, **kw: WaitingServer(OK))
    monkeypatch.setattr(perftest, "command", lambda *a: ["ib_send_lat"])
    monkeypatch.setattr(perftest, "listening", lambda port: True)
    with pytest.raises(perftest.PerftestFailed) as failed:
        perftest.run_pair(
            "ib_send_lat",
            SimpleNamespace(address="10.0.0.1"),  # type: ignore[arg-type]
            64,
            200,
        )
    assert failed.value.hung is hung


def test_a_hung_pair_fails_the_item_and_is_not_launched_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hang is the stack's (perftest's own programs over the device under test): the item
    fails the first time, naming the hang; the pair is not launched again."""
    from pytest_hpccomm.stacks.verbs.fixtures import run_perftest

    launches: list[str] = []

    def hung_then_fine(program: str, *a: Any, **kw: Any) -> Any:
        launches.append(program)
        if len(launches) == 1:
            raise perftest.PerftestFailed("ib_send_lat client hung 120 s", hung=True)
        return SimpleNamespace(report={"t_avg": 10.0})

    monkeypatch.setattr(perftest, "run_pair", hung_then_fine)
    monkeypatch.setattr(perftest, "missing", lambda program: "")
    with pytest.raises(pytest.fail.Exception, match="client hung 120 s"):
        run_perftest(
            "ib_send_lat",
            64,
            SimpleNamespace(device="rxe0"),  # type: ignore[arg-type]
            {},
            True,
            lambda *a: None,
        )
    assert launches == ["ib_send_lat"]


def test_the_known_defect_is_an_xfail_naming_what_was_observed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_hpccomm.stacks.verbs.fixtures import run_perftest

    def refused(*a: Any, **kw: Any) -> Any:
        raise perftest.PerftestFailed("ib_write_lat client: exit -11", defect="refused, SIGSEGV")

    monkeypatch.setattr(perftest, "run_pair", refused)
    monkeypatch.setattr(perftest, "missing", lambda program: "")
    with pytest.raises(
        pytest.xfail.Exception,
        match="known perftest defect: observed refused, SIGSEGV. perftest before 26.04.17",
    ):
        run_perftest(
            "ib_write_lat",
            64,
            SimpleNamespace(device="siw0"),  # type: ignore[arg-type]
            {},
            True,
            lambda *a: None,
        )
