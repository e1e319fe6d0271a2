#!/bin/bash
# PID 1 of the test guest (started by the initramfs from the job share, /mnt/job).
#
# Sets up what a cluster node would have — /proc, /sys, /dev, an Ethernet interface with an
# IPv4 address, the uverbs and rdma_cm character devices — then runs the host's job.sh under a
# hard timeout, stores its exit status in /mnt/job/rc and powers off. No RDMA link is created
# here: provisioning rxe0 / siw0 is the suite's job.
#
# Alone (HOSTS=1) the interface is a veth pair (rxe and siw need a netdev with carrier; the
# suite's QPs loop back on the one RDMA device). In a cluster (HOSTS=2, run.sh --hosts 2) guest
# hI (hpccomm.host=I on the kernel command line) brings up its virtio NIC eth0 as 10.77.0.(I+1),
# names the others in /etc/hosts and runs sshd on that address only, with this run's keys from
# the job share; h0 runs job.sh once every guest answers ssh, the others power off when h0's
# exit status appears in the share (which all guests mount).
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
# the guest's wheels by a path naming site-packages (see run.sh), on every guest: peers of a
# cluster job import numpy from it on h1 as on h0
mkdir -p /tmp/py && ln -sfn /opt/hpccomm/site /tmp/py/site-packages
index=$(sed -n 's/.*hpccomm\.host=\([0-9]*\).*/\1/p' /proc/cmdline)
index=${index:-0}

poweroff_now() {
    sync
    umount /mnt/job /project 2>/dev/null
    echo o >/proc/sysrq-trigger  # immediate ACPI power-off: QEMU exits
    sleep 30
}

log() { echo "[guest $(cut -d' ' -f1 /proc/uptime)s] $*"; }

cluster_node() {  # the link, names and sshd of guest h$index in a cluster of $HOSTS
    local i
    modprobe virtio_net
    for i in $(seq 50); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
    ip addr add "10.77.0.$((index + 1))/24" dev eth0 && ip link set eth0 up ||
        { log "no eth0 (virtio_net)"; return 1; }
    for ((i = 0; i < HOSTS; i++)); do echo "10.77.0.$((i + 1)) h$i"; done >>/etc/hosts
    mkdir -p -m 700 /root/.ssh /run/sshd
    cp "$JOB/ssh/id_ed25519" "$JOB/ssh/id_ed25519.pub" /root/.ssh/
    cp "$JOB/ssh/id_ed25519.pub" /root/.ssh/authorized_keys
    cp "$JOB/ssh/host_ed25519" /etc/ssh/hpccomm_host_key
    chmod 600 /root/.ssh/id_ed25519 /etc/ssh/hpccomm_host_key
    names=$(for ((i = 0; i < HOSTS; i++)); do printf 'h%s,10.77.0.%s,' "$i" "$((i + 1))"; done)
    echo "${names%,} $(cut -d' ' -f1-2 "$JOB/ssh/host_ed25519.pub")" >/root/.ssh/known_hosts
    printf 'Host *\n  BatchMode yes\n  ConnectTimeout 20\n  LogLevel ERROR\n' >/root/.ssh/config
    /usr/sbin/sshd -f /dev/null -o ListenAddress="10.77.0.$((index + 1))" \
        -o HostKey=/etc/ssh/hpccomm_host_key -o PasswordAuthentication=no -o UsePAM=no \
        -o PermitRootLogin=prohibit-password -o PidFile=/run/sshd.pid ||
        { log "sshd did not start"; return 1; }
}

wait_for_peers() {  # h0: every other guest answers ssh, within 300 s of boot
    local i n
    for ((i = 1; i < HOSTS; i++)); do
        for n in $(seq 300); do
            timeout 30 ssh "h$i" true 2>/dev/null && break
            [ "$n" = 300 ] && { log "h$i does not answer ssh"; return 1; }
            sleep 1
        done
    done
    log "all $HOSTS guests answer ssh"
}

# shellcheck disable=SC1091
. "$JOB/job.env"  # JOB_TIMEOUT, HOSTS
HOSTS=${HOSTS:-1}
if [ "$index" != 0 ]; then  # a cluster's other guests: serve until h0 stored its status
    hostname "h$index"
    {
        log "h$index: kernel $(uname -r), $(nproc) vCPUs"
        ip link set lo up
        modprobe ib_uverbs; modprobe rdma_ucm
        cluster_node && log "h$index up: $(ip -br addr show eth0)"
        waited=0
        while [ ! -f "$JOB/rc" ] && [ "$waited" -lt "$((JOB_TIMEOUT + 300))" ]; do
            sleep 1; waited=$((waited + 1))
        done
        log "h$index: powering off"
        dmesg >"$JOB/dmesg-h$index.txt" 2>&1
    } >"$JOB/console-h$index.log" 2>&1
    poweroff_now
fi
{
    log "kernel $(uname -r), $(nproc) vCPUs, $(awk '/MemTotal/ {print $2 / 1024 " MiB"}' /proc/meminfo)"
    ip link set lo up
    ready=1
    if [ "$HOSTS" -gt 1 ]; then
        hostname h0
        cluster_node && wait_for_peers || ready=0
    else
        hostname hpccomm-guest
        modprobe veth && ip link add hpc0 type veth peer name hpc1 &&
            ip addr add 10.77.0.1/24 dev hpc0 && ip link set hpc1 up && ip link set hpc0 up ||
            log "cannot create the veth pair"
    fi
    modprobe ib_uverbs; modprobe rdma_ucm  # udev would load these on a real host
    if [ "$ready" = 1 ]; then
        log "running job.sh (timeout ${JOB_TIMEOUT} s)"
        timeout -k 10 "$JOB_TIMEOUT" bash "$JOB/job.sh"
        rc=$?
        [ "$rc" = 124 ] && log "job.sh timed out after ${JOB_TIMEOUT} s"
    else
        rc=3
    fi
    log "job.sh exit status $rc"
    dmesg >"$JOB/dmesg.txt" 2>&1
    echo "$rc" >"$JOB/rc"
} 2>&1 | tee "$JOB/console.log"
poweroff_now
