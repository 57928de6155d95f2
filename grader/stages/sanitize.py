"""sanitize: read the submission and make it safe to run, with nbgrader's own preprocessors.

Refuses what is not a notebook of this assignment; restores the grading metadata and the source of
locked and test cells from the source notebook (a student cannot edit a test, or turn it into an
ordinary cell), re-adds deleted test cells, drops duplicated grade ids, turns cells the assignment
does not have into ordinary cells, resets the kernelspec; then notes what it changed."""
import copy
import functools
import json
import logging
from types import SimpleNamespace

import jsonschema
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.nbgraderformat.common import BaseMetadataValidator, SchemaTooNewError, SchemaTooOldError
from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, DeduplicateIds, OverwriteCells, OverwriteKernelspec
from traitlets.config import Config

from .. import cells
from ..submission import NotGraded

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
    submission.notebook, notes = restore(nb, aid, batch.source_cells, batch.released)
    submission.notes += notes
    return submission


def restore(nb, assignment_id, source_cells, released):
    """(sanitized notebook, notes about what had to be repaired); raises NotGraded when nbgrader
    cannot make sense of it. `source_cells`: the assignment's source cells as its gradebook holds them
    (SourceCells); `released`: the release notebook, to tell a student's edit from the hidden tests put back."""
    before = {cells.grade_id(c): c.source for c in nb.cells if cells.grade_id(c)}
    release_sources = {cells.grade_id(c): c.source for c in released.cells if cells.grade_id(c)}
    config = Config()
    config.OverwriteCells.add_missing_cells = True
    resources = {"nbgrader": {"db_url": None, "assignment": assignment_id, "notebook": assignment_id}}
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
             flags, _OverwriteKernelspec(source_cells, config=config, log=quiet),
             _OverwriteCells(source_cells, config=config, log=quiet), _CheckCellMetadata(config=config, log=quiet)]
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


class SourceCells:
    """One assignment notebook's source cells, graded cells and kernelspec as a gradebook holds them,
    read once (a batch reads its template gradebook's, which every submission's copy holds too); it
    answers the look-ups nbgrader's OverwriteCells and OverwriteKernelspec make (find_notebook,
    find_source_cell, find_graded_cell) as nbgrader's Gradebook does, without a gradebook opened and
    queried for each submission (about 40 ORM queries a notebook). Read-only plain data: the
    submissions' threads share it."""

    def __init__(self, db_url, assignment_id, notebook_id=None):
        self.assignment_id, self.notebook_id = assignment_id, notebook_id or assignment_id
        with Gradebook(db_url) as gb:
            notebook = gb.find_notebook(self.notebook_id, assignment_id)
            self.kernelspec = notebook.kernelspec
            self.source_cells = [SimpleNamespace(name=c.name, cell_type=c.cell_type, locked=c.locked,
                                                 checksum=c.checksum, source=c.source) for c in notebook.source_cells]
            self.grade_cells = [SimpleNamespace(name=c.name, max_score=c.max_score)
                                for c in notebook.grade_cells]
            self.solution_cells = [SimpleNamespace(name=c.name) for c in notebook.solution_cells]
            self.task_cells = [SimpleNamespace(name=c.name, max_score=c.max_score) for c in notebook.task_cells]
        self._source = {c.name: c for c in self.source_cells}
        # nbgrader's find_graded_cell: a grade cell of that name, else a task cell
        self._graded = {c.name: c for c in self.task_cells} | {c.name: c for c in self.grade_cells}

    def _is(self, notebook, assignment):
        if (notebook, assignment) != (self.notebook_id, self.assignment_id):
            raise MissingEntry(f"No such notebook: {assignment}/{notebook}")

    def find_notebook(self, notebook, assignment):
        self._is(notebook, assignment)
        return self

    def find_source_cell(self, name, notebook, assignment):
        self._is(notebook, assignment)
        if name not in self._source:
            raise MissingEntry(f"No such source cell: {assignment}/{notebook}/{name}")
        return self._source[name]

    def find_graded_cell(self, name, notebook, assignment):
        self._is(notebook, assignment)
        if name not in self._graded:
            raise MissingEntry(f"No such grade cell: {assignment}/{notebook}/{name}")
        return self._graded[name]


class _OverwriteCells(OverwriteCells):
    """nbgrader's OverwriteCells (its checks, restores and re-added cells, unchanged), its look-ups
    answered by the batch's SourceCells rather than by a gradebook opened for each submission."""

    def __init__(self, source_cells, **kwargs):
        super().__init__(**kwargs)
        self.source_cells = source_cells

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.gradebook = self.source_cells
        # OverwriteCells.preprocess, less its Gradebook(db_url)
        nb, resources = super(OverwriteCells, self).preprocess(nb, resources)
        if self.add_missing_cells:
            nb, resources = self.add_missing_grade_cells(nb, resources)
            nb, resources = self.add_missing_task_cells(nb, resources)
        return nb, resources


class _OverwriteKernelspec(OverwriteKernelspec):
    """nbgrader's OverwriteKernelspec, the source notebook's kernelspec from the batch's SourceCells."""

    def __init__(self, source_cells, **kwargs):
        super().__init__(**kwargs)
        self.source_cells = source_cells

    def preprocess(self, nb, resources):
        kernelspec = self.source_cells.kernelspec
        kernelspec = json.loads(kernelspec) if kernelspec is not None else None   # each notebook its own copy
        if kernelspec:
            nb.metadata["kernelspec"] = kernelspec
        return nb, resources


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
