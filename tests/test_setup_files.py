"""Set-up files checked (issue 8, part 3): environment.yml, requirements, constraints, README,
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


def test_environment_yml_pip_section_is_the_requirements(env):
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, "environment.yml needs exactly one pip section"
    entries = [e.strip() for e in pip_sections[0]]
    # exactly: the requirements file, held by the constraints file; nothing pinned twice
    assert sorted(entries) == sorted(["-r requirements.txt", "-c constraints.txt"]), entries


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
