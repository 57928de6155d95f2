"""`autograde ID SUBMISSIONS`: grade every submission in isolation, then merge.

Each submission gets its own working copy (only its notebook), its own kernel and its own
temporary gradebook (a copy of a template made from solutions/); only the merge stage touches
the course gradebook. A broken submission becomes an outcome in the table, never a crash.
"""
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from . import notebook as nbtools
from .course import COURSE_DIR, RELEASE_DIR, gradebook_url
from .judge import judge_notebook
from .release import generate_release
from .stages.collect import collect
from .stages.execute import execute
from .stages.merge import merge, record_not_graded
from .stages.sanitize import SanitizeError, sanitize
from .stages.score import build_autograded, score
from .static import forbidden_uses
from .trace import solution_trace


@dataclass
class Outcome:
    student: str
    status: str                       # "graded" or "not graded"
    reason: str = ""
    score: float = 0.0
    max_score: float = 0.0
    failed: list = field(default_factory=list)     # grade ids of failed test cells
    notes: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def label(self):
        if self.status == "graded":
            return "graded" + (" (" + "; ".join(self.notes) + ")" if self.notes else "")
        return f"not graded: {self.reason}"


class Batch:
    """What every submission of one assignment shares: the template gradebook, the release,
    the trusted trace."""

    def __init__(self, assignment_id, course_dir=COURSE_DIR, cell_timeout=None, total_timeout=None):
        self.assignment_id = assignment_id
        self.course_dir = Path(course_dir)
        self.course_db = gradebook_url(self.course_dir)
        self.cell_timeout, self.total_timeout = cell_timeout, total_timeout
        self.scratch = Path(tempfile.mkdtemp(prefix=f"grade-{assignment_id}-"))
        self.template_db = self.scratch / "template.db"
        generate_release(assignment_id, self.scratch / "release", course_dir=self.scratch / "course",
                         db_url=f"sqlite:///{self.template_db}")
        # the course gradebook must know the assignment too (`release` may not have run here)
        if not _gradebook_has(self.course_db, assignment_id):
            generate_release(assignment_id, self.scratch / "release-course", course_dir=self.course_dir,
                             db_url=self.course_db)
        self.released = nbtools.read(nbtools.notebook_path(RELEASE_DIR, assignment_id))
        self.trace = solution_trace(assignment_id)
        self.max_score = nbtools.max_auto_points(self.released)

    def close(self):
        shutil.rmtree(self.scratch, ignore_errors=True)

    def grade(self, submission):
        started = time.time()
        outcome = Outcome(submission.student, "graded", max_score=self.max_score)
        if submission.note:
            outcome.notes.append(submission.note)
        try:
            self._grade(submission, outcome)
        except _NotGraded as reason:
            outcome.status, outcome.reason = "not graded", str(reason)
            record_not_graded(self.assignment_id, submission.student, self.course_db)
        outcome.seconds = time.time() - started
        return outcome

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
        shutil.copyfile(self.template_db, work / "gradebook.db")
        from nbgrader.api import Gradebook
        with warnings.catch_warnings(), Gradebook(db_url) as gb:
            warnings.simplefilter("ignore")
            gb.update_or_create_student(student)
            gb.update_or_create_submission(aid, student)
        try:
            sanitized, notes = sanitize(nb, aid, student, db_url, self.released)
        except SanitizeError as error:
            raise _NotGraded(str(error)) from error
        outcome.notes += notes
        kwargs = {k: v for k, v in (("cell_timeout", self.cell_timeout), ("total_timeout", self.total_timeout)) if v}
        run = execute(sanitized, work / "kernel", **kwargs)
        if run.problem:
            raise _NotGraded(run.problem)
        if run.note:
            outcome.notes.append(run.note)
        student_code = "\n".join(c.source for c in sanitized.cells
                                 if c.cell_type == "code" and not nbtools.is_test_cell(c) and not nbtools.is_locked(c))
        verdicts = judge_notebook(self.trace, run.records, forbidden_uses(student_code))
        graded = score(build_autograded(sanitized, run.notebook, verdicts), aid, student, db_url)
        import nbformat
        autograded_path = work / f"{aid}.ipynb"
        nbformat.write(graded, str(autograded_path))
        merge(aid, student, db_url, self.course_db, autograded_path, self.course_dir / "autograded")
        points = {nbtools.grade_id(c): nbtools.points(c) for c in nbtools.test_cells(sanitized)}
        outcome.failed = [v.grade_id for v in verdicts if not v.passed]
        outcome.score = sum(points.get(v.grade_id, 0) for v in verdicts if v.passed)


class _NotGraded(Exception):
    pass


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


def autograde(assignment_id, source, course_dir=COURSE_DIR, progress=True, **timeouts):
    submissions = collect(assignment_id, source)
    batch = Batch(assignment_id, course_dir=course_dir, **timeouts)
    outcomes = []
    try:
        for submission in tqdm(submissions, desc=f"grading {assignment_id}", unit="student", disable=not progress):
            outcomes.append(batch.grade(submission))
    finally:
        batch.close()
    return outcomes


def format_table(assignment_id, outcomes):
    rows = [("student", "score", "outcome", "failed tests")]
    for o in outcomes:
        score = f"{o.score:g}/{o.max_score:g}" if o.status == "graded" else "-"
        rows.append((o.student, score, o.label, ", ".join(o.failed) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{assignment_id}"]
    for r in rows:
        lines.append("  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3])
    return "\n".join(lines)
