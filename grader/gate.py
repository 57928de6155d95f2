"""`check [ID...]`: the quality gate. For each assignment:
  (a) the solution scores full marks (its answers from the kernel code alone, in-process, judged like
      a submission's);
  (b) the release executes in a real kernel through the real pipeline without breaking the
      grader and scores zero on every auto-graded cell;
  (c) assignments/<id> is exactly what `release` would write now, and provided cells match
      grader/provided/;
  (d) every mutant in the catalogue loses points (in the cells it names), the solution none;
  (e) the solution and every correct alternative (alternatives/<id>.py) keep every point under
      five different random-number-generator perturbations: a correct student never loses a
      point for writing it differently, or for drawing random numbers differently. An alternative
      that declares `loses=` (a contract of its own cell, such as a5's float64 precision, that its
      style does not keep) must lose exactly those cells;
  (f) no mutant regains a point by forging its own answers without knowing the expected values
      (every yes/no answer yes, every exception and error gone: `forged`).
With `device="cuda"`, (a), (d) and (e) run with tensors created on that device by default.

The runs of (d) and (e) are independent: on the CPU they run in worker processes forked from this one
(which has imported torch and run the solution), one per usable CPU (grader/cpus.py). A gate can also
run in parts (`gate_parts`, `check_assignment(..., part=...)`), which together check exactly what the
whole gate checks: the test suite spreads one assignment's gate over its workers that way.
"""
import io
import math
import multiprocessing
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import nbformat
import torch
from tqdm.auto import tqdm

from . import cells, labs
from .inprocess import run_in_process
from .judging import judge_notebook
from .mutants import load_alternatives, load_catalogue
from .release import release_differences, stale_provided_cells
from .samples import release_notebook
from .sandbox import unavailable_reason
from .submission import Options, Status, Submission
from .trace import solution_trace

MIN_MUTANTS = 12
MIN_ALTERNATIVES = 4
RNG_SEEDS = (11, 23, 37, 51, 77)   # five random-number-generator perturbations (see run_in_process)
JOB_TIMEOUT = 120                  # seconds for one isolated job (a candidate's runs) on a GPU
RUNS_PER_PART = 10                 # notebook runs in one part of a gate (gate_parts): a7's take a minute


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
    alternatives: list = field(default_factory=list)   # (name, how, lost points, first failure or "")
    seconds: float = 0.0

    @property
    def ok(self):
        return all(r.ok for r in self.results)


@dataclass(frozen=True)
class Part:
    """A share of an assignment's gate: "solution" is (a), (b) and (c); "mutants" i of n is (d) and (f)
    for the i-th of n consecutive slices of the catalogue; "alternatives" i of n is (e) for the i-th
    slice of the candidates (the solution first, then each alternative, each under every RNG seed);
    "all" is the whole gate (a debugging lab's is never split)."""
    kind: str
    index: int = 0
    count: int = 1

    def share(self, items):
        items = list(items)
        return items[len(items) * self.index // self.count:len(items) * (self.index + 1) // self.count]

    def __str__(self):
        return self.kind if self.count == 1 else f"{self.kind}-{self.index + 1}of{self.count}"


def gate_parts(course, assignment_id, runs_per_part=RUNS_PER_PART):
    """The parts that together make the gate of `assignment_id`, each about `runs_per_part` notebook
    runs (a candidate's runs under its RNG seeds stay in one part). Cheap: the catalogues are counted
    by their decorators, not loaded; a miscount changes the parts' sizes, never what they cover (each
    part takes its share of the catalogue as loaded)."""
    if labs.is_lab(course, assignment_id):
        return [Part("all")]

    def entries(path, decorator):
        text = path.read_text() if path.exists() else ""
        return sum(line.startswith(f"@{decorator}(") for line in text.splitlines())
    mutants = entries(course.mutants_dir / f"{assignment_id}.py", "mutant")
    candidates = 1 + entries(course.alternatives_dir / f"{assignment_id}.py", "alternative")
    per_part = max(1, runs_per_part // len(RNG_SEEDS))
    return ([Part("solution")]
            + [Part("mutants", i, n) for n in [max(1, math.ceil(mutants / runs_per_part))] for i in range(n)]
            + [Part("alternatives", i, n) for n in [max(1, math.ceil(candidates / per_part))] for i in range(n)])


def check_assignment(course, assignment_id, run_release=True, progress=True, device=None, part=None):
    """The gate of one assignment (or lab); with `part` (one of `gate_parts`), only that share of it."""
    if labs.is_lab(course, assignment_id):
        return check_lab(course, assignment_id, run_release, progress, device)
    started = time.time()
    report = AssignmentReport(assignment_id)
    source = cells.read(course.source_notebook(assignment_id))
    points = cells.test_points(source)
    full = sum(points.values())
    kind = part.kind if part is not None else "all"

    trace = solution_trace(course, assignment_id, device)
    if kind in ("all", "solution"):
        report.results.append(_check_solution(trace, source, full, "(a) solution scores full marks", device))
        if run_release and device is None:
            report.results.append(_check_release_scores_zero(course, assignment_id, full))
        if device is None:   # (b) and (c) do not depend on the device: CI proves them on the CPU
            report.results.append(_check_up_to_date(course, assignment_id, source))
    if kind in ("all", "mutants"):
        _check_mutants(course, assignment_id, source, trace, points, device, progress, report, share=part)
    if kind in ("all", "alternatives"):
        report.results.append(_check_alternatives(course, assignment_id, source, trace, points, device, progress,
                                                  report, share=part))
    report.seconds = time.time() - started
    return report


def _check_solution(trace, source, full, name, device=None):
    """(a): the reference's answers, computed by the kernel code alone (no expected value beside
    them) and judged as a submission's are, lose nothing; and its trace raised nowhere."""
    records, run_errors = run_in_process(source, device=device, split=trace.split)
    failed = [f"{v.grade_id}: {v.message}" for v in judge_notebook(trace, records) if not v.passed]
    failed += [f"{gid}: the trusted test code raised {rec['error']['type']}: {rec['error']['message']}"
               for gid, rec in trace.records.items() if rec.get("error")]
    errors = [f"cell {i}: {e['type']}: {e['message']}" for i, e in list(trace.errors) + list(run_errors)]
    return CheckResult(name, not failed and not errors,
                       f"{full:g}/{full:g}" if not failed and not errors else "; ".join(failed + errors)[:500])


def _check_up_to_date(course, assignment_id, source):
    """(c): provided cells, a lab's copies and answer key (grader/labs.py) and the release current."""
    stale = stale_provided_cells(source)
    differing = release_differences(course, assignment_id)
    problems = [f"provided cell {g} differs from grader/provided/{f} (run `python -m grader sync`)"
                for g, f in stale] + [f"assignments/{assignment_id}/{name} is stale (run `python -m grader release`)"
                                      for name in differing]
    if labs.lab_spec(source) is not None:
        problems += labs.lab_problems(course, assignment_id, source)
    return CheckResult("(c) release and provided cells up to date", not problems, "; ".join(problems) or "identical")


def _runs(course, assignment_id, source, jobs, device, desc, progress, split=None):
    """Run each job, (replacements, RNG seeds), once per seed (once without a seed when there are
    none); yields [(records, errors), ...] per job, in order. `split`: the test cells' split of `source`
    (the solution trace's), made once instead of once a run (a tenth of an a4 run's CPU). On the CPU
    the jobs run in worker processes forked from this one, one per usable CPU (`cpu_workers`), each
    with one thread (here, one after another, where one CPU is all there is or this process holds a
    CUDA context). On a GPU each job runs in a fresh process: a wrong implementation can trip a
    device-side assert (an index out of range, say), after which the process's CUDA context fails every
    later call, so it must not be shared with the next candidate."""
    bar = tqdm(total=len(jobs), desc=desc, unit="run", disable=not progress)
    # a CUDA context does not survive a fork (a notebook may have made one, on a machine with a GPU)
    workers = min(cpu_workers(), len(jobs)) if device is None and not torch.cuda.is_initialized() else 1
    if device is None and workers <= 1:
        for replacements, seeds in jobs:
            yield [run_in_process(source, replacements, rng_seed=seed, device=device, split=split)
                   for seed in seeds or (None,)]
            bar.update()
    elif device is None:
        # the workers are forked here, at the first submit, all at once (the fork context never starts
        # one later): they inherit the jobs, and nothing of a job is pickled on the way there
        global _FORKED_JOBS
        _FORKED_JOBS = (source, jobs, split)
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_one_thread)
        try:
            pending = [pool.submit(_forked_runs, index) for index in range(len(jobs))]
            _FORKED_JOBS = None
            for future in pending:
                yield torch.load(io.BytesIO(future.result()), weights_only=True)
                bar.update()
        finally:
            _FORKED_JOBS = None
            pool.shutdown(wait=False, cancel_futures=True)
    else:
        from .cpus import available_cpus
        workers = max(1, min(12, available_cpus() - 1))
        pool = multiprocessing.get_context("spawn").Pool(workers, maxtasksperchild=1)
        try:
            pending = [pool.apply_async(_isolated_runs, (course, assignment_id, replacements, seeds, device))
                       for replacements, seeds in jobs]
            for (replacements, seeds), result in zip(jobs, pending):
                try:
                    yield torch.load(io.BytesIO(result.get(timeout=JOB_TIMEOUT)), weights_only=True)
                except multiprocessing.TimeoutError:
                    stuck = {"type": "TimeoutError", "message": f"the run took over {JOB_TIMEOUT} s"}
                    yield [({}, [(-1, stuck)])] * len(seeds or (None,))
                bar.update()
        finally:
            pool.terminate()   # a stuck run's process too
    bar.close()


def cpu_workers():
    """How many processes run a gate's jobs on the CPU: GRADER_CHECK_WORKERS when set, else the CPUs
    this process may use (grader/cpus.py)."""
    from .cpus import available_cpus
    return int(os.environ.get("GRADER_CHECK_WORKERS") or available_cpus())


_FORKED_JOBS = None


def _one_thread():
    """A forked worker's start: one thread, so that the workers share the CPUs instead of
    oversubscribing them."""
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)


def _forked_runs(index):
    """Job `index` of _runs' jobs, in a worker forked while _FORKED_JOBS held them. The records go
    back as torch.save bytes, as _isolated_runs' do."""
    source, jobs, split = _FORKED_JOBS
    replacements, seeds = jobs[index]
    runs = [run_in_process(source, replacements, rng_seed=seed, split=split) for seed in seeds or (None,)]
    buffer = io.BytesIO()
    torch.save(runs, buffer)
    return buffer.getvalue()


def _isolated_runs(course, assignment_id, replacements, seeds, device):
    """_runs' job in a process of its own. The records go back as torch.save bytes: torch would
    otherwise pass tensors through shared memory that dies with this short-lived process."""
    source = cells.read(course.source_notebook(assignment_id))
    runs = [run_in_process(source, replacements, rng_seed=seed, device=device) for seed in seeds or (None,)]
    buffer = io.BytesIO()
    torch.save(runs, buffer)
    return buffer.getvalue()


def forged(records):
    """What a submission's kernel could report instead of its answers without knowing any expected
    value (grader/split.py): every yes/no answer yes, every exception a yes, every error of a cell
    gone. A test that observes a quantity, not a verdict made from it, gives such a forger nothing."""
    result = {}
    for gid, record in records.items():
        answers = []
        for observation in record.get("observations", []):
            if observation.get("value") is False or "raised" in observation:
                observation = {"site": observation.get("site"), "value": True}
            answers.append(observation)
        result[gid] = {**record, "observations": answers, "error": None}
    return result


def _check_mutants(course, assignment_id, source, trace, points, device, progress, report, share=None):
    """(d) and (f), for the whole catalogue or the slice of it that `share` (a Part) chooses."""
    catalogue = load_catalogue(course, assignment_id)
    chosen = share.share(catalogue) if share is not None else catalogue
    survivors, forgeries = [], []
    jobs = [([(mutant.replaces, mutant.source)], ()) for mutant in chosen]
    for mutant, [(records, _)] in zip(chosen, _runs(course, assignment_id, source, jobs, device,
                                                      f"mutants {assignment_id}", progress, trace.split)):
        failed_cells = [v.grade_id for v in judge_notebook(trace, records) if not v.passed]
        lost = sum(points[g] for g in failed_cells)
        missed = [g for g in mutant.fails if g not in failed_cells]
        ok = lost > 0 and not missed
        report.mutants.append((mutant.name, mutant.bug, lost, failed_cells, ok))
        if not ok:
            survivors.append(mutant.name + (f" (not caught by {', '.join(missed)})" if missed else " survived"))
        regained = [v.grade_id for v in judge_notebook(trace, forged(records))
                    if v.passed and v.grade_id in failed_cells]
        if regained:
            forgeries.append(f"{mutant.name} regains {', '.join(regained)}")
    enough = len(catalogue) >= MIN_MUTANTS
    which = f"{len(catalogue)} mutants" + (f", these {len(chosen)}: {share}" if len(chosen) < len(catalogue) else "")
    report.results.append(CheckResult(
        f"(d) every mutant loses points ({which})", not survivors and enough,
        "; ".join(survivors) if survivors else ("all caught" if enough else f"only {len(catalogue)} mutants, "
                                                 f"the catalogue needs at least {MIN_MUTANTS}")))
    report.results.append(CheckResult(
        "(f) no mutant regains a point by forging its answers (every no a yes, every error gone)", not forgeries,
        "; ".join(forgeries) or "none regains any"))


def _check_alternatives(course, assignment_id, source, trace, points, device, progress, report,
                        alternatives=None, minimum=MIN_ALTERNATIVES, seeds=RNG_SEEDS, share=None):
    """(e): the solution and each alternative (by default the assignment's catalogue), under every RNG
    perturbation, keep full marks; only the candidates that `share` (a Part) chooses when it is given."""
    alternatives = load_alternatives(course, assignment_id) if alternatives is None else alternatives
    not_run = [a for a in alternatives if device is not None and a.cpu_only]
    candidates = [("(reference solution)", "the solution itself", [], ())] + [
        (a.name, a.how, [(a.replaces, a.source)], a.loses) for a in alternatives if a not in not_run]
    everyone = len(candidates)
    candidates = share.share(candidates) if share is not None else candidates
    losers = []
    jobs = [(replacements, seeds) for _, _, replacements, _ in candidates]
    outcomes = _runs(course, assignment_id, source, jobs, device, f"alternatives {assignment_id}", progress,
                     trace.split)
    for (name, how, _, declared), runs in zip(candidates, outcomes):
        lost, failure = 0.0, ""
        for seed, (records, errors) in zip(seeds, runs):
            verdicts = judge_notebook(trace, records)
            failed = [v for v in verdicts if not v.passed and v.grade_id not in declared]
            kept = [g for g in declared if not any(v.grade_id == g and not v.passed for v in verdicts)]
            if failed or errors or kept:
                lost = max(lost, sum(points[v.grade_id] for v in failed))
                failure = failure or (f"RNG seed {seed}: " + "; ".join(
                    [f"{v.grade_id}: {v.message}" for v in failed]
                    + [f"{g}: not lost, though loses= declares it" for g in kept]
                    + [f"cell {i}: {e['type']}: {e['message']}" for i, e in errors]))
        if declared:
            how += f" [loses {', '.join(declared)} by design]"
        report.alternatives.append((name, how, lost, failure))
        if failure:
            losers.append(f"{name} loses {lost:g} points ({failure[:300]})")
    enough = len(alternatives) >= minimum
    detail = "; ".join(losers) if losers else ("all keep full marks" if enough else
                                               f"only {len(alternatives)} alternatives, the catalogue needs at "
                                               f"least {minimum}")
    if not_run:
        detail += "; not run on " + str(device) + ": " + "; ".join(f"{a.name} ({a.cpu_only})" for a in not_run)
    ran = len(alternatives) - len(not_run)
    which = f", these {len(candidates)}: {share}" if len(candidates) < everyone else ""
    return CheckResult(
        f"(e) correct alternatives keep full marks ({ran} alternatives + the solution, "
        f"{len(seeds)} RNG seed{'s each' if len(seeds) > 1 else ''}{which})", not losers and enough, detail)


def _grade_release(course, assignment_id):
    """The release through the GRADE stages in a real kernel: sandboxed where this machine has the
    sandbox, else unsandboxed (it is the course's own notebook). Returns (graded submission, why it
    ran unsandboxed or "")."""
    without_sandbox = unavailable_reason()
    # nbgrader's stages, imported for this run only: a GPU box given only torch and the notebook runners
    # (tools/gpu_wheels.sh) runs the rest of the gate without nbgrader
    from . import pipeline
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "release.ipynb"
        nbformat.write(release_notebook(course, assignment_id), str(path))
        options = Options(sandboxed=without_sandbox is None, progress=False)
        [graded] = pipeline.run(course.with_grading_dir(Path(tmp) / "course"), assignment_id,
                                pipeline.given(Submission("release", path)), options, pipeline.Serial(),
                                recording=False).graded
    return graded, without_sandbox or ""


def _check_release_scores_zero(course, assignment_id, full):
    graded, without_sandbox = _grade_release(course, assignment_id)
    ok = graded.status == Status.GRADED and graded.score == 0
    detail = f"{graded.score:g}/{full:g}" if graded.status == Status.GRADED else graded.label
    if without_sandbox:
        detail += f" (run unsandboxed: {without_sandbox})"
    return CheckResult("(b) release runs and scores zero", ok, detail)


# ---- a debugging lab (grader/labs.py) ----

def check_lab(course, lab_id, run_release=True, progress=True, device=None):
    """The gate for a debugging lab:
      (a) its source, the reference code, scores full marks;
      (b) the release, the colleague's code, loses in a real kernel exactly the test cells it loses
          in-process with every bug planted: the points of its bugs and nothing else;
      (c) the release, the copies of the assignment and the answer key are up to date;
      (d) each bug, planted alone as the release plants it, fails the test cells its mutant names in
          fails= (its own tests), and no other bug fails any of them: a student's failure in a bug's
          own tests says that bug is still there, which the feedback and the class report rely on. A
          bug may fail more (split_heads breaks every test that uses it); all bugs together fail
          every bug's own tests and nothing that no bug fails alone (bugs may mask each other
          elsewhere: a training test can pass with two bugs and fail with one);
      (e) the assignment's correct alternatives of the bugged definitions keep full marks here,
          under one RNG perturbation: the lab's code and tests are proven copies of the
          assignment's (c), whose own gate runs every alternative under all five;
      (f) no bug, planted alone or all together, regains a point by forging its answers (as the
          assignment's (f));
      (g) each bug is its catalogue mutant and breaks what the lab records, and (h) the tests pay
          for a repair, not a rewrite (grader/labs.py gate_checks).
    """
    started = time.time()
    report = AssignmentReport(lab_id)
    source = cells.read(course.source_notebook(lab_id))
    points = cells.test_points(source)
    full = sum(points.values())
    try:
        bugs = labs.lab_bugs(course, lab_id, source)
    except labs.LabError as error:
        report.results.append(CheckResult("(d) the lab's bugs are in the catalogue", False, str(error)))
        report.seconds = time.time() - started
        return report
    trace = solution_trace(course, lab_id, device)
    report.results.append(_check_solution(trace, source, full, "(a) the fixed code (the reference) scores full marks",
                                          device))
    bug_result, forgery_result, lost_together = _check_lab_bugs(course, lab_id, source, trace, points, bugs, device,
                                                                progress, report)
    if run_release and device is None:
        report.results.append(_check_lab_release(course, lab_id, points, lost_together))
    if device is None:
        report.results.append(_check_up_to_date(course, lab_id, source))
    report.results.append(bug_result)
    assignment = labs.debugged_assignment(course, lab_id)
    bugged = {bug.replaces for bug in bugs}
    # a cell an alternative loses by design that the lab leaves out (course.lab.leaves_out) is not the lab's to check
    chosen = [replace(a, loses=tuple(g for g in a.loses if g in points))
              for a in load_alternatives(course, assignment) if bugged & set(a.replaces)]
    report.results.append(_check_alternatives(course, lab_id, source, trace, points, device, progress, report,
                                              alternatives=chosen, minimum=1, seeds=RNG_SEEDS[:1]))
    report.results.append(forgery_result)
    planted_alone = {name: set(failed) for name, _, _, failed, _ in report.mutants}
    report.results += [CheckResult(*check) for check in labs.gate_checks(course, lab_id, source, trace, bugs,
                                                                         planted_alone)]   # (g), (h)
    report.seconds = time.time() - started
    return report


def _check_lab_release(course, lab_id, points, lost):
    full = sum(points.values())
    graded, without_sandbox = _grade_release(course, lab_id)
    expected = full - sum(points[g] for g in lost)
    ok = graded.status == Status.GRADED and set(graded.failed) == lost and graded.score == expected
    detail = (f"{graded.score:g}/{full:g}, failing {', '.join(graded.failed) or 'nothing'}"
              if graded.status == Status.GRADED else graded.label)
    if not ok:
        detail += f"; expected {expected:g}/{full:g}, failing exactly {', '.join(sorted(lost))}"
    if without_sandbox:
        detail += f" (run unsandboxed: {without_sandbox})"
    return CheckResult("(b) the colleague's code loses exactly its bugs' points", ok, detail)


def _check_lab_bugs(course, lab_id, source, trace, points, bugs, device, progress, report):
    """(d), (f), and the test cells the colleague's code (every bug planted) fails."""
    planted = [(bug, labs.plant_bugs(course, lab_id, nbformat.from_dict(source), [bug.name])) for bug in bugs]
    planted.append((None, labs.plant_bugs(course, lab_id, nbformat.from_dict(source))))
    failing, problems, forgeries = {}, [], []
    for bug, nb in tqdm(planted, desc=f"bugs {lab_id}", unit="run", disable=not progress):
        records, errors = run_in_process(nb, device=device, split=trace.split)
        failed = {v.grade_id for v in judge_notebook(trace, records) if not v.passed}
        failing[bug.name if bug else None] = (failed, errors)
        regained = [v.grade_id for v in judge_notebook(trace, forged(records)) if v.passed and v.grade_id in failed]
        if regained:
            forgeries.append(f"{bug.name if bug else 'all bugs together'} regains {', '.join(regained)}")
    union = set().union(*(failing[bug.name][0] for bug in bugs))
    for bug in bugs:
        cells_failed, errors = failing[bug.name]
        trouble = []
        if not bug.tests:
            trouble.append("its mutant names no test cell in fails=, so the feedback could not say what catches it")
        if missing := set(bug.tests) - cells_failed:
            trouble.append(f"passes {', '.join(sorted(missing))}, which its fails= names")
        for other in bugs:
            if other is not bug and (shared := set(bug.tests) & failing[other.name][0]):
                trouble.append(f"{other.name} fails {', '.join(sorted(shared))} too, so a failure there would not "
                               "say which bug is left")
        if errors:
            trouble.append(f"a cell errs: {errors[0][1]['type']}: {errors[0][1]['message'][:120]}")
        report.mutants.append((bug.name, bug.description, sum(points[g] for g in cells_failed),
                               sorted(cells_failed), not trouble))
        problems += [f"{bug.name}: {t}" for t in trouble]
    together, errors = failing[None]
    own = {test for bug in bugs for test in bug.tests}
    ok = own <= together <= union and not errors
    lost = sum(points[g] for g in together)
    report.mutants.append(("(all bugs)", "the colleague's code", lost, sorted(together), ok))
    if not ok:
        problems.append(f"all bugs together fail {sorted(together)}: expected every bug's own tests "
                        f"{sorted(own)} and nothing a bug alone does not fail ({sorted(union)})")
    forgery = CheckResult("(f) no bug regains a point by forging its answers (every no a yes, every error gone)",
                          not forgeries, "; ".join(forgeries) or "none regains any")
    return CheckResult(f"(d) each bug fails its own tests, and only it ({len(bugs)} bugs)", not problems,
                       "; ".join(problems) or "all attributable"), forgery, together


def format_report(report):
    lines = [f"{report.assignment_id}  ({report.seconds:.1f} s)"]
    for r in report.results:
        lines.append(f"  {'PASS' if r.ok else 'FAIL'}  {r.name}: {r.detail}")
    if report.mutants:
        width = max(len(m[0]) for m in report.mutants)
        lines.append("  mutants:")
        for name, bug, lost, cells, ok in report.mutants:
            lines.append(f"    {'caught  ' if ok else 'MISSED  '}{name.ljust(width)}  -{lost:g} pts  {bug}")
    if report.alternatives:
        width = max(len(a[0]) for a in report.alternatives)
        lines.append("  correct alternatives:")
        for name, how, lost, failure in report.alternatives:
            lines.append(f"    {'full    ' if not failure else 'LOSES   '}{name.ljust(width)}  -{lost:g} pts  {how}")
            if failure:
                lines.append(f"        {failure[:400]}")
    return "\n".join(lines)
