"""Honest set-up on any machine: `make demo` completes where bubblewrap is missing (the samples are
the course's own notebooks), grading real submissions there refuses with the fix for the system at
hand and no traceback, the sandbox's advice fits each kind of machine (faked here, whatever this
one is), the Makefile checks the Python version before anything else, and `make clean` never
touches course/ (the gradebook and the manual grades)."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader import sandbox
from grader.samples import perfect_submission
from grader.sandbox import SandboxUnavailable, check_available, detect_system
from support import COURSE

REPO = Path(__file__).resolve().parent.parent
AID = "a1_self_attention"


def path_without(tmp_path, *hidden):
    """A bin folder with a link to every program on PATH (the venv's first) except `hidden`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    dirs = [str(Path(sys.executable).parent)] + os.environ.get("PATH", "").split(os.pathsep)
    for directory in dirs:
        if not directory or not Path(directory).is_dir():
            continue
        for program in Path(directory).iterdir():
            target = folder / program.name
            if program.name in hidden or target.exists() or target.is_symlink():
                continue
            target.symlink_to(program)
    return str(folder)


def run_without_bwrap(tmp_path, code_or_args, timeout):
    env = {**os.environ, "PATH": path_without(tmp_path, "bwrap"), "OMP_NUM_THREADS": "1"}
    probe = subprocess.run(["sh", "-c", "command -v bwrap || echo none"], env=env, capture_output=True, text=True)
    assert probe.stdout.strip() == "none", f"bwrap is still reachable on the test's PATH: {probe.stdout}"
    return subprocess.run([sys.executable, *code_or_args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.kernel
def test_demo_completes_without_bubblewrap(tmp_path):
    """One assignment of `make demo` on a machine without bwrap: every sample graded as expected,
    after a single line saying the samples are graded without the sandbox; the committed release is
    left as it was (another test may be reading it)."""
    committed = (REPO / "assignments" / AID / f"{AID}.ipynb").stat()
    code = ("import sys; from pathlib import Path; from grader.course import Course; from grader.demo import run_demo; "
            f"sys.exit(0 if run_demo(Course.find(), [{AID!r}], demo_dir=Path({str(tmp_path / 'demo')!r}), "
            "progress=False) else 1)")
    result = run_without_bwrap(tmp_path, ["-c", code], timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"the demo failed without bubblewrap (exit {result.returncode}):\n{output[-3000:]}"
    notices = [line for line in result.stdout.splitlines() if line.startswith("demo: no sandbox")]
    assert len(notices) == 1, f"expected one line saying the demo grades without the sandbox, got {notices}"
    assert "bwrap" in notices[0] and "never graded unsandboxed" in notices[0], notices[0]
    assert "UNEXPECTED" not in output and "Traceback" not in output, output[-3000:]
    assert (tmp_path / "demo" / "grades.csv").exists(), "the demo wrote no grades.csv"
    after = (REPO / "assignments" / AID / f"{AID}.ipynb").stat()
    assert (after.st_ino, after.st_mtime_ns) == (committed.st_ino, committed.st_mtime_ns), \
        "the demo rewrote the committed assignments/ folder"


def test_autograde_without_bubblewrap_refuses_with_the_fix(tmp_path):
    """Real submissions are never graded unsandboxed: the command stops before any kernel starts,
    names the missing program and the install command for this system, and shows no traceback."""
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    shutil.copy(REPO / "assignments" / AID / f"{AID}.ipynb", submissions / "alice.ipynb")
    result = run_without_bwrap(tmp_path, ["-m", "grader", "autograde", AID, str(submissions),
                                          "--course-dir", str(tmp_path / "course")], timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode != 0, f"autograde graded without the sandbox:\n{output[-2000:]}"
    assert "Traceback" not in output, f"a traceback instead of a message:\n{output[-3000:]}"
    assert "`bwrap` is not installed" in output, output[-2000:]
    fix = sandbox.install_command(detect_system())
    assert fix in output, f"the message does not give this system's fix ({fix!r}):\n{output[-2000:]}"
    assert "--unsandboxed" in output, "the message should say how to grade trusted notebooks anyway"


# ---- the sandbox's messages, on machines faked under a temporary root ----

def fake_machine(tmp_path, os_release=None, settings=None):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    if os_release:
        (root / "etc" / "os-release").write_text(os_release)
    for name, value in (settings or {}).items():
        path = root / "proc" / "sys" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value}\n")
    return root


UBUNTU_2404 = 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\nPRETTY_NAME="Ubuntu 24.04.1 LTS"\n'
FEDORA = 'NAME="Fedora Linux"\nID=fedora\nVERSION_ID=40\nPRETTY_NAME="Fedora Linux 40 (Workstation Edition)"\n'


def message_for(monkeypatch, root, missing=(), probe=None):
    """check_available's message on the faked machine: `missing` programs are not installed, the
    others are (whatever this machine has); `probe` is what running bwrap gives there."""
    monkeypatch.setattr(sandbox.shutil, "which", lambda tool: None if tool in missing else f"/usr/bin/{tool}")
    if probe is not None:
        monkeypatch.setattr(sandbox.subprocess, "run", lambda *a, **k: probe)
    with pytest.raises(SandboxUnavailable) as caught:
        check_available(root=root)
    return str(caught.value)


def test_ubuntu_2404_without_bwrap_gets_apt_and_the_apparmor_setting(tmp_path, monkeypatch):
    root = fake_machine(tmp_path, UBUNTU_2404, {"kernel/apparmor_restrict_unprivileged_userns": 1})
    text = message_for(monkeypatch, root, missing=("bwrap",))
    assert text.splitlines()[0].startswith("`bwrap` is not installed"), text
    assert "Ubuntu 24.04.1 LTS" in text and "sudo apt-get install bubblewrap" in text, text
    assert "kernel.apparmor_restrict_unprivileged_userns" in text and "bwrap-userns-restrict" in text, text


def test_ubuntu_2404_namespaces_blocked_gets_the_apparmor_fix(tmp_path, monkeypatch):
    root = fake_machine(tmp_path, UBUNTU_2404, {"kernel/apparmor_restrict_unprivileged_userns": 1})
    denied = subprocess.CompletedProcess([], 1, "", "bwrap: setting up uid map: Permission denied\n")
    text = message_for(monkeypatch, root, probe=denied)
    assert "could not create its namespaces" in text and "setting up uid map" in text, text
    assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in text, text


def test_fedora_gets_dnf(tmp_path, monkeypatch):
    text = message_for(monkeypatch, fake_machine(tmp_path, FEDORA), missing=("bwrap",))
    assert "sudo dnf install bubblewrap" in text and "apt-get" not in text, text
    assert "apparmor" not in text, "no AppArmor advice where the setting is not on"


def test_namespaces_switched_off_on_debian(tmp_path, monkeypatch):
    root = fake_machine(tmp_path, 'ID=debian\nPRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\n',
                        {"kernel/unprivileged_userns_clone": 0})
    failed = subprocess.CompletedProcess([], 1, "", "bwrap: No permissions to creating new namespace\n")
    text = message_for(monkeypatch, root, probe=failed)
    assert "sudo sysctl -w kernel.unprivileged_userns_clone=1" in text, text


def test_macos_is_told_to_use_linux(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox.sys, "platform", "darwin")
    with pytest.raises(SandboxUnavailable) as caught:
        check_available()
    text = str(caught.value)
    assert "runs only on Linux" in text and "macOS" in text and "VM" in text, text


# ---- the Makefile ----

def make_copy(tmp_path):
    """The Makefile (and what its install rule depends on) in an empty folder."""
    folder = tmp_path / "clone"
    folder.mkdir()
    for name in ("Makefile", "requirements.txt", "requirements-test.txt", "constraints.txt"):
        shutil.copy(REPO / name, folder / name)
    return folder


def test_make_clean_leaves_the_course_folder(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    clone = make_copy(tmp_path)
    gradebook = clone / "course" / "gradebook.db"
    manual = clone / "course" / "autograded" / "alice" / AID / f"{AID}.ipynb"
    for path in (gradebook, manual, clone / "out" / "demo" / "grades.csv"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("kept?")
    result = subprocess.run(["make", "clean"], cwd=clone, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert gradebook.exists() and manual.exists(), \
        f"`make clean` deleted the course folder (the gradebook and manual grades): {result.stdout}"
    assert not (clone / "out").exists(), "`make clean` should still remove generated outputs (out/)"


def test_make_checks_the_python_version_first(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    clone = make_copy(tmp_path)
    old = tmp_path / "python3.10"
    old.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then echo "Python 3.10.12"; exit 0; fi\nexit 1\n')
    old.chmod(0o755)
    result = subprocess.run(["make", "install", f"PYTHON={old}"], cwd=clone, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0, "make went on with Python 3.10"
    assert "needs Python 3.11 or newer" in result.stderr and "Python 3.10.12" in result.stderr, result.stderr
    assert not (clone / ".venv").exists(), "the venv was created before the version check"
    ok = subprocess.run(["make", "python-version", f"PYTHON={sys.executable}"], cwd=clone, capture_output=True,
                        text=True, timeout=60)
    assert ok.returncode == 0, f"Python {sys.version.split()[0]} was refused: {ok.stderr}"


@pytest.mark.kernel
def test_grading_needs_nothing_of_the_environment_on_path(tmp_path):
    """`.venv/bin/python -m grader ...` without the venv's bin folder on PATH: nbgrader's new
    gradebook needs no `alembic` program there (grader/store.py), the kernel is this Python's."""
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    nbformat.write(perfect_submission(COURSE, AID), str(submissions / "alice.ipynb"))
    env = {**os.environ, "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "grader", "autograde", AID, str(submissions), "--unsandboxed",
                             "--course-dir", str(tmp_path / "course")], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert re.search(r"alice\s+18/18\s+graded", output), output[-3000:]
