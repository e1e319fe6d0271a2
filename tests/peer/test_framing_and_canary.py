"""The peer-side helpers every stack shares: result framing and the canary's stretch."""

from __future__ import annotations

import pytest

from pytest_hpccomm.peer import framing
from pytest_hpccomm.peer.canary import finish, stretch
from pytest_hpccomm.stacks.grpc.build import constants_header


def test_documents_survive_chatter_and_a_cut_off_last_one() -> None:
    out = "MPI warning\n" + framing.frame({"a": 1}) + "log line\n" + framing.frame({"b": [2]})
    cut = out + f'{framing.BEGIN}\n{{"c": 3'
    assert framing.parse_all(cut) == [{"a": 1}, {"b": [2]}]
    assert framing.parse_last(out) == {"b": [2]}
    assert framing.parse_last(cut) == {"b": [2]}  # the cut-off one is not the last document
    with pytest.raises(ValueError, match="no result document"):
        framing.parse_last("nothing framed here")


def test_the_native_peer_prints_the_same_markers() -> None:
    # the C++ peer's markers come from a header generated out of framing.py at build time
    text = constants_header()
    assert f'"{framing.BEGIN}"' in text and f'"{framing.END}"' in text


def test_stretch_spins_the_factor() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    # first reading 1.0 (the region's own time, returned): target 1.5, one more passes it
    assert stretch(0.0, 1.5, clock) == 1.0
    assert now[0] == 2.0
    now[0] = 10.0
    assert stretch(10.0, 1.0, clock) == 0.0  # no canary: no clock reading at all
    assert now[0] == 10.0


def test_finish_gives_the_regions_time_and_its_own_work() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    # work read at 1.0, the spin passes 1.5 at 2.0, the end read at 3.0
    assert finish(0.0, 1.5, clock) == (3.0, 1.0)
    now[0] = 10.0
    assert finish(10.0, 1.0, clock) == (1.0, 1.0)  # no canary: one reading, both equal
