#!/usr/bin/env bash
# Test-only dependencies for the browser test (issue 8): Debian's Chromium and Playwright for
# Python (pinned in requirements-test.txt). Idempotent. Playwright never downloads a browser
# here (no `playwright install`): tests/test_browser.py launches /usr/bin/chromium.
# Usage: .ci/install_test_deps.sh [venv]   (default .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv}"

if [ ! -x /usr/bin/chromium ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        chromium fonts-dejavu-core >/dev/null
fi

if ! "$VENV/bin/python" -m pip show playwright 2>/dev/null | grep -x "Version: $(sed -n "s/^playwright==//p" requirements-test.txt)" >/dev/null; then
    "$VENV/bin/python" -m pip install --quiet -r requirements-test.txt -c constraints.txt
fi
