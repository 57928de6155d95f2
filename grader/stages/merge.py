"""merge: one submission's result into the course gradebook and autograded/.

The only stage that writes the course's grades; with parallel grading it runs in one process, one
submission at a time, so the gradebook has a single writer. Manual grades already given are kept,
and a regrade flags one for review again only where what it graded changed: a written answer's own
cell, or (for an overridden test) any code the student wrote.
A submission that could not be graded still gets its row, with no auto scores and flagged for
manual grading -- never a silent zero."""
import shutil
from pathlib import Path

from nbgrader import api

from .. import cells, store
from ..lms import NBGRADER_KEYS
from ..submission import TEMPLATE_STUDENT, Status


def merge(submission, batch):
    """A graded submission's scores and notebook into the course; a not-graded one's row."""
    aid, course = batch.assignment_id, batch.course
    if submission.status == Status.GRADED:
        previous = store.autograded_notebook(course, submission.student, aid)
        unchanged = unchanged_grades(previous, submission.autograded) if previous.exists() else set()
        merge_gradebook(aid, submission.student, submission.db_url, batch.course_db, unchanged=unchanged)
        previous.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(submission.autograded, previous)
        if submission.preset == "nbgrader" and submission.path is not None:
            _keep_nbgrader_keys(submission.path.parent, previous.parent)
    elif submission.status == Status.NOT_GRADED:
        record_not_graded(aid, submission.student, batch.course_db)
    return submission


def merge_gradebook(assignment_id, student, temp_db_url, course_db_url, temp_student=TEMPLATE_STUDENT,
                    unchanged=frozenset()):
    """The scores of `temp_student` in the temporary gradebook become `student`'s in the course
    gradebook; a manual grade already given stays, flagged for review again unless its grade id is
    in `unchanged` (what it graded is as it was)."""
    with store.gradebook(temp_db_url) as temp, store.gradebook(course_db_url) as course:
        course.update_or_create_student(student)
        course.update_or_create_submission(assignment_id, student)
        source = _submitted_notebook_id(temp, assignment_id, temp_student)
        target = _submitted_notebook_id(course, assignment_id, student)
        grades, comments = _by_cell_name(course, api.Grade, target), _by_cell_name(course, api.Comment, target)
        for name, grade in _by_cell_name(temp, api.Grade, source).items():
            into = grades[name]
            into.auto_score = grade.auto_score
            if into.manual_score is None:
                into.needs_manual_grade = grade.needs_manual_grade
            else:
                into.needs_manual_grade = name not in unchanged
        for name, comment in _by_cell_name(temp, api.Comment, source).items():
            comments[name].auto_comment = comment.auto_comment
        course.db.commit()


def _submitted_notebook_id(gradebook, assignment_id, student):
    """The id of the student's submitted notebook (an assignment's one notebook has its name); none:
    nbgrader's own look-up raises its MissingEntry."""
    found = store.submitted_notebook_id(gradebook, assignment_id, assignment_id, student)
    return found if found is not None else gradebook.find_submission_notebook(assignment_id, assignment_id, student).id


def _by_cell_name(gradebook, model, submitted_id):
    """{cell name: row} of `model` (Grade or Comment) in a submitted notebook; nbgrader keeps a notebook's cell
    names unique."""
    return {name: row for row, name, _ in store.cell_rows(gradebook, model, submitted_id)}


def unchanged_grades(previous_path, new_path):
    """Grade ids whose graded content is the same in both autograded notebooks: a written answer or
    other hand-graded cell by its own source (a task cell with the cells that answer it), a test cell
    when no code answer cell changed."""
    try:
        old, new = cells.read(previous_path), cells.read(new_path)
    except ValueError:
        return set()

    def code(nb):
        return [c.source for c in nb.cells if cells.is_answer_cell(c)]

    def by_grade(nb):
        """Each graded cell's source; a task cell's (nbgrader's "manually graded task", a debugging
        lab's finding) with the ungraded cells after it, where the student answers it."""
        graded, current = {}, None
        for cell in nb.cells:
            if cells.grade_id(cell):
                current = cells.grade_id(cell) if cells.nbgrader_meta(cell).get("task") else None
                graded[cells.grade_id(cell)] = cell.source
            elif current is not None:
                graded[current] += "\n" + cell.source
        return graded
    same_code = code(old) == code(new)
    tests = {cells.grade_id(c) for c in cells.test_cells(new)}
    before = by_grade(old)
    return {grade_id for grade_id, source in by_grade(new).items()
            if (same_code if grade_id in tests else before.get(grade_id) == source)}


def record_not_graded(assignment_id, student, course_db_url):
    """The submission's row in the gradebook, with no auto scores and flagged for manual grading."""
    with store.gradebook(course_db_url) as course:
        course.update_or_create_student(student)
        submission = course.update_or_create_submission(assignment_id, student)
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                grade.auto_score = None
                grade.needs_manual_grade = True
        course.db.commit()


def _keep_nbgrader_keys(submitted, graded):
    """nbgrader's timestamp.txt and submission_secret.txt go beside the autograded notebook, as
    nbgrader's own autograde puts them: generate_feedback copies them on into feedback/, where
    release_feedback (the Formgrader's button) needs them to return the feedback via the exchange."""
    for key in NBGRADER_KEYS:
        if (Path(submitted) / key).is_file():
            shutil.copy2(Path(submitted) / key, Path(graded) / key)
