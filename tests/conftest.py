import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


@pytest.fixture(scope="session")
def a1_solution_nb():
    from grader import notebook as nbtools
    from grader.course import SOURCE_DIR
    return nbtools.read(nbtools.notebook_path(SOURCE_DIR, "a1_self_attention"))
