"""`python -m grader gradescope ID`: the zip holds what Gradescope needs (setup.sh installing the pinned
CPU torch, an executable run_autograder, the grader, the course files of that one assignment), and the
autograder, unpacked as Gradescope unpacks it and run with AUTOGRADER_ROOT pointing at a folder here,
writes a results.json that grades as `autograde` does: full marks for the solution, zero for the
release, exactly the failing cells of a catalogued bug with messages free of hidden test source, a clear
message for a broken notebook, never a traceback. Where bubblewrap cannot run and the grader is root (as
in Gradescope's container), the kernel runs as uid 65534 and cannot read the hidden tests."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import nbformat
import pytest

from grader import cells
from grader.gradescope import find_notebook, graded_results
from grader.judging import CellVerdict
from grader.samples import buggy_submission, perfect_submission, release_notebook
from support import COURSE

REPO = Path(__file__).resolve().parent.parent
AID = "a1_self_attention"
SECRET = cells.secret_lines(cells.read(COURSE.source_notebook(AID)))
POINTS = cells.test_points(cells.read(COURSE.source_notebook(AID)))


def build(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "grader", "gradescope", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory):
    path = tmp_path_factory.mktemp("zip") / "autograder.zip"
    result = build(path.parent, AID, "--output", str(path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert str(path) in result.stdout
    return path


def unpack(zip_path, root):
    """The zip into root/source as `unzip` does (modes kept), run_autograder copied to root, as
    Gradescope's image build does."""
    source = root / "source"
    with zipfile.ZipFile(zip_path) as archive:
        for entry in archive.infolist():
            target = source / entry.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(entry))
            target.chmod((entry.external_attr >> 16) & 0o777)
    shutil.copy2(source / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    return root


def run_autograder(zip_path, root, notebook=None, files=None, python=None, path=None, links=None):
    """Gradescope's run for one submission (`notebook` as <ID>.ipynb, or `files` {name: bytes}, or
    `links` {name: what the link points to, relative to the autograder's root}); returns (results.json
    as data, everything run_autograder printed)."""
    unpack(zip_path, root)
    if notebook is not None:
        nbformat.write(notebook, str(root / "submission" / f"{AID}.ipynb"))
    for name, data in (files or {}).items():
        (root / "submission" / name).write_bytes(data)
    for name, target in (links or {}).items():
        os.symlink(Path("..", target), root / "submission" / name)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": python or sys.executable,
           "OMP_NUM_THREADS": "1", **({"PATH": path} if path else {})}
    result = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                            timeout=600)
    printed = result.stdout + result.stderr
    assert result.returncode == 0, f"run_autograder exited {result.returncode}:\n{printed[-3000:]}"
    results_file = root / "results" / "results.json"
    assert results_file.is_file(), f"no results.json:\n{printed[-3000:]}"
    results = json.loads(results_file.read_text())
    assert "Traceback" not in printed and "Traceback" not in results_file.read_text(), printed[-3000:]
    return results, printed


def assert_well_formed(results):
    """Gradescope's results.json: a score that is the sum of the tests' scores, one test per test cell."""
    assert isinstance(results["score"], float) and isinstance(results["output"], str)
    assert [t["name"] for t in results["tests"]] == list(POINTS)
    for test in results["tests"]:
        assert test["max_score"] == POINTS[test["name"]]
        assert 0 <= test["score"] <= test["max_score"]
        assert test["visibility"] in ("visible", "after_published")
    assert results["score"] == sum(t["score"] for t in results["tests"])


def assert_no_hidden_source(results):
    text = json.dumps(results)
    leaked = [line for line in SECRET if line in text]
    assert not leaked, f"hidden test source in results.json: {leaked[:3]}"


# ---- the zip ----

def test_the_zip_holds_the_scripts_the_grader_and_this_assignments_course_files(autograder_zip):
    entries = {e.filename: e for e in zipfile.ZipFile(autograder_zip).infolist()}
    for name in ("setup.sh", "run_autograder", "requirements.txt", "constraints.txt", "nbgrader_config.py",
                 "grader/cli.py", "grader/pipeline.py", "grader/gradescope.py", "grader/runtime/as_kernel_user.py",
                 "grader/runtime/record.py", "grader/provided/checks.py", f"solutions/{AID}/{AID}.ipynb",
                 f"assignments/{AID}/{AID}.ipynb"):
        assert name in entries, f"the autograder lacks {name}"
    for script in ("setup.sh", "run_autograder"):
        assert (entries[script].external_attr >> 16) & 0o111, f"{script} is not executable in the zip"
        assert zipfile.ZipFile(autograder_zip).read(script).startswith(b"#!/usr/bin/env bash\n")
    others = [n for n in entries if n.startswith(("solutions/", "assignments/")) and AID not in n]
    assert not others, f"other assignments' files in the zip: {others[:3]}"
    assert not [n for n in entries if "__pycache__" in n or n.startswith(("mutants/", "tests/", "course/"))]


def test_the_same_course_gives_the_same_zip(autograder_zip, tmp_path):
    again = build(tmp_path, AID, "--output", str(tmp_path / "again.zip"))
    assert again.returncode == 0, again.stderr[-2000:]
    assert (tmp_path / "again.zip").read_bytes() == autograder_zip.read_bytes()


def test_setup_installs_the_pinned_torch_from_the_cpu_index_before_the_requirements(autograder_zip, tmp_path):
    setup = zipfile.ZipFile(autograder_zip).read("setup.sh").decode()
    torch_line = "pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0"
    assert torch_line in setup
    requirements_line = 'pip install -r "$SOURCE/requirements.txt" -c "$SOURCE/constraints.txt"'
    assert setup.index(torch_line) < setup.index(requirements_line)
    assert "python3.11 -m venv" in setup and "bubblewrap" in setup
    assert "torch==2.13.0" in zipfile.ZipFile(autograder_zip).read("constraints.txt").decode()
    for script in ("setup.sh", "run_autograder"):     # both parse as bash (neither is run here)
        (tmp_path / script).write_bytes(zipfile.ZipFile(autograder_zip).read(script))
        checked = subprocess.run(["bash", "-n", str(tmp_path / script)], capture_output=True, text=True)
        assert checked.returncode == 0, f"{script}: {checked.stderr}"


def test_bad_input_is_a_clear_message(tmp_path):
    unknown = build(tmp_path, "a9_nothing", "--output", str(tmp_path / "x.zip"))
    assert unknown.returncode != 0 and "unknown assignment" in unknown.stderr and AID in unknown.stderr
    missing = build(tmp_path, AID, "--output", str(tmp_path / "no" / "such" / "x.zip"))
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    folder = build(tmp_path, AID, "--output", str(tmp_path))
    assert folder.returncode != 0 and "is a folder" in folder.stderr
    for result in (unknown, missing, folder):
        assert "Traceback" not in result.stderr
    assert not list(tmp_path.rglob("*.zip*"))
    helped = build(tmp_path, "--help")
    assert "gradescope" in helped.stdout
    verb = subprocess.run([sys.executable, "-m", "grader", "gradescope", "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert "setup.sh" in verb.stdout and "results.json" in verb.stdout and "solutions/ID/" in verb.stdout


def test_which_notebook_is_graded(tmp_path):
    assert find_notebook(tmp_path, AID)[0] is None and "No notebook" in find_notebook(tmp_path, AID)[1]
    (tmp_path / "answers.py").write_text("x = 1")
    assert "found answers.py" in find_notebook(tmp_path, AID)[1]
    (tmp_path / "mine.ipynb").write_text("{}")
    assert find_notebook(tmp_path, AID) == (tmp_path / "mine.ipynb", None)      # the only one
    (tmp_path / "other.ipynb").write_text("{}")
    path, problem = find_notebook(tmp_path, AID)
    assert path is None and f"none named {AID}.ipynb" in problem and "mine.ipynb" in problem
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / f"{AID}.ipynb").write_text("{}")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / f"{AID}-checkpoint.ipynb").write_text("{}")
    assert find_notebook(tmp_path, AID) == (tmp_path / "sub" / f"{AID}.ipynb", None)   # <ID>.ipynb preferred


def test_results_are_one_test_per_cell_with_the_judges_message():
    verdicts = [CellVerdict(gid, gid != "test_sdpa_masks", "" if gid != "test_sdpa_masks" else "rows: wrong", 3, 3)
                for gid in POINTS]
    hidden = {"test_sdpa_masks"}
    results = graded_results(AID, POINTS, hidden, verdicts, ["a note"])
    assert_well_formed(results)
    masks = next(t for t in results["tests"] if t["name"] == "test_sdpa_masks")
    assert masks["score"] == 0 and masks["output"] == "failed: rows: wrong" and masks["visibility"] == "after_published"
    assert results["score"] == sum(POINTS.values()) - POINTS["test_sdpa_masks"]
    assert {t["visibility"] for t in results["tests"] if t["name"] != "test_sdpa_masks"} == {"visible"}
    assert "Note: a note" in results["output"]


# ---- the autograder, run end to end ----

@pytest.mark.kernel
def test_the_solution_gets_full_marks(autograder_zip, tmp_path):
    results, printed = run_autograder(autograder_zip, tmp_path / "autograder", perfect_submission(COURSE, AID))
    assert_well_formed(results)
    assert results["score"] == sum(POINTS.values()), results
    assert all(t["output"].startswith("passed") for t in results["tests"])
    assert "isolation:" in printed      # the instructor sees how student code was kept from the grader
    assert (tmp_path / "autograder" / "source" / "solutions").stat().st_mode & 0o077 == 0


@pytest.mark.kernel
def test_the_untouched_release_scores_zero(autograder_zip, tmp_path):
    results, _ = run_autograder(autograder_zip, tmp_path / "autograder", release_notebook(COURSE, AID))
    assert_well_formed(results)
    assert results["score"] == 0
    assert all("NotImplementedError" in t["output"] for t in results["tests"] if t["name"].startswith("test_sdpa_"))


@pytest.mark.kernel
def test_a_bug_loses_exactly_its_cells_and_shows_no_hidden_source(autograder_zip, tmp_path):
    nb, mutant = buggy_submission(COURSE, AID, "sin_cos_swapped")
    results, _ = run_autograder(autograder_zip, tmp_path / "autograder", nb)
    assert_well_formed(results)
    failed = {t["name"] for t in results["tests"] if t["score"] < t["max_score"]}
    assert failed == set(mutant.fails)
    assert results["score"] == sum(POINTS.values()) - sum(POINTS[g] for g in mutant.fails)
    for test in results["tests"]:
        if test["name"] in failed:
            assert test["output"].startswith("failed: ") and len(test["output"]) > len("failed: ") + 10
    assert_no_hidden_source(results)


@pytest.mark.kernel
@pytest.mark.parametrize("case, data, expected", [
    ("invalid JSON", b'{"cells": [', "not a readable notebook"),
    ("not a notebook", b'{"hello": "world"}', "not a readable notebook"),
    ("a notebook of another assignment", nbformat.writes(nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("x = 1")])).encode(), "not a a1_self_attention notebook"),
])
def test_a_broken_notebook_scores_zero_with_a_clear_message(autograder_zip, tmp_path, case, data, expected):
    results, _ = run_autograder(autograder_zip, tmp_path / "autograder", files={f"{AID}.ipynb": data})
    assert_well_formed(results)
    assert results["score"] == 0 and expected in results["output"], (case, results["output"])
    assert "could not be graded" in results["output"]


def test_a_link_to_the_answer_key_scores_zero_and_says_why(autograder_zip, tmp_path):
    """A submission that is a link to ../source/solutions/<id>/<id>.ipynb (the key the autograder
    carries): never read, whatever it points to."""
    key = f"source/solutions/{AID}/{AID}.ipynb"
    results, _ = run_autograder(autograder_zip, tmp_path, links={f"{AID}.ipynb": key})
    assert_well_formed(results)
    assert results["score"] == 0.0
    assert f"{AID}.ipynb is a link to a file outside the submission" in results["output"]
    assert_no_hidden_source(results)


def test_no_notebook_at_all_scores_zero_with_a_clear_message(autograder_zip, tmp_path):
    results, _ = run_autograder(autograder_zip, tmp_path / "autograder", files={"answers.py": b"x = 1"})
    assert results["score"] == 0 and "No notebook in your submission" in results["output"]
    assert f"{AID}.ipynb" in results["output"] and "answers.py" in results["output"]


@pytest.mark.kernel
def test_a_kernel_that_dies_loses_the_tests_it_did_not_reach(autograder_zip, tmp_path):
    nb = perfect_submission(COURSE, AID)
    cell = next(c for c in nb.cells if "sinusoidal_positional_encoding" in (cells.defined_names(c.source) or ())
                and cells.is_answer_cell(c))
    cell.source += "\nimport os\nos._exit(1)\n"
    results, _ = run_autograder(autograder_zip, tmp_path / "autograder", nb)
    assert_well_formed(results)
    passed = {t["name"] for t in results["tests"] if t["score"] == t["max_score"]}
    assert "test_sdpa_worked_example" in passed and "test_sinusoidal_encoding" not in passed
    assert 0 < results["score"] < sum(POINTS.values())


def test_a_grader_that_cannot_start_still_writes_results(autograder_zip, tmp_path):
    results, printed = run_autograder(autograder_zip, tmp_path / "autograder", perfect_submission(COURSE, AID),
                                      python=str(tmp_path / "no-python"))
    assert results["score"] == 0 and "could not start" in results["output"]
    assert "exited with status" in printed


# ---- what student code can reach ----

def probing_submission(root):
    """The solution, except that scaled_dot_product_attention raises with what the kernel could do: its
    uid, reading the hidden tests, writing the results."""
    nb = perfect_submission(COURSE, AID)
    cell = next(c for c in nb.cells if "scaled_dot_product_attention" in (cells.defined_names(c.source) or ())
                and cells.is_answer_cell(c))
    solution = root / "source" / "solutions" / AID / f"{AID}.ipynb"
    cell.source += f"""
import os as _os
def _try(path, mode):
    try:
        with open(path, mode) as handle:
            handle.write("0") if mode == "w" else handle.read(1)
        return "DONE"
    except OSError as error:
        return type(error).__name__
_PROBE = f"uid={{_os.getuid()}} read-solution={{_try({str(solution)!r}, 'r')}} " \\
         f"write-results={{_try({str(root / 'results' / 'mine.json')!r}, 'w')}}"
def scaled_dot_product_attention(q, k, v, mask=None):
    raise RuntimeError("PROBE " + _PROBE)
"""
    return nb


def probe_said(results):
    said = [t["output"] for t in results["tests"] if "PROBE" in t["output"]]
    assert said, f"the probe did not report: {results}"
    return said[0]


def open_folder():
    """A folder every user may pass through, so that only the autograder's own permissions keep the
    kernel's user out (pytest's tmp_path is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="gradescope-test-", dir="/tmp"))
    folder.chmod(0o755)
    return folder


@pytest.mark.kernel
@pytest.mark.sandbox
def test_in_the_sandbox_student_code_reaches_neither_the_hidden_tests_nor_the_results(autograder_zip):
    folder = open_folder()
    try:
        root = folder / "autograder"
        results, printed = run_autograder(autograder_zip, root, probing_submission(root))
        said = probe_said(results)
        assert "isolation: sandbox" in printed
        assert "read-solution=DONE" not in said and "write-results=DONE" not in said, said
        assert not (root / "results" / "mine.json").exists()
    finally:
        shutil.rmtree(folder)


def kernel_user_python(folder):
    """A Python that uid 65534 can run with this environment's packages: this one, or else a virtual
    environment of the system's python3.X (the same X) reading this environment's site-packages. None
    (with the reason) where there is none."""
    from grader.gradescope import kernel_user_argv

    def runs(python):       # started as the autograder starts a kernel
        top = Path(tempfile.mkdtemp(dir=folder))
        (top / "kernel").mkdir()
        command = kernel_user_argv(top, [python, "-c", "import torch, ipykernel, nbgrader"])
        return subprocess.run(command, cwd=top / "kernel", capture_output=True, timeout=120).returncode == 0
    if os.geteuid() != 0:
        return None, "needs root (as in Gradescope's container)"
    if runs(sys.executable):
        return sys.executable, None
    system = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin:/usr/local/bin")
    if system is None:
        return None, f"uid 65534 cannot run {sys.executable}, and there is no system python to stand in"
    venv = folder / "venv"
    made = subprocess.run([system, "-m", "venv", "--without-pip", str(venv)], capture_output=True, timeout=120)
    if made.returncode != 0:
        return None, f"uid 65534 cannot run {sys.executable}, and {system} makes no venv"
    import site
    [site_dir] = venv.glob("lib/python*/site-packages")
    (site_dir / "course.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    python = str(venv / "bin" / "python")
    return (python, None) if runs(python) else (None, f"uid 65534 cannot run {sys.executable} or a stand-in")


def path_without_bwrap(folder):
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for directory in [str(Path(sys.executable).parent)] + os.environ.get("PATH", "").split(os.pathsep):
        if directory and Path(directory).is_dir():
            for program in Path(directory).iterdir():
                # lexists: a dangling link in PATH (an alternative whose program was removed) is linked once too
                if program.name != "bwrap" and not os.path.lexists(bin_dir / program.name):
                    (bin_dir / program.name).symlink_to(program)
    return str(bin_dir)


@pytest.mark.kernel
def test_without_bubblewrap_a_root_grader_runs_the_kernel_as_nobody(autograder_zip):
    """Gradescope's container: root, and no namespaces for bubblewrap (here: no bwrap on PATH). The kernel
    runs as uid 65534: the hidden tests (readable by anyone before run_autograder) and the results folder
    are out of its reach, and the solution still gets full marks."""
    folder = open_folder()
    try:
        python, why = kernel_user_python(folder)
        if python is None:
            pytest.skip(why)
        path = path_without_bwrap(folder)
        root = folder / "probe" / "autograder"
        root.parent.mkdir()
        zipped_solution = zipfile.ZipFile(autograder_zip).getinfo(f"solutions/{AID}/{AID}.ipynb")
        assert (zipped_solution.external_attr >> 16) & 0o004, "the zip's files are meant to be world-readable here"
        results, printed = run_autograder(autograder_zip, root, probing_submission(root), python=python, path=path)
        assert "isolation: kernel user" in printed, printed[-2000:]
        said = probe_said(results)
        assert "uid=65534" in said and "read-solution=PermissionError" in said \
            and "write-results=PermissionError" in said, said
        perfect_root = folder / "perfect" / "autograder"
        perfect_root.parent.mkdir()
        results, _ = run_autograder(autograder_zip, perfect_root, perfect_submission(COURSE, AID), python=python,
                                    path=path)
        assert results["score"] == sum(POINTS.values()), results["output"]
    finally:
        shutil.rmtree(folder)


def test_the_kernel_user_launcher_drops_to_nobody_and_leaves_roots_files_unread(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (as in Gradescope's container)")
    folder = open_folder()
    try:
        top = folder / "top"                  # as the grader makes it: root's alone (umask 077)
        (top / "work" / "kernel").mkdir(parents=True)
        for path in (top, top / "work"):
            path.chmod(0o700)
        secret = top / "work" / "secret.txt"
        secret.write_text("hidden")
        secret.chmod(0o600)
        from grader.gradescope import kernel_user_argv
        command = ["/bin/sh", "-c", f"id -u; cat {secret} || echo denied; ls {top} || echo unlisted; touch x"]
        result = subprocess.run(kernel_user_argv(top, command), cwd=top / "work" / "kernel", capture_output=True,
                                text=True, timeout=60)
        lines = result.stdout.split()
        assert lines[0] == "65534" and "hidden" not in result.stdout, result
        assert "denied" in lines and "unlisted" in lines, result
        assert (top / "work" / "kernel" / "x").stat().st_uid == 65534       # its working copy is its own
        assert (top / "work").stat().st_mode & 0o777 == 0o701                # passable, not listable
    finally:
        shutil.rmtree(folder)
