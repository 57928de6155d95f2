"""One grading path: nbgrader's own `autograde` -- here its command line; the
Formgrader's button, which calls the same converter, is in tests/test_browser.py -- grades through
the course's sandboxed pipeline, configured by the course's nbgrader_config.py.

The submission tries to leave a file outside its sandbox: graded by nbgrader's own Execute it would
(the kernel runs with the grader's rights and sees the whole disk); in the sandbox it cannot.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_any_machine import path_without

from grader import cells
from grader.samples import perfect_submission
from grader.sandbox import detect_system, install_command
from grader.submission import Status
from support import COURSE
from support.lab import make_course_root, submit

AID = "a1_self_attention"


def course_root(tmp_path, proof):
    """The browser test's course root (the course's configuration), with alice's correct notebook
    collected; her first answer cell also tries to write `proof`. Returns (root, auto points)."""
    root = make_course_root(tmp_path)
    nb = perfect_submission(COURSE, AID)
    answer = next(cell for cell in nb.cells if cells.is_answer_cell(cell))
    answer.source += (f"\ntry:\n    open({str(proof)!r}, 'w').write('this kernel could write outside its sandbox')\n"
                      "except OSError:\n    pass\n")
    submit(root, AID, "alice", nb)
    return root, cells.max_auto_points(nb)


def nbgrader_autograde(root, env=None):
    return subprocess.run([sys.executable, "-m", "nbgrader", "autograde", AID], cwd=root, capture_output=True,
                          text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


def alice_auto_score(root):
    from grader import store
    with store.gradebook(f"sqlite:///{root / 'course' / 'gradebook.db'}") as gb:
        try:
            notebook = gb.find_submission_notebook(AID, AID, "alice")
        except Exception:  # noqa: BLE001 - MissingEntry: never graded
            return None
        scores = [g.auto_score for g in notebook.grades if g.auto_score is not None]
        return sum(scores) if scores else None


@pytest.mark.sandbox
@pytest.mark.kernel
def test_nbgrader_autograde_runs_the_course_pipeline(tmp_path):
    proof = tmp_path / "escaped.txt"
    root, points = course_root(tmp_path, proof)
    run = nbgrader_autograde(root)
    log = run.stdout + run.stderr
    assert run.returncode == 0, f"nbgrader autograde failed:\n{log[-4000:]}"
    assert "with the course's sandboxed pipeline" in log, f"nbgrader graded on its own:\n{log[-4000:]}"
    assert not proof.exists(), "the submission wrote outside a sandbox: it ran unsandboxed"
    assert alice_auto_score(root) == points, f"expected {points:g} auto points in the gradebook:\n{log[-3000:]}"
    outcomes = json.loads((root / "course" / "outcomes" / f"{AID}.json").read_text())
    assert outcomes["alice"]["status"] == Status.GRADED, outcomes["alice"]
    assert (root / "course" / "autograded" / "alice" / AID / f"{AID}.ipynb").exists()


def test_nbgrader_autograde_without_the_sandbox_grades_nothing(tmp_path):
    proof = tmp_path / "escaped.txt"
    root, _ = course_root(tmp_path, proof)
    run = nbgrader_autograde(root, env={"PATH": path_without(tmp_path, "bwrap")})
    log = run.stdout + run.stderr
    assert run.returncode != 0, f"nbgrader autograde succeeded without bubblewrap:\n{log[-3000:]}"
    fix = install_command(detect_system())
    assert "`bwrap` is not installed" in log and fix in log, \
        f"the log does not say why and how to fix it:\n{log[-3000:]}"
    assert not proof.exists(), "the submission ran unsandboxed"
    assert alice_auto_score(root) is None, "alice got auto scores without the sandbox"
    assert not (root / "course" / "autograded" / "alice" / AID / f"{AID}.ipynb").exists()


@pytest.mark.parametrize("setting", ["sanitize_preprocessors", "autograde_preprocessors"])
def test_the_course_configuration_replaces_nbgraders_execution(setting):
    """The repository's own nbgrader_config.py (what the Formgrader loads) routes autograde."""
    from traitlets.config.loader import PyFileConfigLoader
    config = PyFileConfigLoader("nbgrader_config.py", path=str(Path(__file__).resolve().parent.parent)).load_config()
    wanted = {"sanitize_preprocessors": ["grader.nbgrader_autograde.CoursePipeline"], "autograde_preprocessors": []}
    assert list(config.Autograde[setting]) == wanted[setting], dict(config.Autograde)
