#!/usr/bin/env bash
# Make sure a Java runtime answers `java -version`, for PySpark (the audit, docs/audit.md).
#
#   scripts/ensure-java.sh          # idempotent: does nothing when java already runs
#
# When it does not: installs Debian's openjdk-17-jre-headless with apt-get (update first,
# noninteractive; as root, or through passwordless sudo). Spark 3.5 runs on Java 8, 11 or 17.
#
# Exit status: 0 when java runs, 3 when it cannot (no root, no apt-get, apt-get failed), with a
# loud message on stderr saying why.
set -uo pipefail

die() {
    {
        echo
        echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
        echo "!!! ensure-java: NO JAVA HERE, AND IT CANNOT BE INSTALLED: $*"
        echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    } >&2
    exit 3
}

say() { echo "ensure-java: $*" >&2; }

java_ok() { java -version >/dev/null 2>&1; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi
}

if java_ok; then
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "no apt-get (install a Java 17 runtime yourself, or set JAVA_HOME)"
as_root true 2>/dev/null || die "not root and no passwordless sudo to run apt-get with"
# slim Debian images drop /usr/share/man, and the JRE's postinst fails without man1
as_root mkdir -p /usr/share/man/man1
say "apt-get update"
as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || die "apt-get update failed"
say "apt-get install openjdk-17-jre-headless"
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless \
    >/dev/null || die "apt-get install openjdk-17-jre-headless failed"
hash -r
java_ok || die "openjdk-17-jre-headless is installed but 'java -version' still fails (PATH: $PATH)"
say "$(java -version 2>&1 | head -n 1)"
