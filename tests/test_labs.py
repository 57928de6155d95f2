"""Debugging labs (grader/labs.py): the colleague's code is the catalogue's bugs written in its own hand,
nothing in the release names a bug or carries the answer key, a bug's tests pay for a repair of the
colleague's definition and not for a rewrite, and a student's failed tests and code say which bugs are
left. The gate of each lab (tests/test_gate.py) proves the points; the demo (tests/test_demo.py) grades
the same students through the real pipeline."""
import ast
import dataclasses
import re
import textwrap

import nbformat
import pytest

from grader import cells, labs
from grader.labs import (
    LabError,
    Repair,
    bug_outcome,
    feedback_section,
    judge_repairs,
    lab_bugs,
    lab_problems,
    resolve_regions,
)
from grader.report import lab_table
from grader.samples import lab_submission, pasted_solution, rewritten_bugs
from grader.stages.judge import CellVerdict
from support import LAB_IDS

COLLEAGUE = '''def area(r):
    """The area of a circle."""
    if r < 0:
        raise ValueError(f"a radius cannot be negative, got {r}")
    squared = r * r
    ### BEGIN FIX
    return math.pi * squared     # pi r squared
    ### PLANTED
    # return squared
    ### END FIX


def keep(x):
    return x
'''
GUARD = '    if r < 0:\n        raise ValueError(f"a radius cannot be negative, got {r}")\n'
PLANTED = "def area(r):\n" + GUARD + "    squared = r * r\n    return squared\n"
REPAIRED = "def area(r):\n" + GUARD + "    squared = r * r\n    return math.pi * squared\n"


def _bug(text=COLLEAGUE, replaces="area", tests=("test_area",), number=1, name="no_pi"):
    return labs.Bug(number, name, replaces, "forgets pi", tests, "", raw=text, breaks=tests,
                    planted=resolve_regions(labs.colleague_definitions(_nb(text))[replaces], {replaces}),
                    fixed=resolve_regions(labs.colleague_definitions(_nb(text))[replaces], set()))


def _nb(*sources, locked=()):
    nb = nbformat.v4.new_notebook()
    for index, source in enumerate(sources):
        cell = nbformat.v4.new_code_cell(source)
        meta = {"grade": False, "grade_id": f"cell_{index}", "locked": index in locked,
                "solution": index not in locked, "schema_version": 3}
        cell.metadata["nbgrader"] = meta
        nb.cells.append(cell)
    return nb


def test_a_fix_region_runs_fixed_in_the_source_and_planted_in_the_release():
    fixed, planted = resolve_regions(COLLEAGUE, set()), resolve_regions(COLLEAGUE, {"area"})
    assert "return math.pi * squared" in fixed and "return squared\n" not in fixed
    assert "    return squared\n" in planted and "math.pi" not in planted
    for text in (fixed, planted):
        assert "###" not in text and "def keep(x):\n    return x" in text
        ast.parse(text)
    assert labs.regions_of(COLLEAGUE) == [("return squared", "return math.pi * squared     # pi r squared")]
    with pytest.raises(LabError, match="not closed"):
        resolve_regions(COLLEAGUE.replace("    ### END FIX\n", ""), set())


def test_a_seeded_definition_marks_where_the_catalogues_mutant_differs():
    reference = "def f(x):\n    y = x + 1\n    return y * 2\n"
    mutant = "def f(x):\n    y = x\n    return y * 2\n"
    seeded = labs.seeded_definition(reference, mutant)
    assert resolve_regions(seeded, set()) == reference and resolve_regions(seeded, {"f"}) == mutant


def test_the_repair_measure_ignores_comments_docstrings_and_layout():
    bug = _bug()
    assert bug.fix_size == (0, 4) and bug.budget == (labs.MIN_REMOVED, labs.MIN_ADDED)
    reformatted = REPAIRED.replace("def area(r):", 'def area( r ):\n    """Another docstring."""') + "  # fixed\n"
    assert labs.edit_size(labs.definition_tokens(bug.fixed), labs.definition_tokens(reformatted)) == (0, 0)


@pytest.mark.parametrize("student, verdict", [
    (PLANTED, labs.UNCHANGED),                                                           # the bug left in
    (REPAIRED.replace("math.pi * squared", "(math.pi * squared)  # fixed: pi was missing"), labs.REPAIRED),
    (REPAIRED.replace("math.pi * squared", "squared * 3.141592653589793"), labs.REPAIRED),
    (PLANTED.replace("    return squared", "    circle = math.pi * squared\n    return circle"), labs.REPAIRED),
    ("def area(radius):\n    return math.pi * radius ** 2\n", labs.REWRITTEN),             # pasted in
    (PLANTED + "    return squared + 0 * (" + " + ".join(["squared"] * 20) + ")\n", labs.REPLACED),   # dead code
    (PLANTED + "\narea = lambda r: math.pi * r ** 2\n", labs.REPLACED),
    ("def helper(r):\n    return math.pi * r * r\n\n" + PLANTED.replace("    return squared", "    return helper(r)"),
     labs.REPLACED),
    (REPAIRED.replace("    squared = r * r\n", "    squared = r * r\n    return math.pi * r * r\n"), labs.REPLACED),
    (PLANTED + "\narea.__code__ = (lambda r: 3.14 * r * r).__code__\n", labs.REPLACED),
    ("if True:\n" + textwrap.indent(REPAIRED, "    "), labs.MISSING),
    ("%time x = 1\n" + REPAIRED, labs.REPAIRED),
])
def test_each_way_of_answering_a_bug_is_judged(student, verdict):
    [repair] = judge_repairs([_bug()], _nb(student))
    assert repair.verdict == verdict, repair
    assert repair.earns == (verdict in (labs.REPAIRED, labs.UNCHANGED))


def test_a_later_definition_counts_and_a_locked_alias_cannot_be_patched():
    rewrite = "def area(radius):\n    circle = math.pi * radius * radius\n    return float(circle)\n"
    [repair] = judge_repairs([_bug()], _nb(REPAIRED, rewrite))
    assert repair.verdict == labs.REWRITTEN and repair.removed > labs.MIN_REMOVED
    attached = _nb(REPAIRED, "Shape.area = area\n", "Shape.area = lambda self, r: 1.0\n", locked=(1,))
    assert judge_repairs([_bug()], attached)[0].verdict == labs.REPLACED
    calls = PLANTED.replace("return squared", "return helper(r) * squared")
    given = _nb("def helper(r):\n    return math.pi\n\n" + calls)
    assert judge_repairs([_bug()], given, given=frozenset({"helper"}))[0].verdict == labs.REPAIRED


def test_a_rewrite_fails_every_test_its_bug_breaks_with_the_reason_first():
    cascading = dataclasses.replace(_bug(), breaks=("test_area", "test_volume"))   # volume calls area
    rewrite = Repair(cascading, labs.REWRITTEN, removed=25, added=12)
    verdicts = [CellVerdict("test_area", True, "", 3, 3), CellVerdict("test_keep", True, "", 1, 1),
                CellVerdict("test_volume", True, "", 2, 2)]
    after = labs.with_repairs(verdicts, [rewrite])
    assert [v.passed for v in after] == [False, True, False] and type(after[0]) is CellVerdict
    assert "rewritten, not repaired: 25 of the colleague's tokens removed or changed and 12 added" in after[0].message
    assert "removes at most 10 and adds at most 30" in after[0].message
    assert labs.with_repairs(verdicts, [Repair(_bug(), labs.REPAIRED, added=3)]) == verdicts


def test_attribution_reads_each_bug_from_its_own_tests_and_the_code():
    one, two = _bug(tests=("t1",), name="one"), _bug(tests=("t2", "t3"), number=2, name="two")
    found, missed, rewritten, other = bug_outcome([one, two], ["t3", "t9"])
    assert [b.name for b in found] == ["one"] and [b.name for b in missed] == ["two"] and other == ["t9"]
    page = feedback_section([one, two], ["t3", "t9"])
    assert "repaired 1 of 2 bugs" in page and "forgets pi" in page and "t2, t3" in page and "t9" in page
    assert "Every planted bug is repaired" in feedback_section([one, two], [])
    assert "broke something else" in feedback_section([one, two], ["t9"]) and "fix those first" in page
    repairs = [Repair(one, labs.REWRITTEN, removed=25), Repair(two, labs.REPAIRED, added=3)]
    found, missed, rewritten, _ = bug_outcome([one, two], ["t1"], repairs)
    assert [b.name for b in rewritten] == ["one"] and [b.name for b in found] == ["two"] and not missed
    page = feedback_section([one, two], ["t1"], repairs)
    assert "Rewritten instead of repaired" in page and "25 of the colleague" in page and "repaired 1 of 2" in page


@pytest.mark.parametrize("lab", LAB_IDS)
def test_the_release_names_no_bug_and_keeps_no_key(course, lab):
    release = course.release_notebook(lab)
    text = release.read_text()
    nb = cells.read(release)
    assert "lab" not in nb.metadata.get("course", {})
    for marker in (labs.FIX_BEGIN, labs.FIX_PLANTED, labs.FIX_END, "MARK SCHEME", "Answer key"):
        assert marker not in text, f"{lab}'s release carries {marker!r}"
    for bug in lab_bugs(course, lab):
        assert bug.name not in text, f"{lab}'s release names its bug {bug.name}"
        assert bug.description not in text, f"{lab}'s release describes its bug {bug.name}"
        for part in bug.key.values():
            assert part not in text, f"{lab}'s release carries its answer key for {bug.name}"
    assert not lab_problems(course, lab)


@pytest.mark.parametrize("lab", LAB_IDS)
def test_the_first_cell_gives_the_specification_and_no_hint_names_a_bug_site(course, lab):
    """The task text is the specification; the guidance is the same for every function. No cell the lab
    adds to the assignment's (its introduction, headings, tools' guide and demonstration, findings)
    names a function that holds a bug."""
    nb = cells.read(course.release_notebook(lab))
    assignment = labs.debugged_assignment(course, lab)
    first = nb.cells[0].source
    assert "specification is the task text" in " ".join(first.split()) and assignment in first
    bugged = {bug.replaces for bug in lab_bugs(course, lab)}
    for cell in nb.cells:
        if cell.metadata.get("course", {}).get("lab_copy") or cells.provided_file(cell):
            continue
        named = sorted(name for name in bugged if re.search(rf"\b{name}\b", cell.source))
        assert not named, f"{lab}: a {cell.cell_type} cell names {named}: {cell.source[:120]!r}"


@pytest.mark.parametrize("lab", LAB_IDS)
def test_each_finding_is_a_task_with_the_rubric_and_its_key_for_the_grader(course, lab):
    source, release = cells.read(course.source_notebook(lab)), cells.read(course.release_notebook(lab))
    bugs = lab_bugs(course, lab, source)
    findings = [c for c in source.cells if labs.is_finding(c)]
    assert [cells.grade_id(c) for c in findings] == [f"bug_{b.number}" for b in bugs]
    auto = sum(cells.test_points(source).values())
    assert labs.finding_points(source) > auto, "most of a lab's points are its findings"
    for cell, bug in zip(findings, bugs):
        assert cell.metadata["nbgrader"]["task"] and cell.metadata["nbgrader"]["locked"]
        key = cell.source.split(labs.MARK_BEGIN)[1].split(labs.MARK_END)[0]
        assert bug.replaces in key and "TODO" not in key and all(bug.key[p] in key for p in labs.KEY_PARTS)
        for part, _ in labs.RUBRIC:
            assert f"**{part}**" in cell.source
    shown = [c for c in release.cells if labs.is_finding(c)]
    assert len(shown) == len(bugs) and all(labs.MARK_BEGIN not in c.source and "**Where**" in c.source for c in shown)
    after = [release.cells[release.cells.index(c) + 1] for c in shown]
    assert all(c.cell_type == "markdown" and not cells.grade_id(c) for c in after), "each finding's answer cell"


@pytest.mark.parametrize("lab", LAB_IDS)
def test_pasting_a_solution_or_rewriting_earns_no_bug_and_a_minimal_fix_every_bug(course, lab):
    """The three students of the demo, judged here without a kernel: the assignment's solution pasted
    over the lab, an alternative in place of each bugged definition, the lab's own minimal repairs."""
    bugs = lab_bugs(course, lab)
    given = labs.given_names(course, lab)
    fixer = judge_repairs(bugs, lab_submission(course, lab, []), given)
    assert [r.verdict for r in fixer] == [labs.REPAIRED] * len(bugs), fixer
    assert all((r.removed, r.added) == r.bug.fix_size for r in fixer)
    untouched = judge_repairs(bugs, cells.read(course.release_notebook(lab)), given)
    assert [r.verdict for r in untouched] == [labs.UNCHANGED] * len(bugs)
    pasted = judge_repairs(bugs, pasted_solution(course, lab), given)
    assert not any(r.earns for r in pasted), [(r.bug.name, r.verdict, r.removed) for r in pasted]
    rewritten, chosen = rewritten_bugs(course, lab)
    assert set(chosen) == {bug.replaces for bug in bugs}, "an alternative for every bugged definition"
    judged = judge_repairs(bugs, rewritten, given)
    assert not any(r.earns for r in judged), [(r.bug.name, r.verdict, r.removed) for r in judged]


def test_a_lab_of_unknown_or_twin_bugs_or_without_fix_regions_is_refused_with_the_reason(course):
    def spec(bugs, cells_=()):
        nb = nbformat.v4.new_notebook(metadata={"course": {"lab": {"assignment": "a1_self_attention", "bugs": bugs}}})
        nb.cells = list(cells_)
        return nb
    with pytest.raises(LabError, match="does not have"):
        lab_bugs(course, "x", spec(["missing_scale", "loop_missing_scale", "no_such_bug"]))
    with pytest.raises(LabError, match="both in"):
        lab_bugs(course, "x", spec(["missing_scale", "scale_by_dk", "loop_missing_scale"]))
    with pytest.raises(LabError, match="3 to 5"):
        lab_bugs(course, "x", spec(["missing_scale"]))
    with pytest.raises(LabError, match="no answer cell"):
        lab_bugs(course, "x", spec(["missing_scale", "loop_missing_scale", "context_ignored"]))
    bare = _nb("def scaled_dot_product_attention(q, k, v, mask=None):\n    return q\n")
    with pytest.raises(LabError, match="no fix region"):
        lab_bugs(course, "x", spec(["missing_scale", "loop_missing_scale", "context_ignored"], bare.cells))
    with pytest.raises(LabError, match="not a debugging lab"):
        lab_bugs(course, "a1_self_attention")


def test_a_lab_copies_every_test_cell_but_those_it_leaves_out_with_a_reason(course):
    """debug_a5 leaves out a5's float64 precision cell, which all four of its bugs fail: the lab says why,
    and the copy is missing only while the reason is there."""
    source = cells.read(course.source_notebook("debug_a5"))
    spec = source.metadata["course"]["lab"]
    assert "test_float64_precision" in spec["leaves_out"] and not lab_problems(course, "debug_a5", source)
    without_reason = dict(spec, leaves_out={"test_float64_precision": " "})
    source.metadata["course"]["lab"] = without_reason
    assert any("without saying why" in p for p in lab_problems(course, "debug_a5", source))
    source.metadata["course"]["lab"] = dict(spec, leaves_out={})
    assert "it has no copy of the assignment's cell test_float64_precision" in lab_problems(course, "debug_a5", source)


def test_the_class_report_counts_who_repaired_each_bug(course):
    lab = LAB_IDS[0]
    bugs = lab_bugs(course, lab)
    graded = [{"student": "ana", "failed": []}, {"student": "ben", "failed": list(bugs[0].tests)}]
    table = lab_table(course, lab, graded)
    assert "1 of 2" in table and "ben" in table and "2 of 2" in table and "rewritten by" in table
    assert labs.debugged_assignment(course, lab) in {"a1_self_attention", "a2_multihead_masking", "a3_flops_io",
                                                     "a4_kv_cache", "a5_attention_at_scale"}


@pytest.mark.kernel
@pytest.mark.parametrize("lab", LAB_IDS)
def test_the_colleagues_code_runs_top_to_bottom_without_an_error(course, lab, tmp_path):
    """As a student opens it: every cell of the release runs, the tools' demonstration included; the
    bugs are wrong numbers, never exceptions, and the demonstration shows nothing wrong."""
    from nbclient import NotebookClient

    nb = cells.read(course.release_notebook(lab))
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, f"{lab}: {errors[0]['ename']}: {errors[0]['evalue']}"
    shown = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "DIFFER" not in shown and "NO " not in shown and "WRONG" not in shown, f"{lab}'s tools demo:\n{shown}"


def test_a_labs_gradescope_autograder_carries_the_catalogue_its_repair_stage_reads(course, tmp_path):
    """On Gradescope the course is the zip: the lab's source, its release and its assignment's mutation
    catalogue (private, as the hidden tests are) are enough to tell a repair from a rewrite."""
    import shutil

    from grader.course import Course
    from grader.gradescope import autograder_files
    lab = LAB_IDS[0]
    names = [name for name, _, _ in autograder_files(course, lab)]
    catalogue = f"mutants/{labs.debugged_assignment(course, lab)}.py"
    assert catalogue in names and not any(name.startswith("alternatives/") for name in names)
    for name, path, _ in autograder_files(course, lab):
        if not isinstance(path, str) and (name.startswith(("solutions/", "mutants/")) or name == "nbgrader_config.py"):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, tmp_path / name)
    alone = Course.find(tmp_path)
    bugs, given = labs.bugs_if_lab(alone, lab)
    assert [b.name for b in bugs] == [b.name for b in lab_bugs(course, lab)]
    pasted = judge_repairs(bugs, pasted_solution(course, lab), given)
    assert not any(r.earns for r in pasted)


def test_a_regrade_keeps_a_findings_hand_grade_only_while_its_answer_is_unchanged(tmp_path):
    """A finding is a task cell; the student answers in the cell below it, so that cell is what the
    hand grade graded: a regrade flags the grade for review again when it changed."""
    from grader.stages.merge import unchanged_grades

    def graded(answer, path):
        nb = nbformat.v4.new_notebook(cells=[labs.finding_cell("### Finding 1", 1),
                                             nbformat.v4.new_markdown_cell(answer),
                                             labs.finding_cell("### Finding 2", 2), labs.answer_cell(2)])
        nbformat.write(nb, str(path))
        return path
    before = graded("`attention_loop`: no scale", tmp_path / "before.ipynb")
    same = graded("`attention_loop`: no scale", tmp_path / "same.ipynb")
    assert unchanged_grades(before, same) == {"bug_1", "bug_2"}
    assert unchanged_grades(before, graded("`attention_loop`: not scaled", tmp_path / "new.ipynb")) == {"bug_2"}
