"""`make demo` end to end, as a newcomer runs it: every assignment released and graded through
the real pipeline; the perfect student gets full marks, the untouched release zero, and each
buggy student loses exactly the test cells its bug should fail, no others. In a debugging lab the
real fixer gets full marks, and the students who pasted the assignment's solution or rewrote every
bugged definition get none of the tests the bugs break (grader/demo.py says what each should get).

The demo runs here one assignment per test (`run_demo(ids=[...])`, each in its own demo folder), so
that no test runs for long; `make demo` runs them all in one. The tests a worker runs one after another
share the demo's warm-kernel and worker servers, as `make demo`'s assignments do (each kernel is a fresh
fork, whichever test asks)."""
import pytest

from grader.demo import demo_servers, run_demo
from support import COURSE
from support.spread import class_each

pytestmark = pytest.mark.batch


@pytest.fixture(scope="module")
def servers(course):
    started = demo_servers(course)
    yield started
    started.close()


def _demo_of(assignment_id):
    def test_demo_grades_every_sample_as_expected(self, course, servers, tmp_path, capsys):
        ok = run_demo(course, ids=[assignment_id], demo_dir=tmp_path / "demo", progress=False, servers=servers)
        output = capsys.readouterr().out
        assert ok, output
        assert (tmp_path / "demo" / "grades.csv").exists()
        assert "UNEXPECTED" not in output
    return test_demo_grades_every_sample_as_expected


class_each(globals(), COURSE.assignment_ids(), lambda aid: f"TestDemo_{aid}", _demo_of)
