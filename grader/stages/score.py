"""score: turn verdicts into cell outputs and points, with nbgrader's own scoring.

A passing test cell gets a one-line confirmation, a failing one an error output whose only
text is the judge's message (never the hidden test source); nbgrader's SaveAutoGrades then
scores the cells exactly as it always does, into this submission's own gradebook."""
import logging

import nbformat
from nbgrader import api
from nbgrader.preprocessors import LimitOutput, SaveAutoGrades
from traitlets.config import Config

from .. import cells, store
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
    for step in (LimitOutput, _SaveAutoGrades):
        nb, resources = step(config=config, log=quiet).preprocess(nb, resources)
    return nb


class _SaveAutoGrades(SaveAutoGrades):
    """nbgrader's SaveAutoGrades (its scores, its "needs manual grade" and "No response." rules, unchanged),
    with the submission's grades and comments read in one query each rather than in a query (and a commit)
    a cell: the same rows written, committed once at the end."""

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.student_id = resources["nbgrader"]["student"]
        with store.gradebook(resources["nbgrader"]["db_url"]) as gradebook:
            self.gradebook = _Preloaded(gradebook, self.notebook_id, self.assignment_id, self.student_id)
            # SaveAutoGrades.preprocess, less its Gradebook(db_url)
            nb, resources = super(SaveAutoGrades, self).preprocess(nb, resources)
            gradebook.db.commit()
        return nb, resources


class _Preloaded:
    """What SaveAutoGrades asks of a gradebook (find_grade, find_comment, db.commit), for one submitted
    notebook: its grades and comments by cell name, read at once, as nbgrader's find_grade (a grade
    cell's, else a task cell's) and find_comment (a solution cell's, else a task cell's) would find them;
    any other name is asked of the gradebook itself. Its db.commit leaves the changes to the caller's one
    commit."""

    def __init__(self, gradebook, notebook, assignment, student):
        self.gradebook = gradebook
        self.db = _CommitLater(gradebook.db)
        # the submitted notebook's id alone (find_submission_notebook's row carries a dozen computed scores);
        # none: nbgrader's own look-ups raise, as they would have
        submitted = store.submitted_notebook_id(gradebook, notebook, assignment, student)
        key = (notebook, assignment, student)
        self.grades = _by_cell_name(gradebook, api.Grade, (api.TaskCell, api.GradeCell), submitted, key)
        self.comments = _by_cell_name(gradebook, api.Comment, (api.TaskCell, api.SolutionCell), submitted, key)

    def find_grade(self, grade_cell, notebook, assignment, student):
        found = self.grades.get((grade_cell, notebook, assignment, student))
        return found if found is not None else self.gradebook.find_grade(grade_cell, notebook, assignment, student)

    def find_comment(self, solution_cell, notebook, assignment, student):
        found = self.comments.get((solution_cell, notebook, assignment, student))
        return found if found is not None \
            else self.gradebook.find_comment(solution_cell, notebook, assignment, student)


def _by_cell_name(gradebook, model, cell_kinds, submitted, key):
    """{(cell name, *key): row} of `model` (Grade or Comment) in the submitted notebook `submitted` (its id),
    for cells of the kinds in `cell_kinds`; of two of the same name, the later kind's (nbgrader's find_grade
    and find_comment look for one kind, then the other). One query, the cell's kind its own column."""
    rank = {kind.__mapper__.polymorphic_identity: i for i, kind in enumerate(cell_kinds)}
    found, ranks = {}, {}
    if submitted is None:
        return found
    for row, name, kind in store.cell_rows(gradebook, model, submitted):
        if kind in rank and rank[kind] >= ranks.get(name, -1):
            found[(name, *key)], ranks[name] = row, rank[kind]
    return found


class _CommitLater:
    """A session whose commit() waits for the caller's own."""

    def __init__(self, session):
        self.session = session

    def commit(self):
        pass
