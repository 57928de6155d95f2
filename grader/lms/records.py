"""What an LMS records beside a submissions download, read from the file the instructor downloads
with it: when each student submitted, whether the LMS counted it late, and (Moodle) who a
participant is, which group they submitted with and the extension they were granted. A download's
own file times are never used (grader/lms/ says why).

    --times FILE      Canvas's submissions API, saved as JSON: GET /api/v1/courses/:course/
                      assignments/:assignment/submissions (a list of Submission objects: user_id,
                      submitted_at in ISO 8601, late, anonymous_id when the caller has administrator
                      access, and the user's sortable_name with include[]=user). The API answers a
                      page at a time (per_page is capped, the rest behind the Link header's
                      rel="next"): each page saved is its own FILE, and --times is given once per
                      page. Or a CSV with the columns `student` (as the download names them: Canvas
                      user id, Moodle participant number, Blackboard username, a folder's name) and
                      `submitted_at`, optionally `late`.
    --worksheet FILE  Moodle's grading worksheet (Assignment > View all submissions > Download
                      grading worksheet, assignfeedback_offline; its columns are the grading
                      table's, mod/assign/gradingtable.php): `Identifier` ("Participant 123", the
                      number in the download's folder names), `Full name`, `Email address`,
                      `Status` (" - " between its parts, one of them "Extension granted until:
                      <date>" when the participant has an extension, one "<time> late" when Moodle
                      counted the submission late), `Group` (team submissions: the participant's
                      team), `Last modified (submission)` (the team's submission for a member of a
                      team; "Thursday, 1 October 2026, 11:59 PM" in the downloading user's time zone
                      and language, "-" when nothing was submitted). Its column titles and dates are
                      read in English, German, French and Spanish (Moodle's language packs:
                      mod/assign/lang/<lang>/assign.php, lang/<lang>/moodle.php and langconfig.php's
                      strftimedaydatetime); another language is refused with what to do.

Times without an offset are read in --lms-timezone (an IANA name such as Europe/Berlin), else in
this machine's zone.
"""
import csv
import datetime
import html
import io
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ..times import parse_time


@dataclass
class LmsRecord:
    """One student's row of what the LMS records, under the key the download names them by."""
    key: str
    submitted_at: datetime.datetime | None = None   # aware UTC; None when nothing was submitted
    late: bool | None = None                        # the LMS's own verdict, where it gives one
    name: str = ""
    email: str = ""
    group: str = ""                                 # Moodle team submissions: the participant's team
    extension: datetime.datetime | None = None      # the student's own due date, granted in the LMS (aware)


class LmsRecordError(ValueError):
    """A records file that cannot be read; the message names the file, the row and what was expected."""


def read_times(path, zone=None):
    """{key: LmsRecord} from Canvas's submissions JSON (one page of it) or a `student,submitted_at` CSV."""
    path = Path(path)
    text = read_text(path)
    if text.lstrip().startswith(("[", "{")):
        return _canvas_submissions(path, text, zone)
    rows = csv_rows(text)
    columns = {name.strip().lower(): name for name in rows[0]} if rows else {}
    if "student" not in columns or "submitted_at" not in columns:
        raise LmsRecordError(f"{path}: expected Canvas's submissions JSON, or a CSV whose first row names the "
                             f"columns `student` and `submitted_at` (found {list(columns) or 'nothing'})")
    records = {}
    for number, row in enumerate(rows[1:], start=2):
        values = {name.strip().lower(): (value or "").strip() for name, value in zip(rows[0], row)}
        if not values.get("student"):
            continue
        when = values.get("submitted_at", "")
        late = values.get("late", "").lower()
        records[values["student"]] = LmsRecord(
            values["student"], _time(path, number, when, zone) if when and when != "-" else None,
            late=True if late in ("true", "yes", "1") else False if late in ("false", "no", "0") else None)
    return records


# The worksheet's column titles as Moodle writes them in each language read here (the grading
# table's headers: mod/assign/lang/<lang>/assign.php recordid, status, submissionteam,
# lastmodifiedsubmission; lang/<lang>/moodle.php fullname), lowercased. The e-mail column is the
# user field's name (Email address, E-Mail-Adresse, Adresse de courriel, Dirección de correo).
WORKSHEET_COLUMNS = {
    "identifier": ("identifier", "id", "identifiant", "identificador"),
    "name": ("full name", "vollständiger name", "nom complet", "nombre completo"),
    "status": ("status", "statut", "estado", "estatus"),
    "group": ("group", "gruppe", "groupe", "grupo"),
    "submitted": ("last modified (submission)", "zuletzt geändert (abgabe)", "dernière modification (travail remis)",
                  "última modificación (entrega)"),
}
_EMAIL_TITLES = ("mail", "courriel", "correo")
WORKSHEET_LANGUAGES = "English, German, French or Spanish"


def read_worksheet(path, zone=None):
    """{participant number: LmsRecord} from Moodle's grading worksheet, in any language it reads."""
    path = Path(path)
    rows = csv_rows(read_text(path))
    header = [name.strip() for name in rows[0]] if rows else []
    titles = [unicodedata.normalize("NFC", name).lower() for name in header]
    column = {wanted: next((i for i, title in enumerate(titles) if title in names), None)
              for wanted, names in WORKSHEET_COLUMNS.items()}
    column["email"] = next((i for i, title in enumerate(titles) if any(word in title for word in _EMAIL_TITLES)),
                           None)
    if column["identifier"] is None or column["submitted"] is None:
        raise LmsRecordError(
            f"{path}: not a Moodle grading worksheet this course reads: its first row should name the columns "
            f"Identifier, Full name, Email address, Status, ..., Last modified (submission), as Moodle writes them "
            f"in {WORKSHEET_LANGUAGES}; found {header}. A worksheet in another language: switch your Moodle "
            "language to English (user menu > Language), download the worksheet again, and switch back")
    records = {}
    for number, row in enumerate(rows[1:], start=2):
        if len(row) <= column["identifier"]:
            continue
        match = re.search(r"(\d+)\s*$", row[column["identifier"]])
        if not match:
            continue

        def cell(name):
            return row[column[name]].strip() if column[name] is not None and column[name] < len(row) else ""
        when = cell("submitted")
        late, extension = _status(path, number, cell("status"), zone)
        records[match.group(1)] = LmsRecord(
            match.group(1), _time(path, number, english_date(when), zone) if when not in ("", "-") else None,
            late=late, name=cell("name"), email=cell("email"), group=cell("group"), extension=extension)
    return records


# Moodle's dates (userdate with langconfig's strftimedaydatetime): "Thursday, 1 October 2026, 11:59 PM",
# "Donnerstag, 1. Oktober 2026, 23:59", "jeudi 1 octobre 2026, 23:59", "jueves, 1 de octubre de 2026, 23:59"
_MONTHS = {
    "januar": "January", "jänner": "January", "februar": "February", "märz": "March", "mai": "May", "juni": "June",
    "juli": "July", "oktober": "October", "dezember": "December",
    "janvier": "January", "février": "February", "mars": "March", "avril": "April", "juin": "June",
    "juillet": "July", "août": "August", "septembre": "September", "octobre": "October", "novembre": "November",
    "décembre": "December",
    "enero": "January", "febrero": "February", "marzo": "March", "abril": "April", "mayo": "May", "junio": "June",
    "julio": "July", "agosto": "August", "septiembre": "September", "setiembre": "September", "octubre": "October",
    "noviembre": "November", "diciembre": "December",
}
_ENGLISH_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
                   "october", "november", "december")
_JOINERS = ("de", "del", "à", "um")
_LMS_DATE = re.compile(r"\d{1,2} (?:" + "|".join(_ENGLISH_MONTHS) + r") \d{4}\b", re.IGNORECASE)
# Moodle's "<time> late" part of a status (submittedlateshort in en, de, fr, es)
_LATE = re.compile(r"\blate\b|zu spät|\bspäter\b|\bretard\b|\bdespués\b|\btarde\b", re.IGNORECASE)


def english_date(text):
    """A Moodle date in English, German, French or Spanish as dateutil reads it: the weekday and the
    joining words dropped, the month in English ("1 October 2026, 23:59")."""
    text = html.unescape(text).replace("\xa0", " ").strip()
    first_digit = re.search(r"\d", text)
    if first_digit is None:
        return text
    words = re.sub(r"^(\d{1,2})\.", r"\1", text[first_digit.start():]).split()
    kept = [_MONTHS.get(word.lower(), word) for word in words if word.lower() not in _JOINERS]
    return " ".join(kept)


def _status(path, line, text, zone):
    """(late by Moodle's own count or None, the extension's due date or None) from the worksheet's
    Status cell: its parts joined by " - "; the extension's part is "<words>: <a date>" (the only part
    holding a date), the late one "<time> late"."""
    late, extension = None, None
    for part in html.unescape(text).replace("\xa0", " ").split(" - "):
        _, colon, rest = part.partition(": ")
        when = english_date(rest) if colon else ""
        if when and _LMS_DATE.match(when):
            extension = _time(path, line, when, zone)
        elif _LATE.search(part) and re.search(r"\d", part):
            late = True
    return late, extension


def _canvas_submissions(path, text, zone):
    try:
        data = json.loads(text)
    except ValueError as error:
        raise LmsRecordError(f"{path}: not valid JSON ({error})") from error
    if isinstance(data, dict):
        data = data.get("submissions", [])
    if not isinstance(data, list):
        raise LmsRecordError(f"{path}: expected a list of Canvas submission objects")
    records = {}
    for index, item in enumerate(data):
        if not isinstance(item, dict) or "user_id" not in item:
            raise LmsRecordError(f"{path}: item {index} is not a Canvas submission (no user_id)")
        when = item.get("submitted_at")
        user = item.get("user") if isinstance(item.get("user"), dict) else {}
        record = LmsRecord(str(item["user_id"]), _time(path, index, when, zone) if when else None,
                           late=item.get("late"), name=str(user.get("sortable_name") or ""))
        records[record.key] = record
        if item.get("anonymous_id"):          # the key anonymous grading's file names carry
            records[f"anon_{item['anonymous_id']}"] = record
    return records


def _time(path, where, text, zone):
    try:
        return parse_time(text, zone)
    except ValueError as error:
        raise LmsRecordError(f"{path}, row {where}: {error}") from error


def read_text(path, error=LmsRecordError):
    """A file an LMS (or a spreadsheet re-saving it) wrote: UTF-8 with or without a byte-order mark,
    else Windows-1252."""
    path = Path(path)
    if not path.is_file():
        raise error(f"no such file: {path}")
    raw = path.read_bytes()
    for encoding in ("utf-8-sig", "cp1252"):       # an LMS's export, or a spreadsheet's re-save of it
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise error(f"{path}: neither UTF-8 nor Windows-1252 text")


def csv_rows(text):
    """The non-empty rows of a CSV written with `,` or `;` (as a spreadsheet in many locales saves it)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    delimiter = ";" if first.count(";") > first.count(",") else ","
    return [row for row in csv.reader(io.StringIO(text), delimiter=delimiter) if any(cell.strip() for cell in row)]
