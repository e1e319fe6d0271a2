"""perftest's client is started again when its connection was refused while the server still
waits (siw's listener can exist before rdma_cm accepts on it); not when the server is gone, not
for any other failure. The jobs are stand-ins: what is under test is the retry rule."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_hpccomm import retries
from pytest_hpccomm.cluster.jobs import JobResult
from pytest_hpccomm.stacks.verbs import perftest


@pytest.fixture(autouse=True)
def own_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    """This module's retries are stand-ins: counted in a ledger of their own, not in the
    session's that runs these tests."""
    monkeypatch.setattr(retries, "_counts", Counter())


REFUSED = JobResult(("ib_send_lat",), -11, " ERRNO: Connection refused.\n", "", 0.8, False)
OK = JobResult(("ib_send_lat",), 0, "t_avg 10.0\n", "", 1.0, False)
CRASH = JobResult(("ib_send_lat",), -11, "", "", 0.8, False)


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


@pytest.mark.parametrize("results,server,calls,final", [
    ([REFUSED, REFUSED, OK], Server(), 3, OK),
    ([REFUSED, REFUSED, REFUSED], Server(), 3, REFUSED),  # at most REFUSED_TRIES
    ([REFUSED, OK], Server(gone=True), 1, REFUSED),  # nobody left to connect to
    ([CRASH, OK], Server(), 1, CRASH),  # another failure is the program's own
    ([OK], Server(), 1, OK),
])
def test_refused_clients_are_retried_while_the_server_waits(
        monkeypatch: pytest.MonkeyPatch, results: list[JobResult], server: Server, calls: int,
        final: JobResult) -> None:
    made = clients(monkeypatch, results)
    assert perftest._client(["ib_send_lat"], "10.0.0.1", 10.0, "ib_send_lat", server) is final
    assert len(made) == calls and made[0] == ["ib_send_lat", "10.0.0.1"]


HUNG = JobResult(("ib_send_lat",), -9, "", "", 120.4, True)


class WaitingServer(Server):
    def __init__(self, result: JobResult) -> None:
        super().__init__()
        self.result = result

    def peek_output(self) -> tuple[str, str]:
        return perftest.LISTENING, ""

    def wait(self, timeout: float) -> JobResult:
        return self.result

    def stop(self) -> JobResult:
        return self.result


@pytest.mark.parametrize("client,hung", [(HUNG, True), (CRASH, False)])
def test_a_pair_that_outlived_its_timeout_says_it_hung(
        monkeypatch: pytest.MonkeyPatch, client: JobResult, hung: bool) -> None:
    # a hang says so (the item's failure names it)
    clients(monkeypatch, [client])
    monkeypatch.setattr(perftest, "start_job", lambda *a, **kw: WaitingServer(OK))
    monkeypatch.setattr(perftest, "command", lambda *a: ["ib_send_lat"])
    monkeypatch.setattr(perftest, "listening", lambda port: True)
    with pytest.raises(perftest.PerftestFailed) as failed:
        perftest.run_pair("ib_send_lat", SimpleNamespace(address="10.0.0.1"),  # type: ignore[arg-type]
                          64, 200)
    assert failed.value.hung is hung


def test_a_hung_pair_fails_the_item_and_is_not_launched_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
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
        run_perftest("ib_send_lat", 64, SimpleNamespace(device="rxe0"),  # type: ignore[arg-type]
                     {}, True, lambda *a: None)
    assert launches == ["ib_send_lat"]
