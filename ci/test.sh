#!/usr/bin/env bash
# The test command (README, .ci/run): the plugin's own tests and the suites on Ethernet.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/bootstrap.sh
# --durations: the slowest items in every CI log, to keep the run inside its budget
exec "${HPCCOMM_VENV:-.venv}/bin/python" -m pytest --hpc-fabric=ethernet --durations=25 "$@"
