"""The late-penalty rules: which rule an assignment has, what it takes from a score, and applying
it to a submission in the gradebook. The late stage (grader/stages/late.py) applies them when a
submission is recorded; `extension` (reapply) when an extension changes; the export on the whole
total, written-answer points graded later included.

The rule is nbgrader's configuration: in nbgrader_config.py
    c.AssignLatePenalties.plugin_class = "grader.late_policy.PerDayPenalty"   # or nbgrader's default
    c.LateSubmissionPlugin.penalty_method = "zero"                           # nbgrader's: none | zero
    c.PerDayPenalty.percent_per_day = 10
or for one run `autograde --late-penalty none|zero|10%/day` (kept in term.json, grader/term.py, so
that a later regrade and the export use it too). The default is none: late work is flagged, never
penalised unless the instructor says so. (A configuration naming "grader.stages.late.PerDayPenalty"
names the same plugin.)"""
import datetime
import logging
import math
import re

import nbformat
from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float
from traitlets.config import Config

from . import store, term

QUIET_LOG = logging.getLogger("grader.late")
QUIET_LOG.setLevel(logging.ERROR)
PENALTY_SECTIONS = ("AssignLatePenalties", "LateSubmissionPlugin", "PerDayPenalty")


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

    due = store.due_date(course.db_url, assignment_id)
    with store.gradebook(course.db_url) as gb:
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
    store.update_outcome(course, assignment_id, student, late=late_now, seconds_late=seconds_late, penalty=penalty)
    return result


def describe_penalty(config):
    plugin = config.get("AssignLatePenalties", {}).get("plugin_class")
    if plugin in (PerDayPenalty, "grader.late_policy.PerDayPenalty", "grader.stages.late.PerDayPenalty"):
        section = config.get("PerDayPenalty", {})
        return f"{section.get('percent_per_day', 10.0):g}% per started day late"
    method = config.get("LateSubmissionPlugin", {}).get("penalty_method", "none")
    return {"none": "none (late work is flagged only)", "zero": "zero (late work scores 0)"}.get(
        method, f"{plugin or method}")


def apply_late_penalty(assignment_id, student, db_url, submitted_at, config, extension=None):
    """Record the submission time and the student's extension (a timedelta past the due date, or
    None) and let nbgrader's AssignLatePenalties set the penalty; returns (seconds late or None when
    unknown, penalty)."""
    from nbgrader.preprocessors import AssignLatePenalties

    with store.gradebook(db_url) as gb:
        submission = gb.find_submission(assignment_id, student)
        submission.timestamp = store.naive_utc(submitted_at)
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
    with store.gradebook(db_url) as gb:
        submission = gb.find_submission(assignment_id, student)
        return (submission.total_seconds_late if known else None), float(submission.late_submission_penalty or 0)
