#!/usr/bin/env bash
# The main job on this machine: every suite on the local Ethernet fabric (loopback and the
# virtual cluster), judged against the committed set baselines/$HPCCOMM_SYSTEM (ci-2c: sessions
# of a 2-core AMD EPYC VM taken hours apart, benchmarks/RESULTS.md; a set of fewer than 3
# sessions claims nothing, and on another machine type the verdicts are informational, the
# reason stated in the gate line), with JSON, markdown and HTML reports in results/.
# Then the link pass: Open MPI osu_bw (256 KiB, 1 MiB) and native gRPC p2p bandwidth (raw,
# one 1 MiB buffer, so it enters the cross-stack table beside osu_bw) across the virtual
# cluster with every host's link shaped to 1 Gbit/s (tbf), so bandwidth shows as a fraction
# of a known link; its own baseline set (SYSTEM-vlink1g: a shaped link is another machine)
# and reports in results/vlink-1g/. HPCCOMM_LINK_PASS=0 leaves it out. Extra arguments go to
# the main pass; --hpc-update-baselines*, --hpc-tolerance* and --hpc-strict to both.
# Last the A/B pass, which gives decided verdicts on any machine, with or without a stored set:
# Open MPI 5 (candidate) against Open MPI 4.1 (base), both made by the bootstrap, MPI latency
# and bandwidth over loopback in paired rounds, reports in results/ab/. Its verdicts compare two
# MPI releases, not this checkout, so they do not set the exit status (a usage error or a
# crash does); HPCCOMM_AB_PASS=0 leaves it out.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
bash ci/bootstrap.sh || exit
PY="${HPCCOMM_VENV:-.venv}/bin/python"
SYSTEM="${HPCCOMM_SYSTEM:-ci-2c}"
# The main pass's tolerance: this 2-core VM's speed drifts between sessions (a median point
# moved 4-11 % between two sessions 87 minutes apart, benchmarks/RESULTS.md), so at 5 % every
# stored verdict is inconclusive.
# A later --hpc-tolerance wins.
TOLERANCE="${HPCCOMM_TOLERANCE:-0.15}"
mkdir -p results
"$PY" -m pytest hpccomm_suites --hpc-fabric=ethernet --hpc-system="$SYSTEM" --hpc-baselines=baselines \
  --hpc-tolerance="$TOLERANCE" --hpc-results results/results.json \
  --hpc-report results/report.html --hpc-markdown results/summary.md --hpc-screenshots "$@"
rc=$?
[ "$rc" -le 1 ] || exit "$rc"  # usage error, interrupt: no second pass
[ "${HPCCOMM_LINK_PASS:-1}" = 0 ] && exit "$rc"
both=()
for arg in "$@"; do
  case "$arg" in --hpc-update-baselines*|--hpc-tolerance*|--hpc-strict) both+=("$arg") ;; esac
done
echo "run-suites: the link pass (virtual cluster shaped to 1 Gbit/s)"
"$PY" -m pytest hpccomm_suites/mpi/test_perf_osu.py hpccomm_suites/grpc/test_perf_tf_grpc_bench.py \
  -k "osu_bw or (p2p_bandwidth and uniform-large)" --hpc-sizes=256K,1M --hpc-mpi=openmpi \
  --hpc-grpc-peers=native --hpc-grpc-modes=raw --hpc-grpc-buffers=1 \
  --hpc-fabric=ethernet --hpc-launcher=netns --hpc-vlink-rate=1G \
  --hpc-system="$SYSTEM-vlink1g" --hpc-baselines=baselines \
  --hpc-results results/vlink-1g/results.json --hpc-report results/vlink-1g/report.html \
  --hpc-markdown results/vlink-1g/summary.md --hpc-tolerance="$TOLERANCE" ${both[@]+"${both[@]}"}
link=$?
rc=$(( rc > link ? rc : link ))
[ "${HPCCOMM_AB_PASS:-1}" = 0 ] && exit "$rc"
echo "run-suites: the A/B pass (Open MPI 5 against Open MPI 4.1, paired rounds)"
"$PY" -m pytest hpccomm_suites/mpi/test_perf_osu.py -k "osu_latency or osu_bw" \
  --hpc-base mpi=openmpi4 --hpc-candidate mpi=openmpi --hpc-ab-rounds=20 \
  --hpc-sizes=8,1K,64K,1M --hpc-fabric=ethernet --hpc-launcher=local --hpc-tolerance="$TOLERANCE" \
  --hpc-results results/ab/results.json --hpc-report results/ab/report.html \
  --hpc-markdown results/ab/summary.md
ab=$?
[ "$ab" -le 1 ] || rc=$(( rc > ab ? rc : ab ))
exit "$rc"
