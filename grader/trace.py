"""The trusted trace: the reference solution run in this process, recording for every check
the expected value. Computed once per assignment and process."""
from functools import lru_cache

from . import notebook as nbtools
from .course import SOURCE_DIR
from .inprocess import run_in_process
from .stages.judge import Trace


@lru_cache(maxsize=None)
def solution_trace(assignment_id, device=None):
    nb = nbtools.read(nbtools.notebook_path(SOURCE_DIR, assignment_id))
    records, errors = run_in_process(nb, keep_expected=True, device=device)
    return Trace(records, errors)
