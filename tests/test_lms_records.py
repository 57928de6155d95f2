"""What an LMS records beside a download (grader/lms/records.py), read from files written as the
LMS writes them: Canvas's submissions API (its Submission object, from the API's documentation:
app/controllers/submissions_api_controller.rb) and Moodle's grading worksheet (its columns from
mod/assign/feedback/offline and assign_grading_table: Identifier "Participant <n>", the date by
userdate's default format, "-" without a submission)."""
import datetime
import json

import pytest

from grader.lms.records import LmsRecordError, read_times, read_worksheet

UTC = datetime.timezone.utc

# Canvas: GET /api/v1/courses/:course_id/assignments/:assignment_id/submissions (admin: anonymous_id)
CANVAS_SUBMISSIONS = [
    {"id": 9001, "user_id": 101, "assignment_id": 12345, "attempt": 2, "workflow_state": "submitted",
     "submitted_at": "2026-10-01T21:15:00Z", "late": False, "seconds_late": 0, "missing": False,
     "excused": False, "late_policy_status": None, "anonymous_id": "acJ4Q"},
    {"id": 9002, "user_id": 102, "assignment_id": 12345, "attempt": 1, "workflow_state": "submitted",
     "submitted_at": "2026-10-03T05:59:00Z", "late": True, "seconds_late": 108000, "missing": False},
    {"id": 9003, "user_id": 103, "assignment_id": 12345, "attempt": None, "workflow_state": "unsubmitted",
     "submitted_at": None, "late": False, "missing": True},
]

# Moodle: Assignment > View all submissions > Download grading worksheet (English strings)
WORKSHEET = "\ufeff" + "\n".join([
    'Identifier,"Full name","Email address",Status,Grade,"Maximum grade","Grade can be changed",'
    '"Last modified (submission)","Last modified (grade)","Feedback comments"',
    '"Participant 4711","Jane Doe",Jane.Doe@uni.example,"Submitted for grading",,100.00,Yes,'
    '"Thursday, 1 October 2026, 10:15 PM","Friday, 2 October 2026, 9:00 AM",',
    '"Participant 4712","John Smith",john.smith@uni.example,"Submitted for grading",,100.00,Yes,'
    '"Saturday, 3 October 2026, 7:59 AM",-,',
    '"Participant 4713","Sam Wilson",sam.wilson@uni.example,"No submission",,100.00,Yes,-,-,',
]) + "\n"


def test_canvas_submissions_json(tmp_path):
    path = tmp_path / "submissions.json"
    path.write_text(json.dumps(CANVAS_SUBMISSIONS))
    records = read_times(path)
    assert records["101"].submitted_at == datetime.datetime(2026, 10, 1, 21, 15, tzinfo=UTC)
    assert records["101"].late is False and records["102"].late is True
    assert records["103"].submitted_at is None, "unsubmitted: no time"
    assert records["anon_acJ4Q"] is records["101"], "anonymous grading's file names find the same record"


def test_a_csv_of_times_with_a_semicolon_and_the_lms_zone(tmp_path):
    path = tmp_path / "times.csv"
    path.write_text("Student;Submitted_At;late\njdoe;2026-10-01 23:15;no\njsmith;2026-10-03 07:59;yes\nbkim;-;\n",
                    encoding="utf-8-sig")
    records = read_times(path, "Europe/Berlin")
    assert records["jdoe"].submitted_at == datetime.datetime(2026, 10, 1, 21, 15, tzinfo=UTC)
    assert (records["jsmith"].late, records["jdoe"].late, records["bkim"].submitted_at) == (True, False, None)


def test_moodle_grading_worksheet(tmp_path):
    path = tmp_path / "worksheet.csv"
    path.write_text(WORKSHEET, encoding="utf-8")
    records = read_worksheet(path, "Europe/Berlin")
    jane = records["4711"]
    assert (jane.name, jane.email) == ("Jane Doe", "Jane.Doe@uni.example")
    assert jane.submitted_at == datetime.datetime(2026, 10, 1, 20, 15, tzinfo=UTC)
    assert records["4713"].submitted_at is None, "'-': nothing submitted"


@pytest.mark.parametrize("reader, text, says", [
    (read_times, "name,when\nx,y\n", "columns `student` and `submitted_at`"),
    (read_times, '[{"id": 1}]', "item 0 is not a Canvas submission"),
    (read_times, "student,submitted_at\njdoe,next tuesday\n", "row 2: cannot read 'next tuesday'"),
    (read_worksheet, "Student,Grade\njdoe,3\n", "not a Moodle grading worksheet"),
])
def test_a_file_that_is_not_what_was_asked_for_says_so(tmp_path, reader, text, says):
    path = tmp_path / "records.csv"
    path.write_text(text)
    with pytest.raises(LmsRecordError, match=says):
        reader(path)
    with pytest.raises(LmsRecordError, match="no such file"):
        reader(tmp_path / "absent.csv")


# ---- the worksheet's Status and Group columns, and its languages ----

# English, team submissions with an extension: the grading table's columns as the worksheet writes them
# (mod/assign/gradingtable.php: recordid, fullname, email, status, team, grade, grademax,
# gradecanbechanged, timesubmitted, timemarked, then the feedback plugins); col_status joins its parts
# with " - " (strip_tags of its </div>s): the submission status, "<format_time> late" counted from the
# student's own due date, and get_string('userextensiondate') with userdate() of the extension
TEAM_WORKSHEET = "\n".join([
    'Identifier,"Full name","Email address",Status,Group,Grade,"Maximum grade","Grade can be changed",'
    '"Last modified (submission)","Last modified (grade)","Feedback comments"',
    '"Participant 4711","Jane Doe",jane.doe@uni.example,"Submitted for grading - 1 day 6 hours late",'
    '"Team Alpha",,100.00,Yes,"Saturday, 3 October 2026, 5:59 AM",-,',
    '"Participant 4712","Bo Kim",bo.kim@uni.example,"Submitted for grading - Extension granted until: Monday, '
    '5 October 2026, 11:59 PM","Team Alpha",,100.00,Yes,"Saturday, 3 October 2026, 5:59 AM",-,',
    '"Participant 4713","Sam Wilson",sam.wilson@uni.example,"No submission","Default group",,100.00,Yes,-,-,',
]) + "\n"


def test_the_worksheet_reads_late_extensions_and_teams(tmp_path):
    path = tmp_path / "worksheet.csv"
    path.write_text(TEAM_WORKSHEET)
    records = read_worksheet(path, "UTC")
    jane, bo = records["4711"], records["4712"]
    assert (jane.late, jane.extension, jane.group) == (True, None, "Team Alpha")
    assert bo.late is None and bo.extension == datetime.datetime(2026, 10, 5, 23, 59, tzinfo=UTC)
    assert jane.submitted_at == bo.submitted_at, "a member's row holds the team's submission time"
    assert records["4713"].group == "Default group"


# The same worksheet as Moodle writes it for a user whose language is German, French or Spanish: the
# titles from mod/assign/lang/<lang>/assign.php (recordid, status, submissionteam,
# lastmodifiedsubmission) and lang/<lang>/moodle.php (fullname), the identifier get_string('hiddenuser')
# followed by the number, dates by langconfig's strftimedaydatetime ('%A, %d. %B %Y, %H:%M';
# '%A %d %B %Y, %H:%M'; '%A, %d de %B de %Y, %H:%M'), the extension by userextensiondate (the French
# string holds &nbsp; before its colon).
LANGUAGES = {
    "de": ('ID,"Vollständiger Name","E-Mail-Adresse",Status,Gruppe,Bewertung,"Zuletzt geändert (Abgabe)"',
           '"Teilnehmer/in4711","Jane Doe",jane.doe@uni.example,"Zur Bewertung abgegeben - Verlängertes Abgabeende '
           'bis: Samstag, 3. Oktober 2026, 23:59",Standard-Gruppe,,"Donnerstag, 1. Oktober 2026, 23:15"'),
    "fr": ('Identifiant,"Nom complet","Adresse de courriel",Statut,Groupe,Note,'
           '"Dernière modification (travail remis)"',
           '"Participant4711","Jane Doe",jane.doe@uni.example,"Remis pour évaluation - Prolongation accordée '
           'jusqu\'au&nbsp;: samedi 3 octobre 2026, 23:59","Groupe par défaut",,"jeudi 1 octobre 2026, 23:15"'),
    "es": ('Identificador,"Nombre completo","Dirección de correo",Estado,Grupo,Calificación,'
           '"Última modificación (entrega)"',
           '"Participante4711","Jane Doe",jane.doe@uni.example,"Enviado para calificar - Plazo ampliado hasta: '
           'sábado, 3 de octubre de 2026, 23:59","Grupo por defecto",,"jueves, 1 de octubre de 2026, 23:15"'),
}


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_a_worksheet_in_german_french_or_spanish_is_read(tmp_path, language):
    from grader.lms import default_team
    path = tmp_path / "worksheet.csv"
    path.write_text("\n".join(LANGUAGES[language]) + "\n", encoding="utf-8")
    [(key, jane)] = read_worksheet(path, "Europe/Berlin").items()
    assert (key, jane.name, jane.email) == ("4711", "Jane Doe", "jane.doe@uni.example")
    assert jane.submitted_at == datetime.datetime(2026, 10, 1, 21, 15, tzinfo=UTC)
    assert jane.extension == datetime.datetime(2026, 10, 3, 21, 59, tzinfo=UTC)
    assert default_team(jane.group) == "Default group"


def test_a_worksheet_in_another_language_says_how_to_get_one_read(tmp_path):
    """Italian (mod/assign/lang/it: recordid 'Identificativo', lastmodifiedsubmission 'Ultima modifica
    (consegna)') is not read: the message says which languages are, and how to download in English."""
    path = tmp_path / "worksheet.csv"
    path.write_text('Identificativo,"Nome completo",Stato,"Ultima modifica (consegna)"\n'
                    '"Partecipante 4711","Jane Doe","Consegnato","giovedì, 1 ottobre 2026, 23:15"\n')
    with pytest.raises(LmsRecordError, match="English, German, French or Spanish.*switch your Moodle language to "
                                             "English"):
        read_worksheet(path)


def test_canvas_json_with_the_users_sortable_name(tmp_path):
    """include[]=user adds the User object (its sortable_name) to each submission: the name an
    anonymous file lacks."""
    path = tmp_path / "page1.json"
    path.write_text(json.dumps([{"user_id": 101, "anonymous_id": "acJ4Q", "submitted_at": "2026-10-01T21:15:00Z",
                                 "late": False, "user": {"id": 101, "sortable_name": "Doe, Jane"}}]))
    records = read_times(path)
    assert records["anon_acJ4Q"].key == "101" and records["anon_acJ4Q"].name == "Doe, Jane"
