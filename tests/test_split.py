"""grader/split.py: what of a test cell runs beside the student's code (the kernel code: inputs, calls,
observed answers) and what stays in the grader (expected values, messages, hints, references)."""
import marshal

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from grader import cells
from grader.split import SplitError, hidden_lines, kernel_sources, split_notebook
from support import ASSIGNMENT_IDS, COURSE


def _notebook(*tests, other=()):
    nb = new_notebook(cells=[new_code_cell(source) for source in other])
    for index, source in enumerate(tests):
        nb.cells.append(new_code_cell(source, metadata={"nbgrader": {
            "grade": True, "solution": False, "grade_id": f"t{index}", "points": 1}}))
    return nb


def _kernel(*tests, other=()):
    return list(kernel_sources(_notebook(*tests, other=other)).values())


def test_a_check_keeps_only_the_answer():
    [code] = _kernel("out = f(x)\ncheck_close(out, reference(x), 'output', hint='scale by sqrt(d)', atol=1e-3)")
    assert code == "out = f(x)\n__observe__(0, lambda: out)"


def test_raises_and_forbidden_checks_become_the_calls_they_make():
    [code] = _kernel("check_raises(ValueError, f, -1, what='negative', hint='raise it', strict=True)\n"
                     "check_no_forbidden_calls(g, q, k, what='no sdpa', mask=m)")
    assert code.splitlines() == ["__observe__(0, lambda: f(-1, strict=True))",
                                 "__observe__(1, lambda: __forbidden_ops__(g, q, k, mask=m))"]


def test_what_only_fed_expected_values_is_removed_across_cells():
    [first, second] = _kernel(
        "def _reference(x):\n    return 2 * x\nSCALE = 3\n",
        "x = seeded_randn(3, seed=1)\nexpected = _reference(x) * SCALE\nout = f(x)\n"
        "check_close(out, expected, 'doubled')")
    assert first == "pass"
    assert "expected" not in second and "_reference" not in second and "SCALE" not in second


def test_a_name_reused_later_does_not_keep_an_earlier_dead_value():
    [code] = _kernel("x = reference_block(x0)\nx = seeded_randn(2, seed=3)\ncheck_close(f(x), g(x), 'f')")
    assert "reference_block" not in code and "x = seeded_randn(2, seed=3)" in code


def test_inputs_and_side_effects_stay():
    [code] = _kernel("model = Model()\nmodel.eval()\nloss = model(ids).sum()\nloss.backward()\n"
                     "check_close(model.w.grad, expected_grad, 'gradient')")
    assert code.splitlines() == ["model = Model()", "model.eval()", "loss = model(ids).sum()", "loss.backward()",
                                 "__observe__(0, lambda: model.w.grad)"]


def test_loops_finally_and_breaks_keep_what_they_need():
    [code] = _kernel(
        "def train():\n    threads = get_threads()\n    try:\n        for _ in range(3):\n"
        "            loss = step()\n            if loss < 0:\n                break\n        return loss\n"
        "    finally:\n        set_threads(threads)\n"
        "check_between(train(), 0, 1, 'loss')")
    assert "threads = get_threads()" in code and "set_threads(threads)" in code


def test_a_helpers_parameter_named_like_a_global_keeps_nothing_alive():
    [code] = _kernel("expected = reference(x)\n"
                     "def _compare(actual, expected):\n    check_close(actual, expected, 'x')\n"
                     "_compare(f(x), 0)")
    assert "reference" not in code


def test_names_a_later_ordinary_cell_reads_stay():
    nb = _notebook("model = build()\nexpected = reference(model)\ncheck_close(model(x), expected, 'out')")
    nb.cells.append(new_code_cell("print(model)"))
    nb.cells.append(new_code_cell("expected = 3\nprint(expected)"))   # its own `expected`: keeps nothing
    [code] = kernel_sources(nb).values()
    assert "model = build()" in code and "reference" not in code


def test_check_helpers_must_be_called_by_name():
    with pytest.raises(SplitError, match="other than by calling it by name"):
        split_notebook(_notebook("check = check_close\ncheck(f(x), 1, 'x')"))
    with pytest.raises(SplitError, match="class body"):
        split_notebook(_notebook("class T:\n    check_equal(f(), 1, 'x')"))


def test_sites_know_their_hidden_region_and_the_code_travels_as_a_code_object():
    source = ("check_equal(f(1), 2, 'visible')\n### BEGIN HIDDEN TESTS\ncheck_equal(f(2), 4, 'hidden')\n"
              "### END HIDDEN TESTS\n")
    [cell] = split_notebook(_notebook(source)).values()
    assert [site.hidden for site in cell.sites.values()] == [False, True]
    assert hidden_lines(source) == {2, 3, 4} and cell.line_is_hidden(3) and not cell.line_is_hidden(1)
    assert cell.line_is_hidden(None), "an error whose line is unknown is treated as hidden"
    code = marshal.loads(cell.kernel_code)
    assert code.co_filename == "<test t0>" and "visible" not in repr(code.co_consts)


@pytest.mark.parametrize("assignment_id", ASSIGNMENT_IDS)
def test_no_assignment_sends_an_expected_value_a_message_or_a_reference(assignment_id):
    """Over every test cell of every assignment: the kernel code holds no check helper, none of the
    checks' messages, and no hidden reference (a name that says it is one)."""
    nb = cells.read(COURSE.source_notebook(assignment_id))
    sources = kernel_sources(nb)
    assert set(sources) == {cells.grade_id(c) for c in cells.test_cells(nb)}
    for grade_id, code in sources.items():
        assert "check_" not in code and "hint=" not in code, grade_id
        for word in ("_reference", "reference_", "expected", "likely mistake"):
            assert word not in code, f"{grade_id}: {word!r} in the code that runs beside the student's"
