#!/usr/bin/env bash
# Everything the course hub needs on this machine, idempotent (needs root, as on the CI machines):
#   1. Node.js and npm (Debian's apt) and configurable-http-proxy (npm, pinned);
#   2. the hub's environment (like TLJH's /opt/tljh/user): a venv made from a Python 3.11 or newer
#      that every hub user can run (find_python.sh: COURSE_HUB_PYTHON, else python3.11 ... python3 on
#      PATH; the repository's .venv may rest on an interpreter under /root), with the course's
#      requirements.txt and deploy/jupyterhub/requirements.txt, -c constraints.txt (torch 2.13.0);
#      JupyterHub runs from it too, and so do the students' and the instructor's servers;
#   3. configuration for every user of that environment: nbgrader's course id and exchange
#      (nbgrader_config_students.py), JupyterLab setting overrides (lab_overrides.json), and the
#      students' set of nbgrader extensions (the instructor's are switched on per user by users.sh);
#   4. the users (users.sh).
# Usage: sudo deploy/jupyterhub/install.sh   (env: COURSE_HUB_ENV=/opt/attention-course/venv,
#                                            COURSE_HUB_PYTHON=/path/to/python3.X)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
HUB_ENV="${COURSE_HUB_ENV:-/opt/attention-course/venv}"
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root (apt, npm -g, useradd, $HUB_ENV)" >&2; exit 1; }

apt_install() {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# 1. the proxy. configurable-http-proxy 5 needs Node >= 20; Debian 12's nodejs is 18, which gets 4.6.3.
if ! command -v node >/dev/null; then apt_install nodejs npm; fi
if ! command -v npm >/dev/null; then apt_install npm; fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -ge 20 ]; then chp_version=5.3.0; else chp_version=4.6.3; fi
if [ "$(configurable-http-proxy --version 2>/dev/null || true)" != "$chp_version" ]; then
    npm install --global --no-fund --no-audit --loglevel=error "configurable-http-proxy@$chp_version" >/dev/null
fi
command -v configurable-http-proxy >/dev/null || {
    echo "install.sh: configurable-http-proxy is not on PATH after npm install -g (npm prefix: $(npm config get prefix))" >&2; exit 1; }

# 2. the hub's environment, reinstalled only when a requirements file changes. Its Python:
# find_python.sh's choice (3.11 or newer, with venv, runnable by every user); where there is none,
# Debian's python3.11 + python3.11-venv, or the venv module of the system's own python3 when that is
# 3.11 or newer (Ubuntu 24.04: python3.12-venv).
if [ ! -x "$HUB_ENV/bin/python" ]; then
    if ! hub_python="$(bash "$here/find_python.sh" 2>/dev/null)"; then
        if [ -z "${COURSE_HUB_PYTHON:-}" ] && command -v apt-get >/dev/null; then
            system_version="$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)"
            if apt-cache show python3.11-venv >/dev/null 2>&1; then
                apt_install python3.11 python3.11-venv
            elif [ -n "$system_version" ] && apt-cache show "python$system_version-venv" >/dev/null 2>&1; then
                apt_install "python$system_version-venv"
            fi
        fi
        hub_python="$(bash "$here/find_python.sh")" || exit 1
    fi
    echo "install.sh: making the hub environment $HUB_ENV from $hub_python"
    "$hub_python" -m venv "$HUB_ENV"
fi
stamp="$HUB_ENV/.installed-$(cat "$repo/requirements.txt" "$here/requirements.txt" "$repo/constraints.txt" | sha256sum | cut -c1-16)"
if [ ! -e "$stamp" ]; then
    echo "install.sh: installing the hub environment in $HUB_ENV (about a minute)"
    "$HUB_ENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r "$repo/requirements.txt" -r "$here/requirements.txt" -c "$repo/constraints.txt" 2>&1 \
        | grep -v "^WARNING: Location .* is ignored" || true
    "$HUB_ENV/bin/python" - "$repo/constraints.txt" <<'PY'
import sys, importlib.metadata as md
pins = dict(line.split("==") for line in open(sys.argv[1]) if "==" in line and not line.startswith("#"))
bad = [f"{name} {md.version(name)} (constraints.txt: {want.strip()})" for name, want in pins.items()
       if md.version(name).split("+")[0] != want.strip()]
if bad:
    sys.exit("install.sh: the hub environment does not match constraints.txt: " + ", ".join(bad))
PY
    rm -f "$HUB_ENV"/.installed-*
    touch "$stamp"
fi
# rfc3987-syntax (jupyter-events brings it) makes jsonschema build an IRI grammar in every server at start-up,
# 1.8 CPU-s each; nothing validates an IRI, so it goes (as in the Makefile's DROP_IRI_GRAMMAR)
if "$HUB_ENV/bin/python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("rfc3987_syntax") is None)'; then
    "$HUB_ENV/bin/python" -m pip uninstall --quiet --yes rfc3987-syntax
fi
chmod -R a+rX "$HUB_ENV"
COURSE_HUB_PYTHON="$HUB_ENV/bin/python" bash "$here/find_python.sh" >/dev/null || {
    echo "install.sh: remove $HUB_ENV and run this again (set COURSE_HUB_PYTHON to a Python every user can run)" >&2
    exit 1; }

# 3. configuration every user of the environment reads
install -D -m 0644 "$here/nbgrader_config_students.py" "$HUB_ENV/etc/jupyter/nbgrader_config.py"
install -D -m 0644 "$here/lab_overrides.json" "$HUB_ENV/share/jupyter/lab/settings/overrides.json"
# nbgrader's extensions: the students' view for every account (Assignments list and Validate); the
# instructor's tools off here, switched on in the instructor's own configuration (users.sh). Unlocked
# after disabling (JupyterLab locks what it disables), so that the instructor's user-level enable counts.
# Written as `jupyter labextension disable|unlock --level=sys_prefix` (etc/jupyter/labconfig/page_config.json)
# and `jupyter server extension disable --sys-prefix` (etc/jupyter/jupyter_server_config.d/MODULE.json)
# write them, by one Python instead of four jupyter commands that take seconds each to start. Done when
# the last lab extension is listed unlocked ("...": false under lockedExtensions); a server extension's
# file, once there, is left as it is.
"$HUB_ENV/bin/python" - "$HUB_ENV/etc/jupyter" <<'PY'
import json, os, sys
etc = sys.argv[1]
instructor_lab = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:create-assignment"]
instructor_server = ["nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list"]

def write(path, config):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
    os.chmod(path, 0o644)

page_config = os.path.join(etc, "labconfig", "page_config.json")
config = json.load(open(page_config)) if os.path.exists(page_config) else {}
if config.get("lockedExtensions", {}).get(instructor_lab[-1]) is not False:
    for extension in instructor_lab:
        config.setdefault("disabledExtensions", {})[extension] = True
        config.setdefault("lockedExtensions", {})[extension] = False
    write(page_config, config)
for module in instructor_server:
    path = os.path.join(etc, "jupyter_server_config.d", f"{module}.json")
    if not os.path.exists(path):
        write(path, {"ServerApp": {"jpserver_extensions": {module: False}}})
PY

# 4. the users
bash "$here/users.sh" "$HUB_ENV"
echo "install.sh: hub ready (JupyterHub $("$HUB_ENV/bin/jupyterhub" --version)," \
     "configurable-http-proxy $(configurable-http-proxy --version), env $HUB_ENV); start it with: make hub"
