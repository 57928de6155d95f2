"""Grading throughput: synthetic students (perfect, untouched release, and catalogued mutants
in turn) for every assignment, graded through the real pipeline (sandboxed kernels, parallel
workers, single-writer merge). Not a test: it prints figures for the README.

    python benchmarks/grading_benchmark.py --students 100 --workers 2
    python benchmarks/grading_benchmark.py --students 10 --assignments a1_self_attention --out result.json
"""
import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.autograde import autograde  # noqa: E402
from grader.batch import Batch  # noqa: E402
from grader.course import assignment_ids  # noqa: E402
from grader.mutants import load_catalogue  # noqa: E402
from grader.samples import buggy_submission, perfect_submission, release_notebook  # noqa: E402
from grader.stages.collect import collect  # noqa: E402


def write_students(assignment_id, count, folder):
    mutants = [m.name for m in load_catalogue(assignment_id)]
    for index in range(count):
        kind = index % (len(mutants) + 2)
        if kind == 0:
            nb = perfect_submission(assignment_id)
        elif kind == 1:
            nb = release_notebook(assignment_id)
        else:
            nb, _ = buggy_submission(assignment_id, mutants[kind - 2])
        nbformat.write(nb, str(folder / f"student{index:03d}.ipynb"))


def sandbox_overhead(assignment_id, repeats=3):
    """Median seconds to grade one perfect submission with and without the sandbox."""
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "one"
        folder.mkdir()
        nbformat.write(perfect_submission(assignment_id), str(folder / "alice.ipynb"))
        [submission] = collect(assignment_id, folder).submissions
        for sandboxed in (True, False):
            batch = Batch(assignment_id, course_dir=Path(tmp) / f"course-{sandboxed}", sandboxed=sandboxed)
            samples = []
            for _ in range(repeats):
                started = time.perf_counter()
                batch.grade(submission)
                samples.append(time.perf_counter() - started)
            batch.close()
            times["sandboxed" if sandboxed else "unsandboxed"] = statistics.median(samples)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--assignments", nargs="*", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    ids = args.assignments or assignment_ids()
    result = {"students": args.students, "workers": args.workers, "assignments": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for aid in ids:
            folder = Path(tmp) / aid
            folder.mkdir()
            write_students(aid, args.students, folder)
            t0 = time.perf_counter()
            outcomes = autograde(aid, folder, course_dir=Path(tmp) / "course", workers=args.workers)
            seconds = time.perf_counter() - t0
            per_student = [o.seconds for o in outcomes]
            result["assignments"][aid] = {
                "wall_s": round(seconds, 1), "graded": sum(o.status == "graded" for o in outcomes),
                "median_student_s": round(statistics.median(per_student), 2)}
            print(f"{aid}: {len(outcomes)} students in {seconds:.1f} s "
                  f"(median {statistics.median(per_student):.1f} s per student inside a worker)", flush=True)
    result["total_wall_s"] = round(time.perf_counter() - started, 1)
    one = {aid: sandbox_overhead(aid, repeats=1) for aid in ids}
    result["one_student"] = {aid: {k: round(v, 2) for k, v in t.items()} for aid, t in one.items()}
    result["one_student_full_set_s"] = round(sum(t["sandboxed"] for t in one.values()), 1)
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
