"""score: each test cell's verdict becomes its output -- a one-line confirmation, or an error whose
only text is the judge's message (never the hidden test source) -- and nbgrader's SaveAutoGrades
scores the cells into the submission's own gradebook."""


from grader import cells, store
from grader.submission import TEMPLATE_STUDENT, Status
from support.grading import A1, grade_without_kernel, submission_file


def _outputs(submission, grade_id):
    graded = cells.read(submission.autograded)
    return next(c for c in graded.cells if cells.grade_id(c) == grade_id).outputs


def _auto_scores(submission):
    with store.gradebook(submission.db_url) as gb:
        notebook = gb.find_submission_notebook(A1, A1, TEMPLATE_STUDENT)
        return {grade.name: grade.auto_score for grade in notebook.grades if grade.auto_score is not None}


def test_a_perfect_submission_scores_every_point(course, tmp_path, a1_batch):
    submission = grade_without_kernel(submission_file(course, tmp_path, "perfect"), a1_batch)
    assert submission.status == Status.GRADED and submission.failed == []
    assert submission.score == submission.max_score == a1_batch.max_score > 0
    [passed] = _outputs(submission, "test_sdpa_masks")
    assert passed.output_type == "stream" and passed.text.startswith("passed (") and "checks)" in passed.text
    assert sum(_auto_scores(submission).values()) == submission.score


def test_a_failed_check_shows_its_message_and_costs_the_cell(course, tmp_path, a1_batch):
    submission = grade_without_kernel(submission_file(course, tmp_path, "swapped", "sin_cos_swapped"), a1_batch)
    assert submission.failed == ["test_sinusoidal_encoding"]
    points = cells.test_points(submission.notebook)
    assert submission.score == a1_batch.max_score - points["test_sinusoidal_encoding"]
    [error] = _outputs(submission, "test_sinusoidal_encoding")
    assert error.output_type == "error" and error.ename == "TestFailed"
    assert "likely mistake" in error.evalue and error.traceback == [f"Test failed: {error.evalue}"]
    assert _auto_scores(submission)["test_sinusoidal_encoding"] == 0
    secret = cells.secret_lines(cells.read(course.source_notebook(A1)))
    assert not [line for line in secret if line in error.evalue], "hidden test source in the message"


def test_the_untouched_release_scores_zero_and_says_what_is_missing(course, tmp_path, a1_batch):
    submission = grade_without_kernel(submission_file(course, tmp_path, "untouched", "release"), a1_batch)
    assert submission.status == Status.GRADED and submission.score == 0
    assert set(submission.failed) == set(cells.test_points(submission.notebook))
    [error] = _outputs(submission, "test_sdpa_worked_example")
    assert "not implemented yet" in error.evalue


def test_the_gradebook_holds_what_nbgraders_own_save_auto_grades_writes(course, tmp_path, a1_batch):
    """score's SaveAutoGrades reads the grades and comments at once and commits once; nbgrader's own,
    a query and a commit per cell, leaves the same rows in a copy of the same gradebook."""
    import logging
    import shutil
    import sqlite3

    from nbgrader.preprocessors import SaveAutoGrades

    from grader.stages.score import _SaveAutoGrades, build_autograded

    submission = grade_without_kernel(submission_file(course, tmp_path, "rows", "sin_cos_swapped"), a1_batch)
    quiet = logging.getLogger("score-rows-test")
    quiet.disabled = True

    def rows(step, name):
        db = tmp_path / f"{name}.db"
        shutil.copyfile(a1_batch.template_db, db)
        graded = build_autograded(submission.notebook, cells.read(submission.autograded), submission.verdicts)
        step(log=quiet).preprocess(graded, {"nbgrader": {"db_url": f"sqlite:///{db}", "assignment": A1,
                                                         "notebook": A1, "student": TEMPLATE_STUDENT}})
        with sqlite3.connect(db) as connection:
            return {table: sorted(connection.execute(f"SELECT * FROM {table}").fetchall())
                    for table in ("grade", "comment")}
    ours = rows(_SaveAutoGrades, "ours")
    assert any(score == 0 for _, _, _, score, *_ in ours["grade"]), "the failed test's grade"
    assert ours == rows(SaveAutoGrades, "nbgraders")
