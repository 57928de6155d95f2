#!/usr/bin/env bash
# Prints the Python the hub environment is made from (install.sh step 2): 3.11 or newer, with its
# venv module (Debian and Ubuntu ship it apart, as python3.X-venv), runnable by every hub user (not
# under a private home such as /root: when run as root, each candidate is tried as `nobody`).
# COURSE_HUB_PYTHON, when set, is the only candidate; else python3.11, python3.12, python3.13,
# python3.14 and python3, every one PATH finds, the first that qualifies. Nothing qualifies: exit 1,
# and stderr says what each candidate was and what to install (Debian 12: python3.11-venv; Ubuntu
# 24.04, whose Python is 3.12: python3.12-venv).
# Usage: deploy/jupyterhub/find_python.sh        (only reads; install.sh does the installing)
set -uo pipefail
MINIMUM=(3 11)
NAMES=(python3.11 python3.12 python3.13 python3.14 python3)

# runuser is in /usr/sbin, which a user's PATH (or sudo's secure_path elsewhere) may leave out
RUNUSER="$(command -v runuser || for r in /usr/sbin/runuser /sbin/runuser; do [ -x "$r" ] && echo "$r" && break; done)"

probe() {   # run a candidate's python -c "$2" as an unprivileged user when we are root
    local python="$1" code="$2"
    if [ "$(id -u)" = 0 ] && [ -n "$RUNUSER" ]; then
        (cd / && "$RUNUSER" -u nobody -- "$python" -c "$code") 2>/dev/null
    else
        (cd / && "$python" -c "$code") 2>/dev/null
    fi
}

verdict() {   # "ok X.Y" or why $1 does not qualify
    local python="$1" version major minor
    [ -x "$python" ] || { echo "not an executable file"; return; }
    version="$(probe "$python" 'import sys; print("%d.%d" % sys.version_info[:2])')" || {
        echo "cannot be run by another user (is it under a private home, such as /root?)"; return; }
    major="${version%%.*}"; minor="${version#*.}"
    if ! [[ "$major" =~ ^[0-9]+$ && "$minor" =~ ^[0-9]+$ ]]; then
        echo "answered '$version' when asked its version"; return
    fi
    if [ "$major" -lt "${MINIMUM[0]}" ] || { [ "$major" -eq "${MINIMUM[0]}" ] && [ "$minor" -lt "${MINIMUM[1]}" ]; }; then
        echo "Python $version (${MINIMUM[0]}.${MINIMUM[1]} or newer needed)"; return
    fi
    probe "$python" 'import ensurepip, venv' >/dev/null || {
        echo "Python $version without its venv module (Debian, Ubuntu: apt-get install python$version-venv)"; return; }
    echo "ok $version"
}

if [ -n "${COURSE_HUB_PYTHON:-}" ]; then
    candidates=("$COURSE_HUB_PYTHON")
else
    candidates=()
    for name in "${NAMES[@]}"; do
        while read -r found; do     # every one on PATH, not only the first (a pyenv shim may hide /usr/bin's)
            [ -n "$found" ] && [[ " ${candidates[*]} " != *" $found "* ]] && candidates+=("$found")
        done < <(type -aP "$name")
    done
fi

tried=()
for python in "${candidates[@]}"; do
    said="$(verdict "$python")"
    if [[ "$said" == ok* ]]; then
        echo "$python"
        exit 0
    fi
    tried+=("$python: $said")
done

{
    echo "install.sh: no Python ${MINIMUM[0]}.${MINIMUM[1]} or newer with its venv module that every hub user can run."
    if [ -n "${COURSE_HUB_PYTHON:-}" ]; then
        echo "  COURSE_HUB_PYTHON is set, so it is the only one tried (unset it to let this script search PATH):"
    elif [ "${#candidates[@]}" = 0 ]; then
        echo "  none of ${NAMES[*]} is on PATH ($PATH)"
    else
        echo "  tried (${NAMES[*]}, each in PATH order):"
    fi
    for line in "${tried[@]}"; do echo "    $line"; done
    echo "  fix: install one with its venv module (Debian 12: apt-get install python3.11-venv; Ubuntu 24.04:"
    echo "  apt-get install python3.12-venv), or set COURSE_HUB_PYTHON=/path/to/python3.X, outside any private home"
} >&2
exit 1
