"""GitHub Classroom (`autograde --lms classroom`): the folder `gh classroom clone student-repos`
writes, <slug>-submissions/<slug>-<github username>/, one git repository per student
(github/gh-classroom, cmd/gh-classroom/clone/student-repos/student-repos.go: the folder is
`assignment.Slug + "-submissions"`, each clone named after the student's repository, which GitHub
Classroom names <slug>-<username>). The repositories are real ones, made here with git, their
commit times set (GIT_AUTHOR_DATE, GIT_COMMITTER_DATE)."""
import datetime
import os
import shutil
import subprocess

import nbformat
import pytest

from grader.classroom import read_repositories
from grader.stages.collect import collect
from grader.stages.identify import identify
from grader.submission import Intake, Status
from support.cli import run_cli
from support.grading import A1, DUE, open_batch

pytestmark = pytest.mark.skipif(shutil.which("git") is None,
                                reason="git is not installed: GitHub Classroom's repositories are read with git")
SLUG = "a1-self-attention"


def _notebook(marker):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(marker))
    return nbformat.writes(nb)


def _git(repo, *args, when=None):
    env = dict(os.environ, GIT_AUTHOR_NAME="student", GIT_AUTHOR_EMAIL="s@example.com", GIT_COMMITTER_NAME="student",
               GIT_COMMITTER_EMAIL="s@example.com", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_SYSTEM=os.devnull)
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = when.isoformat()
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def student_repo(root, username, commits):
    """A clone as `gh classroom clone student-repos` leaves it: commits = [(time, {path: text})]."""
    repo = root / f"{SLUG}-submissions" / f"{SLUG}-{username}"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    for when, files in commits:
        for name, text in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"work at {when:%H:%M}", when=when)
    return repo


HOUR = datetime.timedelta(hours=1)


@pytest.fixture
def classroom(tmp_path):
    """Three students: alice committed before the deadline and twice after; bob only before; carol's
    folder is a download of her files, not a repository."""
    student_repo(tmp_path, "alice", [(DUE - 5 * HOUR, {f"{A1}.ipynb": _notebook("alice template")}),
                                      (DUE - HOUR, {f"{A1}.ipynb": _notebook("alice on time")}),
                                      (DUE + HOUR, {f"{A1}.ipynb": _notebook("alice late 1")}),
                                      (DUE + 2 * HOUR, {f"{A1}.ipynb": _notebook("alice late 2")})])
    student_repo(tmp_path, "bob-b", [(DUE - 2 * HOUR, {f"work/{A1}.ipynb": _notebook("bob"), "README.md": "hi"})])
    carol = tmp_path / f"{SLUG}-submissions" / f"{SLUG}-carol"
    carol.mkdir()
    (carol / "mine.ipynb").write_text(_notebook("carol"))
    return tmp_path / f"{SLUG}-submissions"


def _marker(submission):
    return nbformat.read(str(submission.path), as_version=4).cells[0].source


def test_with_a_due_date_the_last_commit_before_it_is_graded(classroom, tmp_path):
    submissions, unrecognised = read_repositories(classroom, A1, tmp_path / "scratch", due=DUE)
    found = {s.login: s for s in submissions}
    assert set(found) == {"alice", "bob-b", "carol"}, "the username is the repository's name less the slug"
    alice = found["alice"]
    assert _marker(alice) == "alice on time" and alice.submitted_at == DUE - HOUR
    assert "2 commits after the deadline not graded" in alice.notes
    assert (tmp_path / "scratch") in alice.path.parents, "git show into the scratch space"
    assert _marker(found["bob-b"]) == "bob" and f"notebook {'work'}/{A1}.ipynb" in found["bob-b"].notes[0]
    assert found["bob-b"].submitted_at == DUE - 2 * HOUR and len(found["bob-b"].notes) == 1
    assert unrecognised == []


def test_without_a_due_date_the_latest_commit_is_graded(classroom, tmp_path):
    found = {s.login: s for s in read_repositories(classroom, A1, tmp_path / "scratch")[0]}
    assert _marker(found["alice"]) == "alice late 2" and found["alice"].submitted_at == DUE + 2 * HOUR
    assert not any("deadline" in note for note in found["alice"].notes)


def test_every_commit_after_the_deadline_grades_the_latest_as_late(tmp_path):
    student_repo(tmp_path, "dan", [(DUE + HOUR, {f"{A1}.ipynb": _notebook("dan 1")}),
                                   (DUE + 3 * HOUR, {f"{A1}.ipynb": _notebook("dan 2")})])
    [dan] = read_repositories(tmp_path / f"{SLUG}-submissions", A1, tmp_path / "scratch", due=DUE)[0]
    assert _marker(dan) == "dan 2" and dan.submitted_at == DUE + 3 * HOUR
    assert "every commit is after the deadline: graded the latest" in dan.notes


def test_a_folder_that_is_not_a_repository_is_read_with_time_unknown(classroom, tmp_path):
    found = {s.login: s for s in read_repositories(classroom, A1, tmp_path / "scratch", due=DUE)[0]}
    carol = found["carol"]
    assert carol.path == classroom / f"{SLUG}-carol" / "mine.ipynb" and carol.submitted_at is None
    assert "not a git repository: graded as the files are, time unknown" in carol.notes
    assert f"notebook was renamed to mine.ipynb; graded as {A1}.ipynb" in carol.notes


def test_a_repository_without_the_notebook_says_what_it_holds(tmp_path):
    student_repo(tmp_path, "erin", [(DUE - HOUR, {"x.ipynb": _notebook("x"), "y.ipynb": _notebook("y")})])
    [erin] = read_repositories(tmp_path / f"{SLUG}-submissions", A1, tmp_path / "scratch", due=DUE)[0]
    assert erin.path is None
    assert erin.reason.startswith(f"no {A1}.ipynb, and several other notebooks (x.ipynb, y.ipynb)")
    assert "in commit" in erin.reason


def test_a_notebook_added_only_after_the_deadline_is_not_graded(tmp_path):
    student_repo(tmp_path, "gus", [(DUE - HOUR, {"README.md": "started"}),
                                   (DUE + HOUR, {f"{A1}.ipynb": _notebook("gus late")})])
    [gus] = read_repositories(tmp_path / f"{SLUG}-submissions", A1, tmp_path / "scratch", due=DUE)[0]
    assert gus.path is None and gus.submitted_at == DUE - HOUR
    assert gus.reason.endswith("(1 commit after the deadline not graded)") and gus.reason.startswith("no notebook")


def test_a_repository_without_commits_says_so(tmp_path):
    student_repo(tmp_path, "fay", [])                     # accepted, cloned, nothing committed
    [fay] = read_repositories(tmp_path / f"{SLUG}-submissions", A1, tmp_path / "scratch", due=DUE)[0]
    assert fay.path is None and fay.reason.startswith("the repository has no commit to grade")


def test_without_git_the_files_are_read_and_the_time_is_unknown(classroom, tmp_path, monkeypatch):
    import grader.classroom
    monkeypatch.setattr(grader.classroom.shutil, "which", lambda name: None)
    found = {s.login: s for s in read_repositories(classroom, A1, tmp_path / "scratch", due=DUE)[0]}
    alice = found["alice"]
    assert _marker(alice) == "alice late 2", "the working tree: the files as they are"
    assert alice.submitted_at is None
    assert "git is not installed here: graded as the files are, time unknown" in alice.notes


def test_the_intake_maps_github_usernames_to_the_roster(classroom, course, tmp_path):
    """Through collect and identify, as autograde runs them: auto recognises the folder; the
    roster knows a GitHub username as an lms_user_id; the time is the commit's."""
    from grader.roster import import_roster
    (tmp_path / "roster.csv").write_text("id,first_name,last_name,lms_user_id\nalice01,Alice,A,alice\n"
                                         "bob02,Bob,B,bob-b\ncarol03,Carol,C,carol\ndan04,Dan,D,dan\n")
    with open_batch(course, tmp_path / "batch", due=DUE) as batch:
        import_roster(batch.course, tmp_path / "roster.csv")
        intake = identify(collect(Intake(classroom), batch), batch)
    assert intake.preset == "classroom"
    assert {s.student for s in intake.submissions} == {"alice01", "bob02", "carol03"}
    [dan] = intake.missing
    assert dan.student == "dan04" and dan.status == Status.MISSING


def test_a_source_with_no_repository_says_what_was_expected(course, tmp_path):
    (tmp_path / "empty").mkdir()
    with open_batch(course, tmp_path / "batch", lms="classroom") as batch, \
            pytest.raises(ValueError, match="holds no student repository: expected one folder per student"):
        collect(Intake(tmp_path / "empty"), batch)


@pytest.mark.kernel
def test_classroom_graded_end_to_end(course, tmp_path):
    """Through the command line, a kernel and all: the notebook of the last commit before the
    deadline is graded, and the table says which commit and what was left."""
    from grader.samples import perfect_submission, release_notebook
    student_repo(tmp_path, "alice", [(DUE - HOUR, {f"{A1}.ipynb": nbformat.writes(perfect_submission(course, A1))}),
                                      (DUE + HOUR, {f"{A1}.ipynb": nbformat.writes(release_notebook(course, A1))})])
    status, printed, _ = run_cli("autograde", A1, str(tmp_path / f"{SLUG}-submissions"), "--lms", "classroom",
                                 "--due", DUE.isoformat(), "--unsandboxed", course=tmp_path / "course")
    assert status == 0, printed
    [row] = [line for line in printed.splitlines() if line.startswith("alice ")]
    assert "1 commit after the deadline not graded" in row and "on time" in row, printed
    score, total = row.split()[1].split("/")
    assert float(score) == float(total) > 0, "the perfect notebook of the commit before the deadline"
