#!/usr/bin/env bash
# System packages the tests need, from Debian: bubblewrap (the grading sandbox) and prlimit
# (util-linux). Idempotent; needs root or passwordless sudo, as on the CI machines.
set -euo pipefail
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v prlimit >/dev/null || missing+=(util-linux)
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
if [ -f .ci/install_test_deps.sh ]; then bash .ci/install_test_deps.sh; fi
