"""`grader check` for every assignment: the CI quality gate (COURSE_SPEC §5)."""
import pytest

from grader.check import check_assignment, format_report
from grader.course import assignment_ids


@pytest.mark.parametrize("assignment_id", assignment_ids())
def test_quality_gate(assignment_id):
    report = check_assignment(assignment_id, progress=False)
    print(format_report(report))
    assert report.ok, format_report(report)
