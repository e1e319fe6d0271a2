#!/bin/bash
# PID 1 of the test guest (started by the initramfs from the job share, /mnt/job).
#
# Sets up what a cluster node would have — /proc, /sys, /dev, an Ethernet interface with an
# IPv4 address (a veth pair: rxe and siw need a netdev with carrier; the suite's QPs loop back
# on the one RDMA device), the uverbs and rdma_cm character devices — then runs the host's
# job.sh under a hard timeout, stores its exit status in /mnt/job/rc and powers off. No RDMA
# link is created here: provisioning rxe0 / siw0 is the suite's job.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
JOB=/mnt/job

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs -o mode=1777 tmp /tmp
mount -t tmpfs -o mode=755 run /run
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
hostname hpccomm-guest

poweroff_now() {
    sync
    umount /mnt/job /project 2>/dev/null
    echo o >/proc/sysrq-trigger  # immediate ACPI power-off: QEMU exits
    sleep 30
}

log() { echo "[guest $(cut -d' ' -f1 /proc/uptime)s] $*"; }

# shellcheck disable=SC1091
. "$JOB/job.env"  # JOB_TIMEOUT
{
    log "kernel $(uname -r), $(nproc) vCPUs, $(awk '/MemTotal/ {print $2 / 1024 " MiB"}' /proc/meminfo)"
    ip link set lo up
    modprobe veth && ip link add hpc0 type veth peer name hpc1 &&
        ip addr add 10.77.0.1/24 dev hpc0 && ip link set hpc1 up && ip link set hpc0 up ||
        log "cannot create the veth pair"
    modprobe ib_uverbs; modprobe rdma_ucm  # udev would load these on a real host
    log "running job.sh (timeout ${JOB_TIMEOUT} s)"
    timeout -k 10 "$JOB_TIMEOUT" bash "$JOB/job.sh"
    rc=$?
    [ "$rc" = 124 ] && log "job.sh timed out after ${JOB_TIMEOUT} s"
    log "job.sh exit status $rc"
    dmesg >"$JOB/dmesg.txt" 2>&1
    echo "$rc" >"$JOB/rc"
} 2>&1 | tee "$JOB/console.log"
poweroff_now
