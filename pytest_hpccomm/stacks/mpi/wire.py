"""The MPI stack's schema: names both sides use, standard library only (peer rule).

The benchmark peer (peer/__main__.py) and the conformance peer (peer/conformance.py) run under mpirun in
the MPI's own environment; the orchestrator (driver.py, conformance.py, plugin.py, the suites)
takes every name it shares with them from here, never from a peer program. Result documents
are framed by pytest_hpccomm.peer.framing; conformance cases travel over the control channel.
"""

from __future__ import annotations

# -- benchmark peer (OSU Micro-Benchmarks' names)
PAIR = ("osu_latency", "osu_bw", "osu_bibw")  # exactly ranks 0 and 1 take part
MULTI_PAIR = ("osu_multi_lat", "osu_mbw_mr")  # pairs = ranks // 2
COLLECTIVES = (
    "osu_allreduce",
    "osu_reduce",
    "osu_bcast",
    "osu_allgather",
    "osu_alltoall",
    "osu_reduce_scatter",
    "osu_gather",
    "osu_scatter",
    "osu_barrier",
)
BENCHMARKS = PAIR + MULTI_PAIR + COLLECTIVES
UNSIZED = ("osu_barrier",)  # reported once, as size 0
# OSU's size is one rank's block: these receive (send) one block per rank
GATHERS = ("osu_allgather", "osu_alltoall", "osu_gather")
SCATTERS = ("osu_alltoall", "osu_scatter")

# -- conformance peer
PLANT_VAR = "HPCCOMM_MPI_PLANT"  # test-only planted bug, by environment
PLANTS = ("corrupt-reduce",)
PLANT_THRESHOLD = 8  # corrupt-reduce hits results of more than this many elements
ULFM_MARK = "@@HPCCOMM-ULFM@@"  # a ULFM survivor's report line
CASE_MARK = "@@HPCCOMM-CASE@@"  # a replayed case's report line (--case)
