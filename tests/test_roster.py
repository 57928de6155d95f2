"""The class list: `roster import` reads the CSV nbgrader's `db student import` takes, says which
row and column is wrong, and keeps every student in the gradebook across imports."""
import re

import pytest

from grader.roster import RosterError, drop_students, format_roster, import_roster, load_roster, read_roster_csv


@pytest.mark.parametrize("text, says", [
    ("name,email\nJane,jane@x\n", "(only id is required)"),
    ("id,email\njdoe,a@x\njdoe,b@x\n", "line 3: id 'jdoe' is already on line 2"),
    ("id,nickname\njdoe,JD\n", "unknown column"),
    ("id,email\n,a@x\n", "line 2: the id is empty"),
    ("id\n\n", "no students"),
    (None, "no such file"),
])
def test_roster_errors_say_what_is_wrong(tmp_path, text, says):
    path = tmp_path / "roster.csv"
    if text is not None:
        path.write_text(text)
    with pytest.raises(RosterError, match=re.escape(says)):
        read_roster_csv(path)


def test_an_excel_byte_order_mark_and_spaces_are_read(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("\ufeffid, First_Name ,email\n jdoe ,Jane, jane@uni.example\n", encoding="utf-8")
    [jane], form = read_roster_csv(path)
    assert form == "course"
    assert (jane.id, jane.first_name, jane.email) == ("jdoe", "Jane", "jane@uni.example")


def test_import_adds_then_updates_and_the_gradebook_holds_the_class(course, tmp_path):
    grading = course.with_grading_dir(tmp_path / "course")
    path = tmp_path / "roster.csv"
    path.write_text("id,first_name,last_name,email,lms_user_id\njdoe,Jane,Doe,jane@uni.example,101\n")
    assert load_roster(grading) is None
    assert import_roster(grading, path) == (1, 0, "course", [])
    path.write_text("id,first_name,last_name,email,lms_user_id\njdoe,Jane,Doe,jd@uni.example,101\n"
                    "bkim,Bo,Kim,,\n")
    assert import_roster(grading, path) == (1, 1, "course", [])
    students = {s.id: s for s in load_roster(grading)}
    assert sorted(students) == ["bkim", "jdoe"] and students["jdoe"].email == "jd@uni.example"
    table = format_roster(students.values()).splitlines()
    assert table[0].split() == ["id", "first_name", "last_name", "email", "lms_user_id"]
    assert any(line.split()[:3] == ["bkim", "Bo", "Kim"] for line in table[1:])


# Canvas: Grades > Export (canvas-lms lib/gradebook_exporter.rb): the student columns, an assignment
# titled "<title> (<id>)", the Manual Posting row, the Points Possible row with four leading spaces
CANVAS_GRADEBOOK = "\n".join([
    "Student,ID,SIS User ID,SIS Login ID,Section,Assignment 1 (12345),Current Score,Final Score",
    ",,,,,Manual Posting,,",
    "    Points Possible,,,,,18.00,(read only),(read only)",
    '"Doe, Jane",101,S0001,jdoe,Section A,18.00,100.00,100.00',
    '"Smith, John",102,,,Section A,,,',
    '"Student, Test",999,,,Section A,,,',
]) + "\n"
# Moodle: Participants > select all > Download table data as CSV (user/action_redir.php), in a
# locale whose spreadsheets separate fields with ";"
MOODLE_PARTICIPANTS = ("\ufeffFirst name;Last name;Email address\n"
                       "Jane;Doe;jane.doe@uni.example\nJohn;Smith;jsmith@uni.example\n")


def test_canvas_gradebook_export_is_a_class_list(tmp_path):
    path = tmp_path / "gradebook.csv"
    path.write_text(CANVAS_GRADEBOOK)
    students, form = read_roster_csv(path)
    assert form == "canvas"
    assert [(s.id, s.first_name, s.last_name, s.lms_user_id) for s in students] == [
        ("jdoe", "Jane", "Doe", "101"), ("smithjohn_102", "John", "Smith", "102")], \
        "SIS login as the id (else the id a download without a roster gives); the test student left out"


def test_moodle_participants_download_is_a_class_list(tmp_path):
    path = tmp_path / "participants.csv"
    path.write_text(MOODLE_PARTICIPANTS, encoding="utf-8")
    students, form = read_roster_csv(path)
    assert form == "moodle"
    assert [(s.id, s.email) for s in students] == [("jane.doe", "jane.doe@uni.example"),
                                                    ("jsmith", "jsmith@uni.example")]


def test_a_student_who_left_leaves_every_export_and_their_grades_stay(course, tmp_path):
    from grader import store
    from grader.export import export
    grading = course.with_grading_dir(tmp_path / "course")
    path = tmp_path / "roster.csv"
    path.write_text("id,first_name\njdoe,Jane\njsmith,John\nbkim,Bo\n")
    import_roster(grading, path)
    drop_students(grading, ["bkim"])
    assert [s.id for s in load_roster(grading)] == ["jdoe", "jsmith"]
    path.write_text("id,first_name\njdoe,Jane\n")
    added, updated, _, dropped = import_roster(grading, path, replace=True)
    assert (added, updated, dropped) == (0, 1, ["jsmith"])
    exported, _, _ = export(grading, tmp_path / "wide.csv", "wide")
    assert [row.split(",")[0] for row in exported.read_text().splitlines()[1:]] == ["jdoe"]
    with store.gradebook(grading.db_url) as gb:
        assert sorted(s.id for s in gb.students) == ["bkim", "jdoe", "jsmith"], "nothing is deleted"
    with pytest.raises(RosterError, match="not on the roster: nobody"):
        drop_students(grading, ["nobody"])
