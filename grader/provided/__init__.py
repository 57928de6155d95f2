"""Code shared by several notebooks, kept here once. Each file is the source of a locked
notebook cell (metadata course.provided = file name); `python -m grader sync` copies it in
and `python -m grader check` proves every copy matches."""
from pathlib import Path

PROVIDED_DIR = Path(__file__).parent


def provided_source(filename):
    return (PROVIDED_DIR / filename).read_text()


def checks_source():
    return provided_source("checks.py")
