"""The class report (`python -m grader report ID`): readable plots and one row per student. Fast: the
outcomes are written by hand, nothing is graded."""
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from grader import cells
from grader.report import build_report, class_figure
from support import COURSE

AID = "a1_self_attention"


def _tests():
    released = cells.read(COURSE.release_notebook(AID))
    return list(cells.test_points(released).items())


def _outcomes(tests):
    names = [test for test, _ in tests]
    return {
        "ada": {"student": "ada", "status": "graded", "score": 18.0, "failed": [], "reason": ""},
        "bob": {"student": "bob", "status": "graded", "score": 16.0, "failed": [names[-1]], "reason": ""},
        "cy": {"student": "cy", "status": "graded", "score": 14.0, "failed": names[:2], "reason": ""},
        "dee": {"student": "dee", "status": "not graded", "score": 0.0, "failed": [],
                "reason": "the kernel did not respond to an interrupt"},
    }


def _overlaps(a, b):
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_labels_never_overlap_the_plots_and_counts_are_whole():
    tests = _tests()
    figure = class_figure([18.0, 16.0, 14.0], 1, tests, [0.0] * (len(tests) - 1) + [0.34], 18.0)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    left, right = figure.axes
    for label in right.get_yticklabels():
        box = label.get_window_extent(renderer)
        assert not _overlaps(box, left.get_window_extent(renderer)), f"{label.get_text()} runs into the histogram"
        assert not _overlaps(box, right.get_window_extent(renderer)), f"{label.get_text()} runs into its bars"
        assert box.x0 >= 0, f"{label.get_text()} is cut off at the left edge"
    assert all(float(tick).is_integer() for tick in left.get_yticks()), left.get_yticks()
    plt.close(figure)


def test_the_page_has_one_row_per_student(tmp_path):
    tests = _tests()
    outcomes = _outcomes(tests)
    (tmp_path / "outcomes").mkdir()
    (tmp_path / "outcomes" / f"{AID}.json").write_text(json.dumps(outcomes))
    page = build_report(COURSE.with_grading_dir(tmp_path), AID).read_text()
    students = page.split("<h2>Students</h2>", 1)[1]
    for name, outcome in outcomes.items():
        assert f"<tr><td>{name}</td>" in students
    assert "16 / 18" in students and tests[-1][0] in students
    assert "not graded</td><td>the kernel did not respond to an interrupt" in students
