"""Where a hung process is: a real child that waits where we put it, its Python stacks from
its faulthandler, its native stacks from gdb (where installed)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from pytest_hpccomm.peer.channel import STACKS_DIR_VAR
from pytest_hpccomm.proc import stacks
from pytest_hpccomm.proc.jobs import run_job, start_job
from pytest_hpccomm.proc.stacks import StackDumps

# registers the dump signal as a peer does (PeerClient.from_env), then waits in a named
# function; "ready" once the handler is in place
CHILD = """
import os, threading, time
from pytest_hpccomm.peer.channel import register_dump
register_dump(os.environ)
def waits_in_a_helper():
    threading.Event().wait(60)
def waits_here():
    time.sleep(60)
threading.Thread(target=waits_in_a_helper, daemon=True).start()
print("ready", flush=True)
waits_here()
"""


def _ready(job: object) -> None:
    deadline = time.monotonic() + 20
    while "ready" not in job.peek_output()[0]:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the child did not start"
        time.sleep(0.05)


def test_python_stacks_name_where_each_thread_waits() -> None:
    dumps = StackDumps()
    try:
        env = {**os.environ, **dumps.env()}
        with start_job([sys.executable, "-c", CHILD], env, timeout=60, label="child") as job:
            _ready(job)
            seen = dumps.take([job_pid(job)])
            assert job.poll() is None, "asking for stacks must leave the process running"
            err = job.peek_output()[1]
        assert dumps.dir is not None and (dumps.dir / f"{seen[0].pid}.txt").exists()
    finally:
        dumps.close()
    assert dumps.dir is None
    assert len(seen) == 1 and len(seen[0].python) == 2, (seen, err)
    rows = [stacks.innermost(b) for b in seen[0].python]
    assert any(r.startswith("waits_here (<string>:") for r in rows), rows
    assert any("wait (threading.py:" in r and "waits_in_a_helper" in r for r in rows), rows
    assert "most recent call first" not in err, "the dump goes to its file, not to stderr"


def test_without_a_directory_the_dump_goes_to_stderr() -> None:
    env = {k: v for k, v in os.environ.items() if k != STACKS_DIR_VAR}
    with start_job([sys.executable, "-c", CHILD], env, timeout=60, label="child") as job:
        _ready(job)
        assert stacks.ask_python_stacks([job_pid(job)]) == [job_pid(job)]
        deadline = time.monotonic() + 10
        while len(stacks.python_stacks(job.peek_output()[1])) < 2:
            assert time.monotonic() < deadline, job.peek_output()[1]
            time.sleep(0.05)


def test_a_process_that_is_gone_is_not_reached() -> None:
    done = run_job([sys.executable, "-c", "import os; print(os.getpid())"], timeout=10)
    pid = int(done.stdout)
    assert stacks.ask_python_stacks([pid]) == []
    assert stacks.native_stacks(pid) == ""
    assert StackDumps().take([pid]) == []


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb not installed (apt-get install gdb)")
def test_native_stacks_show_each_thread_in_its_system_call() -> None:
    with start_job([sys.executable, "-c", CHILD], timeout=60, label="child") as job:
        _ready(job)
        text = stacks.native_stacks(job_pid(job))
        assert job.poll() is None, "gdb must leave the process running"
    rows = stacks.native_summary(text)
    assert len(rows) == 2, text  # the main thread and the helper
    assert all(any(w in r for w in ("nanosleep", "futex", "pthread_cond", "sem_")) for r in rows), (
        rows
    )


def test_summaries_of_known_texts() -> None:
    block = (
        "Thread 0x00007f (most recent call first):\n"
        '  File "/x/threading.py", line 320 in wait\n'
        '  File "/x/peer.py", line 12 in synchronize\n'
        '  File "/x/peer.py", line 40 in run\n'
        '  File "/x/peer.py", line 80 in main\n'
    )
    assert stacks.python_stacks("noise\n" + block + "more noise\n") == [block.rstrip("\n")]
    assert (
        stacks.innermost(block)
        == "wait (threading.py:320) < synchronize (peer.py:12) < run (peer.py:40)"
    )
    gdb = (
        'Thread 2 (Thread 0x7f (LWP 11) "python"):\n'
        "#0  0x00007f in __futex_abstimed_wait_common () from /lib/libc.so.6\n"
        "#1  0x00007f in gloo::transport::tcp::UnboundBuffer::waitRecv(int*, std::chrono::duration) ()\n"
        "#2  horovod::common::BackgroundThreadLoop (state=...) at operations.cc:10\n"
        "\n"
        'Thread 1 (Thread 0x7e (LWP 10) "python"):\n'
        "#0  0x00007f in clock_nanosleep () from /lib/libc.so.6\n"
    )
    assert stacks.native_summary(gdb) == [
        "__futex_abstimed_wait_common < gloo::transport::tcp::UnboundBuffer::waitRecv"
        " < horovod::common::BackgroundThreadLoop",
        "clock_nanosleep",
    ]


def test_a_rank_polling_in_libevent_is_named_by_its_runtime_frames() -> None:
    # rank 1 of a hung Open MPI 5 receive, as gdb printed it: the innermost four frames are
    # libevent's (two without a symbol); the runtime's frames lie below them
    gdb = (
        'Thread 3 (Thread 0x7fe4 (LWP 25458) "python"):\n'
        "#0  0x00007fe4 in epoll_wait (epfd=8, events=0x55, maxevents=32, timeout=119940) at"
        " epoll_wait.c:30\n"
        "#1  0x00007fe4 in ?? () from /x/openmpi/lib/openmpi/libevent_core-2.1.so.7\n"
        "#2  0x00007fe4 in event_base_loop () from /x/openmpi/lib/openmpi/libevent_core-2.1.so.7\n"
        "#3  0x00007fe4 in ?? () from /x/openmpi/lib/openmpi/libpmix.so.2\n"
        "#4  0x00007fe4 in start_thread (arg=<optimized out>) at pthread_create.c:442\n"
        "#5  0x00007fe4 in clone3 () at clone3.S:81\n"
        "\n"
        'Thread 1 (Thread 0x7fe4 (LWP 25453) "python"):\n'
        "#0  0x00007fe4 in epoll_wait (epfd=3, events=0x55, maxevents=32, timeout=0) at"
        " epoll_wait.c:30\n"
        "#1  0x00007fe4 in ?? () from /x/openmpi/lib/openmpi/libevent_core-2.1.so.7\n"
        "#2  0x00007fe4 in event_base_loop () from /x/openmpi/lib/openmpi/libevent_core-2.1.so.7\n"
        "#3  0x00007fe4 in ?? () from /x/openmpi/lib/libopen-pal.so.80\n"
        "#4  0x00007fe4 in opal_progress () from /x/openmpi/lib/libopen-pal.so.80\n"
        "#5  0x00007fe4 in ompi_sync_wait_mt () from /x/openmpi/lib/libopen-pal.so.80\n"
        "#6  0x00007fe4 in mca_pml_ob1_recv () from /x/openmpi/lib/libmpi.so.40\n"
        "#7  0x00007fe4 in PMPI_Recv () from /x/openmpi/lib/libmpi.so.40\n"
    )
    words = ("mpi", "opal", "pml")
    assert stacks.native_summary(gdb, words=words) == [
        "epoll_wait < event_base_loop < opal_progress < ompi_sync_wait_mt"
    ]  # the pmix progress thread names no runtime function: left out
    # fewer frames asked for: the line still runs on to the first frame of the runtime
    assert stacks.native_summary(gdb, limit=1, words=words) == [
        "epoll_wait < event_base_loop < opal_progress"
    ]
    assert stacks.native_summary(gdb, limit=1) == ["epoll_wait", "epoll_wait"]
    # through the MPI call the rank waits in
    assert stacks.native_summary(gdb, limit=1, words=words, through=("PMPI_",)) == [
        "epoll_wait < event_base_loop < opal_progress < ompi_sync_wait_mt < mca_pml_ob1_recv"
        " < PMPI_Recv"
    ]


def job_pid(job: object) -> int:
    """The child's PID (the job's only process besides the reaper shim)."""
    procs = job.processes()  # type: ignore[attr-defined]
    assert len(procs) == 1, procs
    return next(iter(procs)).pid


# a runtime with its own handler for the dump signal keeps it: the dump is not registered
OWN_HANDLER = """
import os, signal, time
from pytest_hpccomm.peer.channel import DUMP_SIGNAL, register_dump
signal.signal(DUMP_SIGNAL, lambda *_: print("own handler", flush=True))
register_dump(os.environ)
print("ready", flush=True)
time.sleep(60)
"""


def test_a_handler_the_runtime_installed_is_left_to_it() -> None:
    dumps = StackDumps()
    try:
        env = {**os.environ, **dumps.env()}
        with start_job([sys.executable, "-c", OWN_HANDLER], env, timeout=60) as job:
            _ready(job)
            seen = dumps.take([job_pid(job)], settle=0.5)
            deadline = time.monotonic() + 10
            while "own handler" not in job.peek_output()[0]:
                assert time.monotonic() < deadline, job.peek_output()
                time.sleep(0.05)
            assert job.poll() is None
    finally:
        dumps.close()
    assert [s.python for s in seen] == [()], seen


# no dump handler (as the benchmark peers): on_timeout reads native stacks only, so the
# process is not ended by the dump signal and its own last words stay its own
NO_HANDLER = "import time\nprint('ready', flush=True)\ntime.sleep(60)  # hpccomm-marker\n"


def test_on_timeout_names_each_marked_process_by_its_rank(tmp_path: Path) -> None:
    where = stacks.on_timeout("hpccomm-marker", ("sleep", "select"), tmp_path)
    env = {**os.environ, "PMI_RANK": "3"}
    r = run_job([sys.executable, "-c", NO_HANDLER], env, timeout=3.0, grace=1.0, on_timeout=where)
    assert r.timed_out, r
    assert r.hung.startswith("where they waited (rank 3):"), r.hung
    assert r.returncode == -15, r  # ended by the timeout's SIGTERM, not by the dump signal
    if shutil.which("gdb"):
        assert "rank 3 native: " in r.hung and "sleep" in r.hung, r.hung
        kept = r.hung.rsplit("all stacks: ", 1)[1].strip()
        assert "== rank 3 (pid" in Path(kept).read_text(), kept
    other = stacks.on_timeout("not-in-any-command-line", ("sleep",), tmp_path)
    r = run_job(["sleep", "30"], timeout=0.5, grace=0.5, on_timeout=other)
    assert "none of the job's processes here runs not-in-any-command-line" in r.hung, r.hung
