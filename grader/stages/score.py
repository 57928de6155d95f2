"""Stage 5: turn verdicts into cell outputs and points, with nbgrader's own scoring.

A passing test cell gets a one-line confirmation, a failing one an error output whose only
text is the judge's message (never the hidden test source); nbgrader's SaveAutoGrades then
scores the cells exactly as it always does, into this submission's own gradebook."""
import logging

import nbformat
from nbgrader.preprocessors import LimitOutput, SaveAutoGrades
from traitlets.config import Config

from .. import notebook as nbtools


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
        if nbtools.is_test_cell(cell):
            verdict = by_id.get(nbtools.grade_id(cell))
            cell.outputs = verdict_outputs(verdict) if verdict else []
        else:
            cell.outputs = ran.get("outputs", [])
            cell.execution_count = ran.get("execution_count")
    return result


def score(nb, assignment_id, student, db_url):
    """Write auto scores into the (temporary) gradebook; returns the notebook nbgrader saw."""
    config = Config()
    config.LimitOutput.max_lines = 200
    resources = {"nbgrader": {"db_url": db_url, "assignment": assignment_id, "notebook": assignment_id,
                              "student": student}}
    quiet = logging.getLogger("score")
    quiet.setLevel(logging.ERROR)
    for stage in (LimitOutput, SaveAutoGrades):
        nb, resources = stage(config=config, log=quiet).preprocess(nb, resources)
    return nb
