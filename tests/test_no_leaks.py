"""Student-facing files never carry hidden test text: the released notebooks (and anything else
under assignments/). Feedback pages are checked by the corpus test on real graded output."""
import pytest

from grader import notebook as nbtools
from grader.course import RELEASE_DIR, SOURCE_DIR, assignment_ids


def hidden_and_visible_lines(assignment_id):
    """Lines of the source notebook inside hidden-test regions, and every other line of it."""
    source = nbtools.read(nbtools.notebook_path(SOURCE_DIR, assignment_id))
    hidden, visible = set(), set()
    for cell in source.cells:
        inside = False
        for line in cell.source.splitlines():
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            elif inside:
                hidden.add(line.strip())
            else:
                visible.add(line.strip())
    return {line for line in hidden if len(line) > 25}, visible


@pytest.mark.parametrize("assignment_id", assignment_ids())
def test_release_has_no_hidden_test_text(assignment_id):
    hidden, visible = hidden_and_visible_lines(assignment_id)
    secret = hidden - visible   # a line the visible part also has is no secret
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
