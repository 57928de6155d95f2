"""Where one submission's CPU goes, with warm kernels: the grader's stages (its own thread), the
worker that drives the kernel, the kernel (and its sandbox's supervisor and init), and inside the
kernel each cell: the start-up before the first cell, the student's cells, the test cells. Not a
test: it prints figures for docs/results.md and, with --cprofile, the functions that take the most
CPU in the grader and in the worker.

The worker and the kernel are forked from the batch's servers (stages/execute.py, runtime/). The
worker's CPU is read from /proc/<server>/stat, which counts a child once the server has reaped it;
the sandbox's supervisor is the kernel server's child, its init outlives it and is adopted here
(grading_benchmark.py: adopt_orphans), with the kernel stub. The kernel's own CPU is counted
nowhere outside (its namespace's init dies first, and the system reaps it without a count), so it
comes from IPython's pre/post_run_cell events, which this script adds to the recorder's prelude
(profiling only: they write into the kernel's own folder): the whole kernel, and each cell.

    python benchmarks/grading_profile.py a1_self_attention a4_kv_cache --repeats 3
    python benchmarks/grading_profile.py a4_kv_cache --cprofile 25
"""
import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grading_benchmark import adopt_orphans, reap_orphans, tree_cpu_seconds

from grader import cells, pipeline, samples
from grader.course import Course
from grader.stages import execute
from grader.submission import Options, Submission

COURSE = Course(Path(__file__).resolve().parent.parent)
CELL_CPU_FILE = ".cell_cpu.json"
# appended to the recorder's prelude: the kernel's CPU (all its threads) before and after each cell
CELL_HOOKS = f"""
import resource as _r, json as _j, os as _o
def _cpu():
    u = _r.getrusage(_r.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
_cells = {{"startup": _cpu(), "cells": []}}
_cells["at"] = _cells["startup"]
def _pre(info=None):
    _cells["at"] = _cpu()
def _post(result=None):
    _cells["total"] = _cpu()
    _cells["cells"].append(_cells["total"] - _cells.pop("at", _cells["total"]))
    with open(_o.path.join(_o.getcwd(), {CELL_CPU_FILE!r}), "w") as _h:
        _j.dump(_cells, _h)
get_ipython().events.register("pre_run_cell", _pre)
get_ipython().events.register("post_run_cell", _post)
"""


def server_cpu(server):
    """CPU of a fork server and of the children it has reaped, in seconds."""
    if server is None:
        return 0.0
    with open(f"/proc/{server.process.pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def perfect_batch(aid):
    """A batch of `aid` with warm kernels, its servers started; yields (the path of one perfect
    submission, the batch)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "alice.ipynb"
        nbformat.write(samples.perfect_submission(COURSE, aid), str(path))
        with pipeline.Batch(COURSE.with_grading_dir(Path(tmp) / "course"), aid, Options(kernels="warm")) as batch:
            batch.prepare(servers=True)
            yield path, batch


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def profile_one(aid, repeats, cprofile_top, clock):
    rows = []
    profiles = {"grader": cProfile.Profile(CLOCKS[clock])}
    with perfect_batch(aid) as (path, batch):
        # the first run warms the page cache (not counted); with cprofile_top one more, profiled (its
        # figures not counted either: the profiler itself slows what it watches)
        for repeat in range(repeats + 1 + bool(cprofile_top)):
            profiled = bool(cprofile_top) and repeat == repeats + 1
            # a student of its own each time, so that recording it is a first grading, as in a class
            row, submission = {}, Submission(f"student{repeat}", path)
            submission.max_score = batch.max_score
            for stage in pipeline.GRADE:
                name = stage.__name__
                workers, kernels = server_cpu(batch.worker_server), server_cpu(batch.kernel_server)
                adopted = tree_cpu_seconds()
                cpu, wall = time.thread_time(), time.perf_counter()
                if profiled:
                    profiles["grader"].enable()
                submission = stage(submission, batch)
                profiles["grader"].disable()
                row[name] = time.thread_time() - cpu
                row[name + "_wall"] = time.perf_counter() - wall
                if name == "execute":
                    reap_orphans()          # and the servers reap their children every 0.5 s
                    row["worker"] = server_cpu(batch.worker_server) - workers
                    # the supervisor (the server's child), init and the stub (orphans, adopted here),
                    # less this thread's own CPU in the stage
                    row["sandbox"] = (server_cpu(batch.kernel_server) - kernels + tree_cpu_seconds() - adopted
                                      - row[name])
                    inside = json.loads((submission.workdir / "run" / "kernel" / CELL_CPU_FILE).read_text())
                    per_cell = inside["cells"][1:]     # the prelude first
                    kinds = [cells.is_test_cell(c) for c in submission.notebook.cells   # nbclient skips empty cells
                             if c.cell_type == "code" and c.source.strip()]
                    row["kernel"] = inside["total"]
                    row["kernel_startup"] = inside["startup"]
                    row["kernel_prelude"] = inside["cells"][0]
                    row["kernel_student_cells"] = sum(c for c, test in zip(per_cell, kinds) if not test)
                    row["kernel_test_cells"] = sum(c for c, test in zip(per_cell, kinds) if test)
                    row["kernel_between_cells"] = inside["total"] - inside["startup"] - sum(inside["cells"])
                    row["kernel_cells"] = len(per_cell)
            assert submission.score == submission.max_score, (aid, submission.score, submission.max_score)
            cpu = time.thread_time()
            submission = pipeline.record(submission, batch)     # merge and late, into the course gradebook
            row["record"] = time.thread_time() - cpu
            if repeat and not profiled:
                rows.append(row)
    median = {key: round(statistics.median(r[key] for r in rows), 3) for key in rows[0]}
    if cprofile_top:
        median["cprofile_grader"] = top_functions(profiles["grader"], cprofile_top)
    return median


def profile_worker(aid, top, clock):
    """The worker's main() run in this process under cProfile (it is otherwise a fork of the worker
    server, which has done the same imports), on one perfect submission."""
    from grader.runtime import execute_worker
    from grader.sandbox import GRADED_RUN_ENV, Limits, write_kernelspec
    from grader.stages.sanitize import sanitize
    profile = cProfile.Profile(CLOCKS[clock])
    with perfect_batch(aid) as (path, batch):
        for repeat in range(2):
            submission = sanitize(Submission("alice", path), batch)
            work = submission.workdir / "run"
            kernel_dir, control = work / "kernel", work / "control"
            for folder in (kernel_dir, control):
                folder.mkdir(parents=True, exist_ok=True)
            runtime = Path(tempfile.mkdtemp(prefix="grader-kernel-", dir="/tmp"))
            limits = Limits()
            name = write_kernelspec(control, kernel_dir, runtime, limits, kernel_server=batch.kernel_server)
            execute_worker.write_notebook(execute.instrument(submission.notebook, batch.trace.split, control),
                                          control / "run.ipynb")
            saved = dict(os.environ)
            os.environ.update(GRADED_RUN_ENV, JUPYTER_PATH=str(control), JUPYTER_RUNTIME_DIR=str(runtime))
            try:
                if repeat:
                    profile.enable()
                execute_worker.main(str(control), str(kernel_dir), name, 120, json.dumps(limits.__dict__))
            finally:
                profile.disable()
                os.environ.clear()
                os.environ.update(saved)
    return top_functions(profile, top)


def top_functions(profile, top):
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(top)
    return text.getvalue()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cprofile", type=int, default=0, metavar="N",
                        help="also profile the grader's stages and the worker, and print their top N functions")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="what --cprofile counts")
    args = parser.parse_args()
    adopt_orphans()
    execute.RECORDER_SOURCE += CELL_HOOKS
    for aid in args.assignments or COURSE.assignment_ids():
        figures = profile_one(aid, args.repeats, args.cprofile, args.clock)
        grader_cpu = sum(figures[stage.__name__] for stage in pipeline.GRADE)
        print(f"{aid}: grader {grader_cpu:.3f} CPU-s "
              + "(" + ", ".join(f"{s.__name__} {figures[s.__name__]:.3f}" for s in pipeline.GRADE) + "), "
              f"worker {figures['worker']:.3f}, kernel {figures['kernel']:.3f} "
              f"(start-up {figures['kernel_startup']:.3f}, "
              f"prelude {figures['kernel_prelude']:.3f}, student cells {figures['kernel_student_cells']:.3f}, "
              f"test cells {figures['kernel_test_cells']:.3f}, between cells {figures['kernel_between_cells']:.3f}; "
              f"{figures['kernel_cells']:.0f} cells), the sandbox's supervisor and "
              f"init, and the kernel stub {figures['sandbox']:.3f}; "
              f"execute {figures['execute_wall']:.2f} s by the clock; "
              f"recording it (merge, late) {figures['record']:.3f}", flush=True)
        if args.cprofile:
            print(figures.pop("cprofile_grader"))
            print(f"--- {aid}: the worker ---")
            print(profile_worker(aid, args.cprofile, args.clock))
        print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
