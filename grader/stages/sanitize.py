"""Stage 2: make the submission safe to run, with nbgrader's own preprocessors.

Restores locked and test cells from the source (a student cannot edit a test), re-adds deleted
test cells, drops duplicated grade ids, turns cells the assignment does not have into ordinary
cells, resets the kernelspec; then reports what it changed."""
import logging

from nbgrader.preprocessors import (CheckCellMetadata, ClearOutput, DeduplicateIds, OverwriteCells,
                                    OverwriteKernelspec)
from traitlets.config import Config

from .. import notebook as nbtools


class SanitizeError(ValueError):
    pass


def sanitize(nb, assignment_id, student, db_url, released):
    """Returns (sanitized notebook, notes about what had to be repaired); `released` is the
    release notebook, to tell a student's edit from the hidden tests put back."""
    before = {nbtools.grade_id(c): c.source for c in nb.cells if nbtools.grade_id(c)}
    release_sources = {nbtools.grade_id(c): c.source for c in released.cells if nbtools.grade_id(c)}
    config = Config()
    config.OverwriteCells.add_missing_cells = True
    resources = {"nbgrader": {"db_url": db_url, "assignment": assignment_id, "notebook": assignment_id,
                              "student": student}}
    quiet = logging.getLogger("sanitize")
    quiet.setLevel(logging.ERROR)
    types_before = {nbtools.grade_id(c): c.cell_type for c in nb.cells if nbtools.grade_id(c)}
    counts = {}
    for cell in nb.cells:
        counts[nbtools.grade_id(cell)] = counts.get(nbtools.grade_id(cell), 0) + 1
    duplicated = sorted(g for g, n in counts.items() if g and n > 1)
    extras = _IgnoreUnknownCells(set(release_sources))
    nb, resources = extras.preprocess(nb, resources)
    try:
        for stage in (ClearOutput, DeduplicateIds, _DropEmptyMetadata, OverwriteKernelspec, OverwriteCells,
                      CheckCellMetadata):
            nb, resources = stage(config=config, log=quiet).preprocess(nb, resources)
    except Exception as error:  # nbgrader's validators raise several types
        raise SanitizeError(f"the notebook's grading metadata is broken ({type(error).__name__}: {error})") from error
    notes = []
    if extras.ignored:
        notes.append("cells the assignment does not have ran but were not graded: " + ", ".join(extras.ignored))
    if duplicated:
        notes.append("duplicated cells ignored (the last copy was graded): " + ", ".join(duplicated))
    retyped = sorted(g for g, t in types_before.items()
                     if any(nbtools.grade_id(c) == g and c.cell_type != t for c in nb.cells))
    if retyped:
        notes.append("changed cell types restored: " + ", ".join(retyped))
    after = {nbtools.grade_id(c): c.source for c in nb.cells if nbtools.grade_id(c)}
    restored = sorted(g for g in after if g in before and g in release_sources
                      and before[g] != release_sources[g] and _is_test_or_locked(nb, g))
    missing = sorted(g for g in after if g not in before)
    if restored:
        notes.append("edited read-only cells restored: " + ", ".join(restored))
    if missing:
        notes.append("deleted cells re-added: " + ", ".join(missing))
    return nb, notes


class _IgnoreUnknownCells:
    """Cells with grading metadata the assignment does not have (an extra graded cell with an id of
    its own, a test cell pasted and renamed, metadata without an id, or not a dict at all) would stop
    nbgrader (KeyError: 'grade_id' and the like) and leave the student without a grade. They become
    ordinary cells: they still run, in order, and are never graded."""

    def __init__(self, known_ids):
        self.known_ids = known_ids
        self.ignored = []

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", None)
            if meta is None or meta == {}:
                continue
            grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
            if grade_id not in self.known_ids:
                self.ignored.append(str(grade_id) if grade_id else f"a {cell.get('cell_type', '')} cell without an id")
                del cell.metadata["nbgrader"]
        return nb, resources


class _DropEmptyMetadata:
    """DeduplicateIds leaves `nbgrader: {}` on the copies it disowns, which nbgrader's own
    metadata validator then rejects; such a copy is an ordinary cell."""

    def __init__(self, **_):
        pass

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if cell.get("metadata", {}).get("nbgrader", None) == {}:
                del cell.metadata["nbgrader"]
        return nb, resources


def _is_test_or_locked(nb, gid):
    return any(nbtools.grade_id(c) == gid and (nbtools.is_test_cell(c) or nbtools.is_locked(c)) for c in nb.cells)
