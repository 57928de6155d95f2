"""Stage 6: merge one submission's temporary gradebook into the course gradebook.

The only stage that writes course state; with parallel grading it runs in one process, so the
gradebook has a single writer. Manual grades already given are kept."""
import shutil
import warnings
from pathlib import Path

from nbgrader.api import Gradebook

# nbgrader's update_or_create_submission trips SQLAlchemy's autoflush warning ("... not in
# session ..."); it is harmless. One targeted filter for the whole process, used by every stage
# that opens a gradebook: catch_warnings() is not thread-safe under parallel grading.
warnings.filterwarnings("ignore", message=".*not in session.*")


def merge(assignment_id, student, temp_db_url, course_db_url, autograded_nb_path, autograded_dir,
          temp_student=None):
    """The scores of `temp_student` (default: `student`) in the temporary gradebook become `student`'s
    in the course gradebook."""
    with Gradebook(temp_db_url) as temp, Gradebook(course_db_url) as course:
        course.update_or_create_student(student)
        course.update_or_create_submission(assignment_id, student)
        source = temp.find_submission_notebook(assignment_id, assignment_id, temp_student or student)
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
    destination = Path(autograded_dir) / student / assignment_id
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(autograded_nb_path, destination / f"{assignment_id}.ipynb")


def record_not_graded(assignment_id, student, course_db_url):
    """A submission that could not be graded still appears in the gradebook, with no auto
    scores and flagged for manual grading — never as a silent zero."""
    with Gradebook(course_db_url) as course:
        course.update_or_create_student(student)
        submission = course.update_or_create_submission(assignment_id, student)
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                grade.auto_score = None
                grade.needs_manual_grade = True
        course.db.commit()
