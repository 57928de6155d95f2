"""`make demo` end to end, as a newcomer runs it: every assignment released and graded through
the real pipeline; the perfect student gets full marks, the untouched release zero, and each
buggy student loses exactly the test cells its bug should fail, no others. In a debugging lab the
real fixer gets full marks, and the students who pasted the assignment's solution or rewrote every
bugged definition get none of the tests the bugs break (grader/demo.py says what each should get).

The demo runs here one assignment per test (`run_demo(ids=[...])`, each in its own demo folder), so
that no test runs for long; `make demo` runs them all in one."""
import pytest

from grader.demo import run_demo
from support import COURSE

pytestmark = pytest.mark.batch


def _demo_of(assignment_id):
    def test_demo_grades_every_sample_as_expected(self, course, tmp_path, capsys):
        ok = run_demo(course, ids=[assignment_id], demo_dir=tmp_path / "demo", progress=False)
        output = capsys.readouterr().out
        assert ok, output
        assert (tmp_path / "demo" / "grades.csv").exists()
        assert "UNEXPECTED" not in output
    return test_demo_grades_every_sample_as_expected


# One test class per assignment (as in test_gate.py): pytest-xdist's --dist loadscope hands out each
# class on its own, so the assignments' demos spread over both workers.
for _assignment_id in COURSE.assignment_ids():
    _name = f"TestDemo_{_assignment_id}"
    globals()[_name] = type(_name, (), {"test_demo_grades_every_sample_as_expected": _demo_of(_assignment_id)})
