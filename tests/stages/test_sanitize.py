"""sanitize: what is not a notebook of this assignment is not graded, with the reason; whatever a
student did to the cells the assignment owns is undone -- and said -- before anything runs: edited
or deleted tests, a test cell turned into an ordinary one, changed points or cell types, duplicated
ids; cells the assignment does not have run but are never graded."""
import nbformat
import pytest

from grader import cells
from grader.stages.sanitize import sanitize
from grader.submission import NotGraded
from support.grading import A1, submission_file


def _cell(nb, grade_id):
    return next(c for c in nb.cells if cells.grade_id(c) == grade_id)


def edited(course, tmp_path, a1_batch, student, edit, kind="perfect"):
    """The submission after `edit(nb)` of its notebook, through sanitize."""
    submission = submission_file(course, tmp_path, student, kind)
    nb = cells.read(submission.path)
    edit(nb)
    nbformat.write(nb, str(submission.path))
    return sanitize(submission, a1_batch)


def test_an_untouched_notebook_comes_through_as_it_is(course, tmp_path, a1_batch):
    submission = sanitize(submission_file(course, tmp_path, "plain"), a1_batch)
    assert submission.notes == []
    assert (submission.workdir / "gradebook.db").exists(), "its own gradebook, copied from the template"
    released = cells.read(course.release_notebook(A1))
    assert cells.test_points(submission.notebook) == cells.test_points(released)


def test_what_is_not_a_notebook_of_this_assignment(course, tmp_path, a1_batch):
    submission = submission_file(course, tmp_path, "broken")
    submission.path.write_text("{ not json")
    with pytest.raises(NotGraded, match="invalid JSON"):
        sanitize(submission, a1_batch)
    other = submission_file(course, tmp_path, "other")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), str(other.path))
    with pytest.raises(NotGraded, match=f"this is not a {A1} notebook"):
        sanitize(other, a1_batch)


def test_an_edited_test_cell_is_restored(course, tmp_path, a1_batch):
    def edit(nb):
        _cell(nb, "test_sdpa_masks").source = "pass"
    submission = edited(course, tmp_path, a1_batch, "edits_a_test", edit)
    assert "pass" != _cell(submission.notebook, "test_sdpa_masks").source
    assert submission.notes == ["edited read-only cells restored: test_sdpa_masks"]


def test_a_test_cell_made_ordinary_is_restored_and_graded(course, tmp_path, a1_batch):
    """Its `grade` flag switched off and its source replaced: without restoring the flag first,
    nbgrader fails the whole notebook ("Inconsistent checksums")."""
    def edit(nb):
        cell = _cell(nb, "test_sdpa_worked_example")
        cell.source = "pass"
        cell.metadata["nbgrader"].update(grade=False, points=0)
    submission = edited(course, tmp_path, a1_batch, "ungrades_a_test", edit)
    restored = _cell(submission.notebook, "test_sdpa_worked_example")
    assert cells.is_test_cell(restored) and cells.points(restored) > 0 and restored.source != "pass"
    assert "edited grading metadata restored: test_sdpa_worked_example" in submission.notes


def test_changed_points_and_an_unlocked_test_are_restored(course, tmp_path, a1_batch):
    def edit(nb):
        _cell(nb, "test_sdpa_masks").metadata["nbgrader"].update(points=100, locked=False)
    submission = edited(course, tmp_path, a1_batch, "more_points", edit)
    released = cells.read(course.release_notebook(A1))
    assert cells.test_points(submission.notebook) == cells.test_points(released)


def test_deleted_and_duplicated_and_retyped_cells(course, tmp_path, a1_batch):
    def edit(nb):
        nb.cells = [c for c in nb.cells if cells.grade_id(c) != "test_sdpa_masks"]
        index = next(i for i, c in enumerate(nb.cells) if cells.grade_id(c) == "test_attention_loop")
        nb.cells.insert(index, nbformat.from_dict(nb.cells[index]))
        retyped = _cell(nb, "test_sinusoidal_encoding")
        retyped.cell_type = "markdown"
        retyped.pop("outputs", None), retyped.pop("execution_count", None)
    submission = edited(course, tmp_path, a1_batch, "shuffles", edit)
    notes = "; ".join(submission.notes)
    assert "deleted cells re-added: test_sdpa_masks" in notes
    assert "duplicated cells ignored (the last copy was graded): test_attention_loop" in notes
    assert "changed cell types restored: test_sinusoidal_encoding" in notes
    ids = [cells.grade_id(c) for c in submission.notebook.cells if cells.grade_id(c)]
    assert len(ids) == len(set(ids)) and "test_sdpa_masks" in ids


def test_cells_the_assignment_does_not_have_are_never_graded(course, tmp_path, a1_batch):
    def edit(nb):
        own = nbformat.v4.new_code_cell("assert True")
        own.metadata["nbgrader"] = {"grade": True, "grade_id": "my_own_test", "locked": False, "points": 5,
                                    "schema_version": 3, "solution": False, "task": False}
        odd = nbformat.v4.new_code_cell("notes = 'kept'")
        odd.metadata["nbgrader"] = "not a dict"
        nb.cells += [own, odd]
    submission = edited(course, tmp_path, a1_batch, "adds_tests", edit)
    assert "cells the assignment does not have ran but were not graded: my_own_test" in submission.notes[0]
    assert "my_own_test" not in cells.test_points(submission.notebook)
    assert any(c.source == "notes = 'kept'" for c in submission.notebook.cells), "it still runs"


def _deleted_first_and_last_tests(nb):
    tests = [c for c in nb.cells if cells.is_test_cell(c)]
    nb.cells.remove(tests[0])
    nb.cells.remove(tests[-1])


def _test(nb, index=0):
    return [c for c in nb.cells if cells.is_test_cell(c)][index]


HOSTILE_EDITS = {
    "none": lambda nb: None,
    "test edited": lambda nb: setattr(_test(nb), "source", "pass"),
    "tests deleted": _deleted_first_and_last_tests,
    "points changed": lambda nb: _test(nb).metadata.nbgrader.update(points=99),
    "unlocked": lambda nb: _test(nb).metadata.nbgrader.update(locked=False),
    "checksum forged": lambda nb: _test(nb).metadata.nbgrader.update(checksum="0" * 32),
    "kernelspec changed": lambda nb: nb.metadata.update(kernelspec={"name": "evil", "display_name": "x"}),
    "solution deleted": lambda nb: nb.cells.remove(next(c for c in nb.cells if cells.nbgrader_meta(c).get("solution"))),
}


@pytest.mark.parametrize("edit", sorted(HOSTILE_EDITS))
def test_the_batchs_source_cells_restore_what_nbgraders_own_look_ups_restore(course, tmp_path, a1_batch, edit):
    """sanitize's OverwriteCells and OverwriteKernelspec look source cells up in what the batch read once
    (SourceCells); nbgrader's own, querying the submission's gradebook, make the same notebook of it."""
    import copy
    import logging

    from nbgrader.preprocessors import OverwriteCells, OverwriteKernelspec
    from traitlets.config import Config

    from grader.stages.sanitize import _OverwriteCells, _OverwriteKernelspec

    nb = cells.read(submission_file(course, tmp_path, f"source-{edit.replace(' ', '-')}").path)
    HOSTILE_EDITS[edit](nb)
    config = Config()
    config.OverwriteCells.add_missing_cells = True
    quiet = logging.getLogger("source-cells-test")
    quiet.disabled = True
    resources = {"nbgrader": {"db_url": f"sqlite:///{a1_batch.template_db}", "assignment": A1, "notebook": A1}}

    def restored(steps):
        copied = copy.deepcopy(nb)
        for step in steps:
            copied, _ = step.preprocess(copied, copy.deepcopy(resources))
        for cell in copied.cells:      # a re-added cell gets a random id
            cell.pop("id", None)
        return copied
    ours = restored([_OverwriteKernelspec(a1_batch.source_cells, config=config, log=quiet),
                     _OverwriteCells(a1_batch.source_cells, config=config, log=quiet)])
    assert ours == restored([OverwriteKernelspec(config=config, log=quiet), OverwriteCells(config=config, log=quiet)])
