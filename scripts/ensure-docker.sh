#!/usr/bin/env bash
# Make sure a Docker engine answers `docker info` and that a compose command exists.
#
#   scripts/ensure-docker.sh          # idempotent: does nothing when the engine already runs
#
# When the engine does not answer: installs docker.io (and docker-compose v1 when neither
# `docker compose` nor `docker-compose` exists) with apt-get, then starts `dockerd` in the
# background, logging to $DOCKERD_LOG (default /var/log/warren-dockerd.log), and waits until
# `docker info` works. Prints the compose command to use on its last line
# ("compose: docker compose" or "compose: docker-compose").
#
# Exit status: 0 when the engine runs, 3 when it cannot (no root, apt-get failed, dockerd
# died or never answered), with a loud message on stderr saying why.
set -uo pipefail

DOCKERD_LOG=${DOCKERD_LOG:-/var/log/warren-dockerd.log}
WAIT=${ENSURE_DOCKER_WAIT:-60}

die() {
    {
        echo
        echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
        echo "!!! ensure-docker: THE DOCKER ENGINE CANNOT RUN HERE: $*"
        echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
        if [ -s "$DOCKERD_LOG" ]; then
            echo "--- last lines of $DOCKERD_LOG:"
            tail -n 25 "$DOCKERD_LOG"
        fi
    } >&2
    exit 3
}

say() { echo "ensure-docker: $*" >&2; }

engine_up() { docker info >/dev/null 2>&1; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi
}

apt_updated=0
apt_install() {
    command -v apt-get >/dev/null 2>&1 || die "no apt-get to install $* with"
    if [ "$apt_updated" = 0 ]; then
        say "apt-get update"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || die "apt-get update failed"
        apt_updated=1
    fi
    say "apt-get install $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null \
        || die "apt-get install $* failed"
}

compose_command() {
    if docker compose version >/dev/null 2>&1; then
        echo "docker compose"
    elif command -v docker-compose >/dev/null 2>&1; then
        echo "docker-compose"
    fi
}

ensure_compose() {
    if [ -z "$(compose_command)" ]; then
        apt_install docker-compose
    fi
    [ -n "$(compose_command)" ] || die "neither 'docker compose' nor 'docker-compose' works"
    echo "compose: $(compose_command)"
}

if engine_up; then
    ensure_compose
    exit 0
fi

# The engine does not answer: the client may be here without a daemon (or nothing is).
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    # iptables: dockerd's bridge networking; the docker.io package only recommends it.
    apt_install docker.io iptables ca-certificates
fi
command -v dockerd >/dev/null 2>&1 || die "dockerd is not installed and could not be"

# Someone may be starting it right now (another test session): wait a little before starting our own.
if pgrep -x dockerd >/dev/null 2>&1; then
    say "dockerd is running but does not answer yet; waiting up to ${WAIT}s"
    for _ in $(seq "$WAIT"); do engine_up && break; sleep 1; done
    engine_up || die "a dockerd process runs but 'docker info' keeps failing"
    ensure_compose
    exit 0
fi

# Debian's dockerd wants the legacy iptables when nf_tables is partial; use what works.
if command -v update-alternatives >/dev/null 2>&1 && [ -x /usr/sbin/iptables-legacy ]; then
    if ! iptables -L -n >/dev/null 2>&1 && iptables-legacy -L -n >/dev/null 2>&1; then
        say "iptables (nft) does not work here; switching to iptables-legacy"
        as_root update-alternatives --set iptables /usr/sbin/iptables-legacy >/dev/null 2>&1 || true
        as_root update-alternatives --set ip6tables /usr/sbin/ip6tables-legacy >/dev/null 2>&1 || true
    fi
fi

# containerd is started by dockerd itself when it is not running (managed mode).
say "starting dockerd in the background (log: $DOCKERD_LOG)"
as_root mkdir -p "$(dirname "$DOCKERD_LOG")" || die "cannot create $(dirname "$DOCKERD_LOG")"
as_root sh -c "nohup setsid dockerd >>'$DOCKERD_LOG' 2>&1 </dev/null &" || die "could not start dockerd"

for _ in $(seq "$WAIT"); do
    if engine_up; then
        say "dockerd answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
        ensure_compose
        exit 0
    fi
    pgrep -x dockerd >/dev/null 2>&1 || die "dockerd exited during start-up"
    sleep 1
done
die "dockerd did not answer 'docker info' within ${WAIT}s"
