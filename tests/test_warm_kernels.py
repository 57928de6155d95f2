"""Warm kernels: each student's kernel is a fresh fork of a server that imported
torch, matplotlib and ipykernel once (grader/runtime/warm_kernels.py), in a sandbox of its own that
matches bubblewrap's. What must hold, beyond the hostile corpus of test_broken_submissions.py (which
grades through warm kernels, as autograde does for a batch):
- a kernel sees nothing of another kernel running beside it: not its files, not its processes;
- no state passes from one student's kernel to the next (each is a fork of the untouched server);
- a kernel has no capabilities, no network, its own PIDs, nothing of the grader's environment (not
  even in /proc/self/environ, which a fork inherits), and dies with the process that started it;
- where the server cannot build its sandbox, grading falls back to cold kernels, saying so;
- each submission's worker, forked from the worker server (stages/execute.py: WorkerServer), is a
  fresh process that is stopped like a started one when its notebook overruns;
- both servers end when the grader does, even though a batch starts them from a helper thread;
- Triton's kernels run in its interpreter in a warm kernel (the server imports triton, through
  torch._dynamo, with TRITON_INTERPRET set), and write nothing outside the kernel's working copy.
Slow-ish (about 30 s): real kernels."""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest

from grader import pipeline
from grader.sandbox import Limits, SandboxUnavailable, WarmKernels
from grader.stages.execute import WorkerServer, run_notebook
from support import COURSE
from support.waiting import wait_until

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox]


GRADER_SECRET = "postgresql://grader:hunter2@db/gradebook"


@pytest.fixture(scope="module")
def warm():
    os.environ["GRADER_DB_URL_FOR_THE_TEST"] = GRADER_SECRET      # what the grader's environment may hold
    try:
        server = WarmKernels.start()
    finally:
        del os.environ["GRADER_DB_URL_FOR_THE_TEST"]
    yield server
    server.close()


def _notebook(*sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    return nb


def _printed(run):
    assert run.problem is None, run.problem
    return "".join(output.get("text", "") + output.get("evalue", "") for cell in run.notebook.cells
                   for output in cell.outputs)


LOOK_AROUND = """
import json, os, socket, torch
seen = {"pid": os.getpid(), "uid": os.getuid(), "hostname": socket.gethostname(),
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "capabilities": int(open("/proc/self/status").read().split("CapEff:")[1].split()[0], 16),
        "torch_ready": torch.ones(3).sum().item() == 3.0,
        "environment": open("/proc/self/environ", "rb").read().decode(errors="replace") + repr(dict(os.environ))}
try:
    os.listdir({other!r}); seen["other"] = "visible"
except OSError:
    seen["other"] = "hidden"
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close(); seen["network"] = "reached"
except OSError:
    seen["network"] = "none"
open("mine.txt", "w").write("secret of " + os.getcwd())
import time; time.sleep(2)                 # both kernels are alive at once
print(json.dumps(seen))
"""


def test_two_kernels_side_by_side_see_nothing_of_each_other(warm, tmp_path):
    import socket
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    work = {name: tmp_path / name for name in ("alice", "bob")}
    seen, runs = {}, {}

    def grade(name, other):
        source = LOOK_AROUND.replace("{other!r}", repr(str(work[other] / "kernel"))).replace("{port}", str(port))
        runs[name] = run_notebook(_notebook(source), work[name], total_timeout=120, kernel_server=warm)

    threads = [threading.Thread(target=grade, args=pair) for pair in (("alice", "bob"), ("bob", "alice"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    listener.close()
    for name in work:
        seen[name] = json.loads(_printed(runs[name]).strip().splitlines()[-1])
        assert seen[name]["other"] == "hidden", f"{name}'s kernel could list the other student's folder"
        assert seen[name]["network"] == "none", f"{name}'s kernel reached a server on the host's 127.0.0.1"
        assert seen[name]["pid"] == 2 and seen[name]["pids"] == [1, 2], \
            f"{name}'s kernel sees processes that are not its own: {seen[name]['pids']}"
        assert seen[name]["uid"] == 65534 and seen[name]["capabilities"] == 0
        assert seen[name]["hostname"] == "sandbox" and seen[name]["torch_ready"]
        assert "hunter2" not in seen[name]["environment"], "the grader's environment reached the kernel"
        assert (work[name] / "kernel" / "mine.txt").read_text().startswith("secret of ")


def test_no_state_passes_from_one_kernel_to_the_next(warm, tmp_path):
    first = run_notebook(_notebook("import torch, os\ntorch.left_behind = 'by the first student'\n"
                              "open('/tmp/left_behind', 'w').write('x')\nprint(torch.randn(3))"),
                         tmp_path / "first", total_timeout=120, kernel_server=warm)
    second = run_notebook(_notebook("import torch, os\n"
                                    "print(hasattr(torch, 'left_behind'), os.path.exists('/tmp/left_behind'))\n"
                               "print(torch.randn(3))"),
                          tmp_path / "second", total_timeout=120, kernel_server=warm)
    printed = _printed(second).splitlines()
    assert printed[0] == "False False", "a warm kernel carried state from the kernel before it"
    assert _printed(first).strip() == "\n".join(printed[1:]).strip(), \
        "torch's default generator should start where a fresh Python's does (the server draws nothing)"


TRITON_IN_THE_KERNEL = """
import os, sys
imported_before = "triton.language" in sys.modules         # by the server's import of torch._dynamo
import torch, triton, triton.language as tl

@triton.jit
def row_sums_kernel(X, OUT, n, BLOCK: tl.constexpr):       # tl.sum is one of triton.language's own kernels
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    tl.store(OUT + row, tl.sum(tl.load(X + row * n + cols, mask=cols < n, other=0.0), axis=0))

x = torch.arange(60.0).reshape(3, 20)
out = torch.empty(3)
row_sums_kernel[(3,)](x, out, 20, BLOCK=32)
written = sorted(name for folder in (os.environ["HOME"], "/tmp") for name in os.listdir(folder))
print(imported_before, os.environ.get("TRITON_INTERPRET"), type(tl.sum).__name__, torch.equal(out, x.sum(dim=1)),
      written)
"""


def test_triton_s_interpreter_runs_in_a_warm_kernel(warm, tmp_path):
    """A sandbox has no GPU: Triton's kernels run in its interpreter, which Triton must know before it is first
    imported (the server imports it with torch._dynamo, and triton.language makes its own kernels then), so the
    server starts with TRITON_INTERPRET=1. The interpreter leaves no cache behind."""
    run = run_notebook(_notebook(TRITON_IN_THE_KERNEL), tmp_path / "student", total_timeout=120, kernel_server=warm)
    imported_before, switch, kind, right, written = _printed(run).strip().splitlines()[-1].split(" ", 4)
    assert imported_before == "True", "the server no longer imports triton: this test no longer tests the order"
    assert (switch, kind, right) == ("1", "InterpretedFunction", "True"), \
        f"TRITON_INTERPRET={switch}, tl.sum is a {kind}, the row sums are right: {right}"
    assert ".triton" not in written, f"the interpreter wrote a cache into the kernel's folders: {written}"


def test_a_graded_kernel_runs_ipython_syntax_as_ipython_does(warm, tmp_path):
    """The graded kernel's shortcut past IPython's input transforms (grader/runtime/record.py
    fast_cell_transforms) leaves magics, cell magics, top-level await and Python that merely looks
    like them (modulo, percent formats, !=, a question mark in a string) doing what they do in Jupyter."""
    run = run_notebook(_notebook("value = 7 % 4\nprint(value, f'{0.25:.0%}', value != 2, 'why?')",
                                 "names = %who_ls\nprint('value' in names)",
                                 "%%capture captured\nprint('out of sight')",
                                 "print(captured.stdout.strip())",
                                 "import asyncio\nawait asyncio.sleep(0)\nprint('awaited')",
                                 "len?",
                                 "from ipykernel import compiler\n"
                                 "print(get_ipython().input_transformer_manager.do_token_transforms.course_fast_path,"
                                 " compiler.murmur2_x86.course_fast_path)"),
                       tmp_path / "student", total_timeout=120, kernel_server=warm)
    assert _printed(run).split() == ["3", "25%", "True", "why?", "True", "out", "of", "sight", "awaited",
                                     "True", "True"], "the shortcuts are not in place (or IPython syntax broke)"


def test_a_kernel_dies_with_the_process_that_started_it(warm, tmp_path):
    """jupyter_client's caller may exit without shutting its kernel down: the kernel must not stay."""
    runtime = Path(tempfile.mkdtemp(prefix="grader-kernel-", dir="/tmp"))
    (tmp_path / "kernel").mkdir()
    command = warm.kernel_command(tmp_path, tmp_path / "kernel", runtime, Limits())
    command = [part.replace("{connection_file}", str(runtime / "kernel.json")) for part in command]
    from jupyter_client.connect import write_connection_file
    write_connection_file(str(runtime / "kernel.json"), transport="ipc", ip=str(runtime / "ipc"))
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); "
                               "time.sleep(3)"] + command)
    pids = runtime / "kernel-pids.json"
    wait_until(lambda: pids.exists() and pids.read_text(), 10, "the kernel's pid file", interval=0.1)
    supervisor = json.loads(pids.read_text())["supervisor"]
    parent.wait()
    wait_until(lambda: not Path(f"/proc/{supervisor}").exists(), 5,
               "the kernel to die with the process that started it", interval=0.1)


def test_without_a_working_server_grading_falls_back_to_cold_kernels(monkeypatch, capsys):
    def refuse(*_, **__):
        raise SandboxUnavailable("the warm kernel server cannot build a sandbox here: unshare: Operation not permitted")
    monkeypatch.setattr(pipeline.WarmKernels, "start", refuse)
    assert pipeline._start_warm_kernels() is None
    said = capsys.readouterr().err
    assert "unshare: Operation not permitted" in said and "starts cold (bubblewrap)" in said


LLAMA = "transformers.models.llama.modeling_llama"
IMPORTED = f"import sys; print(sorted(m for m in ({LLAMA!r}, 'no_such_module_here') if m in sys.modules))"


def test_a_server_holds_the_assignments_imports_and_closing_it_leaves_no_process(warm, tmp_path):
    """The warm imports of every assignment (their metadata course.warm_imports: a6's Hugging Face Llama) are
    in each kernel's sys.modules before its first cell, and start no thread that a fork would lose; one
    that is not installed is left out, and the server starts all the same."""
    without = run_notebook(_notebook(IMPORTED), tmp_path / "without", total_timeout=120, kernel_server=warm)
    assert _printed(without) == "[]\n"
    imports = pipeline.warm_imports(COURSE, COURSE.assignment_ids())
    assert LLAMA in imports
    server = WarmKernels.start(imports=imports + ["no_such_module_here"])
    run = run_notebook(_notebook(IMPORTED), tmp_path / "run", total_timeout=120, kernel_server=server)
    assert _printed(run) == f"[{LLAMA!r}]\n"
    folder = str(server.folder)
    server.close()
    left = subprocess.run(["pgrep", "-f", folder], capture_output=True, text=True).stdout.split()
    assert left == [], f"processes of the warm server are still running: {left}"


def test_forked_workers_are_fresh_and_stopped_when_a_notebook_overruns(warm, tmp_path):
    workers = WorkerServer.start()
    try:
        seen = []
        for index in range(2):
            run = run_notebook(_notebook("import os; print(os.getcwd())"), tmp_path / f"run{index}",
                               total_timeout=120, kernel_server=warm, worker_server=workers)
            assert _printed(run).strip() == str(tmp_path / f"run{index}" / "kernel")
            seen.append(json.loads((tmp_path / f"run{index}" / "control" / "status.json").read_text()))
        started = time.monotonic()
        stuck = run_notebook(_notebook("import time\nwhile True:\n    time.sleep(0.1)"), tmp_path / "stuck",
                             cell_timeout=60, total_timeout=5, kernel_server=warm, worker_server=workers)
        assert "did not finish within 5 s" in (stuck.problem or ""), stuck.problem
        assert time.monotonic() - started < 30
        kernel_pids = json.loads((tmp_path / "stuck" / "control" / "status.json").read_text())["kernel_pids"]
        wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in kernel_pids), 5,
                   "the overrunning kernel to be stopped", interval=0.1)
        workers_left = subprocess.run(["pgrep", "-P", str(workers.process.pid)], capture_output=True,
                                      text=True).stdout.split()
        assert workers_left == [], f"forked workers still running: {workers_left}"
    finally:
        workers.close()


GRADER_THAT_DIES = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
from grader.sandbox import WarmKernels
from grader.stages.execute import WorkerServer
with ThreadPoolExecutor(2) as pool:          # as Batch.prepare starts them: from helper threads that then end
    warm, workers = pool.submit(WarmKernels.start).result(), pool.submit(WorkerServer.start).result()
print(warm.process.pid, workers.process.pid, flush=True)
time.sleep(60)
"""


def test_both_servers_end_when_the_grader_is_killed(warm):
    grader = subprocess.Popen([sys.executable, "-c", GRADER_THAT_DIES], stdout=subprocess.PIPE, text=True,
                              cwd=str(Path(__file__).resolve().parent.parent))
    try:
        servers = [int(pid) for pid in grader.stdout.readline().split()]
        assert len(servers) == 2
        time.sleep(1)
        assert all(_running(pid) for pid in servers), "a server died with the thread that started it"
    finally:
        grader.kill()
        grader.wait()
    wait_until(lambda: not any(_running(pid) for pid in servers), 5, "both servers to end with their grader",
               interval=0.1)


def _running(pid):
    """Alive and not a zombie waiting for its (gone) parent to be reaped by init."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
