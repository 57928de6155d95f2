"""`make test` on a fresh machine (Python 3.11 and make, nothing else): every test that needs a
system part skips with its reason, the run ends with one line naming what was skipped and the one
command that installs it, and REQUIRE_<PART>=1 (as CI sets) turns those skips into failures. Proved
here by running the suite's sandbox-dependent part with bubblewrap hidden from PATH."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_any_machine import path_without
from test_find_python import fake_python

from support import REPO, system

pytestmark = pytest.mark.slow


def run_sandbox_tests(tmp_path, **env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REQUIRE_")}
    clean.update(PATH=path_without(tmp_path, "bwrap"), **env)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-m", "sandbox", "tests"],
                          cwd=REPO, env=clean, capture_output=True, text=True, timeout=600)


def test_without_bubblewrap_the_sandbox_tests_skip_and_the_last_line_says_why(tmp_path):
    run = run_sandbox_tests(tmp_path)
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"the sandbox tests did not all skip without bubblewrap:\n{output[-4000:]}"
    counts = re.search(r"(\d+) skipped", output)
    assert counts and int(counts.group(1)) >= 20, f"expected the sandbox tests to be skipped:\n{output[-3000:]}"
    assert not re.search(r"\d+ (passed|failed|error)", output), output[-3000:]
    summary = run.stdout.strip().splitlines()[-1]
    # every sandbox test lacks bubblewrap here; some may lack another part too (Chromium, the hub)
    assert summary.startswith(f"skipped on this machine: {counts.group(1)} for want of bubblewrap (the grading "
                              "sandbox)"), summary
    assert summary.endswith(f"`{system.INSTALL}` installs them all (CI requires them)"), summary


def test_required_parts_fail_instead_of_skipping(tmp_path):
    run = run_sandbox_tests(tmp_path, REQUIRE_SANDBOX="1")
    output = run.stdout + run.stderr
    assert run.returncode != 0, "REQUIRE_SANDBOX=1 without bubblewrap should fail the run"
    assert "REQUIRE_SANDBOX=1 but this machine lacks bubblewrap (the grading sandbox): `bwrap` is not installed" \
        in output, output[-3000:]
    assert "skipped on this machine" not in output


# The hub's Python on a machine whose first python3.11 on PATH no other user can run (a pyenv shim
# under /root, a conda base or a venv in a private home): `sudo make system-deps` and `.ci/run` go
# through .ci/install_test_deps.sh, which leaves the choice to deploy/jupyterhub/find_python.sh.

def _folder(mode, under=None):
    folder = Path(tempfile.mkdtemp(prefix="hub-python-", dir=under))
    folder.chmod(mode)
    return folder


def _in_memory(room_gib=8):
    """/dev/shm when it is a tmpfs with room for a throwaway hub environment (3 GB, and pip's unpacking
    beside it) and the memory to hold it, else None (the default temporary folder). There its files never
    reach the disk, and removing them takes a second: on a disk mounted with `discard`, as this machine's
    is, unlinking 3 GB of files takes minutes."""
    shm = Path("/dev/shm")
    try:
        with open("/proc/meminfo") as meminfo:
            available = next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:"))
        usable = shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) and shutil.disk_usage(shm).free
    except (OSError, StopIteration):
        return None
    return shm if usable and min(usable, available) >= room_gib * 2**30 else None


def _python_wrapper(folder, name="python3.11"):
    """folder/NAME: a working Python for whoever can enter `folder`."""
    path = folder / name
    path.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return path


@pytest.fixture
def private_python():
    """A python3.11 in a folder only root can enter, as a pyenv shim under /root is."""
    folder = _folder(0o700)
    try:
        yield _python_wrapper(folder)
    finally:
        shutil.rmtree(folder)


@pytest.fixture
def ci_copy():
    """A copy of .ci/install_test_deps.sh and find_python.sh with install.sh replaced by a stub that
    prints what it was given and find_python.sh's choice (in a folder every user can enter), and a
    stand-in python3.11 that every user can run."""
    root = _folder(0o755)
    try:
        (root / ".ci").mkdir()
        (root / "deploy" / "jupyterhub").mkdir(parents=True)
        shutil.copy2(REPO / ".ci" / "install_test_deps.sh", root / ".ci")
        shutil.copy2(REPO / "deploy" / "jupyterhub" / "find_python.sh", root / "deploy" / "jupyterhub")
        shutil.copy2(REPO / "requirements-test.txt", root)
        (root / "deploy" / "jupyterhub" / "install.sh").write_text(
            '#!/usr/bin/env bash\nhere="$(cd "$(dirname "$0")" && pwd)"\n'
            'echo "given COURSE_HUB_PYTHON=${COURSE_HUB_PYTHON-<unset>} COURSE_HUB_ENV=${COURSE_HUB_ENV-<unset>}"\n'
            'chosen="$(bash "$here/find_python.sh")" || exit 1\necho "chosen $chosen"\n')
        yield root, fake_python(root, "python3.11", "3.11")     # root/bin/python3.11, runnable by anyone
    finally:
        shutil.rmtree(root)


def run_install_test_deps(script, private_python, path_after, **env):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_HUB_")}
    environ.update(PATH=f"{private_python.parent}:{path_after}", **env)
    return subprocess.run(["bash", str(script), "/nonexistent-venv"], env=environ, capture_output=True, text=True,
                          timeout=1200)


@pytest.mark.hub
def test_install_test_deps_leaves_the_hub_python_to_find_python(ci_copy, private_python):
    root, public = ci_copy
    script = root / ".ci" / "install_test_deps.sh"
    run = run_install_test_deps(script, private_python, f"{public.parent}:/usr/bin:/bin")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "given COURSE_HUB_PYTHON=<unset> COURSE_HUB_ENV=<unset>" in run.stdout, run.stdout
    assert f"chosen {public}" in run.stdout, f"expected the python3.11 every user can run:\n{run.stdout}{run.stderr}"


@pytest.mark.hub
def test_a_course_hub_python_the_user_set_is_passed_on_and_refused_with_a_clear_error(ci_copy, private_python):
    root, public = ci_copy
    script = root / ".ci" / "install_test_deps.sh"
    run = run_install_test_deps(script, private_python, f"{public.parent}:/usr/bin:/bin",
                                COURSE_HUB_PYTHON=str(private_python), COURSE_HUB_ENV="/srv/elsewhere")
    assert run.returncode != 0, run.stdout
    assert f"given COURSE_HUB_PYTHON={private_python} COURSE_HUB_ENV=/srv/elsewhere" in run.stdout, run.stdout
    assert "COURSE_HUB_PYTHON is set, so it is the only one tried" in run.stderr, run.stderr
    assert f"{private_python}: cannot be run by another user" in run.stderr, run.stderr


@pytest.mark.hub
def test_ci_install_step_makes_a_hub_environment_past_a_private_python(private_python):
    """`.ci/run`'s install step on a machine without the hub environment (COURSE_HUB_ENV points at a
    new folder), the first python3.11 on PATH private: it completes, from another interpreter."""
    hub_env_parent = _folder(0o755, under=_in_memory())
    hub_env = hub_env_parent / "venv"
    unpacking = hub_env_parent / "tmp"      # pip's temporary folder, beside the environment
    unpacking.mkdir()
    try:
        # this environment is thrown away: pip writes no bytecode for its 3 GB (PIP_NO_COMPILE=0 is pip's
        # --no-compile: a boolean option's variable sets its destination, `compile`); the commands that
        # configure it (jupyter labextension, jupyter server extension, jupyterhub --version) write the
        # bytecode of what they import, so that each one after the first does not compile it again
        # (PYTHONDONTWRITEBYTECODE empty is unset)
        run = run_install_test_deps(REPO / ".ci" / "install_test_deps.sh", private_python, os.environ["PATH"],
                                    COURSE_HUB_ENV=str(hub_env), PIP_NO_COMPILE="0", PYTHONDONTWRITEBYTECODE="",
                                    TMPDIR=str(unpacking))
        output = run.stdout + run.stderr
        assert run.returncode == 0, output[-4000:]
        assert "install.sh: hub ready" in output, output[-4000:]
        made_from = re.search(r"making the hub environment \S+ from (\S+)", output)
        assert made_from and made_from.group(1) != str(private_python), output[-4000:]
        config = (hub_env / "pyvenv.cfg").read_text()
        assert str(private_python.parent) not in config, config
        assert (hub_env / "bin" / "jupyterhub").exists()
    finally:
        shutil.rmtree(hub_env_parent)
