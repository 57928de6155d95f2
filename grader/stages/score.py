"""score: turn verdicts into cell outputs and points, with nbgrader's own scoring.

A passing test cell gets a one-line confirmation, a failing one an error output whose only
text is the judge's message (never the hidden test source); nbgrader's SaveAutoGrades then
scores the cells exactly as it always does, into this submission's own gradebook."""
import logging

import nbformat
from nbgrader.preprocessors import LimitOutput, SaveAutoGrades
from traitlets.config import Config

from .. import cells
from ..submission import TEMPLATE_STUDENT, Status


def score(submission, batch):
    """The graded notebook (`submission.autograded`, beside its gradebook), its points and failed
    tests; the submission is GRADED."""
    aid = batch.assignment_id
    graded = save_auto_grades(build_autograded(submission.notebook, submission.execution.notebook,
                                               submission.verdicts), aid, submission.db_url)
    submission.autograded = submission.workdir / f"{aid}.ipynb"
    nbformat.write(graded, str(submission.autograded))
    points = cells.test_points(submission.notebook)
    submission.failed = [v.grade_id for v in submission.verdicts if not v.passed]
    submission.score = sum(points.get(v.grade_id, 0) for v in submission.verdicts if v.passed)
    submission.status = Status.GRADED
    return submission


def verdict_outputs(verdict):
    if verdict.passed:
        return [nbformat.v4.new_output("stream", name="stdout",
                                       text=f"passed ({verdict.checks_total} checks)\n")]
    return [nbformat.v4.new_output("error", ename="TestFailed", evalue=verdict.message,
                                   traceback=[f"Test failed: {verdict.message}"])]


def build_autograded(sanitized, executed, verdicts):
    """The sanitized notebook with the executed outputs of ordinary cells and the verdicts
    as the outputs of test cells."""
    by_id = {v.grade_id: v for v in verdicts}
    result = nbformat.from_dict(sanitized)
    for cell, ran in zip(result.cells, executed.cells):
        if cell.cell_type != "code":
            continue
        if cells.is_test_cell(cell):
            verdict = by_id.get(cells.grade_id(cell))
            cell.outputs = verdict_outputs(verdict) if verdict else []
        else:
            cell.outputs = ran.get("outputs", [])
            cell.execution_count = ran.get("execution_count")
    return result


def save_auto_grades(nb, assignment_id, db_url, student=TEMPLATE_STUDENT):
    """Write auto scores into the (temporary) gradebook; returns the notebook nbgrader saw."""
    config = Config()
    config.LimitOutput.max_lines = 200
    resources = {"nbgrader": {"db_url": db_url, "assignment": assignment_id, "notebook": assignment_id,
                              "student": student}}
    quiet = logging.getLogger("score")
    quiet.setLevel(logging.ERROR)
    for step in (LimitOutput, SaveAutoGrades):
        nb, resources = step(config=config, log=quiet).preprocess(nb, resources)
    return nb
