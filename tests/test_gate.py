"""The quality gate (`grader check`) for every assignment, as CI runs it (COURSE_SPEC §5): the
solution scores full marks, the release zero in a real kernel, the release is up to date, every
catalogued mutant loses points and every correct alternative keeps them."""
import pytest

from grader.gate import check_assignment, format_report
from support import ASSIGNMENT_IDS, LAB_IDS

pytestmark = pytest.mark.gate


@pytest.mark.parametrize("assignment_id", ASSIGNMENT_IDS + LAB_IDS)
def test_quality_gate(course, assignment_id):
    report = check_assignment(course, assignment_id, progress=False)
    print(format_report(report))
    assert report.ok, format_report(report)
