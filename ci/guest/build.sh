#!/usr/bin/env bash
# Builds the SoftRoCE / iWARP test guest, or finds it in the cache, and prints its directory:
#
#   bash ci/guest/build.sh            # -> ~/.cache/pytest-hpccomm/guest/<hash>
#   bash ci/guest/build.sh --check    # only say whether the host can build it (exit 0 / 1)
#
# The guest: Debian 12's kernel as an uncompressed vmlinux (boots twice as fast under TCG as
# the bzImage), a busybox initramfs that loads the virtio/ext4/9p modules, and a debootstrap
# minbase root filesystem as an ext4 image made with `mke2fs -d` (no loop mount): rdma-core,
# perftest, python3-pyverbs, the kernel's modules (rdma_rxe is one) plus siw.ko, which Debian
# does not build, compiled out of tree from linux-source against the matching linux-headers.
# The project is not in the image: run.sh shares it read-only over 9p.
#
# The cache key hashes this directory's inputs and the kernel package's version, so an edit
# here or a new Debian kernel builds a new image; the previous one is then removed.
# Needs root, Debian 12, network to the Debian archive apt uses and to PyPI, and the packages in
# HOST_PACKAGES below (the CI recipe installs them: see ci/guest/README.md).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE_ROOT=${HPCCOMM_GUEST_CACHE:-$HOME/.cache/pytest-hpccomm/guest}
SUITE=bookworm
# The Debian archive debootstrap fetches from: HPCCOMM_DEBIAN_MIRROR, else the one this machine's
# apt already uses for $SUITE (its sources, so a local mirror or an apt proxy keeps working).
MIRROR=${HPCCOMM_DEBIAN_MIRROR:-$(apt-get indextargets --format '$(REPO_URI)' \
    "Release: $SUITE" "Identifier: Packages" 2>/dev/null | head -1)}
MIRROR=${MIRROR%/}
HOST_PACKAGES="debootstrap busybox-static e2fsprogs cpio kmod xz-utils make gcc"
GUEST_PY=3.11   # Debian 12's python3: the wheels below are chosen for it

log() { printf '[guest-build %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

check_only=0
for arg in "$@"; do
    case $arg in
        --check) check_only=1 ;;
        *) die "unknown argument $arg (usage: build.sh [--check])" ;;
    esac
done

# ---- what the host must have ----------------------------------------------------------------
missing=()
[ "$(id -u)" = 0 ] || missing+=("root (debootstrap and mke2fs -d keep ownership only as root)")
for tool in debootstrap busybox mke2fs cpio modprobe depmod dpkg-deb apt-get apt-cache make \
            gcc python3; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
KPKG=${HPCCOMM_GUEST_KERNEL_PKG:-$(apt-cache depends linux-image-amd64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ {print $2; exit}')}
[ -n "$KPKG" ] || missing+=("linux-image-amd64 in apt's lists (run apt-get update)")
[ -n "$MIRROR" ] || missing+=("a $SUITE archive in apt's sources (or set HPCCOMM_DEBIAN_MIRROR)")
KREL=${KPKG#linux-image-}
KVER=$(apt-cache policy "$KPKG" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')
HEADERS=/usr/src/linux-headers-$KREL
[ -z "$KPKG" ] || [ -f "$HEADERS/Makefile" ] || missing+=("linux-headers-$KREL (for siw.ko)")
if [ "${#missing[@]}" -gt 0 ]; then
    msg=$(IFS=','; echo "${missing[*]}")
    echo "guest build impossible here: missing ${msg//,/, }" >&2
    exit 1
fi
[ "$check_only" = 1 ] && { echo "guest build possible: kernel $KPKG $KVER"; exit 0; }

KEY=$( { cat "$HERE/build.sh" "$HERE/packages.txt" "$HERE/requirements.txt" \
             "$HERE/initramfs-init"; echo "$KPKG $KVER $SUITE"; } |
       sha256sum | cut -c1-16)
OUT=$CACHE_ROOT/$KEY
if [ -f "$OUT/ready" ]; then
    log "cached: $OUT"
    echo "$OUT"
    exit 0
fi

mkdir -p "$CACHE_ROOT/debs"
exec 9>"$CACHE_ROOT/.lock"
flock -w 1800 9 || die "another build holds $CACHE_ROOT/.lock for 30 min"
if [ -f "$OUT/ready" ]; then  # built by whoever held the lock
    echo "$OUT"
    exit 0
fi

WORK=$(mktemp -d "$CACHE_ROOT/build.XXXXXX")
cleanup() {
    # debootstrap mounts proc/sys in the chroot; an interrupted run may leave them: unmount
    # before deleting, and never let rm cross into another filesystem
    local m
    for m in $(awk -v w="$WORK" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r); do
        umount -l "$m" 2>/dev/null || true
    done
    rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ROOT=$WORK/root
IMG=$WORK/out
mkdir -p "$IMG"
T0=$SECONDS
declare -A STEP
step_done() { STEP[$1]=$((SECONDS - $2)); log "$1 done in ${STEP[$1]} s"; }

# ---- 1. root filesystem -----------------------------------------------------------------------
t=$SECONDS
pkgs=$(grep -v '^\s*#' "$HERE/packages.txt" | awk 'NF {print $1}' | paste -sd, -)
log "debootstrap $SUITE minbase from $MIRROR + $pkgs"
# apt's proxy setting, for debootstrap (which reads only the environment)
eval "$(apt-config shell APT_PROXY Acquire::http::Proxy)"
[ -z "${APT_PROXY:-}" ] || [ -n "${http_proxy:-}" ] || export http_proxy=$APT_PROXY
timeout 1500 debootstrap --variant=minbase --include="$pkgs" --cache-dir="$CACHE_ROOT/debs" \
    "$SUITE" "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
step_done debootstrap "$t"

# ---- 2. kernel, modules, siw ------------------------------------------------------------------
t=$SECONDS
fetch_deb() {  # fetch_deb PACKAGE=VERSION -> path of the .deb in the shared deb cache
    local name=${1%%=*} ver=${1#*=} f
    f=$(ls "$CACHE_ROOT/debs/${name}_${ver//:/%3a}_"*.deb 2>/dev/null | head -1 || true)
    if [ -z "$f" ]; then
        (cd "$CACHE_ROOT/debs" && timeout 900 apt-get download -q "$1" >/dev/null 2>&1) ||
            die "apt-get download $1 failed"
        f=$(ls "$CACHE_ROOT/debs/${name}_${ver//:/%3a}_"*.deb | head -1)
    fi
    echo "$f"
}
kdeb=$(fetch_deb "$KPKG=$KVER")
dpkg-deb -x "$kdeb" "$WORK/kernel"
mkdir -p "$ROOT/usr/lib/modules"
mv "$WORK/kernel/lib/modules/$KREL" "$ROOT/usr/lib/modules/"
MODDIR=$ROOT/usr/lib/modules/$KREL
# Drivers no virtual machine without devices needs: a smaller image is made and booted faster.
for d in drivers/gpu drivers/media drivers/net/wireless drivers/net/ethernet drivers/staging \
         drivers/scsi drivers/usb drivers/input drivers/hid drivers/iio drivers/isdn \
         drivers/bluetooth drivers/video drivers/hwmon drivers/mtd drivers/comedi \
         drivers/infiniband/hw drivers/net/can drivers/net/usb drivers/mmc drivers/nfc \
         drivers/platform sound net/wireless net/mac80211 net/bluetooth fs/nls fs/ocfs2 \
         fs/btrfs fs/xfs fs/gfs2 fs/smb fs/nfs fs/nfsd fs/ceph; do
    rm -rf "${MODDIR:?}/kernel/$d"
done
python3 - "$WORK/kernel/boot/vmlinuz-$KREL" "$IMG/vmlinux" <<'EOF'
# The bzImage carries the ELF kernel as an xz stream (CONFIG_KERNEL_XZ); QEMU boots that ELF
# through its PVH entry point without the decompression stub's slow work under TCG.
import lzma, sys
data = open(sys.argv[1], "rb").read()
at = data.find(b"\xfd7zXZ\x00")
if at < 0:
    sys.exit("no xz stream in the kernel image")
elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[at:])
if elf[:4] != b"\x7fELF":
    sys.exit("the xz stream is not an ELF kernel")
open(sys.argv[2], "wb").write(elf)
EOF
step_done kernel "$t"

t=$SECONDS
sdeb=$(fetch_deb "linux-source-${KREL%%.0-*}=$KVER")
mkdir -p "$WORK/src"
# linux-source is one .tar.xz inside the .deb: stream out just siw's directory
dpkg-deb --fsys-tarfile "$sdeb" |
    tar -xO --wildcards './usr/src/linux-source-*.tar.xz' |
    tar -xJ -C "$WORK/src" --wildcards --strip-components=1 '*/drivers/infiniband/sw/siw'
SIW=$WORK/src/drivers/infiniband/sw/siw
[ -f "$SIW/siw_main.c" ] || die "siw sources not found in $sdeb"
timeout 900 make -s -C "$HEADERS" M="$SIW" CONFIG_RDMA_SIW=m -j"$(nproc)" modules \
    >"$WORK/siw-build.log" 2>&1 || { tail -30 "$WORK/siw-build.log" >&2; die "siw build failed"; }
mkdir -p "$MODDIR/updates"
strip --strip-debug -o "$MODDIR/updates/siw.ko" "$SIW/siw.ko"
depmod -b "$ROOT" "$KREL"
step_done siw "$t"

# ---- 3. Python packages ---------------------------------------------------------------------
t=$SECONDS
glibc=$(chroot "$ROOT" ldd --version | awk 'NR == 1 {print $NF}')
# pip does not widen --platform to older manylinux tags: list every one the guest's glibc runs
platforms=(--platform manylinux2014_x86_64)
for ((minor = 17; minor <= ${glibc#*.}; minor++)); do
    platforms+=(--platform "manylinux_2_${minor}_x86_64")
done
timeout 900 python3 -m pip install -q --disable-pip-version-check --no-deps --no-compile \
    --only-binary=:all: --python-version "$GUEST_PY" --implementation cp \
    "${platforms[@]}" --target "$ROOT/opt/hpccomm/site" \
    -r "$HERE/requirements.txt" >"$WORK/pip.log" 2>&1 ||
    { tail -20 "$WORK/pip.log" >&2; die "pip install of the guest's wheels failed"; }
# byte-compile now: the guest's pytest would otherwise compile numpy & co. at every boot
python3 -m compileall -q -j0 -s "$ROOT" -p / "$ROOT/opt/hpccomm/site" >/dev/null || true
step_done python "$t"

# ---- 4. trim, initramfs, image ----------------------------------------------------------------
t=$SECONDS
rm -rf "$ROOT"/usr/share/{doc,man,info,locale} "$ROOT"/var/cache/apt/* \
       "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/*
echo hpccomm-guest >"$ROOT/etc/hostname"
# what a Debian installer writes (debootstrap's minbase has none): without it "localhost" does
# not resolve, and libfabric's verbs provider, which resolves it when given no address, opens
# no endpoint (rdma_getaddrinfo: EAGAIN)
printf '127.0.0.1\tlocalhost\n127.0.1.1\thpccomm-guest\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
    >"$ROOT/etc/hosts"

INITRD=$WORK/initramfs
mkdir -p "$INITRD"/{bin,dev,proc,sys,newroot,modules}
cp "$(command -v busybox)" "$INITRD/bin/busybox"
file -L "$INITRD/bin/busybox" 2>/dev/null | grep -q dynamically &&
    die "busybox is dynamically linked: install busybox-static"
install -m 755 "$HERE/initramfs-init" "$INITRD/init"
# insmod order with dependencies, as modprobe resolves them from the image's modules.dep
modprobe -d "$ROOT" -S "$KREL" -a --show-depends crc32c_generic virtio_pci virtio_blk ext4 \
        9pnet_virtio 9p | awk '$1 == "insmod" {print $2}' | awk '!seen[$0]++' |
    while read -r ko; do
        cp "$ko" "$INITRD/modules/"
        basename "$ko" >>"$INITRD/modules.list"
    done
(cd "$INITRD" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$IMG/initrd.img"
step_done initramfs "$t"

t=$SECONDS
size_mb=$(( $(du -sm "$ROOT" | cut -f1) * 115 / 100 + 384 ))  # room for /tmp and logs
mke2fs -q -t ext4 -L hpccomm-root -d "$ROOT" -F "$IMG/rootfs.ext4" "${size_mb}M" >&2
step_done image "$t"

# ---- 5. manifest ----------------------------------------------------------------------------
dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f '${Package}=${Version}\n' >"$IMG/packages.lock"
python3 - "$IMG/manifest.json" <<EOF
import json, sys
json.dump({"key": "$KEY", "kernel_package": "$KPKG", "kernel_version": "$KVER",
           "kernel_release": "$KREL", "suite": "$SUITE", "mirror": "$MIRROR",
           "rootfs_mb": $size_mb, "build_seconds": $((SECONDS - T0)),
           "steps": {$(for k in "${!STEP[@]}"; do printf '"%s": %s, ' "$k" "${STEP[$k]}"; done)
                     "total": $((SECONDS - T0))}},
          open(sys.argv[1], "w"), indent=1)
EOF
touch "$IMG/ready"
rm -rf "$OUT"
mv "$IMG" "$OUT"
# keep one image: the previous build's (other keys) are dead weight of ~1 GB each
for old in "$CACHE_ROOT"/*/; do
    old=${old%/}
    case ${old##*/} in debs|"$KEY"|build.*) continue ;; esac
    [ -f "$old/ready" ] && rm -rf --one-file-system "$old"
done
log "built $OUT in $((SECONDS - T0)) s"
echo "$OUT"
