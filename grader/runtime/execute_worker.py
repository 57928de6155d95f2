"""Runs one instrumented notebook with nbclient, in a process session of its own so that
everything it starts can be ended together. Reads and writes only the grader's control folder
(run.ipynb in; executed.ipynb and status.json out); the kernel runs in the kernel folder. A
watchdog ends the kernel if it starts too many processes; outputs are cut to the byte limits
before they are saved.

Started by execute.py either as a program of its own (`python -m grader.runtime.execute_worker
CONTROL KERNEL_DIR ...`), or forked from a worker server (`--serve SOCKET`, below) that has done
this module's imports once for the whole batch."""
import asyncio
import gc
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

# One worker starts per submission, so its start-up is paid 100s of times. jsonschema (under
# nbformat) imports rfc3987_syntax, when installed, to validate IRI formats, which the notebook
# schema never uses; building that module's grammar costs about 1.2 s of CPU. Mark it absent.
sys.modules.setdefault("rfc3987_syntax", None)

import nbformat  # noqa: E402
from jupyter_client.manager import AsyncKernelManager  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import DeadKernelError  # noqa: E402

from ..sandbox import KERNEL_PIDS_FILE, Limits, read_json  # noqa: E402
from .warm_kernels import PR_SET_PDEATHSIG, prctl, serve_forking  # noqa: E402

# A test cell's kernel code (grader/split.py) waits in the control folder, TEST_CODE_DIR/<file> as the
# cell's metadata TEST_CODE_KEY names it, until the cell starts: then it is copied to TEST_CODE_FILE in
# the kernel's folder, where the cell's recorder reads and removes it (grader/runtime/record.py).
TEST_CODE_DIR = "test_code"
TEST_CODE_KEY = "grader_test_code"
TEST_CODE_FILE = ".grader_test_code"

# nbclient interrupts a cell at its timeout; a kernel that honours the interrupt ends the cell within
# a second or two. One still running this long after is ignoring it (nbclient would keep waiting).
INTERRUPT_GRACE_S = 10


def descendants(root_pid):
    """Pids of every process below root_pid (from /proc; no extra dependency)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, stack = [], [root_pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def write_notebook(nb, path):
    """A notebook that only the grader and its worker read (run.ipynb, executed.ipynb), written as plain JSON
    that nbformat reads back to the same notebook. nbformat.write copies the whole notebook, splits every text
    into lines and indents the JSON, which Python's C encoder does not do: about 6 ms of a4's notebook in pure
    Python, twice a submission."""
    Path(path).write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")


def limit_outputs(nb, limits):
    total = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept, cell_bytes = [], 0
        for output in cell.get("outputs", []):
            size = len(json.dumps(output))
            if cell_bytes + size > limits.output_bytes_per_cell or total + size > limits.output_bytes_total:
                kept.append(nbformat.v4.new_output("stream", name="stdout",
                                                   text="... output cut: over the grader's byte limit ...\n"))
                break
            kept.append(output)
            cell_bytes += size
            total += size
        cell.outputs = kept


def hand_over_test_code(source, target):
    """Put a test cell's kernel code where the kernel's recorder reads it (replacing whatever is
    there), readable by the kernel's user."""
    try:    # never through a link the kernel put there; what the kernel blocks, its own test loses
        data = source.read_bytes()
        target.unlink(missing_ok=True)
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        os.fchmod(descriptor, 0o644)   # the grader's umask (077 under Gradescope) would hide it from the kernel
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
    except OSError:
        pass


def lighter_message_handling():
    """Two costs of nbclient's handling of each kernel message, cut in this process (about a tenth of a
    worker's CPU), what the notebook gets unchanged:
    - jupyter_client parses the dates in every message's headers (dateutil); nbclient reads them only to
      record cells' timings, which the worker turns off: they stay strings;
    - nbformat checks every output (nbclient's output_from_msg) against the notebook schema with jsonschema
      in pure Python; the output's part of the schema, compiled once with fastjsonschema (what nbformat
      itself checks the whole notebook with when it writes it), accepts the same outputs, and an output it
      refuses goes on to nbformat's own check, which raises its own error."""
    from jupyter_client import session
    from nbformat.v4 import nbbase
    session.extract_dates = _as_is
    if getattr(nbbase.validate, "original", None) is None:
        nbbase.validate = _compiled_output_check(nbbase.validate)


def _as_is(obj):
    return obj


OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")


def _compiled_output_check(validate):
    """nbformat's v4 `validate(node, ref)`, an output's check (new_output asks for its type's part of the
    schema) through fastjsonschema first."""
    import fastjsonschema
    from nbformat.validator import get_validator
    schema = get_validator(nbformat.v4.nbformat, nbformat.v4.nbformat_minor, name="jsonschema")._schema
    compiled = {ref: fastjsonschema.compile({"$schema": schema.get("$schema"), "definitions": schema["definitions"],
                                             "$ref": f"#/definitions/{ref}"}) for ref in OUTPUT_TYPES}

    def checked(node, ref=None):
        if ref in compiled:
            try:
                compiled[ref](node)
                return None
            except fastjsonschema.JsonSchemaException:
                pass
        return validate(node, ref=ref)
    checked.original = validate
    return checked


class StatusFile:
    """status.json, rewritten in place at each cell: a write of the whole text at its start, padded with
    spaces to the length it had (JSON all the same), never truncated. Truncating and rewriting a file, as
    write_text does, makes the filesystem flush it, about 3 ms of waiting and 0.15 ms of CPU a cell; and a
    worker killed between the truncation and the write would leave it empty."""

    def __init__(self, path):
        self.descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
        self.length = 0
        self.lock = threading.Lock()    # the watchdog's thread writes it too

    def write(self, data):
        text = json.dumps(data).encode()
        with self.lock:
            os.pwrite(self.descriptor, text.ljust(self.length), 0)
            self.length = max(self.length, len(text))


def main(control, kernel_dir, kernel_name, cell_timeout, limits_json):
    control, limits, cell_timeout = Path(control), Limits(**json.loads(limits_json)), int(cell_timeout)
    lighter_message_handling()   # done already in a worker forked from the server (warm_up)
    status = {"kernel_pids": []}
    status_file = StatusFile(control / "status.json")

    def save_status():
        status_file.write(status)

    nb = nbformat.read(str(control / "run.ipynb"), as_version=4)
    # the connection file and the ipc sockets it names lie in the runtime folder the sandbox shares
    # (execute.py); ipc, not TCP: the sandboxed kernel has no network at all
    runtime = Path(os.environ["JUPYTER_RUNTIME_DIR"])
    manager = AsyncKernelManager(kernel_name=kernel_name, transport="ipc",
                                 connection_file=str(runtime / "kernel.json"))
    client = NotebookClient(nb, km=manager, timeout=cell_timeout, kernel_name=kernel_name, allow_errors=True,
                            interrupt_on_timeout=True, record_timing=False,
                            # the records are on disk when the last cell ends: no need to wait
                            # a second for a graceful shutdown (the sandbox dies with the kernel)
                            shutdown_kernel="immediate",
                            resources={"metadata": {"path": str(kernel_dir)}})
    stop = threading.Event()
    running_since = {"at": None}   # when the cell now running started (monotonic clock)
    client_loop = {}               # nbclient's event loop, where its wait for a cell's reply runs

    def kill_kernel(reason):
        status["fatal"] = reason
        save_status()
        for pid in status["kernel_pids"]:
            for target in [pid] + descendants(pid):
                try:
                    os.kill(target, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        stop_waiting_for_the_cell()

    def stop_waiting_for_the_cell():
        """After a cell's timeout nbclient stops polling whether the kernel lives and only asks again
        when its next wait for the reply ends, each as long as the cell's timeout: the cell a killed
        kernel was running would be noticed up to that long after. Ending the wait now is what nbclient's
        own poll does when it finds the kernel dead (the cell ends with DeadKernelError)."""
        loop, waiting = client_loop.get("loop"), getattr(client, "task_poll_for_reply", None)
        if loop is not None and waiting is not None and not loop.is_closed():
            loop.call_soon_threadsafe(waiting.cancel)

    def watchdog():
        while not stop.wait(0.5):
            for pid in status["kernel_pids"]:
                if len(descendants(pid)) > limits.max_processes:
                    kill_kernel(f"the notebook started more than {limits.max_processes} processes")
            started = running_since["at"]
            if started is not None and time.monotonic() - started > cell_timeout + INTERRUPT_GRACE_S:
                running_since["at"] = None
                status["unresponsive"] = True
                kill_kernel(f"the kernel did not respond to an interrupt: the cell ran past its {cell_timeout} s "
                            f"timeout and was still running {INTERRUPT_GRACE_S} s later, so it was stopped")

    def on_cell_executed(**_):
        running_since["at"] = None

    def on_cell_start(cell, cell_index, **_):
        client_loop.setdefault("loop", asyncio.get_running_loop())   # nbclient calls its hooks in its loop
        code_file = cell.metadata.pop(TEST_CODE_KEY, None)
        if code_file is not None:
            hand_over_test_code(control / TEST_CODE_DIR / code_file, Path(kernel_dir) / TEST_CODE_FILE)
        running_since["at"] = time.monotonic() if cell.cell_type == "code" else None
        status["cell"] = cell_index   # index in the instrumented notebook (prelude is 0)
        if client.km is not None and not status["kernel_pids"]:
            pid = getattr(getattr(client.km, "provisioner", None), "pid", None)
            if pid:
                status["kernel_pids"].append(pid)
            # a warm kernel is not the launched process's child: its stub names the sandbox's supervisor
            warm = read_json(runtime / KERNEL_PIDS_FILE)
            if warm.get("supervisor"):
                status["kernel_pids"].append(warm["supervisor"])
        save_status()

    client.on_cell_start = on_cell_start
    client.on_cell_executed = on_cell_executed
    threading.Thread(target=watchdog, daemon=True).start()
    try:
        client.execute()
    except DeadKernelError as error:
        status.setdefault("note", f"the kernel died during cell {status.get('cell', '?')} ({error}); "
                                  "later tests did not run")
    except Exception as error:  # noqa: BLE001 - reported to the grader as the reason
        status.setdefault("fatal", f"{type(error).__name__}: {str(error)[:300]}")
    stop.set()
    save_status()
    limit_outputs(nb, limits)
    write_notebook(nb, control / "executed.ipynb")


# ---- the worker server: one per batch, so that a worker's start-up (about 0.25 CPU-s of imports)
# is paid once, not once per submission ----

def serve(socket_path):
    """For each connection to socket_path, fork one worker (runtime/warm_kernels.py: serve_forking).
    The request (one JSON line: main's arguments, the environment and folder to run in) is read in the
    fork, which answers with its pid and runs main() in a process session of its own. The connection
    closes when the worker ends, which is how the grader knows."""
    warm_up()
    # every worker is a copy-on-write fork: a garbage collection there would visit (and copy) every
    # page of the imported objects; frozen, they are left out (as in runtime/warm_kernels.py)
    gc.collect()
    gc.freeze()
    serve_forking(socket_path, _run_forked, "worker")


def warm_up():
    """What each worker would otherwise do first, done once in the server (a quarter of a CPU-second a
    worker): nbformat compiles its notebook schema into a validator at the first notebook it reads;
    jupyter_client's kernelspec look-up imports IPython to find its folder, and its kernel manager
    reads every installed package's entry points for the kernel provisioners; the lighter message
    handling compiles its output schema (about 10 ms a worker). Starts nothing: no kernel, no ZeroMQ
    context, no thread."""
    lighter_message_handling()
    from IPython.paths import get_ipython_dir  # noqa: F401 - imported for the workers
    from jupyter_client.provisioning import KernelProvisionerFactory
    from jupyter_client.provisioning.local_provisioner import LocalProvisioner  # noqa: F401 - as above
    KernelProvisionerFactory.instance()       # the singleton every kernel manager asks, entry points read
    output = nbformat.v4.new_output("stream", text="")          # validated as an output, as nbclient's are
    sample = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[output])])
    nbformat.reads(nbformat.writes(sample), as_version=4)      # the whole notebook, as read and written


def _run_forked(connection):
    os.setsid()                    # the grader ends the worker and all it started with one killpg
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)   # and the server's end ends it too
    request = json.loads(connection.makefile("rb").readline())
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    with open(os.path.join(request["argv"][0], "worker.log"), "ab") as log:
        for fd, target in ((0, os.open(os.devnull, os.O_RDONLY)), (1, log.fileno()), (2, log.fileno())):
            os.dup2(target, fd)
    connection.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
    main(*request["argv"])         # the connection stays open (unused) until this process ends


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
