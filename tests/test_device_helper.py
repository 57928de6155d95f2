"""The device helper: grader/provided/device.py's pick_device() is copied into every
notebook's setup cell, tries cuda, then mps, by running a tiny operation, and falls back to the
CPU with a one-line reason when a GPU that torch reports as available cannot run (a P100 under a
torch build without kernels for it: "no kernel image is available"). Fast: no kernel, no GPU."""
import re
import types
from pathlib import Path

import pytest
import torch

from grader import cells
from grader.release import (
    DEVICE_BEGIN,
    DEVICE_CALL,
    DEVICE_END,
    PROGRESS_BEGIN,
    PROGRESS_END,
    ReleaseError,
    apply_device_helper,
    apply_progress_helper,
    device_helper_source,
    device_setup_cell,
    lecture_paths,
    progress_helper_source,
)

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = (sorted((REPO / "lectures").glob("[0-9][0-9]_*.ipynb")) + sorted((REPO / "solutions").glob("*/*.ipynb"))
             + sorted((REPO / "assignments").glob("*/*.ipynb")))
NO_KERNEL_IMAGE = ("CUDA error: no kernel image is available for execution on the device\n"
                   "CUDA kernel errors might be asynchronously reported at some other API call")


# what a notebook's copies of the helpers lack: the checks these tests make (sync rewrites them)

def device_helper_problem(nb):
    """None if the notebook's setup cell carries the current helper followed by `device =
    pick_device()`; otherwise what is wrong, in a few words."""
    cell = device_setup_cell(nb)
    if cell is None:
        return "no setup cell chooses a device"
    if DEVICE_BEGIN not in cell.source:
        return "the setup cell has no device helper (an old `device = ...` line)"
    if DEVICE_END not in cell.source:
        return "the device helper region has no end marker"
    if device_helper_source() + "\n" + DEVICE_CALL not in cell.source:
        return "the device helper differs from grader/provided/device.py"
    return None


def progress_helper_problem(nb):
    """None if the notebook uses no `tqdm(` or its cells carry the current progress-bar region;
    otherwise what is wrong, in a few words."""
    code = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    if not any("tqdm(" in source for source in code):
        return None
    region = [source for source in code if PROGRESS_BEGIN in source]
    if not region:
        return "it calls tqdm( but carries no progress-bar region"
    if PROGRESS_END not in region[0]:
        return "the progress-bar region has no end marker"
    if progress_helper_source() not in region[0]:
        return "the progress-bar region differs from grader/provided/progress.py"
    return None


def stale_device_helpers(course, paths=None):
    """(path, problem) of each notebook whose device helper is missing or differs from
    grader/provided/device.py; by default every lecture, solution and release notebook."""
    if paths is None:
        paths = (lecture_paths(course) + sorted(course.source_dir.glob("*/*.ipynb"))
                 + sorted(course.release_dir.glob("*/*.ipynb")))
    problems = []
    for path in paths:
        problem = device_helper_problem(cells.read(path))
        if problem:
            problems.append((Path(path), problem))
    return problems


def run_helper(torch_module):
    """Execute the helper's source (exactly what the notebooks carry) with `torch_module` as torch."""
    namespace = {"torch": torch_module}
    exec(compile(device_helper_source(), "<device helper>", "exec"), namespace)
    return namespace["pick_device"]()


def fake_torch(cuda=None, mps=None, mps_module=True):
    """A stand-in for torch: cuda / mps are None (absent), "ok" (works) or an exception the first
    operation raises. mps_module=False imitates a torch build without torch.backends.mps."""
    def ones(*shape, device="cpu"):
        failure = {"cuda": cuda, "mps": mps}.get(device)
        if isinstance(failure, Exception):
            raise failure
        return torch.ones(*shape)
    backends = types.SimpleNamespace()
    if mps_module:
        backends.mps = types.SimpleNamespace(is_available=lambda: mps is not None)
    return types.SimpleNamespace(
        ones=ones, backends=backends,
        cuda=types.SimpleNamespace(is_available=lambda: cuda is not None, get_device_name=lambda: "Fake GPU 80GB"))


def test_the_region_is_marked_and_compiles():
    source = device_helper_source()
    assert source.startswith(DEVICE_BEGIN) and source.endswith(DEVICE_END)
    compile(source, "<device helper>", "exec")
    assert "torch.cuda.is_available" in source and "pick_device" in source


def test_a_cuda_device_without_kernels_falls_back_to_cpu(monkeypatch, capsys):
    # the real torch, told there is a GPU whose first operation fails as a P100 does under a new torch
    real_ones = torch.ones

    def ones(*args, device=None, **kwargs):
        if str(device).startswith("cuda"):
            raise RuntimeError(NO_KERNEL_IMAGE)
        return real_ones(*args, device=device, **kwargs)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(torch, "ones", ones)
    assert run_helper(torch) == "cpu"
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("device: cpu (")
    assert "cuda is unusable (RuntimeError: CUDA error: no kernel image is available" in lines[0]
    assert "falling back to cpu" in lines[0]


def test_the_fallback_with_a_stand_in_torch_without_mps(capsys):
    assert run_helper(fake_torch(cuda=RuntimeError(NO_KERNEL_IMAGE), mps_module=False)) == "cpu"
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "no kernel image is available" in out and "falling back to cpu" in out


def test_a_working_gpu_is_chosen_and_named(capsys):
    assert run_helper(fake_torch(cuda="ok")) == "cuda"
    assert capsys.readouterr().out == "device: cuda (Fake GPU 80GB)\n"
    assert run_helper(fake_torch(mps="ok")) == "mps"
    assert capsys.readouterr().out == "device: mps (Apple GPU)\n"


def test_a_broken_cuda_falls_back_to_a_working_mps(capsys):
    assert run_helper(fake_torch(cuda=RuntimeError(NO_KERNEL_IMAGE), mps="ok")) == "mps"
    out = capsys.readouterr().out
    assert out.startswith("device: mps (cuda is unusable") and "falling back to mps" in out
    assert run_helper(fake_torch(cuda=AssertionError("Torch not compiled with CUDA enabled"),
                                 mps=RuntimeError("MPS backend out of memory"))) == "cpu"
    out = capsys.readouterr().out
    assert "cuda is unusable (AssertionError" in out and "mps is unusable (RuntimeError" in out


def test_on_this_cpu_machine_the_line_is_deterministic(capsys):
    if torch.cuda.is_available() or torch.backends.mps.is_available():
        pytest.skip("a GPU is present")
    assert run_helper(torch) == "cpu"
    assert capsys.readouterr().out == "device: cpu (no CUDA or MPS device found)\n"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(REPO).parent / p.stem))
def test_every_notebook_carries_the_current_helper(path):
    nb = cells.read(path)
    problem = device_helper_problem(nb)
    assert problem is None, f"{path.relative_to(REPO)}: {problem} (run `python -m grader sync`)"
    # nothing after the helper asks torch.cuda.is_available() again: a broken GPU must not crash later cells
    outside = "\n".join(re.sub(re.escape(device_helper_source()), "", cell.source)
                        for cell in nb.cells if cell.cell_type == "code")
    assert "cuda.is_available" not in outside, \
        f"{path.relative_to(REPO)} tests torch.cuda.is_available() outside the helper; test `device == \"cuda\"`"


def test_stale_device_helpers_lists_nothing_for_the_lectures(course):
    assert stale_device_helpers(course, sorted((REPO / "lectures").glob("[0-9][0-9]_*.ipynb"))) == []


def _notebook(source):
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# title"), nbformat.v4.new_code_cell(source),
                nbformat.v4.new_code_cell('x = torch.ones(2, device=device)')]
    return nb


def test_sync_converts_an_old_device_line_and_refreshes_a_stale_region():
    old = ('import torch\ntorch.manual_seed(0)\n'
           'device = "cuda" if torch.cuda.is_available() else "cpu"\nprint(device)')
    nb = _notebook(old)
    assert "old `device = ...` line" in device_helper_problem(nb)
    assert apply_device_helper(nb) is True
    source = device_setup_cell(nb).source
    assert device_helper_problem(nb) is None
    assert source.startswith("import torch\ntorch.manual_seed(0)\n" + DEVICE_BEGIN)
    assert source.endswith(DEVICE_END + "\n" + DEVICE_CALL + "\nprint(device)")
    assert apply_device_helper(nb) is False                      # idempotent

    edited = source.replace("falling back to", "switching to")   # someone edited the copy
    nb = _notebook(edited)
    assert device_helper_problem(nb) == "the device helper differs from grader/provided/device.py"
    assert apply_device_helper(nb) is True and device_setup_cell(nb).source == source

    nb = _notebook(source.replace("\n" + DEVICE_CALL, ""))       # the call line was lost
    assert device_helper_problem(nb) is not None
    apply_device_helper(nb)
    assert device_setup_cell(nb).source == source

    nb = _notebook(source.replace(DEVICE_END, ""))
    with pytest.raises(ReleaseError, match="no end marker"):
        apply_device_helper(nb)


def test_a_notebook_that_chooses_no_device_is_reported_not_rewritten():
    nb = _notebook("import torch")
    assert device_helper_problem(nb) == "no setup cell chooses a device"
    assert apply_device_helper(nb) is False


# ---- the GPU parts, on a machine without CUDA: they skip cleanly, and `make gpu-report` says why it cannot run

GPU_SKIPS = {"07_flop_io_accounting": 2, "08_kv_cache_decoding": 6}


@pytest.mark.parametrize("stem,count", GPU_SKIPS.items())
def test_the_stored_gpu_cells_skipped_cleanly_on_cpu(stem, count):
    nb = cells.read(REPO / "lectures" / f"{stem}.ipynb")
    lines = [line for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs
             for line in str(output.get("text", "")).splitlines() if line.startswith("CPU runtime: ")]
    assert len(lines) == count and all(line.endswith("skipped.") for line in lines), lines


def _gpu_report_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("gpu_report", REPO / "tools" / "gpu_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lecture_07_prints_the_peaks_line_the_report_reads():
    source = "\n".join(c.source for c in cells.read(REPO / "lectures" / "07_flop_io_accounting.ipynb").cells)
    assert 'print("PEAKS " + " ".join(f"{k}={v:.4g}" for k, v in gpu_peaks.items()))' in source
    line = "PEAKS " + " ".join(f"{k}={v:.4g}" for k, v in {"fp32": 5.1e13, "tf32": 3.9e14, "bf16": 7.2e14,
                                                           "bandwidth": 2.9e12}.items())
    peaks = _gpu_report_module().parse_peaks("device: cuda\n" + line + "\nmore")
    assert peaks == {"fp32": 5.1e13, "tf32": 3.9e14, "bf16": 7.2e14, "bandwidth": 2.9e12}
    assert _gpu_report_module().parse_peaks("no such line") is None


def test_the_report_reads_the_flash_attention_lines_of_lecture_11_and_a7():
    """Both notebooks print `FLASH <method> <fwd|fwd+bwd> TFLOP/s: ...` lines on a GPU, none on a CPU."""
    report = _gpu_report_module()
    for name in report.FLASH_NOTEBOOKS:
        source = "".join(c.source for c in cells.read(REPO / name).cells if c.cell_type == "code")
        assert 'print(f"FLASH {name:32s}' in source, f"{name} no longer prints its FLASH lines"
    lecture, a7 = report.FLASH_NOTEBOOKS
    found = report.flash_lines({lecture: "device: cuda\nFLASH Triton kernel fwd TFLOP/s: L=512: 10.00\nother",
                                a7: "Timing skipped"})
    assert found == {lecture: ["Triton kernel fwd TFLOP/s: L=512: 10.00"]}


def test_the_report_is_written_from_its_parts(tmp_path):
    report = _gpu_report_module()
    notebooks = [{"name": "lectures/07_flop_io_accounting.ipynb", "ok": True, "seconds": 12.5, "error": None},
                 {"name": "solutions/a4_kv_cache/a4_kv_cache.ipynb", "ok": False, "seconds": 3.0,
                  "error": "CellExecutionError: boom"}]
    bench_json = {"config": {"prompt_len": 16, "vocab": 1024, "d_model": 256, "n_heads": 4, "n_layers": 4,
                             "d_ff": 1024, "repetitions": 3},
                  "results": {"reference_graph": {"512": {"tokens_per_s": 4000.0}},
                              "hf_gpt2_generate": {"512": {"tokens_per_s": 500.0}},
                              "hf_gpt2_static": {"512": {"tokens_per_s": 2000.0}}},
                  "skipped": {"reference_fast": "a reason"}}
    gate = {"command": "python -m grader check --device cuda --skip-release-run", "status": 0, "seconds": 60,
            "output": "check: all passed"}
    path = tmp_path / "report.md"
    report.write_report(path, {"date": "today", "device": "Fake GPU", "torch": "2.11.0"}, notebooks,
                        {"fp32": 5e13, "tf32": 4e14, "bf16": 8e14, "bandwidth": 3e12}, ["T = 128: eager"],
                        gate, {"status": 0, "output": ""}, bench_json, "nbgrader not installed", ok=False,
                        flash={"lectures/11_from_tiles_to_a_kernel.ipynb": ["Triton kernel fwd TFLOP/s: L=512: 10.00"]})
    text = path.read_text()
    for expected in ("# GPU report (FAILED)", "| device | Fake GPU |",
                     "| lectures/07_flop_io_accounting.ipynb | ok | 12.5 |",
                     "CellExecutionError: boom", "| bf16 | 800.0 | 267 |", "3.00 TB/s", "T = 128: eager",
                     "| reference_graph | 4000 |", "8.00x HF GPT-2 generate (dynamic cache)",
                     "2.00x HF GPT-2 with its static cache", "skipped reference_fast: a reason",
                     "passed (exit status 0", "skipped: nbgrader not installed",
                     "Triton kernel fwd TFLOP/s: L=512: 10.00"):
        assert expected in text, expected


def _no_cuda():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")


def test_gpu_report_without_cuda_says_why_and_exits_3(tmp_path, capsys):
    """Its main, in this process (the test below runs it as `make gpu-report` runs it, exit status included)."""
    _no_cuda()
    status = _gpu_report_module().main(["--out", str(tmp_path / "gpu")])
    said = capsys.readouterr()
    assert status == 3, said.out + said.err
    lines = said.out.strip().splitlines()
    assert len(lines) == 1 and "torch.cuda.is_available() is False" in lines[0], said.out
    assert "needs a CUDA GPU" in lines[0] and not (tmp_path / "gpu").exists()


def test_make_gpu_report_without_cuda_fails_with_the_message():
    import shutil
    import subprocess
    import sys
    _no_cuda()
    if shutil.which("make") is None:
        pytest.skip("no make")
    proc = subprocess.run(["make", "--no-print-directory", "gpu-report", f"PYTHON={sys.executable}"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert f"{sys.executable} tools/gpu_report.py" in proc.stdout          # that interpreter, no venv made
    assert "no usable CUDA device" in proc.stdout and "needs a CUDA GPU" in proc.stdout
    assert "Error 3" in proc.stderr, proc.stderr



@pytest.mark.kernel
def test_the_report_runs_untimed_notebooks_side_by_side_and_keeps_to_its_budget(tmp_path):
    """Notebooks that print no timing run `jobs` at a time: here the first waits for a file that only the
    second writes, so it finishes only if both ran at once. A notebook not started before the deadline is
    named as not run, and the report says so; nothing of the repository is written."""
    import time

    import nbformat
    report = _gpu_report_module()
    waits = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os, time\nfor _ in range(600):\n    if os.path.exists('TOKEN'):\n        break\n"
        "    time.sleep(0.1)\nprint('saw', open('TOKEN').read())".replace("TOKEN", str(tmp_path / "token")))])
    writes = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"open({str(tmp_path / 'token')!r}, 'w').write('the other notebook')")])
    paths = [tmp_path / "waits.ipynb", tmp_path / "writes.ipynb"]
    for nb, path in zip((waits, writes), paths):
        nbformat.write(nb, str(path))
    said = []
    results = report.execute_notebooks(paths, tmp_path / "out", 120, said.append, jobs=2)
    assert [r["name"] for r in results] == ["waits.ipynb", "writes.ipynb"]
    assert all(r["ok"] for r in results), results
    assert "saw the other notebook" in results[0]["text"]
    late = report.execute_notebooks(paths[1:], tmp_path / "late", 120, said.append, deadline=time.monotonic() - 1)
    assert late[0]["ok"] is False and "time budget" in late[0]["skipped"]
    page = tmp_path / "report.md"
    report.write_report(page, {"date": "today"}, late, None, [], report.BUDGET_SPENT, report.BUDGET_SPENT, None,
                        report.BUDGET_SPENT, ok=False)
    text = page.read_text()
    assert "| writes.ipynb | not run (time budget) | 0.0 |" in text
    assert text.count(report.BUDGET_SPENT) == 3, text          # the gate, the decode and grading benchmarks


NO_NBGRADER = '''import sys
class NoNbgrader:   # a GPU box given only torch and the notebook runners (tools/gpu_wheels.sh): no nbgrader
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("nbgrader", "nbconvert", "jupyter_server"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoNbgrader())
'''


def test_the_gate_on_a_device_runs_without_nbgrader(tmp_path):
    """`make gpu-report` runs `grader check --device cuda --skip-release-run` where tools/gpu_wheels.sh brought
    no nbgrader: nothing on that path may import it (the release run and the up-to-date check, which need it,
    run on the CPU only). Shown with the solution's share of a1's gate on the CPU device."""
    import os
    import subprocess
    import sys
    (tmp_path / "sitecustomize.py").write_text(NO_NBGRADER)
    script = ("import sys\nfrom grader.course import Course\nfrom grader.gate import Part, check_assignment\n"
              "import grader.cli\n"
              "report = check_assignment(Course.find(), 'a1_self_attention', run_release=False, progress=False,\n"
              "                          device='cpu', part=Part('solution'))\n"
              "print([r.name for r in report.results], report.ok, 'nbgrader' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}", "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("['(a) solution scores full marks'] True False"), proc.stdout + proc.stderr
# ---- the lectures' progress bar (grader/provided/progress.py), copied like the device helper ----

@pytest.mark.parametrize("path", sorted((REPO / "lectures").glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_every_lecture_carries_the_current_progress_bar(path):
    problem = progress_helper_problem(cells.read(path))
    assert problem is None, f"{path.relative_to(REPO)}: {problem} (run `python -m grader sync`)"


def test_the_progress_bar_redraws_a_bounded_number_of_times():
    """A kernel sends one message (a few, for a widget) per redraw; a client that reads them after the
    cell loses those past ZeroMQ's 1000-message queue, the cell's end among them (nbval: "Timeout of 5
    seconds exceeded waiting for output"). So a long loop must not redraw per step, on any machine."""
    import io
    namespace = {}
    exec(compile(progress_helper_source(), "<progress bar>", "exec"), namespace)
    out = io.StringIO()
    # mininterval=0: as if every step took longer than tqdm's redraw interval (a slow machine)
    assert list(namespace["tqdm"](range(1000), file=out, mininterval=0)) == list(range(1000))
    redraws = out.getvalue().count("\r")
    assert 10 <= redraws <= 60, f"{redraws} redraws for 1000 steps"
    assert "1000/1000" in out.getvalue()


def test_sync_refreshes_a_stale_progress_bar():
    nb = _notebook("import torch\n" + progress_helper_source() + "\nfor i in tqdm(range(3)): pass")
    assert progress_helper_problem(nb) is None
    nb.cells[1].source = nb.cells[1].source.replace("at most ~50 times", "often")
    assert "differs" in progress_helper_problem(nb)
    assert apply_progress_helper(nb) is True and progress_helper_problem(nb) is None
    nb.cells[1].source = "from tqdm import tqdm\nfor i in tqdm(range(3)): pass"
    assert "no progress-bar region" in progress_helper_problem(nb)
