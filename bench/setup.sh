#!/bin/sh
# bench/setup.sh: installs what the side-by-side benchmarks need, idempotently.
#
#   - Debian packages: rabbitmq-server (3.10, with the rabbitmq_amqp1_0 plugin),
#     libqpid-proton11-dev and pkg-config (to build arrow), curl.
#   - bench/arrow: the AMQP 1.0 load generator, built from shared/tools/arrow.
#
# shared/ is found beside the repository ($(git rev-parse --show-toplevel)/../shared);
# set WARREN_SHARED to override.  Needs root for apt-get (or the packages already there).
#
# The Debian package would start a system-wide RabbitMQ on the default ports
# (5672, 15672, 25672) on install; that would clash with Warren.  We keep the
# service from starting (policy-rc.d during install), then stop and disable it
# if it runs anyway.  The benchmark runs its own node (bench/rabbitmq.py).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(git -C "$here" rev-parse --show-toplevel 2>/dev/null || (cd "$here/.." && pwd))
shared=${WARREN_SHARED:-$top/../shared}
arrow_src=$shared/tools/arrow

pkgs="rabbitmq-server libqpid-proton11-dev pkg-config curl"
missing=""
for p in $pkgs; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup.sh: missing Debian packages:$missing (run as root or install them)" >&2
    exit 1
  fi
  echo "setup.sh: installing$missing" >&2
  # Keep the package's service from being started by its postinst.
  added_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    added_policy=1
  fi
  cleanup_policy() { [ -n "$added_policy" ] && rm -f /usr/sbin/policy-rc.d; true; }
  trap cleanup_policy EXIT INT TERM
  apt-get update -qq >/dev/null
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  cleanup_policy
  trap - EXIT INT TERM
fi

# Make sure no system-wide RabbitMQ holds the default ports (the benchmark's own
# node runs as the invoking user, not as user rabbitmq, so it is not matched here).
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  if systemctl is-enabled --quiet rabbitmq-server 2>/dev/null || systemctl is-active --quiet rabbitmq-server; then
    systemctl disable --now rabbitmq-server >/dev/null 2>&1 || true
  fi
elif [ -x /etc/init.d/rabbitmq-server ] && pgrep -u rabbitmq beam.smp >/dev/null 2>&1; then
  /etc/init.d/rabbitmq-server stop >/dev/null 2>&1 || true
  update-rc.d rabbitmq-server disable >/dev/null 2>&1 || true
fi
if pgrep -u rabbitmq beam.smp >/dev/null 2>&1; then
  echo "setup.sh: warning: a system RabbitMQ (user rabbitmq) is still running and may hold" \
       "ports 5672/15672/25672; stop it: rabbitmqctl stop" >&2
fi

# Build arrow (rebuilt only when arrow.c is newer than the binary).
if [ ! -f "$arrow_src/arrow.c" ]; then
  echo "setup.sh: $arrow_src/arrow.c not found (set WARREN_SHARED)" >&2
  exit 1
fi
if [ ! -x "$here/arrow" ] || [ "$arrow_src/arrow.c" -nt "$here/arrow" ]; then
  sh "$arrow_src/build.sh" "$here/arrow" >/dev/null
fi

rabbit_version=$(dpkg-query -W -f='${Version}' rabbitmq-server)
echo "setup.sh: ok: rabbitmq-server $rabbit_version, arrow at $here/arrow" >&2
