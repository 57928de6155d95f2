"""execute: run the submission in a kernel of its own, in a working copy of its own.

Each test cell is replaced by a call to the answer recorder (grader/runtime/record.py), which runs
the cell's kernel code (grader/split.py): the kernel computes and records the student's answers,
and never holds what they are compared with. The kernel code reaches the kernel one cell at a time,
as a marshalled code object the worker drops into the kernel's folder just before the cell runs
(TEST_CODE_FILE), so no test source enters the kernel or its history. Execution happens in a worker
process with an overall time budget: a kernel that ignores interrupts is killed with its whole
process group and the submission is reported "not graded", never silently given 0.
"""
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
import torch

from .. import cells
from ..course import CELL_TIMEOUT_S, KERNEL_NAME, PACKAGE_REPO
from ..provided import checks_source
from ..runtime.execute_worker import TEST_CODE_DIR, TEST_CODE_FILE, TEST_CODE_KEY, write_notebook
from ..sandbox import ENVIRON_LOCK, GRADED_RUN_ENV, ForkServer, Limits, read_json, write_kernelspec
from ..split import split_notebook
from ..submission import NotGraded

RECORDER_SOURCE = (Path(__file__).resolve().parent.parent / "runtime" / "record.py").read_text()
RECORDS_DIR = ".grader_records"
# the default budget of a whole notebook: cell timeout x (code cells + 2), at most this; the worker
# itself stops a kernel that ignores an interrupt 10 s after its cell timeout (execute_worker.py)
TOTAL_TIMEOUT_MAX_S = 600
MAX_RECORD_BYTES = 64 * 2**20
# The prelude (the recorder's source and the course's checks, about 35 kB) reaches the kernel as a file,
# like a test cell's code: as a cell's source IPython would tokenize it for its input transforms,
# compile it twice and hash it in pure Python, some 40 ms of the kernel's CPU per submission. A short
# cell reads it, runs it in the notebook's namespace as the whole cell did (the same names), and keeps
# its lines for tracebacks (the recorder's own frames read as before).
PRELUDE_CODE = "prelude.py"
PRELUDE_FILENAME = "<recorder prelude>"
PRELUDE_CELL = f"""\
with open({TEST_CODE_FILE!r}, encoding="utf-8") as __prelude:
    __prelude = __prelude.read()
__import__("os").remove({TEST_CODE_FILE!r})
__import__("linecache").cache[{PRELUDE_FILENAME!r}] = (len(__prelude), None, __prelude.splitlines(True),
                                                       {PRELUDE_FILENAME!r})
exec(compile(__prelude, {PRELUDE_FILENAME!r}, "exec"))
del __prelude
"""
WORKER_MODULE = "grader.runtime.execute_worker"


@dataclass
class Execution:
    notebook: object                # executed notebook, prelude removed (cells align with input)
    records: dict = field(default_factory=dict)
    problem: str | None = None      # set when the submission could not be graded
    note: str | None = None
    seconds: float = 0.0


def instrument(nb, split, control):
    """The notebook the kernel runs: a prelude that creates the recorder, and each test cell replaced
    by a call to it; the prelude's code and each test cell's kernel code written to control/TEST_CODE_DIR
    for the worker to hand over when the cell runs. A test cell the split does not know (the assignment has
    no such test) runs nothing."""
    run_nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    prelude = (RECORDER_SOURCE + "\n__course_grader__ = TestRecorder(" + repr(checks_source())
               + f", records_dir=os.path.join(os.getcwd(), {RECORDS_DIR!r}), "
               + f"inbox=os.path.join(os.getcwd(), {TEST_CODE_FILE!r}), python={tuple(sys.version_info[:2])!r})\n"
               + "fast_flop_counter()\nfast_triton_interpreter()\nfast_cell_transforms(get_ipython())\n"
               + "fast_cell_names()\n"
               + "del TestRecorder, fast_flop_counter, fast_triton_interpreter, fast_cell_transforms, "
               + "fast_cell_names\n")
    codes = Path(control) / TEST_CODE_DIR
    codes.mkdir(parents=True, exist_ok=True)
    (codes / PRELUDE_CODE).write_text(prelude, encoding="utf-8")
    for index, cell in enumerate(run_nb.cells):
        if not cells.is_test_cell(cell):
            continue
        gid = cells.grade_id(cell)
        if gid not in split:
            cell.source = "pass"
            continue
        (codes / f"{index}.code").write_bytes(split[gid].kernel_code)
        cell.metadata[TEST_CODE_KEY] = f"{index}.code"
        # the semicolon: the record run_test returns would otherwise be the cell's result, its repr made
        # (tensors and all), sent to the worker and kept in the notebook, only for score to replace it
        cell.source = f"__course_grader__.run_test({gid!r}, globals());"
    run_nb.cells.insert(0, nbformat.v4.new_code_cell(PRELUDE_CELL, metadata={TEST_CODE_KEY: PRELUDE_CODE}))
    return run_nb


def execute(submission, batch):
    """Run `submission.notebook` in its working folder; `submission.execution` holds what it
    recorded and the executed notebook."""
    options = batch.options
    run = run_notebook(submission.notebook, submission.workdir / "run", cell_timeout=options.cell_timeout,
                       total_timeout=options.total_timeout, sandboxed=options.sandboxed,
                       kernel_server=batch.kernel_server, worker_server=batch.worker_server, split=batch.trace.split)
    if run.problem:
        raise NotGraded(run.problem)
    submission.note(run.note)
    submission.execution = run
    return submission


def run_notebook(nb, workdir, cell_timeout=CELL_TIMEOUT_S, total_timeout=None, limits=None, sandboxed=True,
                 kernel_server=None, worker_server=None, split=None):
    """Run `nb` in a fresh kernel. The kernel sees only workdir/kernel (its working copy);
    workdir/control, the grader's side (instrumented notebook, status, kernelspec), stays out
    of its reach when sandboxed. `kernel_server`, a started sandbox.WarmKernels: the sandboxed
    kernel comes from its fork server, torch and matplotlib already imported. `worker_server`, a
    started WorkerServer: the process that drives the kernel is forked from it rather than
    started from scratch. `split`: the assignment's test cells split (grader/split.py), made from its
    source notebook -- never from the submission, whose own cells must not decide what runs; by
    default `nb`'s own (for trusted notebooks)."""
    limits = limits or Limits()
    workdir = Path(workdir)
    kernel_dir, control = workdir / "kernel", workdir / "control"
    for folder in (kernel_dir, control):
        folder.mkdir(parents=True, exist_ok=True)
    # The kernel has no network, so its channels are ZeroMQ ipc sockets (files) in this folder, which
    # both sides see at the same path; a short one under /tmp, as a socket's path has at most 107 bytes.
    runtime = Path(tempfile.mkdtemp(prefix="grader-kernel-", dir="/tmp"))
    try:
        return _run(nb, kernel_dir, control, runtime, cell_timeout, total_timeout, limits, sandboxed,
                    kernel_server, worker_server, split if split is not None else split_notebook(nb))
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def _run(nb, kernel_dir, control, runtime, cell_timeout, total_timeout, limits, sandboxed, kernel_server,
         worker_server, split):
    kernel_name = KERNEL_NAME
    if sandboxed or kernel_server is not None:     # a warm kernel is sandboxed by its server
        kernel_name = write_kernelspec(control, kernel_dir, runtime, limits, kernel_server=kernel_server)
    write_notebook(instrument(nb, split, control), control / "run.ipynb")
    code_cells = sum(cell.cell_type == "code" for cell in nb.cells)
    total_timeout = total_timeout or min(cell_timeout * (code_cells + 2), TOTAL_TIMEOUT_MAX_S)
    with ENVIRON_LOCK:   # an in-process run in another thread may be changing it (grader/inprocess.py)
        env = dict(os.environ, **GRADED_RUN_ENV, JUPYTER_PATH=str(control), JUPYTER_RUNTIME_DIR=str(runtime))
    arguments = [str(control), str(kernel_dir), kernel_name, str(cell_timeout), json.dumps(asdict(limits))]
    started = time.time()
    worker = worker_server.fork(arguments, env, str(PACKAGE_REPO)) if worker_server is not None else None
    if worker is None:
        with open(control / "worker.log", "wb") as log:
            worker = subprocess.Popen([sys.executable, "-m", WORKER_MODULE] + arguments, cwd=PACKAGE_REPO, env=env,
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
    problem = None
    try:
        worker.wait(timeout=total_timeout)
    except subprocess.TimeoutExpired:
        problem = (f"the notebook did not finish within {total_timeout:.0f} s and its kernel did not "
                   f"respond to an interrupt{_stuck_where(control, nb)}")
    finally:
        _kill_everything(worker, control)
    seconds = time.time() - started
    status = read_json(control / "status.json")
    if problem is None and status.get("fatal"):
        problem = f"the notebook could not be run: {status['fatal']}"
        if status.get("unresponsive"):
            problem += _stuck_where(control, nb)
    executed = control / "executed.ipynb"
    if problem is not None or not executed.exists():
        return Execution(nb, problem=problem or "the kernel did not produce a result", seconds=seconds)
    ran = nbformat.read(str(executed), as_version=4)
    ran.cells = ran.cells[1:]
    return Execution(ran, _load_records(kernel_dir / RECORDS_DIR), note=status.get("note"), seconds=seconds)


def _load_records(folder):
    records = {}
    for path in sorted(Path(folder).glob("*.pt")) if Path(folder).exists() else []:
        if path.stat().st_size > MAX_RECORD_BYTES:
            continue
        try:  # plain data only: a forged file cannot run code here
            record = torch.load(path, weights_only=True, map_location="cpu")
        except Exception:  # noqa: BLE001 - an unreadable record is a missing record
            continue
        if isinstance(record, dict) and isinstance(record.get("observations"), list):
            records[path.stem] = record
    return records


def _stuck_where(workdir, nb):
    progress = read_json(Path(workdir) / "status.json").get("cell")
    if progress is None or progress < 1 or progress > len(nb.cells):
        return ""
    cell = nb.cells[progress - 1]
    first_line = next((line for line in cell.source.splitlines() if line.strip()), "")
    return f" (stuck in cell {progress}: {first_line[:60]!r})"


def _kill_everything(worker, workdir):
    """End the worker, the kernel and everything they started (each has its own session)."""
    pids = [worker.pid] + [int(p) for p in read_json(Path(workdir) / "status.json").get("kernel_pids", [])]
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        worker.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


class WorkerServer(ForkServer):
    """The worker server of runtime/execute_worker.py (`--serve`), for one batch: `start()` it, pass
    it to run_notebook(), `close()` it. It has imported nbclient, jupyter_client and nbformat once; each
    submission's worker is a fork of it (a fresh process, never reused), which saves the
    quarter of a CPU-second those imports cost every submission."""

    @classmethod
    def start(cls, timeout=60):
        """A started server; RuntimeError if it does not start (then run_notebook() starts each worker)."""
        folder = Path(tempfile.mkdtemp(prefix="grader-workers-", dir="/tmp"))
        server, said = cls.launch([sys.executable, "-m", WORKER_MODULE, "--serve", str(folder / "server.sock")],
                                  folder, timeout, cwd=PACKAGE_REPO)
        if server is None:
            raise RuntimeError(f"the worker server did not start ({said})")
        return server

    def fork(self, arguments, env, cwd):
        """A _ForkedWorker running execute_worker.main(*arguments); None if the server is gone."""
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(str(self.socket))
            connection.sendall(json.dumps({"argv": arguments, "env": env, "cwd": cwd}).encode() + b"\n")
            connection.settimeout(30)
            reply = connection.makefile("rb").readline()
            connection.settimeout(None)
            return _ForkedWorker(connection, int(json.loads(reply)["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            connection.close()
            return None


class _ForkedWorker:
    """A worker forked by the WorkerServer (not this process's child): it has ended when the
    connection it holds closes. Waited for like a subprocess.Popen."""

    def __init__(self, connection, pid):
        self.connection, self.pid, self.ended = connection, pid, False

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.ended:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(WORKER_MODULE, timeout)
            readable, _, _ = select.select([self.connection], [], [], left)
            if readable and not self.connection.recv(4096):
                self.ended = True
                self.connection.close()
        return 0
