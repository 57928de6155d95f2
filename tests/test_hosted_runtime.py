"""Hosted-runtime fidelity: every lecture and every solution notebook runs top
to bottom in an environment holding only what Colab and Kaggle provide -- torch, matplotlib,
numpy, ipykernel, and triton, which their torch brings (lecture 11 and a7 need it) -- with no
repo code importable, each notebook copied alone into an empty folder. Each notebook's first
markdown cell says how to open it in Colab and Kaggle, and its first code cell prints the device it
found.

The environment is a venv at .venv-hosted/ (built on first use, reused while its stamp matches
constraints.txt and the package list; delete it to rebuild). Its kernel is started through a
kernelspec in a temporary folder, in isolated mode (`python -I`), so neither PYTHONPATH nor the
repo's .venv leaks in.
"""
import fcntl
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from support.spread import class_each

pytestmark = pytest.mark.hosted

REPO = Path(__file__).resolve().parent.parent
HOSTED = REPO / ".venv-hosted"
HOSTED_PY = HOSTED / "bin" / "python"
PACKAGES = ["torch==2.13.0", "matplotlib", "numpy", "ipykernel", "triton"]   # triton: the version constraints.txt pins
NOT_THERE = ["tqdm", "nbgrader", "grader", "pytest", "nbval"]   # proves the env is minimal
CELL_TIMEOUT_S = 120
NOTEBOOKS = sorted(REPO.glob("lectures/*.ipynb")) + sorted(REPO.glob("solutions/*/*.ipynb"))


def _stamp():
    text = (REPO / "constraints.txt").read_text() + "\n".join(PACKAGES) + sys.version
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="session")
def hosted_python():
    stamp = HOSTED / ".hosted-stamp"
    # each pytest-xdist worker asks; the first builds the venv while the others wait on the lock
    with open(REPO / ".venv-hosted.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (HOSTED_PY.exists() and stamp.exists() and stamp.read_text() == _stamp()):
            base = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([base, "-m", "venv", "--clear", str(HOSTED)], check=True)
            subprocess.run([str(HOSTED_PY), "-m", "pip", "install", "--quiet", *PACKAGES,
                            "-c", str(REPO / "constraints.txt")], check=True, cwd=REPO)
            stamp.write_text(_stamp())
    probe = ("import importlib.util, json, sys\n"
             f"print(json.dumps({{m: importlib.util.find_spec(m) is not None for m in {NOT_THERE!r}}}))")
    found = json.loads(subprocess.run([str(HOSTED_PY), "-I", "-c", probe], check=True,
                                      capture_output=True, text=True, cwd="/").stdout)
    assert not any(found.values()), f"the hosted env is not minimal: {found}"
    return HOSTED_PY


@pytest.fixture(scope="session")
def kernel_dir(hosted_python, tmp_path_factory):
    kernels = tmp_path_factory.mktemp("kernels")
    spec = kernels / "hosted"
    spec.mkdir()
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(hosted_python), "-I", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "hosted runtime (torch + matplotlib + numpy only)",
        "language": "python",
    }))
    return kernels


def _expected_device():
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def _text(outputs):
    parts = []
    for out in outputs:
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif "data" in out:
            parts.append(out["data"].get("text/plain", ""))
    return "".join(parts)


def notebook_runs_in_hosted_runtime(path, kernel_dir, tmp_path):
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    first_md = next(c for c in nb.cells if c.cell_type == "markdown")
    assert "colab" in first_md.source.lower() and "kaggle" in first_md.source.lower(), \
        f"{path.name}: the first markdown cell should say how to open it in Colab and Kaggle"

    work = tmp_path / "alone"          # the notebook alone, as when uploaded to Colab
    work.mkdir()
    km = KernelManager(kernel_name="hosted",
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)]))
    client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT_S, allow_errors=True,
                            resources={"metadata": {"path": str(work)}})
    t0 = time.monotonic()
    try:
        client.execute()
    finally:            # the client does not own a kernel manager it was given
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    elapsed = time.monotonic() - t0

    errors = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                errors.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}\n"
                              f"{cell.source[:300]}")
    assert not errors, f"{path.name} failed in the hosted runtime:\n" + "\n\n".join(errors)

    first_code = next(c for c in nb.cells if c.cell_type == "code")
    printed = _text(first_code.outputs)
    assert _expected_device() in printed, \
        f"{path.name}: the first code cell should print the device it found; it printed {printed!r}"
    print(f"{path.relative_to(REPO)}: {elapsed:.1f}s")


def _hosted_test(path):
    def test_notebook_runs_in_hosted_runtime(self, kernel_dir, tmp_path):
        notebook_runs_in_hosted_runtime(path, kernel_dir, tmp_path)
    return test_notebook_runs_in_hosted_runtime


class_each(globals(), NOTEBOOKS, lambda path: "TestHosted_" + "_".join(path.relative_to(REPO).with_suffix("").parts),
           _hosted_test)
