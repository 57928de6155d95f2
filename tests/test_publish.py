"""`python -m grader publish DEST`: the student repository has the lectures, the
released assignments, a student README, the student environment and the LICENSE, and nothing of the
answer key: no solution region, no hidden-test line, no mutant or alternative, no grader.

The leak checks here are written independently of grader/publish.py (they read solutions/,
mutants/ and alternatives/ themselves), and each has a positive control: run on the instructor's
own files, it finds what it looks for.

What counts as a leak:
  - a solution region (between ### BEGIN/END SOLUTION in solutions/) of two or more code lines and
    60+ characters, its code lines in order in one cell or file (comments and blank lines aside).
    One-line answers are idioms that lectures teach too (`return 2 * m * k * n`), not a key. The
    one allowed case: a later assignment's provided cell (grader/provided/) holding an earlier
    assignment's answer, as a3 and a4 give a2's model -- and then `publish` must have said so.
  - a hidden-test line: any line only the hidden regions of the course have (26+ characters, in no
    visible cell of any source notebook or lecture), anywhere; and in an assignment's own release,
    any line only its hidden tests have.
  - a mutant or alternative: the body of any catalogued function or class, or the decorator.
"""
import ast
import contextlib
import functools
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from grader import labs
from grader.cells import read as cells_of
from grader.labs import lab_bugs
from grader.publish import PublishError, publish, student_readme, syllabus_table
from support import ASSIGNMENT_IDS, COURSE, LAB_IDS

REPO = Path(__file__).resolve().parent.parent
ALL = ASSIGNMENT_IDS
LAB_OF = {lab: labs.debugged_assignment(COURSE, lab) for lab in LAB_IDS}


def _lab_of_file(name):
    """The debugging lab a published file belongs to, or None."""
    parts = name.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "assignments" and parts[1] in LAB_IDS else None


@functools.lru_cache(maxsize=None)
def planted_lines(lab):
    """The stripped lines of a lab's colleague's code (its release's answer cells)."""
    given = labs.plant_bugs(COURSE, lab, cells_of(COURSE.source_notebook(lab)))
    answers = [c for c in given.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]
    return {line.strip() for c in answers for line in c.source.splitlines()}


EXPECTED_TOP = {".git", ".gitignore", ".course-publish.json", "README.md", "LICENSE", "environment.yml",
                "requirements.txt", "lectures", "assignments", "docs"}
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)


# ---- what the instructor's files hold (read here, not through grader.publish) ----

def code_lines(text):
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def cells(path):
    return json.loads(Path(path).read_text())["cells"]


def source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


@functools.lru_cache(maxsize=None)
def reference_code(assignment):
    """The code lines of each of an assignment's reference answer cells (a lab gives its code)."""
    return [code_lines(source(cell)) for cell in cells(REPO / "solutions" / assignment / f"{assignment}.ipynb")
            if SOLUTION.search(source(cell))]


def solution_regions():
    """(assignment, code lines) of every non-trivial solution region."""
    regions = []
    for aid in ALL:
        for cell in cells(REPO / "solutions" / aid / f"{aid}.ipynb"):
            for match in SOLUTION.finditer(source(cell)):
                lines = code_lines(match.group(1))
                if len(lines) >= 2 and sum(map(len, lines)) >= 60:
                    regions.append((aid, lines))
    return regions


def hidden_only(notebooks):
    """Lines (26+ characters) inside hidden-test regions and in no visible part of `notebooks`."""
    hidden, visible = set(), set()
    for path in notebooks:
        for cell in cells(path):
            text = source(cell)
            inside = {line.strip() for m in HIDDEN.finditer(text) for line in m.group(1).splitlines()}
            hidden |= inside
            visible |= {line.strip() for line in HIDDEN.sub("", text).splitlines()}
    return {line for line in hidden - visible if len(line) >= 26}


def catalogue_entries(folder, decorator):
    """(file, name, body lines) of every function or class decorated @decorator(...) in folder/*.py."""
    entries = []
    for path in sorted((REPO / folder).glob("*.py")):
        text = path.read_text()
        for node in ast.parse(text).body:
            decorated = [d for d in getattr(node, "decorator_list", [])
                         if isinstance(d, ast.Call) and getattr(d.func, "id", None) == decorator]
            if decorated:
                # whole lines from the def/class line (decorators are above it), without that line:
                # it names the entry, so it would never match a copy under another name
                body = code_lines("\n".join(text.splitlines()[node.lineno:node.end_lineno]))
                entries.append((f"{folder}/{path.name}", node.name, body))
    return entries


# ---- what a folder holds ----

def text_files(folder):
    """{relative path: code lines} of every text file, cell by cell for notebooks (outputs too)."""
    found = {}
    for path in sorted(Path(folder).rglob("*")):
        if not path.is_file() or ".git" in path.relative_to(folder).parts:
            continue
        if path.suffix == ".ipynb":
            lines = []
            for cell in cells(path):
                lines += code_lines(source(cell)) + ["\0"]
                for output in cell.get("outputs", []):
                    text = output.get("text") or output.get("data", {}).get("text/plain", "")
                    lines += code_lines("".join(text) if isinstance(text, list) else text) + ["\0"]
            found[str(path.relative_to(folder))] = lines
        else:
            try:
                found[str(path.relative_to(folder))] = code_lines(path.read_text())
            except UnicodeDecodeError:
                continue   # images
    return found


def contains(lines, block):
    return ("\n" + "\n".join(block) + "\n") in ("\n" + "\n".join(lines) + "\n")


def solution_leaks(folder):
    """(file, assignment, first line) of every solution region found in a file of `folder`."""
    return [(name, aid, block[0]) for name, lines in text_files(folder).items()
            for aid, block in solution_regions() if contains(lines, block)]


def provided_copies(folder, name, block):
    """Whether `block` is in `name` (a published release) only inside cells the course provides."""
    if not name.startswith("assignments/"):
        return False
    for cell in cells(Path(folder) / name):
        if contains(code_lines(source(cell)), block):
            if not cell.get("metadata", {}).get("course", {}).get("provided"):
                return False
    return True


# ---- the published course ----

@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """Every released assignment published, and what publish printed."""
    dest = tmp_path_factory.mktemp("public") / "attention-course"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        publish(COURSE, dest)
    return dest, printed.getvalue()


def test_published_course_has_what_students_need(published):
    dest, _ = published
    top = {p.name for p in dest.iterdir()}
    assert top <= EXPECTED_TOP, f"unexpected in the student repository: {sorted(top - EXPECTED_TOP)}"
    for name in ("README.md", "LICENSE", "environment.yml", "requirements.txt"):
        assert (dest / name).is_file(), f"the student repository has no {name}"
    lectures = sorted(p.name for p in (REPO / "lectures").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(p.name for p in (dest / "lectures").iterdir()) == lectures
    for name in lectures:
        assert (dest / "lectures" / name).read_bytes() == (REPO / "lectures" / name).read_bytes(), name
    for aid in ALL:
        release = f"assignments/{aid}/{aid}.ipynb"
        assert (dest / release).read_bytes() == (REPO / release).read_bytes(), \
            f"{release} is not the release `python -m grader release` made"
    requirements = (dest / "requirements.txt").read_text()
    assert "torch==" in requirements and "jupyterlab==" in requirements, requirements
    for tool in ("nbgrader", "dask", "distributed", "psycopg2", "playwright"):
        assert tool not in requirements, f"students would install {tool}"
    assert "-r requirements.txt" in (dest / "environment.yml").read_text()


def test_student_readme_links_resolve_and_say_how_to_submit(published):
    dest, _ = published
    readme = (dest / "README.md").read_text()
    for heading in ("## Syllabus", "## Getting started", "## Submitting", "## How you are graded"):
        assert heading in readme, f"the student README has no {heading!r}"
    assert "{{" not in readme, "a template placeholder was left in the student README"
    for target in re.findall(r"\]\(((?!https?://)[^)#]+)\)", readme) + re.findall(r'src="([^"]+)"', readme):
        assert (dest / target).exists(), f"the student README links to {target}, which is not published"
    colab = re.findall(r"https://colab\.research\.google\.com/github/[\w.-]+/[\w.-]+/blob/main/([^)\s]+)", readme)
    assert len(colab) >= 9 + len(ALL), f"expected a Colab link per lecture and assignment, found {len(colab)}"
    for target in colab:
        assert (dest / target).exists(), f"a Colab link points at {target}, which is not published"


def test_student_repository_is_one_clean_commit(published):
    dest, output = published
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    log = subprocess.run(["git", "-C", str(dest), "log", "--oneline"], capture_output=True, text=True).stdout
    assert len(log.splitlines()) == 1, log
    status = subprocess.run(["git", "-C", str(dest), "status", "--porcelain"], capture_output=True, text=True).stdout
    assert status == "", f"files left out of the commit: {status}"
    assert "committed" in output, output


def test_nothing_of_the_instructor_side(published):
    dest, _ = published
    files = [p.relative_to(dest) for p in dest.rglob("*") if p.is_file() and ".git" not in p.relative_to(dest).parts]
    private = ("solutions", "mutants", "alternatives", "grader", "tests", ".ci", "tools", "benchmarks", "course",
               "deploy", "out")
    assert not [f for f in files if f.parts[0] in private], [f for f in files if f.parts[0] in private]
    assert not [f for f in files if f.suffix in (".py", ".db", ".sqlite")], \
        "Python sources or a gradebook in the student repository"
    assert not [f for f in files if f.name in ("nbgrader_config.py", "Makefile", "pyproject.toml", "instructors.md")]


def test_no_solution_region(published):
    dest, output = published
    # positive control: the detector finds every region in the instructor's own solutions
    regions = solution_regions()
    assert len(regions) > 30, "expected the solutions to hold many non-trivial regions"
    found_in_solutions = {(aid, first) for _, aid, first in solution_leaks(REPO / "solutions")}
    assert found_in_solutions == {(aid, block[0]) for aid, block in regions}, "the detector misses regions"
    # the student repository
    for name, aid, first in solution_leaks(dest):
        block = next(b for a, b in regions if a == aid and b[0] == first)
        later = name.split("/")[1] if name.startswith("assignments/") else None
        assert later and later != aid and (LAB_OF.get(later) == aid or provided_copies(dest, name, block)), \
            f"{name} holds {aid}'s solution ({first!r} ...)"
        assert f"{later} gives {aid}'s answers" in output, \
            f"{name} holds {aid}'s answer as provided code, and publish did not say so:\n{output}"


def test_first_assignment_alone_carries_no_answer_at_all(tmp_path):
    """Published at the start of a term (lectures and a1), no solution block of any assignment is
    in it, provided or not."""
    dest = tmp_path / "week1"
    publish(COURSE, dest, assignments=[ALL[0]], commit=False)
    assert sorted(p.name for p in (dest / "assignments").iterdir()) == [ALL[0]]
    assert solution_leaks(dest) == []


def test_no_hidden_test_text(published):
    dest, _ = published
    sources = [REPO / "solutions" / aid / f"{aid}.ipynb" for aid in ALL]
    course_secrets = hidden_only(sources + sorted((REPO / "lectures").glob("*.ipynb")))
    assert len(course_secrets) > 50, "expected many hidden-only lines in the sources"
    # positive control
    solution_text = {line.strip() for path in sources for cell in cells(path) for line in source(cell).splitlines()}
    assert course_secrets <= solution_text
    files = text_files(dest)
    for name, lines in files.items():
        raw = (dest / name).read_text(errors="ignore")
        if (lab := _lab_of_file(name)) is not None:   # its colleague's code is given: the planted mutants' lines
            lines = set(lines) - planted_lines(lab)
            given = planted_lines(lab)
            raw = "\n".join(line for line in raw.splitlines() if line.strip() not in given)
        for marker in ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "BEGIN SOLUTION", "END SOLUTION",
                       "BEGIN MARK SCHEME", "### BEGIN FIX", "### PLANTED"):   # a debugging lab's answer key
            assert marker not in raw, f"{name} carries the nbgrader marker {marker!r}"
        shown = {line.strip() for line in raw.splitlines()} | set(lines)
        leaked = sorted(course_secrets & shown)
        assert not leaked, f"{name} carries hidden-test lines: {leaked[:3]}"
    for aid in LAB_IDS:
        own = labs.secret_lines(COURSE, aid)
        assert not own & set(files[f"assignments/{aid}/{aid}.ipynb"]), f"{aid}'s release carries its hidden-test lines"
    for aid, path in zip(ALL, sources):
        own = hidden_only([path])
        shown = {line for line in files[f"assignments/{aid}/{aid}.ipynb"]}
        assert not own & shown, f"{aid}'s release carries its own hidden-test lines: {sorted(own & shown)[:3]}"


def test_no_mutant_or_alternative_text(published):
    dest, _ = published
    entries = catalogue_entries("mutants", "mutant") + catalogue_entries("alternatives", "alternative")
    assert len(entries) > 100, f"expected the mutant and alternative catalogues, found {len(entries)} entries"
    # positive control: each entry's body is found in its own catalogue
    catalogues = {f"{folder}/{name}": lines for folder in ("mutants", "alternatives")
                  for name, lines in text_files(REPO / folder).items()}
    assert all(contains(catalogues[file], body) for file, _, body in entries)
    files = text_files(dest)
    for name, lines in files.items():
        raw = (dest / name).read_text(errors="ignore")
        assert "@mutant(" not in raw and "@alternative(" not in raw, f"{name} carries a catalogue decorator"
        # a lab's bugs are in the colleague's own code, not the catalogue's; but a lab gives its assignment's
        # reference code, where a mistake that only leaves lines out is found as it is
        lab = _lab_of_file(name)
        for file, entry, body in entries:
            if len(body) >= 2 and not (lab and any(contains(code, body) for code in reference_code(LAB_OF[lab]))):
                assert not contains(lines, body), f"{name} carries {file}'s {entry}"
    for lab in LAB_IDS:   # a lab carries its bugs as the colleague planted them
        lines = files[f"assignments/{lab}/{lab}.ipynb"]
        for bug in lab_bugs(COURSE, lab):
            assert contains(lines, code_lines(bug.planted)), f"{lab} should carry its bug {bug.name}"


@pytest.mark.kernel
def test_published_release_runs_with_nothing_of_the_grader(published, tmp_path):
    """The a1 release as published, answered as the reference answers it, runs top to bottom from
    the student repository with the grader package made unimportable."""
    from nbclient import NotebookClient

    from grader.samples import perfect_submission
    dest, _ = published
    aid = ALL[0]
    published_nb = nbformat.read(dest / "assignments" / aid / f"{aid}.ipynb", as_version=4)
    answered = perfect_submission(COURSE, aid)     # the release with the reference answers pasted in
    assert [c.get("id") for c in answered.cells] == [c.get("id") for c in published_nb.cells]
    answered.cells.insert(0, nbformat.v4.new_code_cell(
        "import sys\nsys.modules['grader'] = None   # `import grader` fails from here on"))
    folder = dest / "assignments" / aid
    client = NotebookClient(answered, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(folder)}})
    client.execute()
    errors = [o for c in answered.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"the published {aid} does not run alone: {errors[0].get('ename')}: {errors[0].get('evalue')}"


def test_publish_refuses_what_it_must_not_replace(tmp_path):
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "holiday.jpg").write_text("x")
    with pytest.raises(SystemExit, match="not a published course"):
        publish(COURSE, foreign, force=True, commit=False)
    assert (foreign / "holiday.jpg").exists()
    with pytest.raises(SystemExit, match="instructor repository"):
        publish(COURSE, REPO / "public", commit=False)
    with pytest.raises(SystemExit, match="no release of a9_missing"):
        publish(COURSE, tmp_path / "x", assignments=["a9_missing"], commit=False)


def test_publishing_again_adds_a_commit_only_when_something_changed(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    dest = tmp_path / "public"
    publish(COURSE, dest, assignments=ALL[:1])
    publish(COURSE, dest, assignments=ALL[:2])
    publish(COURSE, dest, assignments=ALL[:2])
    log = subprocess.run(["git", "-C", str(dest), "log", "--format=%s"], capture_output=True, text=True).stdout
    assert len(log.splitlines()) == 2, log
    assert ALL[1] in log.splitlines()[0], log
    assert (dest / "assignments" / ALL[1]).is_dir()


# ---- the student README's syllabus: docs/syllabus.md, the one source ----

def test_student_readme_syllabus_is_docs_syllabus():
    """The syllabus table of the student README is docs/syllabus.md's, its links made relative to
    the published repository's root; the placeholder repository becomes the public one."""
    syllabus = (REPO / "docs" / "syllabus.md").read_text()
    rows = [line.replace("](../", "](") for line in syllabus.splitlines() if line.startswith("| ")]
    assert len(rows) >= 10, "docs/syllabus.md should hold a header and a row per lecture"
    readme = student_readme(COURSE, ALL, "you/attention-course")
    shown = [line for line in readme.splitlines() if line.startswith("| ")]
    assert shown == [row.replace("OWNER/attention-course", "you/attention-course") for row in rows]
    assert "OWNER/attention-course" not in readme
    assert "colab.research.google.com/github/you/attention-course/blob/main/lectures/01_" in readme


def test_student_readme_leaves_unpublished_assignments_unlinked():
    readme = student_readme(COURSE, ALL[:1])
    for later in ALL[1:]:
        assert f"{later} (not released yet)" in readme, f"{later}'s row should say it is not released yet"
        assert f"assignments/{later}/" not in readme, f"the student README links {later}, which is not published"
    assert f"assignments/{ALL[0]}/{ALL[0]}.ipynb" in readme


def test_syllabus_table_needs_docs_syllabus(tmp_path, monkeypatch):
    with pytest.raises(PublishError, match="missing"):
        syllabus_table(tmp_path / "syllabus.md")
    (tmp_path / "syllabus.md").write_text("# Syllabus\n\nNo table here.\n")
    with pytest.raises(PublishError, match="no syllabus table"):
        syllabus_table(tmp_path / "syllabus.md")
    (tmp_path / "syllabus.md").write_text("| # | lecture |\n|---|---|\n| 1 | [x](../lectures/x.ipynb) |\n\n| other |\n")
    assert syllabus_table(tmp_path / "syllabus.md") == "| # | lecture |\n|---|---|\n| 1 | [x](lectures/x.ipynb) |"
    # publish stops before it touches DEST
    import grader.publish
    monkeypatch.setattr(grader.publish, "SYLLABUS", tmp_path / "missing.md")
    dest = tmp_path / "public"
    with pytest.raises(SystemExit, match="publish: .*missing.md is missing"):
        publish(COURSE, dest, commit=False)
    assert not dest.exists()
