#!/bin/sh
# `docker run IMAGE [server [FLAGS]]` runs a node; `docker run IMAGE ctl ...` runs warren ctl.
# A node reads /etc/warren/warren.toml (or $WARREN_CONFIG_FILE) when that file exists;
# WARREN_* variables override the file, flags override both.
set -e
if [ "${1:-server}" = server ]; then
    [ $# -gt 0 ] && shift
    config=${WARREN_CONFIG_FILE:-/etc/warren/warren.toml}
    if [ -f "$config" ]; then
        exec warren server --config "$config" "$@"
    fi
    exec warren server "$@"
fi
exec warren "$@"
