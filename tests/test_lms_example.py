"""A new LMS is one module with a FORMAT (grader/lms/base.py: LmsFormat): registered, it is read by
`--lms NAME` and by `--lms auto`, offered by the command line, named in messages, and packed by
`feedback --zip NAME`. The module is the made-up one of docs/architecture.md (tests/support)."""
import datetime
from pathlib import Path, PurePosixPath

import pytest

from grader import lms
from grader.cli import build_parser
from grader.stages.identify import describe
from grader.submission import Submission
from support import example_lms

A1 = "a1_self_attention"
FILES = [f"ada__20261001T220000Z__{A1}.ipynb", f"bo.li__20261002T080000Z__{A1}.ipynb", "readme.txt"]


@pytest.fixture
def quizhub(monkeypatch):
    monkeypatch.setattr(lms, "FORMATS", dict(lms.FORMATS))    # registered for this test only
    return lms.register(example_lms.FORMAT)


def _files():
    return [(PurePosixPath(name), Path("/download") / name) for name in FILES]


def test_a_registered_lms_reads_its_download(quizhub):
    name, found, unrecognised = lms.read_names(_files(), A1, lms="quizhub")
    assert name == "quizhub" and [f.login for f in found] == ["ada", "bo.li"]
    assert found[0].submitted_at == datetime.datetime(2026, 10, 1, 22, tzinfo=datetime.UTC)
    assert unrecognised == [PurePosixPath("readme.txt")]
    assert lms.read_names(_files(), A1, lms="auto")[0] == "quizhub"     # it reads the most names


def test_the_command_line_and_the_messages_know_it(quizhub):
    args = build_parser().parse_args(["autograde", A1, "download.zip", "--lms", "quizhub"])
    assert args.lms == "quizhub"
    assert build_parser().parse_args(["feedback", A1, "--zip", "quizhub"]).zip == "quizhub"
    assert describe(Submission("ada", None, login="ada", preset="quizhub")) == "(Quizhub user ada)"


def test_its_feedback_zip_names_each_page(quizhub):
    assert "quizhub" in lms.feedback_zip_formats()
    assert quizhub.feedback_name({"lms_name": FILES[1]}, A1) == ("bo.li__feedback.html", None)
    name, why = quizhub.feedback_name({"lms_name": "ada.ipynb"}, A1)
    assert name is None and "not Quizhub's" in why


def test_without_registering_it_is_unknown():
    assert "quizhub" not in lms.choices()
    with pytest.raises(ValueError, match="unknown --lms 'quizhub'"):
        lms.read_names(_files(), A1, lms="quizhub")
