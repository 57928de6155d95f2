"""GitHub Classroom: the folder `gh classroom clone student-repos` writes, one git repository per
student (github/gh-classroom, cmd/gh-classroom/clone/student-repos):

    <assignment-slug>-submissions/
        <assignment-slug>-<github username>/     a clone of the student's repository
        ...

The student is the GitHub username (the repository's name less the slug). With a due date the
notebook graded is the one of the last commit at or before the deadline (`git show` of that
commit, into the batch's scratch space), and that commit's time is the submission time; later
commits are named in a note, never graded. Without a due date, the latest commit. A commit's time
is the committer's clock, which is the student's own machine: it says when they committed, not
when GitHub received the push. A folder that is not a git repository (or a machine without git) is
read as its files are, its time unknown.

A notebook that is a link is never read: in a commit, a link is an object holding its target's
name (mode 120000), which is named and refused, never followed; in a folder read as files, a link
or a file in a linked folder is refused the same way (grader/safe_files.py).
"""
import datetime
import shutil
import subprocess
from pathlib import Path, PurePosixPath

from . import store
from .lms import SAFE_ID
from .safe_files import committed_link_reason, link_reason
from .submission import Submission

SUFFIX = "-submissions"
GIT_TIMEOUT_S = 60


def looks_like_classroom(source):
    """A folder named <slug>-submissions holding at least one git repository."""
    source = Path(source)
    return source.is_dir() and source.name.endswith(SUFFIX) and any(
        (entry / ".git").exists() for entry in source.iterdir() if entry.is_dir())


def due_date(batch):
    """This run's due date, else the one an earlier run stored in the course gradebook, else None."""
    if batch.options.due is not None:
        return batch.options.due
    return store.due_date(batch.course_db, batch.assignment_id)


def read_repositories(source, assignment_id, workspace, due=None):
    """([Submission] one per student repository, [(name, why)] what is not a student's repository)."""
    source = Path(source)
    if not source.is_dir():
        raise ValueError(f"--lms classroom reads the folder `gh classroom clone student-repos` writes "
                         f"(<assignment-slug>-submissions/, one repository per student); {source} is not a folder")
    repositories = sorted(e for e in source.iterdir() if e.is_dir() and not e.name.startswith("."))
    if not repositories:
        raise ValueError(f"{source} holds no student repository: expected one folder per student, "
                         f"<assignment-slug>-<github username>, as `gh classroom clone student-repos` writes them")
    prefix = _slug_prefix(source, [r.name for r in repositories])
    git = shutil.which("git")
    submissions, unrecognised = [], []
    for folder in repositories:
        login = folder.name[len(prefix):] if prefix and folder.name.startswith(prefix) else folder.name
        submission = Submission(SAFE_ID.sub("_", login), None, login=login, name=login, preset="classroom",
                                lms_name=folder.name)
        linked = link_reason(folder, source, shown=f"{folder.name}/")
        if linked:
            submission.reason = linked
        elif (folder / ".git").exists() and git:
            _from_commits(submission, folder, assignment_id, workspace, due, git)
        else:
            why = "git is not installed here" if (folder / ".git").exists() else "not a git repository"
            submission.note(f"{why}: graded as the files are, time unknown")
            _from_files(submission, folder, assignment_id)
        submissions.append(submission)
    for entry in sorted(source.iterdir()):
        if entry.is_file() and not entry.name.startswith("."):
            unrecognised.append((entry.name, "not a student repository (expected one folder per student)"))
    return sorted(submissions, key=lambda s: s.login), unrecognised


def _slug_prefix(source, names):
    """'<slug>-': from the folder's name (<slug>-submissions), else what every repository's name
    starts with (two or more of them), else nothing."""
    if source.name.endswith(SUFFIX) and len(source.name) > len(SUFFIX):
        return source.name[:-len(SUFFIX)] + "-"
    if len(names) > 1:
        common = names[0]
        for name in names[1:]:
            while not name.startswith(common):
                common = common[:-1]
        return common[:common.rfind("-") + 1] if "-" in common else ""
    return ""


def _git(git, folder, *args, text=True):
    result = subprocess.run([git, "-C", str(folder), *args], capture_output=True, text=text, timeout=GIT_TIMEOUT_S,
                            check=False)
    if result.returncode != 0:
        error = result.stderr.strip() if text else result.stderr.decode(errors="replace").strip()
        raise RuntimeError(error.splitlines()[-1] if error else f"git {args[0]} failed")
    return result.stdout


def _from_commits(submission, folder, assignment_id, workspace, due, git):
    """The notebook as of the commit to grade, written into `workspace`, and that commit's time."""
    try:
        log = _git(git, folder, "log", "--format=%H %ct", "HEAD").split()
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        submission.reason = f"the repository has no commit to grade ({error})"
        return
    commits = [(log[i], datetime.datetime.fromtimestamp(int(log[i + 1]), datetime.timezone.utc))
               for i in range(0, len(log) - 1, 2)]
    if not commits:
        submission.reason = "the repository has no commit to grade"
        return
    chosen, later = commits[0], ""
    if due is not None:
        before = [c for c in commits if c[1] <= due]
        after = [c for c in commits if c[1] > due]
        if before:
            chosen = before[0]
            if after:
                later = f"{len(after)} commit{'s' if len(after) > 1 else ''} after the deadline not graded"
        else:
            later = "every commit is after the deadline: graded the latest"
    commit, when = chosen
    submission.submitted_at = when
    try:
        tree = _tree(git, folder, commit)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        submission.reason = f"cannot read commit {commit[:7]} ({error})"
        return
    notebooks = [path for path, (mode, _) in tree.items() if mode in REGULAR_FILE_MODES]
    links = [path for path, (mode, _) in tree.items() if mode == LINK_MODE]
    chosen_path, why = choose_notebook(notebooks, assignment_id)
    refused = [_link_reason(git, folder, tree, path, commit) for path in links[:3]]
    if chosen_path is None and refused and not notebooks:
        submission.reason = "; ".join(refused) + (f" ({later})" if later else "")
        return
    if chosen_path is None:
        submission.reason = f"{why} in commit {commit[:7]}" + (f" ({later})" if later else "")
        return
    for problem in refused:
        submission.note(f"not read: {problem}")
    target = Path(workspace) / "classroom" / submission.student / commit[:12]
    target.mkdir(parents=True, exist_ok=True)
    try:
        content = _git(git, folder, "show", f"{commit}:{chosen_path.as_posix()}", text=False)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        submission.reason = f"cannot read {chosen_path} of commit {commit[:7]} ({error})"
        return
    submission.path = target / chosen_path.name
    submission.path.write_bytes(content)
    submission.note(f"commit {commit[:7]}" + (f", notebook {chosen_path}" if len(chosen_path.parts) > 1 else ""))
    submission.note(later)
    _renamed(submission, chosen_path, assignment_id)


# git's modes (git ls-tree): a notebook is a regular file; a link is an object holding its target's name
REGULAR_FILE_MODES = ("100644", "100755")
LINK_MODE = "120000"


def _tree(git, folder, commit):
    """{path: (mode, object id)} of the commit's notebooks (names ending .ipynb outside hidden folders),
    read with -z, so that no name is quoted or split."""
    tree = {}
    for entry in _git(git, folder, "ls-tree", "-r", "-z", commit).split("\0"):
        meta, _, name = entry.partition("\t")
        fields = meta.split()
        path = PurePosixPath(name)
        if len(fields) == 3 and name.endswith(".ipynb") and not any(p.startswith(".") for p in path.parts):
            tree[path] = (fields[0], fields[2])
    return tree


def _link_reason(git, folder, tree, path, commit):
    """Why a committed link is not read, naming where it points (its blob holds the target's name,
    read as data, never followed)."""
    try:
        target = _git(git, folder, "cat-file", "blob", tree[path][1], text=False).decode(errors="replace")
    except (RuntimeError, subprocess.TimeoutExpired):
        target = "/"                               # unreadable: said to point outside
    return committed_link_reason(path.as_posix(), target, commit)


def _from_files(submission, folder, assignment_id):
    found = [p for p in folder.rglob("*.ipynb") if p.is_file() or p.is_symlink()]
    found = [p for p in found if not any(part.startswith(".") for part in p.relative_to(folder).parts)]
    refused = [why for why in (link_reason(p, folder) for p in found) if why]
    notebooks = [PurePosixPath(p.relative_to(folder).as_posix()) for p in found if link_reason(p, folder) is None]
    chosen, why = choose_notebook(notebooks, assignment_id)
    if chosen is None:
        submission.reason = "; ".join(refused[:3]) if refused and not notebooks else why
        return
    for problem in refused:
        submission.note(f"not read: {problem}")
    submission.path = folder.joinpath(*chosen.parts)
    if len(chosen.parts) > 1:
        submission.note(f"notebook found in {chosen.parent}/: {chosen.name}")
    _renamed(submission, chosen, assignment_id)


def _renamed(submission, notebook, assignment_id):
    if notebook.name != f"{assignment_id}.ipynb":
        submission.note(f"notebook was renamed to {notebook.name}; graded as {assignment_id}.ipynb")


def choose_notebook(notebooks, assignment_id):
    """(the notebook to grade, None) or (None, why): the expected name nearest the top, else the one
    notebook nearest the top, else no guess."""
    expected = f"{assignment_id}.ipynb"
    if not notebooks:
        return None, f"no notebook (expected {expected})"
    named = sorted((n for n in notebooks if n.name == expected), key=lambda n: len(n.parts))
    if named:
        return named[0], ""
    depth = min(len(n.parts) for n in notebooks)
    top = [n for n in notebooks if len(n.parts) == depth]
    if len(top) == 1:
        return top[0], ""
    return None, f"no {expected}, and several other notebooks ({', '.join(map(str, sorted(notebooks)))})"
