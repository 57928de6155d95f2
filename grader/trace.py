"""The trusted trace: the reference solution run in this process, recording for every check
the expected value. Computed once per course, assignment and device in a process."""
from functools import lru_cache

from . import cells
from .inprocess import run_in_process
from .stages.judge import Trace


@lru_cache(maxsize=None)
def solution_trace(course, assignment_id, device=None):
    nb = cells.read(course.source_notebook(assignment_id))
    records, errors = run_in_process(nb, keep_expected=True, device=device)
    return Trace(records, errors)
