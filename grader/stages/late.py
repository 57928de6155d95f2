"""late: the submission time in the course gradebook, and the assignment's late-penalty rule
(grader/late_policy.py) applied by nbgrader's own AssignLatePenalties (after the merge: on the merged
score, manual grades included). The assignment's due date is set once per run (pipeline.prepare).
A student's extension (grader/term.py) moves their due date here, as nbgrader's
Submission.extension: the one given with `extension`, else the one the LMS's records grant
(Moodle's worksheet), each said in the student's row. The penalty recorded here is on the score
known at grading time; the export recomputes it on the whole total, written-answer points graded
later included."""
import datetime

from .. import term
from ..late_policy import PerDayPenalty, apply_late_penalty
from ..submission import Status

# nbgrader_config.py files written before the rules had a module of their own name the plugin here
__all__ = ["PerDayPenalty", "late"]


def late(submission, batch):
    """Record when the submission came and let nbgrader set its penalty; `submission.late`: late by
    the student's due date (the assignment's, moved by an extension) when the time is known, else by
    the LMS's own flag (shown, never penalised), None when nobody can tell. With a due date but no
    time a submission is "time unknown": never late by a guess."""
    submission.late = submission.lms_late
    submission.time_unknown = batch.due is not None and submission.submitted_at is None
    if submission.status not in (Status.GRADED, Status.NOT_GRADED):
        return submission
    granted = _extension(submission, batch)
    seconds_late, submission.penalty = apply_late_penalty(batch.assignment_id, submission.student, batch.course_db,
                                                          submission.submitted_at, batch.penalty_config,
                                                          extension=granted)
    if seconds_late is not None:
        submission.seconds_late = seconds_late
        submission.late = seconds_late > 0     # the LMS's flag knows nothing of an extension given here
    return submission


def _extension(submission, batch):
    """The student's extension past the due date: the one given here, else the LMS's (kept in
    term.json for the export and for `extension`), with a note saying which applies."""
    course, aid, student = batch.course, batch.assignment_id, submission.student
    if submission.lms_records_read:
        term.remember_lms_extension(course, aid, student, submission.lms_extension)
    own, in_lms = term.given_here(course, aid, student), term.lms_extension(course, aid, student)
    if in_lms is not None and own is not None:
        submission.note(f"extension given here ({_shown_extension(own)}) takes precedence over the LMS's "
                        f"(until {_shown(in_lms)})")
    elif in_lms is not None:
        submission.note(f"extension in the LMS: due {_shown(in_lms)}")
    return term.extension(course, aid, student, batch.due)


def _shown_extension(granted):
    return f"{granted['days']:g} day{'' if granted['days'] == 1 else 's'}" if "days" in granted else \
        f"until {_shown(datetime.datetime.fromisoformat(granted['until']))}"


def _shown(when):
    return when.astimezone().strftime("%Y-%m-%d %H:%M")
