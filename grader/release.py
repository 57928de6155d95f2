"""`release`: regenerate assignments/ from solutions/, always overwriting; `sync`: refresh
every provided cell from grader/provided/ (the one source of truth for shared code)."""
import shutil
import tempfile
from pathlib import Path

import nbformat

from . import notebook as nbtools
from .course import RELEASE_DIR, SOURCE_DIR, ensure_venv_bin_on_path, nbgrader_api
from .provided import provided_source


class ReleaseError(RuntimeError):
    pass


def stale_provided_cells(nb):
    """(grade id, file) of each provided cell whose source differs from grader/provided/."""
    return [(nbtools.grade_id(cell), name) for cell in nb.cells
            if (name := nbtools.provided_file(cell)) and cell.source != provided_source(name).strip("\n")]


def sync_provided(assignment_id):
    """Rewrite the provided cells of a source notebook; returns the files it refreshed."""
    path = nbtools.notebook_path(SOURCE_DIR, assignment_id)
    nb = nbtools.read(path)
    stale = stale_provided_cells(nb)
    for cell in nb.cells:
        if name := nbtools.provided_file(cell):
            cell.source = provided_source(name).strip("\n")
    if stale:
        nbformat.write(nb, str(path))
    return [name for _, name in stale]


def generate_release(assignment_id, release_dir, db_url=None, course_dir=None):
    """Run nbgrader's generate_assignment from solutions/ into release_dir (forced)."""
    ensure_venv_bin_on_path()
    overrides = {"release_dir": Path(release_dir)}
    if course_dir is not None:
        overrides.update(course_dir=Path(course_dir), root=Path(course_dir))
    if db_url is not None:
        overrides["db_url"] = db_url
    api = nbgrader_api(**overrides)
    result = api.generate_assignment(assignment_id, force=True, create=True)
    if not result.get("success"):
        raise ReleaseError(f"nbgrader could not generate {assignment_id}:\n{result.get('error') or result.get('log')}")
    return Path(release_dir) / assignment_id


def release(assignment_id):
    """Sync provided cells, then regenerate assignments/<id> (and the course gradebook's
    record of the assignment)."""
    sync_provided(assignment_id)
    target = RELEASE_DIR / assignment_id
    if target.exists():
        shutil.rmtree(target)   # nbgrader skips an existing release unless forced; be explicit
    return generate_release(assignment_id, RELEASE_DIR)


def release_differences(assignment_id):
    """Files of assignments/<id> that differ from what `release` would write now."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate_release(assignment_id, Path(tmp) / "release", course_dir=Path(tmp) / "course",
                                 db_url=f"sqlite:///{tmp}/gradebook.db")
        committed = RELEASE_DIR / assignment_id
        names = {p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()}
        if committed.exists():
            names |= {p.relative_to(committed) for p in committed.rglob("*") if p.is_file()}
        differing = []
        for name in sorted(names):
            a, b = fresh / name, committed / name
            if not (a.exists() and b.exists() and a.read_bytes() == b.read_bytes()):
                differing.append(str(name))
        return differing
