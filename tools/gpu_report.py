"""`make gpu-report`: the course on a CUDA GPU, in one report (out/gpu/report.md).

On a machine with a working CUDA device it
  1. executes every lecture and every solution notebook top to bottom in a fresh kernel (nbclient),
     timing each: those whose figures are timings one at a time, then the others four at once
     (--jobs); executed copies go to out/gpu/notebooks/ (the repository's notebooks are never
     written);
  2. reads the fp32 / TF32 / bf16 matmul peaks and the memory bandwidth that lecture 07 measured
     (its `PEAKS ...` line), lecture 08's eager vs CUDA-graph decode timings, and the FlashAttention
     TFLOP/s of lecture 11's Triton kernel and of a7's reference kernels against PyTorch's fused
     attention and the PyTorch tiles (their `FLASH ...` lines; both compile their kernels here, where
     a CPU runs them in Triton's interpreter);
  3. runs the quality gate with tensors on the GPU: `python -m grader check --device cuda
     --skip-release-run`, recording its output and exit status;
  4. runs the decode benchmark, `benchmarks/kv_cache_benchmark.py --device cuda` (tokens/s against
     Hugging Face GPT-2, dynamic and static cache), and the grading benchmark when nbgrader and
     bubblewrap are present (otherwise it says why it skipped it);
  5. writes out/gpu/report.md: device, torch version, per-notebook time, roofline peaks, decode
     tokens/s, gate result.

Exit status: 0 when everything ran and passed, 1 when something failed (the report says what),
3 when there is no usable CUDA device (one line says which check failed).

Only the standard library at import time; torch, nbformat, nbclient and ipykernel are imported when
needed. Packages installed with `pip install --target DIR` are found through PYTHONPATH, for this
process, the kernels it starts and the commands it runs (tools/gpu_wheels.sh fetches them).

    python tools/gpu_report.py                       # everything
    python tools/gpu_report.py --skip-gate --bench-reps 1
    python tools/gpu_report.py --notebooks lectures/07_flop_io_accounting.ipynb
    python tools/gpu_report.py --budget 540          # a GPU lent for ten minutes: the report comes back

With --budget, nothing is started once the seconds are spent (the gate then the benchmarks get what is
left), and the report names what did not run.
"""
import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NO_CUDA_EXIT = 3
PEAKS_LINE = re.compile(r"^PEAKS\s+(.*)$", re.M)
FLASH_LINE = re.compile(r"^FLASH\s+(.*)$", re.M)
FLASH_NOTEBOOKS = ("lectures/11_from_tiles_to_a_kernel.ipynb",
                   "solutions/a7_flash_attention_triton/a7_flash_attention_triton.ipynb")


BUDGET_SPENT = "not run: the time budget (--budget) was spent"
MIN_STEP_S = 30          # a step with less time left than this is not started


class NoCuda(Exception):
    """No usable CUDA device; the message says which check failed."""


def check_cuda():
    """(torch module, device name) if a CUDA device can run a small matmul; NoCuda otherwise."""
    try:
        import torch
    except ImportError as error:
        raise NoCuda(f"torch cannot be imported ({error})") from error
    if not torch.cuda.is_available():
        built = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise NoCuda(f"torch.cuda.is_available() is False (torch {torch.__version__}, {built})")
    try:
        x = torch.ones(4, 4, device="cuda")
        if (x @ x).sum().item() != 64.0:
            raise RuntimeError("a 4x4 matmul gave a wrong result")
    except Exception as error:  # e.g. "no kernel image is available" on a too-old GPU
        first = (str(error).strip().splitlines() or [""])[0]
        raise NoCuda(f"a CUDA operation failed ({type(error).__name__}: {first})") from error
    return torch, torch.cuda.get_device_name()


def site_dirs():
    """Directories that hold the packages this run imports (for a --target install: PYTHONPATH)."""
    dirs = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for module in ("ipykernel", "nbclient", "nbformat", "jupyter_client", "traitlets", "zmq"):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec and spec.origin:
            parent = str(Path(spec.origin).resolve().parent.parent)
            if parent not in dirs:
                dirs.append(parent)
    return dirs


def child_env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + site_dirs())
    env.setdefault("MPLBACKEND", "Agg")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra or {})
    return env


def make_kernelspec(folder):
    """A kernelspec for this interpreter (so the kernels import the same torch and the --target
    packages); returns its name. Registered through JUPYTER_PATH, nothing installed for the user."""
    name = "gpu-report-python"
    spec_dir = Path(folder) / "kernels" / name
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python {platform.python_version()} (gpu report)", "language": "python",
        "env": {"PYTHONPATH": os.pathsep.join(site_dirs()), "MPLBACKEND": "Agg"}}, indent=1))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(folder), os.environ.get("JUPYTER_PATH")]))
    return name


def notebook_paths(selected=None):
    if selected:
        return [Path(p).resolve() for p in selected]
    return sorted((REPO / "lectures").glob("[0-9][0-9]_*.ipynb")) + sorted((REPO / "solutions").glob("*/*.ipynb"))


# notebooks whose printed figures are timings (lecture 07's peaks, lecture 08's decode steps, the FlashAttention
# kernels of lecture 11 and a7, a4's CUDA graph): each runs alone, before the others run side by side
TIMED_NOTEBOOKS = ("lectures/07_flop_io_accounting.ipynb", "lectures/08_kv_cache_decoding.ipynb") + FLASH_NOTEBOOKS \
    + ("solutions/a4_kv_cache/a4_kv_cache.ipynb",)


def execute_notebooks(paths, out_dir, cell_timeout, log, jobs=1, deadline=None):
    """Run each notebook in a fresh kernel; one dict per notebook, in the order given: name, ok, seconds, error,
    text (its outputs). The timed ones (TIMED_NOTEBOOKS) run first, one at a time; then the others, `jobs` at
    once (each its own kernel: a GPU machine has the cores, and the GPU the memory). A notebook not started
    by `deadline` (time.monotonic()) is not run: ok False, `skipped` says why."""
    import asyncio

    kernels = Path(tempfile.mkdtemp(prefix="gpu-report-kernels-"))
    kernel_name = make_kernelspec(kernels)
    executed_dir = out_dir / "notebooks"
    executed_dir.mkdir(parents=True, exist_ok=True)
    names = {path: _name(path) for path in paths}
    timed = [path for path in paths if names[path] in TIMED_NOTEBOOKS]
    others = [path for path in paths if names[path] not in TIMED_NOTEBOOKS]

    async def one(path, slots):
        async with slots:
            if deadline is not None and time.monotonic() > deadline:
                log(f"not running {names[path]}: the time budget is spent")
                return {"name": names[path], "ok": False, "seconds": 0.0, "error": None, "text": "",
                        "skipped": BUDGET_SPENT}
            return await _execute_one(path, names[path], executed_dir, kernel_name, cell_timeout, log)

    async def run_all():
        alone = asyncio.Semaphore(1)
        results = {path: await one(path, alone) for path in timed}
        side_by_side = asyncio.Semaphore(max(1, jobs))
        for path, result in zip(others, await asyncio.gather(*(one(path, side_by_side) for path in others))):
            results[path] = result
        return [results[path] for path in paths]

    try:
        return asyncio.run(run_all())
    finally:
        shutil.rmtree(kernels, ignore_errors=True)


def _name(path):
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


async def _execute_one(path, name, executed_dir, kernel_name, cell_timeout, log):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    nb = nbformat.read(str(path), as_version=4)
    workdir = Path(tempfile.mkdtemp(prefix="gpu-report-run-"))   # never the repository
    client = NotebookClient(nb, timeout=cell_timeout, kernel_name=kernel_name, allow_errors=False,
                            resources={"metadata": {"path": str(workdir)}})
    log(f"executing {name} ...")
    started, error = time.perf_counter(), None
    try:
        await client.async_execute()
    except CellExecutionError as exc:   # the error itself, then the start of the cell that raised it
        source = str(exc).split("------------------")[1] if str(exc).count("------------------") >= 2 else ""
        error = f"{exc.ename}: {_first_lines(exc.evalue, 4)}\nin the cell:\n{_first_lines(source, 8)}"
    except CellTimeoutError as exc:
        error = _first_lines(str(exc), 12)
    except Exception as exc:  # noqa: BLE001 - a kernel that died, a missing kernelspec...
        error = f"{type(exc).__name__}: {_first_lines(str(exc), 6)}"
    seconds = time.perf_counter() - started
    nbformat.write(nb, str(executed_dir / (path.stem + ".ipynb")))
    shutil.rmtree(workdir, ignore_errors=True)
    text = "\n".join(_cell_text(cell) for cell in nb.cells if cell.cell_type == "code")
    log(f"  {name}: {'ok' if error is None else 'FAILED'} in {seconds:.1f} s")
    return {"name": name, "ok": error is None, "seconds": seconds, "error": error, "text": text}


def _cell_text(cell):
    parts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            parts.append(output["text"])
        elif "text/plain" in output.get("data", {}):
            parts.append(output["data"]["text/plain"])
    return "".join(parts)


def _first_lines(text, n):
    lines = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines() if line.strip()]
    return "\n".join(lines[:n] + (["..."] if len(lines) > n else []))


def parse_peaks(text):
    """{'fp32': FLOP/s, 'tf32': ..., 'bf16': ..., 'bandwidth': bytes/s} from lecture 07's PEAKS line."""
    match = PEAKS_LINE.search(text or "")
    if not match:
        return None
    peaks = {}
    for item in match.group(1).split():
        key, _, value = item.partition("=")
        try:
            peaks[key] = float(value)
        except ValueError:
            pass
    return peaks or None


def decode_lines(text):
    """Lecture 08's GPU decode timings: its tables (context sweep, width sweep) and summary lines."""
    lines, out, i = (text or "").splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        if (line.lstrip().startswith("T ") and "ms per token" in line) or line.lstrip().startswith("d_model "):
            out.append(line)
            i += 1
            while i < len(lines) and re.match(r"\s*\d", lines[i]):
                out.append(lines[i])
                i += 1
            continue
        if line.startswith(("graph-replayed logits", "static step reads", "T = 128: eager")) and line not in out:
            out.append(line)
        i += 1
    return out


def flash_lines(texts):
    """{notebook: its `FLASH ...` lines}: the TFLOP/s of each attention method and length that lecture 11 and
    a7's reference print on a GPU (none on a CPU, where they skip the timing)."""
    return {name: FLASH_LINE.findall(texts.get(name) or "") for name in FLASH_NOTEBOOKS
            if FLASH_LINE.search(texts.get(name) or "")}


def _text(output):
    """What a timed-out subprocess printed, as text (its bytes, or None)."""
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


def run_command(command, log, timeout, env=None):
    log("running " + " ".join(command))
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=REPO, env=child_env(env), capture_output=True, text=True, timeout=timeout)
        status, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as error:
        status = "timeout"
        output = f"{_text(error.stdout)}{_text(error.stderr)}\n(stopped after {timeout} s)"
    seconds = time.perf_counter() - started
    log(f"  exit {status} in {seconds:.1f} s")
    return {"command": " ".join(command), "status": status, "seconds": seconds, "output": output}


def grading_benchmark_missing():
    """Why the grading benchmark cannot run here, or None."""
    missing = [m for m in ("nbgrader", "nbconvert", "jupyter_server") if importlib.util.find_spec(m) is None]
    if missing:
        return f"{', '.join(missing)} not installed"
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) not installed: the grading sandbox cannot start"
    return None


def _tail(text, n=40):
    lines = (text or "").rstrip().splitlines()
    return "\n".join(lines[-n:])


def write_report(path, info, notebooks, peaks, decode, gate, bench, bench_json, grading, ok, flash=None):
    lines = [f"# GPU report ({'all passed' if ok else 'FAILED'})", "",
             f"Generated {info['date']} by `make gpu-report` (tools/gpu_report.py).", "",
             "| | |", "|---|---|"]
    for key in ("device", "compute capability", "torch", "CUDA (torch build)", "python", "host"):
        lines.append(f"| {key} | {info.get(key, '')} |")
    lines += ["", "## Notebooks (fresh kernel each, top to bottom, on the GPU)", ""]
    if notebooks is None:
        lines.append("skipped")
    elif isinstance(notebooks, str):
        lines.append(f"NOT RUN: {notebooks}")
    else:
        lines += ["| notebook | result | seconds |", "|---|---|---:|"]
        for r in notebooks:
            result = "not run (time budget)" if r.get("skipped") else "ok" if r["ok"] else "FAILED"
            lines.append(f"| {r['name']} | {result} | {r['seconds']:.1f} |")
        lines.append(f"| total | {sum(r['ok'] for r in notebooks)}/{len(notebooks)} ok | "
                     f"{sum(r['seconds'] for r in notebooks):.1f} |")
        for r in notebooks:
            if not r["ok"] and not r.get("skipped"):
                lines += ["", f"**{r['name']}** failed:", "", "```", r["error"] or "", "```"]
    lines += ["", "## Roofline peaks (measured by lecture 07 on this GPU)", ""]
    if peaks:
        bw = peaks.get("bandwidth")
        lines += ["| format | peak TFLOP/s | ridge point (FLOP/byte) |", "|---|---:|---:|"]
        for key in ("fp32", "tf32", "bf16"):
            if key in peaks:
                ridge = f"{peaks[key] / bw:.0f}" if bw else "?"
                lines.append(f"| {key} | {peaks[key] / 1e12:.1f} | {ridge} |")
        if bw:
            lines.append(f"\nmemory bandwidth (copy, read + write): {bw / 1e12:.2f} TB/s")
    else:
        lines.append("not available (lecture 07 did not run, or printed no `PEAKS` line)")
    if decode:
        lines += ["", "## Decode step, eager vs CUDA graph (lecture 08, section 9)", "", "```"] + decode + ["```"]
    lines += ["", "## FlashAttention in Triton, compiled (lecture 11's kernel, a7's reference kernels)", ""]
    if flash:
        for name, found in flash.items():
            lines += [f"`{name}`:", "", "```"] + found + ["```", ""]
    else:
        lines.append("not available (lecture 11 and a7 did not run, or printed no `FLASH` line)")
    lines += ["", "## Decode benchmark (`benchmarks/kv_cache_benchmark.py --device cuda`)", ""]
    if bench is None:
        lines.append("skipped")
    elif isinstance(bench, str):
        lines.append(bench)
    elif bench_json:
        lines += _benchmark_table(bench_json)
        if bench["status"] != 0:
            lines += ["", f"exit status {bench['status']}", "", "```", _tail(bench["output"]), "```"]
    else:
        lines += [f"FAILED (exit status {bench['status']})", "", "```", _tail(bench["output"]), "```"]
    lines += ["", "## Quality gate with tensors on the GPU", ""]
    if gate is None:
        lines.append("skipped")
    elif isinstance(gate, str):
        lines.append(gate)
    else:
        verdict = "passed" if gate["status"] == 0 else "FAILED"
        lines += [f"`{gate['command']}`: {verdict} (exit status {gate['status']}, {gate['seconds']:.0f} s)", "",
                  "```", _tail(gate["output"], 60), "```"]
    lines += ["", "## Grading benchmark", ""]
    if isinstance(grading, str):
        lines.append(f"skipped: {grading}")
    elif grading is None:
        lines.append("skipped")
    else:
        lines += [f"`{grading['command']}`: exit status {grading['status']} ({grading['seconds']:.0f} s)", "",
                  "```", _tail(grading["output"], 30), "```"]
    path.write_text("\n".join(lines) + "\n")


def _benchmark_table(data):
    config, results = data["config"], data["results"]
    lengths = sorted({int(n) for row in results.values() for n in row})
    out = [f"greedy, batch 1, prompt {config['prompt_len']} tokens, vocab {config['vocab']}, d_model "
           f"{config['d_model']}, {config['n_heads']} heads, {config['n_layers']} layers, d_ff {config['d_ff']}, "
           f"float32, median of {config['repetitions']} rounds", "",
           "| system | " + " | ".join(f"{n} new: tok/s" for n in lengths) + " |",
           "|---|" + "---:|" * len(lengths)]
    for name, row in results.items():
        out.append(f"| {name} | " + " | ".join(f"{row[str(n)]['tokens_per_s']:.0f}" for n in lengths) + " |")
    largest = str(max(lengths))
    hf = results.get("hf_gpt2_generate", {}).get(largest, {}).get("tokens_per_s")
    hf_static = results.get("hf_gpt2_static", {}).get(largest, {}).get("tokens_per_s")
    out.append("")
    for name in ("reference_cached", "reference_fast", "reference_static", "reference_graph"):
        mine = results.get(name, {}).get(largest, {}).get("tokens_per_s")
        if mine and (hf or hf_static):
            parts = ([f"{mine / hf:.2f}x HF GPT-2 generate (dynamic cache)"] if hf else []) + \
                    ([f"{mine / hf_static:.2f}x HF GPT-2 with its static cache"] if hf_static else [])
            out.append(f"- {name} at {largest} new tokens: " + ", ".join(parts))
    for name, why in data.get("skipped", {}).items():
        out.append(f"- skipped {name}: {why}")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(REPO / "out" / "gpu"), help="report folder (default out/gpu)")
    parser.add_argument("--notebooks", nargs="*", help="run only these notebooks (default: every lecture and solution)")
    parser.add_argument("--skip-notebooks", action="store_true")
    parser.add_argument("--skip-gate", action="store_true")
    parser.add_argument("--skip-benchmarks", action="store_true")
    parser.add_argument("--cell-timeout", type=int, default=600, help="seconds per notebook cell (default 600)")
    parser.add_argument("--gate-timeout", type=int, default=3600)
    parser.add_argument("--bench-reps", type=int, default=3, help="rounds of the decode benchmark (default 3)")
    parser.add_argument("--jobs", type=int, default=4,
                        help="notebooks run side by side, each in its own kernel, once the timed ones have run "
                             "alone (default 4)")
    parser.add_argument("--budget", type=int, default=None, metavar="SECONDS",
                        help="stop starting work after this many seconds and write the report with what ran "
                             "(a GPU lent for a few minutes); the steps left out are named in it")
    args = parser.parse_args(argv)

    try:
        torch, device_name = check_cuda()
    except NoCuda as error:
        print(f"gpu-report: no usable CUDA device: {error}. The GPU report needs a CUDA GPU; nothing was run.")
        return NO_CUDA_EXIT

    out_dir = Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    log_file = (out_dir / "log.txt").open("w")

    def log(message):
        print(message, flush=True)
        log_file.write(message + "\n")
        log_file.flush()

    capability = ".".join(map(str, torch.cuda.get_device_capability()))
    info = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "device": device_name,
            "compute capability": capability, "torch": torch.__version__, "CUDA (torch build)": torch.version.cuda,
            "python": platform.python_version(), "host": f"{platform.machine()}, {os.cpu_count()} CPU cores"}
    log(f"gpu-report on {device_name} (sm {capability}), torch {torch.__version__}")
    ok = True
    deadline = time.monotonic() + args.budget if args.budget else None

    def time_left(limit):
        """Seconds a step may take: its own limit, or less where the budget ends sooner."""
        return limit if deadline is None else max(0, min(limit, int(deadline - time.monotonic())))

    notebooks = None
    if not args.skip_notebooks:
        try:
            import ipykernel  # noqa: F401 - the kernels need it
            import nbclient  # noqa: F401
            import nbformat  # noqa: F401
        except ImportError as error:
            notebooks = (f"{error.name} is not installed (bash tools/gpu_wheels.sh on a machine with PyPI, then "
                         "pip install --no-deps --target DIR .whl/*.whl and PYTHONPATH=DIR)")
            log("cannot execute notebooks: " + notebooks)
            ok = False
        else:
            notebooks = execute_notebooks(notebook_paths(args.notebooks), out_dir, args.cell_timeout, log,
                                          jobs=args.jobs, deadline=deadline)
            ok &= all(r["ok"] for r in notebooks)
    texts = {r["name"]: r["text"] for r in notebooks} if isinstance(notebooks, list) else {}
    peaks = parse_peaks(texts.get("lectures/07_flop_io_accounting.ipynb"))
    decode = decode_lines(texts.get("lectures/08_kv_cache_decoding.ipynb"))
    flash = flash_lines(texts)
    if isinstance(notebooks, list) and any(name in texts for name in FLASH_NOTEBOOKS) and not flash:
        ok = False
    if isinstance(notebooks, list) and "lectures/07_flop_io_accounting.ipynb" in texts and not peaks:
        ok = False

    # the gate before the benchmarks: what it proves (compiled kernels grade as the interpreter does) matters
    # more than figures measured before, when the budget runs short
    gate = None
    if not args.skip_gate:
        if time_left(args.gate_timeout) < MIN_STEP_S:
            gate, ok = BUDGET_SPENT, False
            log("quality gate not run: " + BUDGET_SPENT)
        else:
            gate = run_command([sys.executable, "-m", "grader", "check", "--device", "cuda", "--skip-release-run"],
                               log, timeout=time_left(args.gate_timeout))
            (out_dir / "gate.txt").write_text(gate["output"])
            ok &= gate["status"] == 0

    bench = bench_json = None
    grading = "--skip-benchmarks" if args.skip_benchmarks else None
    if not args.skip_benchmarks and time_left(3600) < MIN_STEP_S:
        bench = grading = BUDGET_SPENT
        ok = False
        log("benchmarks not run: " + BUDGET_SPENT)
    elif not args.skip_benchmarks:
        json_path = out_dir / "kv_cache_benchmark.json"
        json_path.unlink(missing_ok=True)
        bench = run_command([sys.executable, "benchmarks/kv_cache_benchmark.py", "--device", "cuda",
                             "--reps", str(args.bench_reps), "--out", str(json_path)], log, timeout=time_left(3600))
        (out_dir / "kv_cache_benchmark.txt").write_text(bench["output"])
        bench_json = json.loads(json_path.read_text()) if json_path.exists() else None
        ok &= bench["status"] == 0 and bench_json is not None
        grading = grading_benchmark_missing()
        if grading is None and time_left(3600) < MIN_STEP_S:
            grading, ok = BUDGET_SPENT, False
        elif grading is None:
            grading = run_command([sys.executable, "benchmarks/grading_benchmark.py", "--students", "8",
                                   "--out", str(out_dir / "grading_benchmark.json")], log, timeout=time_left(3600))
            (out_dir / "grading_benchmark.txt").write_text(grading["output"])
            ok &= grading["status"] == 0
        else:
            log("grading benchmark skipped: " + grading)

    report = out_dir / "report.md"
    write_report(report, info, notebooks, peaks, decode, gate, bench, bench_json, grading, ok, flash)
    log(f"wrote {report} ({'all passed' if ok else 'something FAILED'})")
    log_file.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
