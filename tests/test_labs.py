"""Debugging labs (grader/labs.py): the colleague's code is the catalogue's mutants planted in the
reference, nothing in the release names a bug, and a student's failed tests say which bugs are left.
The gate of each lab (tests/test_gate.py) proves the points; the demo (tests/test_demo.py) grades them."""
import ast

import nbformat
import pytest

from grader import cells, labs
from grader.labs import Bug, LabError, bug_outcome, feedback_section, lab_bugs, lab_problems, planted_source
from grader.report import lab_table
from support import LAB_IDS

REFERENCE = '''import math


def area(r):
    """The area of a circle of radius r."""
    return math.pi * r ** 2  # pi r squared


def keep(x):
    return x
'''


def _bug(definition, replaces="area", tests=("test_area",), number=1, name="no_pi"):
    return Bug(number, name, replaces, "forgets pi", tests, definition)


def test_a_planted_bug_replaces_its_definition_and_carries_the_reference_docstring():
    mutant = 'def area(r):\n    """Names the bug: forgets pi."""\n    return r ** 2\n'
    planted = planted_source(REFERENCE, [_bug(mutant)])
    assert "return r ** 2" in planted and "math.pi" not in planted
    assert '"""The area of a circle of radius r."""' in planted and "Names the bug" not in planted
    assert "def keep(x):\n    return x" in planted and planted.startswith("import math")
    ast.parse(planted)


def test_a_planted_class_keeps_each_methods_reference_docstring():
    reference = 'class A:\n    """A thing."""\n\n    def f(self):\n        """f\'s doc."""\n        return 1\n'
    planted = planted_source(reference, [_bug("class A:\n    def f(self):\n        return 2\n", replaces="A")])
    assert '"""A thing."""' in planted and '"""f\'s doc."""' in planted and "return 2" in planted
    ast.parse(planted)


def test_attribution_reads_each_bug_from_its_own_tests():
    bugs = [_bug("", tests=("t1",), name="one"), _bug("", tests=("t2", "t3"), number=2, name="two")]
    found, missed, other = bug_outcome(bugs, ["t3", "t9"])
    assert [b.name for b in found] == ["one"] and [b.name for b in missed] == ["two"] and other == ["t9"]
    page = feedback_section(bugs, ["t3", "t9"])
    assert "fixed 1 of 2 bugs" in page and "forgets pi" in page and "t2, t3" in page and "t9" in page
    assert "Every planted bug is fixed" in feedback_section(bugs, [])
    assert "broke something else" in feedback_section(bugs, ["t9"]) and "fix those first" in page


@pytest.mark.parametrize("lab", LAB_IDS)
def test_the_release_names_no_bug_and_keeps_no_lab_metadata(course, lab):
    release = course.release_notebook(lab)
    text = release.read_text()
    nb = cells.read(release)
    assert "lab" not in nb.metadata.get("course", {})
    for bug in lab_bugs(course, lab):
        assert bug.name not in text, f"{lab}'s release names its bug {bug.name}"
        assert bug.description not in text, f"{lab}'s release describes its bug {bug.name}"
    assert not lab_problems(course, lab)


def test_a_lab_of_unknown_helper_or_twin_bugs_is_refused_with_the_reason(course, tmp_path):
    def spec(bugs):
        nb = nbformat.v4.new_notebook(metadata={"course": {"lab": {"assignment": "a1_self_attention", "bugs": bugs}}})
        return nb
    with pytest.raises(LabError, match="does not have"):
        lab_bugs(course, "x", spec(["missing_scale", "loop_missing_scale", "no_such_bug"]))
    with pytest.raises(LabError, match="both replace"):
        lab_bugs(course, "x", spec(["missing_scale", "scale_by_dk", "loop_missing_scale"]))
    with pytest.raises(LabError, match="_angles"):
        lab_bugs(course, "x", spec(["missing_scale", "sin_cos_swapped", "loop_missing_scale"]))
    with pytest.raises(LabError, match="3 to 5"):
        lab_bugs(course, "x", spec(["missing_scale"]))
    with pytest.raises(LabError, match="not a debugging lab"):
        lab_bugs(course, "a1_self_attention")


def test_the_class_report_counts_who_found_each_bug(course):
    lab = LAB_IDS[0]
    bugs = lab_bugs(course, lab)
    graded = [{"student": "ana", "failed": []}, {"student": "ben", "failed": list(bugs[0].tests)}]
    table = lab_table(course, lab, graded)
    assert "1 of 2" in table and "ben" in table and "2 of 2" in table
    assert labs.debugged_assignment(course, lab) in {"a1_self_attention", "a2_multihead_masking", "a3_flops_io",
                                                     "a4_kv_cache"}


@pytest.mark.kernel
@pytest.mark.parametrize("lab", LAB_IDS)
def test_the_colleagues_code_runs_top_to_bottom_without_an_error(course, lab, tmp_path):
    """As a student opens it: every cell of the release runs, the probes included; the bugs are wrong
    numbers, never exceptions."""
    from nbclient import NotebookClient

    nb = cells.read(course.release_notebook(lab))
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, f"{lab}: {errors[0]['ename']}: {errors[0]['evalue']}"
    shown = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "DIFFER" not in shown and "NO " not in shown, f"{lab}'s probes give a bug away:\n{shown}"
