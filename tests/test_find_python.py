"""deploy/jupyterhub/find_python.sh, the choice of the hub environment's Python (install.sh step 2):
any 3.11 or newer with its venv module that every hub user can run, with fake interpreters on a
PATH of their own (small shell scripts that answer the script's two questions: the version, and
whether `import ensurepip, venv` works)."""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIND_PYTHON = REPO / "deploy" / "jupyterhub" / "find_python.sh"
BASH = shutil.which("bash")


@pytest.fixture
def machine():
    """A folder every user can enter (as root the script tries each interpreter as `nobody`, who
    cannot enter pytest's own tmp folders), with bin/ for the interpreters and tools/ for the
    commands the script needs (and no real Python)."""
    folder = Path(tempfile.mkdtemp(prefix="find-python-"))
    try:
        os.chmod(folder, 0o755)
        for sub in ("bin", "tools"):
            (folder / sub).mkdir(mode=0o755)
        for tool in ("id", "runuser"):
            found = shutil.which(tool)
            if found:
                (folder / "tools" / tool).symlink_to(found)
        yield folder
    finally:
        shutil.rmtree(folder)


def fake_python(folder, name, version, venv=True, private=False):
    """bin/NAME answering `-c CODE`: the version when asked, and `import ensurepip, venv` per `venv`."""
    where = folder / ("private" if private else "bin")
    where.mkdir(exist_ok=True, mode=0o700 if private else 0o755)
    path = where / name
    path.write_text("#!/bin/sh\n"
                    'case "$2" in\n'
                    f'  *version_info*) echo {version} ;;\n'
                    f'  *ensurepip*) exit {0 if venv else 1} ;;\n'
                    "  *) exit 3 ;;\n"
                    "esac\n")
    path.chmod(0o755)
    return path


def find(folder, **env):
    environ = {"PATH": f"{folder / 'bin'}:{folder / 'tools'}", "HOME": str(folder), **env}
    return subprocess.run([BASH, str(FIND_PYTHON)], capture_output=True, text=True, env=environ, timeout=60)


def test_ubuntu_24_04_python3_is_3_12(machine):
    """No python3.11 at all, python3 is 3.12 with its venv module: that one."""
    python3 = fake_python(machine, "python3", "3.12")
    result = find(machine)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(python3)


def test_the_first_that_qualifies_in_order(machine):
    fake_python(machine, "python3.11", "3.11", venv=False)       # Debian's without python3.11-venv
    python312 = fake_python(machine, "python3.12", "3.12")
    fake_python(machine, "python3", "3.12")
    result = find(machine)
    assert result.stdout.strip() == str(python312), result.stderr


def test_3_11_comes_first_when_several_qualify(machine):
    fake_python(machine, "python3.13", "3.13")
    python311 = fake_python(machine, "python3.11", "3.11")
    assert find(machine).stdout.strip() == str(python311)


def test_too_old(machine):
    fake_python(machine, "python3", "3.10")
    result = find(machine)
    assert result.returncode == 1 and result.stdout == ""
    assert "no Python 3.11 or newer" in result.stderr
    assert f"{machine / 'bin' / 'python3'}: Python 3.10 (3.11 or newer needed)" in result.stderr
    assert "apt-get install python3.12-venv" in result.stderr          # what to do on Ubuntu 24.04


def test_no_venv_module_says_which_package(machine):
    fake_python(machine, "python3.12", "3.12", venv=False)
    result = find(machine)
    assert result.returncode == 1
    assert "Python 3.12 without its venv module (Debian, Ubuntu: apt-get install python3.12-venv)" in result.stderr


def test_none_on_path(machine):
    result = find(machine)
    assert result.returncode == 1
    assert "none of python3.11 python3.12 python3.13 python3.14 python3 is on PATH" in result.stderr


def test_course_hub_python_is_the_only_candidate(machine):
    fake_python(machine, "python3.11", "3.11")
    chosen = fake_python(machine, "python3.13", "3.13")
    assert find(machine, COURSE_HUB_PYTHON=str(chosen)).stdout.strip() == str(chosen)
    result = find(machine, COURSE_HUB_PYTHON=str(machine / "bin" / "python9"))
    assert result.returncode == 1, "a wrong COURSE_HUB_PYTHON must not be replaced by another interpreter"
    assert "COURSE_HUB_PYTHON is set, so it is the only one tried" in result.stderr
    assert "python9: not an executable file" in result.stderr


def test_a_python_in_a_private_folder_is_refused_as_root(machine):
    """As root, each candidate runs as `nobody`: one in a private folder (like /root/.pyenv) fails."""
    if os.geteuid() != 0 or not (machine / "tools" / "runuser").exists():
        pytest.skip("needs root and runuser (the script tries other users' access only as root)")
    hidden = fake_python(machine, "python3.11", "3.11", private=True)
    result = find(machine, COURSE_HUB_PYTHON=str(hidden))
    assert result.returncode == 1
    assert "cannot be run by another user" in result.stderr


def test_a_private_python_first_on_path_is_passed_over_for_one_every_user_can_run(machine):
    """A pyenv shim, a conda base or a venv under /root first on PATH: as root the script skips it
    (it cannot be run as `nobody`) and takes the next python3.11 that qualifies."""
    if os.geteuid() != 0 or not (machine / "tools" / "runuser").exists():
        pytest.skip("needs root and runuser (the script tries other users' access only as root)")
    fake_python(machine, "python3.11", "3.11", private=True)
    public = fake_python(machine, "python3.11", "3.11")
    result = find(machine, PATH=f"{machine / 'private'}:{machine / 'bin'}:{machine / 'tools'}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(public)


def test_install_sh_uses_it():
    text = (REPO / "deploy" / "jupyterhub" / "install.sh").read_text()
    assert 'bash "$here/find_python.sh"' in text
    assert "sys.version_info[:2] == (3, 11)" not in text, "install.sh still insists on exactly 3.11"
