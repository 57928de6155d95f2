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


# Roughly what one test of each kind takes on a 2-core machine, in seconds: only to order the scopes
# below, heaviest first; a test with none of these marks counts as a tenth of a second
SECONDS_BY_MARK = {"hub": 120, "browser": 40, "gate": 30, "hosted": 25, "batch": 15, "engine": 15, "kernel": 5,
                   "notebook": 2}


def pytest_collection_modifyitems(config, items):
    """Every test with a slow marker (a notebook's cells have theirs from ../conftest.py) is also `slow`
    (`make test-fast` runs -m "not slow"). Then the scopes pytest-xdist's --dist loadscope hands out (a
    test class, else a file) go heaviest first, each keeping its own order (a notebook's cells share one
    kernel). A long scope handed out last (the hub's walk-through: two tests on one hub, nearly two minutes)
    keeps the run waiting while the other worker idles; heaviest first, the many short tests fill the end
    instead. (`make test` passes --no-loadscope-reorder, which keeps this order rather than xdist's own:
    most tests first, which put every scope of one or two tests, the hub's and each gate part's, last.)"""
    for item in items:
        if any(item.get_closest_marker(name) for name in SLOW):
            item.add_marker(pytest.mark.slow)
    cost, first = {}, {}
    for index, item in enumerate(items):
        scope = _scope(item)
        marks = ["notebook"] if item.get_closest_marker("notebook") else SECONDS_BY_MARK   # a cell, hosted or not
        seconds = max([SECONDS_BY_MARK[name] for name in marks if item.get_closest_marker(name)], default=0.1)
        cost[scope] = cost.get(scope, 0) + seconds
        first.setdefault(scope, index)
    # a test that runs a whole notebook at once (the hosted runtime's run of it) takes about as long as
    # nbval's run of its cells: lecture 12's, over a minute, handed out last would end the run beside
    # the grading batches, which slow it by half
    for item in items:
        notebook = getattr(getattr(item, "function", None), "notebook", None)
        if notebook is not None:
            cost[_scope(item)] = max(cost[_scope(item)], cost.get(str(Path(notebook).relative_to(REPO)), 0))
    items.sort(key=lambda item: (-cost[_scope(item)], first[_scope(item)]))


def _scope(item):
    """The unit pytest-xdist's --dist loadscope hands to one worker: a test's class, else its file."""
    return item.nodeid.rsplit("::", 1)[0]


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
