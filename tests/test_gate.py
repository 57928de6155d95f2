"""The quality gate (`grader check`) for every assignment, as CI runs it (COURSE_SPEC §5): the
solution scores full marks, the release zero in a real kernel, the release is up to date, every
catalogued mutant loses points and every correct alternative keeps them.

An assignment's gate runs here in parts (grader/gate.py: gate_parts), each a test of its own, so that
no test runs for long: the solution, the release and its freshness in one, then the
catalogue of mutants and the candidates of alternatives in slices of a few dozen runs. Together the
parts check exactly what `python -m grader check ID` does; a debugging lab's gate is one test."""
import os

import pytest

from grader.cpus import available_cpus
from grader.gate import check_assignment, format_report, gate_parts
from support import ASSIGNMENT_IDS, COURSE, LAB_IDS

pytestmark = pytest.mark.gate

PARTS = [(assignment_id, part) for assignment_id in ASSIGNMENT_IDS + LAB_IDS
         for part in gate_parts(COURSE, assignment_id)]


@pytest.fixture
def cpus_left_by_the_other_workers(monkeypatch):
    """The gate's runs in as many processes as this worker's share of the CPUs (grader/gate.py
    cpu_workers): where pytest-xdist already runs a worker per CPU, one, as the runs' forks would only
    take time from the other workers (measured: the same wall time, 15 % more CPU time)."""
    share = available_cpus() // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    monkeypatch.setenv("GRADER_CHECK_WORKERS", str(max(1, share)))


def _gate_part(assignment_id, part):
    def test_quality_gate(self, course, cpus_left_by_the_other_workers):
        report = check_assignment(course, assignment_id, progress=False, part=part)
        print(format_report(report))
        assert report.ok, format_report(report)
    return test_quality_gate


# One test class per part, made here from the list of parts: `make test` runs pytest-xdist's
# --dist loadscope, which keeps a file's tests on one worker but hands out each class on its own, so
# the gates' parts spread over both workers while every other file (none has classes) stays whole.
for _assignment_id, _part in PARTS:
    _name = f"TestGate_{_assignment_id}" + ("" if _part.kind == "all" else f"_{_part}".replace("-", "_"))
    globals()[_name] = type(_name, (), {"test_quality_gate": _gate_part(_assignment_id, _part)})
