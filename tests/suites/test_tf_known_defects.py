"""TensorFlow's known-defect keys (pytest_hpccomm.stacks.tf.defects) against the words real runs
gave, and the near misses that must stay failures."""

from __future__ import annotations

from pytest_hpccomm.stacks.tf import defects

# a CI run's loss of worker:0 during its timed-out all_gather_v2 (TensorFlow 2.21.0)
LOST = (
    "tensorflow 2w-collective loopback: worker:0 lost during collective: peer ? closed the "
    "channel; tensorflow 2w-collective loopback worker:0 exit -11 after 4.6s: The error could "
    "be from a previous operation. Restart your program to reset. "
    "[type.googleapis.com/tensorflow.DerivedStatus='']; tensorflow 2w-collective loopback "
    "worker:1 exit 0 after 4.6s: "
)
TIMEOUT = 1.5


def test_a_crash_before_the_timeout_reply_is_the_known_defect() -> None:
    got = defects.crash_before_the_timeout_reply(LOST, "worker:0", "all_gather_v2", 1.6, TIMEOUT)
    assert got is not None and got.startswith("worker:0 exit -11 after 4.6s")
    assert defects.crash_before_the_timeout_reply(LOST, "worker:0", "all_gather", 3.0, TIMEOUT)


def test_near_misses_of_the_crash_before_the_reply_stay_failures() -> None:
    key = defects.crash_before_the_timeout_reply
    assert key(LOST, "worker:0", "all_reduce_v2", 1.6, TIMEOUT) is None  # not a gather
    assert key(LOST, "worker:0", "all_gather_v2", 1.4, TIMEOUT) is None  # before its timeout
    assert key(LOST, "worker:1", "all_gather_v2", 1.6, TIMEOUT) is None  # another task
    aborted = LOST.replace("exit -11", "exit -6")
    assert key(aborted, "worker:0", "all_gather_v2", 1.6, TIMEOUT) is None  # another signal
    silent = LOST.replace("Restart your program to reset", "")
    assert key(silent, "worker:0", "all_gather_v2", 1.6, TIMEOUT) is None  # no abort words


def test_a_crash_after_the_timeout_reply_is_the_known_defect_only_after_a_gather() -> None:
    ended = "tensorflow 2w-collective loopback worker:0 exit -11 after 7.2s: ; worker:1 exit 0"
    assert defects.crash_after_gather_timeout(ended, "worker:0", "all_gather") == (
        "worker:0 exit -11"
    )
    assert defects.crash_after_gather_timeout(ended, "worker:0", "all_reduce") is None
    assert defects.crash_after_gather_timeout(ended, "worker:1", "all_gather") is None
    assert (
        defects.crash_after_gather_timeout(ended.replace("-11", "-110"), "worker:0", "all_gather")
        is None
    )
