"""`feedback ID`: per-student HTML made by nbgrader's GenerateFeedback, configured (in
course.py) to strip hidden test regions, so a student sees each failed check's message and the
visible tests, never the hidden test source. The grades as CSV: export.py."""
import re
import sys
import warnings
from pathlib import Path

from . import labs, store
from .submission import Status


class FeedbackError(RuntimeError):
    pass


def generate_feedback(course, assignment_id, skipped=None):
    """One HTML page per graded student in <grading folder>/feedback; returns their paths. A notebook
    nbgrader cannot make a page of (a student's text holding the hidden-test marker, ...) is left
    out, and everyone else's page is written: one line per student left out, naming them and why,
    goes into `skipped` (a list), else to stderr. FeedbackError only when no student's failure
    explains what went wrong."""
    api = course.nbgrader_api()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = api.generate_feedback(assignment_id, force=True)
    if not result.get("success"):
        failed = _failed_students(result.get("log") or "", assignment_id)
        if not failed:
            raise FeedbackError(result.get("error") or result.get("log"))
        lines = [f"feedback not written for {student}: {why}" for student, why in failed.items()]
        if skipped is None:
            print("\n".join(lines), file=sys.stderr)
        else:
            skipped += lines
    pages = store.feedback_pages(course, assignment_id)
    if labs.is_lab(course, assignment_id):
        add_lab_sections(course, assignment_id, pages)
    return pages


# what nbgrader logs for each notebook it could not convert (nbgrader/converters/base.py)
_FAILED_AT = re.compile(r"There was an error processing assignment: (?P<path>[^\n]+)\n(?P<trace>.*?)(?=\n\[|\Z)",
                        re.DOTALL)
_FAILED_STUDENT = re.compile(r"There was an error processing assignment '(?P<aid>[^'\n]*)' for student "
                             r"'(?P<student>[^'\n]*)'")
# nbgrader's ClearHiddenTests, in words for the instructor
_PLAIN = {
    "Encountered nested begin hidden tests statements":
        "a cell of their notebook holds the hidden-test marker 'BEGIN HIDDEN TESTS' twice",
    "No end hidden tests statement found":
        "a cell of their notebook holds 'BEGIN HIDDEN TESTS' without 'END HIDDEN TESTS'",
    "Hidden test region detected in a non-grade cell":
        "a cell of theirs that is no test holds a hidden-test region ('BEGIN HIDDEN TESTS')",
}


def _failed_students(log, assignment_id):
    """{student: why} for each notebook nbgrader's log says it could not convert."""
    reasons = {}
    for match in _FAILED_AT.finditer(log):
        student = Path(match["path"].strip()).parent.name       # <autograded>/<student>/<assignment id>
        lines = [line.strip() for line in match["trace"].splitlines() if line.strip()]
        error = lines[-1] if lines else "an error nbgrader did not explain"
        message = error.split(": ", 1)[-1]
        reasons[student] = next((f"{plain} (nbgrader: {message})" for text, plain in _PLAIN.items() if text in message),
                                error)
    failed = {}
    for match in _FAILED_STUDENT.finditer(log):
        if match["aid"] == assignment_id:
            failed[match["student"]] = reasons.get(match["student"], "nbgrader could not make its page (see its log)")
    return failed


def add_lab_sections(course, assignment_id, pages):
    """A debugging lab's pages open with the bugs the student missed, each with the catalogue's
    description and the test that catches it, and the definitions they rewrote instead of repairing
    (read again from their graded notebook; grader/labs.py)."""
    bugs = labs.lab_bugs(course, assignment_id)
    outcomes = store.load_outcomes(course, assignment_id)
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


def export_csv(course, path, assignment_ids=None):
    """The long CSV (grader/export.py has every format); returns (path, rows)."""
    from .export import export
    path, count, _ = export(course, path, "long", assignment_ids=assignment_ids)
    return path, count


def feedback_zip(course, assignment_id, lms, output):
    """Every graded student's feedback page in a zip the LMS's bulk upload reads, each named as that
    LMS matches a returned file to its student (rebuilt from the name the download gave the graded
    file, outcomes: lms_name; each LMS's module says how: grader/lms/). Returns (path, pages written,
    notes on who was left out and why). Run `feedback` first: the pages come from there."""
    import zipfile

    from .lms import FORMATS, feedback_zip_formats
    if lms not in feedback_zip_formats():
        raise FeedbackError(f"--zip {lms!r}: choose one of {', '.join(feedback_zip_formats())}")
    written, skipped = {}, []
    for student, outcome in sorted(store.load_outcomes(course, assignment_id).items()):
        page = store.feedback_page(course, student, assignment_id)
        if not page.is_file():
            continue                              # not graded: no page to return
        if outcome.get("preset") != lms:
            skipped.append(f"{student} (not from a {lms} download)")
            continue
        name, why_not = FORMATS[lms].feedback_name(outcome, assignment_id)
        if name is None:
            skipped.append(f"{student} ({why_not})")
            continue
        written[name] = page
    if not written:
        raise FeedbackError(f"no feedback page for a {lms} submission of {assignment_id} in "
                            f"{store.feedback_dir(course)} (run `python -m grader feedback {assignment_id}` "
                            "after grading the LMS's download)")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, page in written.items():
            archive.write(page, name)
    notes = [f"left out: {', '.join(skipped)}"] if skipped else []
    return output, len(written), notes
