"""The lectures as stored: executed top to bottom in one run, nothing machine-specific in the
outputs nbval compares, answers folded away, linked from the README. (nbval itself executes
them: `pytest --nbval-lax lectures/`.)"""
import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
LECTURES = sorted((REPO / "lectures").glob("[0-9][0-9]_*.ipynb"))
MACHINE_SPECIFIC = re.compile(r"(/home/|/root/|/tmp/|/work/|0x[0-9a-f]{6,})")


def test_the_lectures_in_order():
    numbers = [int(p.name[:2]) for p in LECTURES]
    assert numbers == list(range(1, 14)), f"lectures 01..13, each once: {[p.name for p in LECTURES]}"


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_lecture_is_executed_and_clean(path):
    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), "re-execute the lecture top to bottom in a fresh kernel"
    checked = [c for c in code if "nbval-check-output" in c.metadata.get("tags", [])]
    assert len(checked) >= 4, "mark the cells whose numbers matter with the nbval-check-output tag"
    for cell in code:
        for output in cell.outputs:
            assert output.output_type != "error", f"stored error output in {path.name}"
    for cell in checked:
        text = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
        assert not MACHINE_SPECIFIC.search(text), f"machine-specific output in a compared cell: {text[:120]}"
    last_markdown = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "Check your understanding" in last_markdown and "<details>" in last_markdown


def test_readme_links_every_lecture():
    readme = (REPO / "README.md").read_text()
    for path in LECTURES:
        assert f"lectures/{path.name}" in readme
