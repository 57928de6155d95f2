"""The routine operations of a term, one command each, after grading and after manual grading:
an extension (before or after grading), a regrade of one student, a replacement file, an excuse,
a drop, and the late penalty applied at export to the whole total. Each leaves every other grade as
it was. One graded course (real sandboxed kernels) is copied for each test."""
import datetime
import shutil
import warnings

import nbformat
import pytest
from test_term import A1, DUE, _canvas_times, _csv, _zip

from grader import cells, store
from grader.samples import buggy_submission, perfect_submission
from support import COURSE
from support.cli import run_cli as run

pytestmark = [pytest.mark.sandbox, pytest.mark.kernel]

ROSTER = """id,first_name,last_name,email,lms_user_id
jdoe,Jane,Doe,jane.doe@uni.example,101
jsmith,John,Smith,john.smith@uni.example,102
swilson,Sam,Wilson,sam.wilson@uni.example,103
alee,Alex,Lee,alex.lee@uni.example,104
tkim,Tae,Kim,tae.kim@uni.example,105
"""
WRITTEN = "written_permutation"      # a1's hand-graded written answer


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """a1 due DUE, 10 %/day: jdoe on time, jsmith 30 h late, alee 30 h late with a 3-day extension
    granted before grading, swilson a buggy notebook on time, tkim nothing."""
    root = tmp_path_factory.mktemp("operations")
    course = root / "course"
    (root / "roster.csv").write_text(ROSTER)
    on_time, late = DUE - datetime.timedelta(hours=1), DUE + datetime.timedelta(hours=30)
    download = _zip(root / "a1.zip", [
        ("doejane_101_5001_a1_self_attention.ipynb", perfect_submission(COURSE, A1)),
        ("smithjohn_LATE_102_5002_a1_self_attention.ipynb", perfect_submission(COURSE, A1)),
        ("leealex_LATE_104_5004_a1_self_attention.ipynb", perfect_submission(COURSE, A1)),
        ("wilsonsam_103_5003_a1_self_attention.ipynb", buggy_submission(COURSE, A1, "sin_cos_swapped")[0]),
    ])
    times = _canvas_times(root / "times.json", {"101": on_time, "102": late, "104": late, "103": on_time})
    assert run("roster", "import", str(root / "roster.csv"), course=course)[0] == 0
    status, said, _ = run("extension", A1, "alee", "--days", "3", course=course)
    assert status == 0 and "not graded yet" in said and "no due date stored yet" in said, said
    status, said, err = run("autograde", A1, str(download), "--due", DUE.isoformat(), "--times", str(times),
                            "--late-penalty", "10%/day", "--workers", "2", course=course)
    assert status == 0, said + err
    return root, course


@pytest.fixture
def course(graded, tmp_path):
    """A copy of the graded course folder: each test changes its own."""
    return shutil.copytree(graded[1], tmp_path / "course")


def long_rows(course, tmp_path):
    target = tmp_path / "long.csv"
    assert run("export", "--format", "long", "--output", str(target), course=course)[0] == 0
    header, *rows = _csv(target)
    return {row[0]: dict(zip(header, row, strict=True)) for row in rows}


def grades(course):
    """{(student, grade id): (auto, manual, needs manual grade)} of a1 in the gradebook."""
    with warnings.catch_warnings(), store.gradebook(COURSE.with_grading_dir(course).db_url) as gb:
        warnings.simplefilter("ignore")
        return {(s.student.id, g.name): (g.auto_score, g.manual_score, g.needs_manual_grade)
                for s in gb.find_assignment(A1).submissions for nb in s.notebooks for g in nb.grades}


def grade_by_hand(course, student, grade_id, points):
    """What the Formgrader does when the instructor gives a manual grade."""
    with warnings.catch_warnings(), store.gradebook(COURSE.with_grading_dir(course).db_url) as gb:
        warnings.simplefilter("ignore")
        grade = gb.find_grade(grade_id, A1, A1, student)
        grade.manual_score, grade.needs_manual_grade = points, False
        gb.db.commit()


def others(table, *but):
    return {student: row for student, row in table.items() if student not in but}


def test_an_extension_granted_before_grading_applies_when_graded(course, tmp_path):
    rows = long_rows(course, tmp_path)
    assert rows["alee"]["late"] == "" and rows["alee"]["penalty"] == "", rows["alee"]
    assert rows["jsmith"]["late"] == "yes" and float(rows["jsmith"]["penalty"]) > 0, rows["jsmith"]
    with store.gradebook(COURSE.with_grading_dir(course).db_url) as gb:
        assert gb.find_submission(A1, "alee").extension == datetime.timedelta(days=3)   # the Formgrader shows it


def test_an_extension_after_grading_changes_that_grade_at_once(course, tmp_path):
    before = long_rows(course, tmp_path)
    status, said, err = run("extension", A1, "jsmith", "--until", (DUE + datetime.timedelta(days=2)).isoformat(),
                            course=course)
    assert status == 0, err
    assert "jsmith is now on time" in said and f"{before['jsmith']['penalty']} -> 0 points" in said, said
    after = long_rows(course, tmp_path)
    assert after["jsmith"]["late"] == "" and after["jsmith"]["total"] == after["jsmith"]["raw_total"]
    assert others(after, "jsmith") == others(before, "jsmith")
    outcome = __import__("json").loads((course / "outcomes" / f"{A1}.json").read_text())["jsmith"]
    assert outcome["late"] is False and outcome["penalty"] == 0, outcome      # the class report's row
    # and taken back: late again, the same penalty
    status, said, _ = run("extension", A1, "jsmith", "--remove", course=course)
    assert status == 0 and "late 30.0 h" in said, said
    assert long_rows(course, tmp_path) == before


def test_the_penalty_at_export_covers_points_graded_by_hand_later(course, tmp_path):
    """10 %/day, 30 h late: 20 % of the whole total, the written answer's manual points included."""
    auto_only = float(long_rows(course, tmp_path)["jsmith"]["raw_total"])
    grade_by_hand(course, "jsmith", WRITTEN, 2)
    row = long_rows(course, tmp_path)["jsmith"]
    raw, total = float(row["raw_total"]), float(row["total"])
    assert raw == auto_only + 2 and float(row[WRITTEN]) == 2, row
    assert total == pytest.approx(raw * 0.8) and float(row["penalty"]) == pytest.approx(raw * 0.2), row


def test_regrading_one_student_keeps_unchanged_hand_grades_unflagged(course, graded, tmp_path):
    root = graded[0]
    grade_by_hand(course, "jdoe", WRITTEN, 2)
    grade_by_hand(course, "swilson", WRITTEN, 1)
    before_rows, before_grades = long_rows(course, tmp_path), grades(course)
    status, said, err = run("autograde", A1, str(root / "a1.zip"), "--times", str(root / "times.json"),
                            "--student", "jdoe", "--workers", "1", course=course)
    assert status == 0, said + err
    assert "jdoe" in said and "swilson" not in said and "tkim" not in said, said     # only jdoe in the table
    assert grades(course) == before_grades, "a regrade of unchanged work re-flagged or lost a hand grade"
    assert long_rows(course, tmp_path) == before_rows


def test_a_replacement_file_is_graded_with_its_own_time_and_a_changed_answer_is_flagged(course, tmp_path):
    grade_by_hand(course, "jdoe", WRITTEN, 2)
    before_rows, before_grades = long_rows(course, tmp_path), grades(course)
    replacement = perfect_submission(COURSE, A1)
    [written] = [c for c in replacement.cells if cells.grade_id(c) == WRITTEN]
    written.source += "\n\nA second thought, added after the deadline."
    path = tmp_path / "jdoe_fixed.ipynb"
    nbformat.write(replacement, str(path))
    when = DUE + datetime.timedelta(hours=5)
    status, said, err = run("autograde", A1, str(path), "--student", "jdoe", "--submitted-at", when.isoformat(),
                            "--workers", "1", course=course)
    assert status == 0, said + err
    after = grades(course)
    auto, manual, flagged = after[("jdoe", WRITTEN)]
    assert manual == 2 and flagged, "a changed written answer keeps its grade and is flagged for review"
    assert {k: v for k, v in after.items() if k != ("jdoe", WRITTEN)} == \
        {k: v for k, v in before_grades.items() if k != ("jdoe", WRITTEN)}
    row = long_rows(course, tmp_path)["jdoe"]
    assert row["late"] == "yes" and row["submitted_at"].startswith("2026-10-02T04:59"), row
    assert others(long_rows(course, tmp_path), "jdoe") == others(before_rows, "jdoe")


def test_excused_is_never_missing_and_ex_in_canvas(course, tmp_path):
    status, said, _ = run("excuse", A1, "tkim", course=course)
    assert status == 0 and "excused: tkim" in said, said
    assert long_rows(course, tmp_path)["tkim"]["status"] == "excused"
    target = tmp_path / "canvas.csv"
    assert run("export", "--format", "canvas", "--output", str(target), course=course)[0] == 0
    canvas = {row[3]: row[-1] for row in _csv(target)[2:]}
    assert canvas["tkim"] == "EX", canvas
    target = tmp_path / "wide.csv"
    assert run("export", "--format", "wide", "--output", str(target), course=course)[0] == 0
    wide = {row[0]: row for row in _csv(target)}
    assert wide["tkim"][1] == "EX" and A1 not in wide["tkim"][3], wide["tkim"]
    status, _, err = run("export", A1, "--format", "moodle", "--output", str(tmp_path / "m.csv"), course=course)
    assert status == 0 and "left out, excused" in err and "tkim" in err, err
    assert run("excuse", A1, "tkim", "--undo", course=course)[0] == 0
    assert long_rows(course, tmp_path)["tkim"]["status"] == "missing"


def test_a_regrade_an_extension_and_a_drop_after_hand_grading_leave_every_other_grade(course, graded, tmp_path):
    root = graded[0]
    for student in ("jdoe", "jsmith", "swilson", "alee"):
        grade_by_hand(course, student, WRITTEN, 2)
    before_rows, before_grades = long_rows(course, tmp_path), grades(course)
    assert run("autograde", A1, str(root / "a1.zip"), "--times", str(root / "times.json"), "--student", "swilson",
               "--workers", "1", course=course)[0] == 0
    assert run("extension", A1, "jsmith", "--days", "2", course=course)[0] == 0
    assert run("roster", "drop", "alee", course=course)[0] == 0
    after_rows = long_rows(course, tmp_path)
    assert grades(course) == before_grades, "hand grades or flags changed"
    assert "alee" not in after_rows
    assert others(after_rows, "jsmith") == others(before_rows, "jsmith", "alee")
    assert after_rows["jsmith"]["total"] == after_rows["jsmith"]["raw_total"] == before_rows["jsmith"]["raw_total"]


@pytest.mark.parametrize("argv, expected", [
    (["extension", A1, "jsmtih", "--days", "2"], "no student 'jsmtih' in the roster; did you mean jsmith?"),
    (["extension", A1, "jsmith", "--days", "-1"], "a positive number of days"),
    (["extension", A1, "jdoe", "--remove"], "jdoe has no extension for a1_self_attention"),
    (["excuse", A1, "nobody"], "no student 'nobody' in the roster"),
    (["excuse", A1, "jdoe", "--undo"], "jdoe is not excused from a1_self_attention"),
    (["autograde", A1, "{notebook}"], "is a single notebook: say whose it is with --student ID"),
    (["autograde", A1, "{download}", "--student", "tkim"], "tkim has no submission in"),
    (["autograde", A1, "{download}", "--student", "zed"], "no submission of 'zed' in"),
])
def test_term_operations_say_what_is_wrong(course, graded, tmp_path, argv, expected):
    notebook = tmp_path / "one.ipynb"
    nbformat.write(perfect_submission(COURSE, A1), str(notebook))
    argv = [a.format(notebook=notebook, download=graded[0] / "a1.zip") for a in argv]
    status, said, err = run(*argv, "--workers", "1", course=course) if argv[0] == "autograde" else \
        run(*argv, course=course)
    assert status not in (0, None) and expected in str(status) + err, (status, err)
    assert "Traceback" not in said + err

