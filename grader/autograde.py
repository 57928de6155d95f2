"""`autograde ID SOURCE`: grade every submission of one assignment, each in isolation, and record
the results in the course gradebook (grader/pipeline.py states the stages).

Each submission gets its own working copy (only its notebook), its own kernel and its own
temporary gradebook (a copy of a template made from solutions/); only the RECORD stages touch
the course gradebook, one submission at a time. A broken submission becomes a row of the table,
never a crash.
"""
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed

from tqdm.auto import tqdm

from . import pipeline, store
from .engine import grade_with_dask
from .submission import Engine, Options, Status


def autograde(course, assignment_id, source, options=None):
    """Grade every submission found in `source` (an LMS download, nbgrader's layout, a folder) as
    `options` say; returns every Submission record, the ones not graded included, in table order.
    Each worker thread drives one kernel in its own sandbox; the results are recorded here, one at
    a time, as they arrive."""
    options = options or Options()
    with pipeline.Batch(course, assignment_id, options) as batch:
        intake = pipeline.take_in(source, batch)
        for warning in intake.warnings:      # before grading starts: the run may not be worth waiting for
            print(f"warning: {warning}", file=sys.stderr)
        if options.student:
            only_student(intake, options.student)
        submissions = intake.submissions
        batch.prepare(servers=len(submissions) > 1 and options.engine is Engine.THREADS)
        done = []
        with tqdm(total=len(submissions), desc=f"grading {assignment_id}", unit="student",
                  disable=not options.progress) as bar:
            for submission in _graded(batch, submissions):
                done.append(pipeline.record(submission, batch))
                bar.update(1)
        for submission in intake.not_graded:
            submission.max_score = batch.max_score
    everyone = done + intake.not_graded
    store.save_outcomes(course, assignment_id, everyone)
    return sorted(everyone, key=lambda s: (s.status in (Status.NOT_ON_ROSTER, Status.UNRECOGNISED), s.student))


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


def _graded(batch, submissions):
    """Each submission through the GRADE stages, `batch.options.parallel` at a time, as they finish."""
    if batch.options.engine is Engine.DASK:
        yield from grade_with_dask(batch, submissions)
        return
    with ThreadPoolExecutor(max_workers=batch.options.parallel) as pool:
        futures = [pool.submit(pipeline.grade, submission, batch) for submission in submissions]
        for future in as_completed(futures):
            yield future.result()


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
