"""What kind of cell is this? One place for the course's reading of nbgrader metadata."""
import ast
import json
import re
import threading

import nbformat
from nbformat.reader import NotJSONError


def nbgrader_meta(cell):
    """The cell's nbgrader metadata; {} when it has none, or something that is not a dict."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def grade_id(cell):
    return nbgrader_meta(cell).get("grade_id")


def is_test_cell(cell):
    """An auto-graded code cell: its points depend on the checks it runs."""
    meta = nbgrader_meta(cell)
    return cell.get("cell_type") == "code" and meta.get("grade", False) and not meta.get("solution", False)


def is_answer_cell(cell):
    """A code cell the student writes (nbgrader's solution cell)."""
    return cell.get("cell_type") == "code" and bool(nbgrader_meta(cell).get("solution", False))


def is_written_answer(cell):
    meta = nbgrader_meta(cell)
    return cell.get("cell_type") == "markdown" and meta.get("grade", False) and meta.get("solution", False)


def is_locked(cell):
    meta = nbgrader_meta(cell)
    return bool(meta.get("locked", False)) and not meta.get("solution", False)


def provided_file(cell):
    return cell.get("metadata", {}).get("course", {}).get("provided")


def test_cells(nb):
    return [cell for cell in nb.cells if is_test_cell(cell)]


def points(cell):
    return float(nbgrader_meta(cell).get("points", 0))


def test_points(nb):
    """{grade id: points} of the notebook's test cells, in notebook order."""
    return {grade_id(cell): points(cell) for cell in test_cells(nb)}


def max_auto_points(nb):
    return sum(test_points(nb).values())


# CPython 3.11's parser keeps its recursion-depth count per interpreter, not per thread: two grading
# threads parsing at once can fail with "SystemError: AST constructor recursion depth mismatch". Every
# ast.parse the grader may run in a grading thread (the cells, the labs' repair stage, a catalogue loaded
# there) goes through `parse`, or holds PARSE_LOCK (inspect.getsource parses the whole file).
PARSE_LOCK = threading.Lock()


def parse(source):
    """ast.parse, one thread at a time (grading threads parse student cells in parallel)."""
    with PARSE_LOCK:
        return ast.parse(source)


def defined_names(source):
    """Top-level function and class names a cell defines (None if it does not parse)."""
    try:
        tree = parse(source)
    except SyntaxError:
        return None
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def read(path):
    """Read a notebook; raise ValueError with a plain reason if it is not one."""
    try:
        with open(path, encoding="utf-8") as handle:
            return nbformat.read(handle, as_version=4)
    except NotJSONError as error:
        raise ValueError(f"not a readable notebook (invalid JSON: {str(error)[:80]})") from error
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"not a readable notebook (invalid JSON: {error})") from error
    except Exception as error:  # nbformat raises several types for malformed notebooks
        raise ValueError(f"not a readable notebook ({type(error).__name__}: {error})") from error


_SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def without_solution_markers(source):
    """A solution cell's source as the reference solution runs it: the ### BEGIN/END SOLUTION lines
    gone, everything else as it is."""
    return _SOLUTION_MARKERS.sub("", source)


def secret_lines(nb, min_length=26):
    """Lines that only hidden-test regions contain (long enough to be distinctive): what must
    never appear in anything a student sees."""
    hidden, visible = set(), set()
    for cell in nb.cells:
        inside = False
        for line in cell.source.splitlines():
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            else:
                (hidden if inside else visible).add(line.strip())
    return {line for line in hidden - visible if len(line) >= min_length}
