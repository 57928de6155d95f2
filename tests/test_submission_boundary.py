"""A submission is read only inside itself: a notebook that is a link, or lies in a linked folder,
is never read, whatever it points to (the answer key, another student's notebook), in every intake
the grader has: an LMS download given as a folder (Canvas, Moodle), nbgrader's submitted/ and
exchange folders, a plain folder of notebooks, GitHub Classroom with and without git, a zip (which
never makes a link), Gradescope's upload. The student's row says why in words, never a traceback.
The LMS's zip is unpacked within bounds (a zip bomb is refused, naming the entry)."""
import os
import shutil
import subprocess
import zipfile

import nbformat
import pytest

from grader import classroom
from grader.gradescope import find_notebook, grade_submission
from grader.stages import collect as collect_stage
from grader.stages.collect import collect
from grader.submission import Intake, Status
from support.grading import A1, open_batch

KEY = "the answer key"


@pytest.fixture
def key(tmp_path):
    """A stand-in for solutions/<id>/<id>.ipynb outside every submission: a notebook that reading
    would show (its one cell says so)."""
    path = tmp_path / "course" / "solutions" / A1 / f"{A1}.ipynb"
    path.parent.mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(KEY))
    nbformat.write(nb, str(path))
    return path


def _nb(path, text="mine"):
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(text))
    nbformat.write(nb, str(path))
    return path


def _link(path, target):
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(target, path.parent), path)
    return path



def _by_student(intake):
    return {s.student: s for s in intake.submissions}


OUTSIDE = "is a link to a file outside the submission"


@pytest.mark.parametrize("layout, lms, student, linked", [
    ("canvas", "canvas", "101", f"doejane_101_5001_{A1}.ipynb"),
    ("moodle", "moodle", "4711", f"Jane Doe_4711_assignsubmission_file/{A1}.ipynb"),
    ("nbgrader submitted", "nbgrader", "jdoe", f"jdoe/{A1}/{A1}.ipynb"),
    ("nbgrader exchange", "nbgrader", "jdoe", f"jdoe+{A1}+2026-10-01 12:00:00.000000 UTC/{A1}.ipynb"),
    ("plain folder", "folder", "jdoe", f"jdoe_{A1}.ipynb"),
    ("plain folder, student's folder", "folder", "jdoe", f"jdoe/{A1}.ipynb"),
])
def test_a_link_to_the_key_in_an_lms_download_is_never_read(collected, tmp_path, key, layout, lms, student, linked):
    download = tmp_path / "download"
    _nb(download / _honest(lms))
    _link(download / linked, key)
    found = _by_student(collected(download, lms=lms))
    jane = found[student]
    assert jane.path is None, f"{layout}: the link was taken as the notebook"
    assert jane.reason == f"{linked} {OUTSIDE} (links are never read: submit the notebook file itself)"
    honest = [s for s in found.values() if s is not jane]
    assert honest and all(s.path is not None for s in honest), "the rest of the class is read as before"


def _honest(lms):
    """Another student's file in the same layout (who must be read as before)."""
    return {"canvas": f"smithjo_102_5002_{A1}.ipynb", "moodle": f"Jo Smith_4712_assignsubmission_file/{A1}.ipynb",
            "nbgrader": f"jsmith/{A1}/{A1}.ipynb", "folder": f"jsmith_{A1}.ipynb"}[lms]


def test_a_link_to_another_students_notebook_is_never_read(collected, tmp_path):
    download = tmp_path / "download"
    alice = _nb(download / "alice" / f"{A1}.ipynb", "alice's work")
    _link(download / "mallory" / f"{A1}.ipynb", alice)
    found = _by_student(collected(download, lms="folder"))
    assert found["alice"].path == alice
    assert found["mallory"].path is None
    assert found["mallory"].reason == (f"mallory/{A1}.ipynb is a link to another file of the submission "
                                       "(links are never read: submit the notebook file itself)")


def test_a_notebook_in_a_linked_folder_is_never_read(collected, tmp_path, key):
    download = tmp_path / "download"
    _nb(download / "alice" / f"{A1}.ipynb")
    (download / "mallory").mkdir(parents=True)
    _link(download / "mallory" / "work", key.parent)     # work/ -> solutions/a1/: the key inside it
    intake = collected(download, lms="folder")
    found = _by_student(intake)
    assert "mallory" in found and found["mallory"].path is None
    assert "mallory/work is a link to a folder outside the submission" in found["mallory"].reason
    assert all(KEY not in (s.path.read_text() if s.path else "") for s in found.values())


def test_a_real_notebook_beside_a_link_is_graded_and_the_link_named(collected, tmp_path, key):
    download = tmp_path / "download"
    mine = _nb(download / "jdoe" / "mine.ipynb")
    _link(download / "jdoe" / f"{A1}.ipynb", key)
    [jdoe] = collected(download, lms="folder").submissions
    assert jdoe.path == mine
    assert any(note.startswith(f"not read: jdoe/{A1}.ipynb {OUTSIDE}") for note in jdoe.notes), jdoe.notes


def test_a_zip_never_makes_a_link(course, tmp_path, key):
    """A zip entry that says it is a link (Unix mode 120000, its data the target's name) is written as
    an ordinary file holding that name: sanitize later finds it is no notebook."""
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as z:
        entry = zipfile.ZipInfo(f"mallory_{A1}.ipynb")
        entry.external_attr = (0o120777 << 16)
        z.writestr(entry, str(key))
        z.writestr(f"alice_{A1}.ipynb", nbformat.writes(nbformat.v4.new_notebook()))
    with open_batch(course, tmp_path / "batch", lms="folder") as batch:
        found = _by_student(collect(Intake(archive), batch))
        assert not found["mallory"].path.is_symlink() and found["mallory"].path.read_text() == str(key)


# ---- GitHub Classroom ----

def _git(repo, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="s", GIT_AUTHOR_EMAIL="s@example.com", GIT_COMMITTER_NAME="s",
               GIT_COMMITTER_EMAIL="s@example.com", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_SYSTEM=os.devnull)
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
SLUG = "a1-self-attention"


@needs_git
def test_classroom_a_committed_link_is_named_and_never_followed(tmp_path, key):
    source = tmp_path / f"{SLUG}-submissions"
    alice = source / f"{SLUG}-alice"
    _nb(alice / f"{A1}.ipynb", "alice's work")
    _git(alice, "init", "-q", "-b", "main")
    _git(alice, "add", "-A")
    _git(alice, "commit", "-q", "-m", "work")
    mallory = source / f"{SLUG}-mallory"
    mallory.mkdir()
    _git(mallory, "init", "-q", "-b", "main")
    _link(mallory / f"{A1}.ipynb", key)
    _link(mallory / "copied.ipynb", alice / f"{A1}.ipynb")
    _git(mallory, "add", "-A")
    _git(mallory, "commit", "-q", "-m", "links")
    found = {s.login: s for s in classroom.read_repositories(source, A1, tmp_path / "scratch")[0]}
    assert found["alice"].path is not None
    assert found["mallory"].path is None
    assert f"{A1}.ipynb is a link to a file outside the repository in commit" in found["mallory"].reason
    assert "copied.ipynb is a link to a file outside the repository" in found["mallory"].reason
    assert not list((tmp_path / "scratch").rglob("*mallory*/**/*.ipynb"))


@pytest.mark.parametrize("git", [True, False], ids=["folder without .git", "git not installed"])
def test_classroom_read_as_files_never_follows_a_link(tmp_path, key, monkeypatch, git):
    source = tmp_path / f"{SLUG}-submissions"
    alice = _nb(source / f"{SLUG}-alice" / f"{A1}.ipynb", "alice's work")
    _link(source / f"{SLUG}-mallory" / f"{A1}.ipynb", alice)
    _link(source / f"{SLUG}-trudy" / f"{A1}.ipynb", key)
    if not git:
        for name in ("alice", "mallory", "trudy"):
            (source / f"{SLUG}-{name}" / ".git").mkdir()
        monkeypatch.setattr(classroom.shutil, "which", lambda name: None)
    found = {s.login: s for s in classroom.read_repositories(source, A1, tmp_path / "scratch")[0]}
    assert found["alice"].path == alice
    assert found["mallory"].path is None and found["trudy"].path is None
    assert found["mallory"].reason == (f"{A1}.ipynb is a link to a file outside the submission (links are never "
                                       "read: submit the notebook file itself)")
    assert found["trudy"].reason.startswith(f"{A1}.ipynb {OUTSIDE}")


def test_classroom_a_linked_repository_folder_is_not_read(tmp_path, key):
    source = tmp_path / f"{SLUG}-submissions"
    _nb(source / f"{SLUG}-alice" / f"{A1}.ipynb")
    _link(source / f"{SLUG}-mallory", key.parent)
    found = {s.login: s for s in classroom.read_repositories(source, A1, tmp_path / "scratch")[0]}
    assert found["mallory"].path is None and "is a link to a folder outside the submission" in found["mallory"].reason


# ---- Gradescope ----

def test_gradescope_never_takes_a_link(tmp_path, key):
    upload = tmp_path / "submission"
    _link(upload / f"{A1}.ipynb", key)
    path, problem = find_notebook(upload, A1)
    assert path is None and problem.startswith(f"Your notebook could not be graded: {A1}.ipynb {OUTSIDE}")
    _link(upload / "work", key.parent)
    assert find_notebook(upload, A1)[0] is None, "a notebook in a linked folder is not taken either"
    mine = _nb(upload / "mine.ipynb")
    assert find_notebook(upload, A1) == (mine, None), "a real notebook beside the link is graded"


def test_gradescope_a_link_to_the_key_scores_zero_with_the_reason(course, tmp_path, key):
    """The whole of grade_submission (no kernel starts: the notebook is refused before)."""
    upload = tmp_path / "submission"
    _link(upload / f"{A1}.ipynb", course.source_notebook(A1))
    results = grade_submission(course, A1, upload)
    assert results["score"] == 0.0 and all(t["score"] == 0 for t in results["tests"])
    assert f"{A1}.ipynb {OUTSIDE}" in results["output"] and "Traceback" not in results["output"]


# ---- the LMS's zip, within bounds ----

def _zeros_zip(path, entries, mode="w"):
    """A zip (or more of it) of files of zeros, whole MiB each (one compresses to about a thousandth
    of its size)."""
    with zipfile.ZipFile(path, mode, zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, size in entries.items():
            with archive.open(name, "w", force_zip64=True) as sink:
                for _ in range(size // 2**20):
                    sink.write(bytes(2**20))
    return path


def test_a_file_too_large_to_unpack_fails_its_student_only(collected, tmp_path, monkeypatch):
    monkeypatch.setattr(collect_stage, "DOWNLOAD_MAX_ENTRY_BYTES", 4 * 2**20)
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"submissions/alice_{A1}.ipynb", nbformat.writes(nbformat.v4.new_notebook()))
    _zeros_zip(archive, {f"submissions/bomb_{A1}.ipynb": 8 * 2**20}, mode="a")
    assert archive.stat().st_size < 2**20
    found = _by_student(collected(archive, lms="folder"))
    assert found["alice"].path is not None
    assert found["bomb"].path is None
    assert found["bomb"].reason == (f"submissions/bomb_{A1}.ipynb unpacks to 8 MiB, more than the 4 MiB a file of "
                                    "the download may be, so it was not unpacked")
    assert not list((tmp_path / "batch").rglob(f"bomb_{A1}.ipynb")), "nothing of it was written"


def test_a_download_too_large_in_all_is_refused_before_anything_is_unpacked(collected, tmp_path, monkeypatch):
    monkeypatch.setattr(collect_stage, "DOWNLOAD_MAX_BYTES", 6 * 2**20)
    archive = _zeros_zip(tmp_path / "download.zip", {f"s{i}_{A1}.ipynb": 2 * 2**20 for i in range(4)})
    with pytest.raises(ValueError) as refused:
        collected(archive, lms="folder")
    assert "download.zip unpacks to 8 MiB, more than the 6 MiB a download may: nothing was unpacked or graded" \
        in str(refused.value)
    assert f"s0_{A1}.ipynb (2 MiB)" in str(refused.value)
    assert not list((tmp_path / "batch").rglob("*.ipynb")), "nothing half-unpacked is left to grade"


def test_too_many_entries_are_refused_from_the_end_record(collected, tmp_path, monkeypatch):
    monkeypatch.setattr(collect_stage, "DOWNLOAD_MAX_ENTRIES", 50)
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for i in range(51):
            z.writestr(f"s{i}_{A1}.ipynb", "{}")
    with pytest.raises(ValueError, match="download.zip holds 51 entries, more than the 50 a download may hold"):
        collected(archive, lms="folder")
    assert not list((tmp_path / "batch").rglob("*.ipynb"))


def test_an_entry_that_unpacks_to_more_than_it_declares_stops_the_unpacking(collected, tmp_path):
    """A forged size field: the entry is cut where it said it ends, and the zip is refused whole."""
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"alice_{A1}.ipynb", nbformat.writes(nbformat.v4.new_notebook()))
        z.writestr(f"liar_{A1}.ipynb", bytes(2**20))
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as z:
        info = z.getinfo(f"liar_{A1}.ipynb")
    declared = (2**20).to_bytes(4, "little")
    for at in (i for i in range(len(data)) if data[i:i + 4] == declared):
        data[at:at + 4] = (1000).to_bytes(4, "little")          # the local header's and the directory's size
    archive.write_bytes(bytes(data))
    assert info.file_size == 2**20
    with pytest.raises(ValueError, match=f"download.zip cannot be unpacked at liar_{A1}.ipynb .*nothing was graded"):
        collected(archive, lms="folder")
    assert not list((tmp_path / "batch").rglob("*.ipynb")), "nothing half-unpacked is left to grade"


def test_the_bounds_are_stated_and_a_real_bomb_is_refused(collected, tmp_path):
    """With the real bounds: one entry of 300 MiB of zeros (about 300 KB in the zip)."""
    assert collect_stage.DOWNLOAD_MAX_ENTRY_BYTES == 256 * 2**20
    assert collect_stage.DOWNLOAD_MAX_BYTES >= 16 * collect_stage.DOWNLOAD_MAX_ENTRY_BYTES
    archive = _zeros_zip(tmp_path / "download.zip", {f"bomb_{A1}.ipynb": 300 * 2**20})
    with zipfile.ZipFile(archive, "a") as z:
        z.writestr(f"alice_{A1}.ipynb", nbformat.writes(nbformat.v4.new_notebook()))
    found = _by_student(collected(archive, lms="folder"))
    assert found["alice"].path is not None and found["bomb"].status == Status.PENDING
    assert found["bomb"].path is None and "unpacks to 300 MiB, more than the 256 MiB" in found["bomb"].reason
    used = sum(p.stat().st_size for p in (tmp_path / "batch").rglob("*") if p.is_file())
    assert used < 2**20, f"{used} bytes written for a download whose only notebook is tiny"


@needs_git
def test_classroom_reading_runs_nothing_of_the_repository(tmp_path):
    """Reading a repository (log, ls-tree, show, cat-file) runs none of its hooks, nor a command its
    configuration names (core.fsmonitor runs on commands that refresh the index)."""
    source = tmp_path / f"{SLUG}-submissions"
    repo = source / f"{SLUG}-mallory"
    _nb(repo / f"{A1}.ipynb")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "work")
    ran = tmp_path / "ran"
    for hook in ("post-checkout", "post-merge", "pre-commit", "post-commit", "post-rewrite", "pre-push",
                 "reference-transaction", "post-index-change", "fsmonitor-watchman"):
        path = repo / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\necho {hook} >> {ran}\n")
        path.chmod(0o755)
    monitor = repo / "monitor.sh"
    monitor.write_text(f"#!/bin/sh\necho fsmonitor >> {ran}\n")
    monitor.chmod(0o755)
    _git(repo, "config", "core.fsmonitor", str(monitor))
    [mallory] = classroom.read_repositories(source, A1, tmp_path / "scratch")[0]
    assert mallory.path is not None
    assert not ran.exists(), ran.read_text()
