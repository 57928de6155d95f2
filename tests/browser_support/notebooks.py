"""Build the notebooks a student would have: the release notebook with the solution cells
filled in from solutions/ (correct), or with one realistic bug (sin and cos swapped)."""
import nbformat

from .lab import REPO

AID = "a1_self_attention"
RELEASE_NB = REPO / "assignments" / AID / f"{AID}.ipynb"
SOURCE_NB = REPO / "solutions" / AID / f"{AID}.ipynb"


def _grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def solution_sources():
    """grade_id -> the source cell's text (code, or a written answer) with the
    ### BEGIN/END SOLUTION lines dropped."""
    nb = nbformat.read(SOURCE_NB, as_version=4)
    out = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):      # code cells and the written (markdown) answers
            lines = [line for line in cell.source.splitlines()
                     if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")]
            out[meta["grade_id"]] = "\n".join(lines)
    return out


def student_notebook(bug=None):
    """The release notebook with every solution cell (code and written answers) filled in. bug="swap_sin_cos"
    swaps sin and cos in sinusoidal_positional_encoding."""
    nb = nbformat.read(RELEASE_NB, as_version=4)
    sources = solution_sources()
    if bug == "swap_sin_cos":
        src = sources["sinusoidal_solution"]
        buggy = (src.replace("torch.sin(angles)", "@@SIN@@").replace("torch.cos(angles)", "torch.sin(angles)")
                 .replace("@@SIN@@", "torch.cos(angles)"))
        assert buggy != src, "the sin/cos lines of the solution changed; update the bug"
        sources["sinusoidal_solution"] = buggy
    elif bug is not None:
        raise ValueError(bug)
    filled = 0
    for cell in nb.cells:
        if _grade_id(cell) in sources:
            assert "NotImplementedError" in cell.source or "YOUR ANSWER HERE" in cell.source, \
                _grade_id(cell)
            cell.source = sources[_grade_id(cell)]
            filled += 1
    assert filled == len(sources) and filled >= 5, (filled, sorted(sources))
    return nb
