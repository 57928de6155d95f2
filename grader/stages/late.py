"""late: the submission time in the course gradebook, and nbgrader's late-submission penalty
applied by nbgrader's own AssignLatePenalties (after the merge: on the merged score, manual grades
included). The assignment's due date is set once per run (Batch.prepare, set_due_date).

The penalty plugin is nbgrader's configuration: in nbgrader_config.py
    c.AssignLatePenalties.plugin_class = "grader.stages.late.PerDayPenalty"   # or nbgrader's default
    c.LateSubmissionPlugin.penalty_method = "zero"                           # nbgrader's: none | zero
    c.PerDayPenalty.percent_per_day = 10
or for one run `autograde --late-penalty none|zero|10%/day` (kept in term.json, grader/term.py, so
that a later regrade and the export use it too). The default is none: late work is flagged, never
penalised unless the instructor says so. A student's extension (grader/term.py) moves their due
date here, as nbgrader's Submission.extension: the one given with `extension`, else the one the LMS's
records grant (Moodle's worksheet), each said in the student's row. The penalty recorded here is on the score known at
grading time; the export recomputes it on the whole total, written-answer points graded later
included."""
import datetime
import logging
import math
import re

import nbformat
from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float
from traitlets.config import Config

from .. import compat, term
from ..submission import Status

QUIET_LOG = logging.getLogger("grader.late")
QUIET_LOG.setLevel(logging.ERROR)
PENALTY_SECTIONS = ("AssignLatePenalties", "LateSubmissionPlugin", "PerDayPenalty")


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


class PerDayPenalty(LateSubmissionPlugin):
    """A share of the score per started day late: 10 %/day takes 10 % for 1 second to 24 hours
    late, 20 % up to 48 hours, ..., at most `max_percent`."""
    percent_per_day = Float(10.0, help="percent of the score taken per started day late").tag(config=True)
    max_percent = Float(100.0, help="the largest share taken, in percent").tag(config=True)

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        days = math.ceil(total_seconds_late / 86400)
        return score * min(self.max_percent, days * self.percent_per_day) / 100


def penalty_config(option=None, course_config=None):
    """The penalty settings: `option` (the CLI's none | zero | N%/day) when given, else the
    penalty sections of the course's nbgrader configuration, else none."""
    config = Config()
    if option is None:
        for section in PENALTY_SECTIONS:
            if course_config is not None and section in course_config:
                config[section] = course_config[section]
        return config
    text = option.strip().lower()
    per_day = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%\s*/\s*day", text)
    if text in ("none", "zero"):
        config.LateSubmissionPlugin.penalty_method = text
    elif per_day:
        config.AssignLatePenalties.plugin_class = PerDayPenalty
        config.PerDayPenalty.percent_per_day = float(per_day.group(1))
    else:
        raise ValueError(f"--late-penalty {option!r}: expected none, zero or a share per day like 10%/day")
    return config


def assignment_penalty(course, assignment_id):
    """The rule for an assignment: the one autograde was last given (term.json), else the course's
    nbgrader_config.py, else none."""
    stored = term.stored_penalty(course, assignment_id)
    return stored if stored is not None else penalty_config(course_config=course.late_penalty_config())


def penalty_points(config, student, score, seconds_late):
    """The points `config`'s late-submission plugin takes from `score` (the whole total)."""
    if not seconds_late or seconds_late <= 0:
        return 0.0
    from nbgrader.preprocessors import AssignLatePenalties
    assigner = AssignLatePenalties(config=config, log=QUIET_LOG)
    plugin = assigner.plugin_class(parent=assigner)
    return min(float(plugin.late_submission_penalty(student, score, seconds_late) or 0.0), score)


def reapply(course, assignment_id, student):
    """A changed extension applied at once: the gradebook's extension, lateness and penalty of one
    graded submission, and its saved outcome. Returns {due: the student's due date or None, graded,
    and for a graded one seconds_late, late, penalty_before, penalty}."""
    from nbgrader.api import MissingEntry

    from ..report import update_outcome
    with compat.gradebook(course.db_url) as gb:
        due = due_date(gb, assignment_id)
        granted = term.extension(course, assignment_id, student, due)
        try:
            submission = gb.find_submission(assignment_id, student)
        except MissingEntry:
            submission = None
        result = {"due": due + (granted or datetime.timedelta(0)) if due else None, "graded": submission is not None}
        if submission is None:
            return result
        submitted_at = submission.timestamp.replace(tzinfo=datetime.timezone.utc) if submission.timestamp else None
        before = float(submission.late_submission_penalty or 0)
    seconds_late, penalty = apply_late_penalty(assignment_id, student, course.db_url, submitted_at,
                                               assignment_penalty(course, assignment_id), extension=granted)
    late_now = None if seconds_late is None else seconds_late > 0
    result.update(seconds_late=seconds_late, late=late_now, penalty_before=before, penalty=penalty)
    update_outcome(course, assignment_id, student, late=late_now, seconds_late=seconds_late, penalty=penalty)
    return result


def describe_penalty(config):
    plugin = config.get("AssignLatePenalties", {}).get("plugin_class")
    if plugin in (PerDayPenalty, "grader.stages.late.PerDayPenalty"):
        section = config.get("PerDayPenalty", {})
        return f"{section.get('percent_per_day', 10.0):g}% per started day late"
    method = config.get("LateSubmissionPlugin", {}).get("penalty_method", "none")
    return {"none": "none (late work is flagged only)", "zero": "zero (late work scores 0)"}.get(
        method, f"{plugin or method}")


def naive_utc(when):
    """nbgrader stores naive UTC datetimes."""
    return when.astimezone(datetime.timezone.utc).replace(tzinfo=None) if when else None


def set_due_date(gradebook, assignment_id, due):
    gradebook.update_or_create_assignment(assignment_id, duedate=naive_utc(due))


def due_date(gradebook, assignment_id):
    """The assignment's due date in the gradebook (aware UTC), or None."""
    from nbgrader.api import MissingEntry
    try:
        due = gradebook.find_assignment(assignment_id).duedate
    except MissingEntry:
        return None
    return due.replace(tzinfo=datetime.timezone.utc) if due else None


def apply_late_penalty(assignment_id, student, db_url, submitted_at, config, extension=None):
    """Record the submission time and the student's extension (a timedelta past the due date, or
    None) and let nbgrader's AssignLatePenalties set the penalty; returns (seconds late or None when
    unknown, penalty)."""
    from nbgrader.preprocessors import AssignLatePenalties

    with compat.gradebook(db_url) as gb:
        submission = gb.find_submission(assignment_id, student)
        submission.timestamp = naive_utc(submitted_at)
        submission.extension = extension
        gb.db.commit()
        known = submission.timestamp is not None and submission.duedate is not None
        if not known or submission.total_seconds_late <= 0:
            # on time, or no time to judge by: what AssignLatePenalties does then (clear an earlier
            # penalty), without its second pass over the gradebook (about 0.05 CPU-s per submission)
            gb.find_submission_notebook(assignment_id, assignment_id, student).late_submission_penalty = None
            gb.db.commit()
            return (0.0 if known else None), 0.0
    resources = {"nbgrader": {"db_url": db_url, "assignment": assignment_id, "notebook": assignment_id,
                              "student": student}}
    # it reads and writes the gradebook only; the notebook it is handed passes through untouched
    AssignLatePenalties(config=config, log=QUIET_LOG).preprocess(nbformat.v4.new_notebook(), resources)
    with compat.gradebook(db_url) as gb:
        submission = gb.find_submission(assignment_id, student)
        return (submission.total_seconds_late if known else None), float(submission.late_submission_penalty or 0)
