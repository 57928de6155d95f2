"""Group submissions (`autograde --groups FILE`): one file per group in the download, graded for
every member under the member's own id, each row saying "group <name>"; members of a group that
submitted are never missing; a bad groups file is a message, never a traceback.

The downloads are written as each LMS writes them (the source is named at each fixture); the
intake stages (collect, identify) run without a kernel, one end-to-end run grades for real."""
import csv
import zipfile

import nbformat
import pytest

from grader.groups import GroupsError, read_groups
from grader.roster import import_roster
from grader.stages.collect import collect
from grader.stages.identify import identify
from grader.submission import Intake, Status
from support.cli import run_cli
from support.grading import A1, ROSTER, open_batch


def _nb(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), str(path))
    return path


@pytest.fixture
def intake(course, tmp_path):
    """intake(source, groups=FILE, roster=True, **options) -> the Intake after collect and identify."""
    def run(source, roster=True, **options):
        with open_batch(course, tmp_path / "batch", **options) as batch:
            if roster:
                (tmp_path / "roster.csv").write_text(ROSTER)
                import_roster(batch.course, tmp_path / "roster.csv")
            return identify(collect(Intake(source), batch), batch)
    return run


def _by_student(intake):
    return {s.student: s for s in intake.submissions}


# ---- Canvas ----

def _canvas_group_download(folder):
    """A Canvas group assignment's "Download Submissions", as canvas-lms builds it: one file per
    group (Assignment#representatives picks one member per group and gives it the group's name),
    named by lib/content_zipper.rb: the group name lowercased with everything but letters, digits
    and _ removed, [LATE_], the representative's user id, the attachment id, the file's name. A
    student in no group keeps a file of their own, under their name."""
    _nb(folder / f"team7_101_5001_{A1}.ipynb")                 # group "Team 7": jdoe (101) + jsmith
    _nb(folder / f"theotters_LATE_105_5002_{A1}.ipynb")        # group "The Otters": bkim + alee (105)
    _nb(folder / f"samwilson_103_5003_{A1}.ipynb")             # swilson, in no group
    return folder


def _canvas_group_export(path, with_sis=True):
    """Canvas's group set export (GroupCategoriesController#export): name (sortable),
    canvas_user_id, user_id (SIS, when the exporter may read it), login_id, sections, group_name,
    canvas_group_id, group_id; a student in no group has an empty group_name."""
    header = ["name", "canvas_user_id", "user_id", "login_id", "sections", "group_name", "canvas_group_id", "group_id"]
    rows = [("Doe, Jane", "101", "S101", "jdoe", "Section 1", "Team 7", "9001", ""),
            ("Smith, John", "102", "S102", "jsmith", "Section 1", "Team 7", "9001", ""),
            ("Kim, Bo", "104", "S104", "bo.kim@uni.example", "Section 1", "The Otters", "9002", ""),
            ("Lee, Ann", "105", "S105", "alee", "Section 1", "The Otters", "9002", ""),
            ("Wilson, Sam", "103", "S103", "swilson", "Section 1", "", "", "")]
    keep = [i for i, column in enumerate(header) if with_sis or column not in ("user_id", "group_id")]
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows([[row[i] for i in keep] for row in [header, *rows]])
    return path


def test_canvas_group_files_are_graded_for_every_member(intake, tmp_path):
    download = _canvas_group_download(tmp_path / "canvas")
    result = intake(download, groups=str(_canvas_group_export(tmp_path / "Project Groups.csv")))
    found = _by_student(result)
    assert set(found) == {"jdoe", "jsmith", "bkim", "alee", "swilson"}
    assert found["jdoe"].path == found["jsmith"].path == download / f"team7_101_5001_{A1}.ipynb"
    assert found["bkim"].path == found["alee"].path == download / f"theotters_LATE_105_5002_{A1}.ipynb"
    assert found["jsmith"].notes[0] == "group Team 7" and found["jsmith"].group == "Team 7"
    assert found["bkim"].lms_late is True, "Canvas's LATE flag on the group's file is every member's"
    assert found["swilson"].group == "" and found["swilson"].path.name == f"samwilson_103_5003_{A1}.ipynb"
    assert result.missing == [] and result.strangers == []


def test_without_the_groups_file_only_the_representative_is_graded(intake, tmp_path):
    """What --groups changes: Canvas names one member per group, the others would be missing."""
    result = intake(_canvas_group_download(tmp_path / "canvas"))
    assert {s.student for s in result.submissions} == {"jdoe", "alee", "swilson"}
    assert {s.student for s in result.missing} == {"jsmith", "bkim"}


def test_canvas_export_without_sis_columns(tmp_path):
    """An exporter who may not read SIS data gets no user_id and no group_id column."""
    groups = read_groups(_canvas_group_export(tmp_path / "groups.csv", with_sis=False))
    assert groups.form == "canvas"
    assert [m.default_id for m in groups.groups["team7"].members] == ["jdoe", "jsmith"]
    assert "swilson" not in {m.default_id for g in groups.groups.values() for m in g.members}


# ---- Moodle ----

def _moodle_team_download(folder):
    """Moodle's "Download all submissions" with team submissions (mod/assign/classes/downloader.php,
    get_student_prefix): one folder per group, the group's name (its _ made spaces) and the group
    id, then _assignsubmission_file; the students in no group share "Default group", without an id.
    The student's own folders stay below."""
    _nb(folder / f"Team Alpha_12_assignsubmission_file/{A1}.ipynb")
    _nb(folder / f"Team Beta_13_assignsubmission_file/work/{A1}.ipynb")
    _nb(folder / f"Default group_assignsubmission_file/{A1}.ipynb")
    return folder


def _moodle_participants(path):
    """Moodle's participants download (user/classes/participants_table.php): First name, Last name,
    the identity fields, Roles, Groups (the student's groups, ", " between them)."""
    path.write_text("First name,Last name,Email address,Roles,Groups\n"
                    "Jane,Doe,jane.doe@uni.example,Student,Team Alpha\n"
                    'Bo,Kim,bo.kim@uni.example,Student,"Team Alpha, Lab section 2"\n'
                    "Ann,Lee,ann.lee@uni.example,Student,Team Beta\n"
                    "Sam,Wilson,sam.wilson@uni.example,Student,No groups\n")
    return path


def test_moodle_team_folders_are_graded_for_every_member(intake, tmp_path):
    download = _moodle_team_download(tmp_path / "moodle")
    result = intake(download, lms="moodle", groups=str(_moodle_participants(tmp_path / "participants.csv")))
    found = _by_student(result)
    assert set(found) == {"jdoe", "bkim", "alee"}
    assert found["jdoe"].path == found["bkim"].path
    assert "Team Alpha_12" in str(found["jdoe"].path) and found["jdoe"].notes == ["group Team Alpha"]
    assert found["alee"].notes == ["group Team Beta", f"notebook found in work/: {A1}.ipynb"]
    [default] = [s for s in result.strangers if s.student == "Default group"]
    assert "students in no group" in default.reason and "'Default group'" in default.reason
    assert {s.student for s in result.missing} == {"jsmith", "swilson"}


def test_without_the_groups_file_a_moodle_team_folder_says_what_to_pass(intake, tmp_path):
    result = intake(_moodle_team_download(tmp_path / "moodle"), lms="moodle")
    assert result.submissions == []
    reasons = {s.login: s.reason for s in result.strangers}
    assert reasons["12"].endswith("if it is a team's folder, name the team's members with --groups FILE")
    assert "students in no group" in reasons["Default group"] and "--groups FILE" in reasons["Default group"]


# ---- the plain CSV, one member who also submitted alone ----

def test_a_member_who_also_submitted_alone_is_graded_with_the_group(intake, tmp_path):
    download = tmp_path / "folder"
    _nb(download / "team-a" / f"{A1}.ipynb")
    _nb(download / "jdoe" / f"{A1}.ipynb")                     # jdoe is in team-a too
    groups = tmp_path / "groups.csv"
    groups.write_text("group,student\nteam-a,jdoe\nteam-a,john.smith@uni.example\nteam-a,104\n")
    found = _by_student(intake(download, groups=str(groups)))
    assert set(found) == {"jdoe", "jsmith", "bkim"}, "by roster id, e-mail and LMS user id"
    assert all(s.path == download / "team-a" / f"{A1}.ipynb" for s in found.values())
    assert any("also submitted alone" in note and "graded with group team-a" in note for note in found["jdoe"].notes)


def test_without_a_roster_members_are_named_as_the_file_names_them(intake, tmp_path):
    download = tmp_path / "folder"
    _nb(download / "team-a" / f"{A1}.ipynb")
    groups = tmp_path / "groups.csv"
    groups.write_text("group,student\nteam-a,alice\nteam-a,bob\n")
    found = _by_student(intake(download, roster=False, groups=str(groups)))
    assert set(found) == {"alice", "bob"}


# ---- bad groups files ----

def test_a_group_without_members_and_an_unknown_member_are_reported(intake, tmp_path):
    download = tmp_path / "folder"
    _nb(download / "team-a" / f"{A1}.ipynb")
    _nb(download / "team-b" / f"{A1}.ipynb")
    groups = tmp_path / "groups.csv"
    groups.write_text("group,student\nteam-a,jdoe\nteam-a,nobody@else.example\nteam-b,\n")
    result = intake(download, groups=str(groups))
    assert [s.student for s in result.submissions] == ["jdoe"]
    reasons = {s.student: s.reason for s in result.strangers}
    assert "group team-b has no members in groups.csv" in reasons["group team-b"]
    assert "not on the roster" in reasons["nobody@else.example (group team-a)"]
    assert all(s.status == Status.NOT_ON_ROSTER for s in result.strangers)


def test_a_groups_file_naming_nobody_on_the_roster_says_so(intake, tmp_path):
    _nb(tmp_path / "folder" / "team-a" / f"{A1}.ipynb")
    groups = tmp_path / "groups.csv"
    groups.write_text("group,student\nteam-a,zed\nteam-a,yan\n")
    with pytest.raises(GroupsError, match=r"none of its 2 group members is on the roster \(it names e.g. zed, yan\)"):
        intake(tmp_path / "folder", groups=str(groups))


def test_a_groups_file_of_another_group_set_says_so(intake, tmp_path):
    _nb(tmp_path / "folder" / "team-a" / f"{A1}.ipynb")
    groups = tmp_path / "groups.csv"
    groups.write_text("group,student\nLab 1,jdoe\n")
    with pytest.raises(GroupsError, match="no file of the download is named after a group .*its groups: Lab 1"):
        intake(tmp_path / "folder", groups=str(groups))


@pytest.mark.parametrize("text, message", [
    ("name,id\nx,1\n", "first row should name the columns `group` and `student`"),
    ("group,student\n,jdoe\n", "line 2: the group is empty"),
    ("", "found nothing"),
    ('name,canvas_user_id,login_id,sections,group_name\n"Doe, Jane",101,jdoe,S1,\n', "puts nobody in a group"),
])
def test_unreadable_groups_files_say_what_was_expected(tmp_path, text, message):
    path = tmp_path / "groups.csv"
    path.write_text(text)
    with pytest.raises(GroupsError, match=message):
        read_groups(path)


def test_the_command_line_reports_a_bad_groups_file_without_a_traceback(course, tmp_path):
    _nb(tmp_path / "folder" / "team-a" / f"{A1}.ipynb")
    groups = tmp_path / "groups.csv"
    groups.write_text("team,who\nteam-a,jdoe\n")
    status, _, _ = run_cli("autograde", A1, str(tmp_path / "folder"), "--groups", str(groups), "--unsandboxed",
                           course=tmp_path / "course")
    assert status.startswith("autograde: ") and "`group` and `student`" in status


# ---- end to end ----

@pytest.mark.kernel
def test_a_canvas_group_graded_end_to_end(course, tmp_path):
    """Through the command line, kernels and all: both members of the group get the group's score
    in the gradebook, under their own ids, and the table names the group."""
    from grader import store
    from grader.samples import perfect_submission
    download = tmp_path / "download.zip"
    with zipfile.ZipFile(download, "w") as archive:
        archive.writestr(f"team7_101_5001_{A1}.ipynb", nbformat.writes(perfect_submission(course, A1)))
    (tmp_path / "roster.csv").write_text(ROSTER)
    assert run_cli("roster", "import", str(tmp_path / "roster.csv"), course=tmp_path / "course")[0] == 0
    groups = _canvas_group_export(tmp_path / "g.csv")
    status, table, _ = run_cli("autograde", A1, str(download), "--groups", str(groups), "--unsandboxed",
                               "--workers", "2", course=tmp_path / "course")
    assert status == 0, table
    rows = {line.split()[0]: line for line in table.splitlines() if line.split()[:1] in (["jdoe"], ["jsmith"])}
    assert set(rows) == {"jdoe", "jsmith"} and all("group Team 7" in row for row in rows.values()), table
    with store.gradebook(f"sqlite:///{tmp_path / 'course' / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission(A1, s).score for s in ("jdoe", "jsmith")}
    assert scores["jdoe"] == scores["jsmith"] > 0, "the group's score, under each member's own id"
    assert all(f" {scores['jdoe']:g}/" in row for row in rows.values()), table
    assert "missing" not in rows["jsmith"]


# ---- Moodle team submissions with the grading worksheet ----

def _team_worksheet(path):
    """The grading worksheet of a team assignment (mod/assign/gradingtable.php: a row per participant,
    its Group column the participant's team, col_team; "Last modified (submission)" the team's
    submission time on every member's row; Status with "<time> late" counted from the member's own due
    date and "Extension granted until: ..." when they have one). Bo's extension is his alone."""
    path.write_text("\n".join([
        'Identifier,"Full name","Email address",Status,Group,Grade,"Maximum grade","Grade can be changed",'
        '"Last modified (submission)","Last modified (grade)"',
        '"Participant 4711","Jane Doe",jane.doe@uni.example,"Submitted for grading - 1 day 6 hours late",'
        '"Team Alpha",,100.00,Yes,"Saturday, 3 October 2026, 5:59 AM",-',
        '"Participant 4712","Bo Kim",bo.kim@uni.example,"Submitted for grading - Extension granted until: '
        'Monday, 5 October 2026, 11:59 PM","Team Alpha",,100.00,Yes,"Saturday, 3 October 2026, 5:59 AM",-',
        '"Participant 4713","Ann Lee",ann.lee@uni.example,"Submitted for grading","Team Beta",,100.00,Yes,'
        '"Thursday, 1 October 2026, 8:00 PM",-',
        '"Participant 4714","Sam Wilson",sam.wilson@uni.example,"Submitted for grading","Default group",,100.00,Yes,'
        '"Thursday, 1 October 2026, 9:00 PM",-',
        '"Participant 4715","John Smith",john.smith@uni.example,"Submitted for grading","Default group",,100.00,Yes,'
        '"Thursday, 1 October 2026, 9:00 PM",-',
    ]) + "\n")
    return path


def test_moodle_teams_from_the_worksheet_get_their_times_and_each_members_own_number(intake, tmp_path):
    """Without --groups the worksheet's Group column says who is in each team; every member's time is
    the team's (never "time unknown" for want of a row under the group's id), their extension and
    Moodle's late verdict their own, and the name their feedback goes back under carries their own
    participant number: Moodle's importer gives a file to the one participant its name carries."""
    download = _moodle_team_download(tmp_path / "moodle")
    result = intake(download, lms="moodle", worksheet=str(_team_worksheet(tmp_path / "worksheet.csv")),
                    lms_timezone="UTC")
    found = _by_student(result)
    assert set(found) == {"jdoe", "bkim", "alee", "swilson", "jsmith"} and result.missing == []
    assert result.strangers == [] and result.warnings == []
    assert {s: found[s].lms_name for s in found} == {
        "jdoe": "Jane Doe_4711_assignsubmission_file", "bkim": "Bo Kim_4712_assignsubmission_file",
        "alee": "Ann Lee_4713_assignsubmission_file", "swilson": "Sam Wilson_4714_assignsubmission_file",
        "jsmith": "John Smith_4715_assignsubmission_file"}
    assert found["jdoe"].submitted_at == found["bkim"].submitted_at and found["jdoe"].submitted_at.day == 3
    assert (found["jdoe"].lms_late, found["jdoe"].lms_extension) == (True, None)
    assert found["bkim"].lms_extension.day == 5 and found["bkim"].lms_records_read
    assert found["swilson"].path == found["jsmith"].path and "Default group" in str(found["swilson"].path)


def test_moodle_teams_with_the_groups_file_still_take_each_members_row(intake, tmp_path):
    download = _moodle_team_download(tmp_path / "moodle")
    result = intake(download, lms="moodle", groups=str(_moodle_participants(tmp_path / "participants.csv")),
                    worksheet=str(_team_worksheet(tmp_path / "worksheet.csv")), lms_timezone="UTC")
    found = _by_student(result)
    assert found["bkim"].lms_name == "Bo Kim_4712_assignsubmission_file" and found["bkim"].lms_extension.day == 5
    assert found["alee"].submitted_at.day == 1 and result.warnings == []


def test_a_team_member_without_a_worksheet_gets_no_name_feedback_could_misdeliver(intake, tmp_path):
    """The team folder's number is the group's id: used as a participant number, Moodle would drop
    the file or give it to whoever has that number."""
    result = intake(_moodle_team_download(tmp_path / "moodle"), lms="moodle",
                    groups=str(_moodle_participants(tmp_path / "participants.csv")))
    assert all(s.lms_name == "" for s in result.submissions)
    assert all(s.submitted_at is None for s in result.submissions)


def test_a_group_id_that_is_also_a_participants_number_is_never_taken_for_them(intake, tmp_path):
    """Group ids and participant numbers are counted apart in Moodle (groups, assign_user_mapping):
    Team Beta's folder may carry 4711, Jane's number. It is Team Beta's, whose rows give its time."""
    download = tmp_path / "moodle"
    _nb(download / f"Team Alpha_12_assignsubmission_file/{A1}.ipynb")
    _nb(download / f"Team Beta_4711_assignsubmission_file/{A1}.ipynb")
    result = intake(download, lms="moodle", worksheet=str(_team_worksheet(tmp_path / "worksheet.csv")),
                    lms_timezone="UTC")
    found = _by_student(result)
    assert found["alee"].path.parent.name == "Team Beta_4711_assignsubmission_file"
    assert found["alee"].submitted_at.day == 1 and found["alee"].lms_name == "Ann Lee_4713_assignsubmission_file"
    assert found["jdoe"].submitted_at.day == 3 and found["jdoe"].lms_name == "Jane Doe_4711_assignsubmission_file"
    assert found["alee"].email == "ann.lee@uni.example"
