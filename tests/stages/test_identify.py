"""identify: each submission to one roster student -- by LMS user id, id, e-mail or its local part,
and for Canvas and Moodle by name when no id matches; strangers reported and never graded; roster
students without a submission (now or in an earlier download) listed as missing; without a roster,
ids stable across assignments."""
import pytest

from grader.roster import RosterStudent, import_roster
from grader.stages.identify import default_id, identify, match_roster
from grader.submission import Intake, Status, Submission
from support.grading import A1, open_batch

ROSTER = [RosterStudent("jdoe", "Jane", "Doe", "jane.doe@uni.example", "101"),
          RosterStudent("bkim", "Bo", "Kim", "bo.kim@uni.example", ""),
          RosterStudent("swilson", "Sam", "Wilson", "sam.wilson@uni.example", "103")]


def sent(login, name="", preset="canvas", when=None):
    return Submission(login, None, login=login, name=name, preset=preset, submitted_at=when)


def test_by_lms_id_email_or_name():
    submissions, strangers, missing = match_roster(
        [sent("101", "doejane"), sent("555", "kimbo"), sent("bo.kim", preset="blackboard"), sent("777", "nobody")],
        ROSTER)
    assert sorted(s.student for s in submissions) == ["bkim", "jdoe"]       # bkim twice: one kept
    [stranger] = strangers
    assert stranger.status == Status.NOT_ON_ROSTER and "add them to the roster" in stranger.reason
    assert "777" in stranger.student and "nobody" in stranger.student
    assert [s.id for s in missing] == ["swilson"]


def test_two_logins_of_one_student_keep_the_later(tmp_path):
    import datetime
    early = datetime.datetime(2026, 10, 1, tzinfo=datetime.timezone.utc)
    late = early + datetime.timedelta(hours=1)
    submissions, _, _ = match_roster([sent("101", "doejane", when=early),
                                      sent("jane.doe@uni.example", preset="blackboard", when=late)], ROSTER)
    [jane] = submissions
    assert jane.submitted_at == late and any("also submitted as" in note for note in jane.notes)


def test_a_name_two_roster_students_share_is_not_guessed():
    twins = ROSTER + [RosterStudent("jdoe2", "Jane", "Doe", "", "")]
    _, [stranger], _ = match_roster([sent("555", "doejane")], twins)
    assert "matches several roster students (jdoe, jdoe2)" in stranger.reason


def test_without_a_roster_ids_are_stable_across_assignments():
    canvas, moodle = sent("101", "doejane"), sent("101", "Jane Doe", preset="moodle")
    assert default_id(canvas) == "doejane_101" and default_id(moodle) == "janedoe_101"
    assert default_id(sent("jdoe", preset="folder")) == "jdoe"
    submissions, strangers, missing = match_roster([canvas], None)
    assert submissions[0].student == "doejane_101" and strangers == missing == []


@pytest.mark.parametrize("graded_before", [False, True])
def test_missing_means_nothing_graded_for_the_assignment(course, tmp_path, graded_before):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,lms_user_id\njdoe,Jane,Doe,101\nswilson,Sam,Wilson,103\n")
    with open_batch(course, tmp_path) as batch:
        import_roster(batch.course, roster)
        if graded_before:   # swilson was graded from an earlier download of this assignment
            from grader import store
            from grader.release import generate_release
            generate_release(batch.course, A1, tmp_path / "release")
            with store.gradebook(batch.course_db) as gb:
                gb.update_or_create_submission(A1, "swilson")
        intake = identify(Intake(tmp_path, submissions=[sent("101", "doejane")]), batch)
    assert [s.student for s in intake.submissions] == ["jdoe"]
    if graded_before:
        assert intake.missing == []
    else:
        [swilson] = intake.missing
        assert swilson.student == "swilson" and swilson.status == Status.MISSING
        assert swilson.reason == "Sam Wilson: no submission"


def test_a_moodle_participant_number_is_never_taken_for_a_user_id():
    """Moodle's number is the assignment's own mapping id: participant 103 is not Sam (user 103)."""
    jane = sent("103", "Jane Doe", preset="moodle")
    [matched], strangers, _ = match_roster([jane], ROSTER)
    assert matched.student == "jdoe" and strangers == []
    by_email = Submission("4711", None, login="4711", name="J. Doe", preset="moodle", email="JANE.DOE@uni.example")
    [matched], _, _ = match_roster([by_email], ROSTER)
    assert matched.student == "jdoe", "the worksheet's e-mail, matched whatever its case"


def test_anonymous_submissions_are_graded_under_the_lms_id_and_nobody_is_called_missing():
    anonymous = [sent("anon_acJ4Q", preset="canvas"), sent("4711", "Participant", preset="moodle")]
    submissions, strangers, missing = match_roster(anonymous, ROSTER)
    assert sorted(s.student for s in submissions) == ["anon_acJ4Q", "participant_4711"]
    assert all("anonymous in the LMS" in " ".join(s.notes) for s in submissions)
    assert strangers == [] and missing == [], "under anonymous grading nobody can tell who has not submitted"


def test_an_anonymous_canvas_name_with_its_user_id_reaches_the_roster():
    """The admin's submissions JSON pairs anonymous_id with user_id (collect sets lms_user_id): the
    anonymous file is the roster student whose lms_user_id it is, and the others are missing again."""
    paired = Submission("anon_acJ4Q", None, login="anon_acJ4Q", preset="canvas", lms_user_id="101")
    [jane], strangers, missing = match_roster([paired], ROSTER)
    assert jane.student == "jdoe" and strangers == []
    assert [s.id for s in missing] == ["bkim", "swilson"]
    stranger = Submission("anon_zz9", None, login="anon_zz9", preset="canvas", lms_user_id="999")
    _, [unknown], _ = match_roster([stranger], ROSTER)
    assert "(Canvas user 999, anonymous as anon_zz9)" in unknown.student
    assert default_id(Submission("anon_acJ4Q", None, login="anon_acJ4Q", name="Doe, Jane", preset="canvas",
                                 lms_user_id="101")) == "doejane_101", "as the student's non-anonymous files are"


def test_names_nothing_reveals_are_graded_under_the_lms_id_with_the_way_out(course, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,lms_user_id\njdoe,Jane,Doe,101\nswilson,Sam,Wilson,103\n")
    with open_batch(course, tmp_path) as batch:
        import_roster(batch.course, roster)
        intake = identify(Intake(tmp_path, submissions=[sent("anon_acJ4Q"), sent("anon_bbb22"),
                                                        sent("4711", "Participant", preset="moodle")]), batch)
    canvas, moodle = intake.warnings
    assert canvas.startswith("2 submissions are anonymous (Canvas's anonymous grading: anon_acJ4Q, anon_bbb22) "
                             "and graded under the LMS's ids")
    assert moodle.startswith("1 submission is anonymous (Moodle's blind marking: Participant 4711)")
    assert "no export, Canvas gradebook or feedback zip carries them" in canvas
    assert "administrator access" in canvas and "download the submissions again" in canvas
    assert "Reveal student identities" in moodle and "--worksheet" in moodle
