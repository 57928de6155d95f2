"""The command line run in this process, as the tests drive it."""
import io
from contextlib import redirect_stderr, redirect_stdout

from grader.cli import main


def run_cli(*argv, course=None):
    """`python -m grader ARGV` (with `--course-dir COURSE` when given): its exit status and what it
    printed (stdout, stderr); a SystemExit's code is the status."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            status = main([*argv, *(["--course-dir", str(course)] if course is not None else [])])
        except SystemExit as stop:
            status = stop.code
    return status, out.getvalue(), err.getvalue()
