"""The notebooks a student would have, from the grader's own sample builders: the release with
the solution cells filled in (correct), or with one catalogued bug (sin and cos swapped)."""
from grader.samples import buggy_submission, perfect_submission

from . import COURSE, REPO

AID = "a1_self_attention"
RELEASE_NB = REPO / "assignments" / AID / f"{AID}.ipynb"


def student_notebook(bug=None):
    """bug=None: every solution cell (code and written answers) filled in; bug="swap_sin_cos":
    the same with sinusoidal_positional_encoding's sin and cos swapped."""
    if bug is None:
        return perfect_submission(COURSE, AID)
    if bug == "swap_sin_cos":
        return buggy_submission(COURSE, AID, "sin_cos_swapped")[0]
    raise ValueError(bug)
