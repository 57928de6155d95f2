"""Student-facing files never carry hidden test text: the released notebooks (and anything else
under assignments/). Feedback pages are checked by the corpus test on real graded output."""
import pytest

from grader import cells, labs
from support import ASSIGNMENT_IDS, LAB_IDS


@pytest.mark.parametrize("assignment_id", ASSIGNMENT_IDS + LAB_IDS)
def test_release_has_no_hidden_test_text(course, assignment_id):
    secret = labs.secret_lines(course, assignment_id)
    assert len(secret) > 10, "expected hidden tests in the source notebook"
    for path in (course.release_dir / assignment_id).rglob("*"):
        if path.is_file():
            text = path.read_text(errors="ignore")
            assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text
            if path.suffix == ".ipynb":
                lines = {line.strip() for cell in cells.read(path).cells for line in cell.source.splitlines()}
            else:
                lines = {line.strip() for line in text.splitlines()}
            leaked = sorted(secret & lines)
            assert not leaked, f"{path}: hidden test text {leaked[:2]}"
