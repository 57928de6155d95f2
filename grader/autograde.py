"""`autograde ID SOURCE`: grade every submission of one assignment, each in isolation, and record
the results in the course gradebook (grader/pipeline.py states the stages).

Each submission gets its own working copy (only its notebook), its own kernel and its own
temporary gradebook (a copy of a template made from solutions/); only the RECORD stages touch
the course gradebook, one submission at a time. A broken submission becomes a row of the table,
never a crash.
"""
import sys

from . import pipeline
from .engine import Dask
from .submission import Engine, Options, Status


def autograde(course, assignment_id, source, options=None):
    """Grade every submission found in `source` (an LMS download, nbgrader's layout, a folder) as
    `options` say; returns every Submission record, the ones not graded included, in table order.
    Each worker thread drives one kernel in its own sandbox (or each Dask worker process); the
    results are recorded here, one at a time, as they arrive (pipeline.run)."""
    options = options or Options()

    def before_grading(intake):
        show_warnings(intake)               # before grading starts: the run may not be worth waiting for
        if options.student:
            only_student(intake, options.student)

    done = pipeline.run(course, assignment_id, source, options, strategy(options), after_intake=before_grading)
    return in_table_order(done.graded + done.intake.not_graded)


def in_table_order(submissions):
    """By student, those not on the roster or not recognised last."""
    return sorted(submissions, key=lambda s: (s.status in (Status.NOT_ON_ROSTER, Status.UNRECOGNISED), s.student))


def show_warnings(intake):
    for warning in intake.warnings:
        print(f"warning: {warning}", file=sys.stderr)


def strategy(options):
    """How the run grades its submissions: on Dask (--dask, --scheduler), else threads here."""
    return Dask(options) if options.engine is Engine.DASK else pipeline.Threads(options.parallel)


def only_student(intake, student):
    """Keep `student`'s submission only (by the id it is graded under, or the LMS's login): a regrade
    of one student leaves everyone else's grades and outcomes as they are."""
    mine = [s for s in intake.submissions if student in (s.student, s.login)]
    if not mine:
        if any(s.student == student for s in intake.missing):
            raise ValueError(f"{student} has no submission in {intake.source}")
        found = sorted(s.student for s in intake.submissions)
        raise ValueError(f"no submission of {student!r} in {intake.source}; it holds "
                         f"{', '.join(found[:12]) or 'none'}{' ...' if len(found) > 12 else ''}")
    intake.submissions, intake.missing, intake.strangers, intake.unrecognised = mine, [], [], []


def format_table(assignment_id, submissions):
    show_late = any(s.late is not None or s.time_unknown for s in submissions)
    rows = [("student", "score") + (("late",) if show_late else ()) + ("outcome", "failed tests")]
    for s in submissions:
        score = f"{s.score:g}/{s.max_score:g}" if s.status == Status.GRADED else "-"
        late = (s.late_label,) if show_late else ()
        rows.append((s.student, score) + late + (s.label, ", ".join(s.failed) or "-"))
    columns = len(rows[0]) - 1
    widths = [max(len(r[i]) for r in rows) for i in range(columns)]
    lines = [f"{assignment_id}"]
    for r in rows:
        lines.append("  ".join(r[i].ljust(widths[i]) for i in range(columns)) + "  " + r[-1])
    return "\n".join(lines)


def count_statuses(submissions):
    counts = {}
    for s in submissions:
        counts[str(s.status)] = counts.get(str(s.status), 0) + 1
    return counts
