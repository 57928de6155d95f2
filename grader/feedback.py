"""`feedback ID`: per-student HTML made by nbgrader's GenerateFeedback, configured (in
course.py) to strip hidden test regions, so a student sees each failed check's message and the
visible tests, never the hidden test source. The grades as CSV: export.py."""
import re
import warnings
from pathlib import Path

from . import compat, labs
from .submission import Status


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
    pages = sorted((course.grading_dir / "feedback").glob(f"*/{assignment_id}/*.html"))
    if labs.is_lab(course, assignment_id):
        add_lab_sections(course, assignment_id, pages)
    return pages


def add_lab_sections(course, assignment_id, pages):
    """A debugging lab's pages open with the bugs the student missed, each with the catalogue's
    description and the test that catches it, and the definitions they rewrote instead of repairing
    (read again from their graded notebook; grader/labs.py)."""
    from .report import load_outcomes
    bugs = labs.lab_bugs(course, assignment_id)
    outcomes = load_outcomes(course, assignment_id)
    for page in pages:
        student = page.parent.parent.name
        outcome = outcomes.get(student)
        if not outcome or outcome.get("status") != Status.GRADED:
            continue
        text = page.read_text()
        section = labs.feedback_section(bugs, outcome.get("failed", []),
                                        labs.student_repairs(course, assignment_id, student, bugs))
        body = re.search(r"<body[^>]*>", text)
        at = body.end() if body else 0
        page.write_text(text[:at] + section + text[at:])


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


# what each LMS's bulk upload matches a returned file by, rebuilt from the name the download gave
# the graded file (outcomes: lms_name)
ZIP_FORMATS = ("canvas", "moodle")


def feedback_zip(course, assignment_id, lms, output):
    """Every graded student's feedback page in a zip the LMS's bulk upload reads: Canvas's
    "Re-Upload Submissions" takes the first two all-digit `_` parts of a name as the user id and the
    id of a file in their submission (canvas-lms Assignment#infer_comment_context_from_filename);
    Moodle's "Upload multiple feedback files in a zip" reads <name>_<participant id>_<plugin
    type>_<plugin name>_... (mod/assign/feedback/file/importziplib.php). Returns (path, pages
    written, notes on who was left out and why). Run `feedback` first: the pages come from there."""
    import zipfile

    from .lms import _CANVAS, _MOODLE
    from .report import load_outcomes
    if lms not in ZIP_FORMATS:
        raise FeedbackError(f"--zip {lms!r}: choose one of {', '.join(ZIP_FORMATS)}")
    written, skipped = {}, []
    for student, outcome in sorted(load_outcomes(course, assignment_id).items()):
        page = course.grading_dir / "feedback" / student / assignment_id / f"{assignment_id}.html"
        if not page.is_file():
            continue                              # not graded: no page to return
        if outcome.get("preset") != lms:
            skipped.append(f"{student} (not from a {lms} download)")
            continue
        pattern = _CANVAS if lms == "canvas" else _MOODLE
        match = pattern.fullmatch(outcome.get("lms_name", ""))
        if match is None or match["uid"].startswith("anon_"):
            skipped.append(f"{student} (the download's name {outcome.get('lms_name')!r} does not say whom "
                           f"{lms} should give it to)")
            continue
        if lms == "canvas":
            name = f"{match['name'] or 'student'}_{match['uid']}_{match['sid']}_{assignment_id}-feedback.html"
        else:
            name = f"{match['name']}_{match['uid']}_assignsubmission_file_{assignment_id}-feedback.html"
        written[name] = page
    if not written:
        raise FeedbackError(f"no feedback page for a {lms} submission of {assignment_id} in "
                            f"{course.grading_dir / 'feedback'} (run `python -m grader feedback {assignment_id}` "
                            "after grading the LMS's download)")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, page in written.items():
            archive.write(page, name)
    notes = [f"left out: {', '.join(skipped)}"] if skipped else []
    return output, len(written), notes
