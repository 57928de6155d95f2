"""judge: the verdict on each test cell. Compare what the submission's test cells observed with
the expected values that the reference solution produced, using the same comparisons the
notebook's helpers make; and look in the student's own code for PyTorch's built-in attention
(grader/forbidden.py).

Runs only in the trusted grader process. Student records are plain data (loaded with
torch.load(weights_only=True)); the expected values come from the trace of the solution. A check
that fails here but passed in the student's own kernel (the recorder's `passed_here`) is a
disagreement: the cell fails, and is marked for the instructor's review (`disagree`), never
silently lost.
"""
from dataclasses import dataclass, field

from .. import cells
from ..forbidden import forbidden_uses
from ..provided.checks import COMPARISONS


def judge(submission, batch):
    """`submission.verdicts`, one per test cell of the assignment, in order."""
    submission.verdicts = judge_notebook(batch.trace, submission.execution.records,
                                         student_code_findings(submission.notebook, batch.released_tests))
    return submission


def student_code_findings(nb, released_tests=frozenset()):
    """Forbidden calls in the student's own code: not test or locked cells, and not an unchanged copy
    of a released test cell (pasted again, duplicated), which is the course's code -- a visible test
    may compare with torch's built-in attention."""
    return [finding for c in nb.cells
            if c.cell_type == "code" and not cells.is_test_cell(c) and not cells.is_locked(c)
            and c.source.strip() not in released_tests
            for finding in forbidden_uses(c.source)]


DISAGREE_NOTE = ("this check passed in your own notebook but not against the reference's value: "
                 "the instructor reviews this cell")


@dataclass
class CellVerdict:
    grade_id: str
    passed: bool
    message: str = ""
    checks_passed: int = 0
    checks_total: int = 0
    disagree: bool = False      # the failing check passed in the student's own kernel: review it


@dataclass
class Trace:
    """Expected observations per test cell, recorded from the reference solution."""
    records: dict
    errors: list = field(default_factory=list)


def judge_cell(trusted, student, static_findings=()):
    """trusted: the solution's record of this cell (with expected values); student: the
    submission's record (actual values), or None if the cell never ran."""
    gid = trusted["grade_id"]
    expected_obs = trusted["observations"]
    total = len(expected_obs)
    if student is None:
        return CellVerdict(gid, False, "this test did not run (the notebook stopped before it, "
                           "or the cell was removed)", 0, total)
    actual_obs = student.get("observations", [])
    for index, expected in enumerate(expected_obs):
        if index >= len(actual_obs):
            return CellVerdict(gid, False, _stopped_message(student, expected), index, total)
        actual = actual_obs[index]
        if (actual.get("kind"), actual.get("what")) != (expected["kind"], expected["what"]):
            return CellVerdict(gid, False, f"the test went a different way than expected at check "
                               f"'{expected['what']}'", index, total)
        message = _compare(expected, actual.get("actual"))
        if expected["kind"] == "no_forbidden_ops" and message is None and static_findings:
            message = ("your code uses PyTorch's built-in attention: " + "; ".join(static_findings[:3]))
        if message is not None:
            text = f"{expected['what']}: {message}"
            if expected.get("hint"):
                text += f"\n  likely mistake: {expected['hint']}"
            disagree = actual.get("passed_here") is True and expected["kind"] != "no_forbidden_ops"
            if disagree:
                text += f"\n  {DISAGREE_NOTE}"
            return CellVerdict(gid, False, text, index, total, disagree=disagree)
    if student.get("error"):
        return CellVerdict(gid, False, _error_message(student["error"]), total, total)
    if len(actual_obs) != total:
        return CellVerdict(gid, False, "the test made more checks than expected", total, total)
    return CellVerdict(gid, True, "", total, total)


def _compare(expected, actual):
    try:
        return COMPARISONS[expected["kind"]](actual, expected.get("expected"), **expected.get("options", {}))
    except Exception as error:  # noqa: BLE001 - a malformed record must fail the check, not the grader
        return f"could not compare the result ({type(error).__name__}: {error})"


def _stopped_message(student, next_check):
    if student.get("error"):
        return _error_message(student["error"])
    return f"the test stopped before the check '{next_check['what']}'"


def _error_message(error):
    text = f"your code raised {error.get('type', 'an exception')}: {error.get('message', '')}".rstrip(": ")
    if error.get("type") == "NotImplementedError":
        text += "\n  (this part is not implemented yet: replace the `raise NotImplementedError` line)"
    if error.get("where"):
        text += f"\n  in {error['where']}"
    return text


def judge_notebook(trace, student_records, static_findings=()):
    """Verdicts for every test cell of the trace, in order."""
    return [judge_cell(trusted, student_records.get(gid), static_findings)
            for gid, trusted in trace.records.items()]
