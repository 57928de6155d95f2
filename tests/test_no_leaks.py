"""Student-facing files never carry hidden test text: the released notebooks (and anything else
under assignments/). Feedback pages are checked by the corpus test on real graded output."""
import pytest

from grader import notebook as nbtools
from grader.course import RELEASE_DIR, SOURCE_DIR, assignment_ids


@pytest.mark.parametrize("assignment_id", assignment_ids())
def test_release_has_no_hidden_test_text(assignment_id):
    secret = nbtools.secret_lines(nbtools.read(nbtools.notebook_path(SOURCE_DIR, assignment_id)))
    assert len(secret) > 10, "expected hidden tests in the source notebook"
    for path in (RELEASE_DIR / assignment_id).rglob("*"):
        if path.is_file():
            text = path.read_text(errors="ignore")
            assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text
            if path.suffix == ".ipynb":
                lines = {line.strip() for cell in nbtools.read(path).cells for line in cell.source.splitlines()}
            else:
                lines = {line.strip() for line in text.splitlines()}
            leaked = sorted(secret & lines)
            assert not leaked, f"{path}: hidden test text {leaked[:2]}"
