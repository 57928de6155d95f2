"""The trusted trace: the reference solution run in this process through each test cell's trusted
code (grader/split.py), recording for every check what it expects. Computed once per course,
assignment and device in a process."""
from functools import lru_cache

from . import cells
from .inprocess import run_in_process
from .judging import Trace
from .split import split_notebook


@lru_cache(maxsize=None)
def solution_trace(course, assignment_id, device=None):
    nb = cells.read(course.source_notebook(assignment_id))
    split = split_notebook(nb)
    records, errors = run_in_process(nb, keep_expected=True, device=device, split=split)
    return Trace(records, errors, split)
