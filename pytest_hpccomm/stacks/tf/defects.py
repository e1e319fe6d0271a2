"""Known defects of TensorFlow's collectives, keyed by what a run shows (the tests turn a
match into an xfail naming it; anything else stays a failure). Pure: each reads the words the
orchestrator has of how the tasks ended.
"""

from __future__ import annotations

import re

SIGSEGV = "exit -11"  # a task's job ended by signal 11, as the jobs' endings say it
# TensorFlow's words as it aborts the task's collective executor on a collective's error
ABORTED = "Restart your program to reset"


def crash_after_gather_timeout(ended: str, task: str, op: str) -> str | None:
    """TensorFlow 2.21.0: the task whose all-gather timed out during execution dies of SIGSEGV
    a moment later. `ended`: how the tasks ended, after the task's reply said it timed out.
    The words that show it, or None (another op, another signal, another task)."""
    if "gather" not in op:
        return None
    crash = re.search(rf"{re.escape(task)} {SIGSEGV}\b", ended)
    return crash.group(0) if crash else None


def crash_before_the_timeout_reply(
    lost: str, task: str, op: str, took: float, timeout: float
) -> str | None:
    """The same crash before the timed-out task's reply got out: `task` was lost during its
    all-gather (`lost`: the loss as the orchestrator reports it) no sooner than the
    collective's `timeout`, its job ended by SIGSEGV with TensorFlow's abort words last. The
    words that show it, or None."""
    if "gather" not in op or took < timeout:
        return None
    crash = re.search(rf"{re.escape(task)} {SIGSEGV} after [0-9.]+s: [^;]*{ABORTED}", lost)
    return crash.group(0) if crash else None
