#!/usr/bin/env bash
# Test-only dependencies for the browser test: Debian's Chromium and Playwright for Python
# (pinned in requirements-test.txt); and the course hub for the hub test.
# Idempotent. Playwright never downloads a browser here (no `playwright install`):
# tests/test_browser.py and tests/test_hub.py launch /usr/bin/chromium.
# Usage: .ci/install_test_deps.sh [venv]   (default .venv)
# Safe to call before the venv exists (as .ci/install_system_deps.sh does): then only Chromium
# is installed, and the Makefile's test-deps step installs Playwright into the venv.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv}"

if [ ! -x /usr/bin/chromium ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
fi

# The course hub for tests/test_hub.py: Node.js + configurable-http-proxy, the hub
# environment (/opt/attention-course/venv: JupyterHub and the course's packages, torch held by
# constraints.txt) and the hub's system users. Idempotent; needs root or passwordless sudo, else
# it is left out (the hub test then skips, or fails under REQUIRE_HUB=1).
if [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo -n"; fi
    # The hub's Python is find_python.sh's choice alone: every python3.11 ... python3 on PATH in turn,
    # the first that every hub user can run (a pyenv shim or a venv under /root is passed over), else
    # Debian's. COURSE_HUB_PYTHON and COURSE_HUB_ENV go through sudo only when the caller set them.
    $SUDO env ${COURSE_HUB_PYTHON:+COURSE_HUB_PYTHON="$COURSE_HUB_PYTHON"} \
        ${COURSE_HUB_ENV:+COURSE_HUB_ENV="$COURSE_HUB_ENV"} bash deploy/jupyterhub/install.sh
else
    echo "install_test_deps: not root and no passwordless sudo: the course hub (tests/test_hub.py) is not installed" >&2
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "install_test_deps: $VENV does not exist yet; Playwright is installed after it" >&2
    exit 0
fi
want="$(sed -n 's/^playwright==//p' requirements-test.txt)"
if ! "$VENV/bin/python" -m pip show playwright 2>/dev/null | grep -x "Version: $want" >/dev/null; then
    "$VENV/bin/python" -m pip install --quiet -r requirements-test.txt -c constraints.txt
fi
