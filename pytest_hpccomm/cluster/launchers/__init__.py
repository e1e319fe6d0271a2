"""Launchers: how peers are started on hosts, one module each behind the Launcher Protocol.

A launcher only builds a command (argument list + environment); jobs.run_job/start_job runs
it. Nothing here goes through a shell, so no host name is ever parsed by one. Values of
variables for the ranks travel in the launcher's environment and are forwarded by NAME
(`-x NAME`, `-genvlist NAME`, srun --export=ALL): secrets such as the control channel's key
never appear on a command line, where `ps` shows them.
"""

from pytest_hpccomm.cluster.launchers.spec import (
    Launch,
    Launcher,
    LaunchSpec,
    base_env,
    interface_env,
)

__all__ = ["Launch", "Launcher", "LaunchSpec", "base_env", "interface_env"]
