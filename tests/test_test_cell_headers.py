"""Every test cell of every assignment opens with one line that names it and its points, as its nbgrader
metadata does: `# test_self_attention_module (2 points)`. The line comes before any `### BEGIN HIDDEN TESTS`,
so the released notebook shows it too: a student reads which cell is worth what without opening the cell's
metadata, and the names match the feedback and the grade report. Checked in solutions/ (the source) and in
assignments/ (what students get). Fast: no kernel."""
import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
def header(grade_id, points):
    """The first line a test cell must have: `# <grade_id> (<points> point[s])`."""
    points = float(points)
    return f"# {grade_id} ({points:g} point{'' if points == 1 else 's'})"


def _notebooks():
    found = []
    for folder in ("solutions", "assignments"):
        for path in sorted((REPO / folder).glob("a*_*/a*_*.ipynb")):
            assignment = path.parent.name
            found.append(pytest.param(path, id=f"{folder}/{assignment}"))
    return found


NOTEBOOKS = _notebooks()


def _test_cells(path):
    nb = nbformat.read(str(path), as_version=4)
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            yield index, meta, cell.source


def test_there_are_notebooks_to_check():
    assert len(NOTEBOOKS) >= 8, [p.values[0].name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_every_test_cell_names_itself_and_its_points(path):
    cells = list(_test_cells(path))
    assert cells, f"{path.relative_to(REPO)} has no test cells"
    wrong = []
    for index, meta, source in cells:
        expected = header(meta["grade_id"], meta.get("points", 0))
        first = source.split("\n", 1)[0]
        if first != expected:
            wrong.append(f"[cell {index}] starts with {first[:70]!r}; expected {expected!r}")
    assert not wrong, (f"{path.relative_to(REPO)}: a test cell's first line names the cell and its points, as its "
                       "nbgrader metadata does, above any hidden region (edit solutions/, then `grader release`):\n  "
                       + "\n  ".join(wrong))


@pytest.mark.parametrize("grade_id, points, line", [
    ("test_sdpa_masks", 3, "# test_sdpa_masks (3 points)"),
    ("test_causal_mask", 1, "# test_causal_mask (1 point)"),
    ("test_causal_mask", 1.0, "# test_causal_mask (1 point)"),
    ("test_half", 0.5, "# test_half (0.5 points)"),
])
def test_the_header_reads_as_intended(grade_id, points, line):
    assert header(grade_id, points) == line
    assert re.fullmatch(r"# \w+ \(\d+(\.\d+)? points?\)", line)
