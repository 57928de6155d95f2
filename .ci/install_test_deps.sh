#!/usr/bin/env bash
# Test-only dependencies for the browser test (issue 8): Debian's Chromium and Playwright for
# Python (pinned in requirements-test.txt). Idempotent. Playwright never downloads a browser
# here (no `playwright install`): tests/test_browser.py launches /usr/bin/chromium.
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

if [ ! -x "$VENV/bin/python" ]; then
    echo "install_test_deps: $VENV does not exist yet; Playwright is installed after it" >&2
    exit 0
fi
want="$(sed -n 's/^playwright==//p' requirements-test.txt)"
if ! "$VENV/bin/python" -m pip show playwright 2>/dev/null | grep -x "Version: $want" >/dev/null; then
    "$VENV/bin/python" -m pip install --quiet -r requirements-test.txt -c constraints.txt
fi
