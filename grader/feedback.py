"""`feedback ID`: per-student HTML made by nbgrader's GenerateFeedback, configured (in
course.py) to strip hidden test regions, so a student sees each failed check's message and the
visible tests, never the hidden test source. The grades as CSV: export.py."""
import warnings
from pathlib import Path

from nbgrader.api import Gradebook

from .course import COURSE_DIR, ensure_venv_bin_on_path, gradebook_url, nbgrader_api


class FeedbackError(RuntimeError):
    pass


def generate_feedback(assignment_id, course_dir=COURSE_DIR):
    ensure_venv_bin_on_path()
    api = nbgrader_api(course_dir=Path(course_dir))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = api.generate_feedback(assignment_id, force=True)
    if not result.get("success"):
        raise FeedbackError(result.get("error") or result.get("log"))
    return sorted((Path(course_dir) / "feedback").glob(f"*/{assignment_id}/*.html"))


def grade_rows(course_dir=COURSE_DIR, assignment_ids=None):
    """One row per (student, assignment): total (manual score where given, else auto), max, and
    the points of every graded cell."""
    rows, cell_names = [], []
    with warnings.catch_warnings(), Gradebook(gradebook_url(course_dir)) as gb:
        warnings.simplefilter("ignore")
        for assignment in gb.assignments:
            if assignment_ids and assignment.name not in assignment_ids:
                continue
            for submission in assignment.submissions:
                row = {"student": submission.student.id, "assignment": assignment.name,
                       "total": submission.score, "max": submission.max_score,
                       "needs_manual_grade": submission.needs_manual_grade}
                for notebook in submission.notebooks:
                    for grade in notebook.grades:
                        row[grade.name] = grade.score
                        if grade.name not in cell_names:
                            cell_names.append(grade.name)
                rows.append(row)
    return rows, cell_names


def export_csv(path, course_dir=COURSE_DIR, assignment_ids=None):
    """The long CSV (grader/export.py has every format); returns (path, rows)."""
    from .export import export
    path, count, _ = export(path, "long", course_dir=course_dir, assignment_ids=assignment_ids)
    return path, count
