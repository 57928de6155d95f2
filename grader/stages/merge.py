"""merge: one submission's result into the course gradebook and autograded/.

The only stage that writes the course's grades; with parallel grading it runs in one process, one
submission at a time, so the gradebook has a single writer. Manual grades already given are kept.
A submission that could not be graded still gets its row, with no auto scores and flagged for
manual grading -- never a silent zero."""
import shutil
import warnings
from pathlib import Path

from .. import compat
from ..lms import NBGRADER_KEYS
from ..submission import TEMPLATE_STUDENT, Status

# nbgrader's update_or_create_submission trips SQLAlchemy's autoflush warning ("... not in
# session ..."); it is harmless. One targeted filter for the whole process, used by every stage
# that opens a gradebook: catch_warnings() is not thread-safe under parallel grading.
warnings.filterwarnings("ignore", message=".*not in session.*")


def merge(submission, batch):
    """A graded submission's scores and notebook into the course; a not-graded one's row."""
    aid, course = batch.assignment_id, batch.course
    if submission.status == Status.GRADED:
        merge_gradebook(aid, submission.student, submission.db_url, batch.course_db)
        destination = course.grading_dir / "autograded" / submission.student / aid
        destination.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(submission.autograded, destination / f"{aid}.ipynb")
        if submission.preset == "nbgrader" and submission.path is not None:
            _keep_nbgrader_keys(submission.path.parent, destination)
    elif submission.status == Status.NOT_GRADED:
        record_not_graded(aid, submission.student, batch.course_db)
    return submission


def merge_gradebook(assignment_id, student, temp_db_url, course_db_url, temp_student=TEMPLATE_STUDENT):
    """The scores of `temp_student` in the temporary gradebook become `student`'s in the course
    gradebook; a manual grade already given stays."""
    with compat.gradebook(temp_db_url) as temp, compat.gradebook(course_db_url) as course:
        course.update_or_create_student(student)
        course.update_or_create_submission(assignment_id, student)
        source = temp.find_submission_notebook(assignment_id, assignment_id, temp_student)
        target = course.find_submission_notebook(assignment_id, assignment_id, student)
        # each notebook's grades and comments loaded at once, not one query per cell (find_grade)
        grades = {grade.name: grade for grade in target.grades}
        comments = {comment.name: comment for comment in target.comments}
        for grade in source.grades:
            into = grades[grade.name]
            into.auto_score = grade.auto_score
            into.needs_manual_grade = grade.needs_manual_grade or into.manual_score is not None
        for comment in source.comments:
            comments[comment.name].auto_comment = comment.auto_comment
        course.db.commit()


def record_not_graded(assignment_id, student, course_db_url):
    """The submission's row in the gradebook, with no auto scores and flagged for manual grading."""
    with compat.gradebook(course_db_url) as course:
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
