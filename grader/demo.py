"""`demo`: the whole instructor workflow on generated sample submissions, in out/demo/
(never in the real course/ folder): release, autograde, feedback, report, export, and a check
that each sample got what it should."""
import shutil
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from . import cells, pipeline, store
from .autograde import format_table, in_table_order, show_warnings
from .feedback import export_csv, generate_feedback
from .labs import bug_outcome, is_lab, lab_bugs, student_repairs
from .mutants import load_catalogue
from .report import build_report
from .samples import LAB_FIXER, LAB_PASTED, LAB_REWRITTEN, write_demo_submissions
from .sandbox import unavailable_reason
from .submission import Options, Status

# assignments set up and waiting in the workers' pool beyond the one being recorded: the workers never wait
# while this thread reports one assignment and sets up the next, whichever of the two takes longer
LOOKAHEAD = 2


def run_demo(course, ids=None, demo_dir=None, progress=True, servers=None):
    """True when every sample got what it should; the demo's course state lives in demo_dir
    (default: out/demo in the course), its gradebooks thrown away with it (store.throwaway_gradebooks).
    `servers`: started demo_servers(course) to grade with and leave running (several demos in a row);
    by default the demo starts its own and ends them.

    Each assignment goes through the pipeline's phases (grader/pipeline.py) as `autograde` runs them,
    one assignment after another, but overlapped so that both cores stay busy: while one assignment's
    kernels run, this thread records and reports the one before it and sets up the next ones (release,
    samples, intake and Batch), whose submissions then wait in the same pool of workers. The warm-kernel
    and worker servers are started once for all of them. Everything that writes the demo's gradebook
    (the releases Batch.prepare makes, RECORD) happens in this thread, in the same order as one assignment
    after another."""
    ids = ids or course.assignment_ids()
    demo_dir = Path(demo_dir or course.root / "out" / "demo")
    if demo_dir.exists():
        shutil.rmtree(demo_dir)
    demo = course.with_grading_dir(demo_dir / "course")
    options = demo_options(progress)
    problems, started = [], []
    own_servers = servers is None
    if own_servers:
        servers = demo_servers(course, ids, options)    # they start while the first assignment is set up
    store.throwaway_gradebooks(demo_dir)
    try:
        with ThreadPoolExecutor(max_workers=options.parallel) as pool:
            try:
                for aid in ids:
                    started.append(_start_grading(course, demo, demo_dir, aid, options, servers, pool))
                    if len(started) > LOOKAHEAD:
                        problems += _finish_grading(course, demo, started.pop(0))
                while started:
                    problems += _finish_grading(course, demo, started.pop(0))
            except BaseException:
                for grading in started:     # an error: what has not started grading never will
                    for future in grading.futures:
                        future.cancel()
                raise
    finally:
        for grading in started:             # after the pool: no submission is grading in its folder
            grading.batch.close()
        if own_servers:
            servers.close()
        store.keep_gradebooks(demo_dir)
    csv_path, count = export_csv(demo, demo_dir / "grades.csv")
    print(f"grades: {count} rows in {_shown(course, csv_path)}")
    for problem in problems:
        print("UNEXPECTED:", problem)
    return not problems


@dataclass
class _Grading:
    """One assignment whose submissions are in the workers' pool."""
    assignment_id: str
    batch: pipeline.Batch
    intake: object
    futures: list


def _start_grading(course, demo, demo_dir, aid, options, servers, pool):
    """Samples, intake and prepared Batch of `aid` (autograde's INTAKE and prepare phases); then its
    submissions through GRADE in `pool`. The release is the batch's, as autograde's on a new course:
    Batch.prepare releases into its scratch folder, and the demo's gradebook gets the assignment from it
    (a copy of that gradebook for the first assignment, a release of its own into scratch for each later
    one); the committed assignments/ is never rewritten here (a reader of it may be running)."""
    folder = demo_dir / "submissions" / aid
    write_demo_submissions(course, aid, folder)
    batch = pipeline.Batch(demo, aid, options, servers=servers)
    try:
        intake = pipeline.take_in(folder, batch)
        show_warnings(intake)
        batch.prepare()
    except BaseException:
        batch.close()
        raise
    return _Grading(aid, batch, intake, [pool.submit(pipeline.grade, s, batch) for s in intake.submissions])


def _finish_grading(course, demo, grading):
    """autograde's RECORD phase for `grading`'s submissions as they finish (pipeline.record_all), then the
    table, the check of every sample, the feedback pages and the class report; the problems found."""
    aid, batch, intake = grading.assignment_id, grading.batch, grading.intake
    try:
        graded = pipeline.record_all((future.result() for future in as_completed(grading.futures)), intake, batch)
    finally:
        batch.close()
    graded = in_table_order(graded + intake.not_graded)
    print(format_table(aid, graded))
    problems = _unexpected(course, demo, aid, graded)
    pages = generate_feedback(demo, aid)
    report = build_report(demo, aid)
    print(f"  feedback: {len(pages)} HTML pages in {_shown(course, store.feedback_dir(demo))}; "
          f"class report: {_shown(course, report)}\n")
    return problems


def demo_options(progress=True):
    """The demo's Options: sandboxed where bubblewrap works here (demo_sandboxed)."""
    return Options(sandboxed=demo_sandboxed(), progress=progress)


def demo_servers(course, ids=None, options=None):
    """The demo's started servers (pipeline.Servers) for the assignments `ids` (default: all): the worker
    server, and warm kernels holding those assignments' warm imports -- which build their own sandbox, so
    the demo has them where bubblewrap is missing too, wherever this system lets the warm-kernel server
    build it (else each kernel starts cold, unsandboxed, as before)."""
    return pipeline.Servers(options or demo_options(progress=False),
                            pipeline.warm_imports(course, ids or course.assignment_ids()), warm_unsandboxed=True)


def demo_sandboxed():
    """The demo's samples are the course's own notebooks (the solution, the release, catalogued
    mutants), so without bubblewrap they are graded unsandboxed, with a one-line notice; real
    submissions never are (`autograde` refuses and says how to install the sandbox)."""
    reason = unavailable_reason()
    if reason:
        print(f"demo: no sandbox on this machine ({reason}); grading the course's own sample notebooks "
              "without it -- real submissions are never graded unsandboxed")
    return reason is None


def _shown(course, path):
    """A path relative to the course when it is inside it."""
    path = Path(path)
    return path.relative_to(course.root) if path.is_relative_to(course.root) else path


def _unexpected(course, demo, aid, graded):
    if is_lab(course, aid):
        return _unexpected_in_lab(course, demo, aid, graded)
    fails = {f"bug_{m.name}": set(m.fails) for m in load_catalogue(course, aid)}
    problems = []
    for s in graded:
        if s.status != Status.GRADED:
            problems.append(f"{aid}/{s.student}: {s.label}")
        elif s.student == "perfect" and s.score != s.max_score:
            problems.append(f"{aid}/perfect scored {s.score:g}/{s.max_score:g}: failed {s.failed}")
        elif s.student == "untouched_release" and s.score != 0:
            problems.append(f"{aid}/untouched_release scored {s.score:g}")
        elif s.student in fails and fails[s.student] and set(s.failed) != fails[s.student]:
            problems.append(f"{aid}/{s.student} failed {sorted(s.failed)}, expected {sorted(fails[s.student])}")
    return problems


def _unexpected_in_lab(course, demo, aid, graded):
    """A lab's real fixer repaired every bug and has full marks; the untouched release missed every bug;
    missed_<bug> missed that bug only, as the feedback reads it from the failed tests and the code; the
    student who pasted the assignment's solution and the one who rewrote every bugged definition have
    every bug rewritten, so none of the tests the bugs break pays, and lose nothing else. Prints what
    those tests paid each of them."""
    bugs = lab_bugs(course, aid)
    own = {test for bug in bugs for test in bug.breaks}   # every test a bug breaks
    points = cells.test_points(cells.read(course.source_notebook(aid)))
    problems, paid = [], {}
    for s in graded:
        if s.status != Status.GRADED:
            problems.append(f"{aid}/{s.student}: {s.label}")
            continue
        _, missed, rewritten, _ = bug_outcome(bugs, s.failed, student_repairs(demo, aid, s.student, bugs))
        missed, rewritten = sorted(b.name for b in missed), sorted(b.name for b in rewritten)
        everything = sorted(bug.name for bug in bugs)
        wanted = {LAB_FIXER: ([], []), "untouched_release": (everything, []), LAB_PASTED: ([], everything),
                  LAB_REWRITTEN: ([], everything)}.get(s.student, ([s.student.removeprefix("missed_")], []))
        exact = {LAB_FIXER: set(), LAB_PASTED: own, LAB_REWRITTEN: own}.get(s.student)
        if (missed, rewritten) != wanted or (exact is not None and set(s.failed) != exact):
            problems.append(f"{aid}/{s.student} scored {s.score:g}/{s.max_score:g}, missed {missed or 'no bug'} and "
                            f"rewrote {rewritten or 'nothing'}; expected missed {wanted[0] or 'no bug'}, rewrote "
                            f"{wanted[1] or 'nothing'}")
        paid[s.student] = sum(points[test] for test in own if test not in s.failed)
    if paid:
        shown = ", ".join(f"{name} {paid[name]:g}" for name in (LAB_FIXER, LAB_PASTED, LAB_REWRITTEN) if name in paid)
        print(f"  the tests the bugs break ({sum(points[test] for test in own):g} of {sum(points.values()):g} "
              f"auto-graded points) paid: {shown}")
    return problems

