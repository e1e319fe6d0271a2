"""Start a program with environment variables read from stdin: how a peer started over a
remote shell gets its control channel's key without it appearing in any command line.

    ssh HOST 'cd ROOT && exec python -m pytest_hpccomm.peer.stdin_env -- ARGV...' <<< '{"K": "V"}'

Reads one JSON object from stdin, adds it to the environment, asks the kernel to end the
program when the remote shell's session process goes away (the connection dropped or the
orchestrator's job was stopped), and execs ARGV. Stdlib only.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m pytest_hpccomm.peer.stdin_env -- ARGV... < env.json",
              file=sys.stderr)
        return 2
    try:
        extra = json.loads(sys.stdin.readline() or "{}")
    except json.JSONDecodeError as exc:
        print(f"stdin_env: the environment on stdin is not JSON: {exc}", file=sys.stderr)
        return 2
    os.environ.update({str(k): str(v) for k, v in extra.items()})
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: the remote `timeout` still bounds the program
    os.execvp(argv[0], argv)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
