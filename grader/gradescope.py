"""`gradescope ID --output ZIP`: a Gradescope autograder for one assignment, and the grading that runs
inside it (`python -m grader.gradescope grade ID --root /autograder`, started by run_autograder).

Gradescope's contract, as its autograder specification states it
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): the zip holds setup.sh (run once, as
root, when the Ubuntu 22.04 image is built) and run_autograder (an executable with a #! line) at its
root; it is unpacked into /autograder/source and run_autograder is copied to /autograder/run_autograder;
for each submission the student's files are in /autograder/submission and run_autograder must write
/autograder/results/results.json: {"score", "execution_time", "output", "visibility",
"stdout_visibility", "tests": [{"name", "score", "max_score", "status", "output", "visibility"}]},
visibility one of "visible", "hidden", "after_due_date", "after_published". run_autograder's stdout
is shown to instructors only.

The grading is this course's pipeline (grader/pipeline.py: sanitize, execute, judge, repair, score) on
the one notebook, so a student gets the points and the failure messages `autograde` and the HTML feedback
give, never the hidden test source. Where the sandbox (bubblewrap) cannot be built, which is usual
inside Gradescope's Docker container, the kernel runs as an unprivileged user instead
(grader/runtime/as_kernel_user.py): see docs/gradescope.md for what that does and does not protect.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path

from . import cells, labs
from .course import PACKAGE_REPO, Course, is_course_root

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
VENV = "/opt/grader-venv"                         # setup.sh makes it; run_autograder uses it
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"   # CPU wheels: no CUDA packages in the image
KERNEL_UID = KERNEL_GID = 65534                   # nobody: the kernel's user where there is no sandbox
REQUIREMENTS = ("requirements.txt", "constraints.txt")
AS_KERNEL_USER = Path(__file__).resolve().parent / "runtime" / "as_kernel_user.py"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)                  # every entry's time: the same course gives the same zip
# the notebook's whole budget: results.json comes well within Gradescope's default 10-minute limit on a
# run (a kernel stuck past it is stopped and the submission reported "not graded", with the reason)
NOTEBOOK_BUDGET_S = 480


class GradescopeError(RuntimeError):
    """The autograder cannot be built as asked; the message says what was expected."""


# ---- building the zip ----

def _requirement_file(course, name):
    for folder in (course.root, PACKAGE_REPO):
        if (folder / name).is_file():
            return folder / name
    raise GradescopeError(f"no {name} in {course.root} or {PACKAGE_REPO}: the autograder installs the course's "
                          "pinned requirements (requirements.txt) held by constraints.txt")


def torch_pin(course):
    """The `torch==X` line of the course's constraints.txt (what setup.sh installs from the CPU index)."""
    path = _requirement_file(course, "constraints.txt")
    pins = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    torch = [pin for pin in pins if pin.replace(" ", "").startswith("torch==")]
    if not torch:
        raise GradescopeError(f"{path} pins no torch version (expected a line like torch==2.13.0): the "
                              "autograder must install the torch the course was tested with")
    return torch[0].replace(" ", "")


def setup_script(course):
    pin = torch_pin(course)
    return f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu 22.04): Python 3.11
# in a virtual environment ({VENV}), torch from PyTorch's CPU wheel index (no CUDA packages), then the
# course's pinned requirements; bubblewrap, the grading sandbox, which run_autograder uses wherever the
# container lets it create namespaces. Written by `python -m grader gradescope`.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SOURCE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
apt-get update
apt-get install -y --no-install-recommends ca-certificates bubblewrap util-linux
if ! apt-get install -y --no-install-recommends python3.11 python3.11-venv; then
    apt-get install -y --no-install-recommends software-properties-common
    add-apt-repository -y ppa:deadsnakes/ppa
    apt-get update
    apt-get install -y --no-install-recommends python3.11 python3.11-venv
fi
python3.11 -m venv {VENV}
{VENV}/bin/python -m pip install --upgrade pip
{VENV}/bin/python -m pip install --index-url {TORCH_INDEX} {pin}
{VENV}/bin/python -m pip install -r "$SOURCE/requirements.txt" -c "$SOURCE/constraints.txt"
# the image must hold the CPU build of the pinned torch and everything grading imports
{VENV}/bin/python -c "import torch, nbgrader, nbclient, ipykernel, matplotlib; \\
assert torch.__version__.split('+')[0] == '{pin.split('==')[1]}', torch.__version__; \\
assert torch.version.cuda is None, 'a CUDA build of torch was installed'; print('torch', torch.__version__)"
"""


def run_script(assignment_id, hidden_visibility):
    return f"""#!/usr/bin/env bash
# Gradescope runs this for every submission: it grades the notebook in $ROOT/submission with the
# course's pipeline and writes $ROOT/results/results.json (always, even when the grader cannot start).
# AUTOGRADER_ROOT replaces /autograder and GRADER_PYTHON the grading environment's Python, so that the
# autograder can be run anywhere. Written by `python -m grader gradescope`.
set -u
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SOURCE="$ROOT/source"
RESULTS="$ROOT/results/results.json"
PYTHON="${{GRADER_PYTHON:-{VENV}/bin/python}}"
if [ -z "${{GRADER_PYTHON:-}}" ] && [ ! -x "$PYTHON" ]; then PYTHON=python3; fi
mkdir -p "$ROOT/results" && rm -f "$RESULTS"
# what root creates from here on is root's alone; the hidden tests and the reference solution too
umask 077
chmod -R go-rwx "$SOURCE"
cd "$SOURCE" || exit 1
"$PYTHON" -m grader.gradescope grade {assignment_id} --root "$ROOT" --hidden-visibility {hidden_visibility}
status=$?
if [ ! -s "$RESULTS" ]; then
    echo "run_autograder: the grader ($PYTHON) exited with status $status without writing $RESULTS"
    printf '%s\\n' '{{"score": 0.0, "output": "The autograder could not start, so this submission was not graded. \
It is not your notebook: your instructor can see why in the autograder output.", "tests": []}}' > "$RESULTS" || exit 1
    chmod 644 "$RESULTS"
fi
exit 0
"""


def autograder_files(course, assignment_id, hidden_visibility="after_published"):
    """[(name in the zip, a file's Path or text, executable)] of the autograder."""
    if hidden_visibility not in VISIBILITIES:
        raise GradescopeError(f"hidden-test visibility must be one of {', '.join(VISIBILITIES)}, "
                              f"not {hidden_visibility!r}")
    release = course.release_notebook(assignment_id)
    if not release.is_file():
        raise GradescopeError(f"no release notebook {release}: the autograder needs assignments/{assignment_id}/ "
                              f"(run `python -m grader release {assignment_id}` first)")
    if not course.source_notebook(assignment_id).is_file():
        raise GradescopeError(f"no source notebook {course.source_notebook(assignment_id)}")
    files = [("setup.sh", setup_script(course), True),
             ("run_autograder", run_script(assignment_id, hidden_visibility), True)]
    files += [(name, _requirement_file(course, name), False) for name in REQUIREMENTS]
    files.append(("nbgrader_config.py", course.root / "nbgrader_config.py", False))
    if labs.is_lab(course, assignment_id):   # the repair stage reads the lab's bugs from its catalogue
        catalogue = course.mutants_dir / f"{labs.debugged_assignment(course, assignment_id)}.py"
        files.append((catalogue.relative_to(course.root).as_posix(), catalogue, False))
    package = Path(__file__).resolve().parent
    for folder, root in ((package, package.parent), (course.source_dir / assignment_id, course.root),
                         (course.release_dir / assignment_id, course.root)):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and ".ipynb_checkpoints" not in path.parts \
                    and path.suffix != ".pyc":
                files.append((path.relative_to(root).as_posix(), path, False))
    return files


def build_zip(course, assignment_id, output, hidden_visibility="after_published"):
    """Write the autograder zip; returns (its path, the number of files in it)."""
    output = Path(output).expanduser()
    if output.is_dir():
        raise GradescopeError(f"{output} is a folder: name the zip to write, e.g. {output / (assignment_id + '.zip')}")
    if not output.parent.is_dir():
        raise GradescopeError(f"the folder {output.parent} does not exist: create it, or name a zip in an "
                              "existing folder")
    files = autograder_files(course, assignment_id, hidden_visibility)
    partial = output.with_name(output.name + ".part")
    try:
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, content, executable in files:
                entry = zipfile.ZipInfo(name, ZIP_TIME)
                entry.external_attr = (0o100755 if executable else 0o100644) << 16
                entry.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(entry, content if isinstance(content, str) else content.read_bytes())
        os.replace(partial, output)
    except OSError as error:
        try:
            partial.unlink(missing_ok=True)
        except OSError:
            pass
        raise GradescopeError(f"cannot write {output}: {error.strerror or error} (a folder you can write to, "
                              "with room for a few MB, is needed)") from None
    return output, len(files)


# ---- grading one submission, inside the autograder ----

def find_notebook(folder, assignment_id):
    """(the notebook to grade, None) or (None, why there is none): <ID>.ipynb where there are several.
    A notebook that is a link, or lies in a linked folder, is never read (grader/safe_files.py)."""
    from .safe_files import link_reason
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink()) if folder.is_dir() else []
    candidates = [p for p in files if p.suffix == ".ipynb" and ".ipynb_checkpoints" not in p.parts
                  and not any(part.startswith("__MACOSX") for part in p.parts)]
    refused = [why for why in (link_reason(p, folder) for p in candidates) if why]
    notebooks = [p for p in candidates if link_reason(p, folder) is None]
    expected = f"{assignment_id}.ipynb"
    if not notebooks and refused:
        return None, f"Your notebook could not be graded: {'; '.join(refused[:3])}."
    if not notebooks:
        found = ", ".join(p.relative_to(folder).as_posix() for p in files[:10]) or "no files at all"
        return None, (f"No notebook in your submission: expected {expected} (the assignment's notebook, saved "
                      f"from Jupyter), but found {found}. Submit the .ipynb file itself.")
    named = [p for p in notebooks if p.name == expected]
    if named:
        return min(named, key=lambda p: len(p.parts)), None
    if len(notebooks) == 1:
        return notebooks[0], None
    names = ", ".join(p.relative_to(folder).as_posix() for p in notebooks[:10])
    return None, (f"Several notebooks and none named {expected} ({names}): submit only your {expected}, or "
                  "rename the one to grade to that name.")


@dataclass
class Isolation:
    """How the student's kernel is kept from the grader: `sandbox` (bubblewrap), `kernel user` (no
    sandbox here; the kernel runs as an unprivileged user), or `none` (the kernel has the grader's rights)."""
    mode: str
    detail: str

    @property
    def sandboxed(self):
        return self.mode == "sandbox"


def choose_isolation(course, assignment_id):
    from .sandbox import unavailable_reason
    reason = unavailable_reason()
    if reason is None:
        return Isolation("sandbox", "bubblewrap sandbox: the kernel sees no course files and has no network")
    if os.geteuid() != 0:
        return Isolation("none", f"no sandbox ({reason}) and not running as root, so the kernel cannot run as "
                                 "another user: student code can read the hidden tests")
    problem = probe_kernel_user(course.source_notebook(assignment_id))
    if problem:
        return Isolation("none", f"no sandbox ({reason}), and the kernel cannot run as uid {KERNEL_UID}: {problem}; "
                                 "student code runs as root and can read the hidden tests")
    return Isolation("kernel user", f"no sandbox ({reason}); the kernel runs as uid {KERNEL_UID}, which cannot "
                                    "read the hidden tests or write the results, but has the network")


def probe_kernel_user(secret):
    """None if a process started as the kernel's user runs this Python and cannot read `secret` (a file
    of the hidden tests); else what went wrong."""
    code = ("import sys, ipykernel\ntry:\n    open(sys.argv[1]).close()\nexcept PermissionError:\n"
            "    print('denied')\nelse:\n    print('readable')\n")
    with tempfile.TemporaryDirectory(prefix="grader-probe-") as top:
        workdir = Path(top) / "kernel"
        workdir.mkdir()
        try:
            result = subprocess.run(kernel_user_argv(top, [sys.executable, "-I", "-c", code, str(secret)]),
                                    cwd=workdir, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"the probe did not run ({error})"
    said = result.stdout.strip()
    if said == "denied":
        return None
    if said == "readable":
        return f"that user can read {secret} (make the course files root's alone: chmod -R go-rwx)"
    last = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
    return f"the probe failed ({last[:200]})"


def kernel_user_argv(top, command):
    from dataclasses import asdict

    from .sandbox import Limits
    limits = {k: v for k, v in asdict(Limits()).items() if k in ("memory_bytes", "cpu_seconds", "file_bytes",
                                                                 "open_files")}
    return [sys.executable, "-I", "-S", str(AS_KERNEL_USER), str(KERNEL_UID), str(KERNEL_GID), str(top),
            json.dumps(limits), "--", *command]


def install_kernel_user_spec(folder, top):
    """Make `python3`, the kernel an unsandboxed grading run starts, the kernel as KERNEL_UID: a kernelspec
    in a Jupyter data folder of this process's own, found before the environment's (jupyter_core) while
    kernel_user_environment(folder) is set."""
    spec = Path(folder) / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    argv = kernel_user_argv(top, [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Python 3 (kernel user)",
                                                  "language": "python"}))


def kernel_user_environment(folder):
    """The environment that makes jupyter_client find install_kernel_user_spec's kernel in `folder`."""
    return {"JUPYTER_DATA_DIR": str(folder), "JUPYTER_PREFER_ENV_PATH": "0"}


def hidden_test_ids(source_nb):
    return {cells.grade_id(c) for c in cells.test_cells(source_nb) if "BEGIN HIDDEN TESTS" in c.source}


def grade_submission(course, assignment_id, submission_dir, hidden_visibility="after_published"):
    """The results.json contents for the notebook in `submission_dir`. The pipeline (torch, nbgrader: a few
    CPU-seconds) is imported only once there is a notebook to grade."""
    source = cells.read(course.source_notebook(assignment_id))
    points, hidden = cells.test_points(source), hidden_test_ids(source)
    notebook, problem = find_notebook(submission_dir, assignment_id)
    if problem is None:
        try:    # what the sanitize stage would say, before the assignment is prepared (about 10 s)
            cells.read(notebook)
        except ValueError as error:
            problem = f"Your notebook could not be graded: {error}."
    if problem:
        return not_graded_results(assignment_id, points, hidden, problem, hidden_visibility)
    from . import pipeline
    from .inprocess import environment
    from .submission import Options, Status, Submission

    isolation = choose_isolation(course, assignment_id)
    print(f"isolation: {isolation.mode}: {isolation.detail}")
    if isolation.mode == "none":
        print("WARNING: this submission is graded without protection from student code", flush=True)
    print(f"grading {notebook.relative_to(submission_dir)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gradescope-") as scratch:
        jupyter = Path(scratch) / "jupyter"
        kernel_user = isolation.mode == "kernel user"
        options = Options(sandboxed=isolation.sandboxed, progress=False, workers=1, total_timeout=NOTEBOOK_BUDGET_S)
        with environment(**(kernel_user_environment(jupyter) if kernel_user else {})):
            done = pipeline.run(course.with_grading_dir(Path(scratch) / "course"), assignment_id,
                                pipeline.given(Submission("student", notebook, login="student", preset="gradescope")),
                                options, pipeline.Serial(), recording=False,
                                before_prepare=(lambda batch: install_kernel_user_spec(jupyter, batch.scratch))
                                if kernel_user else None)
    [submission] = done.graded
    print(f"{submission.label}; {submission.score:g}/{submission.max_score:g}; failed: "
          f"{', '.join(submission.failed) or '-'} ({submission.seconds:.1f} s)")
    if submission.status != Status.GRADED:
        return not_graded_results(assignment_id, points, hidden, f"Your notebook could not be graded: "
                                  f"{submission.reason}.", hidden_visibility)
    return graded_results(assignment_id, points, hidden, submission.verdicts, submission.notes, hidden_visibility)


def _test(grade_id, score, max_score, output, hidden, hidden_visibility):
    return {"name": grade_id, "score": float(score), "max_score": float(max_score),
            "status": "passed" if score == max_score and max_score > 0 else "failed", "output": output,
            "visibility": hidden_visibility if grade_id in hidden else "visible"}


def graded_results(assignment_id, points, hidden, verdicts, notes=(), hidden_visibility="after_published"):
    """One test per test cell (name: its grade id), with the judge's message (what the HTML feedback
    shows) for a failure; the score is their sum."""
    by_id = {v.grade_id: v for v in verdicts}
    tests = []
    for gid, worth in points.items():
        verdict = by_id.get(gid)
        if verdict is not None and verdict.passed:
            tests.append(_test(gid, worth, worth, f"passed ({verdict.checks_total} checks)", hidden,
                               hidden_visibility))
        else:
            message = verdict.message if verdict is not None else "this test did not run"
            tests.append(_test(gid, 0, worth, f"failed: {message}", hidden, hidden_visibility))
    score = sum(t["score"] for t in tests)
    later = sum(gid in hidden for gid in points) if hidden_visibility != "visible" else 0
    lines = [f"{assignment_id}: {score:g} of {sum(points.values()):g} points."]
    if later:
        when = {"hidden": "are not shown to students", "after_due_date": "are shown after the due date",
                "after_published": "are shown once grades are published"}[hidden_visibility]
        lines.append(f"{later} of the {len(points)} tests hold hidden checks; their results {when}.")
    lines += [f"Note: {note}" for note in notes]
    return {"score": score, "output": "\n".join(lines), "visibility": "visible", "stdout_visibility": "hidden",
            "tests": tests}


def not_graded_results(assignment_id, points, hidden, reason, hidden_visibility="after_published"):
    tests = [_test(gid, 0, worth, "not graded: the notebook could not be graded (see the message above)", hidden,
                   hidden_visibility) for gid, worth in points.items()]
    return {"score": 0.0, "output": f"{assignment_id}: 0 of {sum(points.values()):g} points. {reason}",
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}


def write_results(path, results):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    partial.write_text(json.dumps(results, indent=2))
    os.chmod(partial, 0o644)
    os.replace(partial, path)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m grader.gradescope",
                                     description="Grade the submission of a Gradescope autograder run.")
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("grade", help="grade ROOT/submission/*.ipynb into ROOT/results/results.json")
    p.add_argument("id")
    p.add_argument("--root", default=os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    p.add_argument("--hidden-visibility", default="after_published", choices=VISIBILITIES)
    args = parser.parse_args(argv)
    os.umask(0o077)
    root, started = Path(args.root), time.time()
    try:
        if not is_course_root(root / "source"):
            raise GradescopeError(f"{root / 'source'} holds no course (nbgrader_config.py and solutions/)")
        course = Course(root / "source")
        results = grade_submission(course, args.id, root / "submission", args.hidden_visibility)
    except Exception:  # noqa: BLE001 - the student gets a results.json whatever happens; the instructor the trace
        traceback.print_exc(file=sys.stdout)
        results = {"score": 0.0, "output": "The autograder failed while grading this submission (an error in the "
                   "grader, not in your notebook); your instructor can see why in the autograder output.",
                   "tests": []}
    results["execution_time"] = round(time.time() - started)
    write_results(root / "results" / "results.json", results)
    print(f"results: {results['score']:g} points in {root / 'results' / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
