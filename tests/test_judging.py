"""The comparisons and the judging (grader/judging.py): each failure message says what was expected, what came
back and the likely mistake; a record that is missing, stops early or diverges fails."""
import torch

from grader.judging import judge_cell
from grader.provided.checks import compare_close, compare_equal, compare_no_forbidden_ops, compare_raises


def test_close_reports_shape_dtype_values_and_nan():
    assert compare_close(torch.ones(2, 3), torch.ones(2, 3)) is None
    assert "wrong shape: expected (2, 3), got (3, 2)" in compare_close(torch.ones(3, 2), torch.ones(2, 3))
    assert "wrong dtype" in compare_close(torch.ones(2), torch.ones(2, dtype=torch.float64))
    message = compare_close(torch.tensor([0.0, float("nan")]), torch.zeros(2))
    assert "NaN" in message and "largest difference" in message
    assert "transpose" in compare_close(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[1.0, 3.0], [2.0, 4.0]]))
    assert "expected a torch.Tensor" in compare_close([1.0], torch.ones(1))


def test_equal_and_raises_and_forbidden():
    assert compare_equal((2, 3), (2, 3)) is None
    assert compare_equal(True, True) is None
    assert "expected (2, 3), got (3, 2)" in compare_equal((3, 2), (2, 3))
    assert compare_raises({"raised": ["ValueError", "Exception"], "message": "x"}, "ValueError") is None
    assert "returned normally" in compare_raises({"raised": [], "message": ""}, "ValueError")
    assert "IndexError" in compare_raises({"raised": ["IndexError"], "message": "out of range"}, "ValueError")
    assert compare_no_forbidden_ops(["aten.mm", "softmax"]) is None
    assert "built-in attention" in compare_no_forbidden_ops(["scaled_dot_product_attention"])


def _trusted(hidden=False):
    obs = [{"site": 0, "kind": "equal", "what": "shape", "hint": "think", "options": {}, "expected": (2, 3),
            "hidden": hidden},
           {"site": 1, "kind": "close", "what": "values", "hint": None, "options": {"atol": 1e-5, "rtol": 1e-4},
            "expected": torch.zeros(2), "hidden": hidden}]
    return {"grade_id": "t", "observations": obs, "error": None}


def _student(*answers, error=None):
    """The kernel's record: the answer at each site, or what the call raised."""
    observations = []
    for site, answer in enumerate(answers):
        observations.append({"site": site, **answer} if isinstance(answer, dict) and "raised" in answer
                            else {"site": site, "value": answer})
    return {"version": 2, "grade_id": "t", "error": error, "observations": observations}


def _raised(name, message="", where=None):
    return {"type": name, "raised": [name, "Exception"], "message": message, "where": where, "test_line": None}


def test_judge_passes_only_matching_records():
    assert judge_cell(_trusted(), _student((2, 3), torch.zeros(2))).passed
    verdict = judge_cell(_trusted(), _student((3, 2), torch.zeros(2)))
    assert not verdict.passed and "likely mistake: think" in verdict.message
    assert not judge_cell(_trusted(), _student((2, 3), torch.ones(2))).passed


def test_judge_fails_missing_stopped_or_diverging_records():
    assert "did not run" in judge_cell(_trusted(), None).message
    stopped = judge_cell(_trusted(), _student((2, 3), error=_raised("NotImplementedError", "x")))
    assert not stopped.passed and "NotImplementedError" in stopped.message
    diverged = _student((2, 3), torch.zeros(2))
    diverged["observations"][1]["site"] = 5
    assert "different way" in judge_cell(_trusted(), diverged).message
    corrupt = _student((2, 3), "not a tensor")
    assert not judge_cell(_trusted(), corrupt).passed
    assert not judge_cell(_trusted(), {"observations": "nonsense", "error": 3}).passed


def test_an_answer_that_raised_fails_its_check_with_the_students_error_when_visible():
    verdict = judge_cell(_trusted(), _student((2, 3), _raised("RuntimeError", "shapes do not match", "f, line 3")))
    assert not verdict.passed
    assert "values: your code raised RuntimeError: shapes do not match" in verdict.message
    assert "in f, line 3" in verdict.message


def test_a_hidden_check_shows_nothing_the_students_code_produced():
    """A hidden check reports what was expected and the likely mistake, never the student's values,
    exception message, exception class or code line: each could carry a hidden test out."""
    secret = "SECRET-from-the-kernel"
    wrong_value = judge_cell(_trusted(hidden=True), _student((2, 3), torch.full((2,), 7.25))).message
    assert "values: values differ beyond the tolerance" in wrong_value and "7.25" not in wrong_value
    wrong_shape = judge_cell(_trusted(hidden=True), _student((9, 9), torch.zeros(2))).message
    assert "shape: expected (2, 3), got a different value" in wrong_shape and "9" not in wrong_shape
    raised = judge_cell(_trusted(hidden=True), _student((2, 3), _raised("Leak" + secret, secret, secret))).message
    assert secret not in raised and "your code raised an exception" in raised
    builtin = judge_cell(_trusted(hidden=True), _student((2, 3), _raised("ValueError", secret))).message
    assert "your code raised ValueError" in builtin and secret not in builtin
    error = {**_raised("NotImplementedError", secret, secret), "test_line": None}
    stopped = judge_cell(_trusted(hidden=True), _student((2, 3), error=error)).message
    assert "not implemented yet" in stopped and secret not in stopped


def test_a_hidden_raises_check_names_only_pythons_own_exceptions():
    trusted = {"grade_id": "t", "error": None, "observations": [
        {"site": 0, "kind": "raises", "what": "bad d_model", "hint": None, "options": {}, "expected": "ValueError",
         "hidden": True}]}
    assert judge_cell(trusted, _student(_raised("ValueError"))).passed
    assert "returned normally" in judge_cell(trusted, _student(None)).message
    other = judge_cell(trusted, _student(_raised("KeyError", "x"))).message
    assert "expected a ValueError, but your code raised KeyError" in other and "x" not in other.split("KeyError")[-1]
    custom = judge_cell(trusted, _student(_raised("MyLeakyError", "x"))).message
    assert "MyLeakyError" not in custom and "another exception" in custom


def test_static_findings_fail_the_forbidden_call_check():
    trusted = {"grade_id": "t", "error": None, "observations": [
        {"site": 0, "kind": "no_forbidden_ops", "what": "sdpa", "hint": None, "options": {}, "expected": None,
         "hidden": False}]}
    assert judge_cell(trusted, _student(["mm", "softmax"])).passed
    assert not judge_cell(trusted, _student(["mm", "softmax"]), ["line 3: uses .scaled_dot_product_attention"]).passed
    assert not judge_cell(trusted, _student(["aten.scaled_dot_product_attention"])).passed
