"""What an LMS records beside a submissions download, read from the file the instructor downloads
with it: when each student submitted, whether the LMS counted it late, and (Moodle) who a
participant is. A download's own file times are never used (grader/lms.py says why).

    --times FILE      Canvas's submissions API, saved as JSON: GET /api/v1/courses/:course/
                      assignments/:assignment/submissions (a list of Submission objects: user_id,
                      submitted_at in ISO 8601, late, and anonymous_id under anonymous grading);
                      or a CSV with the columns `student` (as the download names them: Canvas user
                      id, Moodle participant number, Blackboard username, a folder's name) and
                      `submitted_at`, optionally `late`.
    --worksheet FILE  Moodle's grading worksheet (Assignment > View all submissions > Download
                      grading worksheet, assignfeedback_offline): `Identifier` ("Participant 123",
                      the number in the download's folder names), `Full name`, `Email address`,
                      `Last modified (submission)` ("Thursday, 1 October 2026, 11:59 PM" in the
                      downloading user's time zone, "-" when nothing was submitted).

Times without an offset are read in --lms-timezone (an IANA name such as Europe/Berlin), else in
this machine's zone.
"""
import csv
import datetime
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from .lms import parse_time


@dataclass
class LmsRecord:
    """One student's row of what the LMS records, under the key the download names them by."""
    key: str
    submitted_at: datetime.datetime | None = None   # aware UTC; None when nothing was submitted
    late: bool | None = None                        # the LMS's own verdict, where it gives one
    name: str = ""
    email: str = ""


class LmsRecordError(ValueError):
    """A records file that cannot be read; the message names the file, the row and what was expected."""


def read_times(path, zone=None):
    """{key: LmsRecord} from Canvas's submissions JSON or a `student,submitted_at` CSV."""
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


def read_worksheet(path, zone=None):
    """{participant number: LmsRecord} from Moodle's grading worksheet."""
    path = Path(path)
    rows = csv_rows(read_text(path))
    header = [name.strip() for name in rows[0]] if rows else []
    lowered = [name.lower() for name in header]
    if "identifier" not in lowered:
        raise LmsRecordError(f"{path}: not a Moodle grading worksheet: its first row should name the columns "
                             f"Identifier, Full name, Email address, ..., Last modified (submission); found {header}")
    column = {"identifier": lowered.index("identifier")}
    for wanted, test in (("name", lambda h: h == "full name"), ("email", lambda h: "email" in h),
                         ("submitted", lambda h: h.startswith("last modified (submission"))):
        column[wanted] = next((i for i, h in enumerate(lowered) if test(h)), None)
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
        records[match.group(1)] = LmsRecord(match.group(1), _time(path, number, when, zone) if when not in ("", "-")
                                            else None, name=cell("name"), email=cell("email"))
    return records


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
        record = LmsRecord(str(item["user_id"]), _time(path, index, when, zone) if when else None,
                           late=item.get("late"))
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
