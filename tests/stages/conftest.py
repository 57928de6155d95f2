"""The stage tests' shared batch (tests/support/grading.py has the helpers)."""
import pytest

from support.grading import DUE, open_batch


@pytest.fixture(scope="module")
def a1_batch(course, tmp_path_factory):
    """A prepared a1 batch with a due date (DUE), shared by a module's tests; give each test its own
    student names."""
    with open_batch(course, tmp_path_factory.mktemp("stages"), due=DUE) as batch:
        yield batch.prepare()
