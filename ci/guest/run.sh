#!/usr/bin/env bash
# Boots the SoftRoCE / iWARP guest (ci/guest/build.sh) and runs the verbs suite inside it:
#
#   bash ci/guest/run.sh --fabric softroce [-- PYTEST ARGS]   # rxe, provisioned by the suite
#   bash ci/guest/run.sh --fabric iwarp    [-- PYTEST ARGS]   # siw, provisioned by the suite
#   bash ci/guest/run.sh --exec 'ibv_devices; rdma link'      # any command, for debugging
#   bash ci/guest/run.sh --dry-run ...                        # print the guest's job.sh only
#   bash ci/guest/run.sh --hosts 2 --fabric softroce          # two guests, h0 and h1: verbs
#                                       # peer per guest, MPI over UCX between them (cluster.sh)
#   bash ci/guest/run.sh --fabric softroce --targets hpccomm_suites/grpc --stage DIR -- ARGS
#                                       # other suites; DIR is /mnt/job/stage/NAME in the guest
#   bash ci/guest/run.sh --fabric softroce --plan PLAN  # several pytest sessions, one boot:
#       PLAN has one line per session, NAME<TAB>TIMEOUT<TAB>TARGETS<TAB>ARGS (ARGS shell-quoted,
#       TARGETS "-" for the default suites); session NAME's results land in RESULTS/NAME/,
#       with its exit status in RESULTS/NAME/rc and its kernel messages in RESULTS/NAME/dmesg.txt
#
# Results (junit.xml, results.json, summary.md, pytest.log, console.log, dmesg.txt, and the
# serial console with the kernel's messages, serial-h0.log) land in
# --results DIR (default results/guest-<fabric>[-2hosts]); the exit status is pytest's inside
# the guest, 4 when the suite passed but left an rdma link behind, or 3 when the guest produced
# none (did not boot, crashed, or hit the host-side timeout).
#
# One guest has no network device at all (-nodefaults, -nic none): the project comes in over a
# read-only 9p share, the job and its results over a second, read-write one. Two guests get
# one virtio NIC each, joined by a QEMU `dgram` netdev over Unix sockets in a private directory
# of this job (no port opened, nothing leaves this machine). The root image is used with
# snapshot=on, so the cached image never changes. Each QEMU runs under `timeout`, which kills
# it (and only it) if the guest outlives the job's own timeout plus a boot margin.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PROJECT=$(cd "$HERE/../.." && pwd)
fabric=""
exec_cmd=""
results=""
image=""
job_timeout=${HPCCOMM_GUEST_TIMEOUT:-600}
accel=${HPCCOMM_GUEST_ACCEL:-tcg}
mem=${HPCCOMM_GUEST_MEM:-2048}
smp=${HPCCOMM_GUEST_SMP:-}
hosts=1
suite_targets=""
plan=""
dry_run=0
stages=()
pytest_args=()

usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --fabric) fabric=$2; shift 2 ;;
        --exec) exec_cmd=$2; shift 2 ;;
        --results) results=$2; shift 2 ;;
        --image) image=$2; shift 2 ;;
        --timeout) job_timeout=$2; shift 2 ;;
        --accel) accel=$2; shift 2 ;;
        --hosts) hosts=$2; shift 2 ;;
        --targets) suite_targets=$2; shift 2 ;;
        --plan) plan=$2; shift 2 ;;
        --dry-run) dry_run=1; shift ;;
        --stage) stages+=("$2"); shift 2 ;;
        --) shift; pytest_args=("$@"); break ;;
        -h|--help) usage ;;
        *) echo "run.sh: unknown argument $1" >&2; usage ;;
    esac
done
case $fabric in softroce|iwarp|"") ;; *) echo "run.sh: --fabric softroce|iwarp" >&2; exit 2 ;; esac
[ -n "$fabric$exec_cmd" ] || usage
case $accel in tcg|kvm) ;; *) echo "run.sh: --accel tcg|kvm" >&2; exit 2 ;; esac
# a dgram netdev is a point-to-point wire: two guests (a third would need a switch)
case $hosts in 1|2) ;; *) echo "run.sh: --hosts 1|2, got $hosts" >&2; exit 2 ;; esac
if [ -n "$plan" ]; then
    [ -f "$plan" ] || { echo "run.sh: --plan $plan is not a file" >&2; exit 2; }
    [ "$hosts" = 1 ] && [ -n "$fabric" ] && [ -z "$exec_cmd$suite_targets" ] && [ "${#pytest_args[@]}" = 0 ] ||
        { echo "run.sh: --plan takes one guest and a --fabric, and its own targets and arguments" >&2; exit 2; }
fi
# the host's 2 cores: one vCPU per guest when two guests share them
[ -n "$smp" ] || smp=$((hosts == 1 ? 2 : 1))
if [ "$dry_run" = 0 ]; then
    command -v qemu-system-x86_64 >/dev/null || { echo "run.sh: qemu-system-x86 is not installed" >&2; exit 2; }
    [ -n "$image" ] || image=$(bash "$HERE/build.sh")
    for f in vmlinux initrd.img rootfs.ext4 ready; do
        [ -f "$image/$f" ] || { echo "run.sh: $image/$f missing (run ci/guest/build.sh)" >&2; exit 2; }
    done
fi
suffix=""; [ "$hosts" = 1 ] || suffix=-${hosts}hosts
results=${results:-$PROJECT/results/guest-${fabric:-exec}$suffix}
if [ "$dry_run" = 0 ]; then mkdir -p "$results" && results=$(cd "$results" && pwd); fi

JOB=$(mktemp -d "${TMPDIR:-/tmp}/hpccomm-guest.XXXXXX")
NET=$(mktemp -d "${TMPDIR:-/tmp}/hpccomm-link.XXXXXX")  # the wire's sockets: not in the share
qemu_pids=()
cleanup() {
    local pid
    for pid in "${qemu_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${qemu_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$JOB" "$NET"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
install -m 755 "$HERE/guest-init.sh" "$JOB/guest-init.sh"
for d in "${stages[@]}"; do  # e.g. a native peer built on this host for the guest
    [ -d "$d" ] || { echo "run.sh: --stage $d is not a directory" >&2; exit 2; }
    mkdir -p "$JOB/stage"
    cp -a "$d" "$JOB/stage/$(basename "$d")"
done
{ echo "JOB_TIMEOUT=$job_timeout"; echo "HOSTS=$hosts"; } >"$JOB/job.env"
if [ "$hosts" -gt 1 ]; then
    # keys of this run only: root's login key and the sshd host key every guest uses
    command -v ssh-keygen >/dev/null || { echo "run.sh: ssh-keygen missing (openssh-client)" >&2; exit 2; }
    mkdir -m 700 "$JOB/ssh"
    ssh-keygen -q -t ed25519 -N '' -C hpccomm-guest -f "$JOB/ssh/id_ed25519"
    ssh-keygen -q -t ed25519 -N '' -C hpccomm-guest-host -f "$JOB/ssh/host_ed25519"
fi
emit_pytest() {  # emit_pytest OUT SUITE_NAME TARGETS [ARGS...]: one guest pytest, results in OUT
    local out=$1 suite=$2 targets=$3
    shift 3
    printf 'python3 -m pytest $plugins'
    printf ' -p no:cacheprovider --hpc-fabric=%s --hpc-history=none' "$fabric"
    printf ' --hpc-results=%s/results.json --junitxml=%s/junit.xml' "$out" "$out"
    printf ' --hpc-markdown=%s/summary.md -o junit_suite_name=%s %s' "$out" "$suite" "$targets"
    if [ $# -gt 0 ]; then printf ' %q' "$@"; fi
    printf ' 2>&1 | tee %s/pytest.log\n' "$out"
}
if [ -n "$exec_cmd" ]; then
    printf '%s\n' "$exec_cmd" >"$JOB/job.sh"
else
    {
        echo 'cd /project'
        # the project is read-only here: no byte code, Hypothesis' database in /tmp, no
        # pytest cache; the wheels of ci/guest/requirements.txt come first
        # the wheels by a path naming site-packages (/tmp/py/site-packages, made by
        # guest-init.sh): Hypothesis parses every module it deems local (not under
        # */site-packages/*) for constants before the first example, which for numpy, scipy
        # and pytest from /opt/hpccomm/site took 1.5-2.5 min under TCG
        echo 'export PYTHONPATH=/tmp/py/site-packages:/project PYTHONDONTWRITEBYTECODE=1'
        echo 'export HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hypothesis PYTHONUNBUFFERED=1'
        # load the plugins by -p unless an entry point does (the project's egg-info from an
        # editable install on the host is on the path too; -p on top would register them twice)
        echo 'plugins=$(python3 - <<"EOF"'
        echo 'from importlib.metadata import entry_points'
        echo 'have = {e.value for e in entry_points(group="pytest11")}'
        if [ "$hosts" -gt 1 ]; then
            echo 'want = ("pytest_hpccomm.plugin", "pytest_hpccomm.stacks.verbs.plugin",'
            echo '        "pytest_hpccomm.stacks.mpi.plugin", "pytest_hpccomm.stacks.grpc.plugin")'
        else
            echo 'want = ("pytest_hpccomm.plugin", "pytest_hpccomm.stacks.verbs.plugin",'
            echo '        "pytest_hpccomm.stacks.grpc.plugin")'
        fi
        echo 'print(" ".join(f"-p {m}" for m in want if m not in have))'
        echo 'EOF'
        echo ')'
        if [ "$hosts" -gt 1 ]; then
            # the verbs and MPI suites, unless --targets or the arguments name what to run
            targets=(hpccomm_suites/verbs hpccomm_suites/mpi)
            [ -n "$suite_targets" ] && targets=($suite_targets)
            for a in "${pytest_args[@]}"; do
                case $a in hpccomm_suites/*|tests/*) targets=() ;; esac
            done
            # one peer per guest; MPI = Debian's Open MPI (UCX, libfabric) reaching h1 over ssh
            emit_pytest /mnt/job "cluster-$fabric" "${targets[*]}" \
                "--hpc-hosts=$(seq -s, -f 'h%g' 0 $((hosts - 1)))" --hpc-mpi=/usr/bin/mpirun \
                ${pytest_args[@]+"${pytest_args[@]}"}
            echo 'rc=${PIPESTATUS[0]}'
            # the suite removes the rxe0 / siw0 it created: a link left over is a failure too
            echo 'left=$(rdma link show 2>/dev/null)'
            echo 'for h in $(seq 1 $((HOSTS - 1))); do left+=$(ssh "h$h" rdma link show 2>/dev/null); done'
            echo 'if [ -n "$left" ]; then echo "rdma links left behind: $left"; [ "$rc" = 0 ] && rc=4; fi'
        elif [ -n "$plan" ]; then
            # one boot, several sessions: each in its own directory under its own timeout; the
            # kernel's messages are cut per session (dmesg -c), so a session's dmesg.txt holds
            # its own only; a link a session leaves fails it and is removed for the next one
            echo 'dmesg -c >/mnt/job/boot-dmesg.txt 2>&1'
            while IFS=$'\t' read -r name limit targets args; do
                [ -n "$name" ] || continue
                case $name in *[!A-Za-z0-9_.-]*|.*) echo "run.sh: bad session name '$name'" >&2; exit 2 ;; esac
                case $limit in ''|*[!0-9]*) echo "run.sh: session $name: bad timeout '$limit'" >&2; exit 2 ;; esac
                [ "$targets" = - ] && targets=""
                eval "session_args=($args)"
                out=/mnt/job/$name
                echo "mkdir -p $out && : >$out/started; s0=\$SECONDS"
                echo "echo '[guest] session $name, timeout $limit s'"
                printf 'timeout -k 10 %s ' "$limit"
                emit_pytest "$out" "guest-$fabric-$name" "${targets:-hpccomm_suites/verbs}" \
                    ${session_args[@]+"${session_args[@]}"}
                echo 'rc=${PIPESTATUS[0]}'
                echo "[ \"\$rc\" = 124 ] && echo '[guest] session $name timed out after $limit s'"
                echo 'left=$(rdma link show 2>/dev/null | awk "{print \$2}" | cut -d/ -f1)'
                echo "if [ -n \"\$left\" ]; then echo \"rdma links left behind by $name: \$left\"; [ \"\$rc\" = 0 ] && rc=4"
                echo '    for l in $left; do rdma link delete "$l"; done; fi'
                echo "echo \$((SECONDS - s0)) >$out/seconds; dmesg -c >$out/dmesg.txt 2>&1; echo \"\$rc\" >$out/rc"
                echo "echo \"[guest] session $name exit status \$rc\""
            done <"$plan"
            echo 'rc=0'
        else
            emit_pytest /mnt/job "guest-$fabric" "${suite_targets:-hpccomm_suites/verbs}" \
                ${pytest_args[@]+"${pytest_args[@]}"}
            echo 'rc=${PIPESTATUS[0]}'
            # the suite removes the rxe0 / siw0 it created: a link left over is a failure too
            echo 'left=$(rdma link show 2>/dev/null)'
            echo 'if [ -n "$left" ]; then echo "rdma links left behind: $left"; [ "$rc" = 0 ] && rc=4; fi'
        fi
        echo 'exit "$rc"'
    } >"$JOB/job.sh"
fi
if [ "$dry_run" = 1 ]; then cat "$JOB/job.sh"; exit 0; fi

# TCG's CPU model: Nehalem (x86-64-v2, no AVX) rather than max, whose AVX2 TCG emulates
# slowly and glibc's string functions and numpy then pick (benchmarks/RESULTS.md has the
# boot-to-end times of one session under each); HPCCOMM_GUEST_CPU names another
accel_opts=(-accel tcg,thread=multi -cpu "${HPCCOMM_GUEST_CPU:-Nehalem}")
[ "$accel" = kvm ] && accel_opts=(-accel kvm -cpu host)
# boot and power-off take 10-40 s under TCG on a loaded 2-core machine
host_timeout=$((job_timeout + 180))
boot_guest() {  # boot_guest INDEX: QEMU for guest hINDEX; guest 0 runs the job
    # guest 0's serial console is this script's output, and kept in serial-h0.log: the kernel
    # prints there (a WARNING, an oops) what a guest that dies cannot save as dmesg.txt
    local i=$1 net=(-nic none) serial=(-chardev "stdio,id=console0,logfile=$JOB/serial-h0.log" -serial chardev:console0)
    [ "$i" = 0 ] || serial=(-serial "file:$JOB/serial-h$i.log")
    if [ "$hosts" -gt 1 ]; then
        local peer=$((1 - i))
        net=(-netdev "dgram,id=n0,local.type=unix,local.path=$NET/h$i.sock,remote.type=unix,remote.path=$NET/h$peer.sock"
             -device "virtio-net-pci,netdev=n0,mac=52:54:00:77:00:0$((i + 1)),romfile=")
    fi
    # loglevel=5: the console prints KERN_WARNING (4) and worse, so a WARN_ON's "WARNING: CPU:"
    # line reaches serial-h0.log even when the guest dies before it saves dmesg.txt
    # exec: a background guest's $! is then this timeout itself, which passes a TERM to QEMU
    exec timeout -k 10 "$host_timeout" qemu-system-x86_64 \
        -nodefaults -no-user-config -display none -no-reboot "${net[@]}" \
        "${accel_opts[@]}" -smp "$smp" -m "$mem" \
        -kernel "$image/vmlinux" -initrd "$image/initrd.img" \
        -append "console=ttyS0 panic=-1 oops=panic quiet loglevel=5 mitigations=off random.trust_cpu=on hpccomm.host=$i" \
        -drive "file=$image/rootfs.ext4,format=raw,if=virtio,snapshot=on" \
        -virtfs "local,path=$JOB,mount_tag=job,security_model=none,id=job" \
        -virtfs "local,path=$PROJECT,mount_tag=project,security_model=none,readonly=on,id=project" \
        "${serial[@]}" -monitor none </dev/null
}
echo "run.sh: booting $hosts x $image (${accel}, ${smp} vCPUs, ${mem} MiB each), job timeout ${job_timeout} s" >&2
t0=$SECONDS
for ((i = 1; i < hosts; i++)); do
    boot_guest "$i" &
    qemu_pids+=($!)
done
set +e
(boot_guest 0)  # in a subshell: boot_guest execs
qemu_rc=$?
# the other guests power off once guest 0's job has stored its status (guest-init.sh)
for pid in "${qemu_pids[@]}"; do
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
done
qemu_pids=()
set -e
elapsed=$((SECONDS - t0))

for f in junit.xml results.json summary.md pytest.log console.log dmesg.txt; do
    [ -f "$JOB/$f" ] && cp "$JOB/$f" "$results/"
done
for f in "$JOB"/console-h*.log "$JOB"/dmesg-h*.txt "$JOB"/serial-h*.log; do  # other guests'
    [ -f "$f" ] && cp "$f" "$results/"
done
if [ -n "$plan" ]; then  # each session's directory, as far as it got
    [ -f "$JOB/boot-dmesg.txt" ] && cp "$JOB/boot-dmesg.txt" "$results/"
    while IFS=$'\t' read -r name _; do
        [ -n "$name" ] && [ -d "$JOB/$name" ] && cp -a "$JOB/$name" "$results/"
    done <"$plan"
fi
if [ ! -f "$JOB/rc" ]; then
    why="no exit status from the guest"
    [ "$qemu_rc" = 124 ] && why="QEMU killed after ${host_timeout} s"
    echo "run.sh: $why (qemu exit $qemu_rc, ${elapsed} s); see $results/console.log" >&2
    exit 3
fi
rc=$(cat "$JOB/rc")
echo "run.sh: guest job exit status $rc after ${elapsed} s (results in $results)" >&2
exit "$rc"
