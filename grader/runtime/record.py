"""The answer recorder: runs the kernel half of each test cell beside the student's code and
records what the student's code returned.

This file must stand alone (standard library and torch only): at grading time its source is sent
into the student's kernel. What it runs there is each test cell's *kernel code* (grader/split.py):
the inputs, the calls into the student's code, and `__observe__(site, thunk)` where the test had a
check. It holds no expected value, message, hint, tolerance or reference implementation, and it
judges nothing: the grader compares the recorded answers with the reference solution's in its own
process (grader/judging.py). Student code can read or replace everything here; all it can
change is the answers it reports, which is what it computes anyway.

The kernel code of a cell arrives just before the cell runs, as a marshalled code object in a file
the grader's worker writes into the kernel's folder (`inbox`); it is read, removed and run, so it
never enters IPython's history, and no source text of it exists in the kernel.
"""
import marshal
import os
import sys
import traceback

RECORD_VERSION = 2


class TestRecorder:
    def __init__(self, checks_source, records_dir=None, inbox=None, python=None):
        if python is not None and tuple(python) != tuple(sys.version_info[:2]):
            raise RuntimeError(f"the kernel's Python {sys.version_info[0]}.{sys.version_info[1]} is not the "
                               f"grader's {python[0]}.{python[1]}: grade with the environment the kernel runs")
        helpers = {"__name__": "course_checks"}
        exec(compile(checks_source, "<course checks>", "exec"), helpers)
        self._helpers = helpers
        self.records_dir = records_dir
        self.inbox = inbox
        self.test_names = {}  # names that earlier test cells defined, for the test cells after them

    def run_test(self, grade_id, user_namespace, code=None):
        """Run one test cell's kernel code (`code`, a code object; else the one waiting in the inbox)."""
        observations = []
        if code is None:
            code = self._take_from_inbox()

        def observe(site, thunk):
            try:
                observations.append({"site": site, "value": self._helpers["plain_value"](thunk())})
            except Exception as exception:  # noqa: BLE001 - an exception is the answer to record
                observations.append({"site": site, **describe_exception(exception)})

        namespace = dict(user_namespace)
        namespace.update(self.test_names)
        namespace.update(__observe__=observe, __forbidden_ops__=self.forbidden_ops)
        error = None
        try:
            exec(code, namespace)
        except BaseException as exception:  # noqa: BLE001 - every failure is part of the record
            error = describe_exception(exception)
        for name, value in namespace.items():
            if user_namespace.get(name, _MISSING) is not value and not name.startswith("__"):
                self.test_names[name] = value
        record = {"version": RECORD_VERSION, "grade_id": grade_id, "observations": observations, "error": error}
        if self.records_dir is not None:
            import torch
            os.makedirs(self.records_dir, exist_ok=True)
            torch.save(record, os.path.join(self.records_dir, f"{grade_id}.pt"))
        return record

    def forbidden_ops(self, function, *args, **kwargs):
        """The names of every torch function and operator that function(*args, **kwargs) used: the
        notebook's own check_no_forbidden_calls, made to hand its list over instead of judging it."""
        seen = []
        helpers = self._helpers
        judge = helpers["_observe"]
        helpers["_observe"] = lambda kind, names, *rest: seen.extend(names)
        try:
            helpers["check_no_forbidden_calls"](function, *args, what="", **kwargs)
        finally:
            helpers["_observe"] = judge
        return seen

    def _take_from_inbox(self):
        try:
            with open(self.inbox, "rb") as handle:
                code = marshal.loads(handle.read())
        except (OSError, ValueError, EOFError, TypeError) as error:
            raise RuntimeError(f"the grader's test code did not arrive ({type(error).__name__})") from None
        finally:
            try:
                os.remove(self.inbox)
            except OSError:
                pass
        return code


_MISSING = object()


def describe_exception(exception):
    """What an exception says: its class names (most derived first), its message, the last line of
    *student* code it came through (the test's own frames have no source here), and the test code's
    line it left (the grader tells a hidden region's error from a visible one's by it)."""
    where, test_line = None, None
    for frame in traceback.extract_tb(exception.__traceback__):
        if frame.filename.startswith("<test "):
            test_line = frame.lineno
        elif not frame.filename.startswith("<course checks>") and "grader" not in frame.filename:
            where = f"{frame.name}, line {frame.lineno}" + (f": {frame.line.strip()}" if frame.line else "")
    names = [cls.__name__ for cls in type(exception).__mro__]
    try:
        message = str(exception)[:500]
    except Exception:  # noqa: BLE001 - an exception whose text cannot be made has none
        message = ""
    return {"type": names[0], "raised": names, "message": message, "where": where, "test_line": test_line}


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
