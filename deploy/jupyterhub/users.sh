#!/usr/bin/env bash
# Local system users for the course hub (deploy/jupyterhub/users.txt): per course a grader account
# (owns the course, runs its Formgrader service), instructors, TAs and students, each with a private
# home (0700), and the group nbgrader-<course> of the course's members. nbgrader's extensions per
# role: the hub environment's defaults (install.sh) are the students' view -- Assignments and
# Validate, the Formgrader, Course List and Create Assignment switched off -- so any new student
# account needs nothing; a grader account's configuration switches the Formgrader on, an
# instructor's and a TA's the Course List, and both the Assignments list off (nbgrader's
# documented per-user mechanism: `jupyter labextension enable|disable --level=user` run as that
# user, and the server extensions in the user's ~/.jupyter/jupyter_server_config.json).
# This tidies each role's menus; it is not the security boundary (a user controls their own
# ~/.jupyter): file permissions are (homes 0700, the exchange's inbound not listable).
# Idempotent. Needs root. Refuses to adopt an existing account it did not create (its comment
# field carries MARKER), so it never touches a real person's account.
# Usage: deploy/jupyterhub/users.sh [hub env]   (default /opt/attention-course/venv)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
HUB_ENV="${1:-${COURSE_HUB_ENV:-/opt/attention-course/venv}}"
MARKER="attention-course hub"
[ "$(id -u)" = 0 ] || { echo "users.sh: run as root (it creates system users with useradd)" >&2; exit 1; }
[ -x "$HUB_ENV/bin/jupyter" ] || { echo "users.sh: no hub environment at $HUB_ENV; run deploy/jupyterhub/install.sh" >&2; exit 1; }

lab_extensions() {   # $1 user, $2 enable|disable, then lab extension ids: for that user only
    # (`jupyter labextension enable|disable --level=user`, run as the user; skipped when already so,
    # since each call takes seconds)
    local user="$1" action="$2"; shift 2
    local page_config; page_config="$(getent passwd "$user" | cut -d: -f6)/.jupyter/labconfig/page_config.json"
    local value=true; [ "$action" = enable ] && value=false     # page_config lists {id: disabled?}
    local id
    for id in "$@"; do
        if ! grep -q "\"$id\": $value" "$page_config" 2>/dev/null; then
            as_user "$user" jupyter labextension "$action" --level=user "$@" >/dev/null 2>&1
            return
        fi
    done
}

server_extensions() {   # $1 user, then module=true|false ...: ~/.jupyter/jupyter_server_config.json
    # (written directly: `jupyter server extension disable --user` refuses an extension that is
    # enabled at the environment's level, which is exactly the one a user-level "false" overrides)
    local user="$1"; shift
    as_user "$user" python - "$@" <<'PY'
import json, os, sys
path = os.path.expanduser("~/.jupyter/jupyter_server_config.json")
config = json.load(open(path)) if os.path.exists(path) else {}
extensions = config.setdefault("ServerApp", {}).setdefault("jpserver_extensions", {})
for item in sys.argv[1:]:
    module, state = item.split("=")
    extensions[module] = state == "true"
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as f:
    json.dump(config, f, indent=2)
PY
}

as_user() {   # run a command as $1 with its own HOME, from a directory it can enter
    local user="$1"; shift
    (cd / && runuser -u "$user" -- env -i HOME="$(getent passwd "$user" | cut -d: -f6)" \
        USER="$user" PATH="$HUB_ENV/bin:/usr/bin:/bin" "$@")
}

# each course's members' system group (hub.py gives it the course's exchange folder, mode 0750)
grep -v '^\s*#' "$here/users.txt" | awk 'NF {print $3}' | sort -u | while read -r course; do
    getent group "nbgrader-$course" >/dev/null || { groupadd "nbgrader-$course"; echo "users.sh: created group nbgrader-$course"; }
done

grep -v '^\s*#' "$here/users.txt" | while read -r user role course; do
    [ -n "$user" ] || continue
    [ -n "$course" ] || { echo "users.sh: users.txt names no course for $user (login role course)" >&2; exit 1; }
    if id "$user" >/dev/null 2>&1; then
        comment="$(getent passwd "$user" | cut -d: -f5)"
        case "$comment" in
            "$MARKER"*) ;;
            *) echo "users.sh: a user '$user' already exists and was not created by this script" \
                    "(comment '$comment'); rename the hub's users in deploy/jupyterhub/users.txt" >&2
               exit 1 ;;
        esac
    else
        useradd --create-home --shell /bin/bash --comment "$MARKER ($role)" "$user"
        echo "users.sh: created $user ($role of $course)"
    fi
    usermod -a -G "nbgrader-$course" "$user"
    home="$(getent passwd "$user" | cut -d: -f6)"
    chmod 0700 "$home"    # nobody else reads a student's work or the course's solutions and gradebook
    case "$role" in
        student) ;;     # the environment's defaults are the student's view (install.sh)
        grader)         # the course's shared account: its Formgrader service (jupyterhub_config.py)
            lab_extensions "$user" enable @jupyter/nbgrader:formgrader @jupyter/nbgrader:course-list \
                @jupyter/nbgrader:create-assignment
            lab_extensions "$user" disable @jupyter/nbgrader:assignment-list
            server_extensions "$user" nbgrader.server_extensions.formgrader=true \
                nbgrader.server_extensions.course_list=true nbgrader.server_extensions.assignment_list=false
            # the Formgrader and `nbgrader` read the course from ~/.jupyter/nbgrader_config.py
            install -D -m 0644 -o "$user" -g "$user" "$here/nbgrader_config_grader.py" \
                "$home/.jupyter/nbgrader_config.py"
            ;;
        instructor|ta)  # they grade in the course's service; their own server lists it (Course List)
            previous="$home/.jupyter/nbgrader_config.py"    # a course of their own, from an older layout
            if [ -f "$previous" ] && grep -q "installed by users.sh" "$previous"; then rm -f "$previous"; fi
            lab_extensions "$user" enable @jupyter/nbgrader:course-list
            lab_extensions "$user" disable @jupyter/nbgrader:assignment-list @jupyter/nbgrader:formgrader \
                @jupyter/nbgrader:create-assignment
            server_extensions "$user" nbgrader.server_extensions.formgrader=false \
                nbgrader.server_extensions.course_list=true nbgrader.server_extensions.assignment_list=false
            ;;
        *) echo "users.sh: unknown role '$role' for $user (grader, instructor, ta or student)" >&2; exit 1 ;;
    esac
done
