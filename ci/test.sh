#!/usr/bin/env bash
# The test command (README, .ci/run): the plugin's own tests and the suites' conformance items
# on Ethernet. The suites' perf items are the main job's (ci/run-suites.sh, the same code at
# every size and placement); here each perf suite runs end to end through the tests that
# drive it (the gate and A/B tests, TensorFlow's orchestration, Horovod's records, the hosts
# and guest tests). A later -m (e.g. `-m perf`) overrides the default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/bootstrap.sh
# a skip this machine is not expected to have (tests/expected_skips.py) fails the run
export HPCCOMM_EXPECTED_SKIPS="${HPCCOMM_EXPECTED_SKIPS:-1}"
# --durations: the slowest items in every CI log, to keep the run inside its budget;
# `extended` (tests/conftest.py) is what does not fit it: `bash ci/test.sh -m extended`
exec "${HPCCOMM_VENV:-.venv}/bin/python" -m pytest --hpc-fabric=ethernet --durations=25 \
  -m "not perf and not extended" "$@"
