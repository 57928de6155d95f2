"""What every test shares: the course (the checkout the tests run in), and the system parts some
tests need (tests/support/system.py): a test marked `sandbox`, `browser`, `hub` or `postgres` skips
where that part is missing, and fails under REQUIRE_<PART>=1."""
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from grader.sandbox import GRADED_RUN_ENV  # noqa: E402
from support import COURSE, system  # noqa: E402

# The quality gate runs notebooks in this process, as graded runs: where the machine has no GPU, Triton's
# interpreter runs a7's kernels, and Triton must know before anything in this process first imports it
# (transformers, torch._dynamo and torch.utils.flop_counter do; triton.language makes tl.max and tl.sum then)
if "TRITON_INTERPRET" in GRADED_RUN_ENV:
    os.environ.setdefault("TRITON_INTERPRET", GRADED_RUN_ENV["TRITON_INTERPRET"])


@pytest.fixture(scope="session")
def course():
    """The course of this checkout (its grading folder is never touched by a test: pass
    `course.with_grading_dir(tmp_path / "course")` to anything that grades)."""
    return COURSE


@pytest.fixture(scope="session")
def a1_solution_nb(course):
    from grader import cells
    return cells.read(course.source_notebook("a1_self_attention"))


SLOW = ("kernel", "notebook", "gate", "batch", "hosted", "engine", "browser", "hub")


def pytest_collection_modifyitems(config, items):
    """Every notebook run by nbval is marked `notebook`; every test with a slow marker also `slow`
    (`make test-fast` runs -m "not slow")."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)
        if any(item.get_closest_marker(name) for name in SLOW):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    missing = [(part, part.missing()) for part in system.PARTS if item.get_closest_marker(part.marker)]
    missing = [(part, why) for part, why in missing if why is not None]
    for part, why in missing:
        if part.required:
            pytest.fail(f"{part.require}=1 but this machine lacks {part.what}: {why}", pytrace=False)
    if missing:
        pytest.skip("; ".join(system.skip_reason(part, why) for part, why in missing))


def pytest_unconfigure(config):
    """The run's last line: what was skipped for want of a system part, and the command that
    installs them all (after pytest's own summary, so that it is the line a newcomer reads)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    messages = []
    for report in reporter.stats.get("skipped", []):
        longrepr = report.longrepr
        messages.append(longrepr[2] if isinstance(longrepr, tuple) else str(longrepr))
    line = system.summary(messages)
    if line:
        reporter.write_line(line, yellow=True, bold=True)


@pytest.fixture
def collected(course, tmp_path):
    """collect(source, lms=..., pattern=...) -> the Intake the collect stage makes of `source`."""
    from grader.stages.collect import collect
    from grader.submission import Intake
    from support.grading import open_batch

    def run(source, **options):
        with open_batch(course, tmp_path / "batch", **options) as batch:
            return collect(Intake(source), batch)
    return run
