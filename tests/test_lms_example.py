"""A new LMS is one module with a FORMAT (grader/lms/base.py: LmsFormat): registered, it is read by
`--lms NAME` and by `--lms auto`, offered by the command line, named in messages, packed by
`feedback --zip NAME`, its class list read by `roster import`, its teams by `--groups`, and its
gradebook import written by `export --format NAME`. The module is the made-up one of
docs/architecture.md (tests/support)."""
import csv
import datetime
from pathlib import Path, PurePosixPath

import pytest

from grader import export, lms
from grader.cli import build_parser
from grader.groups import read_groups
from grader.roster import RosterError, RosterStudent, read_roster_csv
from grader.stages.identify import describe
from grader.submission import Status, Submission
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


def test_roster_import_reads_its_class_list(quizhub, tmp_path):
    path = tmp_path / "class.csv"
    path.write_text("Username,Display name,Email\nada,Ada Lovelace,ada@uni.example\nbo.li,Bo Li,\n")
    students, form = read_roster_csv(path)
    assert form == "quizhub"
    assert [(s.id, s.first_name, s.last_name, s.email) for s in students] == [
        ("ada", "Ada", "Lovelace", "ada@uni.example"), ("bo.li", "Bo", "Li", "")]
    path.write_text("Login,Mail\nada,ada@uni.example\n")
    with pytest.raises(RosterError, match="Quizhub's class list"):     # offered among the forms read
        read_roster_csv(path)


def test_groups_reads_its_teams(quizhub, tmp_path):
    path = tmp_path / "teams.csv"
    path.write_text("Team,Username\nRed,ada\nRed,bo.li\n,cy\n")
    groups = read_groups(path)
    assert groups.form == "quizhub"
    assert {name: [m.key for m in g.members] for name, g in groups.groups.items()} == {"red": ["ada", "bo.li"]}


def test_export_writes_its_gradebook_import(quizhub, tmp_path, monkeypatch):
    people = [RosterStudent("ada"), RosterStudent("bo.li")]
    entries = {("ada", A1): export.Entry("ada", A1, Status.GRADED, total=7.5),
               ("bo.li", A1): export.Entry("bo.li", A1, Status.MISSING)}
    monkeypatch.setattr(export, "gather", lambda course, ids=None: (people, [A1], entries))
    assert build_parser().parse_args(["export", "--format", "quizhub"]).format == "quizhub"
    path, count, notes = export.export(None, tmp_path / "quizhub.csv", "quizhub")
    with open(path, newline="") as handle:
        assert list(csv.reader(handle)) == [["Username", A1], ["ada", "7.5"]]
    assert count == 1 and notes == ["left out, no total: bo.li"]
    with pytest.raises(ValueError, match="--template"):               # it has no template to fill
        export.export(None, tmp_path / "x.csv", "quizhub", template=tmp_path / "gradebook.csv")


def test_without_registering_it_is_unknown(tmp_path):
    assert "quizhub" not in lms.choices()
    with pytest.raises(ValueError, match="unknown --lms 'quizhub'"):
        lms.read_names(_files(), A1, lms="quizhub")
    with pytest.raises(ValueError, match="unknown format 'quizhub'"):
        export.export(None, tmp_path / "x.csv", "quizhub")
