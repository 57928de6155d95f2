"""The class list: `roster import` reads the CSV nbgrader's `db student import` takes, says which
row and column is wrong, and keeps every student in the gradebook across imports."""
import re

import pytest

from grader.roster import RosterError, format_roster, import_roster, load_roster, read_roster_csv


@pytest.mark.parametrize("text, says", [
    ("name,email\nJane,jane@x\n", "including `id`"),
    ("id,email\njdoe,a@x\njdoe,b@x\n", "line 3: id 'jdoe' is already on line 2"),
    ("id,nickname\njdoe,JD\n", "unknown column"),
    ("id,email\n,a@x\n", "line 2: the id is empty"),
    ("id\n\n", "no students"),
    (None, "no roster file"),
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
    [jane] = read_roster_csv(path)
    assert (jane.id, jane.first_name, jane.email) == ("jdoe", "Jane", "jane@uni.example")


def test_import_adds_then_updates_and_the_gradebook_holds_the_class(course, tmp_path):
    grading = course.with_grading_dir(tmp_path / "course")
    path = tmp_path / "roster.csv"
    path.write_text("id,first_name,last_name,email,lms_user_id\njdoe,Jane,Doe,jane@uni.example,101\n")
    assert load_roster(grading) is None
    assert import_roster(grading, path) == (1, 0)
    path.write_text("id,first_name,last_name,email,lms_user_id\njdoe,Jane,Doe,jd@uni.example,101\n"
                    "bkim,Bo,Kim,,\n")
    assert import_roster(grading, path) == (1, 1)
    students = {s.id: s for s in load_roster(grading)}
    assert sorted(students) == ["bkim", "jdoe"] and students["jdoe"].email == "jd@uni.example"
    table = format_roster(students.values()).splitlines()
    assert table[0].split() == ["id", "first_name", "last_name", "email", "lms_user_id"]
    assert any(line.split()[:3] == ["bkim", "Bo", "Kim"] for line in table[1:])
