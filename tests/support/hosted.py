"""The hosted runtime: an environment holding only what Colab and Kaggle provide -- torch,
matplotlib, numpy, ipykernel, and triton, which their torch brings (lecture 11 and a7 need it) -- with
no repo code importable, each notebook copied alone into an empty folder.

The environment is a venv at .venv-hosted/ (built on first use, under a file lock so that pytest-xdist's
workers build it once; reused while its stamp matches the packages and their versions; delete it to
rebuild). Its packages are those the course's environment already holds, at the versions constraints.txt
pins there: the packages above and every distribution they require (with pip, which every venv has),
each distribution's installed files (its RECORD) linked in, as pip would have unpacked the same wheels.
Where one is missing from the course's environment, pip installs them instead (a minute). Its kernel is
started through a kernelspec in a folder of its own, in isolated mode (`python -I`), so neither
PYTHONPATH nor the repo's .venv leaks in.

Every notebook runs there once, top to bottom. A notebook whose only optional package is tqdm runs
there under nbval (tests/conftest.py): the one execution proves both that it executes and that it needs
nothing beyond the hosted runtime. A notebook with a code path for another optional package
(transformers, ipywidgets, the real encoder) runs twice: under nbval with every package of the course's
environment installed, and in the hosted runtime without them (tests/test_hosted_runtime.py), so both
paths run. (tqdm's path is the course's one progress helper, grader/provided/progress.py, the same in
every notebook: the notebooks that run twice run it with tqdm installed.)
"""
import fcntl
import functools
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
HOSTED = REPO / ".venv-hosted"
HOSTED_PY = HOSTED / "bin" / "python"
PACKAGES = ["torch==2.13.0", "matplotlib", "numpy", "ipykernel", "triton"]   # triton: the version constraints.txt pins
# what those bring (and so a notebook may import there): the packages, IPython with ipykernel, and Python's own
PROVIDED_MODULES = {"torch", "matplotlib", "numpy", "ipykernel", "IPython", "triton"}
NOT_THERE = ["tqdm", "nbgrader", "grader", "pytest", "nbval"]   # proves the env is minimal
KERNEL_NAME = "course-hosted-runtime"
NOTEBOOKS = sorted(REPO.glob("lectures/*.ipynb")) + sorted(REPO.glob("solutions/*/*.ipynb"))


def _stamp(distributions):
    versions = sorted(f"{d.metadata['Name']}=={d.version}" for d in distributions or ())
    text = (REPO / "constraints.txt").read_text() + "\n".join(PACKAGES + versions) + sys.version
    return hashlib.sha256(text.encode()).hexdigest()


def installed_closure(roots):
    """The distributions of this environment that `pip install roots` would install: the roots and,
    recursively, what they require (environment markers evaluated, no extras). None when one of them is
    not installed here, or was installed without a RECORD of its files."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found, todo = {}, [Requirement(root) for root in roots]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        try:
            distribution = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            return None
        if distribution.files is None or not requirement.specifier.contains(distribution.version, prereleases=True):
            return None
        found[name] = distribution
        todo += [r for r in map(Requirement, distribution.requires or [])
                 if r.marker is None or r.marker.evaluate({"extra": ""})]
    return list(found.values())


def _link_in(distributions, site_packages):
    """Each distribution's installed files, hard-linked (copied across file systems) into
    `site_packages`; files installed outside site-packages (console scripts) are left out."""
    import os
    import shutil

    for distribution in distributions:
        for file in distribution.files:
            if file.parts[0] == "..":
                continue
            source, target = Path(distribution.locate_file(file)), site_packages / file
            if not source.is_file():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except FileExistsError:
                pass
            except OSError:
                shutil.copy2(source, target)


@functools.cache
def hosted_python():
    """The hosted runtime's python, built on first use (the first worker builds it while the others wait)."""
    stamp = HOSTED / ".hosted-stamp"
    distributions = installed_closure([*PACKAGES, "pip"])
    with open(REPO / ".venv-hosted.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (HOSTED_PY.exists() and stamp.exists() and stamp.read_text() == _stamp(distributions)):
            base = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([base, "-m", "venv", "--clear", "--without-pip", str(HOSTED)], check=True)
            if distributions is not None:
                [site_packages] = HOSTED.glob("lib/python*/site-packages")
                _link_in(distributions, site_packages)
            else:
                subprocess.run([str(HOSTED_PY), "-m", "ensurepip", "--default-pip"], check=True,
                               capture_output=True)
                subprocess.run([str(HOSTED_PY), "-m", "pip", "install", "--quiet", *PACKAGES,
                                "-c", str(REPO / "constraints.txt")], check=True, cwd=REPO)
            stamp.write_text(_stamp(distributions))
    probe = ("import importlib.util, json, sys\n"
             f"print(json.dumps({{m: importlib.util.find_spec(m) is not None for m in {NOT_THERE!r}}}))")
    found = json.loads(subprocess.run([str(HOSTED_PY), "-I", "-c", probe], check=True,
                                      capture_output=True, text=True, cwd="/").stdout)
    if any(found.values()):
        raise AssertionError(f"the hosted env is not minimal: {found}")
    return HOSTED_PY


def write_kernelspec(folder):
    """A Jupyter data folder in `folder` whose kernels/ holds the hosted runtime's kernelspec, KERNEL_NAME:
    pass `folder / "kernels"` to a KernelSpecManager, or `folder` as JUPYTER_PATH."""
    spec = Path(folder) / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(hosted_python()), "-I", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "hosted runtime (torch + matplotlib + numpy only)",
        "language": "python",
    }))
    return Path(folder)


IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\w+)[\w.]*[ \t]+import\b|import[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*))"
                    r"|\b(?:import_module|find_spec)\([ \t]*[\"'](\w+)", re.MULTILINE)


def imported_modules(path):
    """The top-level modules a notebook's code cells import: import statements (a line of its own, or
    the body of an if, try or else on the line), and importlib.import_module or importlib.util.find_spec
    called with a literal name. Read with a regular expression (nbformat's validation and Python's
    parser took 1 to 4 CPU-s for the course's notebooks, in every pytest process); a line in a string
    that reads like an import only makes a notebook run twice."""
    found = set()
    for cell in json.loads(Path(path).read_text())["cells"]:
        if cell["cell_type"] == "code":
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            text = re.sub(r"^([ \t]*)(?:if\b[^\n:]*|try|else|elif\b[^\n:]*):[ \t]*(?=import|from)", r"\1", text,
                          flags=re.MULTILINE)
            for from_module, modules, by_name in IMPORT.findall(text):
                found |= {from_module or by_name} if from_module or by_name else \
                    {name.strip().split(".")[0] for name in modules.split(",")}
    return found


@functools.cache
def optional_modules(path):
    """What a notebook imports that the hosted runtime lacks, tqdm aside: the optional packages it has a
    code path for (it must run without them there)."""
    return frozenset(imported_modules(path) - PROVIDED_MODULES - set(sys.stdlib_module_names) - {"tqdm"})


def nbval_runs_it_hosted(path):
    """Whether nbval runs this notebook in the hosted runtime (else in the course's environment, and the
    hosted runtime runs it again: tests/test_hosted_runtime.py)."""
    path = Path(path).resolve()
    return path in NOTEBOOKS and not optional_modules(path)


def check_prints_the_device(path, outputs):
    """A notebook's first code cell prints the device it found (`outputs`: that cell's, as nbformat
    or nbval holds them)."""
    import torch

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    printed = "".join(out.get("text", "") if out.get("output_type") == "stream"
                      else out.get("data", {}).get("text/plain", "") for out in outputs)
    assert expected in printed, \
        f"{Path(path).name}: the first code cell should print the device it found; it printed {printed!r}"


def host_nbval_notebook(notebook_file):
    """Make nbval's collector of one notebook (an nbval.plugin.IPyNbFile) start its kernel in the hosted
    runtime, on a copy of the notebook alone in an empty folder, as when uploaded to Colab; its cells run
    and are checked as nbval runs and checks them. Idempotent."""
    if getattr(notebook_file, "hosted_runtime", False):
        return
    import shutil
    import tempfile

    from nbval.kernel import RunningKernel

    from grader.inprocess import environment

    notebook_file.hosted_runtime = True
    original_teardown = notebook_file.teardown
    folder = None

    def setup():
        nonlocal folder
        folder = Path(tempfile.mkdtemp(prefix="hosted-nbval-"))
        write_kernelspec(folder / "jupyter")
        alone = folder / "alone"
        alone.mkdir(exist_ok=True)
        shutil.copy(notebook_file.path, alone / notebook_file.path.name)
        with environment(JUPYTER_PATH=str(folder / "jupyter")):    # where jupyter_client finds KERNEL_NAME
            notebook_file.kernel = RunningKernel(KERNEL_NAME, cwd=str(alone),
                                                 startup_timeout=notebook_file.config.option.nbval_kernel_startup_timeout)
        notebook_file.setup_sanitize_files()

    def teardown():
        try:
            original_teardown()
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)

    notebook_file.setup, notebook_file.teardown = setup, teardown


def check_device_after(cell_item):
    """After nbval runs a notebook's first code cell (an nbval.plugin.IPyNbCell), check that it printed the
    device it found."""
    run = cell_item.runtest

    def runtest():
        run()
        check_prints_the_device(cell_item.path, cell_item.test_outputs or [])
    cell_item.runtest = runtest
