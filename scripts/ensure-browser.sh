#!/usr/bin/env bash
# Make sure Debian's headless-capable Chromium is installed, for the web
# console's browser tests (tests/console/, driven by Playwright for Python with
# executable_path: Playwright's own browser download is not used).
#
#   scripts/ensure-browser.sh      # idempotent: does nothing when chromium is there
#
# Prints the browser binary's path on its last line ("browser: /usr/lib/chromium/chromium").
# Exit status: 0 when the browser is there, 3 when it cannot be (no root, apt-get failed),
# with a loud message on stderr saying why.
set -uo pipefail

die() {
    {
        echo
        echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
        echo "!!! ensure-browser: CHROMIUM CANNOT BE INSTALLED HERE: $*"
        echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    } >&2
    exit 3
}

say() { echo "ensure-browser: $*" >&2; }

# The real binary: /usr/bin/chromium is Debian's wrapper script, which adds
# flags of its own; Playwright passes everything it needs itself.
browser() {
    for b in /usr/lib/chromium/chromium /usr/bin/chromium; do
        if [ -x "$b" ]; then echo "$b"; return 0; fi
    done
    return 1
}

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi
}

if ! browser >/dev/null; then
    command -v apt-get >/dev/null 2>&1 || die "no apt-get to install chromium with"
    say "apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || die "apt-get update failed"
    # fonts-dejavu-core: text in screenshots; the lock timeout: another session may be installing too
    say "apt-get install chromium"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o DPkg::Lock::Timeout=600 chromium fonts-dejavu-core >/dev/null || die "apt-get install chromium failed"
fi
path=$(browser) || die "chromium is still missing after apt-get install"
echo "browser: $path"
