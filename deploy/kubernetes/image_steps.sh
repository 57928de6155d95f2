#!/usr/bin/env bash
# The single-user image's install steps (deploy/kubernetes/Dockerfile runs this as root, in the
# image, with the files below copied to /opt/course):
#   1. Debian packages: bubblewrap and util-linux (the grading sandbox: bwrap, prlimit), git;
#   2. the course's environment into the image's Python: requirements.txt and
#      deploy/jupyterhub/requirements.txt (JupyterHub's single-user server), always -c constraints.txt
#      (torch 2.13.0, CPU wheels), then a check that every pin of constraints.txt holds;
#   3. nbgrader's configuration for every user (course id and exchange from the pod's environment)
#      and JupyterLab's setting overrides;
#   4. the students' set of nbgrader extensions: the Formgrader, Course List and Create Assignment off
#      for the environment (a grader account switches them on in its own ~/.jupyter, as users.sh does).
# Usage: image_steps.sh                          (in the image build)
#        image_steps.sh --dry-run [PYTHON]       (anywhere: every file it names exists, and every
#                                                 requirement resolves, at its pin, in PYTHON's
#                                                 environment; installs nothing, downloads nothing)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
course="$(cd "$here/../.." && pwd)"      # /opt/course in the image, the repository's root elsewhere
REQUIREMENTS=(requirements.txt deploy/jupyterhub/requirements.txt)
CONSTRAINTS=constraints.txt
FILES=("${REQUIREMENTS[@]}" "$CONSTRAINTS" deploy/jupyterhub/nbgrader_config_students.py
       deploy/jupyterhub/lab_overrides.json deploy/kubernetes/check_image.py)
APT_PACKAGES=(bubblewrap util-linux git)
TORCH_INDEX=https://download.pytorch.org/whl/cpu      # torch's CPU wheels (no CUDA: gigabytes less)
INSTRUCTOR_LAB=(@jupyter/nbgrader:formgrader @jupyter/nbgrader:course-list @jupyter/nbgrader:create-assignment)
INSTRUCTOR_SERVER=(nbgrader.server_extensions.formgrader nbgrader.server_extensions.course_list)

if [ "${1:-}" = "--dry-run" ]; then
    python="${2:-python3}"
    args=()
    for file in "${FILES[@]}"; do args+=(--file "$file"); done
    for file in "${REQUIREMENTS[@]}"; do args+=(--requirements "$file"); done
    exec "$python" "$here/check_image.py" --root "$course" --constraints "$CONSTRAINTS" "${args[@]}"
fi

# 1.
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}" >/dev/null
rm -rf /var/lib/apt/lists/*
# 2.
pip_args=()
for file in "${REQUIREMENTS[@]}"; do pip_args+=(-r "$course/$file"); done
python3 -m pip install --extra-index-url "$TORCH_INDEX" "${pip_args[@]}" -c "$course/$CONSTRAINTS"
python3 "$here/check_image.py" --root "$course" --constraints "$CONSTRAINTS" --installed-pins
# 3.
prefix="$(python3 -c 'import sys; print(sys.prefix)')"
install -D -m 0644 "$course/deploy/jupyterhub/nbgrader_config_students.py" "$prefix/etc/jupyter/nbgrader_config.py"
install -D -m 0644 "$course/deploy/jupyterhub/lab_overrides.json" "$prefix/share/jupyter/lab/settings/overrides.json"
# 4. (unlocked after disabling, so that a grader account's user-level enable counts)
jupyter labextension disable --level=sys_prefix "${INSTRUCTOR_LAB[@]}"
jupyter labextension unlock --level=sys_prefix "${INSTRUCTOR_LAB[@]}"
for module in "${INSTRUCTOR_SERVER[@]}"; do jupyter server extension disable --sys-prefix "$module"; done
