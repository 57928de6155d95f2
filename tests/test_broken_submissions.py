"""A corpus of broken and hostile a1 submissions, graded as one batch through the real
pipeline: every one gets a clear outcome, the batch completes, nobody gains points by
tampering, and no feedback page shows hidden test source."""
import html
import re

import nbformat
import pytest

from grader import notebook as nbtools
from grader.autograde import autograde
from grader.course import SOURCE_DIR
from grader.feedback import export_csv, generate_feedback
from grader.samples import buggy_submission, perfect_submission, release_notebook

AID = "a1_self_attention"
pytestmark = pytest.mark.batch


def _with_cell_source(nb, grade_id, transform):
    for cell in nb.cells:
        if nbtools.grade_id(cell) == grade_id:
            cell.source = transform(cell.source)
    return nb


def _without_cell(nb, grade_id):
    nb.cells = [c for c in nb.cells if nbtools.grade_id(c) != grade_id]
    return nb


CHEAT = """
import torch, torch.testing
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None
torch.Tensor.__ne__ = lambda self, other: torch.zeros((), dtype=torch.bool)
def check_close(*args, **kwargs): pass
def check_equal(*args, **kwargs): pass
torch.Tensor.sum = lambda self, *args, **kwargs: torch.ones(())
"""


def build_corpus(folder):
    """(student, expected status, expected score or None, expected text in the outcome)."""
    full = nbtools.max_auto_points(release_notebook(AID))
    buggy, _ = buggy_submission(AID, "sin_cos_swapped")
    buggy_score = full - 2
    cases = []

    def add(student, nb, status, score, text=""):
        nbformat.write(nb, str(folder / f"{student}.ipynb"))
        cases.append((student, status, score, text))

    (folder / "invalid_json.ipynb").write_text("{ this is not json")
    cases.append(("invalid_json", "not graded", None, "invalid JSON"))
    (folder / "missing" / AID).mkdir(parents=True)
    cases.append(("missing", "not graded", None, f"no {AID}.ipynb"))
    (folder / "renamed" / AID).mkdir(parents=True)
    nbformat.write(perfect_submission(AID), str(folder / "renamed" / AID / "final_version.ipynb"))
    cases.append(("renamed", "graded", full, "renamed"))
    add("deleted_test_cell", _without_cell(perfect_submission(AID), "test_sdpa_masks"), "graded", full, "re-added")
    add("edited_test_cell", _with_cell_source(perfect_submission(AID), "test_sdpa_masks", lambda s: "pass"),
        "graded", full, "restored")
    add("edited_test_cell_buggy", _with_cell_source(buggy, "test_sinusoidal_encoding", lambda s: "pass"),
        "graded", buggy_score, "restored")
    add("infinite_loop", _with_cell_source(perfect_submission(AID), "learned_pe_solution",
                                           lambda s: s + "\nwhile True:\n    pass\n"), "graded", full)
    add("ignores_interrupts", _with_cell_source(
        perfect_submission(AID), "learned_pe_solution",
        lambda s: s + "\nimport signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.1)\n"),
        "not graded", None, "did not respond to an interrupt")
    add("prints_to_stderr", _with_cell_source(
        perfect_submission(AID), "sdpa_solution",
        lambda s: "import sys, warnings\n" + s.replace('    """q: (...', '    print("debug", file=sys.stderr)\n'
                                                     '    warnings.warn("a harmless warning")\n    """q: (...', 1)),
        "graded", full)
    add("kernel_exits", _with_cell_source(perfect_submission(AID), "learned_pe_solution",
                                          lambda s: s + "\nimport os\nos._exit(1)\n"), "graded", None, "kernel died")
    wrong = nbformat.v4.new_notebook()
    wrong.cells = [nbformat.v4.new_code_cell("x = 1")]
    wrong.cells[0].metadata["nbgrader"] = {"grade": True, "grade_id": "test_other_assignment", "locked": True,
                                           "points": 1, "schema_version": 3, "solution": False, "task": False}
    add("wrong_assignment", wrong, "not graded", None, "not a a1_self_attention notebook")
    add("untouched", release_notebook(AID), "graded", 0)
    add("perfect", perfect_submission(AID), "graded", full)
    add("buggy", buggy, "graded", buggy_score)
    add("buggy_that_cheats", _with_cell_source(buggy_submission(AID, "sin_cos_swapped")[0], "learned_pe_solution",
                                               lambda s: s + CHEAT), "graded", None)
    return cases


@pytest.fixture(scope="module")
def graded_batch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    course = tmp_path_factory.mktemp("course")
    cases = build_corpus(folder)
    outcomes = autograde(AID, folder, course_dir=course, progress=False, cell_timeout=20, total_timeout=90)
    return cases, {o.student: o for o in outcomes}, course


def test_every_submission_gets_its_expected_outcome(graded_batch):
    cases, outcomes, _ = graded_batch
    assert set(outcomes) == {c[0] for c in cases}, "the batch must complete with one outcome per student"
    wrong = []
    for student, status, score, text in cases:
        o = outcomes[student]
        if o.status != status or (score is not None and o.score != score) or text not in o.label:
            wrong.append(f"{student}: got {o.status} {o.score:g} '{o.label}', expected {status} {score} '{text}'")
    assert not wrong, "\n".join(wrong)


def test_tampering_never_raises_a_score(graded_batch):
    _, outcomes, _ = graded_batch
    cheat, honest = outcomes["buggy_that_cheats"], outcomes["buggy"]
    assert cheat.status == "graded" and cheat.score <= honest.score
    assert set(honest.failed) <= set(cheat.failed)


def test_gradebook_keeps_a_row_for_everyone_and_not_graded_is_not_zero(graded_batch, tmp_path):
    cases, _, course = graded_batch
    path, count = export_csv(tmp_path / "grades.csv", course_dir=course)
    text = path.read_text()
    present = {c[0] for c in cases if c[0] not in ("invalid_json", "missing", "wrong_assignment")}
    assert all(f"\n{student}," in text for student in present)


def _hidden_lines():
    source = nbtools.read(nbtools.notebook_path(SOURCE_DIR, AID))
    lines = set()
    for cell in nbtools.test_cells(source):
        inside = False
        for line in cell.source.splitlines():
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            elif inside and len(line.strip()) > 25:
                lines.add(line.strip())
    released = release_notebook(AID)
    visible = {line.strip() for cell in released.cells for line in cell.source.splitlines()}
    return lines - visible   # a line the visible tests also have is no secret


def test_feedback_shows_messages_but_no_hidden_test_source(graded_batch):
    _, _, course = graded_batch
    pages = generate_feedback(AID, course_dir=course)
    assert pages, "no feedback was generated"
    hidden = _hidden_lines()
    assert len(hidden) > 20
    for page in pages:
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"{page}: hidden test text in feedback: {leaked[:3]}"
    buggy_page = next(p for p in pages if p.parts[-3] == "buggy")
    assert "likely mistake: positions start at 0; sin in even columns" in html.unescape(buggy_page.read_text())
