"""`release`: regenerate assignments/ from solutions/, always overwriting; `sync`: refresh
every provided cell from grader/provided/ (the one source of truth for shared code), the
device helper region of every setup cell (solutions and lectures) from grader/provided/device.py,
and the lectures' progress bar from grader/provided/progress.py."""
import re
import shutil
import tempfile
from pathlib import Path

import nbformat

from . import cells, labs
from .provided import provided_source


class ReleaseError(RuntimeError):
    pass


def stale_provided_cells(nb):
    """(grade id, file) of each provided cell whose source differs from grader/provided/."""
    return [(cells.grade_id(cell), name) for cell in nb.cells
            if (name := cells.provided_file(cell)) and cell.source != provided_source(name).strip("\n")]


def sync_provided(course, assignment_id):
    """Rewrite the provided cells and the device helper region of a source notebook, and a
    debugging lab's copies of its assignment and answer key (grader/labs.py); returns what it
    refreshed."""
    path = course.source_notebook(assignment_id)
    nb = cells.read(path)
    stale = stale_provided_cells(nb)
    for cell in nb.cells:
        if name := cells.provided_file(cell):
            cell.source = provided_source(name).strip("\n")
    device_refreshed = apply_device_helper(nb)
    lab_refreshed = labs.lab_spec(nb) is not None and labs.sync_lab(course, assignment_id, nb)
    if stale or device_refreshed or lab_refreshed:
        nbformat.write(nb, str(path))
    return ([name for _, name in stale] + ([DEVICE_FILE] if device_refreshed else [])
            + ([f"the copies of {labs.lab_spec(nb)['assignment']} and the answer key"] if lab_refreshed else []))


# ---- the device helper: one region of the setup cell, copied from grader/provided/device.py ----

DEVICE_FILE = "device.py"
DEVICE_BEGIN = "# --- device helper: grader/provided/device.py (do not edit) ---"
DEVICE_END = "# --- end of device helper ---"
DEVICE_CALL = "device = pick_device()"
_REGION = re.compile(re.escape(DEVICE_BEGIN) + r".*?" + re.escape(DEVICE_END)
                     + r"(\n" + re.escape(DEVICE_CALL) + r"(?=\n|$))?",
                     re.S)
_OLD_DEVICE_LINE = re.compile(r"^device\s*=.*\bcuda\b.*$", re.M)   # `device = "cuda" if ... else "cpu"`


def marked_region(filename, begin, end):
    """The lines of grader/provided/<filename> from the `begin` marker to the `end` marker, inclusive."""
    text = provided_source(filename)
    return text[text.index(begin):text.index(end) + len(end)]


def device_helper_source():
    """What every setup cell carries from grader/provided/device.py, followed by `device = pick_device()`."""
    return marked_region(DEVICE_FILE, DEVICE_BEGIN, DEVICE_END)


def device_setup_cell(nb):
    """The code cell that chooses the device: the one with the helper's begin marker, else the first
    with an old-style `device = ... cuda ...` line (what a sync converts); None if there is none."""
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    return next((cell for cell in code if DEVICE_BEGIN in cell.source), None) or \
        next((cell for cell in code if _OLD_DEVICE_LINE.search(cell.source)), None)


def apply_device_helper(nb):
    """Rewrite the device helper region of the notebook's setup cell from grader/provided/device.py
    (or replace an old-style `device = ...` line by it). Returns True if the source changed."""
    cell = device_setup_cell(nb)
    if cell is None:
        return False
    block = device_helper_source() + "\n" + DEVICE_CALL
    if DEVICE_BEGIN in cell.source:
        if DEVICE_END not in cell.source:
            raise ReleaseError("the device helper region in the setup cell has no end marker "
                               f"({DEVICE_END!r}); restore it, then sync again")
        new = _REGION.sub(lambda _: block, cell.source, count=1)
    else:
        new = _OLD_DEVICE_LINE.sub(lambda _: block, cell.source, count=1)
    changed = new != cell.source
    cell.source = new
    return changed


# ---- the lectures' progress bar: one region of the setup cell, from grader/provided/progress.py ----

PROGRESS_FILE = "progress.py"
PROGRESS_BEGIN = "# --- progress bar: grader/provided/progress.py (do not edit) ---"
PROGRESS_END = "# --- end of progress bar ---"
_PROGRESS_REGION = re.compile(re.escape(PROGRESS_BEGIN) + r".*?" + re.escape(PROGRESS_END), re.S)


def progress_helper_source():
    return marked_region(PROGRESS_FILE, PROGRESS_BEGIN, PROGRESS_END)


def apply_progress_helper(nb):
    """Rewrite the progress-bar region (where a cell has one) from grader/provided/progress.py.
    Returns True if a source changed."""
    changed = False
    for cell in nb.cells:
        if cell.cell_type != "code" or PROGRESS_BEGIN not in cell.source:
            continue
        if PROGRESS_END not in cell.source:
            raise ReleaseError(f"the progress-bar region has no end marker ({PROGRESS_END!r}); "
                               "restore it, then sync again")
        new = _PROGRESS_REGION.sub(lambda _: progress_helper_source(), cell.source, count=1)
        changed, cell.source = changed or new != cell.source, new
    return changed


def lecture_paths(course):
    return sorted(course.lectures_dir.glob("[0-9][0-9]_*.ipynb"))


def sync_lectures(course):
    """Refresh the device helper and the progress bar of every lecture; returns the names of the
    lectures it rewrote."""
    rewritten = []
    for path in lecture_paths(course):
        nb = cells.read(path)
        if apply_device_helper(nb) | apply_progress_helper(nb):
            nbformat.write(nb, str(path))
            rewritten.append(path.name)
    return rewritten


def generate_release(course, assignment_id, release_dir, db_url=None):
    """Run nbgrader's generate_assignment from solutions/ into release_dir (forced), recording the
    assignment in the gradebook at `db_url` (default: the course's); in a debugging lab, then plant
    the bugs in the released code."""
    api = course.nbgrader_api(release_dir=Path(release_dir), db_url=db_url)
    result = api.generate_assignment(assignment_id, force=True, create=True)
    if not result.get("success"):
        raise ReleaseError(f"nbgrader could not generate {assignment_id}:\n{result.get('error') or result.get('log')}")
    if labs.is_lab(course, assignment_id):
        try:
            labs.plant_in_release(course, assignment_id, Path(release_dir))
        except labs.LabError as error:
            raise ReleaseError(str(error)) from error
    return Path(release_dir) / assignment_id


def release(course, assignment_id):
    """Sync provided cells, then regenerate assignments/<id> (and the course gradebook's
    record of the assignment)."""
    sync_provided(course, assignment_id)
    target = course.release_dir / assignment_id
    if target.exists():
        shutil.rmtree(target)   # nbgrader skips an existing release unless forced; be explicit
    return generate_release(course, assignment_id, course.release_dir)


def release_differences(course, assignment_id):
    """Files of assignments/<id> that differ from what `release` would write now."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = course.with_grading_dir(Path(tmp) / "course")
        fresh = generate_release(scratch, assignment_id, Path(tmp) / "release", db_url=f"sqlite:///{tmp}/gradebook.db")
        committed = course.release_dir / assignment_id
        names = {p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()}
        if committed.exists():
            names |= {p.relative_to(committed) for p in committed.rglob("*") if p.is_file()}
        differing = []
        for name in sorted(names):
            a, b = fresh / name, committed / name
            if not (a.exists() and b.exists() and a.read_bytes() == b.read_bytes()):
                differing.append(str(name))
        return differing
