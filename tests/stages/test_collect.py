"""collect: one notebook per student from whatever the instructor was given -- a folder, a zip as
an LMS gives it, nbgrader's submitted/ or exchange layout; the latest attempt graded, the others
listed; names no preset reads listed as unrecognised, never dropped; a zip never writes outside."""
import datetime
import json
import zipfile

import nbformat
import pytest

from grader.stages.collect import collect
from grader.submission import Intake, Status
from support.grading import A1, open_batch


def _nb(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), str(path))


def _touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")



def test_folder_of_files_with_lms_names(collected, tmp_path):
    _nb(tmp_path / "d" / "alice.ipynb")
    _nb(tmp_path / "d" / "bob_a1_self_attention.ipynb")
    found = {s.student: s for s in collected(tmp_path / "d").submissions}
    assert set(found) == {"alice", "bob"}
    assert all(s.status == Status.PENDING for s in found.values())


def test_submitted_layout_missing_and_renamed(collected, tmp_path):
    _nb(tmp_path / "d" / "carol" / A1 / f"{A1}.ipynb")
    _nb(tmp_path / "d" / "dave" / A1 / "my_work.ipynb")
    (tmp_path / "d" / "erin" / A1).mkdir(parents=True)
    found = {s.student: s for s in collected(tmp_path / "d").submissions}
    assert found["carol"].path.name == f"{A1}.ipynb" and found["carol"].reason == ""
    assert any("renamed" in note for note in found["dave"].notes)
    assert found["erin"].path is None and f"no {A1}.ipynb" in found["erin"].reason


def test_zip_from_an_lms(collected, tmp_path):
    _nb(tmp_path / "src" / f"frank_{A1}.ipynb")
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(tmp_path / "src" / f"frank_{A1}.ipynb", f"submissions/frank_{A1}.ipynb")
    [submission] = collected(archive).submissions
    assert submission.student == "frank" and submission.path.name == f"frank_{A1}.ipynb"


def test_zip_slip_is_refused(collected, tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("../outside.ipynb", "{}")
    with pytest.raises(ValueError, match="unsafe path"):
        collected(archive)
    assert not (tmp_path / "outside.ipynb").exists()


def test_a_missing_source_says_so(collected, tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        collected(tmp_path / "nowhere")


def test_blackboard_attempts_and_receipts(collected, tmp_path):
    _touch(tmp_path / "bb" / f"{A1}_jdoe_attempt_2026-10-01-22-15-03_a1.ipynb")
    _touch(tmp_path / "bb" / f"{A1}_jdoe_attempt_2026-10-02-09-00-00_a1.ipynb")
    _touch(tmp_path / "bb" / f"{A1}_jdoe_attempt_2026-10-02-09-00-00.txt")   # Blackboard's receipt
    intake = collected(tmp_path / "bb")
    assert intake.preset == "blackboard"
    [only] = intake.submissions
    assert only.login == "jdoe" and only.submitted_at.astimezone().hour == 9 and len(only.others) == 1
    assert any("graded the latest file" in note for note in only.notes)
    assert intake.unrecognised == [], "the receipt is neither a submission nor an unreadable name"


def test_nbgrader_exchange_takes_the_latest(collected, tmp_path):
    _touch(tmp_path / "ex" / f"alice+{A1}+2026-10-01 10:00:00.000000 UTC+abc123" / f"{A1}.ipynb")
    _touch(tmp_path / "ex" / f"alice+{A1}+2026-10-02 10:00:00.000000 UTC+def456" / f"{A1}.ipynb")
    intake = collected(tmp_path / "ex")
    [alice] = intake.submissions
    assert intake.preset == "nbgrader" and alice.submitted_at.day == 2 and "def456" in str(alice.path)


def test_pattern_and_unrecognised_files(collected, tmp_path):
    _touch(tmp_path / "p" / "hw1-alice-20261001T1200.ipynb")
    _touch(tmp_path / "p" / "README.txt")
    intake = collected(tmp_path / "p", pattern=r"hw1-(?P<student>[a-z]+)-(?P<timestamp>\d{8}T\d{4})")
    assert [s.login for s in intake.submissions] == ["alice"]
    [unread] = intake.unrecognised
    assert unread.student == "README.txt" and unread.status == Status.UNRECOGNISED
    assert "use --lms or --pattern" in unread.reason
    with pytest.raises(ValueError, match="named group"):
        collected(tmp_path / "p", pattern=r"hw1-(\w+)")


def test_the_nbgrader_keys_are_not_submissions(collected, tmp_path):
    folder = tmp_path / "submitted" / "alice" / A1
    _nb(folder / f"{A1}.ipynb")
    (folder / "timestamp.txt").write_text("2026-10-01 12:00:00.000000 UTC")
    (folder / "submission_secret.txt").write_text("s3cr3t")
    intake = collected(tmp_path / "submitted")
    [alice] = intake.submissions
    assert alice.student == "alice" and alice.submitted_at.day == 1 and alice.others == []
    assert intake.unrecognised == []


def _canvas_zip(path, names, stamped):
    """A Canvas download as Canvas builds it: every entry stamped with the moment the zip is made."""
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(zipfile.ZipInfo(name, date_time=stamped.timetuple()[:6]), nbformat.writes(
                nbformat.v4.new_notebook()))
    return path


def test_zip_entry_times_are_never_submission_times(collected, tmp_path):
    """Downloaded two days after the deadline: without the LMS's records nobody's time is known
    (never two days late); with Canvas's submissions JSON every time is the LMS's own."""
    import datetime
    import json
    due = datetime.datetime(2026, 10, 1, 23, 59, tzinfo=datetime.timezone.utc)
    download = _canvas_zip(tmp_path / "download.zip", [f"doejane_101_5001_{A1}.ipynb",
                                                       f"smithjohn_LATE_102_5002_{A1}.ipynb"],
                           due + datetime.timedelta(days=2))
    found = {s.login: s for s in collected(download).submissions}
    assert found["101"].submitted_at is None and found["102"].submitted_at is None
    assert found["102"].lms_late is True, "Canvas's own LATE flag is kept"
    times = tmp_path / "submissions.json"
    times.write_text(json.dumps([{"user_id": 101, "submitted_at": "2026-10-01T21:15:00Z", "late": False},
                                 {"user_id": 102, "submitted_at": "2026-10-03T05:59:00Z", "late": True}]))
    found = {s.login: s for s in collected(download, times=str(times)).submissions}
    assert found["101"].submitted_at == due - datetime.timedelta(hours=2, minutes=44)
    assert found["102"].submitted_at - due == datetime.timedelta(hours=30)


def test_a_moodle_worksheet_names_and_times_each_participant(collected, tmp_path):
    download = tmp_path / "moodle"
    _nb(download / f"Participant_4711_assignsubmission_file/{A1}.ipynb")       # blind marking
    _nb(download / f"John Smith_4712_assignsubmission_file_/{A1}.ipynb")
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_text(
        'Identifier,"Full name","Email address",Status,"Last modified (submission)"\n'
        '"Participant 4711","Jane Doe",jane@uni.example,Submitted,"Thursday, 1 October 2026, 10:15 PM"\n'
        '"Participant 4712","John Smith",john@uni.example,Submitted,"Friday, 2 October 2026, 8:00 AM"\n')
    found = {s.login: s for s in collected(download, worksheet=str(worksheet), lms_timezone="UTC").submissions}
    assert (found["4711"].name, found["4711"].email) == ("Jane Doe", "jane@uni.example")
    assert found["4711"].submitted_at.hour == 22 and found["4712"].submitted_at.day == 2


# ---- notebooks deeper in a student's upload, and students' own zips ----

def test_a_notebook_in_a_subfolder_is_found_and_noted(collected, tmp_path):
    """Moodle keeps the student's own folders below the participant's folder
    (mod/assign/classes/downloader.php: the prefix, then the file's own path); a plain folder of
    students may hold Name/submission/<id>.ipynb."""
    moodle = tmp_path / "moodle"
    _nb(moodle / "Jane Doe_4711_assignsubmission_file" / "a3_flops_io" / f"{A1}.ipynb")
    [jane] = collected(moodle, lms="moodle").submissions
    assert jane.path.parent.name == "a3_flops_io" and jane.notes == [f"notebook found in a3_flops_io/: {A1}.ipynb"]
    plain = tmp_path / "plain"
    _nb(plain / "bob" / "submission" / "my_work.ipynb")
    [bob] = collected(plain).submissions
    assert bob.student == "bob" and "notebook found in submission/: my_work.ipynb" in bob.notes


def test_among_several_notebooks_the_expected_name_then_the_top_one_else_no_guess(collected, tmp_path):
    folder = tmp_path / "d"
    _nb(folder / "alice" / "drafts" / "old.ipynb")
    _nb(folder / "alice" / "work" / f"{A1}.ipynb")                 # the expected name, deeper
    _nb(folder / "carol" / "mine.ipynb")                            # the one at the top of her folder
    _nb(folder / "carol" / "scratch" / "try.ipynb")
    _nb(folder / "dave" / "x" / "one.ipynb")                        # two, equally deep, neither expected
    _nb(folder / "dave" / "y" / "two.ipynb")
    found = {s.student: s for s in collected(folder).submissions}
    assert found["alice"].path.name == f"{A1}.ipynb" and "drafts/old.ipynb" in found["alice"].others
    assert found["carol"].path.name == "mine.ipynb"
    assert found["dave"].path is None
    assert "several other notebooks (x/one.ipynb, y/two.ipynb)" in found["dave"].reason


def _student_zip(path, members):
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members:
            archive.writestr(name, text)
    return path


def test_a_students_zip_is_opened_and_its_notebook_graded(course, tmp_path):
    """Moodle's file submissions take any file type by default: a student uploads a zip of their
    folder. Only its notebooks are unpacked, into the batch's scratch space."""
    download = tmp_path / "moodle"
    _student_zip(download / "Jane Doe_4711_assignsubmission_file" / "work.zip",
                 [(f"a1/{A1}.ipynb", nbformat.writes(nbformat.v4.new_notebook())), ("a1/data.csv", "1,2"),
                  ("__MACOSX/a1/._a1.ipynb", "junk")])
    with open_batch(course, tmp_path / "batch") as batch:
        [jane] = collect(Intake(download), batch).submissions
        assert jane.path.name == f"{A1}.ipynb" and nbformat.read(str(jane.path), as_version=4).cells == []
        assert batch.scratch in jane.path.parents, "unpacked into the batch's scratch space, never the download"
    assert [p.name for p in download.rglob("*")] == ["Jane Doe_4711_assignsubmission_file", "work.zip"]
    assert jane.notes == [f"notebook found in work.zip/a1/: {A1}.ipynb"]


@pytest.mark.parametrize("members, reason", [
    ([("../../escape.ipynb", "{}")], "unsafe path in work.zip: ../../escape.ipynb"),
    ([("notes.txt", "hello")], "work.zip holds no notebook"),
    ([(f"n{i}.ipynb", "{}") for i in range(21)], "holds more notebooks than a submission does (21 notebooks"),
])
def test_a_students_zip_that_gives_no_notebook_says_why(collected, tmp_path, members, reason):
    download = tmp_path / "moodle"
    _student_zip(download / "Jane Doe_4711_assignsubmission_file" / "work.zip", members)
    [jane] = collected(download, lms="moodle").submissions
    assert jane.path is None and reason in jane.reason and "no notebook in the submission" in jane.reason
    assert not (tmp_path / "escape.ipynb").exists() and not (download / "escape.ipynb").exists()


def test_a_file_named_zip_that_is_not_one_says_so(collected, tmp_path):
    download = tmp_path / "moodle"
    (download / "Jane Doe_4711_assignsubmission_file").mkdir(parents=True)
    (download / "Jane Doe_4711_assignsubmission_file" / "work.zip").write_text("not a zip")
    [jane] = collected(download, lms="moodle").submissions
    assert jane.path is None and "work.zip cannot be opened as a zip" in jane.reason


# ---- two uploads of one name; records that cover part of the download ----

def _nb_with(path, source):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), str(path))


def test_two_versions_of_one_name_in_a_moodle_submission_are_never_guessed(collected, tmp_path):
    """Moodle's file picker names an upload whose name is taken "name (1).ext"
    (lib/filestorage/file_storage.php, get_unused_filename); the download stamps every entry with the
    moment it is built (core_files zip_writer, addFileFromStream) and the worksheet has one time for
    the whole submission: nothing says which of the two came last."""
    download = tmp_path / "moodle"
    _nb_with(download / "Jane Doe_4711_assignsubmission_file" / f"{A1}.ipynb", "x = 1")
    _nb_with(download / "Jane Doe_4711_assignsubmission_file" / f"{A1} (1).ipynb", "x = 2")
    _nb_with(download / "John Smith_4712_assignsubmission_file" / f"{A1}.ipynb", "y = 1")
    (download / "John Smith_4712_assignsubmission_file" / f"{A1} (1).ipynb").write_bytes(     # the same bytes
        (download / "John Smith_4712_assignsubmission_file" / f"{A1}.ipynb").read_bytes())
    _nb_with(download / "Sam Wilson_4713_assignsubmission_file" / f"{A1}.ipynb", "z = 1")
    _nb_with(download / "Sam Wilson_4713_assignsubmission_file" / "scratch.ipynb", "z = 2")
    found = {s.login: s for s in collected(download, lms="moodle").submissions}
    jane = found["4711"]
    assert jane.path is None and f"two versions of {A1}.ipynb in one submission" in jane.reason
    assert f"{A1} (1).ipynb" in jane.reason and "--student" in jane.reason
    john = found["4712"]
    assert john.path is not None and any("identical copies" in note for note in john.notes)
    sam = found["4713"]
    assert sam.path.name == f"{A1}.ipynb"
    [note] = sam.notes
    assert note.startswith(f"graded {A1}.ipynb (the assignment's name; nothing records which file came last)")
    assert "latest" not in note, "no time ordered them: the table must not call the graded file the latest"


def _page(path, users, anonymous=False):
    """One page of GET /api/v1/courses/:course_id/assignments/:assignment_id/submissions (the Submission
    objects of the API's documentation; anonymous_id only for an administrator's token)."""
    path.write_text(json.dumps([{"user_id": uid, "submitted_at": "2026-10-01T21:00:00Z", "late": False,
                                 **({"anonymous_id": f"an{uid}"} if anonymous else {})} for uid in users]))
    return path


def test_times_that_cover_part_of_the_download_are_named_and_counted(collected, tmp_path):
    """Canvas's API answers a page at a time (10 unless per_page says more, and per_page is capped);
    saving the URL once keeps the first page: the students on later pages would be "time unknown"
    without a word."""
    names = [f"student{uid}_{uid}_{5000 + uid}_{A1}.ipynb" for uid in range(101, 113)]
    download = _canvas_zip(tmp_path / "download.zip", names, datetime.datetime(2026, 10, 3))
    first = _page(tmp_path / "page1.json", range(101, 111))
    intake = collected(download, times=str(first))
    [warning] = intake.warnings
    assert "hold no record of 2 of the 12 submissions in the download" in warning
    assert "student111 (111), student112 (112)" in warning
    assert "&page=2" in warning and "page1.json holds 10, a whole page of Canvas's API" in warning
    assert sum(s.submitted_at is None for s in intake.submissions) == 2
    second = _page(tmp_path / "page2.json", [111, 112])
    intake = collected(download, times=(str(first), str(second)))
    assert intake.warnings == [] and all(s.submitted_at for s in intake.submissions)


def test_a_worksheet_that_matches_no_folder_says_so(collected, tmp_path):
    download = tmp_path / "moodle"
    _nb(download / f"Jane Doe_4711_assignsubmission_file/{A1}.ipynb")
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_text('Identifier,"Full name",Status,"Last modified (submission)"\n'
                         '"Participant 9001","Ann Other",Submitted,"Thursday, 1 October 2026, 8:00 PM"\n')
    [warning] = collected(download, worksheet=str(worksheet), lms_timezone="UTC").warnings
    assert "the worksheet (worksheet.csv) has no row for 1 of the 1 submissions" in warning
    assert "Jane Doe (4711)" in warning and "this assignment's worksheet" in warning


def test_an_anonymous_canvas_file_gets_its_user_from_the_admins_json(collected, tmp_path):
    download = _canvas_zip(tmp_path / "download.zip",
                           [f"anon_an101_5001_{A1}.ipynb", f"LATE_anon_an102_5002_{A1}.ipynb"],
                           datetime.datetime(2026, 10, 3))
    found = {s.login: s for s in collected(download, times=str(_page(tmp_path / "p.json", [101, 102],
                                                                       anonymous=True))).submissions}
    assert found["anon_an101"].lms_user_id == "101" and found["anon_an102"].lms_user_id == "102"
    assert found["anon_an101"].submitted_at is not None
