"""The autograding pipeline: its stages in order, how they run, and what a run shares (Batch).

    INTAKE   the whole download, once:                        collect -> identify
    GRADE    each submission, in parallel with the others:   sanitize -> execute -> judge -> repair -> score
    RECORD   each submission, one at a time (the course
             gradebook's single writer):                      merge -> late

An intake stage takes the batch's `Intake` and returns it; every other stage takes one
`Submission` and returns it (grader/submission.py): `stage(record, batch) -> record`, where
`batch` is what every submission of the run shares (the options, the course, the release, the
solution's trace, the warm-kernel servers). A GRADE stage that finds a submission cannot be
graded raises `NotGraded`; the submission keeps its reason, skips the rest of GRADE, and is still
recorded (never a silent 0). Each stage lives in grader/stages/<name>.py.

`run` is a whole run, written once, phase by phase (intake, prepare, grade, record); `autograde`,
Gradescope's grading and the quality gate's release run through it, each with the strategy that
grades its submissions: Threads here, Serial (one in this thread), or Dask (grader/engine.py).
"""
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from . import cells, late_policy, store, term
from .release import generate_release
from .sandbox import SandboxUnavailable, WarmKernels, check_available
from .stages import collect, execute, identify, judge, late, merge, repair, sanitize, score
from .submission import TEMPLATE_STUDENT, Intake, Kernels, NotGraded, Options, Status
from .trace import solution_trace

# the stages, in order (each is stages/<name>.py)
INTAKE = (collect.collect, identify.identify)                           # the download -> Intake
GRADE = (sanitize.sanitize, execute.execute, judge.judge, repair.repair, score.score)  # in parallel
RECORD = (merge.merge, late.late)                                       # Submission -> Submission, one at a time


# ---- a run, phase by phase ----

@dataclass
class Run:
    """What a run made: its intake (who will not be graded, and why, in `intake.not_graded`) and
    the submissions through GRADE (and RECORD), in the order they finished."""
    intake: Intake
    graded: list


def run(course, assignment_id, source, options=None, strategy=None, *, recording=True, after_intake=None,
        before_prepare=None):
    """One assignment's run, every phase in order:

        intake    INTAKE on the download at `source`; or `source` is an Intake already holding its
                  submissions (given(...)); then `after_intake(intake)`, the caller's look before
                  anything is prepared (warnings shown, one student kept)
        prepare   `before_prepare(batch)`, then Batch.prepare: the release, the template gradebook and
                  the solution's trace; the assignment and its due date written into the course
                  gradebook, its late-penalty rule into term.json; the warm-kernel and worker servers
                  where the strategy uses them and two submissions or more wait
        grade     GRADE for every submission, as `strategy` runs them (Threads(n), Serial(),
                  engine.Dask(options)); closed when the run ends, however it ends
        record    RECORD for each as it finishes, one at a time, and the outcomes saved
                  (`recording=False`: a run whose grades go nowhere, as the gate's and Gradescope's)

    The demo runs these phases from the same parts (record_all included), overlapping its assignments
    (grader/demo.py).
    """
    options = options or Options()
    strategy = strategy or Threads(options.parallel)
    graded = []
    try:
        with Batch(course, assignment_id, options) as batch:
            intake = source if isinstance(source, Intake) else take_in(source, batch)
            if after_intake is not None:
                after_intake(intake)
            if before_prepare is not None:
                before_prepare(batch)
            batch.prepare(servers=strategy.servers and len(intake.submissions) > 1)
            finished = strategy.grade(batch, intake.submissions)
            try:
                graded = record_all(finished, intake, batch, recording)
            finally:
                finished.close()
    finally:
        strategy.close()
    return Run(intake, graded)


def record_all(finished, intake, batch, recording=True):
    """The record phase of `run`: each graded submission of `finished` (an iterable, in the order they
    finish) through RECORD, one at a time in this thread, with a progress bar; then the outcomes of the
    graded and of those the intake could not grade saved in the gradebook. With recording=False, nothing
    is recorded or saved. The graded submissions, in the order they finished."""
    graded = []
    with tqdm(total=len(intake.submissions), desc=f"grading {batch.assignment_id}", unit="student",
              disable=not batch.options.progress) as bar:
        for submission in finished:
            graded.append(record(submission, batch) if recording else submission)
            bar.update(1)
    for submission in intake.not_graded:
        submission.max_score = batch.max_score
    if recording:
        store.save_outcomes(batch.course, batch.assignment_id, graded + intake.not_graded)
    return graded


def given(*submissions):
    """An Intake of submissions already found (a run of them skips the INTAKE stages)."""
    return Intake(submissions[0].path if submissions else None, submissions=list(submissions))


class Threads:
    """GRADE on this machine, `workers` submissions at once, each thread driving one kernel in its own
    sandbox; worth the warm-kernel servers."""
    servers = True

    def __init__(self, workers):
        self.workers = workers

    def grade(self, batch, submissions):
        """Each submission through GRADE, as they finish."""
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            futures = [pool.submit(grade, submission, batch) for submission in submissions]
            for future in as_completed(futures):
                yield future.result()

    def close(self):
        pass


class Serial(Threads):
    """GRADE in this thread, one submission after another, without the servers (the gate's release,
    Gradescope's one notebook)."""
    servers = False

    def __init__(self):
        super().__init__(1)

    def grade(self, batch, submissions):
        for submission in submissions:
            yield grade(submission, batch)


# ---- the phases' parts ----

def take_in(source, batch):
    """INTAKE: the download at `source`, read and mapped to the roster."""
    intake = Intake(Path(source))
    for stage in INTAKE:
        intake = stage(intake, batch)
    return intake


def grade(submission, batch, stages=GRADE):
    """GRADE: everything but the gradebook, so that it can run in parallel. Never raises: a
    submission that cannot be graded comes back NOT_GRADED with its reason. (`stages`: the tests
    run them with execute replaced by an in-process run.)"""
    started = time.time()
    submission.max_score = batch.max_score
    try:
        if submission.path is None:
            raise NotGraded(submission.reason or "nothing to grade")
        for stage in stages:
            submission = stage(submission, batch)
    except NotGraded as reason:
        submission.status, submission.reason = Status.NOT_GRADED, str(reason)
    except Exception as error:  # noqa: BLE001 - one submission must never stop the batch
        submission.status, submission.reason = Status.NOT_GRADED, f"grader error: {type(error).__name__}: {error}"
    submission.execution = None     # the records and executed notebook are judged; free them
    submission.seconds = time.time() - started
    return submission


def record(submission, batch):
    """RECORD: into the course gradebook, one submission at a time."""
    for stage in RECORD:
        submission = stage(submission, batch)
    return submission


# ---- what every submission of a run shares ----

class Batch:
    """One assignment's run: the course, the options, and what `prepare()` makes once for every
    submission (the release, a template gradebook holding it, the solution's trace, the warm-kernel
    and worker servers). Use it as `with Batch(...) as batch:`; closing ends the servers and
    removes the scratch folder."""

    def __init__(self, course, assignment_id, options=None, servers=None):
        self.course, self.assignment_id = course, assignment_id
        self.options = options or Options()
        self.course_db = course.db_url
        self.kernel_server = self.worker_server = self.trace = self.due = None
        self.servers = servers             # started Servers; given, the caller's (several batches in a row)
        self.own_servers = None            # those prepare(servers=True) started for this batch alone
        if self.options.sandboxed:
            check_available()   # refuse loudly rather than run student code with our rights
        self.scratch = Path(tempfile.mkdtemp(prefix=f"grade-{assignment_id}-"))
        store.throwaway_gradebooks(self.scratch)    # the template and each submission's copy

    def prepare(self, servers=False):
        """Make what every submission shares (the intake needs none of it). `servers`: also start the
        warm-kernel server (when sandboxed and `options.kernels` is warm) and the worker server, while
        the release is generated; worth their few seconds from the second submission on. A batch given
        shared servers (Batch(servers=...)) uses those."""
        if servers and self.servers is None:
            self.servers = self.own_servers = Servers(self.options, warm_imports(self.course, [self.assignment_id]))
        try:
            self._prepare()
        finally:
            if self.servers is not None:
                self.kernel_server, self.worker_server = self.servers.kernel_server, self.servers.worker_server
        return self

    def _prepare(self):
        aid, options = self.assignment_id, self.options
        self.template_db = self.scratch / "template.db"
        scratch_course = self.course.with_grading_dir(self.scratch / "course")
        generate_release(scratch_course, aid, self.scratch / "release", db_url=f"sqlite:///{self.template_db}")
        # the course gradebook must know the assignment too (`release` may not have run here): a new one is
        # the template as it is now, what `release` would make of it
        store.create_gradebook_as(self.course_db, self.template_db)
        with store.gradebook(f"sqlite:///{self.template_db}") as gb:   # each copy holds one submission
            gb.update_or_create_student(TEMPLATE_STUDENT)
            gb.update_or_create_submission(aid, TEMPLATE_STUDENT)
        self.source_cells = sanitize.SourceCells(f"sqlite:///{self.template_db}", aid)
        if not store.has_assignment(self.course_db, aid):
            generate_release(self.course, aid, self.scratch / "release-course")
        if options.due is not None:
            store.set_due_date(self.course_db, aid, options.due)
        self.due = store.due_date(self.course_db, aid)        # this run's, or the one an earlier run stored
        if options.late_penalty is not None:
            term.remember_penalty(self.course, aid, options.late_penalty)
        self.penalty_config = late_policy.assignment_penalty(self.course, aid)
        self.released = cells.read(self.course.release_notebook(aid))
        self.released_tests = {c.source.strip() for c in self.released.cells if cells.is_test_cell(c)}
        self.trace = solution_trace(self.course, aid)
        self.max_score = cells.max_auto_points(self.released)

    def workspace(self, submission):
        """A fresh working folder for `submission`, holding its own gradebook: a copy of the template,
        where it is TEMPLATE_STUDENT."""
        work = Path(tempfile.mkdtemp(prefix=f"{submission.student}-", dir=self.scratch))
        store.copy_gradebook(self.template_db, work / "gradebook.db")
        return work

    def close(self):
        if self.own_servers is not None:
            self.own_servers.close()
        self.kernel_server = self.worker_server = self.own_servers = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            store.keep_gradebooks(self.scratch)
            self.scratch = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Servers:
    """The warm-kernel (when sandboxed and `options.kernels` is warm) and worker servers, started in the
    background; a batch waits for them at the end of its prepare(). Started by Batch.prepare(servers=True)
    for that batch alone, or once for several batches in a row (the demo grades one assignment after
    another): Batch(..., servers=this) uses them and leaves them running; close() ends them.
    `imports`: what the warm-kernel server imports besides torch and ipykernel (warm_imports).
    `warm_unsandboxed`: warm kernels for an unsandboxed run too (the demo's own notebooks, where bubblewrap
    is missing): each is still a fork in the warm server's own sandbox, where this system lets it build one."""

    def __init__(self, options, imports=(), warm_unsandboxed=False):
        pool = ThreadPoolExecutor(max_workers=2)
        warm = options.kernels is Kernels.WARM and (options.sandboxed or warm_unsandboxed)
        self._kernels = pool.submit(_start_warm_kernels, tuple(imports),
                                    "bubblewrap" if options.sandboxed else "unsandboxed") \
            if warm else pool.submit(_none)
        self._workers = pool.submit(_start_worker_server)
        pool.shutdown(wait=False)       # the two run on; result() waits for each

    @property
    def kernel_server(self):
        return self._kernels.result()

    @property
    def worker_server(self):
        return self._workers.result()

    def close(self):
        for started in (self._kernels, self._workers):
            server = started.result()
            if server is not None:
                server.close()


def _start_warm_kernels(imports=(), cold="bubblewrap"):
    """A started WarmKernels holding `imports`, or None (with the reason on stderr) where this system cannot
    build its sandbox: then every kernel starts cold (`cold`: in bubblewrap, or unsandboxed)."""
    try:
        return WarmKernels.start(imports=imports)
    except SandboxUnavailable as error:
        print(f"note: {error}; each kernel starts cold ({cold}) instead", file=sys.stderr)
        return None


def _start_worker_server():
    try:
        return execute.WorkerServer.start()
    except RuntimeError as error:
        print(f"note: {error}; each submission's worker starts from scratch instead", file=sys.stderr)
        return None


def _none(*_):
    return None


MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def warm_imports(course, assignment_ids):
    """The modules the warm-kernel server imports besides torch and ipykernel for these assignments: each
    source notebook's metadata `course.warm_imports`, a list of module names that its tests import and
    that cost a kernel much to import (a6: Hugging Face's Llama). The instructor's notebook, never a
    submission. ValueError, naming the notebook, where the list is not one of module names."""
    names = []
    for aid in assignment_ids:
        path = course.source_notebook(aid)
        listed = cells.read(path).metadata.get("course", {}).get("warm_imports", []) if path.exists() else []
        if not isinstance(listed, list) or not all(isinstance(n, str) and MODULE_NAME.fullmatch(n) for n in listed):
            raise ValueError(f"{path}: the metadata course.warm_imports should be a list of module names such as "
                             f"\"transformers.models.llama.modeling_llama\"; it is {listed!r}")
        names += [n for n in listed if n not in names]
    return names

