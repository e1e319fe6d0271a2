"""Where a test's peers run, as a test parameter: loopback, a virtual cluster, or real hosts.

On one machine with --hpc-launcher=auto both loopback and the virtual cluster run (the two
cross-host code paths CI can exercise); an explicit launcher picks exactly one.
"""

from __future__ import annotations

from pytest_hpccomm.config import HpcConfig

LOOPBACK, NETNS, HOSTS = "loopback", "netns", "hosts"


def placements(cfg: HpcConfig, on_cluster: bool) -> list[str]:
    if cfg.launcher == "local":
        return [LOOPBACK]
    if cfg.launcher == "netns":
        return [NETNS]
    if cfg.launcher in ("mpirun", "srun") or on_cluster:
        return [HOSTS]
    return [LOOPBACK, NETNS]
