"""Helpers for writing an assignment's source notebook with the right nbgrader metadata.

An instructor (or a build script) describes the notebook cell by cell:

    nb = new_assignment_notebook()
    nb.cells += [markdown("# Title"), provided("checks.py"), solution("def f(x):\n    ...", "f"),
                 test("test_f_shapes", points=1, source="check_equal(...)")]

The notebook in solutions/ stays the one source of truth; these helpers only spare the
hand-editing of cell metadata (grade ids, points, locks, schema version).
"""
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from .provided import provided_source

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def _nbgrader(grade_id, *, grade, solution, locked, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def new_assignment_notebook():
    nb = new_notebook()
    nb.metadata.kernelspec = dict(KERNELSPEC)
    nb.metadata.language_info = {"name": "python"}
    return nb


def markdown(source):
    return new_markdown_cell(source.strip("\n"))


def code(source):
    """An ordinary cell the student may edit or run (demos, plots)."""
    return new_code_cell(source.strip("\n"))


def readonly(grade_id, source):
    """A locked cell: the grader restores its source from solutions/ before running."""
    cell = new_code_cell(source.strip("\n"))
    cell.metadata["nbgrader"] = _nbgrader(grade_id, grade=False, solution=False, locked=True)
    cell.metadata["editable"] = False
    cell.metadata["deletable"] = False
    return cell


def provided(filename, grade_id=None):
    """A locked cell whose source is grader/provided/<filename>; `python -m grader sync`
    rewrites it from there and `grader check` proves the copy matches."""
    grade_id = grade_id or "provided_" + Path(filename).stem
    cell = readonly(grade_id, provided_source(filename))
    cell.metadata["course"] = {"provided": filename}
    return cell


def solution(source, grade_id):
    """Code the student writes; `### BEGIN SOLUTION` ... `### END SOLUTION` become a stub."""
    cell = new_code_cell(source.strip("\n"))
    cell.metadata["nbgrader"] = _nbgrader(grade_id, grade=False, solution=True, locked=False)
    return cell


def test(grade_id, points, source):
    """An auto-graded test cell; a `### BEGIN HIDDEN TESTS` region is removed from the release."""
    cell = new_code_cell(source.strip("\n"))
    cell.metadata["nbgrader"] = _nbgrader(grade_id, grade=True, solution=False, locked=True, points=points)
    cell.metadata["editable"] = False
    cell.metadata["deletable"] = False
    return cell


def written_answer(grade_id, points, model_answer):
    """A manually graded markdown answer; the model answer sits between the solution markers."""
    cell = new_markdown_cell("### BEGIN SOLUTION\n" + model_answer.strip("\n") + "\n### END SOLUTION")
    cell.metadata["nbgrader"] = _nbgrader(grade_id, grade=True, solution=True, locked=False, points=points)
    return cell


def write(nb, path):
    nbformat.validate(nb)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
