"""The class list: `roster import FILE` stores it in the nbgrader gradebook (its Student table, as
`nbgrader db student import` does), and `course/roster.json` remembers which students it holds.

It reads the class list as the LMS exports it, and says which form it found:
    course     the columns nbgrader takes: id, first_name, last_name, email, lms_user_id (id required)
    canvas     Canvas's gradebook export (Grades > Export): Student ("Doe, Jane"), ID (the user id),
               SIS User ID, SIS Login ID, ..., Section, the assignments; its Points Possible and
               Manual Posting rows skipped (canvas-lms lib/gradebook_exporter.rb)
    moodle     Moodle's participants download (Participants > select all > Download table data as
               CSV): First name, Last name, and the identity fields (Email address, ID number,
               Username) (user/action_redir.php)
with `,` or `;` between the fields, in UTF-8 with or without a byte-order mark. Students keep the
id the course gave them; a student who left is dropped from the roster (`roster drop`, or
`roster import --replace`), which takes them out of every export while their grades stay in the
gradebook.

With a roster, every submission must map to a roster id (identify.py) and the export has one row
per roster student; without one, the students are whoever submitted."""
import datetime
import re
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from . import store
from .lms_records import csv_rows, read_text

COLUMNS = ("id", "first_name", "last_name", "email", "lms_user_id")


class RosterError(ValueError):
    pass


@dataclass
class RosterStudent:
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""

    @classmethod
    def from_gradebook(cls, student):
        """From nbgrader's Student record (its empty fields are None)."""
        return cls(student.id, student.first_name or "", student.last_name or "", student.email or "",
                   student.lms_user_id or "")

    @property
    def display(self):
        return " ".join(p for p in (self.first_name, self.last_name) if p) or self.id


def read_roster_csv(path):
    """(the roster's students, the form it was read as: course, canvas or moodle); RosterError
    saying which row and column is wrong."""
    path = Path(path)
    rows = csv_rows(read_text(path, RosterError))
    header = [cell.strip() for cell in rows[0]] if rows else []
    lowered = [cell.lower() for cell in header]
    if "id" in lowered and "student" not in lowered:
        form, students = "course", _course_rows(path, lowered, rows[1:])
    elif len(header) > 1 and "student" in lowered[0] and lowered[1] == "id":
        form, students = "canvas", _canvas_rows(lowered, rows[1:])
    elif "first name" in lowered and "last name" in lowered:
        form, students = "moodle", _moodle_rows(lowered, rows[1:])
    else:
        raise RosterError(f"{path}: not a class list this course reads: its first row should name the columns "
                          f"{', '.join(COLUMNS)} (only id is required), or be Canvas's gradebook export (Student, "
                          f"ID, ...) or Moodle's participants download (First name, Last name, Email address); "
                          f"found {header or 'nothing'}")
    seen = {}
    for line, student in students:
        if not student.id:
            raise RosterError(f"{path}, line {line}: the id is empty")
        if student.id in seen:
            raise RosterError(f"{path}, line {line}: id {student.id!r} is already on line {seen[student.id]}")
        seen[student.id] = line
    if not students:
        raise RosterError(f"{path}: no students in the file")
    return [student for _, student in students], form


def _course_rows(path, header, rows):
    unknown = [h for h in header if h and h not in COLUMNS]
    if unknown:
        raise RosterError(f"{path}: unknown column(s) {', '.join(unknown)}; the roster takes "
                          f"{', '.join(COLUMNS)} (only id is required)")
    return [(line, RosterStudent(**{c: values.get(c, "") for c in COLUMNS}))
            for line, values in _records(header, rows)]


def _canvas_rows(header, rows):
    students = []
    for line, values in _records(header, rows):
        name = values.get("student", "")
        if "points possible" in name.lower() or not values.get("id", "").isdigit() or name == "Student, Test":
            continue        # the Points Possible and Manual Posting rows; Canvas's own test student
        last, _, first = name.partition(",")
        login = values.get("sis login id") or values.get("sis user id")
        student_id = login or f"{_slug(last + first)}_{values['id']}"      # as default_id names them
        students.append((line, RosterStudent(student_id, first.strip(), last.strip(), "", values["id"])))
    return students


def _moodle_rows(header, rows):
    students = []
    for line, values in _records(header, rows):
        email = values.get("email address", "")
        student_id = (values.get("id number") or values.get("username") or email.split("@")[0]
                      or _slug(values.get("first name", "") + values.get("last name", "")))
        students.append((line, RosterStudent(student_id, values.get("first name", ""), values.get("last name", ""),
                                             email, "")))
    return students


def _records(header, rows):
    """(line number, {lowered column: stripped value}) of the non-empty data rows."""
    for line, row in enumerate(rows, start=2):
        values = {h: (v or "").strip() for h, v in zip(header, row) if h}
        if any(values.values()):
            yield line, values


def _slug(text):
    return re.sub(r"[^a-z0-9]", "", text.lower())


def import_roster(course, path, replace=False):
    """Add or update every student of the file in the gradebook; with `replace`, the roster is
    exactly the file's students (who left is dropped). Returns (added, updated, form read, ids
    dropped)."""
    from nbgrader.api import MissingEntry

    students, form = read_roster_csv(path)
    course.grading_dir.mkdir(parents=True, exist_ok=True)
    added = updated = 0
    with warnings.catch_warnings(), store.gradebook(course.db_url) as gb:
        warnings.simplefilter("ignore")
        for student in students:
            fields = {k: v or None for k, v in asdict(student).items() if k != "id"}
            try:
                gb.find_student(student.id)
                updated += 1
            except MissingEntry:
                added += 1
            gb.update_or_create_student(student.id, **fields)
    known = set(roster_ids(course) or [])
    ids = {s.id for s in students}
    dropped = sorted(known - ids) if replace else []
    _write_roster(course, (ids if replace else known | ids), source=path)
    return added, updated, form, dropped


def drop_students(course, ids):
    """Take students off the roster (their grades stay in the gradebook); RosterError for an id the
    roster does not have."""
    known = roster_ids(course)
    if known is None:
        raise RosterError("no roster imported yet: python -m grader roster import FILE.csv")
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise RosterError(f"not on the roster: {', '.join(unknown)} (`python -m grader roster show` lists it)")
    _write_roster(course, set(known) - set(ids))


def _write_roster(course, ids, source=None):
    previous = store.load_roster_record(course) or {}
    record = {"source": str(Path(source).resolve()) if source else previous.get("source"),
              "updated_at": datetime.datetime.now().isoformat(timespec="seconds"), "students": sorted(ids)}
    store.save_roster_record(course, record)


def roster_ids(course):
    record = store.load_roster_record(course)
    return None if record is None else record["students"]


def load_roster(course):
    """The roster students (from the gradebook), or None when no roster was imported."""
    from nbgrader.api import MissingEntry
    ids = roster_ids(course)
    if ids is None:
        return None
    students = []
    with warnings.catch_warnings(), store.gradebook(course.db_url) as gb:
        warnings.simplefilter("ignore")
        for student_id in ids:
            try:
                found = gb.find_student(student_id)
            except MissingEntry:
                continue
            students.append(RosterStudent.from_gradebook(found))
    return students


def format_roster(students):
    rows = [COLUMNS] + [tuple(getattr(s, c) for c in COLUMNS) for s in students]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(r[i].ljust(widths[i]) for i in range(len(COLUMNS))).rstrip() for r in rows)
