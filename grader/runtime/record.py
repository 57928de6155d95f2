"""The test recorder: runs one test cell and records what each check observed.

This file must stand alone (standard library and torch only): at grading time its source is
sent into the student's kernel, where it runs each test cell in a namespace of its own and
writes the observations to a file. The verdict is never given there: a trusted process
compares the recorded `actual` values with the expected values from the reference solution
(see grader/stages/judge.py). Whatever the student's code replaces in its own kernel can only change
the values it reports, which it could have computed honestly anyway.

Each observation also says whether the check passed here, against the expected value the test
computed in this kernel (`passed_here`), as the student saw it in their notebook. It never gives a
point: where it disagrees with the trusted verdict the judge asks the instructor to review the
cell, so that a correct answer the reference's recorded value does not foresee is seen before a
student is wronged.
"""
import os
import traceback


class TestRecorder:
    def __init__(self, checks_source, records_dir=None, keep_expected=False):
        # compiled once: every test cell gets a fresh namespace, not a fresh compile (3 ms each)
        self.checks_code = compile(checks_source, "<course checks>", "exec")
        self.records_dir = records_dir
        self.keep_expected = keep_expected
        self.test_names = {}  # names that earlier test cells defined (never shown to student code)

    def _fresh_checks(self, observations):
        """A private copy of the check helpers whose _observe records instead of judging."""
        helpers = {"__name__": "course_checks"}
        exec(self.checks_code, helpers)
        plain_value, comparisons = helpers["plain_value"], helpers["COMPARISONS"]

        def record(kind, actual, expected, what, hint, options):
            actual, expected = plain_value(actual), plain_value(expected)
            observation = {"kind": kind, "what": what, "hint": hint, "options": dict(options), "actual": actual}
            if self.keep_expected:
                observation["expected"] = expected
            try:
                observation["passed_here"] = comparisons[kind](actual, expected, **options) is None
            except Exception:  # noqa: BLE001 - a comparison that cannot run here says nothing
                observation["passed_here"] = None
            observations.append(observation)

        helpers["_observe"] = record
        return helpers

    def run_test(self, grade_id, source, user_namespace):
        observations = []
        helpers = self._fresh_checks(observations)
        namespace = dict(user_namespace)
        namespace.update(self.test_names)
        namespace.update({name: value for name, value in helpers.items() if name.startswith("check_")})
        error = None
        try:
            exec(compile(source, f"<test {grade_id}>", "exec"), namespace)
        except BaseException as exception:  # noqa: BLE001 - every failure is part of the record
            error = describe_exception(exception)
        for name, value in namespace.items():
            if user_namespace.get(name, _MISSING) is not value and not name.startswith("check_"):
                self.test_names[name] = value
        record = {"grade_id": grade_id, "observations": observations, "error": error}
        if self.records_dir is not None:
            import torch
            os.makedirs(self.records_dir, exist_ok=True)
            torch.save(record, os.path.join(self.records_dir, f"{grade_id}.pt"))
        return record


_MISSING = object()


def describe_exception(exception):
    """Type, message and the last line of *student* code it came through (test code's own
    frames are left out: their source is hidden)."""
    where = None
    for frame in traceback.extract_tb(exception.__traceback__):
        if not frame.filename.startswith(("<test ", "<course checks>")) and "grader" not in frame.filename:
            where = f"{frame.name}, line {frame.lineno}" + (f": {frame.line.strip()}" if frame.line else "")
    return {"type": type(exception).__name__, "message": str(exception)[:500], "where": where}




def flop_counter_without_dynamo():
    """FlopCounterMode dispatches through a method that torch wraps to keep torch.compile out of
    it, and the wrapper's first call imports torch._dynamo: about 1 s of CPU for every graded
    notebook that counts FLOPs (a3, a4). Nothing is compiled while grading, so the grader's
    kernels use the plain method: the same counts, without that import."""
    try:
        from torch.utils.flop_counter import _FlopCounterMode
    except ImportError:  # a torch without it: leave everything as it is
        return
    method = _FlopCounterMode.__dict__.get("__torch_dispatch__")
    if hasattr(method, "__wrapped__"):
        _FlopCounterMode.__torch_dispatch__ = method.__wrapped__
