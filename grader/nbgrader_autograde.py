"""One grading path: nbgrader's own `autograde` -- the `nbgrader autograde` command and the
Formgrader's autograde button, which both run nbgrader's Autograde converter -- grades through the
course's pipeline instead of nbgrader's (which would run the student's notebook unsandboxed and let
the tests be judged inside the student's kernel).

How: the course configuration (grader/course.py, apply_course_config) replaces the converter's
preprocessors. Its first pass, which reads the submission from submitted/<student>/<id>/, holds
only CoursePipeline: it runs `python -m grader autograde <id> <that submission> --lms nbgrader`
in a subprocess -- sandboxed kernel, trusted judge, late penalty, the single-writer merge into the
gradebook -- and hands nbgrader back the notebook the pipeline graded, which nbgrader then writes
where it would have written its own. The second pass (nbgrader's Execute, SaveAutoGrades, ...) is
empty. If the pipeline cannot grade (no sandbox, a notebook that times out, a student not on the
roster), the Formgrader shows why, and nothing runs unsandboxed.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from . import store

PIPELINE_TIMEOUT_S = 20 * 60     # the notebook's own budget is at most 10 minutes, plus the set-up
PROGRESS_BAR = re.compile(r"^\s*grading \S+:\s+\d+%")   # tqdm's lines: noise in the Formgrader's log


class CoursePipelineError(RuntimeError):
    pass


def route_autograde(c):
    """Point nbgrader's Autograde converter at the course pipeline (a traitlets Config)."""
    c.Autograde.sanitize_preprocessors = [f"{__name__}.CoursePipeline"]
    c.Autograde.autograde_preprocessors = []
    # the pipeline rewrites autograded notebooks when it re-grades: keep them writable
    c.Autograde.permissions = 644
    return c


class CoursePipeline(NbGraderPreprocessor):
    """Grades the submission nbgrader is converting with `python -m grader autograde`."""

    def preprocess(self, nb, resources):
        assignment, student = resources["nbgrader"]["assignment"], resources["nbgrader"]["student"]
        coursedir = self._coursedir()
        submitted = Path(coursedir.format_path(coursedir.submitted_directory, student, assignment))
        grading_dir = Path(coursedir.submitted_directory).parent   # the course's grading folder
        if Path(coursedir.autograded_directory).resolve() != store.autograded_dir(grading_dir).resolve():
            raise CoursePipelineError(
                f"the course pipeline writes course/autograded next to course/submitted, but this nbgrader "
                f"configuration autogrades into {coursedir.autograded_directory}: use the course's "
                "nbgrader_config.py (grader/course.py, apply_course_config)")
        with tempfile.TemporaryDirectory(prefix="nbgrader-route-") as tmp:
            # the nbgrader layout the pipeline reads: <student>/<assignment>/<assignment>.ipynb + timestamp.txt
            shutil.copytree(submitted, Path(tmp) / student / assignment,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
            command = [sys.executable, "-m", "grader", "autograde", assignment, tmp, "--lms", "nbgrader",
                       "--course-dir", str(grading_dir), "--workers", "1"]
            self.log.info("Grading %s for %s with the course's sandboxed pipeline: python -m grader autograde ...",
                          assignment, student)
            # run from the course's root, so it finds that course; with this grader package importable
            package_parent = str(Path(__file__).resolve().parent.parent)
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent,
                                                                            os.environ.get("PYTHONPATH")]))}
            try:
                run = subprocess.run(command, cwd=coursedir.root, env=env, capture_output=True, text=True,
                                     timeout=PIPELINE_TIMEOUT_S)
            except subprocess.TimeoutExpired as error:
                raise CoursePipelineError(f"the course pipeline did not finish in {PIPELINE_TIMEOUT_S} s") from error
        said = "\n".join(line for line in (run.stdout + run.stderr).strip().splitlines()
                         if not PROGRESS_BAR.match(line))
        for line in said.splitlines():
            self.log.info("  %s", line)
        graded = store.autograded_notebook(grading_dir, student, assignment)
        if run.returncode != 0 or not graded.exists():
            # nbgrader removed the old autograded copy before calling us: none there means not graded
            why = said.splitlines()[-12:] if said else [f"exit status {run.returncode}"]
            self.log.error("The course pipeline did not grade %s for %s:\n%s", assignment, student, "\n".join(why))
            raise CoursePipelineError(f"not graded by the course pipeline: {' / '.join(why[-4:])}")
        return nbformat.read(str(graded), as_version=nbformat.NO_CONVERT), resources

    def _coursedir(self):
        owner = self.parent
        while owner is not None and getattr(owner, "coursedir", None) is None:
            owner = getattr(owner, "parent", None)
        if owner is None:
            raise CoursePipelineError("CoursePipeline runs inside nbgrader's Autograde converter only")
        return owner.coursedir
