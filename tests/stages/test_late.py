"""late: the submission time goes into the course gradebook and nbgrader's AssignLatePenalties sets
the penalty, in each form an instructor can choose -- none (flagged only), zero, N % per started
day, or whatever nbgrader_config.py configures; work with a due date but no time is 'time
unknown', never late by a guess."""
import dataclasses
import datetime

import pytest

from grader.late_policy import penalty_config
from grader.stages.late import late
from grader.stages.merge import merge
from support.grading import A1, DUE, grade_without_kernel, submission_file

HOUR = datetime.timedelta(hours=1)


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory, a1_batch):
    """One graded perfect submission, merged below under a new student name by each test."""
    return grade_without_kernel(submission_file(course, tmp_path_factory.mktemp("late"), "template"), a1_batch)


def recorded(graded, batch, student, submitted_at, lms_late=None):
    submission = dataclasses.replace(graded, student=student, submitted_at=submitted_at, lms_late=lms_late)
    return late(merge(submission, batch), batch)


@pytest.mark.parametrize("option, hours_late, share", [
    ("10%/day", 1, 0.1), ("10%/day", 24, 0.1), ("10%/day", 30, 0.2), ("25 % / day", 100, 1.0),
    ("zero", 1, 1.0), ("none", 30, 0.0),
])
def test_each_penalty_form(graded, a1_batch, monkeypatch, option, hours_late, share):
    monkeypatch.setattr(a1_batch, "penalty_config", penalty_config(option))
    student = f"late_{option.replace('%', 'pct').replace('/', '_').replace(' ', '')}_{hours_late}"
    submission = recorded(graded, a1_batch, student, DUE + hours_late * HOUR)
    assert submission.late is True and submission.seconds_late == pytest.approx(hours_late * 3600, abs=1)
    assert submission.penalty == pytest.approx(share * submission.score)
    assert submission.late_label.startswith("late ")
    assert (f", -{submission.penalty:g}" in submission.late_label) == bool(submission.penalty)


def test_on_time_unknown_and_the_lms_flag(graded, a1_batch, monkeypatch):
    monkeypatch.setattr(a1_batch, "penalty_config", penalty_config("zero"))
    on_time = recorded(graded, a1_batch, "on_time", DUE - HOUR)
    assert (on_time.late, on_time.seconds_late, on_time.penalty, on_time.late_label) == (False, 0, 0, "on time")
    unknown = recorded(graded, a1_batch, "no_time", None)
    assert (unknown.late, unknown.time_unknown, unknown.penalty) == (None, True, 0)
    assert unknown.late_label == "time unknown", "a due date but no time: never late by a guess"
    flagged = recorded(graded, a1_batch, "canvas_says_late", None, lms_late=True)
    assert flagged.late is True and flagged.penalty == 0, "the LMS's own flag is shown, never penalised"
    assert flagged.late_label == "late (the LMS says), time unknown"


def test_a_late_penalty_is_lifted_when_the_time_is_corrected(graded, a1_batch, monkeypatch):
    monkeypatch.setattr(a1_batch, "penalty_config", penalty_config("zero"))
    assert recorded(graded, a1_batch, "corrected", DUE + HOUR).penalty == graded.score
    assert recorded(graded, a1_batch, "corrected", DUE - HOUR).penalty == 0


def test_an_extension_in_the_lms_applies_and_one_given_here_takes_precedence(graded, a1_batch, monkeypatch):
    """Moodle's worksheet grants Bo an extension to DUE + 3 days ("Extension granted until: ..."):
    submitted 30 h after the due date, he is on time. An extension given here (1 day) takes
    precedence, and his row says so; a later worksheet without the extension takes it back."""
    from grader import term
    monkeypatch.setattr(a1_batch, "penalty_config", penalty_config("zero"))
    in_lms = DUE + 3 * 24 * HOUR
    moodle = dataclasses.replace(graded, student="lms_extension", submitted_at=DUE + 30 * HOUR, notes=[],
                                 lms_extension=in_lms, lms_records_read=True)
    on_time = late(merge(moodle, a1_batch), a1_batch)
    assert (on_time.late, on_time.penalty) == (False, 0)
    assert on_time.notes == [f"extension in the LMS: due {in_lms.astimezone():%Y-%m-%d %H:%M}"]
    assert term.extension(a1_batch.course, A1, "lms_extension", DUE) == 3 * 24 * HOUR, "kept for the export"
    term.record_extension(a1_batch.course, A1, "lms_extension", days=1)
    again = late(merge(dataclasses.replace(moodle, notes=[]), a1_batch), a1_batch)
    assert again.late is True and again.seconds_late == pytest.approx(6 * 3600, abs=1) and again.penalty > 0
    assert again.notes == [f"extension given here (1 day) takes precedence over the LMS's (until "
                           f"{in_lms.astimezone():%Y-%m-%d %H:%M})"]
    term.remove_extension(a1_batch.course, A1, "lms_extension")
    revoked = dataclasses.replace(moodle, notes=[], lms_extension=None)     # the worksheet no longer grants it
    assert late(merge(revoked, a1_batch), a1_batch).late is True
    assert term.lms_extension(a1_batch.course, A1, "lms_extension") is None
