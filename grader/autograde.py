"""`autograde ID SOURCE`: grade every submission in isolation, then merge.

Collect (the LMS download's names) -> identify (the roster) -> for each submission, in parallel:
sanitize -> execute (sandboxed kernel) -> judge -> score -> then, one at a time: merge into the
course gradebook with the submission time and nbgrader's late penalty.

Each submission gets its own working copy (only its notebook), its own kernel and its own
temporary gradebook (a copy of a template made from solutions/); only the merge stage touches
the course gradebook. A broken submission becomes an outcome in the table, never a crash.
"""
import datetime
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from . import notebook as nbtools
from .course import COURSE_DIR, RELEASE_DIR, gradebook_url
from .judge import judge_notebook
from .release import generate_release
from .sandbox import check_available
from .stages.collect import collect
from .stages.identify import describe, identify
from .stages.late import apply_late_penalty, penalty_config, set_due_date
from .stages.execute import execute
from .stages.merge import merge, record_not_graded
from .stages.sanitize import SanitizeError, sanitize
from .stages.score import build_autograded, score
from .static import forbidden_uses
from .trace import solution_trace


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
                 sandboxed=True, due=None, late_penalty=None):
        if sandboxed:
            check_available()   # refuse loudly rather than run student code with our rights
        self.sandboxed = sandboxed
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
        if due is not None:
            from nbgrader.api import Gradebook
            with Gradebook(self.course_db) as gb:
                set_due_date(gb, assignment_id, due)
        self.penalty_config = late_penalty if late_penalty is not None else penalty_config(
            course_config=_course_nbgrader_config())
        self.released = nbtools.read(nbtools.notebook_path(RELEASE_DIR, assignment_id))
        self.trace = solution_trace(assignment_id)
        self.max_score = nbtools.max_auto_points(self.released)

    def close(self):
        shutil.rmtree(self.scratch, ignore_errors=True)

    def grade(self, submission):
        """Everything but the merge, so that it can run in parallel: returns the outcome and
        what the merge needs (the submission's own gradebook and autograded notebook)."""
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
            submission_db, autograded_notebook = pending
            merge(self.assignment_id, outcome.student, submission_db, self.course_db, autograded_notebook,
                  self.course_dir / "autograded")
            notebook = nbtools.read(autograded_notebook)
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
        shutil.copyfile(self.template_db, work / "gradebook.db")
        from nbgrader.api import Gradebook
        with Gradebook(db_url) as gb:   # its autoflush warning is filtered in stages/merge.py
            gb.update_or_create_student(student)
            gb.update_or_create_submission(aid, student)
        try:
            sanitized, notes = sanitize(nb, aid, student, db_url, self.released)
        except SanitizeError as error:
            raise _NotGraded(str(error)) from error
        outcome.notes += notes
        kwargs = {k: v for k, v in (("cell_timeout", self.cell_timeout), ("total_timeout", self.total_timeout)) if v}
        run = execute(sanitized, work / "run", sandboxed=self.sandboxed, **kwargs)
        if run.problem:
            raise _NotGraded(run.problem)
        if run.note:
            outcome.notes.append(run.note)
        findings = [finding for c in sanitized.cells
                    if c.cell_type == "code" and not nbtools.is_test_cell(c) and not nbtools.is_locked(c)
                    for finding in forbidden_uses(c.source)]
        verdicts = judge_notebook(self.trace, run.records, findings)
        graded = score(build_autograded(sanitized, run.notebook, verdicts), aid, student, db_url)
        import nbformat
        autograded_path = work / f"{aid}.ipynb"
        nbformat.write(graded, str(autograded_path))
        points = {nbtools.grade_id(c): nbtools.points(c) for c in nbtools.test_cells(sanitized)}
        outcome.failed = [v.grade_id for v in verdicts if not v.passed]
        outcome.score = sum(points.get(v.grade_id, 0) for v in verdicts if v.passed)
        return db_url, autograded_path


class _NotGraded(Exception):
    pass


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


def autograde(assignment_id, source, course_dir=COURSE_DIR, progress=True, workers=None, sandboxed=True,
              engine="threads", scheduler=None, lms="auto", pattern=None, due=None, late_penalty=None,
              **timeouts):
    """Grade every submission found in `source` (an LMS download, nbgrader's layout, a folder);
    `workers` submissions at a time (default: the core count). Each worker thread drives one
    kernel in its own sandbox; merges happen here, one at a time, as results arrive. `due`: an
    aware datetime to store as the assignment's due date; `late_penalty`: a Config from
    stages.late.penalty_config (default: the course's nbgrader_config.py)."""
    from .roster import load_roster
    intake = collect(assignment_id, source, lms=lms, pattern=pattern)
    identified = identify(intake.submissions, load_roster(course_dir))
    submissions = identified.submissions
    batch = Batch(assignment_id, course_dir=course_dir, sandboxed=sandboxed, due=due, late_penalty=late_penalty,
                  **timeouts)
    workers = max(1, workers or os.cpu_count() or 1)
    outcomes = []
    try:
        with tqdm(total=len(submissions), desc=f"grading {assignment_id}", unit="student",
                  disable=not progress) as bar:
            if engine == "dask":
                from .engine import grade_with_dask
                outcomes = grade_with_dask(batch, submissions, scheduler=scheduler, workers=workers, progress=bar)
            else:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    futures = [pool.submit(batch.grade, submission) for submission in submissions]
                    for future in as_completed(futures):
                        outcome, pending = future.result()
                        batch.merge(outcome, pending)
                        outcomes.append(outcome)
                        bar.update(1)
    finally:
        batch.close()
    outcomes += _unmerged_outcomes(intake, identified, batch.max_score)
    save_outcomes(assignment_id, outcomes, course_dir)
    return sorted(outcomes, key=lambda o: (o.status in (NOT_ON_ROSTER, UNRECOGNISED), o.student))


def _unmerged_outcomes(intake, identified, max_score):
    """What the gradebook does not get: roster students who sent nothing, people not on the
    roster, files whose names the chosen LMS preset could not read."""
    outcomes = [Outcome(s.id, MISSING, reason=f"{s.display}: no submission", max_score=max_score)
                for s in identified.missing]
    outcomes += [Outcome(describe(s), NOT_ON_ROSTER, reason=why, max_score=max_score)
                 for s, why in identified.strangers]
    outcomes += [Outcome(path, UNRECOGNISED, max_score=max_score,
                         reason=f"not read as a {intake.preset} file name (use --lms or --pattern)")
                 for path in intake.unrecognised]
    return outcomes


def save_outcomes(assignment_id, outcomes, course_dir=COURSE_DIR):
    """Keep each student's latest outcome (the gradebook has scores, not reasons) for the report."""
    path = Path(course_dir) / "outcomes" / f"{assignment_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(path.read_text()) if path.exists() else {}
    known.update({o.student: {**asdict(o), "label": o.label} for o in outcomes})
    path.write_text(json.dumps(known, indent=1, sort_keys=True))


def format_table(assignment_id, outcomes):
    show_late = any(o.late is not None for o in outcomes)
    rows = [("student", "score") + (("late",) if show_late else ()) + ("outcome", "failed tests")]
    for o in outcomes:
        score = f"{o.score:g}/{o.max_score:g}" if o.status == GRADED else "-"
        late = (o.late_label,) if show_late else ()
        rows.append((o.student, score) + late + (o.label, ", ".join(o.failed) or "-"))
    columns = len(rows[0]) - 1
    widths = [max(len(r[i]) for r in rows) for i in range(columns)]
    lines = [f"{assignment_id}"]
    for r in rows:
        lines.append("  ".join(r[i].ljust(widths[i]) for i in range(columns)) + "  " + r[-1])
    return "\n".join(lines)
