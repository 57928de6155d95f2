"""merge: a graded submission's scores go into the course gradebook under its student and its
notebook into autograded/; a re-grade keeps every manual grade; a submission that could not be
graded still gets its row, flagged for manual grading, never a silent 0; nbgrader's keys follow
the notebook so that the Formgrader can return feedback."""
import dataclasses

from grader import cells, store
from grader.stages.merge import merge
from grader.submission import Status
from support.grading import A1, grade_without_kernel, submission_file


def _course_grades(batch, student):
    with store.gradebook(batch.course_db) as gb:
        notebook = gb.find_submission_notebook(A1, A1, student)
        return {g.name: (g.auto_score, g.manual_score, g.needs_manual_grade) for g in notebook.grades}


def test_scores_and_notebook_reach_the_course(course, tmp_path, a1_batch):
    graded = grade_without_kernel(submission_file(course, tmp_path, "alice"), a1_batch)
    merge(graded, a1_batch)
    grades = _course_grades(a1_batch, "alice")
    tests = cells.test_points(graded.notebook)
    assert {name: grades[name][0] for name in tests} == tests, "every test cell's points, auto-graded"
    copy = a1_batch.course.grading_dir / "autograded" / "alice" / A1 / f"{A1}.ipynb"
    assert copy.read_bytes() == graded.autograded.read_bytes()


def test_a_regrade_keeps_the_manual_grade(course, tmp_path, a1_batch):
    graded = grade_without_kernel(submission_file(course, tmp_path, "bob", "sin_cos_swapped"), a1_batch)
    merge(graded, a1_batch)
    with store.gradebook(a1_batch.course_db) as gb:
        gb.find_grade("written_permutation", A1, A1, "bob").manual_score = 2
        gb.find_grade("test_sinusoidal_encoding", A1, A1, "bob").manual_score = 1
        gb.db.commit()
    merge(dataclasses.replace(graded), a1_batch)
    grades = _course_grades(a1_batch, "bob")
    assert grades["written_permutation"][1] == 2
    assert grades["test_sinusoidal_encoding"][:2] == (0, 1), "the auto score updated, the manual one kept"


def test_not_graded_gets_a_row_flagged_for_manual_grading(a1_batch):
    from grader.submission import Submission
    merge(Submission("carol", None, status=Status.NOT_GRADED, reason="invalid JSON"), a1_batch)
    grades = _course_grades(a1_batch, "carol")
    assert grades and all(auto is None and needs for auto, _, needs in grades.values())


def test_nbgrader_keys_follow_the_notebook(course, tmp_path, a1_batch):
    folder = tmp_path / "submitted" / "dave" / A1
    folder.mkdir(parents=True)
    submission = submission_file(course, folder, A1)
    submission = dataclasses.replace(submission, student="dave", preset="nbgrader")
    (folder / "timestamp.txt").write_text("2026-10-01 12:00:00.000000 UTC")
    (folder / "submission_secret.txt").write_text("s3cr3t")
    merge(grade_without_kernel(submission, a1_batch), a1_batch)
    kept = a1_batch.course.grading_dir / "autograded" / "dave" / A1
    assert (kept / "timestamp.txt").read_text().startswith("2026-10-01")
    assert (kept / "submission_secret.txt").read_text() == "s3cr3t"
