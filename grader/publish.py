"""`publish DEST`: the student-facing course as a ready-to-push git repository, without the answer
key.

The instructor's repository is private: it holds solutions/ (the reference answers and hidden
tests), mutants/ and alternatives/ (wrong and right answers), the grader and its tests. Students
get a second, public repository made by this command from what they are meant to see:

    README.md            for students: open, work, submit, what is graded (docs/student-readme.md,
                         with the syllabus table of docs/syllabus.md and its Colab links)
    LICENSE              unchanged (code MIT, content CC BY 4.0)
    requirements.txt     the pinned student set (requirements-student.txt); environment.yml uses it
    lectures/            the executed lectures
    assignments/<id>/    the releases as `python -m grader release` makes them (no hidden tests)
    docs/img/            the figures the README shows

The released notebooks stand alone (grader/provided/ is synced into their cells), so nothing of
grader/ goes with them. Publishing into the same DEST again updates it and adds a commit, keeping
its history, so it can be pushed to the same remote each time an assignment opens.
"""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from . import cells, labs

MARKER = ".course-publish.json"            # in DEST: what was published, from which commit
TEMPLATE = Path("docs") / "student-readme.md"  # in the course: the student README, to fill in
SYLLABUS = Path("docs") / "syllabus.md"        # in the course: the one source of the syllabus table
PLACEHOLDER_REPO = "OWNER/attention-course"  # in the syllabus's Colab links until publish fills it in
PUBLISHED_NAMES = {MARKER, ".gitignore", "README.md", "LICENSE", "environment.yml", "requirements.txt",
                   "lectures", "assignments", "docs"}
SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
           "BEGIN MARK SCHEME", "END MARK SCHEME", "### BEGIN FIX", "### PLANTED")   # a debugging lab's key


class PublishError(RuntimeError):
    pass


def released_ids(course):
    """Assignments with a release notebook in assignments/, in order."""
    folder = course.release_dir
    return sorted(p.name for p in folder.iterdir() if (p / f"{p.name}.ipynb").is_file()) if folder.is_dir() else []


def publish(course, dest, force=False, assignments=None, public_repo=None, commit=True):
    """Write the student course into `dest` (see the module's docstring); returns 0 (the CLI's exit
    status). `assignments`: the ids to publish (default: every released one); `public_repo`:
    OWNER/NAME of the public repository for the Colab links (default: $GRADER_PUBLIC_REPO, else the
    GitHub remote `origin` of DEST, else the placeholder)."""
    dest = Path(dest).expanduser().resolve()
    ids = _choose(course, assignments)
    _check_destination(course.root, dest, force)
    try:
        syllabus = syllabus_table(course.root / SYLLABUS)      # before anything in DEST is touched
    except PublishError as error:
        raise SystemExit(f"publish: {error}") from error
    public_repo = public_repo or os.environ.get("GRADER_PUBLIC_REPO") or _github_remote(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for entry in dest.iterdir():          # a fresh tree every time; the history stays in .git
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()

    lectures = sorted(course.lectures_dir.glob("[0-9][0-9]_*.ipynb"))
    for path in lectures:
        _copy(path, dest / "lectures" / path.name)
    for aid in ids:
        for path in sorted((course.release_dir / aid).rglob("*")):
            if path.is_file() and not _ignored(path):
                _copy(path, dest / "assignments" / aid / path.relative_to(course.release_dir / aid))
    readme = student_readme(course, ids, public_repo or PLACEHOLDER_REPO, syllabus)
    (dest / "README.md").write_text(readme)
    for image in sorted(set(re.findall(r"docs/img/[\w.-]+\.png", readme))):
        _copy(course.root / image, dest / image)
    _copy(course.root / "LICENSE", dest / "LICENSE")
    _write_environment(course, dest)
    (dest / ".gitignore").write_text(".ipynb_checkpoints/\n__pycache__/\n.venv/\n*.pyc\n.DS_Store\n")

    leaks = self_check(course, dest, ids)
    if leaks:
        raise SystemExit("publish: stopped, answer-key text would be published (nothing committed; run "
                         "`python -m grader release` and check the releases):\n  " + "\n  ".join(leaks[:10]))
    provided = provided_answers(course, ids)
    source = _git(course.root, "rev-parse", "--short", "HEAD")
    (dest / MARKER).write_text(json.dumps({"assignments": ids, "lectures": [p.name for p in lectures]},
                                          indent=1) + "\n")
    committed = _commit(dest, ids, source) if commit else None

    print(f"published {len(lectures)} lectures and {len(ids)} assignment{'s' * (len(ids) != 1)} "
          f"({', '.join(ids) or 'none'}) to {dest}")
    for earlier, later, where in provided:
        print(f"  note: {later} gives {earlier}'s answers as provided code ({where}): "
              f"publish {later} only after {earlier} is due")
    for lab in [aid for aid in ids if labs.is_lab(course, aid)]:
        earlier = labs.debugged_assignment(course, lab)
        print(f"  note: {lab} gives {earlier}'s answers as the colleague's code (a debugging lab): "
              f"publish {lab} only after {earlier} is due")
    if not public_repo:
        print(f"  note: the Colab links point at github.com/{PLACEHOLDER_REPO}; set GRADER_PUBLIC_REPO=owner/name "
              "(or give DEST a GitHub remote `origin`) and publish again")
    if commit:
        print(f"  {committed or 'not committed: git is not installed'}")
    return 0


def _choose(course, assignments):
    known = released_ids(course)
    ids = list(assignments or known)
    unknown = [a for a in ids if a not in known]
    if unknown:
        raise SystemExit(f"publish: no release of {', '.join(unknown)} in {course.release_dir} "
                         f"(run `python -m grader release ID` first); released: {', '.join(known) or 'none'}")
    return sorted(ids)


def _check_destination(repo, dest, force):
    if dest == repo or repo.is_relative_to(dest):
        raise SystemExit(f"publish: {dest} is the instructor repository or holds it; choose a new folder, "
                         "e.g. ../attention-course-public")
    if dest.is_relative_to(repo) and not dest.is_relative_to(repo / "out"):
        raise SystemExit(f"publish: {dest} is inside the instructor repository, where git would see it; "
                         "choose a folder outside it (or under out/)")
    if dest == Path.home() or dest == Path(dest.anchor):
        raise SystemExit(f"publish: refusing to publish into {dest}; choose a new folder")
    if not dest.exists() or (dest / MARKER).exists():
        return
    if not dest.is_dir():
        raise SystemExit(f"publish: {dest} is a file; choose a folder")
    others = sorted(p.name for p in dest.iterdir() if p.name != ".git")
    if not others:
        return
    foreign = [name for name in others if name not in PUBLISHED_NAMES]
    if foreign:     # --force never deletes what a published course does not have
        raise SystemExit(f"publish: {dest} is not a published course: it holds {', '.join(foreign[:5])}"
                         f"{', ...' if len(foreign) > 5 else ''}; choose a new folder (or clear it yourself)")
    if not force:
        raise SystemExit(f"publish: {dest} looks like a course published elsewhere (no {MARKER}); pass --force "
                         "to replace its contents (its .git history is kept), or choose a new folder")


def _ignored(path):
    return any(part in (".ipynb_checkpoints", "__pycache__") for part in path.parts) or path.suffix == ".pyc"


def _copy(source, target):
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


# ---- the student README and environment ----

def syllabus_table(path):
    """The syllabus table of docs/syllabus.md (its first Markdown table), with its relative links
    (`../lectures/...`, written from docs/) made relative to the repository's root, where the
    student README lives."""
    path = Path(path)
    if not path.is_file():
        raise PublishError(f"{path} is missing: it holds the syllabus table for the student README")
    table = []
    for line in path.read_text().splitlines():
        if line.startswith("|"):
            table.append(line)
        elif table:
            break                       # the first table only
    if len(table) < 3:                  # a header, its rule and at least one row
        raise PublishError(f"{path} has no syllabus table (a Markdown table of lectures and assignments)")
    return re.sub(r"\]\(\.\./", "](", "\n".join(table))


def student_readme(course, ids, public_repo=PLACEHOLDER_REPO, syllabus=None):
    """docs/student-readme.md filled in: the published assignments and the syllabus table, whose
    rows of assignments not published yet keep their lecture but lose the assignment's links."""
    syllabus = syllabus if syllabus is not None else syllabus_table(course.root / SYLLABUS)
    colab = r"https://colab\.research\.google\.com/github/[^)]*"
    for aid in released_ids(course):
        if aid not in ids:
            syllabus = re.sub(rf"\[{aid}\]\(assignments/{aid}/{aid}\.ipynb\)", f"{aid} (not released yet)", syllabus)
            syllabus = re.sub(rf" · \[[^\]]*\]\({colab}/assignments/{aid}/[^)]*\)", "", syllabus)
    text = (course.root / TEMPLATE).read_text()
    text = text.replace("{{SYLLABUS}}", syllabus).replace("{{ASSIGNMENTS}}", ", ".join(ids) or "none yet")
    return text.replace(PLACEHOLDER_REPO, public_repo)


def _write_environment(course, dest):
    """requirements.txt: the pinned student set; environment.yml: conda with it (no constraints file:
    every package the students get is pinned here, torch included)."""
    pins = [line for line in (course.root / "requirements-student.txt").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    (dest / "requirements.txt").write_text(
        "# What the notebooks need (torch, matplotlib, tqdm) and JupyterLab to open them, pinned.\n"
        "# pip install -r requirements.txt   (or: conda env create -f environment.yml)\n" + "\n".join(pins) + "\n")
    (dest / "environment.yml").write_text(
        "# conda env create -f environment.yml && conda activate attention-course\n"
        "name: attention-course\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.11\n  - pip\n"
        "  - pip:\n      - -r requirements.txt\n")


# ---- what must never be published ----

def solution_blocks(course, assignment_id):
    """The solution regions of a source notebook, each as its code lines (stripped, without blank
    and comment-only lines); one-line answers are left out (an idiom, not a key)."""
    nb = cells.read(course.source_notebook(assignment_id))
    blocks = []
    for cell in nb.cells:
        for match in SOLUTION.finditer(cell.source):
            lines = code_lines(match.group(1))
            if len(lines) >= 2 and sum(map(len, lines)) >= 60:
                blocks.append(lines)
    return blocks


def code_lines(text):
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def contains_block(lines, block):
    return ("\n" + "\n".join(block) + "\n") in ("\n" + "\n".join(lines) + "\n")


def notebook_lines(path):
    """A notebook's code lines, cell by cell (a block never spans two cells)."""
    lines = []
    for cell in cells.read(path).cells:
        lines += code_lines(cell.source) + ["\0"]
    return lines


def provided_answers(course, ids):
    """(earlier assignment, published assignment, provided file) where a published release carries
    an earlier assignment's answers as provided code (grader/provided/), as a4 carries a2's model."""
    from .provided import provided_source
    found, blocks = [], {}           # each assignment's solution blocks, read once
    for later in ids:
        nb = cells.read(course.release_notebook(later))
        for name in sorted({cells.provided_file(c) for c in nb.cells if cells.provided_file(c)}):
            provided = code_lines(provided_source(name))
            for earlier in [aid for aid in course.assignment_ids() if aid != later]:
                # most of an answer's lines in the provided file: the answer, give or take a rewording
                if earlier not in blocks:
                    blocks[earlier] = solution_blocks(course, earlier)
                if any(sum(line in provided for line in block) >= 0.6 * len(block) for block in blocks[earlier]):
                    found.append((earlier, later, f"grader/provided/{name}"))
    return found


def self_check(course, dest, ids):
    """Cheap last look before committing: no nbgrader solution or hidden-test markers anywhere; in
    each published release, no line only its hidden tests have and no block of its own solution.
    (tests/test_publish.py proves more, independently.)"""
    problems = []
    for path in sorted(dest.rglob("*")):
        if path.is_file() and ".git" not in path.relative_to(dest).parts:
            text = path.read_text(errors="ignore")
            problems += [f"{path.relative_to(dest)}: '{m}' marker" for m in MARKERS if m in text]
    for aid in ids:
        release = dest / "assignments" / aid / f"{aid}.ipynb"
        secret = labs.secret_lines(course, aid)
        shown = {line.strip() for cell in cells.read(release).cells for line in cell.source.splitlines()}
        problems += [f"assignments/{aid}: hidden test line: {line[:60]}" for line in sorted(secret & shown)[:3]]
        own = notebook_lines(release)
        problems += [f"assignments/{aid}: its own solution: {block[0][:60]}"
                     for block in solution_blocks(course, aid) if contains_block(own, block)]
    return problems


# ---- git ----

def _git(folder, *args, check=False):
    try:
        result = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if check and result.returncode != 0:
        raise PublishError(f"git {' '.join(args)} failed in {folder}: {result.stderr.strip()}")
    return result.stdout.strip() if result.returncode == 0 else None


def _github_remote(dest):
    url = _git(dest, "remote", "get-url", "origin") if (dest / ".git").exists() else None
    match = re.search(r"github\.com[:/]([^/]+/[^/]+?)(?:\.git)?/?$", url or "")
    return match.group(1) if match else None


def _commit(dest, ids, source):
    if shutil.which("git") is None:
        return None
    if not (dest / ".git").exists():
        _git(dest, "init", "--quiet", "--initial-branch=main", check=True)
    identity = [] if _git(dest, "config", "user.email") else \
        ["-c", "user.name=Course publisher", "-c", "user.email=course-publisher@localhost"]
    _git(dest, "add", "--all", check=True)
    if _git(dest, "diff", "--cached", "--quiet") is not None:   # exit 0: nothing staged
        return f"git: nothing changed since the last publish ({_git(dest, 'rev-parse', '--short', 'HEAD')})"
    message = (f"Publish the course: lectures, {', '.join(ids) or 'no assignments'}"
               + (f" (instructor commit {source})" if source else ""))
    _git(dest, *identity, "commit", "--quiet", "-m", message, check=True)
    commit, branch = _git(dest, "rev-parse", "--short", "HEAD"), _git(dest, "rev-parse", "--abbrev-ref", "HEAD")
    head = f"git: committed {commit} on {branch}"
    if _git(dest, "remote", "get-url", "origin"):
        return f"{head}; push it: git -C {dest} push"
    return (f"{head}; push it to the public repository: git -C {dest} remote add origin "
            f"git@github.com:{PLACEHOLDER_REPO}.git && git -C {dest} push -u origin main")
