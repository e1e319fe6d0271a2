#!/usr/bin/env bash
# The main job on this machine: every suite on the local Ethernet fabric (loopback and the
# virtual cluster), judged against the committed baselines/ of this CI machine type
# (HPCCOMM_SYSTEM; on other hardware the verdicts are informational, the fingerprint
# difference stated), with JSON, markdown and HTML reports in results/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/bootstrap.sh
mkdir -p results
exec "${HPCCOMM_VENV:-.venv}/bin/python" -m pytest suites --hpc-fabric=ethernet \
  --hpc-system="${HPCCOMM_SYSTEM:-ci-epyc-2c}" --hpc-baselines=baselines \
  --hpc-results results/results.json --hpc-report results/report.html \
  --hpc-markdown results/summary.md --hpc-screenshots "$@"
