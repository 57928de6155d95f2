"""The verdict on each test cell, as the judge stage (grader/stages/judge.py) and the quality gate
(grader/gate.py, grader/labs.py) reach it. Pair what the submission's kernel recorded -- the answer at
each check site (grader/split.py) -- with what the reference solution's trace expects there, and
compare them with the comparisons the notebook's own helpers make; and look in the student's own
code for PyTorch's built-in attention (grader/forbidden.py).

Runs only in the trusted grader process. Student records are plain data (loaded with
torch.load(weights_only=True)); the expected values, messages, hints and tolerances come from the
trace alone. A check written in a hidden-test region is reported in the test's own words only --
what was expected and the likely mistake -- never with text or values the student's code produced,
so that nothing a submission controls carries a hidden test out before the grades are published.
"""
import builtins
from dataclasses import dataclass, field

import torch

from . import cells
from .forbidden import forbidden_uses
from .provided.checks import COMPARISONS, _describe, _diagnose


def student_code_findings(nb, released_tests=frozenset()):
    """Forbidden calls in the student's own code: not test or locked cells, and not an unchanged copy
    of a released test cell (pasted again, duplicated), which is the course's code -- a visible test
    may compare with torch's built-in attention."""
    return [finding for c in nb.cells
            if c.cell_type == "code" and not cells.is_test_cell(c) and not cells.is_locked(c)
            and c.source.strip() not in released_tests
            for finding in forbidden_uses(c.source)]


@dataclass
class CellVerdict:
    grade_id: str
    passed: bool
    message: str = ""
    checks_passed: int = 0
    checks_total: int = 0


@dataclass
class Trace:
    """What each check of each test cell expects, recorded from the reference solution; and the
    split of the test cells it was recorded with (grader/split.py)."""
    records: dict
    errors: list = field(default_factory=list)
    split: dict = field(default_factory=dict)


def judge_cell(trusted, student, static_findings=(), split_cell=None):
    """trusted: the solution's record of this cell (the trace); student: the submission's record of
    its answers, or None if the cell never ran; split_cell: tells a hidden region's error apart."""
    gid = trusted["grade_id"]
    expected_obs = trusted["observations"]
    total = len(expected_obs)
    if student is None:
        return CellVerdict(gid, False, "this test did not run (the notebook stopped before it, "
                           "or the cell was removed)", 0, total)
    actual_obs = student.get("observations")
    actual_obs = actual_obs if isinstance(actual_obs, list) else []
    error = student.get("error") if isinstance(student.get("error"), dict) else None
    error_hidden = split_cell is None or split_cell.line_is_hidden(error.get("test_line") if error else None)
    for index, expected in enumerate(expected_obs):
        if index >= len(actual_obs):
            return CellVerdict(gid, False, _stopped_message(error, error_hidden, expected), index, total)
        actual = actual_obs[index] if isinstance(actual_obs[index], dict) else {}
        if actual.get("site") != expected["site"]:
            return CellVerdict(gid, False, f"the test went a different way than expected at check "
                               f"'{expected['what']}'", index, total)
        message = _compare(expected, actual)
        if expected["kind"] == "no_forbidden_ops" and message is None and static_findings:
            message = ("your code uses PyTorch's built-in attention: " + "; ".join(static_findings[:3]))
        if message is not None:
            text = f"{expected['what']}: {message}"
            if expected.get("hint"):
                text += f"\n  likely mistake: {expected['hint']}"
            return CellVerdict(gid, False, text, index, total)
    if error:
        return CellVerdict(gid, False, _error_message(error, error_hidden), total, total)
    if len(actual_obs) != total:
        return CellVerdict(gid, False, "the test made more checks than expected", total, total)
    return CellVerdict(gid, True, "", total, total)


def _compare(expected, actual):
    """None when the answer at this site is what the trace expects, else why not (a hidden site's
    reason in the test's words only)."""
    kind, hidden = expected["kind"], expected.get("hidden", True)
    options = expected.get("options", {})
    if "raised" in actual and kind != "raises":
        return _error_message(actual, hidden)
    if kind == "raises":
        raised = actual.get("raised") if "raised" in actual else []
        value = {"raised": [str(name) for name in raised] if isinstance(raised, list) else [],
                 "message": str(actual.get("message", ""))}
    else:
        value = actual.get("value")
    try:
        message = COMPARISONS[kind](value, expected.get("expected"), **options)
    except Exception as error:  # noqa: BLE001 - a malformed record must fail the check, not the grader
        message = "could not compare the result" + ("" if hidden else f" ({type(error).__name__}: {error})")
        return message
    if message is None or not hidden:
        return message
    return _hidden_reason(kind, value, expected.get("expected"), options)


def _builtin_exception(name):
    """`name` when it is one of Python's own exception classes (which says nothing of the student's)."""
    found = getattr(builtins, name, None) if isinstance(name, str) else None
    return name if isinstance(found, type) and issubclass(found, BaseException) else None


def _hidden_reason(kind, actual, expected, options):
    """Why a hidden check failed, from the expected value and fixed phrases only."""
    if kind == "close":
        expected = expected if isinstance(expected, torch.Tensor) else torch.as_tensor(expected)
        if not isinstance(actual, torch.Tensor):
            return f"expected a torch.Tensor ({_describe(expected)}), got something else"
        if actual.shape != expected.shape:
            return f"wrong shape: expected {tuple(expected.shape)}"
        if options.get("check_dtype", True) and actual.dtype != expected.dtype:
            return f"wrong dtype: expected {expected.dtype}"
        clues = _diagnose(actual.detach().to("cpu", torch.float64), expected.detach().to("cpu", torch.float64))
        return "\n  ".join([f"values differ beyond the tolerance (atol={options.get('atol', 1e-5)}, "
                            f"rtol={options.get('rtol', 1e-4)})"] + clues)
    if kind == "equal":
        return f"expected {_describe(expected)}, got a different value"
    if kind == "between":
        bounds = zip(("at least", "at most"), expected)
        return "expected a number " + " and ".join(f"{side} {value:g}" for side, value in bounds if value is not None)
    if kind == "raises":
        raised = actual.get("raised") or []
        if not raised:
            return f"expected a {expected} to be raised, but the call returned normally"
        return f"expected a {expected}, but your code raised {_builtin_exception(raised[0]) or 'another exception'}"
    return ("your code called PyTorch's built-in attention; this assignment asks you to write it from matmuls and "
            "softmax yourself")


def _stopped_message(error, error_hidden, next_check):
    if error:
        return _error_message(error, error_hidden)
    return f"the test stopped before the check '{next_check['what']}'"


def _error_message(error, hidden):
    """What the student's code raised: its type, message and line -- for a hidden region, its type
    alone, and only when it is one of Python's own."""
    name = str(error.get("type", ""))
    if hidden:
        text = f"your code raised {_builtin_exception(name) or 'an exception'}"
    else:
        text = f"your code raised {name or 'an exception'}: {error.get('message', '')}".rstrip(": ")
    if name == "NotImplementedError":
        text += "\n  (this part is not implemented yet: replace the `raise NotImplementedError` line)"
    if error.get("where") and not hidden:
        text += f"\n  in {error['where']}"
    return text


def judge_notebook(trace, student_records, static_findings=()):
    """Verdicts for every test cell of the trace, in order."""
    return [judge_cell(trusted, student_records.get(gid), static_findings, trace.split.get(gid))
            for gid, trusted in trace.records.items()]
