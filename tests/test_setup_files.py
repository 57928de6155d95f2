"""Set-up files checked: environment.yml, requirements, constraints, README,
Makefile and CI agree with each other. Fast: reads files only."""
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent


def _requirement_lines(name):
    lines = []
    for raw in (REPO / name).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


def _pins(name):
    pins = {}
    for line in _requirement_lines(name):
        m = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)\s*==\s*([A-Za-z0-9_.+\-]+)", line)
        assert m, f"{name}: {line!r} is not pinned with =="
        pins[m.group(1).lower()] = m.group(2)
    return pins


@pytest.fixture(scope="module")
def env():
    data = yaml.safe_load((REPO / "environment.yml").read_text())
    assert isinstance(data, dict), "environment.yml is not a mapping"
    return data


def test_environment_yml_names_python_311(env):
    assert env.get("name"), "environment.yml has no name"
    deps = env["dependencies"]
    pythons = [d for d in deps if isinstance(d, str) and re.match(r"python\s*[=<>]", d)]
    assert pythons and all(re.fullmatch(r"python\s*=+\s*3\.11(\.\*|\.\d+)?", p) for p in pythons), pythons
    assert "pip" in deps, "environment.yml must install pip to use its pip section"


def test_environment_yml_pip_section_is_the_student_requirements(env):
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, "environment.yml needs exactly one pip section"
    entries = [e.strip() for e in pip_sections[0]]
    # exactly: the student set, held by the constraints file; nothing pinned twice
    assert sorted(entries) == sorted(["-r requirements-student.txt", "-c constraints.txt"]), entries


GRADING_ONLY = {"nbgrader", "dask", "distributed", "psycopg2-binary", "playwright", "pytest", "nbval", "copydetect"}


def test_student_requirements_are_the_instructor_pins_without_the_grader():
    student, full = _pins("requirements-student.txt"), _pins("requirements.txt")
    for pkg in ("torch", "matplotlib", "jupyterlab", "ipykernel"):
        assert pkg in student, f"requirements-student.txt does not pin {pkg}"
    assert not GRADING_ONLY & set(student), \
        f"students would install grading tools: {sorted(GRADING_ONLY & set(student))}"
    differ = {p: (v, full.get(p)) for p, v in student.items() if full.get(p) != v}
    assert not differ, f"requirements-student.txt pins other versions than requirements.txt (student, CI): {differ}"


def test_requirements_pin_every_package():
    pins = _pins("requirements.txt")
    assert pins, "requirements.txt is empty"
    for pkg in ("torch", "matplotlib", "jupyterlab", "nbgrader", "pytest", "nbval"):
        assert pkg in pins, f"requirements.txt does not pin {pkg}"


def test_constraints_hold_torch_and_agree_with_requirements():
    constraints = _pins("constraints.txt")
    assert constraints.get("torch") == "2.13.0", constraints
    requirements = _pins("requirements.txt")
    clashes = {p: (v, constraints[p]) for p, v in requirements.items()
               if p in constraints and constraints[p] != v}
    assert not clashes, f"requirements.txt and constraints.txt disagree: {clashes}"


def test_test_requirements_are_pinned():
    path = REPO / "requirements-test.txt"
    if path.exists():
        assert _pins("requirements-test.txt")


def _make_targets():
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.\-]+)\s*:(?!=)", text, flags=re.M)), text


def test_makefile_has_demo_and_test_targets():
    targets, text = _make_targets()
    assert {"demo", "test"} <= targets, sorted(targets)
    phony = re.search(r"^\.PHONY\s*:(.*)$", text, flags=re.M)
    assert phony and {"demo", "test"} <= set(phony.group(1).split()), "demo/test should be .PHONY"
    # the install uses the constraints, so torch cannot be moved by another package
    assert re.search(r"pip install .*-r requirements\.txt.*-c constraints\.txt", text), \
        "the Makefile's install does not use requirements.txt with constraints.txt"


def test_readme_commands_are_what_ci_runs():
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh|shell)?\n(.*?)```", readme, flags=re.S)
    commands = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    assert "make demo" in commands and "make test" in commands, \
        "the README should show `make demo` and `make test` as commands"
    ci = (REPO / ".ci" / "run").read_text()
    ci_commands = [line.split("#", 1)[0].strip() for line in ci.splitlines()]
    ci_commands = [c for c in ci_commands if c and not c.startswith(("set ", "cd ", "export "))]
    assert "make test" in ci_commands, f".ci/run does not run `make test`: {ci_commands}"
    # whatever else CI runs is set-up for the test command, not a second test command
    assert not any(re.search(r"\bpytest\b", c) for c in ci_commands), \
        ".ci/run runs pytest directly: the README's `make test` should be the one test command"


# ---- conventions: pyproject, LICENSE, CHANGELOG, CI workflow ----

@pytest.fixture(scope="module")
def pyproject():
    import tomllib
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _names(requirements):
    from packaging.requirements import Requirement
    return {Requirement(r).name.lower(): Requirement(r) for r in requirements}


def test_pyproject_builds_with_setuptools_and_installs_the_grader_command(pyproject):
    assert pyproject.get("build-system", {}).get("build-backend") == "setuptools.build_meta", \
        "pyproject.toml needs [build-system] with setuptools.build_meta"
    assert pyproject["project"].get("scripts", {}).get("grader") == "grader.cli:main", \
        "the `grader` console script should run grader.cli:main"
    assert pyproject["project"]["requires-python"] == ">=3.11"
    for path in pyproject["project"].get("license-files", []):
        assert (REPO / path).exists(), f"pyproject names a license file that is missing: {path}"


def test_pyproject_extras_cover_the_pinned_sets(pyproject):
    from packaging.version import Version
    project = pyproject["project"]
    extras = project.get("optional-dependencies", {})
    assert {"student", "instructor", "scale", "test"} <= set(extras), sorted(extras)
    base = _names(project["dependencies"])
    assert set(_names(extras["scale"])) == {"dask", "distributed", "psycopg2-binary"}, extras["scale"]
    assert "playwright" in _names(extras["test"]), extras["test"]
    checks = [("requirements-student.txt", {**base, **_names(extras["student"])}),
              ("requirements.txt", {**base, **_names(extras["instructor"]), **_names(extras["scale"])}),
              ("requirements-test.txt", _names(extras["test"]))]
    for filename, declared in checks:
        for pkg, version in _pins(filename).items():
            assert pkg in declared, f"{filename} pins {pkg}, which pyproject.toml does not list for that role"
            assert declared[pkg].specifier.contains(Version(version), prereleases=True), \
                f"{filename} pins {pkg}=={version}, outside pyproject.toml's {declared[pkg]}"
    assert not GRADING_ONLY & set({**base, **_names(extras["student"])}), "the student extra pulls in grading tools"


def test_pytest_settings_are_intact(pyproject):
    options = pyproject["tool"]["pytest"]["ini_options"]
    assert options["testpaths"] == ["tests", "solutions", "lectures"]
    declared = {m.split(":", 1)[0] for m in options["markers"]}
    assert {"batch", "browser", "hosted", "engine"} <= declared, declared


def test_license_says_what_each_license_covers():
    text = (REPO / "LICENSE").read_text()
    assert "MIT License" in text and "Permission is hereby granted, free of charge" in text
    assert "CC BY 4.0" in text and "creativecommons.org/licenses/by/4.0" in text
    code, content = text.index("Code: MIT"), text.index("Content: Creative Commons")
    assert "grader/" in text[code:content] and "Markdown" in text[content:], \
        "LICENSE should say the code (grader/, code cells) is MIT and the text and figures are CC BY 4.0"


def test_changelog_and_ci_workflow():
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.search(r"^## \[?Unreleased\]?", changelog, flags=re.M), "CHANGELOG.md has no Unreleased section"
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    runs = [step.get("run", "") for step in steps]
    assert any(re.search(r"(^|\s)(bash )?\.ci/run\b", run) for run in runs), \
        f"the GitHub workflow does not run .ci/run: {runs}"


def test_the_environment_builds_no_iri_grammar_when_nbformat_is_imported():
    """`make install` removes rfc3987-syntax (jupyter-events brings it): with it, importing jsonschema, and so
    nbformat, builds an IRI grammar in every process, about 1.8 CPU-s each (Makefile: DROP_IRI_GRAMMAR)."""
    import importlib.util
    assert importlib.util.find_spec("rfc3987_syntax") is None, \
        "rfc3987-syntax is installed in this environment: run `make install` (it removes it), or " \
        "`pip uninstall rfc3987-syntax`"
