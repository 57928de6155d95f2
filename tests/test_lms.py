"""How each LMS names the files of a download (grader/lms/): who sent a file, when, and which
attempt it is; anything a preset cannot read is left for `unrecognised`, never guessed."""
import datetime
from pathlib import Path, PurePosixPath

import pytest

from grader import lms

A1 = "a1_self_attention"


def read(preset, name, when=None):
    return lms.FORMATS[preset].read_name(PurePosixPath(name), Path("/download") / name, A1, when)


def test_canvas_names_late_flags_and_reuploads():
    """canvas-lms lib/content_zipper.rb: [sortable name]_[LATE_]<user id>_<attachment id>_<display name>,
    the name lowercased with everything but letters, digits and underscores removed; anonymous
    grading writes anon_<anonymous id> for the name and the user id; re-uploads are renamed -1, -2."""
    found = read("canvas", f"doejane_101_5001_{A1}.ipynb")
    assert (found.login, found.name, found.lms_late, found.revision) == ("101", "doejane", False, 0)
    late = read("canvas", f"smithjohn_LATE_102_5002_{A1}-2.ipynb")
    assert (late.login, late.lms_late, late.revision) == ("102", True, 2)
    underscored = read("canvas", "o_brien_103_5004_my work.ipynb")
    assert (underscored.login, underscored.name) == ("103", "o_brien")
    anonymous = read("canvas", f"LATE_anon_acJ4Q_5003_{A1}.ipynb")
    assert (anonymous.login, anonymous.name, anonymous.lms_late) == ("anon_acJ4Q", "", True)
    assert read("canvas", f"folder/doejane_101_5001_{A1}.ipynb") is None, "Canvas downloads are flat"
    assert read("canvas", "notes.txt") is None


def test_moodle_participant_folders_and_flat_names():
    """mod/assign/classes/downloader.php: <Full Name>_<participant id>_assignsubmission_file (Moodle
    4.1+; a trailing _ before), Participant_<n> under blind marking, or the prefix on flat names."""
    found = read("moodle", "Jane Doe_101_assignsubmission_file_/my work.ipynb")
    assert (found.login, found.name) == ("101", "Jane Doe")
    assert read("moodle", "Jane Doe_101_assignsubmission_file/my work.ipynb").login == "101"
    blind = read("moodle", f"Participant_4711_assignsubmission_file/{A1}.ipynb")
    assert (blind.login, blind.name) == ("4711", "Participant")
    flat = read("moodle", f"Jane Doe_101_assignsubmission_file_{A1}.ipynb")
    assert flat.login == "101"
    nested = read("moodle", "Jane Doe_4711_assignsubmission_file/a3_flops_io/a3_flops_io.ipynb")
    assert (nested.login, nested.inside) == ("4711", "a3_flops_io"), "the student's own folder is kept below"
    assert read("moodle", "Jane Doe/a1.ipynb") is None


def test_blackboard_attempt_times_and_receipts():
    found = read("blackboard", f"{A1}_jdoe_attempt_2026-10-01-22-15-03_a1.ipynb")
    assert found.login == "jdoe" and found.submitted_at.astimezone().hour == 22 and not found.receipt
    assert read("blackboard", f"{A1}_jdoe_attempt_2026-10-01-22-15-03.txt").receipt


def test_nbgrader_submitted_and_exchange_layouts(tmp_path):
    folder = tmp_path / "alice" / A1
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text("2026-10-01 12:00:00.000000 UTC")
    found = lms.nbgrader.read_name(PurePosixPath(f"alice/{A1}/{A1}.ipynb"), folder / f"{A1}.ipynb", A1)
    assert found.login == "alice" and found.submitted_at == datetime.datetime(2026, 10, 1, 12, tzinfo=datetime.UTC)
    inbound = read("nbgrader", f"bob+{A1}+2026-10-02 09:00:00.000000 UTC+abc/{A1}.ipynb")
    assert inbound.login == "bob" and inbound.submitted_at.day == 2
    assert read("nbgrader", "bob+a2_multihead_masking+2026-10-02 09:00:00 UTC/x.ipynb") is None


def test_folder_names():
    assert read("folder", "alice.ipynb").login == "alice"
    assert read("folder", "README.txt") is None
    assert read("folder", f"bob_{A1}.ipynb").login == "bob"
    assert read("folder", "carol/anything.ipynb").login == "carol"
    deep = read("folder", "dave/submission/work/d.ipynb")    # a student's own folders: theirs, noted where
    assert (deep.login, deep.inside) == ("dave", "submission/work")
    assert read("folder", "dave/submission/data.csv") is None, "a data file deep in a folder is no attempt"


def test_auto_takes_the_preset_that_reads_most():
    names = [f"doejane_101_5001_{A1}.ipynb", f"smithjohn_102_5002_{A1}.ipynb", "README.txt"]
    files = [(PurePosixPath(n), Path("/d") / n) for n in names]
    preset, found, unrecognised = lms.read_names(files, A1)
    assert preset == "canvas" and len(found) == 2
    assert unrecognised == [PurePosixPath("README.txt")]
    with pytest.raises(ValueError, match="unknown --lms 'sakai'"):
        lms.read_names(files, A1, lms="sakai")


def test_times_in_every_form_and_a_clear_error():
    utc = datetime.timezone.utc
    assert lms.parse_time("2026-10-01T23:59:00+02:00") == datetime.datetime(2026, 10, 1, 21, 59, tzinfo=utc)
    assert lms.parse_time("Thursday, 1 October 2026, 11:59 PM", "Europe/Berlin") == \
        datetime.datetime(2026, 10, 1, 21, 59, tzinfo=utc), "Moodle's userdate, in the LMS's zone"
    assert lms.parse_time("2026-10-01 23:59", "America/New_York").hour == 3
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Base'"):
        lms.parse_time("2026-10-01 23:59", "Mars/Base")
    assert lms.parse_time("2026-10-01 12:00:00.000000 UTC") == datetime.datetime(2026, 10, 1, 12, tzinfo=utc)
    assert lms.parse_time("2026-10-01 23:59").tzinfo == utc
    with pytest.raises(ValueError, match="expected e.g. '2026-10-01 23:59'"):
        lms.parse_time("next tuesday")


def test_hidden_files_and_nbgrader_keys_are_never_submissions(tmp_path):
    for name in ("alice.ipynb", ".hidden.ipynb", "__MACOSX/alice.ipynb", "bob/.ipynb_checkpoints/x.ipynb",
                 "bob/timestamp.txt", "bob/submission_secret.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    assert [str(rel) for rel, _ in lms.relative_files(tmp_path)] == ["alice.ipynb"]
