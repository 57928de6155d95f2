"""The lectures and solutions are readable without seeing their figures, and navigable by heading
(WCAG 2.1 AA: 1.1.1 non-text content, 1.3.1 info and relationships, 2.4.6 headings).

Every code cell that draws a figure (an image in its stored outputs, or a `plt.show()` it runs itself,
not one inside a function it only defines) is followed by a markdown cell that begins "Figure:" and
says in words what the figure shows. Every notebook has exactly one `#` title and never skips a
heading level going down (a `###` straight under a `#` is skipped `##`). Fast: reads notebooks only.
"""
import ast
import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "lectures").glob("[0-9][0-9]_*.ipynb")) + sorted((REPO / "solutions").glob("*/*.ipynb"))

# pending: their figures have no "Figure:" text alternative yet (remove a notebook once it has them)
NOT_YET_DESCRIBED = set()

FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})(\s|$)")


def _name(path):
    return path.relative_to(REPO).as_posix()


def _cells(path):
    return nbformat.read(str(path), as_version=4).cells


def _runs_plt_show(source):
    """Whether the cell calls plt.show() itself: at top level or inside if/for/with/try, not only in
    the body of a function or class it defines. IPython magics and shell lines are left out."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "plt.show()" in source
    found, todo = False, list(tree.body)
    while todo and not found:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "show"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "plt"):
            found = True
        todo.extend(ast.iter_child_nodes(node))
    return found


def _draws_figure(cell):
    if cell.cell_type != "code":
        return False
    outputs = cell.get("outputs", [])
    has_image = any(key.startswith("image/") for output in outputs for key in output.get("data", {}))
    return has_image or _runs_plt_show(cell.source)


def _headings(cells):
    """(level, text) of every markdown heading, in order, leaving out lines inside ``` or ~~~ fences."""
    found = []
    for cell in cells:
        if cell.cell_type != "markdown":
            continue
        fenced = False
        for line in cell.source.splitlines():
            if FENCE.match(line):
                fenced = not fenced
            elif not fenced and (match := HEADING.match(line)):
                found.append((len(match.group(1)), line.strip()))
    return found


def test_the_pending_set_names_real_notebooks():
    names = {_name(path) for path in NOTEBOOKS}
    assert NOT_YET_DESCRIBED <= names, f"not a notebook of the course: {sorted(NOT_YET_DESCRIBED - names)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_every_figure_has_a_text_alternative(path):
    cells = _cells(path)
    missing = [index for index, cell in enumerate(cells) if _draws_figure(cell)
               and not (index + 1 < len(cells) and cells[index + 1].cell_type == "markdown"
                        and cells[index + 1].source.lstrip().startswith("Figure:"))]
    if _name(path) in NOT_YET_DESCRIBED:
        assert missing, (f"{_name(path)} now describes every figure: remove it from NOT_YET_DESCRIBED "
                         "so that the test keeps it so")
        pytest.skip(f"pending: {len(missing)} figure(s) without a text alternative")
    assert not missing, (
        f"{_name(path)}: the code cells {missing} (0-based) draw a figure but are not followed by a markdown "
        "cell beginning 'Figure:' that says what it shows (axes, series, and what the reader should see)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_name)
def test_headings_are_in_order(path):
    headings = _headings(_cells(path))
    titles = [text for level, text in headings if level == 1]
    assert len(titles) == 1, f"{_name(path)}: one '#' title, found {titles or 'none'}"
    assert headings[0][0] == 1, f"{_name(path)}: the '#' title comes first, found {headings[0][1]!r} before it"
    for (before, _), (level, text) in zip(headings, headings[1:]):
        assert level <= before + 1, (
            f"{_name(path)}: {text!r} (level {level}) follows a level-{before} heading: a level is skipped")
