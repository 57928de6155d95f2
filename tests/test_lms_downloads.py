"""Downloads as Canvas and Moodle write them, from the intake to the exports and the feedback zip:
every student graded with the right file, time, penalty and identity, every row of an export and
every feedback file named for the student it belongs to. The intake stages run for real, the
notebook is graded once without a kernel (tests/support/grading.py) and recorded for each student.

    Canvas, anonymous grading: files named anon_<anonymous id>_<attachment id>_<name>
    (canvas-lms lib/content_zipper.rb), the submissions API saved by an administrator in two pages
    (anonymous_id is "only included if the caller has administrator access"; the API pages its
    answer: Canvas's API documentation, Submissions and Pagination).
    Moodle, team submissions: one folder per team, <Group name>_<group id>_assignsubmission_file
    (mod/assign/classes/downloader.php), the grading worksheet a row per participant with the team's
    time, Moodle's late verdict and each member's extension (mod/assign/gradingtable.php), feedback
    read back by mod/assign/feedback/file/importziplib.php."""
import csv
import dataclasses
import datetime
import json
import zipfile

import nbformat
import pytest

from grader import pipeline, term
from grader.export import export
from grader.feedback import feedback_zip
from grader.late_policy import penalty_config
from grader.roster import drop_students, import_roster
from grader.store import save_outcomes
from support.grading import A1, DUE, ROSTER, grade_without_kernel, open_batch, submission_file

HOUR = datetime.timedelta(hours=1)
# what the intake decides, carried onto the graded template for each student
KEPT = ("student", "login", "name", "email", "lms_name", "preset", "submitted_at", "lms_late", "lms_user_id",
        "lms_extension", "lms_records_read", "group")


def _zip(path, names):
    """Every entry stamped with the moment the LMS builds the zip (two days after the due date)."""
    built = (DUE + 48 * HOUR).timetuple()[:6]
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(zipfile.ZipInfo(name, date_time=built), nbformat.writes(nbformat.v4.new_notebook()))
    return path


def _moodle_date(when):
    """userdate() in English: strftimedaydatetime '%A, %d %B %Y, %I:%M %p', leading zeros of the day
    and the hour removed (its fixday and fixhour)."""
    return f"{when:%A}, {when.day} {when:%B %Y}, {int(when.strftime('%I'))}:{when:%M %p}"


def _grade(source, batch, template):
    """The intake of `source`, then each submission recorded (merge, late) with the template's
    grades; the outcomes saved and a feedback page written for each, as `feedback` would."""
    intake = pipeline.take_in(source, batch)
    done = [pipeline.record(dataclasses.replace(template, **{f: getattr(s, f) for f in KEPT}, notes=list(s.notes)),
                            batch) for s in intake.submissions]
    save_outcomes(batch.course, A1, done + intake.not_graded)
    for submission in done:
        page = batch.course.grading_dir / "feedback" / submission.student / A1 / f"{A1}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"<html><body>{submission.student}</body></html>")
    return intake, {s.student: s for s in done}


@pytest.fixture(scope="module")
def terms(course, tmp_path_factory):
    """One graded notebook; a course graded from Canvas's anonymous download and one from Moodle's
    team download, each with the roster of five and 10 %/day."""
    tmp = tmp_path_factory.mktemp("downloads")
    (tmp / "roster.csv").write_text(ROSTER)
    # Canvas: Jane on time, John 30 h late, Sam on time; Bo and Ann sent nothing
    canvas = _zip(tmp / "canvas.zip", [f"anon_acJ4Q_5001_{A1}.ipynb", f"LATE_anon_Xk2pR_5002_{A1}.ipynb",
                                       f"anon_m3Nq7_5003_{A1}.ipynb"])
    pages = []
    for number, rows in enumerate([[(101, "acJ4Q", DUE - HOUR), (102, "Xk2pR", DUE + 30 * HOUR)],
                                   [(103, "m3Nq7", DUE - 2 * HOUR), (104, "bB4cd", None)]], start=1):
        pages.append(tmp / f"submissions-page{number}.json")
        pages[-1].write_text(json.dumps([{"user_id": uid, "anonymous_id": anon, "late": bool(when and when > DUE),
                                          "submitted_at": when.isoformat() if when else None,
                                          "workflow_state": "submitted" if when else "unsubmitted"}
                                         for uid, anon, when in rows]))
    # Moodle: Team Alpha (Jane, Bo) 30 h late, Bo with an extension to DUE + 4 days; Team Beta (Ann) and
    # the default team (Sam, John) on time
    moodle = _zip(tmp / "moodle.zip", [f"Team Alpha_12_assignsubmission_file/{A1}.ipynb",
                                       f"Team Beta_13_assignsubmission_file/work/{A1}.ipynb",
                                       f"Default group_assignsubmission_file/{A1}.ipynb"])
    late_team, beta, default, extended = map(_moodle_date, (DUE + 30 * HOUR, DUE - HOUR, DUE - 2 * HOUR,
                                                             DUE + 96 * HOUR))
    (tmp / "worksheet.csv").write_text("\n".join([
        'Identifier,"Full name","Email address",Status,Group,Grade,"Maximum grade","Grade can be changed",'
        '"Last modified (submission)","Last modified (grade)"',
        f'"Participant 4711","Jane Doe",jane.doe@uni.example,"Submitted for grading - 1 day 6 hours late",'
        f'"Team Alpha",,100.00,Yes,"{late_team}",-',
        f'"Participant 4712","Bo Kim",bo.kim@uni.example,"Submitted for grading - Extension granted until: '
        f'{extended}","Team Alpha",,100.00,Yes,"{late_team}",-',
        f'"Participant 4713","Ann Lee",ann.lee@uni.example,"Submitted for grading","Team Beta",,100.00,Yes,"{beta}",-',
        f'"Participant 4714","Sam Wilson",sam.wilson@uni.example,"Submitted for grading","Default group",,100.00,'
        f'Yes,"{default}",-',
        f'"Participant 4715","John Smith",john.smith@uni.example,"Submitted for grading","Default group",,100.00,'
        f'Yes,"{default}",-',
    ]) + "\n")
    rule = penalty_config("10%/day")
    with open_batch(course, tmp / "canvas", due=DUE, late_penalty=rule, times=tuple(map(str, pages))) as on_canvas, \
            open_batch(course, tmp / "moodle", due=DUE, late_penalty=rule, lms="moodle", lms_timezone="UTC",
                       worksheet=str(tmp / "worksheet.csv")) as on_moodle:
        for batch in (on_canvas, on_moodle):
            import_roster(batch.course, tmp / "roster.csv")
            batch.prepare()
        template = grade_without_kernel(submission_file(course, tmp, "template"), on_canvas)
        return (tmp, template.score, (on_canvas.course, *_grade(canvas, on_canvas, template)),
                (on_moodle.course, *_grade(moodle, on_moodle, template)))


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def test_canvas_anonymous_files_reach_the_class_list_through_the_admins_json(terms):
    _, score, (_, intake, graded), _ = terms
    assert intake.warnings == [], "two pages, every anonymous id paired with its user"
    assert set(graded) == {"jdoe", "jsmith", "swilson"}
    assert {s.student for s in intake.missing} == {"bkim", "alee"}, "the class list is known again"
    assert graded["jsmith"].seconds_late == pytest.approx(30 * 3600, abs=1)
    assert graded["jsmith"].penalty == pytest.approx(0.2 * score) and graded["jdoe"].penalty == 0


def test_canvas_exports_and_feedback_reach_each_anonymous_student(terms):
    tmp, score, (course, _, _), _ = terms
    from grader.export import parse_maps
    template = tmp / "gradebook.csv"
    template.write_text("Student,ID,SIS User ID,SIS Login ID,Section,Assignment 1 (12345)\n"
                        "    Points Possible,,,,,18.00\n" + "".join(
                            f'"{last}, {first}",{uid},,{sid},A,\n' for sid, first, last, _, uid in
                            (line.split(",") for line in ROSTER.splitlines()[1:])))
    path, written, _ = export(course, tmp / "filled.csv", "canvas", template=template,
                              maps=parse_maps([f'{A1}="Assignment 1 (12345)"']))
    totals = {row[1]: row[5] for row in _rows(path)[2:]}
    assert written == 3 and totals["104"] == totals["105"] == ""
    assert float(totals["101"]) == score and float(totals["102"]) == pytest.approx(0.8 * score)
    zipped, count, notes = feedback_zip(course, A1, "canvas", tmp / "canvas-feedback.zip")
    names = sorted(zipfile.ZipFile(zipped).namelist())
    # Canvas reads the first two all-digit parts: the user id, then the attachment the student submitted
    assert names == [f"student_{uid}_{sid}_{A1}-feedback.html" for uid, sid in ((101, 5001), (102, 5002), (103, 5003))]
    assert count == 3 and notes == []


def test_moodle_teams_grade_each_member_with_the_teams_time_and_their_own_extension(terms):
    _, score, _, (_, intake, graded) = terms
    assert intake.warnings == [] and intake.missing == [] and intake.strangers == []
    assert set(graded) == {"jdoe", "bkim", "alee", "swilson", "jsmith"}
    jane, bo = graded["jdoe"], graded["bkim"]
    assert jane.seconds_late == pytest.approx(30 * 3600, abs=1) and jane.penalty == pytest.approx(0.2 * score)
    assert bo.late is False and bo.penalty == 0, "the worksheet's extension is Bo's own"
    assert any(note.startswith("extension in the LMS: due") for note in bo.notes)
    assert all(graded[s].late is False for s in ("alee", "swilson", "jsmith"))


def test_moodle_feedback_names_each_member_by_their_own_participant_number(terms):
    tmp, _, _, (course, _, _) = terms
    zipped, count, notes = feedback_zip(course, A1, "moodle", tmp / "moodle-feedback.zip")
    names = sorted(zipfile.ZipFile(zipped).namelist())
    # importziplib.php: explode('_', $name, 5); [1] the participant, [2] and [3] the plugin
    assert {name.split("_", 4)[1] for name in names} == {"4711", "4712", "4713", "4714", "4715"}
    assert all(name.split("_", 4)[2:4] == ["assignsubmission", "file"] for name in names)
    assert "Bo Kim_4712_assignsubmission_file_" + f"{A1}-feedback.html" in names
    assert count == 5 and notes == []


def test_the_moodle_export_and_a_drop_after_grading(terms):
    tmp, score, _, (course, _, _) = terms
    path, _, _ = export(course, tmp / "moodle.csv", "moodle", assignment_ids=[A1])
    totals = {row[2]: float(row[3]) for row in _rows(path)[1:]}
    assert totals["jane.doe@uni.example"] == pytest.approx(0.8 * score) and totals["bo.kim@uni.example"] == score
    assert len(totals) == 5
    assert term.extension(course, A1, "bkim", DUE) == 96 * HOUR, "kept for the export and `extension`"
    drop_students(course, ["alee"])
    for fmt in ("long", "wide", "canvas"):
        _, _, notes = export(course, tmp / f"after-drop-{fmt}.csv", fmt)
        assert not any("alee" in note for note in notes), (fmt, notes)
        assert "alee" not in (tmp / f"after-drop-{fmt}.csv").read_text()


def test_a_team_member_without_their_own_row_gets_no_moodle_file(terms):
    """Graded with --groups alone (or before the worksheet was read), a member's only name is the
    team folder's, whose number is the group's id: their page is left out and the note says why.
    (Runs last: it changes the saved outcomes.)"""
    tmp, _, _, (course, _, _) = terms
    outcomes = course.grading_dir / "outcomes" / f"{A1}.json"
    saved = json.loads(outcomes.read_text())
    saved["alee"].update(lms_name="Team Beta_13_assignsubmission_file", lms_records_read=False)
    outcomes.write_text(json.dumps(saved))
    zipped, _, [note] = feedback_zip(course, A1, "moodle", tmp / "without-row.zip")
    assert not any("_13_" in name for name in zipfile.ZipFile(zipped).namelist())
    assert "alee (team Team Beta: Moodle gives a file to the participant its name carries" in note
