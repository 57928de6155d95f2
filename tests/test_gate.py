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
from support.spread import class_each

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


def _class_name(assignment_id_and_part):
    assignment_id, part = assignment_id_and_part
    return f"TestGate_{assignment_id}" + ("" if part.kind == "all" else f"_{part}".replace("-", "_"))


class_each(globals(), PARTS, _class_name, lambda assignment_id_and_part: _gate_part(*assignment_id_and_part))
