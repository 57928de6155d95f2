"""Where a course lives (grader/course.py): its folders, and its gradebook's URL, read from the
environment once, when the Course is made."""
from grader import store
from grader.course import Course
from support import REPO


def test_the_gradebook_url_is_read_once_when_the_course_is_made(tmp_path, monkeypatch):
    monkeypatch.delenv("GRADER_DB_URL", raising=False)
    course = Course(REPO, tmp_path / "course")
    assert course.db_url == store.sqlite_url(tmp_path / "course")
    monkeypatch.setenv("GRADER_DB_URL", "postgresql://graders@db/course")
    assert course.db_url == store.sqlite_url(tmp_path / "course"), "a made Course keeps its gradebook"
    assert course.with_grading_dir(tmp_path / "other").db_url == "postgresql://graders@db/course"
    assert Course(REPO).db_url == "postgresql://graders@db/course"


def test_its_folders():
    course = Course(REPO)
    assert course.grading_dir == REPO / "course"
    aid = "a1_self_attention"
    assert course.source_notebook(aid) == REPO / "solutions" / aid / f"{aid}.ipynb"
    assert aid in course.assignment_ids()
