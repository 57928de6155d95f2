"""Hostile a1 submissions against the judge's boundary (grader/split.py), graded as one batch through
the real sandboxed pipeline: code beside the test cells that replaces, wraps or rewrites the answer
recorder, hunts the kernel for expected values (frames, the garbage collector, IPython's history,
the recorder's own state), or reads whatever could carry a hidden test out and prints it. None
raises a score above what its answers earn, and nothing of a hidden test reaches what a student sees
(the graded table, the HTML feedback, the Gradescope results)."""
import hashlib
import html
import re

import nbformat
import pytest

from grader import cells
from grader.autograde import autograde
from grader.feedback import generate_feedback
from grader.gradescope import graded_results, hidden_test_ids
from grader.samples import buggy_submission, release_notebook
from grader.submission import Options, Status
from support import COURSE

AID = "a1_self_attention"
pytestmark = [pytest.mark.batch, pytest.mark.sandbox]

# The fifteen shareable lines that forged full marks when the kernel held the expected values: wrap
# the recorder so that each check records the value it is compared with as the answer.
OLD_HIJACK = """
_grader = globals().get("__course_grader__")
if _grader is not None and hasattr(_grader, "_fresh_checks"):
    _fresh = _grader._fresh_checks
    def _forged(observations):
        helpers = _fresh(observations)
        observe = helpers["_observe"]
        def _observe(kind, actual, expected, what, hint, options):
            if kind in ("close", "equal"):
                actual = expected
            elif kind == "raises":
                actual = {"raised": [expected, "Exception"], "message": ""}
            return observe(kind, actual, expected, what, hint, options)
        helpers["_observe"] = _observe
        return helpers
    _grader._fresh_checks = _forged
"""

# The same idea against today's recorder, whatever its shape: rewrite each cell's record after it is
# made (and on disk) -- every no a yes, every exception a yes, errors dropped.
RECORD_REWRITER = """
import os as _os, torch as _torch
_grader = globals().get("__course_grader__")
if _grader is not None:
    _run = type(_grader).run_test
    def _rewritten(self, grade_id, *args, **kwargs):
        record = _run(self, grade_id, *args, **kwargs)
        for answer in record.get("observations", []):
            if answer.get("value") is False or "raised" in answer:
                answer.clear(); answer.update(site=answer.get("site"), value=True)
        record["error"] = None
        if getattr(self, "records_dir", None):
            _torch.save(record, _os.path.join(self.records_dir, grade_id + ".pt"))
        return record
    type(_grader).run_test = _rewritten
"""

# Hunts for the value a check compares with, each time the wrong function is called: a tensor of the
# answer's shape and dtype in the callers' frames, their globals, the recorder's state or anywhere the
# garbage collector can see, that is not one of the inputs; if one is found, return it instead.
EXPECTED_HUNTER = """
import gc as _gc, sys as _sys, torch as _torch
_honest = sinusoidal_positional_encoding
def _candidates(answer, inputs):
    frame = _sys._getframe(2)
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            for value in list(scope.values()):
                yield value
        frame = frame.f_back
    grader = globals().get("__course_grader__")
    if grader is not None:
        yield from list(vars(grader).values())
        yield from list(getattr(grader, "test_names", {}).values())
    yield from _gc.get_objects()
def sinusoidal_positional_encoding(seq_len, d_model, base=10000.0):
    answer = _honest(seq_len, d_model, base)
    for value in _candidates(answer, (seq_len, d_model, base)):
        if (isinstance(value, _torch.Tensor) and value is not answer and value.shape == answer.shape
                and value.dtype == answer.dtype and not _torch.equal(value, answer)):
            return value.clone()
    return answer
"""

# Reads everything in the kernel that could hold a hidden test's text -- IPython's history, the line
# cache, the kernel's current request, the recorder and its inbox, every frame's code and names, the
# strings the garbage collector holds -- while the hidden tests call it, then shows all of it: in an
# error a later visible check reports, and printed by a cell of its own at the end of the notebook.
LEAKER = """
import dis as _dis, gc as _gc, io as _io, linecache as _linecache, os as _os, sys as _sys
_seen = []
def _look():
    shell = get_ipython()
    _seen.extend(str(x) for x in shell.user_ns.get("In", []))
    _seen.extend(str(x) for x in shell.user_ns.get("_ih", []))
    _seen.extend("".join(entry[2]) for entry in list(_linecache.cache.values()) if len(entry) > 2)
    try:
        _seen.append(repr(shell.kernel.get_parent()))
    except Exception:
        pass
    grader = globals().get("__course_grader__")
    if grader is not None:
        _seen.append(repr(vars(grader)))
        inbox = getattr(grader, "inbox", None)
        if inbox and _os.path.exists(inbox):
            _seen.append(repr(open(inbox, "rb").read()))
    frame = _sys._getframe(1)
    while frame is not None:
        out = _io.StringIO()
        _dis.dis(frame.f_code, file=out)
        _seen.append(out.getvalue())
        _seen.append(repr(frame.f_code.co_consts) + repr(frame.f_code.co_names) + repr(list(frame.f_locals)))
        frame = frame.f_back
    _seen.extend(x for x in _gc.get_objects() if isinstance(x, str) and len(x) > 25)
_sdpa = scaled_dot_product_attention
def scaled_dot_product_attention(q, k, v, mask=None):
    _look()
    return _sdpa(q, k, v, mask)
"""
SHOW_IN_A_VISIBLE_CHECK = """
class LearnedPositionalEmbedding(LearnedPositionalEmbedding):
    def forward(self, x):
        raise RuntimeError("LEAKED " + " | ".join(_seen)[-400:])
"""
# The haul is too large to print whole (outputs are cut), so the last cell prints what matters: how
# much it read, and which lines of the hidden tests (given to it as SHA-256 digests, so that the
# notebook itself holds none of them) it found.
PRINT_THE_HAUL = """
import hashlib as _hashlib
_lines = {line.strip() for text in _seen for line in text.splitlines()}
_found = sorted(d for d in (_hashlib.sha256(line.encode()).hexdigest() for line in _lines) if d in _SECRET_DIGESTS)
print("HAUL", len(_seen), "texts", len(_lines), "lines")
print("HISTORY", sum("__course_grader__.run_test" in text for text in _seen))
print("FOUND", " ".join(_found) or "nothing")
for _word in ("_reference_attention", "expected_weights", "exp_out"):
    print("WORD", _word, any(_word in text for text in _seen))
"""


def _with_code(nb, code, cell="learned_pe_solution"):
    for c in nb.cells:
        if cells.grade_id(c) == cell:
            c.source += "\n" + code
    return nb


def _buggy(mutant="sin_cos_swapped"):
    return buggy_submission(COURSE, AID, mutant)[0]


def build_corpus(folder):
    """(student, its honest counterpart): each forger is graded beside the same code without the forgery."""
    honest, forgers = {}, {}

    def add(student, nb, counterpart=None):
        nbformat.write(nb, str(folder / f"{student}.ipynb"))
        if counterpart:
            forgers[student] = counterpart
        else:
            honest[student] = True

    add("buggy", _buggy())
    add("buggy_old_hijack", _with_code(_buggy(), OLD_HIJACK, "sdpa_solution"), "buggy")
    add("buggy_record_rewriter", _with_code(_buggy(), RECORD_REWRITER, "sdpa_solution"), "buggy")
    add("buggy_expected_hunter", _with_code(_buggy(), EXPECTED_HUNTER), "buggy")
    add("not_a_loop", _buggy("vectorised_not_a_loop"))
    add("not_a_loop_record_rewriter", _with_code(_buggy("vectorised_not_a_loop"), RECORD_REWRITER, "sdpa_solution"),
        "not_a_loop")
    add("untouched", release_notebook(COURSE, AID))
    add("untouched_record_rewriter", _with_code(release_notebook(COURSE, AID), RECORD_REWRITER, "sdpa_solution"),
        "untouched")
    leaker = _with_code(_with_code(_buggy(), LEAKER, "sdpa_solution"), SHOW_IN_A_VISIBLE_CHECK)
    digests = sorted(hashlib.sha256(line.encode()).hexdigest() for line in _secret_lines())
    leaker.cells.append(nbformat.v4.new_code_cell(f"_SECRET_DIGESTS = set({digests!r})\n" + PRINT_THE_HAUL))
    add("leaker", leaker)
    return forgers


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forgers")
    course = COURSE.with_grading_dir(tmp_path_factory.mktemp("course"))
    forgers = build_corpus(folder)
    outcomes = autograde(course, AID, folder, Options(progress=False, workers=2, cell_timeout=60, total_timeout=300))
    return forgers, {o.student: o for o in outcomes}, course


def test_no_forgery_raises_a_score(graded):
    forgers, outcomes, _ = graded
    assert all(o.status == Status.GRADED for o in outcomes.values()), {s: o.label for s, o in outcomes.items()}
    assert outcomes["buggy"].score == outcomes["not_a_loop"].score == 16 and outcomes["untouched"].score == 0
    gains = {student: (outcomes[student].score, outcomes[honest].score) for student, honest in forgers.items()
             if outcomes[student].score > outcomes[honest].score
             or not set(outcomes[honest].failed) <= set(outcomes[student].failed)}
    assert not gains, f"forged scores above the honest ones (forged, honest): {gains}"


def _secret_lines():
    secret = cells.secret_lines(cells.read(COURSE.source_notebook(AID)))
    assert len(secret) > 20
    return secret


def test_what_a_leaker_reads_in_the_kernel_holds_no_hidden_test(graded):
    _, outcomes, course = graded
    leaker = outcomes["leaker"]
    graded_nb = cells.read(next((course.grading_dir / "autograded" / "leaker").rglob("*.ipynb")))
    printed = "".join(output.get("text", "") for cell in graded_nb.cells if cell.cell_type == "code"
                      for output in cell.get("outputs", []))
    haul = re.search(r"HAUL (\d+) texts (\d+) lines", printed)
    assert haul and int(haul.group(2)) > 1000, f"the leaker did not run: the test proves nothing\n{printed[-2000:]}"
    assert int(re.search(r"HISTORY (\d+)", printed).group(1)) > 0, "the leaker did not read the history"
    by_digest = {hashlib.sha256(line.encode()).hexdigest(): line for line in _secret_lines()}
    found = re.search(r"FOUND (.*)", printed).group(1).split()
    assert found == ["nothing"], f"hidden test lines readable in the kernel: {[by_digest.get(d) for d in found][:3]}"
    for word in ("_reference_attention", "expected_weights", "exp_out"):
        assert f"WORD {word} False" in printed, f"{word!r} readable in the kernel"
    assert "test_learned_positional_embedding" in leaker.failed


def test_the_feedback_and_gradescope_show_no_hidden_test(graded):
    _, outcomes, course = graded
    secret = _secret_lines()
    pages = generate_feedback(course, AID)
    for page in pages:
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        assert not [line for line in secret if line in text], page
    page = next(p for p in pages if p.parts[-3] == "leaker")
    assert "LEAKED" in html.unescape(page.read_text()), "a visible check shows the student's own error"
    source = cells.read(COURSE.source_notebook(AID))
    hidden = hidden_test_ids(source)
    for student in ("leaker", "buggy_expected_hunter", "buggy"):
        outcome = outcomes[student]
        results = graded_results(AID, cells.test_points(source), hidden, outcome.verdicts, outcome.notes)
        shown = "\n".join([results.get("output", "")] + [t["output"] for t in results["tests"]])
        assert not [line for line in secret if line in shown], student
        for test in results["tests"]:
            if test["visibility"] == "visible":
                assert test["name"] not in hidden, test["name"]
