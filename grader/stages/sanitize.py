"""sanitize: read the submission and make it safe to run, with nbgrader's own preprocessors.

Refuses what is not a notebook of this assignment; restores the grading metadata and the source of
locked and test cells from the source notebook (a student cannot edit a test, or turn it into an
ordinary cell), re-adds deleted test cells, drops duplicated grade ids, turns cells the assignment
does not have into ordinary cells, resets the kernelspec; then notes what it changed."""
import copy
import functools
import logging

import jsonschema
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.nbgraderformat.common import BaseMetadataValidator, SchemaTooNewError, SchemaTooOldError
from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, DeduplicateIds, OverwriteCells, OverwriteKernelspec
from traitlets.config import Config

from .. import cells
from ..submission import TEMPLATE_STUDENT, NotGraded

# the metadata that says how a cell is graded; a student's edit of any of it is undone
GRADING_FLAGS = ("grade", "solution", "locked", "points", "task")


def sanitize(submission, batch):
    """The submission's notebook, read, checked and restored, becomes `submission.notebook`; its
    working folder (with its own gradebook) `submission.workdir`."""
    aid = batch.assignment_id
    try:
        nb = cells.read(submission.path)
    except ValueError as error:
        raise NotGraded(str(error)) from error
    if not _belongs_to(nb, batch.released):
        raise NotGraded(f"this is not a {aid} notebook (none of its graded cells is there): "
                        "a different assignment submitted?")
    submission.workdir = batch.workspace(submission)
    submission.notebook, notes = restore(nb, aid, submission.db_url, batch.released)
    submission.notes += notes
    return submission


def restore(nb, assignment_id, db_url, released, student=TEMPLATE_STUDENT):
    """(sanitized notebook, notes about what had to be repaired); raises NotGraded when nbgrader
    cannot make sense of it. `db_url`: a gradebook holding the assignment's source cells;
    `released`: the release notebook, to tell a student's edit from the hidden tests put back."""
    before = {cells.grade_id(c): c.source for c in nb.cells if cells.grade_id(c)}
    release_sources = {cells.grade_id(c): c.source for c in released.cells if cells.grade_id(c)}
    config = Config()
    config.OverwriteCells.add_missing_cells = True
    resources = {"nbgrader": {"db_url": db_url, "assignment": assignment_id, "notebook": assignment_id,
                              "student": student}}
    quiet = logging.getLogger("sanitize")
    quiet.setLevel(logging.ERROR)
    types_before = {cells.grade_id(c): c.cell_type for c in nb.cells if cells.grade_id(c)}
    counts = {}
    for cell in nb.cells:
        counts[cells.grade_id(cell)] = counts.get(cells.grade_id(cell), 0) + 1
    duplicated = sorted(g for g, n in counts.items() if g and n > 1)
    extras = _IgnoreUnknownCells(set(release_sources))
    nb, resources = extras.preprocess(nb, resources)
    flags = _RestoreGradingFlags(released)
    steps = [ClearOutput(config=config, log=quiet), DeduplicateIds(config=config, log=quiet), _DropEmptyMetadata(),
             flags, OverwriteKernelspec(config=config, log=quiet), OverwriteCells(config=config, log=quiet),
             _CheckCellMetadata(config=config, log=quiet)]
    try:
        for step in steps:
            nb, resources = step.preprocess(nb, resources)
    except Exception as error:  # nbgrader's validators raise several types
        raise NotGraded(f"the notebook's grading metadata is broken ({type(error).__name__}: {error})") from error
    notes = []
    if extras.ignored:
        notes.append("cells the assignment does not have ran but were not graded: " + ", ".join(extras.ignored))
    if flags.restored:
        notes.append("edited grading metadata restored: " + ", ".join(flags.restored))
    if duplicated:
        notes.append("duplicated cells ignored (the last copy was graded): " + ", ".join(duplicated))
    retyped = sorted(g for g, t in types_before.items()
                     if any(cells.grade_id(c) == g and c.cell_type != t for c in nb.cells))
    if retyped:
        notes.append("changed cell types restored: " + ", ".join(retyped))
    after = {cells.grade_id(c): c.source for c in nb.cells if cells.grade_id(c)}
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


class _RestoreGradingFlags:
    """A cell of the assignment whose grading flags were edited (a test cell's `grade` set to false,
    its points changed, a locked cell unlocked) gets the release's metadata back, so that
    OverwriteCells restores and grades it as the source has it. Without this, OverwriteCells puts
    the source back but checksums the cell with the edited flags, and fails the whole notebook
    ("Inconsistent checksums")."""

    def __init__(self, released):
        self.released = {cells.grade_id(c): c.metadata["nbgrader"] for c in released.cells if cells.grade_id(c)}
        self.restored = []

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            original = self.released.get(cells.grade_id(cell))
            if original is None:
                continue
            meta = cells.nbgrader_meta(cell)
            if any(meta.get(flag) != original.get(flag) for flag in GRADING_FLAGS):
                self.restored.append(cells.grade_id(cell))
                cell.metadata["nbgrader"] = copy.deepcopy(original)
        return nb, resources


class _DropEmptyMetadata:
    """DeduplicateIds leaves `nbgrader: {}` on the copies it disowns, which nbgrader's own
    metadata validator then rejects; such a copy is an ordinary cell."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if cell.get("metadata", {}).get("nbgrader", None) == {}:
                del cell.metadata["nbgrader"]
        return nb, resources


def _is_test_or_locked(nb, gid):
    return any(cells.grade_id(c) == gid and (cells.is_test_cell(c) or cells.is_locked(c)) for c in nb.cells)


def _belongs_to(nb, released):
    wanted = {cells.grade_id(c) for c in released.cells if cells.grade_id(c)}
    present = {cells.grade_id(c) for c in nb.cells if cells.grade_id(c)}
    return bool(wanted & present)



@functools.lru_cache(maxsize=None)
def _schema_validator():
    """A validator for nbgrader's current metadata schema, the schema checked once."""
    schema = MetadataValidator().schema
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


class _CompiledSchema(BaseMetadataValidator):
    """nbgrader's check of one cell's grading metadata, with the JSON schema checked and compiled once:
    `jsonschema.validate`, which nbgrader calls for every cell, checks the schema itself and builds a
    validator each time (about 1.5 ms a cell, 50 ms for a4's notebook). Same checks, same errors."""

    def validate_cell(self, cell):
        if "nbgrader" not in cell.metadata:
            return
        version = cell.metadata["nbgrader"].get("schema_version", 0)
        if version < self.schema_version:
            raise SchemaTooOldError(f"Outdated schema version: {version} (expected {self.schema_version})",
                                    version, self.schema_version)
        if version > self.schema_version:
            raise SchemaTooNewError(f"Schema version is too new: {version} (expected {self.schema_version})",
                                    version, self.schema_version)
        error = jsonschema.exceptions.best_match(_schema_validator().iter_errors(cell.metadata["nbgrader"]))
        if error is not None:
            raise error


class _MetadataValidator(MetadataValidator, _CompiledSchema):
    """nbgrader's current validator (its checks across cells: unique ids, cell types), each cell's schema
    check through `_CompiledSchema`."""


class _CheckCellMetadata(CheckCellMetadata):
    """nbgrader's CheckCellMetadata, through `_MetadataValidator`."""

    def preprocess(self, nb, resources):
        try:
            _MetadataValidator().validate_nb(nb)
        except ValidationError as error:
            raise ValidationError("Notebook failed to validate; the nbgrader metadata may be corrupted.") from error
        return nb, resources
