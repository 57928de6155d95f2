"""One assignment's grading, one submission at a time: what a submission's grade is (Outcome),
and what every submission of a batch shares (Batch: the template gradebook, the release, the
trusted trace). Batch.grade runs the per-submission stages, in parallel across submissions;
Batch.merge is the single writer of the course gradebook. Used by autograde.py (threads) and
engine.py (Dask workers)."""
import datetime
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import notebook as nbtools
from .course import COURSE_DIR, RELEASE_DIR, gradebook_url
from .release import generate_release
from .sandbox import SandboxUnavailable, WarmKernels, check_available
from .stages.execute import WorkerServer, execute
from .stages.judge import judge_notebook
from .stages.late import apply_late_penalty, penalty_config, set_due_date
from .stages.merge import merge, record_not_graded
from .stages.sanitize import SanitizeError, sanitize
from .stages.score import build_autograded, score
from .stages.static import forbidden_uses
from .trace import solution_trace


@dataclass
class Graded:
    """What the merge needs from a graded submission: its own gradebook and autograded notebook."""
    db_url: str
    notebook: Path


# who a submission is in its own temporary gradebook (the merge files it under the real student)
TEMPLATE_STUDENT = "submission"

# what an outcome's status can be; only the first two are written into the gradebook
GRADED, NOT_GRADED, MISSING, NOT_ON_ROSTER, UNRECOGNISED = (
    "graded", "not graded", "missing", "not on the roster", "unrecognised file")


@dataclass
class Outcome:
    student: str
    status: str                       # one of the statuses above
    reason: str = ""
    score: float = 0.0
    max_score: float = 0.0
    failed: list = field(default_factory=list)     # grade ids of failed test cells
    notes: list = field(default_factory=list)
    seconds: float = 0.0
    submitted_at: str | None = None   # ISO time, when the download says
    late: bool | None = None          # None: unknown (no due date or no submission time)
    seconds_late: float | None = None
    penalty: float = 0.0              # points taken by the late-submission penalty

    @property
    def label(self):
        if self.status == GRADED:
            return "graded" + (" (" + "; ".join(self.notes) + ")" if self.notes else "")
        if self.status == NOT_GRADED:
            return f"not graded: {self.reason}"
        return f"{self.status}: {self.reason}" if self.reason else self.status

    @property
    def late_label(self):
        if not self.late:
            return "-" if self.late is None else "on time"
        when = f" {_duration(self.seconds_late)}" if self.seconds_late else ""
        return f"late{when}" + (f", -{self.penalty:g}" if self.penalty else "")


def _duration(seconds):
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


class Batch:
    """What every submission of one assignment shares: the template gradebook, the release,
    the trusted trace."""

    def __init__(self, assignment_id, course_dir=COURSE_DIR, cell_timeout=None, total_timeout=None,
                 sandboxed=True, due=None, late_penalty=None, warm=False):
        if sandboxed:
            check_available()   # refuse loudly rather than run student code with our rights
        self.sandboxed = sandboxed
        # warm kernels (sandbox.WarmKernels): torch and matplotlib imported once for the batch, not
        # once per student; worth its few seconds of start-up from the second submission on. And
        # each submission's worker (the process driving its kernel) forked from one that has
        # imported nbclient once. Both servers start while the release is generated.
        with ThreadPoolExecutor(max_workers=2) as pool:
            warm_kernels = pool.submit(_start_warm_kernels if sandboxed and warm else _none)
            workers = pool.submit(_start_worker_server if warm else _none)
            try:
                self._prepare(assignment_id, course_dir, cell_timeout, total_timeout, due, late_penalty)
            except BaseException:
                self.warm, self.workers = warm_kernels.result(), workers.result()
                self.close()
                raise
            self.warm, self.workers = warm_kernels.result(), workers.result()

    def _prepare(self, assignment_id, course_dir, cell_timeout, total_timeout, due, late_penalty):
        self.assignment_id = assignment_id
        self.course_dir = Path(course_dir)
        self.course_db = gradebook_url(self.course_dir)
        self.cell_timeout, self.total_timeout = cell_timeout, total_timeout
        self.scratch = Path(tempfile.mkdtemp(prefix=f"grade-{assignment_id}-"))
        self.template_db = self.scratch / "template.db"
        generate_release(assignment_id, self.scratch / "release", course_dir=self.scratch / "course",
                         db_url=f"sqlite:///{self.template_db}")
        from nbgrader.api import Gradebook
        with Gradebook(f"sqlite:///{self.template_db}") as gb:   # each copy holds one submission, made once here
            gb.update_or_create_student(TEMPLATE_STUDENT)
            gb.update_or_create_submission(assignment_id, TEMPLATE_STUDENT)
        # the course gradebook must know the assignment too (`release` may not have run here)
        if not _gradebook_has(self.course_db, assignment_id):
            generate_release(assignment_id, self.scratch / "release-course", course_dir=self.course_dir,
                             db_url=self.course_db)
        if due is not None:
            with Gradebook(self.course_db) as gb:
                set_due_date(gb, assignment_id, due)
        self.penalty_config = late_penalty if late_penalty is not None else penalty_config(
            course_config=_course_nbgrader_config())
        self.released = nbtools.read(nbtools.notebook_path(RELEASE_DIR, assignment_id))
        self.released_tests = {c.source.strip() for c in self.released.cells if nbtools.is_test_cell(c)}
        self.trace = solution_trace(assignment_id)
        self.max_score = nbtools.max_auto_points(self.released)

    def close(self):
        if self.warm is not None:
            self.warm.close()
        if self.workers is not None:
            self.workers.close()
        if getattr(self, "scratch", None) is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def grade(self, submission):
        """Everything but the merge, so that it can run in parallel: returns the outcome and
        what the merge needs (a Graded, or None when the submission could not be graded)."""
        started = time.time()
        outcome = Outcome(submission.student, GRADED, max_score=self.max_score,
                          submitted_at=submission.submitted_at.isoformat() if submission.submitted_at else None,
                          late=submission.lms_late)
        if submission.note:
            outcome.notes.append(submission.note)
        pending = None
        try:
            pending = self._grade(submission, outcome)
        except _NotGraded as reason:
            outcome.status, outcome.reason = "not graded", str(reason)
        except Exception as error:  # noqa: BLE001 - one submission must never stop the batch
            outcome.status, outcome.reason = "not graded", f"grader error: {type(error).__name__}: {error}"
        outcome.seconds = time.time() - started
        return outcome, pending

    def merge(self, outcome, pending):
        """The single writer: called for one submission at a time, in the main process. Then the
        submission time and the late penalty (on the merged score, manual grades included)."""
        if pending is None:
            record_not_graded(self.assignment_id, outcome.student, self.course_db)
            notebook = nbformat_new()
        else:
            merge(self.assignment_id, outcome.student, pending.db_url, self.course_db, pending.notebook,
                  self.course_dir / "autograded", temp_student=TEMPLATE_STUDENT)
            notebook = nbtools.read(pending.notebook)
        when = datetime.datetime.fromisoformat(outcome.submitted_at) if outcome.submitted_at else None
        seconds_late, outcome.penalty = apply_late_penalty(self.assignment_id, outcome.student, self.course_db,
                                                           when, notebook, self.penalty_config)
        if seconds_late is not None:
            outcome.seconds_late = seconds_late
            outcome.late = seconds_late > 0 or bool(outcome.late)

    def _grade(self, submission, outcome):
        aid, student = self.assignment_id, submission.student
        if submission.path is None:
            raise _NotGraded(submission.problem)
        try:
            nb = nbtools.read(submission.path)
        except ValueError as error:
            raise _NotGraded(str(error)) from error
        if not _belongs_to(nb, self.released):
            raise _NotGraded(f"this is not a {aid} notebook (none of its graded cells is there): "
                             "a different assignment submitted?")
        work = Path(tempfile.mkdtemp(prefix=f"{student}-", dir=self.scratch))
        db_url = f"sqlite:///{work / 'gradebook.db'}"
        # this submission's own gradebook: a copy of the template, where it is TEMPLATE_STUDENT's
        shutil.copyfile(self.template_db, work / "gradebook.db")
        try:
            sanitized, notes = sanitize(nb, aid, TEMPLATE_STUDENT, db_url, self.released)
        except SanitizeError as error:
            raise _NotGraded(str(error)) from error
        outcome.notes += notes
        kwargs = {k: v for k, v in (("cell_timeout", self.cell_timeout), ("total_timeout", self.total_timeout)) if v}
        run = execute(sanitized, work / "run", sandboxed=self.sandboxed, warm=self.warm, workers=self.workers,
                      **kwargs)
        if run.problem:
            raise _NotGraded(run.problem)
        if run.note:
            outcome.notes.append(run.note)
        # the student's own code; an unchanged copy of a released test cell (pasted again, duplicated)
        # is the course's code, and a visible test may compare with torch's built-in attention
        findings = [finding for c in sanitized.cells
                    if c.cell_type == "code" and not nbtools.is_test_cell(c) and not nbtools.is_locked(c)
                    and c.source.strip() not in self.released_tests
                    for finding in forbidden_uses(c.source)]
        verdicts = judge_notebook(self.trace, run.records, findings)
        graded = score(build_autograded(sanitized, run.notebook, verdicts), aid, TEMPLATE_STUDENT, db_url)
        import nbformat
        autograded_path = work / f"{aid}.ipynb"
        nbformat.write(graded, str(autograded_path))
        points = nbtools.test_points(sanitized)
        outcome.failed = [v.grade_id for v in verdicts if not v.passed]
        outcome.score = sum(points.get(v.grade_id, 0) for v in verdicts if v.passed)
        return Graded(db_url, autograded_path)


class _NotGraded(Exception):
    pass


def _start_warm_kernels():
    """A started WarmKernels, or None (with the reason on stderr) where this system cannot build its
    sandbox: then every kernel starts cold, in bubblewrap, as before."""
    try:
        return WarmKernels.start()
    except SandboxUnavailable as error:
        print(f"note: {error}; each kernel starts cold (bubblewrap) instead", file=sys.stderr)
        return None


def _none():
    return None


def _start_worker_server():
    try:
        return WorkerServer.start()
    except RuntimeError as error:
        print(f"note: {error}; each submission's worker starts from scratch instead", file=sys.stderr)
        return None


def nbformat_new():
    import nbformat
    return nbformat.v4.new_notebook()


def _course_nbgrader_config():
    """The course's nbgrader_config.py as nbgrader would load it (its late-penalty settings)."""
    from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

    from .course import REPO
    try:
        return PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    except ConfigFileNotFound:
        return None


def _gradebook_has(db_url, assignment_id):
    from nbgrader.api import Gradebook, MissingEntry
    if db_url.startswith("sqlite:///") and not Path(db_url.removeprefix("sqlite:///")).exists():
        return False
    with Gradebook(db_url) as gb:
        try:
            gb.find_assignment(assignment_id)
            return True
        except MissingEntry:
            return False


def _belongs_to(nb, released):
    wanted = {nbtools.grade_id(c) for c in released.cells if nbtools.grade_id(c)}
    present = {nbtools.grade_id(c) for c in nb.cells if nbtools.grade_id(c)}
    return bool(wanted & present)


