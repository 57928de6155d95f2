#!/usr/bin/env bash
# Fetch, on a machine where PyPI works, the wheels that `make gpu-report` needs on a GPU machine that
# has Python 3.12, torch (with the triton its CUDA builds bring), matplotlib, numpy, tqdm, transformers, pytest,
# psutil, attrs, six, python-dateutil, packaging, pygments and typing-extensions, but no Jupyter stack and no network:
# what executes notebooks with nbclient (nbformat, nbclient, ipykernel, jupyter_client, jupyter_core
# and everything they import) and what the grader's check path imports (traitlets, nbformat, tqdm).
# cp312 manylinux x86_64 binaries; pure-Python wheels otherwise. Into .whl/ (git-ignored).
#
#   bash tools/gpu_wheels.sh              # download into .whl/, then check that the set is complete
# On the GPU machine:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site make gpu-report PYTHON=python3
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${DEST:-.whl}
PY=${PYTHON:-python3}

pinned() {   # the version requirements.txt / constraints.txt pin, else the fallback given
    local v
    v=$(grep -hiE "^$1==" requirements.txt constraints.txt 2>/dev/null | head -1 | cut -d= -f3 | tr -d ' ')
    echo "${v:-$2}"
}

# name  version (the course's pins where it has them; the rest as tested with them)
WHEELS=(
  "nbformat $(pinned nbformat 5.11.1)"
  "nbclient $(pinned nbclient 0.11.0)"
  "ipykernel $(pinned ipykernel 7.4.0)"
  "jupyter_client 8.10.0"
  "jupyter_core 5.9.1"
  "traitlets 5.16.1"
  "pyzmq 27.3.0"
  "tornado 6.6.1"
  "comm 0.2.3"
  "debugpy 1.8.22"
  "nest_asyncio2 1.7.4"
  "ipython 9.18.1"
  "ipython_pygments_lexers 1.1.1"
  "jedi 0.20.1"
  "parso 0.8.7"
  "matplotlib_inline 0.2.2"
  "pexpect 4.9.0"
  "ptyprocess 0.7.0"
  "prompt_toolkit 3.0.53"
  "wcwidth 0.9.4"
  "stack_data 0.6.3"
  "asttokens 3.0.2"
  "executing 2.3.0"
  "pure_eval 0.2.4"
  "platformdirs 4.14.7"
  "fastjsonschema 2.22.3"
  "jsonschema 4.26.0"
  "jsonschema_specifications 2025.9.1"
  "referencing 0.37.0"
  "rpds_py 2026.9.1"
)
# already on the GPU machine (not downloaded; a wheel may depend on them)
ON_GPU_MACHINE="torch triton matplotlib numpy tqdm transformers pytest psutil attrs six python-dateutil packaging
pygments typing-extensions jinja2 markupsafe pyyaml filelock setuptools"

mkdir -p "$DEST"
for entry in "${WHEELS[@]}"; do
  set -- $entry
  name=$1 version=$2
  if ls "$DEST" | grep -qiE "^${name//[-_.]/[-_.]}-${version}-"; then continue; fi
  got=""
  for platforms in "manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64" \
                   "manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux1_x86_64" \
                   "manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64"; do
    args=()
    for p in $platforms; do args+=(--platform "$p"); done
    if "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
         "${args[@]}" -d "$DEST" "$name==$version" 2>/dev/null; then got=yes; break; fi
  done
  [ -n "$got" ] || { echo "gpu_wheels: no cp312 manylinux x86_64 or pure wheel for $name==$version" >&2; exit 1; }
done

# the set is complete when every requirement of every wheel (for CPython 3.12 on Linux) is a wheel
# of the set or a package of the GPU machine
"$PY" - "$DEST" "$ON_GPU_MACHINE" <<'PY'
import re, sys, zipfile
from pathlib import Path

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

dest, on_machine = Path(sys.argv[1]), {norm(n) for n in sys.argv[2].split()}
env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
       "platform_system": "Linux", "implementation_name": "cpython", "platform_python_implementation": "CPython",
       "os_name": "posix", "platform_machine": "x86_64", "extra": ""}
wheels = sorted(dest.glob("*.whl"))
have = {norm(w.name.split("-")[0]) for w in wheels}
names = [w.name.split("-")[0] for w in wheels]
dupes = {n for n in names if names.count(n) > 1}
missing, total = [], 0
for wheel in wheels:
    total += wheel.stat().st_size
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        for line in zf.read(meta).decode().splitlines():
            if not line.startswith("Requires-Dist:"):
                continue
            requirement, _, marker = line[len("Requires-Dist:"):].partition(";")
            if marker.strip():
                try:
                    from packaging.markers import Marker
                    if not Marker(marker.strip()).evaluate(env):
                        continue
                except ImportError:
                    if "extra" in marker or "win32" in marker or "Darwin" in marker or "pypy" in marker:
                        continue
            name = norm(re.match(r"\s*([A-Za-z0-9_.\-]+)", requirement).group(1))
            if name not in have and name not in on_machine:
                missing.append(f"{wheel.name} needs {requirement.strip()}")
print(f"gpu_wheels: {len(wheels)} wheels, {total / 2**20:.1f} MiB in {dest}/")
if dupes:
    sys.exit(f"gpu_wheels: more than one version of {', '.join(sorted(dupes))}: keep one")
if missing:
    sys.exit("gpu_wheels: incomplete set:\n  " + "\n  ".join(missing))
if total > 40 * 2**20:
    sys.exit(f"gpu_wheels: {total / 2**20:.1f} MiB is over the 40 MiB budget")
print("gpu_wheels: complete (every requirement is in the set or on the GPU machine)")
PY
