"""`feedback ID`: per-student HTML made by nbgrader's GenerateFeedback, configured (in
course.py) to strip hidden test regions, so a student sees each failed check's message and the
visible tests, never the hidden test source. The grades as CSV: export.py."""
import warnings

from . import compat


class FeedbackError(RuntimeError):
    pass


def generate_feedback(course, assignment_id):
    """One HTML page per graded student in <grading folder>/feedback; returns their paths."""
    api = course.nbgrader_api()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = api.generate_feedback(assignment_id, force=True)
    if not result.get("success"):
        raise FeedbackError(result.get("error") or result.get("log"))
    return sorted((course.grading_dir / "feedback").glob(f"*/{assignment_id}/*.html"))


def grade_rows(course, assignment_ids=None):
    """One row per (student, assignment): total (manual score where given, else auto), max, and
    the points of every graded cell."""
    rows, cell_names = [], []
    with warnings.catch_warnings(), compat.gradebook(course.db_url) as gb:
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


def export_csv(course, path, assignment_ids=None):
    """The long CSV (grader/export.py has every format); returns (path, rows)."""
    from .export import export
    path, count, _ = export(course, path, "long", assignment_ids=assignment_ids)
    return path, count
