"""Local launcher: one peer process on this machine, no MPI launcher involved."""

from __future__ import annotations

import socket
from typing import Mapping

from pytest_hpccomm.cluster.launchers.spec import Launch, LaunchSpec, base_env, interface_env

LOCAL_NAMES = {"localhost", "127.0.0.1", "::1"}


class LocalLauncher:
    name = "local"

    def __init__(self, base: Mapping[str, str] | None = None) -> None:
        self._base = base

    def command(self, spec: LaunchSpec) -> Launch:
        if spec.n_ranks != 1:
            raise ValueError(f"local launcher runs one process, not {spec.n_ranks}: use mpirun")
        host = spec.hosts[0].name
        if host not in LOCAL_NAMES | {socket.gethostname(), socket.getfqdn()}:
            raise ValueError(f"local launcher cannot start a process on {host!r}")
        env = base_env({**spec.env, **interface_env(spec.interface)}, self._base)
        return Launch(list(spec.argv), env)
