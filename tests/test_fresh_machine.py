"""`make test` on a fresh machine (Python 3.11 and make, nothing else): every test that needs a
system part skips with its reason, the run ends with one line naming what was skipped and the one
command that installs it, and REQUIRE_<PART>=1 (as CI sets) turns those skips into failures. Proved
here by running the suite's sandbox-dependent part with bubblewrap hidden from PATH."""
import os
import re
import subprocess
import sys

import pytest
from test_any_machine import path_without

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
