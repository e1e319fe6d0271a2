"""TensorFlow's known defects are keyed by the symptom a run showed, and nothing near it."""

from __future__ import annotations

from pytest_hpccomm.stacks.tf.fixtures import empty_first_read


def test_an_empty_first_read_is_the_known_defect() -> None:
    reason = empty_first_read("2.20.0: 0 bytes instead of 64", 64)
    assert reason.startswith("TensorFlow 2.20.0 defect: the first read of a 64 B variable")


def test_other_wrong_reads_stay_failures() -> None:
    assert empty_first_read("2.20.0: 32 bytes instead of 64", 64) == ""
    assert empty_first_read("2.20.0: 0 bytes instead of 64", 65536) == ""
    assert empty_first_read("2.20.0: 3 of 64 bytes not 7, bytes 0..2, holding 0", 64) == ""
    assert empty_first_read("", 64) == ""
