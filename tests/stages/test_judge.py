"""The comparisons and the judge: each failure message says what was expected, what came
back and the likely mistake; a record that is missing, stops early or diverges fails."""
import torch

from grader.provided.checks import compare_close, compare_equal, compare_no_forbidden_ops, compare_raises
from grader.stages.judge import judge_cell


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


def _trusted():
    obs = [{"kind": "equal", "what": "shape", "hint": "think", "options": {}, "expected": (2, 3)},
           {"kind": "close", "what": "values", "hint": None, "options": {"atol": 1e-5, "rtol": 1e-4},
            "expected": torch.zeros(2)}]
    return {"grade_id": "t", "observations": obs, "error": None}


def _student(*actuals, error=None):
    kinds = [("equal", "shape"), ("close", "values")]
    return {"grade_id": "t", "error": error, "observations": [
        {"kind": k, "what": w, "actual": a} for (k, w), a in zip(kinds, actuals)]}


def test_judge_passes_only_matching_records():
    assert judge_cell(_trusted(), _student((2, 3), torch.zeros(2))).passed
    verdict = judge_cell(_trusted(), _student((3, 2), torch.zeros(2)))
    assert not verdict.passed and "likely mistake: think" in verdict.message
    assert not judge_cell(_trusted(), _student((2, 3), torch.ones(2))).passed


def test_judge_fails_missing_stopped_or_diverging_records():
    assert "did not run" in judge_cell(_trusted(), None).message
    stopped = judge_cell(_trusted(), _student((2, 3), error={"type": "NotImplementedError", "message": "x"}))
    assert not stopped.passed and "NotImplementedError" in stopped.message
    diverged = _student((2, 3), torch.zeros(2))
    diverged["observations"][1]["what"] = "something else"
    assert "different way" in judge_cell(_trusted(), diverged).message
    corrupt = _student((2, 3), "not a tensor")
    assert not judge_cell(_trusted(), corrupt).passed


def test_static_findings_fail_the_forbidden_call_check():
    trusted = {"grade_id": "t", "error": None, "observations": [
        {"kind": "no_forbidden_ops", "what": "sdpa", "hint": None, "options": {}, "expected": None}]}
    student = {"grade_id": "t", "error": None, "observations": [
        {"kind": "no_forbidden_ops", "what": "sdpa", "actual": ["mm", "softmax"]}]}
    assert judge_cell(trusted, student).passed
    assert not judge_cell(trusted, student, ["line 3: uses .scaled_dot_product_attention"]).passed


def test_a_check_that_passed_in_the_students_kernel_but_fails_here_asks_for_review():
    """The net under the next false failure: the student saw the check pass (`passed_here`), the
    reference's recorded value says otherwise. The cell fails, flagged for review, and says why."""
    passed_there = _student((2, 3), torch.ones(2))
    passed_there["observations"][1]["passed_here"] = True
    verdict = judge_cell(_trusted(), passed_there)
    assert not verdict.passed and verdict.disagree
    assert "passed in your own notebook" in verdict.message and "instructor reviews" in verdict.message
    failed_there = _student((2, 3), torch.ones(2))
    failed_there["observations"][1]["passed_here"] = False
    assert not judge_cell(_trusted(), failed_there).disagree, "it failed in the notebook too: no disagreement"
    assert not judge_cell(_trusted(), _student((2, 3), torch.ones(2))).disagree, "no local verdict recorded"
