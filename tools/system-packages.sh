#!/bin/sh
# Install the Debian packages named as arguments that are missing (what `make setup` runs).
#   sh tools/system-packages.sh PACKAGE... | COMMAND:PACKAGE...
# COMMAND:PACKAGE skips PACKAGE when COMMAND is already on PATH (npm also comes with
# other Node.js builds). As root with apt-get (CI), missing packages are installed
# quietly; elsewhere the script only says what is missing and succeeds, so that
# `make setup` works on any machine (the browser tests then skip), except when CI is
# set: then a package it cannot install is an error.
set -e
missing=""
for spec in "$@"; do
    command=${spec%%:*}
    package=${spec#*:}
    if [ "$command" != "$spec" ]; then
        command -v "$command" >/dev/null 2>&1 && continue
    elif dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q ' installed$'; then
        continue
    fi
    missing="$missing $package"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "note: missing system packages:$missing (Debian: sudo apt-get install$missing)" >&2
    [ -z "${CI:-}" ] || exit 1
    exit 0
fi
echo "installing system packages:$missing"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
# shellcheck disable=SC2086
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    exit 1
fi
rm -f "$log"
