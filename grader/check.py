"""`check [ID...]`: the quality gate. For each assignment:
  (a) the solution scores full marks (in-process, judged like a submission);
  (b) the release executes in a real kernel through the real pipeline without breaking the
      grader and scores zero on every auto-graded cell;
  (c) assignments/<id> is exactly what `release` would write now, and provided cells match
      grader/provided/;
  (d) every mutant in the catalogue loses points (in the cells it names), the solution none.
"""
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from . import notebook as nbtools
from .course import SOURCE_DIR
from .inprocess import run_in_process
from .judge import judge_notebook
from .mutants import load_catalogue
from .release import release_differences, stale_provided_cells
from .trace import solution_trace

MIN_MUTANTS = 12


@dataclass
class CheckResult:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class AssignmentReport:
    assignment_id: str
    results: list = field(default_factory=list)
    mutants: list = field(default_factory=list)   # (name, bug, lost points, failed cells, ok)
    seconds: float = 0.0

    @property
    def ok(self):
        return all(r.ok for r in self.results)


def check_assignment(assignment_id, run_release=True, progress=True):
    started = time.time()
    report = AssignmentReport(assignment_id)
    source = nbtools.read(nbtools.notebook_path(SOURCE_DIR, assignment_id))
    points = {nbtools.grade_id(c): nbtools.points(c) for c in nbtools.test_cells(source)}
    full = sum(points.values())

    trace = solution_trace(assignment_id)
    solution_records = {gid: {**rec, "observations": [dict(o) for o in rec["observations"]]}
                        for gid, rec in trace.records.items()}
    verdicts = judge_notebook(trace, solution_records)
    failed = [f"{v.grade_id}: {v.message}" for v in verdicts if not v.passed]
    errors = [f"cell {i}: {e['type']}: {e['message']}" for i, e in trace.errors]
    report.results.append(CheckResult("(a) solution scores full marks", not failed and not errors,
                                      f"{full:g}/{full:g}" if not failed and not errors
                                      else "; ".join(failed + errors)[:500]))

    if run_release:
        report.results.append(_check_release_scores_zero(assignment_id, full))

    stale = stale_provided_cells(source)
    differing = release_differences(assignment_id)
    problems = [f"provided cell {g} differs from grader/provided/{f} (run `python -m grader sync`)"
                for g, f in stale] + [f"assignments/{assignment_id}/{name} is stale (run `python -m grader release`)"
                                      for name in differing]
    report.results.append(CheckResult("(c) release and provided cells up to date", not problems,
                                      "; ".join(problems) or "identical"))

    catalogue = load_catalogue(assignment_id)
    survivors = []
    for mutant in tqdm(catalogue, desc=f"mutants {assignment_id}", unit="mutant", disable=not progress):
        records, _ = run_in_process(source, [(mutant.replaces, mutant.source)])
        failed_cells = [v.grade_id for v in judge_notebook(trace, records) if not v.passed]
        lost = sum(points[g] for g in failed_cells)
        missed = [g for g in mutant.fails if g not in failed_cells]
        ok = lost > 0 and not missed
        report.mutants.append((mutant.name, mutant.bug, lost, failed_cells, ok))
        if not ok:
            survivors.append(mutant.name + (f" (not caught by {', '.join(missed)})" if missed else " survived"))
    enough = len(catalogue) >= MIN_MUTANTS
    report.results.append(CheckResult(
        f"(d) every mutant loses points ({len(catalogue)} mutants)", not survivors and enough,
        "; ".join(survivors) if survivors else ("all caught" if enough else f"only {len(catalogue)} mutants, "
                                                 f"the catalogue needs at least {MIN_MUTANTS}")))
    report.seconds = time.time() - started
    return report


def _check_release_scores_zero(assignment_id, full):
    from .autograde import Batch
    from .samples import release_notebook
    import nbformat

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "submissions"
        folder.mkdir()
        nbformat.write(release_notebook(assignment_id), str(folder / "release.ipynb"))
        from .stages.collect import collect
        batch = Batch(assignment_id, course_dir=Path(tmp) / "course")
        try:
            outcome, _ = batch.grade(collect(assignment_id, folder)[0])
        finally:
            batch.close()
    ok = outcome.status == "graded" and outcome.score == 0
    return CheckResult("(b) release runs and scores zero", ok,
                       f"{outcome.score:g}/{full:g}" if outcome.status == "graded" else outcome.label)


def format_report(report):
    lines = [f"{report.assignment_id}  ({report.seconds:.1f} s)"]
    for r in report.results:
        lines.append(f"  {'PASS' if r.ok else 'FAIL'}  {r.name}: {r.detail}")
    if report.mutants:
        width = max(len(m[0]) for m in report.mutants)
        lines.append("  mutants:")
        for name, bug, lost, cells, ok in report.mutants:
            lines.append(f"    {'caught  ' if ok else 'MISSED  '}{name.ljust(width)}  -{lost:g} pts  {bug}")
    return "\n".join(lines)
