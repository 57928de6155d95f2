"""Moodle: {Full Name}_{participantid}_assignsubmission_file[_]/[{folders}/]{original name}.

    Participant_{participantid}_assignsubmission_file[_]/...  (blind marking)
    {Group name}_{groupid}_assignsubmission_file/...  (team submissions; the group's name with _
    made a space; "Default group_assignsubmission_file" for who is in none)
One folder per participant or team, trailing _ before Moodle 4.1, the student's own folders kept
below it; or the same prefix on flat names; the participant id is the assignment's own mapping id,
not the user id (mod/assign/classes/downloader.php). Its feedback zip ("Upload multiple feedback
files in a zip") reads <name>_<participant id>_<plugin type>_<plugin name>_... and gives the file to
that one participant (mod/assign/feedback/file/importziplib.php), so a team member's page carries
their own participant number, never the team folder's group id.

Its class list is the participants download (Participants > select all > Download table data as
CSV: First name, Last name, and the identity fields Email address, ID number, Username:
user/action_redir.php); with its Groups column (the names of the student's groups, ", " between
them) it is also a group set. Its grade import (CSV) takes First name, Last name, Email address and
one assignment's column, and matches rows by the e-mail address."""
import re

from ..csv_cells import is_formula, number
from ..status import Status
from .base import (
    SAFE_ID,
    CsvForm,
    Found,
    GradesExport,
    LmsFormat,
    anonymous_warning,
    named_id,
    records,
    slug,
    unaddressed,
)

NAME = re.compile(r"(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_(?:file|onlinetext)_?(?P<orig>.*)")
# team submissions of students in no group: mod_assign's string 'defaultteam', with no group id, in
# the downloading user's language (mod/assign/lang/{en,de,fr,es}/assign.php); read as DEFAULT_TEAM
DEFAULT_TEAM = "Default group"
DEFAULT_TEAM_NAMES = (DEFAULT_TEAM, "Standard-Gruppe", "Groupe par défaut", "Grupo por defecto")
DEFAULT_TEAM_FOLDER = re.compile("(?:" + "|".join(map(re.escape, DEFAULT_TEAM_NAMES))
                                  + r")_assignsubmission_(?:file|onlinetext)_?", re.IGNORECASE)


def default_team(name):
    """DEFAULT_TEAM for Moodle's name of the team of students in no group, in any language read; else
    `name` as it is."""
    return DEFAULT_TEAM if name.strip().lower() in (n.lower() for n in DEFAULT_TEAM_NAMES) else name


def read_name(relative, path, assignment_id, zone=None):
    if len(relative.parts) >= 2:        # one folder per participant (or team), the student's own folders below
        match = NAME.fullmatch(relative.parts[0])
        if not match and DEFAULT_TEAM_FOLDER.fullmatch(relative.parts[0]):
            return Found(path, login=DEFAULT_TEAM, name=DEFAULT_TEAM, preset="moodle",
                         inside="/".join(relative.parts[1:-1]))
    elif len(relative.parts) == 1:      # older Moodles: flat names with the same prefix
        match = NAME.fullmatch(relative.name)
        match = match if match and match["orig"] else None
    else:
        match = None
    if not match:
        return None
    return Found(path, login=match["uid"], name=match["name"], preset="moodle", inside="/".join(relative.parts[1:-1]))


def feedback_name(outcome, assignment_id):
    match = NAME.fullmatch(outcome.get("lms_name", ""))
    uid = outcome.get("lms_user_id") or (match["uid"] if match else "")
    if outcome.get("group") and not (match and outcome.get("lms_records_read")):
        return None, (f"team {outcome['group']}: Moodle gives a file to the participant its name carries, and no "
                      "row of the grading worksheet gave theirs; grade with --worksheet")
    if match is None or uid.startswith("anon_"):
        return None, unaddressed(outcome, "moodle", anonymous=uid.startswith("anon_"))
    return f"{match['name']}_{match['uid']}_assignsubmission_file_{assignment_id}-feedback.html", None


def anonymous(submission):
    """Blind marking: Participant_<n>, its records not saying more."""
    return submission.name.lower() in ("participant", "")


def default_id(submission):
    return f"participant_{submission.login}" if anonymous(submission) else named_id(submission)


def anonymous_advice(logins, reach):
    return anonymous_warning(logins, reach, "Moodle's blind marking: Participant ",
                             "reveal the student identities in Moodle (View all submissions > Grading action > Reveal "
                             "student identities), download the grading worksheet again and give it with --worksheet")


def roster_name(student):
    """The full name Moodle writes in a download's names: "Jane Doe"."""
    return student.first_name + student.last_name


def roster_rows(header, rows):
    students = []
    for line, values in records(header, rows):
        email = values.get("email address", "")
        student_id = (values.get("id number") or values.get("username") or email.split("@")[0]
                      or slug(values.get("first name", "") + values.get("last name", "")))
        students.append((line, dict(id=student_id, first_name=values.get("first name", ""),
                                    last_name=values.get("last name", ""), email=email, lms_user_id="")))
    return students


def group_rows(header, rows):
    entries = []
    for _, values in records(header, rows):
        first, last = values.get("first name", ""), values.get("last name", "")
        email = values.get("email address", "")
        keys = tuple(k for k in (values.get("id number", ""), values.get("username", ""), email) if k)
        default = (values.get("id number") or values.get("username") or email.split("@")[0] or slug(first + last))
        for group_name in (g.strip() for g in values.get("groups", "").split(", ")):
            if group_name and group_name.lower() not in ("no groups", "-"):
                entries.append((group_name, dict(key=f"{first} {last}".strip() or default, keys=keys,
                                                 name=f"{first} {last}".strip(),
                                                 names=(slug(first + last), slug(last + first)),
                                                 default_id=SAFE_ID.sub("_", default))))
    return entries


def export_rows(people, names, entries):
    """Moodle's grade import clears a grade for an empty cell and stops at a row it cannot match
    (grade/import/csv/classes/load_data.php): one assignment, and only the rows that have both an
    e-mail address and a grade. An address a spreadsheet would read as a formula is left out too:
    written with the quote that disarms it, it would match nobody (grader/csv_cells.py)."""
    header = ["First name", "Last name", "Email address"] + names
    rows = [[p.first_name, p.last_name, p.email] + [number(entries[(p.id, n)].total) for n in names]
            for p in people if p.email and not is_formula(p.email)
            and all(entries[(p.id, n)].total is not None for n in names)]
    return header, rows


def export_notes(people, names, entries):
    """Who export_rows leaves out, and why, for the instructor."""
    notes = []
    no_email = [p.id for p in people if not p.email]
    if no_email:
        notes.append(f"left out, no e-mail address (Moodle matches rows by it; import a roster with email): "
                     f"{', '.join(no_email)}")
    formula = [p.id for p in people if is_formula(p.email)]
    if formula:
        notes.append(f"left out, an e-mail address a spreadsheet would run as a formula (written safely it would "
                     f"match nobody in Moodle; enter the grade there by hand): {', '.join(formula)}")
    excused = [p.id for p in people if p.email and p.id not in formula
               and any(entries[(p.id, n)].status == Status.EXCUSED for n in names)]
    if excused:
        notes.append(f"left out, excused (Moodle's import has no mark for it; excuse them in Moodle): "
                     f"{', '.join(excused)}")
    no_grade = [p.id for p in people if p.email and p.id not in excused and p.id not in formula
                and any(entries[(p.id, n)].total is None for n in names)]
    if no_grade:
        notes.append(f"left out, no grade to send (an empty cell would clear the grade in Moodle): "
                     f"{', '.join(no_grade)}")
    return notes


FORMAT = LmsFormat(
    "moodle", user="Moodle participant", read_name=read_name, feedback_name=feedback_name,
    roster=CsvForm("Moodle's participants download (First name, Last name, Email address)",
                   matches=lambda header: "first name" in header and "last name" in header, rows=roster_rows),
    groups=CsvForm("Moodle's participants download with its Groups column",
                   matches=lambda header: "first name" in header and "last name" in header and "groups" in header,
                   rows=group_rows),
    export=GradesExport(export_rows, notes=export_notes, one_assignment=True),
    default_id=default_id, roster_name=roster_name, login_is_user=False, anonymous=anonymous,
    anonymous_advice=anonymous_advice, team_folders=True)
