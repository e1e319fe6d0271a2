#!/bin/bash
# Replay: UCX's UD destination-GID check drops every UD packet rxe delivers (RoCE v2, IPv4).
#
# Two ucx_perftest processes on ONE host, UCP tag latency over UCX_TLS=ud_v on ONE rxe device
# (loopback QPs: the packets still take rxe's UDP/IPv4 path and its GRH layout), first with the
# check on (UCX's default), then with UCX_UD_ETH_DGID_CHECK=n as the control. On the affected
# UCX (Debian 12: 1.13.1) the first run dies with "UD endpoint ... unhandled timeout error"
# while the port counts every packet sent and received; the control completes in about a second.
# Cause: rxe leaves wc.sl 0, UCX (since openucx/ucx#6317) reads the RoCE packet type from
# wc.sl & 7, takes an IPv4 packet for IPv6 and compares bytes 24-39 of the GRH area (the IPv4
# header's tail) with its GIDs; openucx/ucx#10209 detects the address family from the GRH.
#
#   bash ucx_ud_dgid_check_rxe.sh [NETDEV]     # as root; NETDEV up, with an IPv4 address (default hpc0)
#
# Exit status: 1 the defect shows, 0 it does not (both runs complete), 2 cannot tell (no
# ucx_perftest, no rxe, or the control fails too). Uses an rxe device already on NETDEV, or adds
# "rxeud0" and removes it again. Environment: UD_TIMEOUT (UCX_UD_TIMEOUT, default 10s: how long
# UD retries before the fatal error; UCX's default is 30s), LIMIT (s per process, default 90).
set -u
NETDEV=${1:-hpc0}
UD_TIMEOUT=${UD_TIMEOUT:-10s}
LIMIT=${LIMIT:-90}
PORT=${PORT:-13377}
WORK=$(mktemp -d /tmp/ucx-ud-dgid.XXXXXX)
created=""
say() { echo "ucx_ud_dgid_check_rxe: $*"; }
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    [ -n "$created" ] && timeout 30 rdma link delete "$created"
    rm -rf "$WORK"
}
trap cleanup EXIT
command -v ucx_perftest >/dev/null || { say "no ucx_perftest (ucx-utils)"; exit 2; }
[ -d "/sys/class/net/$NETDEV" ] || { say "no netdev $NETDEV"; exit 2; }
say "UCX $(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p'), kernel $(uname -r)"

dev=""
for d in /sys/class/infiniband/rxe*; do
    [ "$(cat "$d/ports/1/gid_attrs/ndevs/0" 2>/dev/null)" = "$NETDEV" ] && dev=$(basename "$d")
done
if [ -z "$dev" ]; then
    modprobe rdma_rxe 2>/dev/null
    timeout 30 rdma link add rxeud0 type rxe netdev "$NETDEV" || { say "cannot add an rxe link on $NETDEV"; exit 2; }
    dev=rxeud0 created=rxeud0
fi
port=/sys/class/infiniband/$dev/ports/1
gid=""
for _ in $(seq 100); do  # rxe fills its GID table from the netdev's addresses
    # shellcheck disable=SC2012  # GID indexes are numbers
    for g in $(ls "$port/gids" | sort -n); do  # stops at the first RoCE v2 IPv4-mapped GID
        case $(cat "$port/gids/$g" 2>/dev/null) in 0000:0000:0000:0000:0000:ffff:*)
            [ "$(cat "$port/gid_attrs/types/$g" 2>/dev/null)" = "RoCE v2" ] && { gid=$g; break; } ;;
        esac
    done
    [ -n "$gid" ] && grep -q ACTIVE "$port/state" && break
    sleep 0.1
done
[ -n "$gid" ] || { say "$dev: no RoCE v2 IPv4-mapped GID (is $NETDEV up with an IPv4 address?)"; exit 2; }
say "$dev on $NETDEV, GID index $gid: $(cat "$port/gids/$gid") ($(cat "$port/gid_attrs/types/$gid"))"

pkts() { echo "sent $(cat "$port/hw_counters/sent_pkts") rcvd $(cat "$port/hw_counters/rcvd_pkts")"; }
# run NAME CHECK: server + client over ud_v only; sets result to 0 (ok), 1 (the timeout
# error) or 2 (another failure)
run() {
    local name=$1 check=$2 spid cpid srv_rc="" cli_rc="" p0 t0=$SECONDS
    local env=(UCX_TLS=ud_v UCX_NET_DEVICES="$dev:1" UCX_IB_GID_INDEX="$gid"
               UCX_UD_ETH_DGID_CHECK="$check" UCX_UD_TIMEOUT="$UD_TIMEOUT" UCX_WARN_UNUSED_ENV_VARS=n)
    p0=$(pkts)
    env "${env[@]}" timeout -k 5 "$LIMIT" ucx_perftest -p "$PORT" >"$WORK/$name.srv" 2>&1 &
    spid=$!
    for _ in $(seq 600); do  # the server's out-of-band TCP port
        ss -ltn 2>/dev/null | grep -q ":$PORT " && break
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.1
    done
    env "${env[@]}" timeout -k 5 "$LIMIT" ucx_perftest 127.0.0.1 -p "$PORT" -t tag_lat -n 1000 -w 10 \
        >"$WORK/$name.cli" 2>&1 &
    cpid=$!
    # when one side dies, the other may wait for it until LIMIT: give it 5 s, then end it
    while [ -z "$srv_rc" ] || [ -z "$cli_rc" ]; do
        sleep 0.5
        if [ -z "$srv_rc" ] && ! kill -0 "$spid" 2>/dev/null; then wait "$spid"; srv_rc=$?; fi
        if [ -z "$cli_rc" ] && ! kill -0 "$cpid" 2>/dev/null; then wait "$cpid"; cli_rc=$?; fi
        if [ -n "$srv_rc$cli_rc" ] && [ "${srv_rc:-0}${cli_rc:-0}" != 00 ]; then
            sleep 5
            [ -z "$srv_rc" ] && { kill "$spid" 2>/dev/null; wait "$spid"; srv_rc=$?; }
            [ -z "$cli_rc" ] && { kill "$cpid" 2>/dev/null; wait "$cpid"; cli_rc=$?; }
        fi
    done
    say "$name (UCX_UD_ETH_DGID_CHECK=$check): client exit $cli_rc, server exit $srv_rc," \
        "$((SECONDS - t0)) s; $dev packets before: $p0, after: $(pkts)"
    grep -h -o 'UD endpoint .*unhandled timeout error' "$WORK/$name.srv" "$WORK/$name.cli" | sed 's/^/    /'
    if [ "$cli_rc" = 0 ] && [ "$srv_rc" = 0 ]; then
        result=0
    elif grep -q 'unhandled timeout error' "$WORK/$name.srv" "$WORK/$name.cli"; then
        result=1
    else
        tail -n 5 "$WORK/$name.srv" | sed 's/^/    server| /'
        tail -n 5 "$WORK/$name.cli" | sed 's/^/    client| /'
        result=2
    fi
    PORT=$((PORT + 1))
}
run check_on y
check_on=$result
run check_off n
check_off=$result
if [ "$check_off" != 0 ]; then
    say "cannot tell: the control (UCX_UD_ETH_DGID_CHECK=n) fails as well"; exit 2
fi
case $check_on in
    0) say "not shown: UD over $dev works with the destination-GID check on"; exit 0 ;;
    1) say "DEFECT: with the check on, UD over $dev dies with 'unhandled timeout error';" \
           "with UCX_UD_ETH_DGID_CHECK=n it completes"; exit 1 ;;
    *) say "cannot tell: the check-on run failed without the timeout error"; exit 2 ;;
esac
