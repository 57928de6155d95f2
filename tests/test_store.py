"""The course's saved state (grader/store.py): the grading folder's layout, the gradebook's
assignment and due date, the saved outcomes, term.json and roster.json. Fast: nothing is graded."""
import datetime
import warnings

import pytest

from grader import store
from grader.submission import Status, Submission
from support import COURSE

AID = "a1_self_attention"
DUE = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.timezone.utc)


def test_the_layout_is_inside_the_grading_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("GRADER_DB_URL", raising=False)
    course = COURSE.with_grading_dir(tmp_path)
    paths = [store.submitted_dir(course), store.autograded_notebook(course, "ada", AID),
             store.feedback_page(course, "ada", AID), store.report_page(course, AID), store.similarity_dir(course),
             store.feedback_zip(course, AID, "canvas"), store.grades_csv(course, "long"),
             store.autograder_zip(course, AID)]
    assert all(path.is_relative_to(tmp_path) for path in paths)
    assert store.autograded_notebook(course, "ada", AID) == tmp_path / "autograded" / "ada" / AID / f"{AID}.ipynb"
    assert course.db_url == store.sqlite_url(tmp_path)


def test_the_due_date_and_the_assignment_in_the_gradebook(tmp_path):
    url = store.sqlite_url(tmp_path)
    assert not store.gradebook_exists(url)
    assert not store.has_assignment(url, AID) and store.due_date(url, AID) is None
    assert not (tmp_path / "gradebook.db").exists()          # asking creates nothing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store.set_due_date(url, AID, DUE.astimezone(datetime.timezone(datetime.timedelta(hours=2))))
    assert store.has_assignment(url, AID)
    assert store.due_date(url, AID) == DUE                    # aware UTC, whatever zone it was given in
    assert store.students_with_submissions(url, AID) == set()


def test_a_new_gradebook_is_made_as_a_copy_of_its_model_and_an_existing_one_is_left_alone(tmp_path):
    model = tmp_path / "model.db"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store.set_due_date(f"sqlite:///{model}", AID, DUE)
    url = store.sqlite_url(tmp_path / "course")
    store.create_gradebook_as(url, model)                      # its folder is made too
    assert store.has_assignment(url, AID) and store.due_date(url, AID) == DUE
    assert [p.name for p in (tmp_path / "course").iterdir()] == ["gradebook.db"], "a partial copy was left"
    (tmp_path / "other").mkdir()
    other = store.sqlite_url(tmp_path / "other")
    with store.gradebook(other) as gb:
        gb.update_or_create_student("ada")
    store.create_gradebook_as(other, model)
    assert not store.has_assignment(other, AID), "an existing gradebook was replaced"


def test_only_throwaway_gradebooks_are_written_without_disk_syncs(tmp_path):
    """A batch's scratch copies and the demo's gradebooks skip SQLite's syncs; the course gradebook,
    and a folder once it is no longer declared throw-away, keep SQLite's default (FULL, 2)."""
    from sqlalchemy import text

    def synchronous(folder):
        folder.mkdir(parents=True, exist_ok=True)
        with store.gradebook(store.sqlite_url(folder)) as gb:
            return gb.db.execute(text("PRAGMA synchronous")).scalar()

    scratch = tmp_path / "scratch"
    store.throwaway_gradebooks(scratch)
    try:
        assert synchronous(scratch / "student") == 0, "a throw-away gradebook still waits for the disk"
        assert synchronous(tmp_path / "course") == 2, "the course gradebook lost its disk syncs"
    finally:
        store.keep_gradebooks(scratch)
    assert synchronous(scratch / "later") == 2, "a folder no longer throw-away still skips the syncs"


def test_a_sqlite_gradebook_keeps_its_engine_and_is_read_afresh_after_being_replaced(tmp_path):
    """Reopening a SQLite gradebook reuses its engine (its compiled SQL) and skips the checks it passed; no
    connection stays open, so a gradebook replaced meanwhile is read as it now is, and one that lost its
    tables or course row is checked (made) again, even where the new file got the old one's inode."""
    import sqlite3
    url = store.sqlite_url(tmp_path)
    with store.gradebook(url) as gb:
        gb.update_or_create_student("ada")
        engine = gb.engine
    with store.gradebook(url) as gb:
        assert gb.engine is engine
        assert [s.id for s in gb.students] == ["ada"]
    other = tmp_path / "other"
    other.mkdir()
    with store.gradebook(store.sqlite_url(other)) as gb:
        gb.update_or_create_student("grace")
    (other / "gradebook.db").replace(tmp_path / "gradebook.db")
    with store.gradebook(url) as gb:
        assert [s.id for s in gb.students] == ["grace"]
    (tmp_path / "gradebook.db").unlink()
    with sqlite3.connect(tmp_path / "gradebook.db") as connection:     # a SQLite file, not a gradebook
        connection.execute("CREATE TABLE unrelated (x)")
    with store.gradebook(url) as gb:
        assert gb.students == []
        gb.update_or_create_student("lin")
    with store.gradebook(url) as gb:
        assert [s.id for s in gb.students] == ["lin"]


def test_a_copy_of_a_checked_gradebook_opens_without_the_checks_and_holds_the_same(tmp_path, monkeypatch):
    from nbgrader.api import Gradebook
    url = store.sqlite_url(tmp_path)
    with store.gradebook(url) as gb:
        gb.update_or_create_student("ada")
    copy = tmp_path / "copy.db"
    store.copy_gradebook(tmp_path / "gradebook.db", copy)
    checks = []
    monkeypatch.setattr(Gradebook, "check_course", lambda self, *a, **k: checks.append(a))
    with store.gradebook(f"sqlite:///{copy}") as gb:
        assert [s.id for s in gb.students] == ["ada"]
    assert checks == []


def test_the_saved_outcomes_keep_the_latest_and_never_let_missing_replace_a_grade(tmp_path):
    course = COURSE.with_grading_dir(tmp_path)
    with pytest.raises(FileNotFoundError, match="run autograde first"):
        store.load_outcomes(course, AID)
    store.save_outcomes(course, AID, [Submission("ada", status=Status.GRADED, score=18.0),
                                      Submission("bob", status=Status.NOT_GRADED, reason="invalid JSON")])
    store.save_outcomes(course, AID, [Submission("ada", status=Status.MISSING, reason="Ada: no submission"),
                                      Submission("bob", status=Status.GRADED, score=12.0)])
    saved = store.load_outcomes(course, AID)
    assert (saved["ada"]["status"], saved["ada"]["score"]) == ("graded", 18.0)
    assert (saved["bob"]["status"], saved["bob"]["score"], saved["bob"]["label"]) == ("graded", 12.0, "graded")
    store.update_outcome(course, AID, "bob", late=True)
    store.update_outcome(course, AID, "nobody", late=True)   # nothing saved: nothing made
    store.forget_outcome(course, AID, "ada", Status.MISSING)  # ada's is a grade: kept
    assert set(store.all_outcomes(course)) == {(AID, "ada"), (AID, "bob")}
    assert store.all_outcomes(course)[(AID, "bob")]["late"] is True
    store.forget_outcome(course, AID, "ada", Status.GRADED)
    assert set(store.load_outcomes(course, AID)) == {"bob"}


def test_term_and_roster_files_round_trip(tmp_path):
    course = COURSE.with_grading_dir(tmp_path / "course")
    assert store.load_term(course) == {section: {} for section in store.TERM_SECTIONS}
    term = store.load_term(course)
    term["excused"][AID] = ["ada"]
    store.save_term(course, term)
    assert store.load_term(course)["excused"] == {AID: ["ada"]}
    assert store.load_roster_record(course) is None
    store.save_roster_record(course, {"source": None, "updated_at": "2026-01-01T00:00:00", "students": ["ada"]})
    assert store.load_roster_record(course)["students"] == ["ada"]
