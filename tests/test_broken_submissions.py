"""A corpus of broken and hostile a1 submissions, graded as one batch through the real
pipeline in the sandbox: every one gets a clear outcome, the batch completes, nobody gains points
by tampering, no feedback page shows hidden test source or runs what a student wrote, a notebook
feedback cannot read fails only its student, nothing read reaches past the submission (links), and
no exported cell is a formula."""
import csv
import html
import os
import re
import socket
import threading
import uuid
from pathlib import Path

import nbformat
import pytest

from grader import cells
from grader.autograde import autograde
from grader.csv_cells import is_formula
from grader.feedback import export_csv, generate_feedback
from grader.samples import buggy_submission, perfect_submission, release_notebook
from grader.submission import Options, Status
from support import COURSE, REPO
from support.pages import live_markup

AID = "a1_self_attention"
pytestmark = [pytest.mark.batch, pytest.mark.sandbox]


def _with_cell_source(nb, grade_id, transform):
    for cell in nb.cells:
        if cells.grade_id(cell) == grade_id:
            cell.source = transform(cell.source)
    return nb


def _with_cell_metadata(nb, grade_id, **changes):
    for cell in nb.cells:
        if cells.grade_id(cell) == grade_id:
            cell.metadata["nbgrader"].update(changes)
    return nb


def _without_cell(nb, grade_id):
    nb.cells = [c for c in nb.cells if cells.grade_id(c) != grade_id]
    return nb


IGNORES_INTERRUPTS = ("\nimport signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                      "while True:\n    time.sleep(0.1)\n")
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
    full = cells.max_auto_points(release_notebook(COURSE, AID))
    buggy, _ = buggy_submission(COURSE, AID, "sin_cos_swapped")
    buggy_score = full - 2
    cases = []

    def add(student, nb, status, score, text=""):
        nbformat.write(nb, str(folder / f"{student}.ipynb"))
        cases.append((student, status, score, text))

    (folder / "invalid_json.ipynb").write_text("{ this is not json")
    cases.append(("invalid_json", Status.NOT_GRADED, None, "invalid JSON"))
    (folder / "missing" / AID).mkdir(parents=True)
    cases.append(("missing", Status.NOT_GRADED, None, f"no {AID}.ipynb"))
    (folder / "renamed" / AID).mkdir(parents=True)
    nbformat.write(perfect_submission(COURSE, AID), str(folder / "renamed" / AID / "final_version.ipynb"))
    cases.append(("renamed", Status.GRADED, full, "renamed"))
    add("deleted_test_cell", _without_cell(perfect_submission(COURSE, AID), "test_sdpa_masks"), Status.GRADED, full,
        "re-added")
    add("edited_test_cell", _with_cell_source(perfect_submission(COURSE, AID), "test_sdpa_masks", lambda s: "pass"),
        Status.GRADED, full, "restored")
    add("test_cell_made_ordinary", _with_cell_metadata(_with_cell_source(
        perfect_submission(COURSE, AID), "test_sdpa_worked_example", lambda s: "pass"), "test_sdpa_worked_example",
        grade=False), Status.GRADED, full, "edited grading metadata restored: test_sdpa_worked_example")
    add("test_cell_made_ordinary_buggy", _with_cell_metadata(_with_cell_source(
        buggy_submission(COURSE, AID, "sin_cos_swapped")[0], "test_sinusoidal_encoding", lambda s: "pass"),
        "test_sinusoidal_encoding", grade=False, points=0), Status.GRADED, buggy_score, "restored")
    add("edited_test_cell_buggy", _with_cell_source(buggy, "test_sinusoidal_encoding", lambda s: "pass"),
        Status.GRADED, buggy_score, "restored")
    add("infinite_loop", _with_cell_source(perfect_submission(COURSE, AID), "learned_pe_solution",
                                           lambda s: s + "\nwhile True:\n    pass\n"), Status.GRADED, full)
    add("ignores_interrupts", _with_cell_source(
        perfect_submission(COURSE, AID), "learned_pe_solution",
        lambda s: s + IGNORES_INTERRUPTS),
        Status.NOT_GRADED, None, "did not respond to an interrupt")
    add("prints_to_stderr", _with_cell_source(
        perfect_submission(COURSE, AID), "sdpa_solution",
        lambda s: "import sys, warnings\n" + s.replace('    """q: (...', '    print("debug", file=sys.stderr)\n'
                                                     '    warnings.warn("a harmless warning")\n    """q: (...', 1)),
        Status.GRADED, full)
    add("kernel_exits", _with_cell_source(perfect_submission(COURSE, AID), "learned_pe_solution",
                                          lambda s: s + "\nimport os\nos._exit(1)\n"), Status.GRADED, None,
        "kernel died")
    wrong = nbformat.v4.new_notebook()
    wrong.cells = [nbformat.v4.new_code_cell("x = 1")]
    wrong.cells[0].metadata["nbgrader"] = {"grade": True, "grade_id": "test_other_assignment", "locked": True,
                                           "points": 1, "schema_version": 3, "solution": False, "task": False}
    add("wrong_assignment", wrong, Status.NOT_GRADED, None, "not a a1_self_attention notebook")
    add("untouched", release_notebook(COURSE, AID), Status.GRADED, 0)
    add("perfect", perfect_submission(COURSE, AID), Status.GRADED, full)
    add("buggy", buggy, Status.GRADED, buggy_score)
    add("buggy_that_cheats", _with_cell_source(buggy_submission(COURSE, AID, "sin_cos_swapped")[0],
                                               "learned_pe_solution", lambda s: s + CHEAT), Status.GRADED, None)

    def perfect_plus(code, cell="learned_pe_solution"):
        return _with_cell_source(perfect_submission(COURSE, AID), cell, lambda s: s + "\n" + code)

    def buggy_plus(code):
        return _with_cell_source(buggy_submission(COURSE, AID, "sin_cos_swapped")[0], "learned_pe_solution",
                                 lambda s: s + "\n" + code)

    # the sandbox: what the kernel must not reach (full marks prove each attempt failed)
    add("reads_hidden_tests", perfect_plus(READS_SECRETS.format(paths=SECRET_PATHS)), Status.GRADED, full)
    add("writes_outside", perfect_plus(WRITES_OUTSIDE.format(paths=[str(p) for p in OUTSIDE_TARGETS])),
        Status.GRADED, full)
    add("leaves_a_process", perfect_plus(f"import subprocess\nsubprocess.Popen(['sleep', '{LINGER}'], "
                                         "start_new_session=True)"), Status.GRADED, full)
    add("memory_hog", perfect_plus("hog = bytearray(64 * 2**30)"), Status.GRADED, full)
    add("huge_output", perfect_plus("print('x' * (30 * 2**20))"), Status.GRADED, full)
    add("too_many_processes", perfect_plus("import subprocess\nchildren = [subprocess.Popen(['sleep', '30']) "
                                           "for _ in range(100)]\nimport time\ntime.sleep(5)"),
        Status.NOT_GRADED, None, "more than 64 processes")
    add("signals_its_parent", perfect_plus("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"),
        Status.GRADED, None)
    add("reaches_the_network", perfect_plus(REACHES_NETWORK.format(port=NETWORK_PROBE["port"])), Status.GRADED, full)
    # the notebook's structure
    duplicated = perfect_submission(COURSE, AID)
    index = next(i for i, c in enumerate(duplicated.cells) if cells.grade_id(c) == "test_sdpa_masks")
    duplicated.cells.insert(index, nbformat.from_dict(duplicated.cells[index]))
    add("duplicated_grade_ids", duplicated, Status.GRADED, full, "duplicated cells ignored")
    retyped = perfect_submission(COURSE, AID)
    for cell in retyped.cells:
        if cells.grade_id(cell) == "test_sdpa_masks":
            cell.cell_type = "markdown"
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
    add("changed_cell_type", retyped, Status.GRADED, full, "cell types restored")
    extra = perfect_submission(COURSE, AID)
    own_test = nbformat.v4.new_code_cell("assert scaled_dot_product_attention is not None")
    own_test.metadata["nbgrader"] = {"grade": True, "grade_id": "my_own_test", "locked": False, "points": 2,
                                     "schema_version": 3, "solution": False, "task": False}
    pasted = nbformat.from_dict(next(c for c in extra.cells if cells.grade_id(c) == "test_sdpa_masks"))
    pasted.metadata["nbgrader"]["grade_id"] = "test_sdpa_masks_again"
    no_id = nbformat.v4.new_markdown_cell("my notes")
    no_id.metadata["nbgrader"] = {"grade": True, "solution": True}
    odd = nbformat.v4.new_code_cell("notes = 'kept'")
    odd.metadata["nbgrader"] = "not a dict"
    extra.cells += [own_test, pasted, no_id, odd]
    add("extra_graded_cells", extra, Status.GRADED, full, "cells the assignment does not have ran but were not graded: "
        "my_own_test, test_sdpa_masks_again, a markdown cell without an id")
    unmarked = perfect_submission(COURSE, AID)
    for cell in unmarked.cells:
        if cells.grade_id(cell) == "sdpa_solution":
            del cell.metadata["nbgrader"]
    add("solution_cell_without_metadata", unmarked, Status.GRADED, full)
    # tampering with the kernel's own machinery: never worth a point
    add("replaces_comparisons", buggy_plus(
        "torch.isclose = lambda *a, **k: torch.ones((), dtype=torch.bool)\n"
        "torch.Tensor.allclose = lambda *a, **k: True\ntorch.Tensor.__eq__ = lambda *a, **k: True\n"
        "torch.testing.assert_close = lambda *a, **k: None"), Status.GRADED, None)
    add("replaces_display_and_tracebacks", buggy_plus(
        "import sys, builtins, IPython\nsys.excepthook = lambda *a: None\n"
        "IPython.get_ipython().showtraceback = lambda *a, **k: None\n"
        "IPython.get_ipython().display_formatter.formatters['text/plain'].for_type(object, lambda *a: 'ok')\n"
        "builtins.print = lambda *a, **k: None"), Status.GRADED, None)
    add("forges_outputs", buggy_plus(
        "from IPython.display import display\nprint('passed (13 checks)')\n"
        "display({'text/plain': 'passed'}, raw=True)"), Status.GRADED, None)
    add("captured_c_binding", _with_cell_source(perfect_submission(COURSE, AID), "sdpa_solution", lambda s: s.replace(
        "    return weights @ v, weights", "    return _fast(q, k, v, attn_mask=mask), weights").replace(
        "def scaled_dot_product_attention", "_fast = torch._C._nn.scaled_dot_product_attention\n"
        "def scaled_dot_product_attention", 1)), Status.GRADED, None)
    # past the submission's boundary: links are never read, whatever they point to
    os.symlink(COURSE.source_notebook(AID), folder / "key_link.ipynb")
    cases.append(("key_link", Status.NOT_GRADED, None, "key_link.ipynb is a link to a file outside the submission"))
    os.symlink("perfect.ipynb", folder / "copycat.ipynb")
    cases.append(("copycat", Status.NOT_GRADED, None, "copycat.ipynb is a link to another file of the submission"))
    (folder / "linked_folder").mkdir()
    os.symlink(COURSE.source_notebook(AID).parent, folder / "linked_folder" / "work")
    cases.append(("linked_folder", Status.NOT_GRADED, None,
                  "linked_folder/work is a link to a folder outside the submission"))
    # what feedback and the exports do with what a student wrote
    add("hidden_markers", perfect_plus("# ### BEGIN HIDDEN TESTS\n# ### BEGIN HIDDEN TESTS"), Status.GRADED, full)
    add("hostile_markup", _with_cell_source(perfect_plus(HOSTILE_OUTPUTS), "written_permutation",
                                            lambda s: HOSTILE_ANSWER), Status.GRADED, full)
    nbformat.write(perfect_submission(COURSE, AID), str(folder / f"{FORMULA_FILE}.ipynb"))
    cases.append((FORMULA_ID, Status.GRADED, full, ""))
    return cases


HOSTILE_ANSWER = """The order of the keys does not matter: **softmax** over a *set*.

<script>document.title = "owned"</script><img src="x" onerror="document.title = 'owned'">
<iframe src="https://evil.example/"></iframe><a href="javascript:alert(1)">click</a>
"""
HOSTILE_OUTPUTS = """from IPython.display import HTML, SVG, Javascript, display
display(HTML("<b>fine</b><script>document.title = 'owned'</script>"))
display(Javascript("document.title = 'owned'"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><circle r="4"/></svg>'))
"""
FORMULA_FILE = "@SUM(1+1)"            # a name a spreadsheet would run; the folder preset keeps the @
FORMULA_ID = "@SUM_1_1_"


SECRET_PATHS = [str(REPO / "solutions" / AID / f"{AID}.ipynb"), str(REPO / "mutants" / f"{AID}.py"),
                str(REPO / "course" / "gradebook.db"), str(REPO / "grader" / "stages" / "judge.py"),
                "/root/.bash_history"]
READS_SECRETS = """
import os
for secret in {paths}:
    try:
        open(secret).read(10)
        def scaled_dot_product_attention(q, k, v, mask=None):  # could read: lose everything
            raise RuntimeError("the sandbox let me read " + secret)
    except OSError:
        pass
"""
TOKEN = uuid.uuid4().hex[:8]
OUTSIDE_TARGETS = [REPO / f"PWNED_{TOKEN}", REPO / "solutions" / f"PWNED_{TOKEN}", Path("/root") / f"PWNED_{TOKEN}"]
WRITES_OUTSIDE = """
for target in {paths}:
    try:
        with open(target, "w") as handle:
            handle.write("pwned")
    except OSError:
        pass
"""
LINGER = "1234.5"


# A TCP server on the grading machine's 127.0.0.1 that a submission tries to reach (it must not).
REACHES_NETWORK = """
import socket
reached = []
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    reached.append("a TCP server on the host's 127.0.0.1")
except OSError:
    pass
try:
    socket.getaddrinfo("pypi.org", 443)
    reached.append("a name resolver")
except OSError:
    pass
if reached:
    del LearnedPositionalEmbedding   # costs points: the kernel had a network
"""
NETWORK_PROBE = {"port": None, "connections": []}


def _start_probe_server():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(1.0)
    NETWORK_PROBE["port"] = server.getsockname()[1]

    def accept():
        for _ in range(900):   # bounded: stops by itself after about 15 minutes
            try:
                connection, address = server.accept()
            except OSError:
                continue
            NETWORK_PROBE["connections"].append(address)
            connection.close()
        server.close()
    threading.Thread(target=accept, daemon=True).start()


@pytest.fixture(scope="module")
def graded_batch(tmp_path_factory):
    _start_probe_server()
    folder = tmp_path_factory.mktemp("corpus")
    course = COURSE.with_grading_dir(tmp_path_factory.mktemp("course"))
    cases = build_corpus(folder)
    # 4 at once on 2 cores: most of a submission's time is waiting (the kernel's start, cells that time out);
    # a 15 s cell timeout is still ten times the slowest honest cell on a loaded machine (under 2 s), with room
    # for the other pytest worker's load beside the four kernels
    outcomes = autograde(course, AID, folder, Options(progress=False, workers=4, cell_timeout=15, total_timeout=90))
    return cases, {o.student: o for o in outcomes}, course


def test_corpus_is_large_enough(graded_batch):
    cases, _, _ = graded_batch
    assert len(cases) >= 25


def test_nothing_written_outside_and_no_process_left(graded_batch):
    _, outcomes, _ = graded_batch
    assert outcomes["writes_outside"].score == outcomes["perfect"].score
    for target in OUTSIDE_TARGETS:
        assert not target.exists(), f"a submission wrote {target}"
    lingering = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if LINGER.encode() in handle.read():
                    lingering.append(pid)
        except OSError:
            pass
    assert not lingering, f"processes left behind by a submission: {lingering}"


def test_report_lists_failures_and_not_graded(graded_batch):
    from grader.report import build_report
    _, _, course = graded_batch
    page = build_report(course, AID).read_text()
    assert "ignores_interrupts" in page and "invalid_json" in page and "test_sinusoidal_encoding" in page


def test_every_submission_gets_its_expected_outcome(graded_batch):
    cases, outcomes, _ = graded_batch
    assert set(outcomes) == {c[0] for c in cases}, "the batch must complete with one outcome per student"
    wrong = []
    for student, status, score, text in cases:
        o = outcomes[student]
        if o.status != status or (score is not None and o.score != score) or text not in o.label:
            wrong.append(f"{student}: got {o.status} {o.score:g} '{o.label}', expected {status} {score} '{text}'")
    assert not wrong, "\n".join(wrong)


def test_a_captured_c_binding_is_caught(graded_batch):
    _, outcomes, _ = graded_batch
    assert "test_sdpa_no_builtin_attention" in outcomes["captured_c_binding"].failed


def test_tampering_never_raises_a_score(graded_batch):
    _, outcomes, _ = graded_batch
    honest = outcomes["buggy"]
    for student in ("buggy_that_cheats", "replaces_comparisons", "replaces_display_and_tracebacks", "forges_outputs"):
        cheat = outcomes[student]
        assert cheat.status == Status.GRADED and cheat.score <= honest.score, student
        assert set(honest.failed) <= set(cheat.failed), student


def test_gradebook_keeps_a_row_for_everyone_and_not_graded_is_not_zero(graded_batch, tmp_path):
    cases, _, course = graded_batch
    path, count = export_csv(course, tmp_path / "grades.csv")
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    not_read = ("invalid_json", "missing", "wrong_assignment", "key_link", "copycat", "linked_folder")
    present = {c[0] for c in cases if c[0] not in not_read}
    assert present <= {row[0].removeprefix("'") for row in rows[1:]}
    live = [cell for row in rows for cell in row if is_formula(cell)]
    assert not live and [f"'{FORMULA_ID}"] == [row[0] for row in rows if FORMULA_ID in row[0]], live


@pytest.fixture(scope="module")
def feedback(graded_batch):
    """({student: feedback page}, the lines naming who got none)."""
    _, _, course = graded_batch
    skipped = []
    pages = generate_feedback(course, AID, skipped)
    return {page.parts[-3]: page for page in pages}, skipped


def test_feedback_fails_only_the_notebook_it_cannot_read(graded_batch, feedback):
    _, outcomes, _ = graded_batch
    pages, skipped = feedback
    assert skipped == ["feedback not written for hidden_markers: a cell of their notebook holds the hidden-test "
                       "marker 'BEGIN HIDDEN TESTS' twice (nbgrader: Encountered nested begin hidden tests statements)"]
    graded = {s for s, o in outcomes.items() if o.status == Status.GRADED}
    assert set(pages) == graded - {"hidden_markers"}


def test_no_feedback_page_runs_what_a_student_wrote(feedback):
    pages, _ = feedback
    live = {student: live_markup(page.read_text()) for student, page in pages.items()}
    assert not any(live.values()), {s: found for s, found in live.items() if found}
    text = pages["hostile_markup"].read_text()
    assert "<strong>softmax</strong>" in text and "&lt;script&gt;document.title" in text
    assert "<b>fine</b>" in text and 'src="data:image/svg+xml;base64,' in text


def test_feedback_shows_messages_but_no_hidden_test_source(feedback):
    pages, _ = feedback
    pages = list(pages.values())
    assert pages, "no feedback was generated"
    hidden = cells.secret_lines(cells.read(COURSE.source_notebook(AID)))
    assert len(hidden) > 20
    for page in pages:
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"{page}: hidden test text in feedback: {leaked[:3]}"
    buggy_page = next(p for p in pages if p.parts[-3] == "buggy")
    assert "likely mistake: positions start at 0; sin in even columns" in html.unescape(buggy_page.read_text())


def test_a_perfect_submission_shows_no_output_from_the_grading_machinery(graded_batch):
    # nothing on stderr (fontconfig, the sandbox, warnings) in what the student gets back
    _, _, course = graded_batch
    graded = list((course.grading_dir / "autograded" / "perfect").rglob("*.ipynb"))
    assert graded, "the perfect submission was not autograded"
    stderr = [output.get("text", "") for cell in cells.read(graded[0]).cells if cell.cell_type == "code"
              for output in cell.get("outputs", []) if output.get("name") == "stderr"]
    assert not stderr, f"stderr in the perfect submission's graded notebook: {stderr[:3]}"


def test_a_kernel_ignoring_interrupts_is_stopped_soon_after_its_cell_timeout(tmp_path):
    # the notebook's budget left at its default (derived from the cell timeout): the worker stops the kernel
    # 10 s after the cell's timeout, not after that whole budget, which nbclient's repeated interrupts would
    # otherwise run into. (A 10 s cell timeout, not the default 60 s: the same path, 50 s sooner. Not less:
    # the first cell of a batch's first kernel can take several seconds on a loaded machine, docs/results.md.
    # The loop comes first in its cell, so it runs even if a slow machine timed out an earlier cell.)
    folder = tmp_path / "submissions"
    folder.mkdir()
    stubborn = _with_cell_source(perfect_submission(COURSE, AID), "learned_pe_solution",
                                 lambda s: IGNORES_INTERRUPTS + s)
    nbformat.write(stubborn, str(folder / "stubborn.ipynb"))
    options = Options(progress=False, workers=1, cell_timeout=10)
    [outcome] = autograde(COURSE.with_grading_dir(tmp_path / "course"), AID, folder, options)
    assert outcome.status == Status.NOT_GRADED
    assert "did not respond to an interrupt" in outcome.label and "so it was stopped" in outcome.label, outcome.label
    assert "stuck in cell" in outcome.label, outcome.label


def test_no_kernel_reached_the_network(graded_batch):
    assert NETWORK_PROBE["port"] and not NETWORK_PROBE["connections"], \
        f"a sandboxed kernel connected to the host's 127.0.0.1: {NETWORK_PROBE['connections']}"
