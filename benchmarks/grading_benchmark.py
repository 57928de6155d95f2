"""Grading throughput: synthetic students (perfect, untouched release, and catalogued mutants
in turn) for every assignment, graded through the real pipeline (sandboxed kernels, parallel
workers, single-writer merge), with warm kernels (forked from a server that imported torch once)
and cold ones (each started from scratch in bubblewrap), in the same run. Not a test: it prints
figures for docs/results.md.

CPU is the whole machine's (every process: grader, workers, kernels, servers), read from /proc/stat
before and after, so run it on an otherwise idle machine.

    python benchmarks/grading_benchmark.py --students 100 --workers 2
    python benchmarks/grading_benchmark.py --students 10 --assignments a1_self_attention --kernels warm cold
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader import pipeline
from grader.autograde import autograde
from grader.course import Course
from grader.mutants import load_catalogue
from grader.samples import buggy_submission, perfect_submission, release_notebook
from grader.submission import Options, Status, Submission

COURSE = Course(Path(__file__).resolve().parent.parent)


def write_students(assignment_id, count, folder):
    mutants = [m.name for m in load_catalogue(COURSE, assignment_id)]
    for index in range(count):
        kind = index % (len(mutants) + 2)
        if kind == 0:
            nb = perfect_submission(COURSE, assignment_id)
        elif kind == 1:
            nb = release_notebook(COURSE, assignment_id)
        else:
            nb, _ = buggy_submission(COURSE, assignment_id, mutants[kind - 2])
        nbformat.write(nb, str(folder / f"student{index:03d}.ipynb"))


def machine_cpu_seconds():
    """CPU time the whole machine has spent busy (user, nice, system, irq, softirq), in seconds."""
    with open("/proc/stat") as handle:
        fields = [int(value) for value in handle.readline().split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def one_student(assignment_id, repeats=3):
    """Median seconds (and machine CPU-seconds) to grade one perfect submission once the batch is set
    up: with warm kernels, cold sandboxed kernels, and no sandbox."""
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "one"
        folder.mkdir()
        nbformat.write(perfect_submission(COURSE, assignment_id), str(folder / "alice.ipynb"))
        for mode, options in (("warm", Options(kernels="warm")), ("cold", Options(kernels="cold")),
                              ("unsandboxed", Options(sandboxed=False))):
            course = COURSE.with_grading_dir(Path(tmp) / f"course-{mode}")
            samples = []
            with pipeline.Batch(course, assignment_id, options) as batch:
                batch.prepare(servers=mode == "warm")
                for _ in range(repeats):
                    started, cpu = time.perf_counter(), machine_cpu_seconds()
                    graded = pipeline.grade(Submission("alice", folder / "alice.ipynb"), batch)
                    samples.append((time.perf_counter() - started, machine_cpu_seconds() - cpu))
                    assert graded.score == graded.max_score, graded.label
            figures[mode] = {"wall_s": round(statistics.median(s[0] for s in samples), 2),
                             "cpu_s": round(statistics.median(s[1] for s in samples), 2)}
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--assignments", nargs="*", default=None)
    parser.add_argument("--kernels", nargs="*", default=["warm", "cold"], choices=["warm", "cold"])
    parser.add_argument("--repeats", type=int, default=1, help="one-student measurements per mode (median)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    ids = args.assignments or COURSE.assignment_ids()
    result = {"students": args.students, "workers": args.workers, "batches": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for aid in ids:
            folder = Path(tmp) / aid
            folder.mkdir()
            write_students(aid, args.students, folder)
        for kernels in args.kernels:
            figures = result["batches"][kernels] = {}
            for aid in ids:
                t0, cpu0 = time.perf_counter(), machine_cpu_seconds()
                outcomes = autograde(COURSE.with_grading_dir(Path(tmp) / f"course-{kernels}"), aid, Path(tmp) / aid,
                                     Options(workers=args.workers, kernels=kernels, progress=False))
                seconds, cpu = time.perf_counter() - t0, machine_cpu_seconds() - cpu0
                figures[aid] = {"wall_s": round(seconds, 1), "cpu_s": round(cpu, 1),
                                "cpu_per_submission_s": round(cpu / len(outcomes), 2),
                                "graded": sum(o.status == Status.GRADED for o in outcomes)}
                print(f"{kernels} kernels, {aid}: {len(outcomes)} students in {seconds:.1f} s, {cpu:.0f} CPU-s "
                      f"({cpu / len(outcomes):.2f} CPU-s per submission, batch set-up included)", flush=True)
            figures["total_wall_s"] = round(sum(f["wall_s"] for f in figures.values()), 1)
            figures["cpu_per_submission_s"] = round(sum(f["cpu_s"] for f in figures.values() if isinstance(f, dict))
                                                    / (len(ids) * args.students), 2)
    one = {aid: one_student(aid, repeats=args.repeats) for aid in ids}
    result["one_student"] = one
    result["one_student_full_set_s"] = {mode: round(sum(f[mode]["wall_s"] for f in one.values()), 1)
                                        for mode in ("warm", "cold", "unsandboxed")}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
