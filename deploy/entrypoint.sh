#!/bin/sh
# `docker run IMAGE [server [FLAGS]]` runs a node; `docker run IMAGE ctl ...` runs warren ctl.
# A node reads /etc/warren/warren.toml (or $WARREN_CONFIG_FILE) when that file exists;
# WARREN_* variables override the file, flags override both.
#
# Chaos testing only (cluster-tests/docker-compose.chaos.yml sets it; a user's deployment
# never does): WARREN_FAKETIME_FILE=PATH runs the node under libfaketime (an image built with
# WITH_FAKETIME=1), its wall clock offset by what PATH says ("+60", "-12.5"; "+0" when absent),
# read again once a second (FAKETIME_CACHE_DURATION), so the chaos nemesis moves the clock of
# a running node by rewriting the file; file times are left alone (NO_FAKE_STAT). The
# monotonic clocks stay real (FAKETIME_DONT_FAKE_MONOTONIC): a stepped or drifting wall clock
# never moves them, and libfaketime 0.9.10's faked monotonic clock hangs Python's timed thread
# waits. Not libfaketimeMT: under it the cluster's first commits timed out (docs/chaos.md).
set -e
if [ "${1:-server}" = server ]; then
    [ $# -gt 0 ] && shift
    if [ -n "${WARREN_FAKETIME_FILE:-}" ]; then
        lib=
        for f in /usr/lib/*/faketime/libfaketime.so.1; do [ -e "$f" ] && lib=$f; done
        if [ -z "$lib" ]; then
            echo "warren-entrypoint: WARREN_FAKETIME_FILE is set but libfaketime is not installed" \
                "(build the image with --build-arg WITH_FAKETIME=1)" >&2
            exit 1
        fi
        [ -f "$WARREN_FAKETIME_FILE" ] || echo "+0" >"$WARREN_FAKETIME_FILE"
        export LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" FAKETIME_TIMESTAMP_FILE="$WARREN_FAKETIME_FILE" \
            FAKETIME_CACHE_DURATION=1 FAKETIME_DONT_FAKE_MONOTONIC=1 NO_FAKE_STAT=1
    fi
    config=${WARREN_CONFIG_FILE:-/etc/warren/warren.toml}
    if [ -f "$config" ]; then
        exec warren server --config "$config" "$@"
    fi
    exec warren server "$@"
fi
exec warren "$@"
