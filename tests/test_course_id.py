"""One setting names the course: $GRADER_COURSE_ID (default "attention-course"), read by
grader/course.py, the course's nbgrader_config.py and the hub's nbgrader configuration for students."""
from pathlib import Path

import pytest
from traitlets.config import Config

from grader.course import DEFAULT_COURSE_ID, Course, course_id

REPO = Path(__file__).resolve().parent.parent
STUDENTS_CONFIG = REPO / "deploy" / "jupyterhub" / "nbgrader_config_students.py"


def test_the_default():
    assert course_id({}) == DEFAULT_COURSE_ID == "attention-course"
    assert course_id({"GRADER_COURSE_ID": "  "}) == DEFAULT_COURSE_ID


def test_the_variable_names_the_course(monkeypatch, tmp_path):
    assert course_id({"GRADER_COURSE_ID": "attention-seminar"}) == "attention-seminar"
    monkeypatch.setenv("GRADER_COURSE_ID", "attention-seminar")
    course = Course(REPO, tmp_path / "course")
    assert course.course_id == "attention-seminar"
    assert course.nbgrader_config().CourseDirectory.course_id == "attention-seminar"


@pytest.mark.parametrize("bad", ["../other", "a b", ".hidden"])
def test_not_a_folder_name(bad):
    with pytest.raises(ValueError, match="is not a course id: it names a folder of nbgrader's exchange"):
        course_id({"GRADER_COURSE_ID": bad})


def students_config(monkeypatch, value=None):
    if value is None:
        monkeypatch.delenv("GRADER_COURSE_ID", raising=False)
    else:
        monkeypatch.setenv("GRADER_COURSE_ID", value)
    c = Config()
    exec(compile(STUDENTS_CONFIG.read_text(), str(STUDENTS_CONFIG), "exec"), {"get_config": lambda: c})
    return c


def test_the_students_configuration_reads_the_same_setting(monkeypatch):
    assert students_config(monkeypatch).CourseDirectory.course_id == DEFAULT_COURSE_ID
    assert students_config(monkeypatch, "attention-seminar").CourseDirectory.course_id == "attention-seminar"


def test_the_course_configuration_reads_it(monkeypatch):
    """The repository's nbgrader_config.py (what nbgrader and the Formgrader load)."""
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.setenv("GRADER_COURSE_ID", "attention-seminar")
    loaded = PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()
    assert loaded.CourseDirectory.course_id == "attention-seminar"
