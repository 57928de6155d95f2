"""The grader as an installable package: pyproject builds a wheel with every
subpackage and the `grader` console script, and the installed package works on the course found
from the current directory, not on the folder it was installed from."""
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from grader.course import PACKAGE_REPO, Course, CourseNotFound

REPO = Path(__file__).resolve().parent.parent


def make_course(folder):
    """The markers of a course (nbgrader_config.py, solutions/) with one assignment in it."""
    (folder / "solutions" / "a1_self_attention").mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", folder / "nbgrader_config.py")
    shutil.copy(REPO / "solutions" / "a1_self_attention" / "a1_self_attention.ipynb",
                folder / "solutions" / "a1_self_attention")
    (folder / "lectures").mkdir()
    return folder


def test_course_root_is_found_from_the_current_directory(tmp_path):
    course = make_course(tmp_path / "my-course")
    assert Course.find(course / "lectures", environ={}).root == course.resolve()
    assert Course.find(course, environ={}).root == course.resolve()
    assert Course.find(course, environ={}).grading_dir == course.resolve() / "course"
    assert Course.find(course, environ={}, grading_dir=tmp_path / "g").grading_dir == tmp_path / "g"
    # outside any course: the checkout the package comes from
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert Course.find(outside, environ={}).root == PACKAGE_REPO
    # an explicit root wins, and must be a course
    assert Course.find(outside, environ={"GRADER_COURSE_ROOT": str(course)}).root == course.resolve()
    with pytest.raises(CourseNotFound, match="not a course folder"):
        Course.find(course, environ={"GRADER_COURSE_ROOT": str(outside)})


def test_importing_the_grader_finds_no_course_and_changes_nothing(tmp_path):
    """The course is found by the command line, once; importing any module reads no folder, exits
    nothing and leaves PATH as it was (a GRADER_COURSE_ROOT that is no course cannot break an import)."""
    code = ("import os, sys, pkgutil, importlib; path = os.environ['PATH']; import grader; "
            "[importlib.import_module(m.name) for m in pkgutil.walk_packages(grader.__path__, 'grader.') "
            "if m.name != 'grader.__main__']; print(os.environ['PATH'] == path)")
    env = {**__import__("os").environ, "GRADER_COURSE_ROOT": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-1] == "True", "an import changed PATH"
    said = subprocess.run([sys.executable, "-m", "grader", "release"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert said.returncode != 0 and "is not a course folder" in said.stderr and "Traceback" not in said.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """A wheel built from a copy of the sources (no build/ or egg-info in the repository) by the build backend
    pyproject.toml names, through its PEP 517 hook, in a fresh process: what `pip wheel --no-build-isolation`
    does, without pip's own start-up (a second of CPU)."""
    source = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "grader", source / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    backend = tomllib.loads((source / "pyproject.toml").read_text())["build-system"]["build-backend"]
    code = f"import sys, importlib; importlib.import_module({backend!r}).build_wheel(sys.argv[1])"
    result = subprocess.run([sys.executable, "-c", code, str(out)], cwd=source, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"the build backend ({backend}) failed:\n{result.stderr[-3000:]}"
    [built] = out.glob("attention_course-*.whl")
    return built


def test_wheel_has_the_whole_grader_and_its_command(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("grader/cli.py", "grader/course.py", "grader/provided/checks.py", "grader/provided/device.py",
                   "grader/runtime/record.py", "grader/runtime/execute_worker.py", "grader/stages/sanitize.py"):
        assert needed in names, f"the wheel lacks {needed}"
    assert not any(name.startswith(("solutions/", "mutants/", "tests/")) for name in names), \
        "the wheel carries course content or tests"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[console_scripts]" in text and "grader = grader.cli:main" in text, text


def test_installed_grader_works_on_the_course_in_the_current_directory(wheel, tmp_path):
    """The package unpacked elsewhere (as pip installs it), run from inside another course: it
    sees that course's assignments, not this repository's."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    course = make_course(tmp_path / "my-course")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from grader.course import Course; c = Course.find(); "
            "print(c.root); print(','.join(c.assignment_ids()))")
    result = subprocess.run([sys.executable, "-c", code, str(site)], cwd=course / "lectures",
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    root, ids = result.stdout.split()
    assert Path(root) == course.resolve(), f"the installed grader works on {root}, expected {course}"
    assert ids == "a1_self_attention", ids
    # the console script's function, as the `grader` command calls it
    result = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                             "from grader.cli import main; sys.exit(main(['--help']))", str(site)],
                            cwd=course, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "autograde" in result.stdout, result.stdout + result.stderr
