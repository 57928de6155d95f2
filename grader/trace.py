"""The trusted trace: the reference solution run in this process through each test cell's trusted
code (grader/split.py), recording for every check what it expects. Computed once per source notebook
and device in a process: every grading folder of a course (autograde's, the demo's, the gate's) shares it."""
from functools import lru_cache
from pathlib import Path

from . import cells
from .inprocess import run_in_process
from .judging import Trace
from .split import split_notebook


def solution_trace(course, assignment_id, device=None):
    return _trace_of(Path(course.source_notebook(assignment_id)).resolve(), device)


@lru_cache(maxsize=None)
def _trace_of(source_notebook, device):
    nb = cells.read(source_notebook)
    split = split_notebook(nb)
    records, errors = run_in_process(nb, keep_expected=True, device=device, split=split)
    return Trace(records, errors, split)
