#!/usr/bin/env bash
# Build the local base image warren-base:bookworm without any image registry:
# a Debian bookworm minbase made by debootstrap (python3, python3-venv, python3-pip,
# iptables for the chaos harness's partitions, libfaketime for its clock faults), imported with `docker import`.
#
#   scripts/build-base-image.sh            # skips the build when the image exists
#   FORCE=1 scripts/build-base-image.sh    # rebuild it
#
# Then: docker build --build-arg BASE_IMAGE=warren-base:bookworm -f deploy/Dockerfile .
#
# Environment: BASE_IMAGE_TAG (default warren-base:bookworm), DEBIAN_MIRROR (default
# http://deb.debian.org/debian), DEBOOTSTRAP_CACHE (where the .debs are kept between builds,
# default /var/cache/warren-debootstrap), FORCE=1. Needs root (debootstrap) and a running
# engine (scripts/ensure-docker.sh). The tree is built on a tmpfs when one can be mounted.
set -euo pipefail

TAG=${BASE_IMAGE_TAG:-warren-base:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
PACKAGES=python3,python3-venv,python3-pip,iptables,libfaketime,ca-certificates

if [ "${FORCE:-0}" != 1 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "build-base-image: $TAG exists ($(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')); FORCE=1 rebuilds it"
    exit 0
fi

[ "$(id -u)" = 0 ] || { echo "build-base-image: debootstrap needs root" >&2; exit 1; }
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "build-base-image: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

started=$(date +%s)
root=$(mktemp -d /var/tmp/warren-base.XXXXXX)
log=$(mktemp /var/tmp/warren-base-log.XXXXXX)
cleanup() {
    # debootstrap may leave /proc or /sys mounted inside the tree when it fails.
    for m in proc sys dev/pts dev; do umount -l "$root/$m" 2>/dev/null || true; done
    umount -l "$root" 2>/dev/null || true
    rm -rf --one-file-system "$root"
}
trap cleanup EXIT
# dpkg syncs every file it unpacks: in RAM the bootstrap takes a fraction of the time.
mount -t tmpfs -o size=1g,mode=0755 warren-base "$root" 2>/dev/null || echo "build-base-image: no tmpfs, building on disk"
# .debs are kept between builds (DEBOOTSTRAP_CACHE), so a rebuild downloads nothing new.
cache=${DEBOOTSTRAP_CACHE:-/var/cache/warren-debootstrap}
mkdir -p "$cache"

echo "build-base-image: debootstrap $SUITE (minbase + $PACKAGES) from $MIRROR"
debootstrap --variant=minbase --include="$PACKAGES" --cache-dir="$cache" "$SUITE" "$root" "$MIRROR" >"$log" 2>&1 || {
    tail -n 30 "$log" >&2
    echo "build-base-image: debootstrap failed (full log: $log)" >&2
    exit 1
}
rm -f "$log"

# Apt sources for whoever extends the image; then everything a container does not need.
cat >"$root/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
EOF
# Do not keep the docs, man pages, locales and apt caches in images built on this one.
cat >"$root/etc/dpkg/dpkg.cfg.d/01-warren-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/debconf/*-old \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/var/log/* "$root"/tmp/* "$root"/root/.cache
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
find "$root/usr/lib/python3" "$root/usr/lib/python3.11" -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null || true
: >"$root/etc/hostname"
: >"$root/etc/resolv.conf"  # the engine bind-mounts its own

echo "build-base-image: docker import -> $TAG"
tar --numeric-owner --xattrs -C "$root" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    --message "debootstrap $SUITE minbase + $PACKAGES" \
    - "$TAG" >/dev/null

size=$(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')
echo "build-base-image: built $TAG ($size) in $(($(date +%s) - started))s"
