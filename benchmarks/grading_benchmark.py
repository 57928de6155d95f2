"""Grading throughput: synthetic students for every assignment and debugging lab, graded through the
real pipeline (sandboxed kernels, parallel workers, single-writer merge), with warm kernels (forked
from a server that imported torch once) and cold ones (each started from scratch in bubblewrap), in
the same run. Not a test: it prints figures for docs/results.md.

The students: for an assignment, the perfect submission, the untouched release and each catalogued
mutant in turn; for a debugging lab, the real fixer, the untouched release, one student for each bug
left in, the assignment's solution pasted over the lab and the bugged definitions rewritten.

CPU is counted two ways. The process tree's: this process and every process below it, which other
work on the machine does not touch, split into the batch's set-up (release, trace, the servers'
imports) and the grading proper. getrusage counts what was reaped: this process adopts its
descendants' orphans (PR_SET_CHILD_SUBREAPER) and reaps them after each batch, as the sandbox's init
outlives the supervisor the grader kills. A sandboxed kernel itself is counted nowhere (its PID
namespace's init dies before it, and the system then reaps it without a count; /usr/bin/time misses
it too), so here each kernel notes its own CPU after every cell (KERNEL_CPU_HOOK, added to the
recorder's prelude in this process only) and the benchmark adds it. And the whole machine's, from
/proc/stat, only meaningful on an idle machine.

    python benchmarks/grading_benchmark.py --students 100 --workers 2
    python benchmarks/grading_benchmark.py --students 10 --assignments a1_self_attention --kernels warm cold
    python benchmarks/grading_benchmark.py --students 12 --kernels warm --workers 2 --one-student
"""
import argparse
import ctypes
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader import pipeline, samples
from grader.course import Course
from grader.labs import is_lab, lab_bugs
from grader.mutants import load_catalogue
from grader.runtime.warm_kernels import reap_finished_children
from grader.stages import execute
from grader.submission import Options, Status, Submission

COURSE = Course(Path(__file__).resolve().parent.parent)
# the assignments whose mean CPU per submission the course's target is set on (a7 runs Triton's
# interpreter on the CPU, which a GPU grading machine would not)
TARGET_IDS = ("a1_", "a2_", "a3_", "a4_", "a5_", "a6_")


def student_kinds(assignment_id):
    """The synthetic students, in the order they repeat: (name, notebook maker)."""
    if is_lab(COURSE, assignment_id):
        kinds = [("real_fixer", lambda: samples.lab_submission(COURSE, assignment_id, [])),
                 ("untouched_release", lambda: samples.release_notebook(COURSE, assignment_id))]
        kinds += [(f"missed_{bug.name}", lambda name=bug.name: samples.lab_submission(COURSE, assignment_id, [name]))
                  for bug in lab_bugs(COURSE, assignment_id)]
        kinds += [("pasted_solution", lambda: samples.pasted_solution(COURSE, assignment_id)),
                  ("rewritten_bugs", lambda: samples.rewritten_bugs(COURSE, assignment_id)[0])]
        return kinds
    kinds = [("perfect", lambda: samples.perfect_submission(COURSE, assignment_id)),
             ("untouched_release", lambda: samples.release_notebook(COURSE, assignment_id))]
    return kinds + [(f"bug_{m.name}", lambda name=m.name: samples.buggy_submission(COURSE, assignment_id, name)[0])
                    for m in load_catalogue(COURSE, assignment_id)]


def write_students(assignment_id, count, folder):
    kinds = student_kinds(assignment_id)
    made = {}
    for index in range(count):
        name, make = kinds[index % len(kinds)]
        if name not in made:
            made[name] = make()
        nbformat.write(made[name], str(folder / f"student{index:03d}.ipynb"))


def machine_cpu_seconds():
    """CPU time the whole machine has spent busy (user, nice, system, irq, softirq), in seconds."""
    with open("/proc/stat") as handle:
        fields = [int(value) for value in handle.readline().split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


PR_SET_CHILD_SUBREAPER = 36
KERNEL_CPU_FILE = ".benchmark_kernel_cpu"
# after each cell, the kernel's CPU so far (its own, all threads, and its children's), in its folder
KERNEL_CPU_HOOK = f"""
def __benchmark_kernel_cpu__(result=None, _r=__import__("resource"),
                             _path=os.path.join(os.getcwd(), {KERNEL_CPU_FILE!r})):
    used = [_r.getrusage(who) for who in (_r.RUSAGE_SELF, _r.RUSAGE_CHILDREN)]
    with open(_path, "w") as handle:
        handle.write(repr(sum(u.ru_utime + u.ru_stime for u in used)))
get_ipython().events.register("post_run_cell", __benchmark_kernel_cpu__)
"""


def count_kernel_cpu():
    """Have every kernel this process starts note its own CPU (KERNEL_CPU_HOOK)."""
    if KERNEL_CPU_HOOK not in execute.RECORDER_SOURCE:
        execute.RECORDER_SOURCE += KERNEL_CPU_HOOK


def kernel_cpu_seconds(submission):
    """The CPU a sandboxed submission's kernel noted, up to its last cell (0 if none ran)."""
    try:
        return float((submission.workdir / "run" / "kernel" / KERNEL_CPU_FILE).read_text())
    except (OSError, TypeError, ValueError):
        return 0.0


def adopt_orphans():
    """Make this process the parent of every orphan below it (instead of the system's init)."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("note: cannot adopt orphans here; a warm kernel's CPU is not counted", file=sys.stderr)


def reap_orphans(settle_s=1.5):
    """Reap every child that has ended (call when no child of this process is waited for elsewhere:
    between batches, or when only the fork servers are running), once the sandboxes have gone."""
    time.sleep(settle_s)
    reap_finished_children()


def tree_cpu_seconds():
    """CPU of this process and of every process it started and has waited for (each of which counts
    the ones it waited for: the fork servers' kernels and workers once the servers end)."""
    return sum(usage.ru_utime + usage.ru_stime
               for usage in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


def process_cpu_seconds(pid):
    """CPU of a running process and of the children it has waited for, from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class TimedThreads(pipeline.Threads):
    """pipeline.Threads that notes the process tree's CPU when grading starts, the batch set up (its own
    and its children's, and the fork servers', still running, so not yet in this process's children),
    and adds up the CPU of the sandboxed kernels as the submissions finish."""
    kernel_cpu = 0.0

    def grade(self, batch, submissions):
        servers = [s for s in (batch.kernel_server, batch.worker_server) if s is not None]
        self.setup_cpu = tree_cpu_seconds() + sum(process_cpu_seconds(s.process.pid) for s in servers)
        for submission in super().grade(batch, submissions):
            if batch.options.sandboxed:
                self.kernel_cpu += kernel_cpu_seconds(submission)
            yield submission


def grade_batch(course, assignment_id, folder, options):
    """Grade every notebook in `folder` as one batch; its outcomes and figures."""
    strategy = TimedThreads(options.parallel)
    wall, tree, machine = time.perf_counter(), tree_cpu_seconds(), machine_cpu_seconds()
    done = pipeline.run(course, assignment_id, folder, options, strategy)
    reap_orphans()
    wall, machine = time.perf_counter() - wall, machine_cpu_seconds() - machine
    setup, tree = strategy.setup_cpu - tree, tree_cpu_seconds() - tree + strategy.kernel_cpu
    outcomes = done.graded + done.intake.not_graded
    count = len(outcomes)
    return outcomes, {"students": count, "wall_s": round(wall, 1), "cpu_s": round(tree, 1),
                      "kernel_cpu_s": round(strategy.kernel_cpu, 1),
                      "setup_cpu_s": round(setup, 1), "machine_cpu_s": round(machine, 1),
                      "cpu_per_submission_s": round(tree / count, 2),
                      "grading_cpu_per_submission_s": round((tree - setup) / count, 2),
                      "graded": sum(o.status == Status.GRADED for o in outcomes)}


def one_student(assignment_id, modes, repeats=3):
    """Median seconds (and process-tree CPU-seconds, servers' included) to grade one perfect submission
    once the batch is set up: with warm kernels, cold sandboxed kernels, and no sandbox."""
    figures = {}
    options_of = {"warm": Options(kernels="warm"), "cold": Options(kernels="cold"),
                  "unsandboxed": Options(sandboxed=False)}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "one"
        folder.mkdir()
        nbformat.write(samples.perfect_submission(COURSE, assignment_id), str(folder / "alice.ipynb"))
        for mode in modes:
            course = COURSE.with_grading_dir(Path(tmp) / f"course-{mode}")
            timings = []
            with pipeline.Batch(course, assignment_id, options_of[mode]) as batch:
                batch.prepare(servers=mode == "warm")
                servers = [s.process.pid for s in (batch.kernel_server, batch.worker_server) if s is not None]

                def cpu():
                    return tree_cpu_seconds() + sum(process_cpu_seconds(pid) for pid in servers)
                for _ in range(repeats):
                    started, used = time.perf_counter(), cpu()
                    graded = pipeline.grade(Submission("alice", folder / "alice.ipynb"), batch)
                    seconds = time.perf_counter() - started
                    reap_orphans()   # and the fork servers reap their children every half second
                    kernel = kernel_cpu_seconds(graded) if mode != "unsandboxed" else 0.0
                    timings.append((seconds, cpu() - used + kernel))
                    assert graded.score == graded.max_score, graded.label
            figures[mode] = {"wall_s": round(statistics.median(t[0] for t in timings), 2),
                             "cpu_s": round(statistics.median(t[1] for t in timings), 2)}
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--assignments", nargs="*", default=None,
                        help="assignment and lab ids (default: every one the course has)")
    parser.add_argument("--kernels", nargs="*", default=["warm", "cold"], choices=["warm", "cold"])
    parser.add_argument("--repeats", type=int, default=1, help="one-student measurements per mode (median)")
    parser.add_argument("--one-student", nargs="*", default=["warm", "cold", "unsandboxed"],
                        choices=["warm", "cold", "unsandboxed"],
                        help="the modes of the one-student measurements (none: skip them)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    adopt_orphans()
    count_kernel_cpu()
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
                outcomes, figures[aid] = grade_batch(COURSE.with_grading_dir(Path(tmp) / f"course-{kernels}"), aid,
                                                     Path(tmp) / aid,
                                                     Options(workers=args.workers, kernels=kernels, progress=False))
                f = figures[aid]
                print(f"{kernels} kernels, {aid}: {f['students']} students ({f['graded']} graded) in "
                      f"{f['wall_s']:.1f} s, {f['cpu_s']:.1f} CPU-s of the process tree "
                      f"({f['cpu_per_submission_s']:.2f} per submission, batch set-up included; "
                      f"set-up {f['setup_cpu_s']:.1f}, grading {f['grading_cpu_per_submission_s']:.2f} per "
                      f"submission); the machine {f['machine_cpu_s']:.0f} CPU-s", flush=True)
            batches = list(figures.values())
            target = [f for aid, f in figures.items() if aid.startswith(TARGET_IDS)]
            figures["total_wall_s"] = round(sum(f["wall_s"] for f in batches), 1)
            figures["cpu_per_submission_s"] = round(sum(f["cpu_s"] for f in batches)
                                                    / sum(f["students"] for f in batches), 2)
            if target:
                figures["a1_a6_cpu_per_submission_s"] = round(sum(f["cpu_s"] for f in target)
                                                              / sum(f["students"] for f in target), 2)
            print(f"{kernels} kernels, per submission (CPU-s, batch set-up included): "
                  + ", ".join(f"{aid.split('_')[0] if not aid.startswith('debug') else aid} "
                              f"{f['cpu_per_submission_s']:.2f}" for aid, f in zip(figures, batches))
                  + f"; all {figures['cpu_per_submission_s']:.2f}"
                  + (f"; a1-a6 mean {figures['a1_a6_cpu_per_submission_s']:.2f}" if target else "")
                  + f"; {figures['total_wall_s']:.0f} s in all", flush=True)
    if args.one_student:
        one = {aid: one_student(aid, args.one_student, repeats=args.repeats) for aid in ids}
        result["one_student"] = one
        result["one_student_full_set_s"] = {mode: round(sum(f[mode]["wall_s"] for f in one.values()), 1)
                                            for mode in args.one_student}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
