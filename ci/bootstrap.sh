#!/usr/bin/env bash
# Installs everything the suites and the plugin's tests need on a Debian 12 machine.
# Idempotent and quiet: a second run takes seconds. Used by ci/test.sh and ci/run-suites.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HPCCOMM_VENV:-.venv}"

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=()
  for pkg in iproute2 nftables procps util-linux; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "bootstrap: apt-get install ${missing[*]}"
    timeout 600 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'
