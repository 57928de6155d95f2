"""`demo`: the whole instructor workflow on generated sample submissions, in out/demo/
(never in the real course/ folder): release, autograde, feedback, export, and a check that
each sample got what it should."""
import shutil
from pathlib import Path

from .autograde import autograde, format_table
from .course import REPO, assignment_ids
from .feedback import export_csv, generate_feedback
from .mutants import load_catalogue
from .release import release
from .report import build_report
from .samples import write_demo_submissions
from .sandbox import SandboxUnavailable, check_available

DEMO_DIR = REPO / "out" / "demo"


def run_demo(ids=None, demo_dir=DEMO_DIR, progress=True):
    ids = ids or assignment_ids()
    if demo_dir.exists():
        shutil.rmtree(demo_dir)
    course_dir = demo_dir / "course"
    sandboxed = demo_sandboxed()
    problems = []
    for aid in ids:
        release(aid)
        folder = demo_dir / "submissions" / aid
        expectations = write_demo_submissions(aid, folder)
        outcomes = autograde(aid, folder, course_dir=course_dir, progress=progress, sandboxed=sandboxed)
        print(format_table(aid, outcomes))
        problems += _unexpected(aid, outcomes)
        pages = generate_feedback(aid, course_dir=course_dir)
        report = build_report(aid, course_dir=course_dir)
        print(f"  feedback: {len(pages)} HTML pages in {_shown(course_dir / 'feedback')}; "
              f"class report: {_shown(report)}\n")
    csv_path, count = export_csv(demo_dir / "grades.csv", course_dir=course_dir)
    print(f"grades: {count} rows in {_shown(csv_path)}")
    for problem in problems:
        print("UNEXPECTED:", problem)
    return not problems


def demo_sandboxed():
    """The demo's samples are the course's own notebooks (the solution, the release, catalogued
    mutants), so without bubblewrap they are graded unsandboxed, with a one-line notice; real
    submissions never are (`autograde` refuses and says how to install the sandbox)."""
    try:
        check_available()
        return True
    except SandboxUnavailable as error:
        reason = str(error).splitlines()[0].rstrip(".")
        print(f"demo: no sandbox on this machine ({reason}); grading the course's own sample notebooks "
              "without it -- real submissions are never graded unsandboxed")
        return False


def _shown(path):
    """A path relative to the repository when it is inside it."""
    path = Path(path)
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def _unexpected(aid, outcomes):
    fails = {f"bug_{m.name}": set(m.fails) for m in load_catalogue(aid)}
    problems = []
    for o in outcomes:
        if o.status != "graded":
            problems.append(f"{aid}/{o.student}: {o.label}")
        elif o.student == "perfect" and o.score != o.max_score:
            problems.append(f"{aid}/perfect scored {o.score:g}/{o.max_score:g}: failed {o.failed}")
        elif o.student == "untouched_release" and o.score != 0:
            problems.append(f"{aid}/untouched_release scored {o.score:g}")
        elif o.student in fails and fails[o.student] and set(o.failed) != fails[o.student]:
            problems.append(f"{aid}/{o.student} failed {sorted(o.failed)}, expected {sorted(fails[o.student])}")
    return problems
