"""The grades as CSV (grader/export.py), from a course gradebook filled without kernels: one row per
roster student, totals after the late penalty, a missing submission an empty cell (never a 0 that
looks earned), provisional totals named, and the columns Canvas and Moodle import."""
import csv
import dataclasses
import datetime

import pytest

from grader import pipeline
from grader.export import export
from grader.roster import import_roster
from grader.stages.late import penalty_config
from grader.submission import Status, Submission
from support.grading import A1, DUE, grade_without_kernel, open_batch, submission_file

HOUR = datetime.timedelta(hours=1)
ROSTER = """id,first_name,last_name,email,lms_user_id
jdoe,Jane,Doe,jane.doe@uni.example,101
jsmith,John,Smith,john.smith@uni.example,102
swilson,Sam,Wilson,,
"""


@pytest.fixture(scope="module")
def graded_course(course, tmp_path_factory):
    """Roster of three; jdoe on time, jsmith 30 h late at 10 %/day, swilson missing."""
    tmp = tmp_path_factory.mktemp("export")
    (tmp / "roster.csv").write_text(ROSTER)
    with open_batch(course, tmp, due=DUE, late_penalty=penalty_config("10%/day")) as batch:
        import_roster(batch.course, tmp / "roster.csv")
        batch.prepare()
        template = grade_without_kernel(submission_file(course, tmp, "template"), batch)
        for student, when in (("jdoe", DUE - HOUR), ("jsmith", DUE + 30 * HOUR)):
            pipeline.record(dataclasses.replace(template, student=student, submitted_at=when), batch)
        return batch.course, template.score


def _rows(course, fmt, tmp_path):
    path, count, notes = export(course, tmp_path / f"{fmt}.csv", fmt)
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    return rows, notes


def test_long_one_row_per_student_with_the_penalty(graded_course, tmp_path):
    course, score = graded_course
    rows, notes = _rows(course, "long", tmp_path)
    by = {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
    assert sorted(by) == ["jdoe", "jsmith", "swilson"]
    assert by["jdoe"]["status"] == Status.GRADED and by["jdoe"]["late"] == ""
    assert float(by["jdoe"]["total"]) == float(by["jdoe"]["raw_total"]) == score
    late = by["jsmith"]
    assert late["late"] == "yes" and float(late["seconds_late"]) == pytest.approx(30 * 3600, abs=2)
    assert float(late["penalty"]) == pytest.approx(0.2 * score) and float(late["total"]) == pytest.approx(0.8 * score)
    assert by["swilson"]["status"] == Status.MISSING and by["swilson"]["total"] == ""
    assert by["jdoe"]["provisional"] == "yes", "the written answer waits for a manual grade"
    assert any("provisional" in note for note in notes)


def test_wide_names_late_missing_and_provisional(graded_course, tmp_path):
    course, _ = graded_course
    rows, _ = _rows(course, "wide", tmp_path)
    assert rows[0] == ["student", A1, "late", "missing", "provisional"]
    by = {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
    assert by["jsmith"]["late"] == A1 and by["jdoe"]["late"] == ""
    assert by["swilson"]["missing"] == A1 and by["swilson"][A1] == ""


def test_canvas_and_moodle_columns_and_what_they_cannot_match(graded_course, tmp_path):
    course, score = graded_course
    canvas, notes = _rows(course, "canvas", tmp_path)
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A1]
    assert canvas[1][0] == "Points Possible"
    ids = {r[3]: r for r in canvas[2:]}
    assert ids["jdoe"][:2] == ["Doe, Jane", "101"] and float(ids["jdoe"][5]) == score
    assert any("without an lms_user_id (swilson" in note for note in notes)
    moodle, notes = _rows(course, "moodle", tmp_path)
    assert moodle[0] == ["First name", "Last name", "Email address", A1]
    assert sorted(r[2] for r in moodle[1:]) == ["", "jane.doe@uni.example", "john.smith@uni.example"]
    assert any("no e-mail address" in note for note in notes)


def test_a_not_graded_submission_is_provisional_not_zero(course, tmp_path):
    with open_batch(course, tmp_path) as batch:
        batch.prepare()
        pipeline.record(Submission("eve", None, status=Status.NOT_GRADED, reason="invalid JSON"), batch)
        rows, _ = _rows(batch.course, "long", tmp_path)
    [eve] = [dict(zip(rows[0], r)) for r in rows[1:]]
    assert eve["status"] == Status.NOT_GRADED and eve["provisional"] == "yes"


def test_an_unknown_format_says_which_there_are(course, tmp_path):
    with pytest.raises(ValueError, match="choose one of long, wide, canvas, moodle"):
        export(course.with_grading_dir(tmp_path), tmp_path / "x.csv", "excel")
